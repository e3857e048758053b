// The example: `head` expects 128 features, the blocks give 256.
use tapir::model;

model! {
    pub struct ResBlock<const D: usize> {
        net: Sequential<(Linear<D, D>, LayerNorm<D>, GELU, Linear<D, D>)>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.net(x)
    }
}

model! {
    pub struct Mlp<const IN: usize, const OUT: usize> {
        stem: Linear<IN, 256>,
        blocks: [ResBlock<256>; 4],
        head: Linear<128, OUT>,
    }
    fn forward(&self, x: [B, IN]) -> [B, OUT] {
        let mut h = self.stem(x);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }
}

fn main() {
    let m = Mlp::<784, 10>::new(&tapir::Device::Cpu);
    let _ = m.forward(&tapir::Tensor::zeros(&[2, 784]));
}
