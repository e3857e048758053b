// A U-Net decoder step: the transposed convolution must restore the size of
// the skip connection it is joined with. Stride 2 with padding 1 turns 7
// into 13, not 14; `output_padding = 1` would add the missing row and column.
tapir::model! {
    pub struct Up {
        up: ConvTranspose2d<16, 8, 3, stride = 2, padding = 1>,
    }
    fn forward(&self, x: [N, 16, 7, 7], skip: [N, 8, 14, 14]) -> [N, 16, 14, 14] {
        cat([self.up(x), skip], 1)
    }
}

fn main() {}
