// A parameter is given once, by position or by name.
tapir::model! {
    pub struct Net {
        conv: Conv2d<1, 8, 3, in_channels = 2>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, 8, 26, 26] {
        self.conv(x)
    }
}

fn main() {}
