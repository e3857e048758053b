// The body's result must have the declared output shape.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 5>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 10] {
        self.fc(x)
    }
}

fn main() {}
