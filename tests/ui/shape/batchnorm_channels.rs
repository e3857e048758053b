// BatchNorm2d normalises dim 1: it must be the channel count.
tapir::model! {
    pub struct Net {
        bn: BatchNorm2d<16>,
    }
    fn forward(&self, x: [N, 8, 4, 4]) -> [N, 8, 4, 4] {
        self.bn(x)
    }
}

fn main() {}
