// Dims count from 0 (or from the end when negative).
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [4, B] {
        self.fc(x).transpose(0, 2)
    }
}

fn main() {}
