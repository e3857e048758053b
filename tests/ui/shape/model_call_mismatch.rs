// Calls into another model are checked against its typed signature.
tapir::model! {
    pub struct ResBlock<const D: usize> {
        fc: Linear<D, D>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.fc(x)
    }

    pub struct Net {
        stem: Linear<4, 128>,
        block: ResBlock<256>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 256] {
        self.block(self.stem(x))
    }
}

fn main() {}
