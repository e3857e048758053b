// A dropout probability lies in [0, 1].
tapir::model! {
    pub struct Net {
        drop: Dropout<1.5>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.drop(x)
    }
}

fn main() {}
