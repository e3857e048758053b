// Linear takes in_features, out_features and bias.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2, true, 7>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
