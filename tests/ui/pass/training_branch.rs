// `if self.is_training()`: both branches agree on the shape.
tapir::model! {
    pub struct Noisy {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        let h = self.fc(x);
        if self.is_training() { h * 0.5 } else { h }
    }
}

fn main() {
    use tapir::nn::Module;
    let m = Noisy::new(&tapir::Device::Cpu);
    let x = tapir::Tensor::ones(&[2, 4]);
    let train = m.forward(&x).to_vec::<f32>();
    m.eval();
    let eval = m.forward(&x).to_vec::<f32>();
    assert!((train[0] * 2.0 - eval[0]).abs() < 1e-6);
}
