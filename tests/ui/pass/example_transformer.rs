// The transformer example models: attention, embeddings, a stack of blocks.
include!("../../../examples/models/transformer.rs");

fn main() {
    let m = CharLm::<65, 32, 4, 2, 16>::new(&tapir::Device::Cpu);
    let ids = tapir::Tensor::zeros(&[3, 8]).to_dtype(tapir::DType::I64);
    let pos = tapir::Tensor::arange(8);
    let y = m.forward(&ids, &pos);
    assert_eq!(y.shape(), &[3, 8, 65]);
}
