// matmul needs the inner dims to agree: [T, 4] @ [5, T].
tapir::model! {
    pub struct Net {
        q: Linear<8, 4>,
        k: Linear<8, 5>,
    }
    fn forward(&self, x: [T, 8]) -> [T, T] {
        self.q(x).matmul(self.k(x).t())
    }
}

fn main() {}
