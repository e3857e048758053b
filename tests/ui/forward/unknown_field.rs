// Only the model's own fields can be called.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.head(x)
    }
}

fn main() {}
