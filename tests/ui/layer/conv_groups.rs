// Grouped convolution splits the channels evenly.
tapir::model! {
    pub struct Net {
        conv: Conv2d<6, 8, 3, groups = 4>,
    }
    fn forward(&self, x: [N, 6, 8, 8]) -> [N, 8, 6, 6] {
        self.conv(x)
    }
}

fn main() {}
