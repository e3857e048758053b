// PyTorch's `SmallCNN` from `../shared/bench/torch_ref.py`, written with
// `model!` for the `cnn` workload of `bench_ref`: the flattened size
// (64 * 7 * 7) is computed by the macro.

tapir::model! {
    /// Conv(1,32,3,p1)-ReLU-MaxPool2-Conv(32,64,3,p1)-ReLU-MaxPool2-Flatten-
    /// Linear(3136,128)-ReLU-Linear(128,10).
    pub struct SmallCnn {
        pub conv1: Conv2d<1, 32, 3, padding = 1>,
        pub conv2: Conv2d<32, 64, 3, padding = 1>,
        pub pool: MaxPool2d<2>,
        pub flat: Flatten,
        pub fc1: Linear<_, 128>,
        pub fc2: Linear<128, 10>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, 10] {
        let h = self.pool(self.conv1(x).relu());
        let h = self.pool(self.conv2(h).relu());
        self.fc2(self.fc1(self.flat(h)).relu())
    }
}
