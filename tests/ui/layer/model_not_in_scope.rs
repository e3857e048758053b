// A model used as a layer must come from an earlier `model!` block in scope;
// the macro asks that block's `Encoder!` helper for its signature.
tapir::model! {
    pub struct Net {
        enc: Encoder<4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.enc(x)
    }
}

fn main() {}
