// Only one dim of a reshape can be -1.
tapir::model! {
    pub struct Net {
        fc: Linear<16, 16>,
    }
    fn forward(&self, x: [B, 16]) -> [B, 4, 4] {
        self.fc(x).reshape([B, -1, -1])
    }
}

fn main() {}
