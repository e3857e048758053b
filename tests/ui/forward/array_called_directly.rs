// An array of layers is looped over, not called.
tapir::model! {
    pub struct Net {
        blocks: [Linear<4, 4>; 3],
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.blocks(x)
    }
}

fn main() {}
