// squeeze_dim removes a dim of size 1 only.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 3>,
    }
    fn forward(&self, x: [B, 4]) -> [B] {
        self.fc(x).squeeze_dim(1)
    }
}

fn main() {}
