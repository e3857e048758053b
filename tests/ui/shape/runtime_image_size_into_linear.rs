// A CNN over images of any size `[N, 1, H, W]` cannot flatten into a fixed
// `Linear`: the size after the convs and pools is shown as written
// (a product of the per-axis sizes), not as an expanded polynomial.
tapir::model! {
    pub struct Cnn {
        c1: Conv2d<1, 8, 3>,
        p1: MaxPool2d<2>,
        c2: Conv2d<8, 16, 3, padding = 1>,
        p2: MaxPool2d<2>,
        head: Linear<16, 10>,
    }
    fn forward(&self, x: [N, 1, H, W]) -> [N, 10] {
        let h = self.p2(self.c2(self.p1(self.c1(x))));
        self.head(h.flatten(1, -1))
    }
}

fn main() {}
