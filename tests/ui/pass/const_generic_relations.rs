// Relations the macro cannot decide for every value of the const generics
// become compile-time assertions, checked when the model is instantiated.
tapir::model! {
    pub struct Bridge<const A: usize, const C: usize> {
        a: Linear<A, 8>,
        b: Linear<C, 2>,
    }
    fn forward(&self, x: [B, A]) -> [B, 2] {
        self.b(self.a(x))
    }
}

fn main() {
    let m = Bridge::<4, 8>::new(&tapir::Device::Cpu);
    assert_eq!(m.forward(&tapir::Tensor::zeros(&[1, 4])).shape(), &[1, 2]);
}
