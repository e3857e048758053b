// `T` is only known at run time, so `Linear<16, _>` cannot be proved to fit.
tapir::model! {
    pub struct Net {
        fc: Linear<16, 4>,
    }
    fn forward(&self, x: [B, T]) -> [B, 4] {
        self.fc(x)
    }
}

fn main() {}
