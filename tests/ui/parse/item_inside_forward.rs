// Helpers live outside the model; `forward` holds statements only.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        fn helper() {}
        self.fc(x)
    }
}

fn main() {}
