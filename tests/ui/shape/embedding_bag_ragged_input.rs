// In model! an EmbeddingBag takes one bag per row of a 2-D grid; a flat run
// of ids with offsets goes through `EmbeddingBag::forward_bags` instead.
tapir::model! {
    pub struct Net {
        bag: EmbeddingBag<100, 16, mode = "sum">,
    }
    fn forward(&self, ids: [T]) -> [T, 16] {
        self.bag(ids)
    }
}

fn main() {}
