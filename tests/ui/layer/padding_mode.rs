// A convolution's padding_mode is one of PyTorch's four strings.
tapir::model! {
    pub struct Net {
        conv: Conv2d<3, 8, 3, padding = 1, padding_mode = "mirror">,
    }
    fn forward(&self, x: [N, 3, 8, 8]) -> [N, 8, 8, 8] {
        self.conv(x)
    }
}

fn main() {}
