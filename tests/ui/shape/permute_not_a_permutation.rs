// permute names every dim exactly once.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, T, 4]) -> [B, T, 4] {
        self.fc(x).permute([0, 0, 1])
    }
}

fn main() {}
