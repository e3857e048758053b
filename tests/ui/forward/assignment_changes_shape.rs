// A variable keeps its shape; a new shape gets a new `let`.
tapir::model! {
    pub struct Net {
        a: Linear<4, 4>,
        up: Linear<4, 8>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 8] {
        let mut h = self.a(x);
        h = self.up(h);
        h
    }
}

fn main() {}
