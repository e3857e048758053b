// Options use PyTorch's parameter names.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2, bais = false>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
