// The seed MLP example model compiles and runs.
include!("../../../examples/models/seed.rs");

fn main() {
    let m = SeedMlp::<784, 10>::new(&tapir::Device::Cpu);
    let y = m.forward(&tapir::Tensor::zeros(&[2, 784]));
    assert_eq!(y.shape(), &[2, 10]);
}
