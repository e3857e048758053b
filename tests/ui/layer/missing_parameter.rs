// out_features has no default.
tapir::model! {
    pub struct Net {
        fc: Linear<4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
