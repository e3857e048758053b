// Attention scores are `q @ kᵀ`: `[B, T, 16] @ [B, T, 16]` has inner dims
// 16 vs T, and the fix is a transpose, not a run-time check.
tapir::model! {
    pub struct Scores {
        q: Linear<32, 16>,
        k: Linear<32, 16>,
    }
    fn forward(&self, x: [B, T, 32]) -> [B, T, T] {
        self.q(x).matmul(self.k(x))
    }
}

fn main() {}
