// `forward` is a method: it takes `&self` first.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
    fn forward(x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
