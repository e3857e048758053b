// Reassignment needs `let mut`, as in Rust.
tapir::model! {
    pub struct Net {
        a: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        let h = self.a(x);
        h = self.a(h);
        h
    }
}

fn main() {}
