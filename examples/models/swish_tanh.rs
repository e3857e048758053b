// A linear layer with a five-op elementwise tail: the case `tapir::compile`'s
// fusion is for (`bench_ref`'s `fusion` workload, the GPU fusion test).
// Written by hand, with full paths, so any file can include it.

/// `h * sigmoid(h) + tanh(h) * 0.5` over `h = x W + b`.
pub struct SwishTanh(pub tapir::nn::Linear);

impl tapir::nn::Module for SwishTanh {
    fn visit(&self, f: &mut dyn FnMut(&str, &tapir::Tensor, tapir::nn::TensorKind)) {
        self.0.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut tapir::Tensor, tapir::nn::TensorKind)) {
        self.0.visit_mut(f)
    }
    fn repr(&self) -> String {
        "SwishTanh".into()
    }
}

impl tapir::nn::Forward for SwishTanh {
    fn forward(&self, x: &tapir::Tensor) -> tapir::Tensor {
        let h = self.0.forward(x);
        &(&h * &h.sigmoid()) + &(&h.tanh() * 0.5)
    }
}
