// Models in one block see each other's signatures, in any order.
tapir::model! {
    pub struct Net {
        enc: Encoder<8, 4>,
        head: Linear<4, 2>,
    }
    fn forward(&self, x: [B, 8]) -> [B, 2] {
        self.head(self.enc(x))
    }

    pub struct Encoder<const I: usize, const O: usize> {
        fc: Linear<I, O>,
    }
    fn forward(&self, x: [B, I]) -> [B, O] {
        self.fc(x).tanh()
    }
}

fn main() {
    let y = Net::new(&tapir::Device::Cpu).forward(&tapir::Tensor::zeros(&[3, 8]));
    assert_eq!(y.shape(), &[3, 2]);
}
