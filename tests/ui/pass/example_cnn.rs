// The CNN example model: the macro computes fc1's input size.
include!("../../../examples/models/cnn.rs");

fn main() {
    let m = Cnn::<10>::new(&tapir::Device::Cpu);
    assert_eq!(m.fc1.in_features, 32 * 7 * 7);
    let y = m.forward(&tapir::Tensor::zeros(&[2, 1, 28, 28]));
    assert_eq!(y.shape(), &[2, 10]);
}
