// cat joins along one dim; the others must agree.
tapir::model! {
    pub struct Net {
        a: Linear<4, 6>,
    }
    fn forward(&self, x: [B, 3, 4]) -> [B, 3, 10] {
        cat([x, self.a(x).transpose(1, 2)], 2)
    }
}

fn main() {}
