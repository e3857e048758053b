// A Linear takes one tensor.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4], y: [B, 4]) -> [B, 4] {
        self.fc(x, y)
    }
}

fn main() {}
