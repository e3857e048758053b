// Softmax's dim decides the shape rule, so it is written out.
tapir::model! {
    pub struct Net<const D: usize> {
        sm: Softmax<D>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.sm(x)
    }
}

fn main() {}
