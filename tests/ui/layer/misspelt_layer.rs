// A misspelt layer name gets a suggestion from the layer table.
tapir::model! {
    pub struct Net {
        fc: Liner<4, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(x)
    }
}

fn main() {}
