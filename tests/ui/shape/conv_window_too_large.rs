// A 5x5 kernel on a 2x2 map (after two poolings) leaves nothing.
tapir::model! {
    pub struct Net {
        pool: MaxPool2d<2>,
        conv: Conv2d<1, 4, 5>,
    }
    fn forward(&self, x: [N, 1, 8, 8]) -> [N, 4, 1, 1] {
        self.conv(self.pool(self.pool(x)))
    }
}

fn main() {}
