//! Graph breaks and their reasons, `fullgraph`, fresh random draws on
//! replay, and in-place ops.

use super::*;

/// A forward that branches on a tensor's value.
struct Branchy(Linear);

module_of_linear!(Branchy);

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

/// A forward whose output size depends on the values: `masked_select`.
struct Positives(Linear);

module_of_linear!(Positives);

impl Forward for Positives {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        h.masked_select(&h.gt_scalar(0.0))
    }
}

#[test]
fn nonzero_positions_are_a_host_read_even_for_one_element_or_none() {
    // One output, picked or not: tensors small enough to pass for
    // constants, so only the host read says the graph cannot hold them.
    let _serial = serial();
    manual_seed(4);
    let model = compile(Positives(Linear::new(2, 1, false)));
    let w = model.model().0.weight.detach();
    for sign in [1.0, -1.0, 1.0] {
        let x = &Tensor::ones(&[1, 2]) * sign;
        let h = x.matmul(&w.t());
        let want = h.masked_select(&h.gt_scalar(0.0));
        assert_eq!(model.forward(&x).to_vec::<f32>(), want.to_vec::<f32>());
    }
    let e = model.explain();
    assert_eq!(e.graphs, 0, "{e:?}");
    assert!(
        e.graph_breaks[0].contains("host read (`nonzero`)"),
        "the reason names nonzero: {}",
        e.graph_breaks[0]
    );
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

/// In-place ops on an intermediate, in inference.
struct InPlace(Linear);

module_of_linear!(InPlace);

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

/// Compiles a model made by `make` and runs it three times beside an eager
/// twin on inputs of `shape`: outputs and gradients bit for bit, one graph
/// replayed twice, no graph break.
fn replays_as_eager_without_a_break<M: Module + Forward>(
    make: impl Fn() -> M,
    shape: &[usize],
    what: &str,
) {
    let (eager, compiled) = twins(make);
    let compiled = compile(compiled);
    for step in 0..3 {
        let x = Tensor::randn(shape);
        let (out_e, out_c) = (eager.forward(&x), compiled.forward(&x));
        assert_eq!(
            out_c.to_vec::<f32>(),
            out_e.to_vec::<f32>(),
            "{what}: step {step}"
        );
        assert_same_grads(
            (&eager, &out_e),
            (compiled.model(), &out_c),
            |y| y.square().sum(),
            0.0,
            what,
        );
    }
    let e = compiled.explain();
    assert!(e.graph_breaks.is_empty(), "{what}: {e:?}");
    assert_eq!((e.graphs, e.replays), (1, 2), "{what}: {e:?}");
}

/// A forward of the rearranging copies and rounding ops.
struct Rearranged(Linear);

module_of_linear!(Rearranged);

impl Forward for Rearranged {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let r = &h.flip(&[1]) * &h.roll(&[1, -1], &[0, 1]);
        let t = h.repeat(&[1, 2]).narrow(1, 1, 4);
        &(&r + &t) * &(&h * 3.0).round()
    }
}

#[test]
fn rearranging_and_rounding_ops_replay_without_a_graph_break() {
    let _serial = serial();
    replays_as_eager_without_a_break(
        || Rearranged(Linear::new(3, 4, true)),
        &[5, 3],
        "rearranged",
    );
}

/// A forward that sorts, picks the top entries and sums as it goes.
struct Ordered(Linear);

module_of_linear!(Ordered);

impl Forward for Ordered {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let (top, _) = h.topk(2, 1, true);
        let (sorted, idx) = h.sort(1, false);
        let picked = idx.to_dtype(tapir::DType::F32);
        &(&sorted.cumsum(1) * &picked).sum_dim(1, true) + &top.sum_dim(1, true)
    }
}

#[test]
fn ordering_ops_replay_without_a_graph_break() {
    let _serial = serial();
    replays_as_eager_without_a_break(|| Ordered(Linear::new(3, 5, true)), &[4, 3], "ordered");
}

/// A forward of reductions and constants that each were a graph break:
/// variance, log-sum-exp, norms, max with its index, argmax, an MSE loss, a
/// scatter-add, products, `amin`, `tensor_split`, `unfold`, `copysign`, an
/// integer `&` and tensors made inside the forward.
struct Reductions(Linear);

module_of_linear!(Reductions);

impl Forward for Reductions {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let batch = h.shape()[0];
        let spread = &h.var_dims(&[1], 1, true) + &h.std_dims(&[1], 0, true);
        let lse = h.logsumexp(&[1], true);
        let norms = &h.norm_dims(3.0, &[1], true) + &h.norm(2.0);
        let (top, at) = h.max_dim(1, true);
        let picks = h.argmax(1, true).to_dtype(tapir::DType::F32);
        let target = Tensor::full_on(&[batch, 4], 0.5, tapir::DType::F32, tapir::Device::Cpu);
        let mse = tapir::nn::mse_loss(&h, &target, Reduction::Sum);
        let spread_out = Tensor::zeros(&[batch, 4]).scatter_add(1, &at, &top);
        let pieces = h.tensor_split(3, 1);
        let products = &(&(&h * 0.1) + 1.0).prod_dim(1, true) + &h.prod();
        let extremes = &(&h.amin_dim(1, true) + &pieces[2]) + &(&products * &pieces[0].sum());
        let all = &(&(&(&spread + &lse) + &(&norms + &picks)) + &mse) + &(&spread_out + &h.var());
        let windows = h.unfold(1, 2, 2).sum_dim(2, false).sum_dim(1, true);
        let signed = h.copysign(&pieces[1]);
        let parity = (&h.argmax(1, true) & 1).to_dtype(tapir::DType::F32);
        &(&all + &extremes) + &(&(&windows + &signed) + &parity)
    }
}

#[test]
fn reductions_and_constants_replay_without_a_graph_break() {
    let _serial = serial();
    replays_as_eager_without_a_break(
        || Reductions(Linear::new(3, 4, true)),
        &[5, 3],
        "reductions",
    );
}

/// A forward of the scatter family, its indices computed inside it.
struct Scatters(Linear);

module_of_linear!(Scatters);

impl Forward for Scatters {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let (_, at) = h.max_dim(1, true);
        let rows = at.flatten_all();
        let put = h.scatter(1, &at, &h.narrow(1, 0, 1));
        let filled = h.scatter_scalar(1, &at, 0.5);
        let spread = at.expand(h.shape());
        let top = h.scatter_reduce(1, &spread, &h.square(), tapir::ScatterReduce::Amax, false);
        let mean = h.scatter_reduce(1, &spread, &h, tapir::ScatterReduce::Mean, true);
        let mixer = Tensor::zeros(&[4, 4]).index_add(0, &rows, &h, 1.5);
        let fill = h.index_fill(1, &rows.narrow(0, 0, 1), -1.0);
        let copy = h.index_copy(1, &rows.narrow(0, 0, 1), &h.narrow(1, 3, 1));
        let flat = at.flatten_all();
        let taken = h.take(&flat).reshape(&[-1, 1]);
        let placed = h.put(&flat, &h.narrow(1, 2, 1), true);
        let indexed = h.index_put(&[&flat, &flat], &h.narrow(1, 0, 1).flatten_all(), false);
        let sum = &(&(&put + &filled) + &(&top + &mean)) + &(&fill + &copy);
        &(&sum + &h.matmul(&mixer)) + &(&(&taken + &placed) + &indexed)
    }
}

#[test]
fn scatters_replay_without_a_graph_break() {
    let _serial = serial();
    replays_as_eager_without_a_break(|| Scatters(Linear::new(3, 4, true)), &[5, 3], "scatters");
}

/// A forward through every `torch.linalg` factorization and solve.
struct Decompositions(Linear);

module_of_linear!(Decompositions);

impl Forward for Decompositions {
    fn forward(&self, x: &Tensor) -> Tensor {
        use tapir::linalg::{self, MatrixNorm, QrMode};
        let h = self.0.forward(x); // [5, 4]
        let ht = h.transpose(0, 1);
        let g = &ht.matmul(&h) + &Tensor::eye(4); // symmetric positive definite
        let l = linalg::cholesky(&g, false);
        let (_, logabs) = linalg::slogdet(&g);
        let solved = linalg::solve(&g, &ht).transpose(0, 1);
        let tri = linalg::solve_triangular(&l, &ht, false, true, false).transpose(0, 1);
        let (lu, pivots) = linalg::lu_factor(&g);
        let tri = &tri + &linalg::lu_solve(&lu, &pivots, &ht).transpose(0, 1);
        let (q, r) = linalg::qr(&h, QrMode::Reduced);
        let (w, v) = linalg::eigh(&g);
        let (u, s, vh) = linalg::svd(&h, false);
        let scalars =
            &(&logabs + &w.sum()) + &(&s.sum() + &linalg::matrix_norm(&h, MatrixNorm::Nuclear));
        let mats = &(&h.matmul(&l) + &solved) + &(&tri + &q.matmul(&r));
        let more = &h.matmul(&v) + &(&u * &s.unsqueeze(0)).matmul(&vh);
        &(&mats + &more) + &(&scalars + &linalg::det(&g).log())
    }
}

/// Compiles a twin of `make()`'s model, unfused and then fused, and calls
/// both three times on `[5, 3]` inputs: unfused, the replay is eager bit for
/// bit; fused, the outputs are within `fused_out_tol` relative of eager's
/// and the gradients within 1e-5 (fused elementwise tails round
/// differently). One graph, two replays, no break.
fn assert_replays_as_eager<M: Forward + 'static>(
    make: impl Fn() -> M,
    fused_out_tol: f64,
    what: &str,
) {
    let _serial = serial();
    for fuse in [false, true] {
        let (eager, compiled) = twins(&make);
        let options = CompileOptions {
            fuse,
            ..CompileOptions::default()
        };
        let compiled = compile_with(compiled, options);
        for step in 0..3 {
            let x = Tensor::randn(&[5, 3]);
            let (out_e, out_c) = (eager.forward(&x), compiled.forward(&x));
            let (out_tol, tol) = if fuse {
                (fused_out_tol, 1e-5)
            } else {
                (0.0, 0.0)
            };
            let d = rel_diff(&out_c, &out_e);
            assert!(
                d <= out_tol,
                "{what}, step {step}: the outputs differ by {d}"
            );
            let loss = |y: &Tensor| y.square().sum();
            assert_same_grads(
                (&eager, &out_e),
                (compiled.model(), &out_c),
                loss,
                tol,
                what,
            );
        }
        let e = compiled.explain();
        assert!(e.graph_breaks.is_empty(), "{what}: {e:?}");
        assert_eq!((e.graphs, e.replays), (1, 2), "{what}: {e:?}");
    }
}

/// The fused elementwise tails of linalg's backward formulas (`(X + Xᵀ) ·
/// ½`, `S / E`, ...) leave the forward as eager's.
#[test]
fn linalg_replays_without_a_graph_break() {
    assert_replays_as_eager(|| Decompositions(Linear::new(3, 4, true)), 0.0, "linalg");
}

/// The Bessel functions, the normal distribution's tails and the
/// entropy-like logs after a linear.
struct SpecialFunctions(Linear);

module_of_linear!(SpecialFunctions);

impl Forward for SpecialFunctions {
    fn forward(&self, x: &Tensor) -> Tensor {
        let t = self.0.forward(x).tanh();
        let bessel = &(&t.i0() + &t.i1()) + &(&t.i0e() + &t.i1e());
        let normal = &(&t.erfcx() + &t.ndtr()) + &(&t.log_ndtr() + &(&(&t * 0.4) + 0.5).ndtri());
        let p = &(&t * 0.5) + 0.5;
        let logs = &(&p.entr() + &p.xlogy(&t.exp())) + &p.xlog1py(&t);
        &(&bessel + &normal) + &logs
    }
}

/// The special functions replay as recorded; fused, their forward chains
/// round differently too.
#[test]
fn special_functions_replay_without_a_graph_break() {
    let make = || SpecialFunctions(Linear::new(3, 4, true));
    assert_replays_as_eager(make, 1e-5, "special functions");
}

/// A forward that makes positions, a ramp, an identity and row indices
/// inside itself, each of which was a graph break; the row indices and the
/// ramp over them are as long as the batch.
struct Positions(Linear);

module_of_linear!(Positions);

impl Forward for Positions {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let (batch, n) = (h.shape()[0], h.shape()[1]);
        let f32 = tapir::DType::F32;
        let cols = &Tensor::arange(n as i64).to_dtype(f32) * &Tensor::linspace(-1.0, 1.0, n);
        let odd = Tensor::arange_on((1..2 * n as i64, 2), tapir::Device::Cpu).to_dtype(f32);
        let rows = Tensor::arange_f_on(0.0, batch as f64, 1.0, tapir::Device::Cpu);
        let ramp = Tensor::linspace(0.0, 1.0, batch);
        let rows = (&rows * &ramp).unsqueeze(1);
        let mixed = h.matmul(&(&Tensor::eye(n) * 2.0));
        &(&(&mixed + &cols) + &odd) + &rows
    }
}

#[test]
fn ranges_and_identities_made_inside_replay_without_a_graph_break() {
    let _serial = serial();
    replays_as_eager_without_a_break(|| Positions(Linear::new(3, 4, true)), &[5, 3], "positions");
}

/// A batch-long range follows the batch in a graph generalised over batch
/// sizes: every size after the first two replays the merged graph and
/// equals eager. (The scalar of `eye * 2.0`, a constant made afresh in each
/// call, kept the two recordings from merging until constants were
/// compared by value.)
#[test]
fn a_batch_long_range_follows_the_batch_in_a_dynamic_graph() {
    let _serial = serial();
    let (eager, compiled) = twins(|| Positions(Linear::new(3, 4, true)));
    let compiled = compile(compiled);
    let g = Generator::new(3);
    for batch in [3, 5, 2, 7, 5] {
        let x = Tensor::randn_with(&[batch, 3], &g);
        let (want, got) = (eager.forward(&x), compiled.forward(&x));
        assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>(), "batch {batch}");
    }
    let e = compiled.explain();
    assert!(e.graph_breaks.is_empty(), "{e:?}");
    assert_eq!((e.dynamic_graphs, e.replays), (1, 3), "{e:?}");
}

/// Noise drawn inside a forward (`rand`, `randn`, `randn_on`, `randint`).
struct Noisy(Linear);

module_of_linear!(Noisy);

impl Forward for Noisy {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let shape = h.shape().to_vec();
        let noise = &Tensor::rand(&shape) + &Tensor::randn(&shape);
        let picks = Tensor::randint(-2, 3, &shape).to_dtype(tapir::DType::F32);
        &(&(&h + &noise) * &Tensor::randn_on(&shape, tapir::Device::Cpu)) + &picks
    }
}

#[test]
fn noise_drawn_inside_replays_fresh_draws_as_eager_does() {
    let _serial = serial();
    let (eager, compiled) = twins(|| Noisy(Linear::new(3, 4, true)));
    let compiled = compile(compiled);
    let x = Tensor::ones(&[2, 3]);
    compiled.forward(&x); // records
    manual_seed(10);
    let (a, b) = (compiled.forward(&x), compiled.forward(&x));
    manual_seed(10);
    let (ea, eb) = (eager.forward(&x), eager.forward(&x));
    assert_ne!(a.to_vec::<f32>(), b.to_vec::<f32>(), "a replay draws anew");
    assert_eq!(
        (a.to_vec::<f32>(), b.to_vec::<f32>()),
        (ea.to_vec::<f32>(), eb.to_vec::<f32>()),
        "the same draws as eager from the same seed"
    );
    let e = compiled.explain();
    assert!(e.graph_breaks.is_empty(), "{e:?}");
    assert_eq!(e.replays, 2, "{e:?}");
}

/// An upsampling decoder: transposed convolutions, group and instance
/// norm, an unfold folded back and interpolation (each a graph break
/// before they replayed).
struct Decoder(Sequential);

module_of_linear!(Decoder);

impl Forward for Decoder {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let opts = tapir::Conv2dOptions::default().stride(2);
        let (side_h, side_w) = (h.shape()[2], h.shape()[3]);
        let cols = h.unfold2d((2, 2), opts);
        let h = &h + &cols.fold2d((side_h, side_w), (2, 2), opts);
        use tapir::nn::{InterpolateMode as M, interpolate};
        let up = interpolate(&h, None, Some(&[2.0, 1.5]), M::Bicubic, None);
        let down = interpolate(&up, Some(&[side_h, side_w]), None, M::Area, None);
        &(&h + &down) + &interpolate(&h, Some(&[side_h, side_w]), None, M::Bilinear, Some(true))
    }
}

#[test]
fn upsampling_and_group_norms_replay_without_a_graph_break() {
    use tapir::nn::{ConvTranspose2d, GroupNorm, InstanceNorm};
    let _serial = serial();
    let opts = tapir::Conv2dOptions::default().stride(2).padding(1);
    replays_as_eager_without_a_break(
        || {
            Decoder(
                Sequential::new()
                    .add(ConvTranspose2d::new(3, 4, (3, 3), opts, (1, 1), true))
                    .add(GroupNorm::new(2, 4, 1e-5, true))
                    .add(InstanceNorm::new_2d(4, 1e-5, true)),
            )
        },
        &[2, 3, 3, 4],
        "decoder",
    );
}

/// A convolution, then pools with every option a recorded op carries:
/// ceil_mode, padding left out of the divisor, a divisor override, and an
/// adaptive max pool of uneven windows.
struct Pooled(Sequential);

module_of_linear!(Pooled);

impl Forward for Pooled {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.0.forward(x)
    }
}

#[test]
fn pooling_options_replay_without_a_graph_break() {
    use tapir::nn::{AdaptiveMaxPool2d, AvgPool2d, Conv2d, MaxPool2d};
    let _serial = serial();
    let opts = tapir::Conv2dOptions::default().padding(1);
    replays_as_eager_without_a_break(
        || {
            Pooled(
                Sequential::new()
                    .add(Conv2d::new(2, 3, (3, 3), opts, true))
                    .add(MaxPool2d {
                        stride: (2, 2),
                        padding: (1, 1),
                        ceil_mode: true,
                        ..MaxPool2d::new(3)
                    })
                    .add(AvgPool2d {
                        ceil_mode: true,
                        count_include_pad: false,
                        padding: (1, 1),
                        ..AvgPool2d::new(2)
                    })
                    .add(AvgPool2d {
                        stride: (1, 1),
                        divisor_override: Some(3),
                        ..AvgPool2d::new(2)
                    })
                    .add(AdaptiveMaxPool2d {
                        output_size: (2, 3),
                    }),
            )
        },
        &[2, 2, 10, 12],
        "pools",
    );
}

#[test]
fn volumes_replay_without_a_graph_break() {
    use tapir::nn::{
        AdaptiveAvgPool3d, AvgPool3d, Conv3d, Conv3dOptions, ConvTranspose3d, MaxPool3d,
    };
    let _serial = serial();
    let opts = Conv3dOptions::default().padding(1);
    let up = Conv3dOptions {
        stride: (2, 1, 2),
        groups: 3,
        ..Default::default()
    };
    replays_as_eager_without_a_break(
        || {
            Pooled(
                Sequential::new()
                    .add(Conv3d::new(2, 3, (3, 3, 3), opts, true))
                    .add(MaxPool3d {
                        ceil_mode: true,
                        ..MaxPool3d::new(2)
                    })
                    .add(ConvTranspose3d::new(3, 3, (2, 2, 3), up, (1, 0, 1), true))
                    .add(AvgPool3d {
                        stride: (1, 1, 1),
                        divisor_override: Some(5),
                        ..AvgPool3d::new(2)
                    })
                    .add(AdaptiveAvgPool3d {
                        output_size: (2, 3, 2),
                    }),
            )
        },
        &[2, 2, 5, 6, 7],
        "volumes",
    );
}

/// A forward through the elementwise math: the trigonometric and
/// hyperbolic functions, exp and log bases, logit, atan2, fmod, remainder.
struct Mathy(Linear);

module_of_linear!(Mathy);

impl Forward for Mathy {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.0.forward(x);
        let unit = &h.tanh() * 0.9;
        let positive = &h.abs() + 0.5;
        let a = &(&h.tan() + &unit.asin()) + &(&unit.acos() + &h.atan());
        let b = &(&h.sinh() + &h.cosh()) + &(&h.asinh() + &(&positive + 1.0).acosh());
        let c = &(&unit.atanh() + &h.expm1()) + &(&positive.log2() + &positive.log10());
        let d = &(&h.exp2() + &h.sigmoid().logit(Some(1e-3))) + &h.atan2(&positive);
        let e = &(&h * 5.0).fmod(&positive) + &(&h * 5.0).remainder(&positive);
        &(&(&a + &b) + &(&c + &d)) + &e
    }
}

/// Unfused bit for bit; fused (`expm1` and its neighbours join a fused
/// group, whose backward sums its paths' gradients to `h` in its own
/// order), the forward still bit for bit and the gradients within 1e-5.
#[test]
fn elementwise_math_replays_without_a_graph_break() {
    assert_replays_as_eager(|| Mathy(Linear::new(3, 4, true)), 0.0, "math");
}
