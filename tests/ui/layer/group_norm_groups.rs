// GroupNorm splits the channels into equal groups.
tapir::model! {
    pub struct Net {
        norm: GroupNorm<3, 8>,
    }
    fn forward(&self, x: [N, 8, 4, 4]) -> [N, 8, 4, 4] {
        self.norm(x)
    }
}

fn main() {}
