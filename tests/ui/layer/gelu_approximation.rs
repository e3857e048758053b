// GELU's `approximate` is "none" or "tanh", as in PyTorch.
tapir::model! {
    pub struct Net {
        act: GELU<approximate = "fast">,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.act(x)
    }
}

fn main() {}
