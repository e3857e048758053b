// A reshape keeps the number of elements.
tapir::model! {
    pub struct Net {
        fc: Linear<16, 16>,
    }
    fn forward(&self, x: [B, 16]) -> [B, 3, 5] {
        self.fc(x).reshape([B, 3, 5])
    }
}

fn main() {}
