// A hand-written module (`#[module(..)]`) has no shape rule the checker
// knows, so its calls name the shape they return through `unchecked!`.
use tapir::nn::{Forward, Module, TensorKind};
use tapir::Tensor;

#[derive(Default)]
pub struct Double;

impl Module for Double {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        "Double()".into()
    }
}

impl Forward for Double {
    fn forward(&self, x: &Tensor) -> Tensor {
        x * 2.0
    }
}

tapir::model! {
    pub struct Net {
        #[module]
        double: Double,
        fc: Linear<4, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        self.fc(self.double(x))
    }
}

fn main() {}
