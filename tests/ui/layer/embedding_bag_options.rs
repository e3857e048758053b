// An EmbeddingBag's mode is one of PyTorch's three strings, and options
// tapir does not implement are refused rather than ignored; both errors of
// the block are reported together.
tapir::model! {
    pub struct Net {
        bag: EmbeddingBag<100, 16, mode = "median">,
        sparse: EmbeddingBag<100, 16, sparse = true>,
    }
    fn forward(&self, ids: [N, 8]) -> [N, 16] {
        self.bag(ids)
    }
}

fn main() {}
