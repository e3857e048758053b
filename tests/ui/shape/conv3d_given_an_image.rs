// A volumetric convolution fed a batch of images (no depth dim).
tapir::model! {
    pub struct Net {
        conv: Conv3d<1, 8, 3>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, 8, 26, 26] {
        self.conv(x)
    }
}

fn main() {}
