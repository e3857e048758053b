// Tensor methods the checker does not know go through `unchecked!`.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.fc(x).fancy_norm()
    }
}

fn main() {}
