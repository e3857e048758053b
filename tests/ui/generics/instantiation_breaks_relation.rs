// A relation between const generics (embed_dim divisible by num_heads) is
// checked for each instantiation; `cargo check` reports a bad one with the
// values, at the rule and at the field that instantiates it.
tapir::model! {
    pub struct Encoder<const E: usize, const H: usize> {
        attn: MultiheadAttention<E, H, batch_first = true>,
    }
    fn forward(&self, x: [B, T, E]) -> [B, T, E] {
        let (y, _) = self.attn(x, x, x);
        y
    }
}

tapir::model! {
    pub struct Outer {
        enc: Encoder<64, 5>,
    }
    fn forward(&self, x: [B, T, 64]) -> [B, T, 64] {
        self.enc(x)
    }
}

fn main() {}
