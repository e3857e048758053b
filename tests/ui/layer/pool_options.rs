// ceil_mode over a run-time size is checked only where no window can start
// in the padding; a model! pool returns no indices.
tapir::model! {
    pub struct Net {
        pool: MaxPool2d<2, stride = 3, ceil_mode = true>,
        indexed: MaxPool1d<2, return_indices = true>,
    }
    fn forward(&self, x: [N, 4, H, 8]) -> [N, 4, H, 3] {
        self.pool(x)
    }
}

fn main() {}
