// Code the checker cannot follow, with its shape checked at run time; a new
// run-time dim (`K`) is bound from the value.
fn top_half(x: &tapir::Tensor) -> tapir::Tensor {
    x.narrow(1, 0, x.size(1) / 2)
}

tapir::model! {
    pub struct Net {
        fc: Linear<8, 8>,
    }
    fn forward(&self, x: [B, 8]) -> [B, 1] {
        let h = unchecked!(top_half(&self.fc.forward(&x)) => [B, K]);
        h.relu().sum_dim(1, true)
    }
}

fn main() {
    let y = Net::new(&tapir::Device::Cpu).forward(&tapir::Tensor::zeros(&[3, 8]));
    assert_eq!(y.shape(), &[3, 1]);
}
