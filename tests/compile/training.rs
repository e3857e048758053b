//! Compiled models train as eager ones: outputs, gradients, trajectories,
//! signatures (shapes, eval, autocast), dynamic batch sizes, batch norm and
//! checkpointed regions.

use super::*;

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
        assert_same_grads(
            (&eager, &out_e),
            (&compiled, &out_c),
            |out| cross_entropy(&out.reshape(&[-1, V as isize]), &y),
            1e-6,
            &format!("step {step}"),
        );
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
        assert_same_grads(
            (&eager, &eager.forward(&x)),
            (&compiled, &compiled.forward(&x)),
            |y| y.square().sum(),
            0.0,
            "bit for bit",
        );
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
        assert_same_grads(
            (&eager, &eager.forward(&x)),
            (&compiled, &compiled.forward(&x)),
            |y| y.square().sum(),
            0.0,
            "bit for bit",
        );
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

/// A model whose forward ends in its loss: a linear layer, then cross
/// entropy with class weights, label smoothing and an ignored class against
/// targets it holds as a buffer.
struct WithLoss {
    lin: Linear,
    target: Tensor,
    options: CrossEntropyOptions,
}

impl Module for WithLoss {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.lin.visit(f);
        f("target", &self.target, TensorKind::Buffer);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.lin.visit_mut(f);
        f("target", &mut self.target, TensorKind::Buffer);
    }
    fn repr(&self) -> String {
        "WithLoss".into()
    }
}

impl Forward for WithLoss {
    fn forward(&self, x: &Tensor) -> Tensor {
        cross_entropy_with(&self.lin.forward(x), &self.target, &self.options)
    }
}

#[test]
fn a_cross_entropy_inside_the_forward_replays_with_its_options() {
    let _serial = serial();
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let make = || {
            manual_seed(4);
            WithLoss {
                lin: Linear::new(6, 5, true),
                target: Tensor::from_vec(vec![0i64, 3, 1, 4, 1, 2, 0, 3], &[8]),
                options: CrossEntropyOptions {
                    weight: Some(Tensor::from_vec(vec![1.0f32, 0.5, 2.0, 1.5, 0.25], &[5])),
                    ignore_index: 1,
                    reduction,
                    label_smoothing: 0.1,
                },
            }
        };
        let eager = make();
        let opts = CompileOptions {
            fullgraph: true,
            ..CompileOptions::default()
        };
        let compiled = compile_with(make(), opts);
        let g = Generator::new(5);
        for _ in 0..3 {
            let x = Tensor::randn_with(&[8, 6], &g);
            let le = eager.forward(&x);
            let lc = compiled.try_forward(&x).expect("no graph break");
            let what = format!("{reduction:?}: the loss, bit for bit");
            assert_eq!(le.to_vec::<f32>(), lc.to_vec::<f32>(), "{what}");
            assert_same_grads((&eager, &le), (&compiled, &lc), |l| l.sum(), 0.0, &what);
        }
        let e = compiled.explain();
        assert!(e.graphs == 1 && e.graph_breaks.is_empty(), "{e:?}");
        assert_eq!(
            e.replays, 2,
            "the first call records, the next two replay: {e:?}"
        );
    }
}

/// A forward over the slices of a dim (an RNN's time steps).
struct Slices(Linear);

module_of_linear!(Slices);

impl Forward for Slices {
    fn forward(&self, x: &Tensor) -> Tensor {
        let c = self.0.forward(x).unbind(1);
        Tensor::stack(&[&(&c[0] * &c[3]), &(&c[1] - &c[2]).tanh()], 1)
    }
}

/// `unbind` replays as one op with one output per slice, and its one
/// backward node gives eager's gradients bit for bit.
#[test]
fn unbind_replays_with_eagers_outputs_and_gradients() {
    let _serial = serial();
    let (eager, compiled) = twins(|| Slices(Linear::new(3, 4, true)));
    let compiled = compile(compiled);
    let x = Tensor::randn_with(&[5, 3], &Generator::new(8));
    let _ = compiled.forward(&x); // records
    let (out_e, out_c) = (eager.forward(&x), compiled.forward(&x));
    assert_eq!(out_e.to_vec::<f32>(), out_c.to_vec::<f32>());
    assert_same_grads(
        (&eager, &out_e),
        (&compiled, &out_c),
        |o| o.sum(),
        0.0,
        "unbind",
    );
    let e = compiled.explain();
    assert_eq!((e.graphs, e.replays), (1, 1), "{e:?}");
}

/// Batch norms that average every batch (`momentum=None`, whose weight
/// 1 / count is read when the op runs) and that track nothing, and an
/// instance norm with running statistics: a replay updates them as eager.
#[test]
fn cumulative_and_untracked_norms_replay_as_eager() {
    use tapir::nn::{BatchNorm, InstanceNorm};
    let _serial = serial();
    let make = || {
        Sequential::new()
            .add(Linear::new(6, 6, true))
            .add(BatchNorm::new_1d(4).momentum(None))
            .add(InstanceNorm::new_1d(4, 1e-5, true).track_running_stats(true))
            .add(BatchNorm::new_1d(4).track_running_stats(false))
    };
    let (eager, compiled) = twins(make);
    let compiled = compile(compiled);
    let g = Generator::new(17);
    let batches: Vec<Tensor> = (0..3).map(|_| Tensor::randn_with(&[5, 4, 6], &g)).collect();
    for x in &batches {
        assert_same_grads(
            (&eager, &eager.forward(x)),
            (&compiled, &compiled.forward(x)),
            |y| y.square().sum(),
            0.0,
            "bit for bit",
        );
    }
    let buffers = compiled.named_buffers();
    for ((name, a), (_, b)) in eager.named_buffers().iter().zip(&buffers) {
        assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>(), "buffer {name}");
    }
    assert_eq!(buffers[2].1.item::<i64>(), 3, "{buffers:?}");
    // The cumulative mean is the mean of the three batch means.
    let (w, b) = (&eager.parameters()[0], &eager.parameters()[1]);
    let lin = |x: &Tensor| &x.matmul(&w.t()) + b;
    let means: Vec<Tensor> = batches
        .iter()
        .map(|x| lin(x).mean_dims(&[0, 2], false))
        .collect();
    let want = &(&(&means[0] + &means[1]) + &means[2]) / 3.0;
    assert!(rel_diff(&buffers[0].1, &want) < 1e-5, "{buffers:?}");
    compiled.eval();
    eager.eval();
    let x = Tensor::randn_with(&[2, 4, 6], &g);
    assert_eq!(
        compiled.forward(&x).to_vec::<f32>(),
        eager.forward(&x).to_vec::<f32>(),
        "eval uses the running statistics"
    );
    let e = compiled.explain();
    assert!(e.graph_breaks.is_empty() && e.replays == 2, "{e:?}");
}

/// A hidden layer and a chunked `LinearCrossEntropyLoss` head over a fixed
/// target (a buffer).
struct ChunkedHead {
    lin: Linear,
    head: tapir::nn::LinearCrossEntropyLoss,
    target: Tensor,
}

impl Module for ChunkedHead {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.lin.visit(&mut |n, t, k| f(&format!("lin.{n}"), t, k));
        self.head
            .visit(&mut |n, t, k| f(&format!("head.{n}"), t, k));
        f("target", &self.target, TensorKind::Buffer);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.lin
            .visit_mut(&mut |n, t, k| f(&format!("lin.{n}"), t, k));
        self.head
            .visit_mut(&mut |n, t, k| f(&format!("head.{n}"), t, k));
        f("target", &mut self.target, TensorKind::Buffer);
    }
    fn repr(&self) -> String {
        "ChunkedHead".into()
    }
}

impl Forward for ChunkedHead {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.head.forward(&self.lin.forward(x).relu(), &self.target)
    }
}

/// The chunked path is one recorded op: it replays, forward and backward,
/// bit for bit, in every reduction, without a graph break.
#[test]
fn a_chunked_linear_cross_entropy_replays_as_eager() {
    use tapir::nn::{LinearCrossEntropyLoss, LinearCrossEntropyOptions};
    let _serial = serial();
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        let make = || {
            manual_seed(9);
            let mut head = LinearCrossEntropyLoss::new(6, 11, true);
            head.reduction = reduction;
            head.weight = Some(Tensor::linspace(0.5, 1.5, 11));
            head.options = Some(LinearCrossEntropyOptions {
                batch_chunk_size: Some(3),
                ..Default::default()
            });
            ChunkedHead {
                lin: Linear::new(5, 6, true),
                head,
                target: Tensor::from_vec(vec![0i64, 3, 10, -100, 1, 2, 9, 3], &[8]),
            }
        };
        let eager = make();
        let opts = CompileOptions {
            fullgraph: true,
            ..CompileOptions::default()
        };
        let compiled = compile_with(make(), opts);
        let g = Generator::new(6);
        for _ in 0..3 {
            let x = Tensor::randn_with(&[8, 5], &g);
            let le = eager.forward(&x);
            let lc = compiled.try_forward(&x).expect("no graph break");
            let what = format!("{reduction:?}: the chunked loss, bit for bit");
            assert_eq!(le.to_vec::<f32>(), lc.to_vec::<f32>(), "{what}");
            assert_same_grads((&eager, &le), (&compiled, &lc), |l| l.sum(), 0.0, &what);
        }
        let e = compiled.explain();
        assert!(e.graphs == 1 && e.graph_breaks.is_empty(), "{e:?}");
        assert_eq!(e.replays, 2, "{e:?}");
    }
}
