// An LSTM returns `(output, (h_n, c_n))`; the states are
// `[num_layers * directions, N, hidden]`, not the output's shape. A layer
// that returns a tuple cannot be a step of a Sequential.
tapir::model! {
    pub struct Tagger {
        lstm: LSTM<16, 32, num_layers = 2, batch_first = true>,
        head: Linear<32, 5>,
        pool: Sequential<(GRU<32, 8>, ReLU)>,
    }
    fn forward(&self, x: [N, T, 16]) -> [N, T, 5] {
        let (y, (h, _)) = self.lstm(x);
        let last = self.head(h) + self.head(y);
        let (a, b) = self.lstm(y);
        let p = self.pool(y);
        last
    }
}

fn main() {}
