// `forward` declares the shape it returns.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
    fn forward(&self, x: [B, 4]) {
        self.fc(x)
    }
}

fn main() {}
