// `_` is inferred from the first call; a layer never called cannot be inferred.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
        extra: Linear<_, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
