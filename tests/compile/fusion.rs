//! Fused elementwise kernels (forward bitwise, backward against eager and
//! finite differences), fused dropout, and the pattern rewrites.

use super::*;

/// `tanh(x W + b) * sigmoid(x W + b) - 0.5 * u`, with an elementwise tail
/// of four ops that the compiler fuses into one kernel.
struct Gate {
    lin: Linear,
    u: Tensor,
}

impl Module for Gate {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.lin.visit(&mut |n, t, k| f(&format!("lin.{n}"), t, k));
        f("u", &self.u, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.lin
            .visit_mut(&mut |n, t, k| f(&format!("lin.{n}"), t, k));
        f("u", &mut self.u, TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        "Gate".into()
    }
}

impl Forward for Gate {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.lin.forward(x);
        &(&h.tanh() * &h.sigmoid()) - &(&self.u * 0.5)
    }
}

fn gate() -> Gate {
    Gate {
        lin: Linear::new(6, 5, true),
        u: Tensor::randn(&[5]).requires_grad_(true),
    }
}

#[test]
fn elementwise_chains_fuse_forward_and_backward_and_match_eager() {
    let _serial = serial();
    let (eager, compiled) = twins(gate);
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[7, 6], &Generator::new(1)).requires_grad_(true);
    let x2 = x.detach().requires_grad_(true);
    let out_e = eager.forward(&x);
    compiled.forward(&x2); // records
    let (f0, b0) = fused_launches();
    let out_c = compiled.forward(&x2);
    let (f1, _) = fused_launches();
    assert!(f1 > f0, "the replay launched no fused kernel");
    assert_eq!(
        out_c.to_vec::<f32>(),
        out_e.to_vec::<f32>(),
        "a fused forward computes what each op's kernel does"
    );
    let e: Explanation = compiled.explain();
    assert_eq!(
        e.fused,
        vec![vec!["tanh", "sigmoid", "mul", "mul", "sub"]],
        "one kernel for the tail (the scalar of `u * 0.5` inlined)"
    );
    out_e.square().sum().backward();
    out_c.square().sum().backward();
    let (_, b1) = fused_launches();
    assert!(b1 > b0, "the backward of a fused node is one fused kernel");
    let pairs = [
        (x.grad().unwrap(), x2.grad().unwrap(), "x"),
        (
            eager.u.grad().unwrap(),
            compiled.model().u.grad().unwrap(),
            "u",
        ),
        (
            eager.lin.weight.grad().unwrap(),
            compiled.model().lin.weight.grad().unwrap(),
            "lin.weight",
        ),
    ];
    for (a, b, name) in pairs {
        let d = rel_diff(&b, &a);
        assert!(d <= 1e-6, "grad of {name}: fused differs from eager by {d}");
    }
}

#[test]
fn fused_gradients_match_finite_differences() {
    let _serial = serial();
    // An f32 program checked against central differences of the compiled
    // forward itself (in f64 the chain would not fuse).
    manual_seed(11);
    let model = compile(gate());
    let x = Tensor::randn_with(&[3, 6], &Generator::new(2)).requires_grad_(true);
    model.forward(&x); // records
    let loss = |x: &Tensor| model.forward(x).sum().item::<f64>();
    let y = model.forward(&x).sum();
    y.backward();
    let g = x.grad().unwrap().to_vec::<f32>();
    let base = x.detach().to_vec::<f32>();
    let h = 1e-2f32;
    for i in [0, 5, 11, 17] {
        let at = |d: f32| {
            let mut v = base.clone();
            v[i] += d;
            loss(&Tensor::from_vec(v, &[3, 6]))
        };
        let fd = (at(h) - at(-h)) / (2.0 * h as f64);
        assert!(
            (fd - g[i] as f64).abs() <= 2e-3 * fd.abs().max(1.0),
            "d loss / d x[{i}]: fused backward {} vs finite differences {fd}",
            g[i]
        );
    }
}

/// A fused backward is not twice differentiable (nor is PyTorch's
/// `torch.compile` under double backward): its first derivative under
/// `create_graph` is right, and differentiating it again panics naming
/// the fused node, never a silently wrong number.
#[test]
fn a_second_derivative_through_a_fused_backward_panics_naming_it() {
    let _serial = serial();
    assert!(!tapir::autograd::TWICE_DIFFERENTIABLE.contains(&"FusedElementwiseBackward0"));
    let (eager, compiled) = twins(gate);
    let model = compile(compiled);
    let x = Tensor::randn_with(&[3, 6], &Generator::new(2)).requires_grad_(true);
    model.forward(&x); // records
    let opts = || tapir::autograd::GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let (f0, b0) = fused_launches();
    let y = model.forward(&x).sum();
    let gx = tapir::autograd::grad_with(&[&y], &[&x], opts())
        .remove(0)
        .unwrap();
    let (f1, b1) = fused_launches();
    assert!(f1 > f0 && b1 > b0, "the replay ran no fused kernels");
    let want = tapir::autograd::grad(&[&eager.forward(&x).sum()], &[&x]).remove(0);
    assert!(
        rel_diff(&gx, &want) < 1e-5,
        "create_graph's first derivative"
    );
    let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tapir::autograd::grad(&[&gx.sum()], &[&x]);
    }));
    let payload = second.expect_err("a second derivative through a fused kernel");
    let msg = (payload.downcast_ref::<String>().cloned())
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(
        msg.contains(
            "runs through FusedElementwiseBackward0, whose backward tapir cannot differentiate"
        ),
        "{msg}"
    );
}

/// `gelu(x + dropout(lin(x)))`, then a second dropout: the tail and the
/// first dropout fuse; the masks are eager's, drawn in eager's order.
struct DropRes {
    lin: Linear,
    drop: Dropout,
}

impl Module for DropRes {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.lin.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.lin.visit_mut(f)
    }
    fn repr(&self) -> String {
        "DropRes".into()
    }
    fn set_training(&self, on: bool) {
        self.drop.set_training(on)
    }
    fn is_training(&self) -> bool {
        self.drop.is_training()
    }
}

impl Forward for DropRes {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = (x + &self.drop.forward(&self.lin.forward(x))).gelu();
        self.drop.forward(&(&h * 2.0))
    }
}

#[test]
fn dropout_fuses_with_the_same_masks_as_eager() {
    let _serial = serial();
    let (eager, compiled) = twins(|| DropRes {
        lin: Linear::new(24, 24, true),
        drop: Dropout::new(0.3),
    });
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[40, 24], &Generator::new(13));
    compiled.forward(&x); // records
    for seed in [1, 2] {
        manual_seed(seed);
        let want = eager.forward(&x);
        let after_eager = tapir::default_generator().get_state();
        manual_seed(seed);
        let got = compiled.forward(&x);
        assert_eq!(tapir::default_generator().get_state(), after_eager);
        assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>(), "seed {seed}");
        assert_same_grads(
            (&eager, &want),
            (&compiled, &got),
            |y| y.square().sum(),
            1e-6,
            &format!("seed {seed}"),
        );
    }
    let e = compiled.explain();
    assert_eq!(
        e.fused,
        vec![vec!["dropout", "add", "gelu", "mul", "dropout"]],
        "{e:?}"
    );
}

/// A draw between a dropout and the op reading it.
struct DropNoise(Dropout);

impl Module for DropNoise {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        "DropNoise".into()
    }
}

impl Forward for DropNoise {
    fn forward(&self, x: &Tensor) -> Tensor {
        let d = self.0.forward(x);
        let noise = Tensor::rand_like(x);
        (&d + &noise).gelu()
    }
}

#[test]
fn a_draw_between_keeps_a_dropout_out_of_the_fused_kernel() {
    let _serial = serial();
    let model = compile(DropNoise(Dropout::new(0.5)));
    let x = Tensor::randn_with(&[8, 8], &Generator::new(14));
    model.forward(&x); // records
    manual_seed(3);
    let want = model.model().forward(&x);
    manual_seed(3);
    let got = model.forward(&x);
    assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
    assert_eq!(model.explain().fused, vec![vec!["add", "gelu"]]);
}

#[test]
fn attention_from_plain_ops_takes_the_fused_scaled_softmax() {
    use tapir::nn::{SdpBackend, sdpa_kernel};
    let _serial = serial();
    const V: usize = 32;
    let (eager, compiled) = twins(|| CharLm::<V, 32, 4, 2, 16>::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let positions = Tensor::arange(16);
    let g = Generator::new(15);
    sdpa_kernel(&[SdpBackend::Math], || {
        for step in 0..3 {
            let ids = Tensor::randint_with(0, V as i64, &[3, 16], &g);
            let out_e = eager.forward(&ids, &positions);
            let out_c = compiled
                .forward_inputs(&[&ids, &positions])
                .unwrap()
                .remove(0);
            let d = rel_diff(&out_c, &out_e);
            assert!(d <= 1e-6, "step {step}: logits differ by {d}");
            assert_same_grads(
                (&eager, &out_e),
                (&compiled, &out_c),
                |y| y.square().mean(),
                1e-6,
                &format!("step {step}"),
            );
        }
    });
    let e = compiled.explain();
    let softmaxes = e
        .rewrites
        .iter()
        .filter(|r| r.contains("scaled_softmax"))
        .count();
    assert_eq!(softmaxes, 2, "one per block: {:?}", e.rewrites);
}

/// Compiles a twin of `make()`'s model, records on `x`, and checks the
/// replay: the forward bit for bit eager's, every gradient of its sum
/// within 1e-6, and one fused kernel of the ops `fused` names.
fn assert_fuses_like_eager<M: Module + Forward>(
    make: impl Fn() -> M,
    x: &Tensor,
    what: &str,
    fused: &[&str],
) {
    let (eager, compiled) = twins(make);
    let compiled = compile(compiled);
    compiled.forward(x); // records
    let (want, got) = (eager.forward(x), compiled.forward(x));
    assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>(), "{what}");
    assert_same_grads((&eager, &want), (&compiled, &got), Tensor::sum, 1e-6, what);
    assert_eq!(compiled.explain().fused, vec![fused.to_vec()], "{what}");
}

/// `sqrt((0.5 h)² + σ(h))`: `square` and `powf(0.5)` fuse with the bits
/// of `powf`'s own 2 and 0.5 cases.
struct Powers(Linear);

module_of_linear!(Powers);

impl Forward for Powers {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        (&(&h * 0.5).square() + &h.sigmoid()).powf(0.5)
    }
}

#[test]
fn square_and_square_root_powers_fuse() {
    let _serial = serial();
    assert_fuses_like_eager(
        || Powers(Linear::new(7, 9, true)),
        &Tensor::randn_with(&[6, 7], &Generator::new(18)),
        "powers",
        &["mul", "square", "sigmoid", "add", "powf"],
    );
}

/// `hardswish(h) * tanh(h)`: hardswish fuses, and its fused backward uses
/// the same derivative row as eager's.
struct Swish(Linear);

module_of_linear!(Swish);

impl Forward for Swish {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        &h.hardswish() * &h.tanh()
    }
}

#[test]
fn hardswish_fuses_forward_and_backward() {
    let _serial = serial();
    // Scaled so that h crosses both of hardswish's kinks (-3 and 3).
    assert_fuses_like_eager(
        || Swish(Linear::new(5, 40, true)),
        &(&Tensor::randn_with(&[8, 5], &Generator::new(19)) * 3.0),
        "hardswish",
        &["hardswish", "tanh", "mul"],
    );
}

/// `gelu_tanh(h) + h`: the tanh GELU (a composite) fuses as eager's
/// instructions, so the forward keeps eager's bits.
struct TanhGelu(Linear);

module_of_linear!(TanhGelu);

impl Forward for TanhGelu {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        &h.gelu_tanh() + &h
    }
}

#[test]
fn the_tanh_gelu_fuses_with_eagers_bits() {
    let _serial = serial();
    assert_fuses_like_eager(
        || TanhGelu(Linear::new(6, 30, true)),
        &(&Tensor::randn_with(&[7, 6], &Generator::new(20)) * 2.0),
        "gelu_tanh",
        &["gelu_tanh", "add"],
    );
}
