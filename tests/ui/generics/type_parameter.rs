// A model's generic parameters are sizes.
tapir::model! {
    pub struct Net<T> {
        fc: Linear<4, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
