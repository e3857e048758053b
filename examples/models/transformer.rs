// A pre-norm transformer block and a character language model, written with
// `model!` (multi-head self-attention with a causal mask, then an MLP).

tapir::model! {
    /// `x + attn(ln1(x))`, then `x + mlp(ln2(x))`.
    pub struct Block<const E: usize, const H: usize> {
        pub ln1: LayerNorm<E>,
        pub attn: MultiheadAttention<E, H, batch_first = true>,
        pub ln2: LayerNorm<E>,
        pub mlp: Sequential<(Linear<E, { 4 * E }>, GELU, Linear<{ 4 * E }, E>)>,
    }
    fn forward(&self, x: [B, T, E]) -> [B, T, E] {
        let h = self.ln1(x);
        let a = self.attn(h, h, h, need_weights = false, is_causal = true);
        let x = x + a;
        x + self.mlp(self.ln2(x))
    }
}

tapir::model! {
    /// Token and position embeddings, `L` blocks, a final norm and the logits.
    pub struct CharLm<const V: usize, const E: usize, const H: usize, const L: usize, const CTX: usize> {
        pub tok: Embedding<V, E>,
        pub pos: Embedding<CTX, E>,
        pub blocks: [Block<E, H>; L],
        pub ln: LayerNorm<E>,
        pub head: Linear<E, V>,
    }
    fn forward(&self, ids: [B, T], positions: [T]) -> [B, T, V] {
        let mut h = self.tok(ids) + self.pos(positions);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(self.ln(h))
    }
}
