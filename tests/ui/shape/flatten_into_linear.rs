// The classic CNN mistake: the flattened size is 8 * 14 * 14 = 1568, not 100.
tapir::model! {
    pub struct Net {
        conv: Conv2d<1, 8, 3, padding = 1>,
        pool: MaxPool2d<2>,
        flat: Flatten,
        fc: Linear<100, 10>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, 10] {
        self.fc(self.flat(self.pool(self.conv(x))))
    }
}

fn main() {}
