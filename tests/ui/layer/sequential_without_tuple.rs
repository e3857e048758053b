// A Sequential lists its layers as a tuple type.
tapir::model! {
    pub struct Net {
        net: Sequential<Linear<4, 4>, ReLU>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.net(x)
    }
}

fn main() {}
