// `for` walks an array of layers, `[Layer; N]`.
tapir::model! {
    pub struct Net {
        fc: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        let mut h = x;
        for layer in &self.fc {
            h = layer(h);
        }
        h
    }
}

fn main() {}
