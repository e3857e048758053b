// A run-time dim is bound where it first appears on its own.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
    fn forward(&self, x: [B, T * 2]) -> [B, 2] {
        x
    }
}

fn main() {}
