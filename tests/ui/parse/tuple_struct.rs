// Layers are named fields: their names become the parameter names.
tapir::model! {
    pub struct Net(Linear<4, 2>);
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        x
    }
}

fn main() {}
