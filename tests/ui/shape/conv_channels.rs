// The first convolution of an RGB model fed grayscale images.
tapir::model! {
    pub struct Net {
        conv: Conv2d<3, 16, 3>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, 16, 26, 26] {
        self.conv(x)
    }
}

fn main() {}
