// Several inputs and outputs, a non-tensor input, cat and stack.
tapir::model! {
    pub struct TwoTower {
        a: Linear<4, 3>,
        b: Linear<6, 3>,
    }
    fn forward(&self, x: [B, 4], y: [B, 6], scale: f64) -> ([B, 6], [2, B, 3]) {
        let (ha, hb) = (self.a(x) * scale, self.b(y));
        (cat([ha, hb], 1), stack([ha, hb], 0))
    }
}

fn main() {
    let m = TwoTower::new(&tapir::Device::Cpu);
    let (c, s) = m.forward(&tapir::Tensor::zeros(&[5, 4]), &tapir::Tensor::zeros(&[5, 6]), 0.5);
    assert_eq!(c.shape(), &[5, 6]);
    assert_eq!(s.shape(), &[2, 5, 3]);
}
