// Multi-head attention splits embed_dim evenly over the heads.
tapir::model! {
    pub struct Net {
        attn: MultiheadAttention<10, 3, batch_first = true>,
    }
    fn forward(&self, x: [B, T, 10]) -> [B, T, 10] {
        let (y, _) = self.attn(x, x, x);
        y
    }
}

fn main() {}
