//! `tapir::compile`: compiled models compute what eager ones do (outputs,
//! gradients, ten-step trajectories on the seed MLP, the CNN and the char
//! transformer), fuse elementwise chains, record again on a new signature,
//! fall back on graph breaks and refuse them under `fullgraph`.
//!
//! A binary of its own: models draw their init from the global generator,
//! and the dropout test replays it, so the tests take one lock.

#[path = "../examples/common/seed.rs"]
mod seed;

include!("../examples/models/transformer.rs");
include!("../examples/models/small_cnn.rs");

use std::sync::{Mutex, MutexGuard};
use tapir::compile::{CompileOptions, Explanation, compile_with, fused_launches};
use tapir::nn::{Dropout, Forward, Linear, Module, Sequential, TensorKind, cross_entropy};
use tapir::optim::{AdamW, AdamWConfig, Optimizer, SGD, SgdConfig, clip_grad_norm_};
use tapir::{Error, Generator, Tensor, compile, manual_seed};

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Largest `|a - b| / max(|b|, 1e-3)` over two same-shaped tensors.
fn rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape(), "shapes differ");
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1e-3))
        .fold(0.0, f64::max)
}

fn grads(m: &dyn Module) -> Vec<(String, Tensor)> {
    m.named_parameters()
        .into_iter()
        .map(|(n, p)| (n, p.grad().expect("every parameter has a gradient")))
        .collect()
}

/// Two copies of one model: `make` runs twice from the same seed.
fn twins<M: Module>(make: impl Fn() -> M) -> (M, M) {
    manual_seed(7);
    let a = make();
    manual_seed(7);
    let b = make();
    (a, b)
}

#[test]
fn seed_mlp_replays_bit_for_bit_and_trains_as_eager_for_ten_steps() {
    let _serial = serial();
    let (eager, compiled) = twins(seed::Mlp::seed);
    let compiled = compile(compiled);
    let g = Generator::new(3);
    let xs: Vec<Tensor> = (0..10)
        .map(|_| Tensor::randn_with(&[32, 784], &g))
        .collect();
    let ys: Vec<Tensor> = (0..10)
        .map(|_| Tensor::randint_with(0, 10, &[32], &g))
        .collect();
    let cfg = AdamWConfig {
        lr: 1e-3,
        weight_decay: 1e-2,
        ..AdamWConfig::default()
    };
    let mut opt_e = AdamW::new(eager.parameters(), cfg);
    let mut opt_c = AdamW::new(compiled.parameters(), cfg);
    for (x, y) in xs.iter().zip(&ys) {
        for (m, opt) in [
            (&eager as &dyn Forward, &mut opt_e),
            (&compiled as &dyn Forward, &mut opt_c),
        ] {
            opt.zero_grad();
            let loss = cross_entropy(&m.forward(x), y);
            loss.backward();
            clip_grad_norm_(&m.parameters(), 1.0);
            opt.step();
        }
    }
    for ((name, a), (_, b)) in eager
        .named_parameters()
        .iter()
        .zip(&compiled.named_parameters())
    {
        assert_eq!(
            a.to_vec::<f32>(),
            b.to_vec::<f32>(),
            "{name} after 10 AdamW steps: the replayed graph runs the eager ops"
        );
    }
    let e = compiled.explain();
    assert_eq!((e.graphs, e.replays, e.eager_calls), (1, 9, 1), "{e:?}");
    assert!(e.graph_breaks.is_empty(), "{e:?}");
}

#[test]
fn char_transformer_outputs_and_gradients_match_eager() {
    let _serial = serial();
    const V: usize = 32;
    let (eager, compiled) = twins(|| CharLm::<V, 32, 4, 2, 16>::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let g = Generator::new(5);
    let positions = Tensor::arange(16);
    for step in 0..3 {
        let ids = Tensor::randint_with(0, V as i64, &[4, 16], &g);
        let y = Tensor::randint_with(0, V as i64, &[64], &g);
        let out_e = eager.forward(&ids, &positions);
        let out_c = compiled
            .forward_inputs(&[&ids, &positions])
            .unwrap()
            .remove(0);
        assert!(
            rel_diff(&out_c, &out_e) <= 1e-6,
            "step {step}: logits differ by {}",
            rel_diff(&out_c, &out_e)
        );
        for (m, out) in [(&eager as &dyn Module, &out_e), (&compiled, &out_c)] {
            m.zero_grad();
            cross_entropy(&out.reshape(&[-1, V as isize]), &y).backward();
        }
        for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
            let d = rel_diff(b, a);
            assert!(d <= 1e-6, "step {step}: grad of {name} differs by {d}");
        }
    }
    let e = compiled.explain();
    assert_eq!(e.graphs, 1);
    // Each residual add read by the next LayerNorm: tok + pos -> ln1, then
    // per block x + attn -> ln2 and the block's last add -> the next norm.
    assert_eq!(e.rewrites.len(), 5, "{:?}", e.rewrites);
}

#[test]
fn small_cnn_trains_as_eager() {
    let _serial = serial();
    let (eager, compiled) = twins(|| SmallCnn::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let g = Generator::new(9);
    let cfg = SgdConfig {
        lr: 0.01,
        momentum: 0.9,
        ..SgdConfig::default()
    };
    let mut opt_e = SGD::new(eager.parameters(), cfg);
    let mut opt_c = SGD::new(compiled.parameters(), cfg);
    for _ in 0..4 {
        let x = Tensor::randn_with(&[8, 1, 28, 28], &g);
        let y = Tensor::randint_with(0, 10, &[8], &g);
        opt_e.zero_grad();
        cross_entropy(&eager.forward(&x), &y).backward();
        opt_e.step();
        opt_c.zero_grad();
        cross_entropy(&compiled.forward(&x), &y).backward();
        opt_c.step();
    }
    for ((name, a), (_, b)) in eager
        .named_parameters()
        .iter()
        .zip(&compiled.named_parameters())
    {
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "{name} after 4 steps");
    }
    assert_eq!(compiled.explain().graphs, 1, "{:?}", compiled.explain());
}

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

#[test]
fn a_new_shape_records_a_new_graph_without_dynamic_shapes() {
    let _serial = serial();
    manual_seed(1);
    let net = Sequential::new()
        .add(Linear::new(8, 16, true))
        .add(Dropout::new(0.1))
        .add(Linear::new(16, 3, true));
    let opts = CompileOptions {
        dynamic: false,
        ..CompileOptions::default()
    };
    let model = compile_with(net, opts);
    for batch in [4, 4, 9, 4, 9] {
        let y = model.forward(&Tensor::randn(&[batch, 8]));
        assert_eq!(y.shape(), &[batch, 3]);
    }
    let e = model.explain();
    assert_eq!((e.graphs, e.replays, e.dynamic_graphs), (2, 3, 0), "{e:?}");
    model.eval();
    model.forward(&Tensor::randn(&[4, 8]));
    assert_eq!(model.explain().graphs, 3, "eval mode is another signature");
}

#[test]
fn a_second_batch_size_makes_one_graph_for_every_batch_size() {
    let _serial = serial();
    const V: usize = 16;
    let (eager, compiled) = twins(|| CharLm::<V, 16, 2, 1, 8>::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let positions = Tensor::arange(8);
    let g = Generator::new(8);
    for batch in [3, 5, 2, 7, 5] {
        let ids = Tensor::randint_with(0, V as i64, &[batch, 8], &g);
        let want = eager.forward(&ids, &positions);
        let got = compiled
            .forward_inputs(&[&ids, &positions])
            .unwrap()
            .remove(0);
        assert_eq!(got.shape(), &[batch, 8, V]);
        let d = rel_diff(&got, &want);
        assert!(d <= 1e-6, "batch {batch}: logits differ by {d}");
    }
    let e = compiled.explain();
    // 3 and 5 record; their merge serves 2 and 7; 5 replays its own.
    assert_eq!(
        (e.eager_calls, e.dynamic_graphs, e.replays),
        (2, 1, 3),
        "{e:?}"
    );
}

/// A forward that branches on a tensor's value.
struct Branchy(Linear);

impl Module for Branchy {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.0.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.0.visit_mut(f)
    }
    fn repr(&self) -> String {
        "Branchy".into()
    }
}

impl Forward for Branchy {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        if h.sum().item::<f32>() > 0.0 {
            h.relu()
        } else {
            h.neg()
        }
    }
}

#[test]
fn a_data_dependent_branch_is_a_graph_break_and_runs_eagerly() {
    let _serial = serial();
    manual_seed(2);
    let model = compile(Branchy(Linear::new(3, 2, false)));
    let w = model.model().0.weight.detach();
    for sign in [1.0, -1.0, 1.0, -1.0] {
        let x = &Tensor::ones(&[1, 3]) * sign;
        let h = x.matmul(&w.t());
        let want = if h.sum().item::<f32>() > 0.0 {
            h.relu()
        } else {
            h.neg()
        };
        assert_eq!(model.forward(&x).to_vec::<f32>(), want.to_vec::<f32>());
    }
    let e = model.explain();
    assert_eq!(e.graphs, 0);
    assert_eq!(
        e.graph_breaks.len(),
        1,
        "one signature, recorded once: {e:?}"
    );
    assert!(
        e.graph_breaks[0].contains("host read"),
        "the reason names the host read: {}",
        e.graph_breaks[0]
    );
    assert_eq!(e.eager_calls, 4);
}

#[test]
fn fullgraph_makes_a_graph_break_an_error() {
    let _serial = serial();
    manual_seed(3);
    let opts = CompileOptions {
        fullgraph: true,
        ..CompileOptions::default()
    };
    let model = compile_with(Branchy(Linear::new(3, 2, false)), opts);
    for _ in 0..2 {
        match model.try_forward(&Tensor::ones(&[1, 3])) {
            Err(Error::GraphBreak(msg)) => assert!(
                msg.contains("fullgraph") && msg.contains("host read (`to_vec`)"),
                "{msg}"
            ),
            other => panic!(
                "expected a graph break, got {:?}",
                other.map(|t| t.shape().to_vec())
            ),
        }
    }
}

/// A forward that builds a tensor from Rust data each call.
struct MadeInside;

impl Module for MadeInside {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        "MadeInside".into()
    }
}

impl Forward for MadeInside {
    fn forward(&self, x: &Tensor) -> Tensor {
        x + &Tensor::from_vec(vec![1.0f32, 2.0], &[2])
    }
}

#[test]
fn a_tensor_made_outside_ops_is_a_graph_break() {
    let _serial = serial();
    let model = compile(MadeInside);
    let y = model.forward(&Tensor::zeros(&[2]));
    assert_eq!(y.to_vec::<f32>(), [1.0, 2.0]);
    let e = model.explain();
    assert!(
        e.graph_breaks.len() == 1 && e.graph_breaks[0].contains("made outside tapir's ops"),
        "{e:?}"
    );
}

#[test]
fn dropout_draws_fresh_masks_on_replay_as_eager_does() {
    let _serial = serial();
    manual_seed(4);
    let model = compile(Dropout::new(0.5));
    let x = Tensor::ones(&[64]);
    model.forward(&x); // records
    manual_seed(10);
    let (a, b) = (model.forward(&x), model.forward(&x));
    manual_seed(10);
    let (ea, eb) = (model.model().forward(&x), model.model().forward(&x));
    assert_ne!(
        a.to_vec::<f32>(),
        b.to_vec::<f32>(),
        "a replay draws a new mask"
    );
    assert_eq!(
        (a.to_vec::<f32>(), b.to_vec::<f32>()),
        (ea.to_vec::<f32>(), eb.to_vec::<f32>()),
        "the same draws as eager from the same seed"
    );
    assert_eq!(model.explain().replays, 2);
}

tapir::model! {
    /// A residual MLP block.
    pub struct Res<const D: usize> {
        fc: Linear<D, D>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.fc(x).gelu()
    }

    /// Two blocks, the first checkpointed.
    pub struct Ckpt {
        #[checkpoint]
        a: Res<8>,
        b: Res<8>,
    }
    fn forward(&self, x: [B, 8]) -> [B, 8] {
        self.b(self.a(x))
    }
}

#[test]
fn a_checkpointed_region_runs_eagerly_with_its_reason() {
    let _serial = serial();
    let (eager, compiled) = twins(|| Ckpt::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[4, 8], &Generator::new(6));
    for _ in 0..2 {
        for (m, out) in [
            (&eager as &dyn Module, eager.forward(&x)),
            (&compiled as &dyn Module, compiled.forward(&x)),
        ] {
            m.zero_grad();
            out.square().sum().backward();
        }
        for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
            assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "grad of {name}");
        }
    }
    let e = compiled.explain();
    assert!(
        e.graph_breaks.len() == 1 && e.graph_breaks[0].contains("CheckpointFunctionBackward"),
        "{e:?}"
    );
}

#[test]
fn autocast_is_part_of_the_signature_and_replays_as_eager() {
    use tapir::amp::{DeviceType, autocast};
    let _serial = serial();
    let (eager, compiled) = twins(seed::Mlp::seed);
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[16, 784], &Generator::new(12));
    for _ in 0..2 {
        let (a, b) = autocast(DeviceType::Cpu, None, true, || {
            (eager.forward(&x), compiled.forward(&x))
        });
        assert_eq!(b.dtype(), tapir::DType::BF16);
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
    }
    let plain = compiled.forward(&x);
    assert_eq!(
        plain.dtype(),
        tapir::DType::F32,
        "outside autocast: another graph"
    );
    let e = compiled.explain();
    assert_eq!((e.graphs, e.replays), (2, 1), "{e:?}");
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
        for (m, out) in [(&eager as &dyn Module, &want), (&compiled, &got)] {
            m.zero_grad();
            out.square().sum().backward();
        }
        for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
            let d = rel_diff(b, a);
            assert!(d <= 1e-6, "seed {seed}: grad of {name} differs by {d}");
        }
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
            for (m, out) in [(&eager as &dyn Module, &out_e), (&compiled, &out_c)] {
                m.zero_grad();
                out.square().mean().backward();
            }
            for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
                let d = rel_diff(b, a);
                assert!(d <= 1e-6, "step {step}: grad of {name} differs by {d}");
            }
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

tapir::model! {
    /// Conv, BatchNorm, ReLU, pooled to logits.
    pub struct ConvBn {
        conv: Conv2d<1, 4, 3, padding = 1>,
        bn: BatchNorm2d<4>,
        pool: AdaptiveAvgPool2d<1, 1>,
        flat: Flatten,
        fc: Linear<4, 3>,
    }
    fn forward(&self, x: [N, 1, 6, 6]) -> [N, 3] {
        self.fc(self.flat(self.pool(self.bn(self.conv(x)).relu())))
    }
}

#[test]
fn batch_norm_replays_with_its_running_statistics() {
    let _serial = serial();
    let (eager, compiled) = twins(|| ConvBn::new(&tapir::Device::Cpu));
    let compiled = compile(compiled);
    let g = Generator::new(16);
    for _ in 0..3 {
        let x = Tensor::randn_with(&[5, 1, 6, 6], &g);
        for (m, out) in [
            (&eager as &dyn Module, eager.forward(&x)),
            (&compiled as &dyn Module, compiled.forward(&x)),
        ] {
            m.zero_grad();
            out.square().sum().backward();
        }
        for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
            assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "grad of {name}");
        }
    }
    for ((name, a), (_, b)) in eager.named_buffers().iter().zip(&compiled.named_buffers()) {
        assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>(), "buffer {name}");
    }
    assert_eq!(compiled.named_buffers()[2].1.item::<i64>(), 3);
    compiled.eval();
    eager.eval();
    let x = Tensor::randn_with(&[2, 1, 6, 6], &g);
    assert_eq!(
        compiled.forward(&x).to_vec::<f32>(),
        eager.forward(&x).to_vec::<f32>(),
        "eval uses the running statistics"
    );
    let e = compiled.explain();
    assert!(e.graph_breaks.is_empty() && e.replays == 2, "{e:?}");
}

/// In-place ops on an intermediate, in inference.
struct InPlace(Linear);

impl Module for InPlace {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.0.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.0.visit_mut(f)
    }
    fn repr(&self) -> String {
        "InPlace".into()
    }
}

impl Forward for InPlace {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let t = h.exp();
        h.add_scalar_(1.0).clamp_(0.0, 2.0);
        // Fused, `exp` would run here and read `h` after the two updates.
        (&t + &h).tanh()
    }
}

#[test]
fn in_place_ops_replay_in_order_and_keep_their_graph_unfused() {
    let _serial = serial();
    manual_seed(17);
    let model = compile(InPlace(Linear::new(5, 6, true)));
    tapir::no_grad(|| {
        for k in 0..3 {
            let x = Tensor::randn_with(&[4, 5], &Generator::new(k));
            let want = model.model().forward(&x);
            assert_eq!(model.forward(&x).to_vec::<f32>(), want.to_vec::<f32>());
        }
    });
    let e = model.explain();
    assert_eq!((e.graphs, e.replays), (1, 2), "{e:?}");
    assert!(e.fused.is_empty(), "{e:?}");
}

/// `sqrt((0.5 h)² + σ(h))`: `square` and `powf(0.5)` fuse with the bits
/// of `powf`'s own 2 and 0.5 cases.
struct Powers(Linear);

impl Module for Powers {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.0.visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.0.visit_mut(f)
    }
    fn repr(&self) -> String {
        "Powers".into()
    }
}

impl Forward for Powers {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        (&(&h * 0.5).square() + &h.sigmoid()).powf(0.5)
    }
}

#[test]
fn square_and_square_root_powers_fuse() {
    let _serial = serial();
    let (eager, compiled) = twins(|| Powers(Linear::new(7, 9, true)));
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[6, 7], &Generator::new(18));
    compiled.forward(&x); // records
    let (want, got) = (eager.forward(&x), compiled.forward(&x));
    assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
    for (m, out) in [(&eager as &dyn Module, &want), (&compiled, &got)] {
        m.zero_grad();
        out.sum().backward();
    }
    for ((name, a), (_, b)) in grads(&eager).iter().zip(&grads(&compiled)) {
        let d = rel_diff(b, a);
        assert!(d <= 1e-6, "grad of {name} differs by {d}");
    }
    assert_eq!(
        compiled.explain().fused,
        vec![vec!["mul", "square", "sigmoid", "add", "powf"]]
    );
}
