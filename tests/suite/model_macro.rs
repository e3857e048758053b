//! `model!` end to end: the seed models written with the macro match the
//! hand-written ones (names, repr, outputs), boundary checks, inference of
//! sizes, and calls across blocks.

use crate::seed;

use tapir::nn::{Forward, Module};
use tapir::{Device, Tensor, model};

model! {
    /// The seed's residual block.
    pub struct ResBlock<const D: usize> {
        net: Sequential<(Linear<D, D>, LayerNorm<D>, GELU, Linear<D, D>)>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.net(x)
    }
}

model! {
    pub struct Mlp<const IN: usize, const OUT: usize> {
        stem: Linear<IN, 256>,
        blocks: [ResBlock<256>; 4],
        head: Linear<256, OUT>,
    }
    fn forward(&self, x: [B, IN]) -> [B, OUT] {
        let mut h = self.stem(x);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }
}

#[test]
fn seed_mlp_matches_the_hand_written_model() {
    let ours = Mlp::<784, 10>::new(&Device::Cpu);
    let mut hand = seed::Mlp::seed();
    let keys = |m: &dyn Module| {
        m.state_dict()
            .into_iter()
            .map(|(k, _)| k)
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&ours), keys(&hand));
    assert!(keys(&ours).contains(&"blocks.3.net.3.bias".to_string()));
    assert_eq!(ours.num_parameters(), hand.num_parameters());
    hand.load_state_dict(&ours.state_dict(), true).unwrap();
    let x = Tensor::randn(&[5, 784]);
    let (a, b) = (ours.forward(&x), hand.forward(&x));
    assert_eq!(a.shape(), &[5, 10]);
    assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
    // The repr is PyTorch's, with the model's own name.
    let repr = ours.to_string();
    assert!(
        repr.starts_with("Mlp(\n  (stem): Linear(in_features=784, out_features=256, bias=True)"),
        "{repr}"
    );
    assert_eq!(repr.replace("Mlp(", ""), hand.repr().replace("Mlp(", ""));
}

#[test]
fn forward_checks_the_input_once_at_the_boundary() {
    let m = Mlp::<784, 10>::new(&Device::Cpu);
    let err = m
        .try_forward(&Tensor::zeros(&[3, 100]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Mlp::forward: input `x` must have shape [B, IN] = [B, 784], got [3, 100]"
    );
    let err = m
        .try_forward(&Tensor::zeros(&[784]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "Mlp::forward: input `x` must have shape [B, IN] = [B, 784], got [784]"
    );
    // The panic is reported where `forward` was called, not inside the model.
    let at = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen = at.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if let Some(l) = info.location() {
            *seen.lock().unwrap() = Some((l.file().to_string(), l.line()));
        }
    }));
    let line = line!() + 2;
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        m.forward(&Tensor::zeros(&[2, 3]))
    }));
    std::panic::set_hook(previous);
    let msg = panic.unwrap_err().downcast::<String>().unwrap();
    assert_eq!(
        *msg,
        "Mlp::forward: input `x` must have shape [B, IN] = [B, 784], got [2, 3]"
    );
    let (file, l) = at.lock().unwrap().clone().expect("a location");
    assert_eq!(
        (file.as_str(), l),
        ("tests/suite/model_macro.rs", line),
        "the caller's line"
    );
}

#[test]
fn train_and_eval_reach_every_layer() {
    let m = Mlp::<8, 2>::new(&Device::Cpu);
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    assert!(!m.blocks[2].is_training());
    m.train();
    assert!(m.blocks[2].is_training());
}

model! {
    /// Conv -> pool -> flatten -> linear; `fc`'s input size is inferred.
    pub struct SmallCnn<const CLASSES: usize> {
        conv1: Conv2d<1, 8, 3, padding = 1>,
        pool: MaxPool2d<2>,
        conv2: Conv2d<8, 16, 3, stride = 2>,
        flat: Flatten,
        fc: Linear<_, CLASSES>,
    }
    fn forward(&self, x: [N, 1, 28, 28]) -> [N, CLASSES] {
        let h = self.pool(self.conv1(x).relu());
        let h = self.conv2(h).relu();
        self.fc(self.flat(h))
    }
}

#[test]
fn cnn_flatten_size_is_computed_by_the_macro() {
    let m = SmallCnn::<10>::new(&Device::Cpu);
    // 28 -> pool 14 -> conv stride 2, no padding: (14 - 3) / 2 + 1 = 6; 16 * 6 * 6.
    assert_eq!(m.fc.in_features, 576);
    let y = m.forward(&Tensor::randn(&[3, 1, 28, 28]));
    assert_eq!(y.shape(), &[3, 10]);
}

model! {
    /// Several inputs and outputs, reshape with an inferred dim, a non-tensor input.
    pub struct Heads<const D: usize, const H: usize> {
        proj: Linear<D, { D * 3 }>,
    }
    fn forward(&self, x: [B, T, D], scale: f64) -> ([B, H, T, T], [B, T, D]) {
        let qkv = self.proj(x);
        let q = qkv.narrow(-1, 0, D).reshape([B, T, H, -1]).transpose(1, 2);
        let k = qkv.narrow(-1, D, D).reshape([B, T, H, D / H]).transpose(1, 2);
        let att = q.matmul(k.transpose(-2, -1)) * scale;
        (att.softmax(-1), x)
    }
}

#[test]
fn head_split_and_tuples() {
    let m = Heads::<8, 2>::new(&Device::Cpu);
    let (att, x) = m.forward(&Tensor::randn(&[2, 5, 8]), 0.5);
    assert_eq!(att.shape(), &[2, 2, 5, 5]);
    assert_eq!(x.shape(), &[2, 5, 8]);
    let sums = att.sum_dim(-1, false).to_vec::<f32>();
    assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-5));
}

#[test]
fn gradients_match_the_hand_written_model() {
    let ours = Mlp::<16, 3>::new(&Device::Cpu);
    let mut hand = seed::Mlp::new(16, 256, 3, 4);
    hand.load_state_dict(&ours.state_dict(), true).unwrap();
    let x = Tensor::randn(&[4, 16]);
    ours.forward(&x).square().sum().backward();
    hand.forward(&x).square().sum().backward();
    for ((n, a), (_, b)) in ours.named_parameters().iter().zip(hand.named_parameters()) {
        let (ga, gb) = (a.grad().unwrap(), b.grad().unwrap());
        assert_eq!(ga.to_vec::<f32>(), gb.to_vec::<f32>(), "{n}");
    }
}

model! {
    /// The escape hatch: user code, its shape checked at run time.
    pub struct Halves {
        fc: Linear<8, 8>,
    }
    fn forward(&self, x: [B, 8], keep: usize) -> [B, 4] {
        let h = unchecked!(self.fc.forward(&x).narrow(1, 0, keep) => [B, 4]);
        h.relu()
    }
}

#[test]
fn unchecked_values_are_checked_at_run_time() {
    let m = Halves::new(&Device::Cpu);
    assert_eq!(m.forward(&Tensor::zeros(&[3, 8]), 4).shape(), &[3, 4]);
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        m.forward(&Tensor::zeros(&[3, 8]), 5)
    }));
    let msg = err.unwrap_err().downcast::<String>().unwrap();
    assert_eq!(
        *msg,
        "Halves::forward: an `unchecked!` value must have shape [B, 4] = [3, 4], got [3, 5]"
    );
}

/// A hand-written module: a learnable scale per feature.
struct Scale {
    weight: Tensor,
}

impl Scale {
    fn new(features: usize) -> Scale {
        Scale {
            weight: Tensor::full(&[features], 2.0).requires_grad_(true),
        }
    }
}

impl Module for Scale {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, tapir::nn::TensorKind)) {
        f("weight", &self.weight, tapir::nn::TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, tapir::nn::TensorKind)) {
        f("weight", &mut self.weight, tapir::nn::TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        format!("Scale({})", self.weight.size(0))
    }
}

impl Forward for Scale {
    fn forward(&self, x: &Tensor) -> Tensor {
        x * &self.weight
    }
}

model! {
    /// A hand-written module as a field: built by the `#[module(..)]`
    /// expression, called through `unchecked!` with the shape it returns.
    pub struct Scaled {
        fc: Linear<4, 8>,
        #[module(Scale::new(8))]
        scale: Scale,
        head: Linear<8, 2>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 2] {
        let h = self.fc(x);
        let s = unchecked!(Forward::forward(&self.scale, &h) => [B, 8]);
        self.head(s)
    }
}

#[test]
fn hand_written_modules_sit_in_model_fields() {
    let m = Scaled::new(&Device::Cpu);
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "fc.weight",
            "fc.bias",
            "scale.weight",
            "head.weight",
            "head.bias"
        ]
    );
    let x = Tensor::randn(&[3, 4]);
    let y = m.forward(&x);
    assert!(y.shape() == [3, 2], "{:?}", y.shape());
    // The scale is in the graph: doubling it by hand gives the same output.
    let by_hand = m.head.forward(&(&m.fc.forward(&x) * 2.0));
    assert!(y.allclose(&by_hand, 1e-6, 1e-6));
    y.sum().backward();
    assert!(m.scale.weight.grad().is_some());
    assert!(m.to_string().contains("(scale): Scale(8)"), "{m}");
}
