// A Sequential can hold other models; names nest as in PyTorch.
tapir::model! {
    pub struct Up<const I: usize, const O: usize> {
        fc: Linear<I, O>,
    }
    fn forward(&self, x: [B, I]) -> [B, O] {
        self.fc(x).relu()
    }
}

tapir::model! {
    pub struct Stack {
        net: Sequential<(Up<4, 8>, Up<8, 16>, Linear<16, 1>)>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 1] {
        self.net(x)
    }
}

fn main() {
    use tapir::nn::Module;
    let m = Stack::new(&tapir::Device::Cpu);
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["net.0.fc.weight", "net.0.fc.bias", "net.1.fc.weight", "net.1.fc.bias", "net.2.weight", "net.2.bias"]);
    assert_eq!(m.forward(&tapir::Tensor::zeros(&[2, 4])).shape(), &[2, 1]);
}
