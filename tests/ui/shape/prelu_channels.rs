// A PReLU with one slope per channel must have as many slopes as the
// input has channels (dim 1).
tapir::model! {
    pub struct Net {
        conv: Conv2d<3, 16, 3, padding = 1>,
        act: PReLU<8>,
    }
    fn forward(&self, x: [N, 3, 32, 32]) -> [N, 16, 32, 32] {
        self.act(self.conv(x))
    }
}

fn main() {}
