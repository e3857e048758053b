// The one method of a model is called `forward`, as in PyTorch.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
    fn call(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
