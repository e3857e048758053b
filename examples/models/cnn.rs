// A small CNN written with `model!`: conv -> pool -> conv -> pool -> flatten
// -> linear, with the flattened size (32 * 7 * 7) computed by the macro.

tapir::model! {
    /// A LeNet-style classifier for 28x28 grayscale images.
    pub struct Cnn<const CLASSES: usize> {
        pub conv1: Conv2d<1, 16, 3, padding = 1>,
        pub conv2: Conv2d<16, 32, 3, padding = 1>,
        pub pool: MaxPool2d<2>,
        pub flat: Flatten,
        pub drop: Dropout<0.25>,
        pub fc1: Linear<_, 128>,
        pub fc2: Linear<128, CLASSES>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, CLASSES] {
        let h = self.pool(self.conv1(x).relu());
        let h = self.pool(self.conv2(h).relu());
        let h = self.drop(self.flat(h));
        self.fc2(self.fc1(h).relu())
    }
}
