// The seed's models written with `model!`: a residual block and the MLP.
// Shared by `examples/train_synthetic.rs` and `tests/ui/pass/example_seed.rs`.

tapir::model! {
    /// `x + Seq(Linear(d, d), LayerNorm(d), GELU(), Linear(d, d))(x)`.
    pub struct ResBlock<const D: usize> {
        pub net: Sequential<(Linear<D, D>, LayerNorm<D>, GELU, Linear<D, D>)>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.net(x)
    }
}

tapir::model! {
    /// The seed MLP: a stem, four residual blocks of width 256 and a head.
    pub struct SeedMlp<const IN: usize, const OUT: usize> {
        pub stem: Linear<IN, 256>,
        pub blocks: [ResBlock<256>; 4],
        pub head: Linear<256, OUT>,
    }
    fn forward(&self, x: [B, IN]) -> [B, OUT] {
        let mut h = self.stem(x);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }
}
