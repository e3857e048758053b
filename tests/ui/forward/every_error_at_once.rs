// All errors of a block are reported in one compile, and the model is still
// defined (as a stub), so code using it reports nothing more.
tapir::model! {
    pub struct Net {
        a: Linear<4, 8>,
        b: Linear<16, 2>,
        c: Linaer<2, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        let h = self.a(x).reshape([B, 3, -1]);
        self.b(self.a(x))
    }
}

fn main() {
    let net = Net::new(&tapir::Device::Cpu);
    let _y: tapir::Tensor = net.forward(&tapir::Tensor::zeros(&[2, 4]));
}
