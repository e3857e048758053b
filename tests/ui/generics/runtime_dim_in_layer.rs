// Layer sizes are fixed when the model is built: a batch dim cannot be one.
tapir::model! {
    pub struct Net {
        fc: Linear<B, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
