// A model is a struct of layers followed by its `forward`.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 2>,
    }
}

fn main() {}
