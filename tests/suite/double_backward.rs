//! Second derivatives: `autograd::grad` with `create_graph`, checked by
//! finite differences of the first derivative (`gradgradcheck`), and every
//! backward tapir lists as twice differentiable run by some case.

use std::collections::BTreeSet;
use tapir::autograd::{self, GradOptions, TWICE_DIFFERENTIABLE, grad_with, gradgradcheck};
use tapir::gradcheck;
use tapir::nn::{self, Reduction};
use tapir::profiler::{ProfilerOptions, profile, record_function};
use tapir::{Conv2dOptions, DType, ScatterReduce, Tensor, linalg, special};

/// A deterministic f64 tensor with values in `[lo, hi)`, away from kinks.
fn t(shape: &[usize], seed: usize, lo: f64, hi: f64) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let u = ((i * 7919 + seed * 104_729) % 997) as f64 / 997.0;
            lo + (hi - lo) * u
        })
        .collect();
    Tensor::from_vec(v, shape)
}

type Case = (&'static str, Box<dyn Fn(&[Tensor]) -> Tensor>, Vec<Tensor>);

fn cases() -> Vec<Case> {
    vec![
        (
            "arithmetic",
            Box::new(|x: &[Tensor]| {
                &(&(&x[0] * &x[1]) + &(&x[0] / &x[1])) - &(&x[1] * &x[0].neg())
            }),
            vec![t(&[3, 4], 1, -2.0, 2.0), t(&[4], 2, 0.5, 2.0)],
        ),
        (
            "powers",
            Box::new(|x: &[Tensor]| &x[0].powf(3.0) + &x[0].pow(&x[1])),
            vec![t(&[5], 3, 0.5, 2.0), t(&[5], 4, -1.5, 2.5)],
        ),
        (
            "exp_log_sqrt",
            Box::new(|x: &[Tensor]| &(&x[0].exp() * &x[0].log()) + &(&x[0].sqrt() + &x[0].log1p())),
            vec![t(&[6], 5, 0.3, 3.0)],
        ),
        (
            "smooth_unary",
            Box::new(|x: &[Tensor]| {
                let a = &x[0].tanh() * &x[0].sigmoid();
                let b = &x[0].sin() * &x[0].cos();
                &(&a + &b) * &x[0].erf()
            }),
            vec![t(&[7], 6, -2.0, 2.0)],
        ),
        (
            "activations",
            Box::new(|x: &[Tensor]| {
                let a = &x[0].relu() + &x[0].leaky_relu(0.1);
                let b = &x[0].gelu() + &x[0].silu();
                let c = &x[0].clamp(-1.0, 1.0) + &x[0].abs();
                let d = (&x[0] * 2.0).hardswish(); // kinks at ±3 inside the range
                &(&(&(&a * &b) + &c) * &x[0]) + &(&d * &d)
            }),
            vec![t(&[9], 7, -2.5, 2.5)],
        ),
        (
            "selection",
            Box::new(|x: &[Tensor]| {
                let m = &x[0].maximum(&x[1]) * &x[0].minimum(&x[1]);
                let w = Tensor::where_(&x[0].gt_scalar(0.0), &(&x[0] * &x[0]), &x[1]);
                let extremes = &(&x[0] * &x[0].amax_dim(0, true)) + &x[1].amin_dim(1, true);
                &(&(&m * &w) + &extremes) + &x[1].prod_dim(0, true)
            }),
            vec![t(&[4, 3], 8, -2.0, 2.0), t(&[4, 3], 9, -2.0, 2.0)],
        ),
        (
            "shapes",
            Box::new(|x: &[Tensor]| {
                let a = x[0]
                    .reshape(&[2, 3, 2])
                    .permute(&[2, 0, 1])
                    .transpose(0, 1)
                    .contiguous();
                let b = a.unsqueeze(1).expand(&[2, 2, 2, 3]).sum_dim(1, false);
                let b = b.unsqueeze(0).squeeze_dim(0).unsqueeze(3).squeeze();
                let c = Tensor::cat(&[&b.narrow(2, 1, 2), &b], 2);
                let parts = c.split(2, 2);
                &(&parts[0] * &parts[1]).sum_dim(1, false) * &x[0].sum()
            }),
            vec![t(&[12], 10, -1.0, 1.0)],
        ),
        (
            "signs",
            Box::new(|x: &[Tensor]| &(&x[0].copysign(&x[1]) * &x[0]) * &x[1]),
            vec![t(&[6], 41, 0.2, 2.0), t(&[6], 42, -2.0, 2.0)],
        ),
        (
            "windows",
            Box::new(|x: &[Tensor]| {
                // Windows 0..4, 3..7, 6..10 overlap at 3 and 6.
                let w = x[0].unfold(0, 4, 3);
                (&(&w * &w) * &w).sum_dim(1, false)
            }),
            vec![t(&[10], 40, -1.0, 1.0)],
        ),
        (
            "matmul_linear",
            Box::new(|x: &[Tensor]| {
                let h = nn::linear(&x[0], &x[1], Some(&x[2])).tanh();
                let y = h.matmul(&x[1]);
                (&y * &y).sum_dim(1, false)
            }),
            vec![
                t(&[3, 4], 11, -1.0, 1.0),
                t(&[4, 4], 12, -0.5, 0.5),
                t(&[4], 13, -0.5, 0.5),
            ],
        ),
        (
            "softmax_losses",
            Box::new(|x: &[Tensor]| {
                let p = x[0].softmax(-1);
                let target = Tensor::from_vec(vec![2i64, 0, 1], &[3]);
                let ce = nn::cross_entropy(&x[0], &target);
                let mse = nn::mse_loss(&p, &x[1], Reduction::Mean);
                &(&ce + &mse) + &(&x[0].log_softmax(0) * &x[1]).mean()
            }),
            vec![t(&[3, 4], 14, -2.0, 2.0), t(&[3, 4], 15, 0.0, 1.0)],
        ),
        (
            "logsumexp_rows",
            Box::new(|x: &[Tensor]| {
                // The last dim: the fused row kernel; dim 0: the composition.
                let rows = x[0].logsumexp(&[-1], true);
                let cols = x[0].logsumexp(&[0], false);
                &(&rows * &x[0]) + &(&cols * &x[0].sin())
            }),
            vec![t(&[3, 20], 17, -3.0, 3.0)],
        ),
        (
            "norms",
            Box::new(|x: &[Tensor]| {
                let n2 = x[0].norm_dims(2.0, &[1], true);
                let n3 = x[0].norm_dims(3.0, &[0], false);
                &(&x[0] / &n2) * &(&n3 + x[0].abs().rsqrt())
            }),
            vec![t(&[3, 4], 16, 0.2, 2.0)],
        ),
        (
            "layer_norm",
            Box::new(|x: &[Tensor]| {
                let y = x[0].layer_norm(&[4], Some(&x[1]), Some(&x[2]), 1e-5);
                let z = x[0].add_layer_norm(&y, &[4], None, None, 1e-5).1;
                &(&y * &y) + &z.tanh()
            }),
            vec![
                t(&[3, 4], 17, -2.0, 2.0),
                t(&[4], 18, 0.5, 1.5),
                t(&[4], 19, -0.5, 0.5),
            ],
        ),
        (
            "convolutions",
            Box::new(|x: &[Tensor]| {
                let opts = Conv2dOptions::default().padding(1).stride(2);
                let y = x[0].conv2d(&x[1], Some(&x[2]), opts).tanh();
                let z = y.conv_transpose2d(&x[1], None, opts, (1, 1));
                &(&z * &z).sum() + &(&y * &y).sum()
            }),
            vec![
                t(&[2, 2, 5, 5], 20, -1.0, 1.0),
                t(&[3, 2, 3, 3], 21, -0.5, 0.5),
                t(&[3], 22, -0.2, 0.2),
            ],
        ),
        (
            "maml_conv_block",
            Box::new(|x: &[Tensor]| {
                // MAML's backbone block: conv, batch norm (batch statistics), relu, max pool.
                let y = x[0].conv2d(&x[1], None, Conv2dOptions::default().padding(1));
                let y = nn::batch_norm(&y, None, None, Some(&x[2]), None, true, 0.1, 1e-5).relu();
                let y = nn::max_pool2d(&y, (2, 2), (2, 2), (0, 0), (1, 1), false);
                (&y * &y).sum_dim(1, false)
            }),
            vec![
                t(&[2, 2, 4, 4], 23, -1.0, 1.0),
                t(&[3, 2, 3, 3], 24, -0.5, 0.5),
                t(&[3], 25, 0.5, 1.5),
            ],
        ),
        (
            "attention_embedding",
            Box::new(|x: &[Tensor]| {
                let ids = Tensor::from_vec(vec![2i64, 0, 2, 1], &[4]);
                let h = x[0].embedding(&ids).reshape(&[1, 2, 4, 2]); // [batch, heads, L, E]
                let q = h.matmul(&x[1]);
                let causal = nn::scaled_dot_product_attention(&q, &h, &h, None, 0.0, true, None);
                let full =
                    nn::scaled_dot_product_attention(&h, &q, &q, None, 0.0, false, Some(0.7));
                &causal * &full
            }),
            vec![t(&[3, 4], 26, -1.0, 1.0), t(&[2, 2], 27, -1.0, 1.0)],
        ),
        (
            "more_unary",
            Box::new(|x: &[Tensor]| {
                let a = &(&x[0].tan() * &x[0].atan()) + &(&x[0].sinh() * &x[0].cosh());
                let b = &(&x[0].expm1() + &x[0].asin()) * &(&x[0].acos() + &x[0].atanh());
                let c = &x[1].asinh() * &x[1].acosh();
                &(&(&a * &b).cumsum(0) + &c) * &x[0]
            }),
            vec![t(&[5], 31, -0.8, 0.8), t(&[5], 32, 1.2, 2.0)],
        ),
        (
            "composites",
            Box::new(|x: &[Tensor]| {
                // Layers PyTorch users reach for, built from listed ops.
                let a = &(&x[0].elu(1.0) + &x[0].mish()) * &(&x[0].softplus() + &x[0].logsigmoid());
                let img = a.reshape(&[1, 2, 2, 4]);
                let g = nn::group_norm(&img, 1, None, None, 1e-5);
                let p = nn::avg_pool2d(&g, (2, 2), (2, 2), (0, 0), false, true, None);
                let loss = nn::smooth_l1_loss(&a, &x[0].flip(&[1]), Reduction::Mean, 0.5);
                &p.sum() + &loss
            }),
            vec![t(&[2, 8], 33, -1.5, 1.5)],
        ),
        (
            "special_and_order",
            Box::new(|x: &[Tensor]| {
                let p = x[0].abs();
                let a = &(&(&p + 0.5).lgamma() + &(&p + 0.5).digamma()) * &x[0].erfc();
                let b = &(&p.log2() + &p.log10()) * &(&x[0].exp2() + &x[0].atan2(&x[1]));
                let c = &x[0].xlogy(&p) + &x[0].fmod(&Tensor::from_vec(vec![2.5f64], &[1]));
                let row = &(&a + &b) + &c; // [2, 4]
                let sorted = &row.sort(1, true).0 * &row.topk(2, 1, false).0.sum_dim(1, true);
                let (m, _) = row.max_dim(1, true);
                let (n, _) = row.min_dim(0, true);
                let idx = Tensor::from_vec(vec![1i64, 0, 1, 0, 0, 1, 1, 0], &[2, 4]);
                let spread = Tensor::zeros(&[2, 4])
                    .to_dtype(tapir::DType::F64)
                    .scatter_add(0, &idx, &row);
                let at = Tensor::from_vec(vec![3i64, 1], &[2, 1]);
                let placed = row.scatter(1, &at, &(&m * 2.0));
                &(&(&sorted * &m) + &(&n * &spread)) + &placed
            }),
            vec![t(&[2, 4], 34, -1.5, 1.5), t(&[2, 4], 35, 0.5, 1.5)],
        ),
        (
            "special_functions",
            Box::new(|x: &[Tensor]| {
                let (p, u) = (&x[0].abs() + 0.5, x[0].sigmoid());
                let a = &(&p.polygamma(1) + &(&x[0] * 0.5).erfinv()) * &x[0].i0();
                let b = &(&special::i0e(&x[0]) + &special::i1(&x[0])) * &special::i1e(&x[0]);
                let c = &(&special::ndtri(&u) + &special::log_ndtr(&x[0])) * &special::erfcx(&x[0]);
                let d = &special::entr(&p) + &special::xlog1py(&x[0], &p);
                let z = special::zeta(&Tensor::from_vec(vec![2.5f64], &[1]), &(&p + 1.0));
                let r = x[0].remainder(&Tensor::from_vec(vec![2.5f64], &[1]));
                let e = &(&x[0].hypot(&p) * &x[0].sinc()) + &u.logit(None);
                &(&(&(&a + &b) * &(&c + &d)) + &(&z * &r)) + &e
            }),
            vec![t(&[6], 36, -1.5, 1.5)],
        ),
        (
            "indexing_and_linalg",
            Box::new(|x: &[Tensor]| {
                let rows = x[0].unbind(0);
                let one = Tensor::from_vec(vec![1i64], &[1]);
                let copied = x[0].index_copy(0, &one, &rows[0].unsqueeze(0).flip(&[1]));
                let filled = copied.index_fill(1, &one, 0.5);
                let idx = Tensor::from_vec(vec![0i64, 1, 0, 1, 2, 0, 2, 1, 0], &[3, 3]);
                let src = &(&x[0] * 1.3) + 0.1; // no ties with `filled`
                let amax = filled.scatter_reduce(1, &idx, &src, ScatterReduce::Amax, true);
                let m = x[0].narrow(1, 0, 3);
                let spd = &m.matmul(&m.t()) + &(&Tensor::eye(3).to_dtype(DType::F64) * 3.0);
                let sol = &linalg::solve(&spd, &m) + &linalg::inv(&spd);
                let factors = &linalg::cholesky(&spd, false) + &linalg::eigh(&spd).0.unsqueeze(0); // eigenvectors' signs are a convention
                let logdet = &linalg::slogdet(&spd).1 + &linalg::det(&spd).log();
                let well = &x[0] + &(&Tensor::eye(3).to_dtype(DType::F64) * 2.5); // far from singular
                let spectral = &linalg::svd(&well, false).1.sum() + &linalg::pinv(&well).sum();
                let mix = &(&sol * &factors).sum() * &(&logdet + &spectral);
                &(&(&amax * &rows[1].sum()) + &mix) + &rows[2].sum()
            }),
            vec![t(&[3, 3], 37, -1.5, 1.5)],
        ),
        (
            "factorizations",
            Box::new(|x: &[Tensor]| {
                let eye = |n| Tensor::eye(n).to_dtype(DType::F64);
                let tall = &x[0] + &Tensor::cat(&[&(&eye(3) * 2.0), &eye(3).narrow(0, 0, 1)], 0);
                let wide = tall.t();
                let (q, r) = linalg::qr(&tall, linalg::QrMode::Reduced);
                let (qw, rw) = linalg::qr(&wide, linalg::QrMode::Reduced);
                let qrs = &(&q.sum_dim(0, true) * &r.sum_dim(1, false))
                    + &(&qw * &rw.narrow(1, 0, 3)).sum();
                let (_, l, u) = linalg::lu(&tall);
                let (_, lw, uw) = linalg::lu(&wide);
                let square = tall.narrow(0, 0, 3);
                let (lu, pivots) = linalg::lu_factor(&square);
                let b = x[0].narrow(0, 1, 3);
                let solved = linalg::lu_solve(&lu, &pivots, &b);
                let lus =
                    &(&(&l * &l).sum() * &uw.sum()) + &(&(&lw.sum() * &u.sum()) + &solved.sum());
                let upper = square.triu(0);
                let right = linalg::solve_triangular(&upper, &b.t(), true, false, false);
                let unit = linalg::solve_triangular(&square, &b, false, true, true);
                let tri = &right.sum() * &unit;
                &(&qrs + &lus) * &tri.sum()
            }),
            vec![t(&[4, 3], 38, -0.4, 0.4)],
        ),
        (
            "piecewise_constant_and_index_adds",
            Box::new(|x: &[Tensor]| {
                // Values between 1.1 and 2.4: no rounding flips within a step.
                let steps = &(&(&x[0].floor() + &x[0].ceil()) + &x[0].round()) + &x[0].trunc();
                let flat = &(&steps * &x[0]) + &(&x[0].sign() * &x[0] * &x[0]);
                let idx = Tensor::from_vec(vec![2i64, 0, 2], &[3]);
                let added = flat.index_add(
                    0,
                    &idx,
                    &(&x[0].narrow(0, 0, 3) * &x[0].narrow(0, 1, 3)),
                    0.5,
                );
                let at = Tensor::from_vec(vec![1i64, 3], &[2]);
                let blanked = (&added * &added).scatter_scalar(0, &at, 0.25);
                &blanked * &x[0].exp()
            }),
            vec![t(&[5], 39, 1.1, 2.4)],
        ),
        (
            "gradient_of_slices_inside",
            Box::new(|x: &[Tensor]| {
                // A gradient taken inside the function: its narrow, split and
                // select backwards are in the graph the checks differentiate.
                // Finite differences call it under `no_grad` on plain
                // tensors: then it differentiates with respect to a fresh leaf.
                tapir::enable_grad(|| {
                    let x = match x[0].requires_grad() {
                        true => x[0].clone(),
                        false => x[0].detach().requires_grad_(true),
                    };
                    let cube = &(&x.narrow(0, 1, 3).powf(3.0).sum()
                        + &x.split(2, 0)[1].sin().sum())
                        + &x.select(0, 4).exp();
                    let g = grad_with(&[&cube], &[&x], create_graph(vec![]))
                        .remove(0)
                        .unwrap();
                    &(&g * &g) * &x
                })
            }),
            vec![t(&[5], 40, -1.0, 1.0)],
        ),
    ]
}

/// The backward nodes a `create_graph` backward of `out` runs.
fn backwards_run(out: &Tensor, leaves: &[Tensor]) -> BTreeSet<String> {
    let refs: Vec<&Tensor> = leaves.iter().collect();
    let opts = GradOptions {
        grad_outputs: vec![Tensor::ones(out.shape()).to_dtype(out.dtype())],
        create_graph: true,
        allow_unused: true,
        ..Default::default()
    };
    let p = profile(ProfilerOptions::default(), || {
        let _mark = record_function("double_backward_case");
        grad_with(&[out], &refs, opts);
    });
    // Other tests run beside this one: keep this thread's events.
    let thread = (p.events().iter())
        .find(|e| e.name == "double_backward_case")
        .map(|e| e.thread)
        .expect("the marker was recorded");
    (p.events().iter())
        .filter(|e| e.thread == thread && e.category == "autograd")
        .map(|e| e.name.clone())
        .collect()
}

#[test]
fn second_derivatives_match_finite_differences_and_cover_the_list() {
    let mut covered = BTreeSet::new();
    for (name, f, inputs) in cases() {
        // A backward may take another path under `create_graph` (recorded
        // ops, not a fused kernel): both must give the first derivative.
        if let Err(e) = gradcheck(&f, &inputs, 1e-6, 1e-6, 1e-5) {
            panic!("{name}: {e}");
        }
        let leaves: Vec<Tensor> = inputs
            .iter()
            .map(|x| x.detach().requires_grad_(true))
            .collect();
        let out = f(&leaves);
        let refs: Vec<&Tensor> = leaves.iter().collect();
        let v = vec![Tensor::ones(out.shape()).to_dtype(out.dtype())];
        let plain = grad_with(
            &[&out],
            &refs,
            GradOptions {
                grad_outputs: v.clone(),
                retain_graph: Some(true),
                ..Default::default()
            },
        );
        let recorded = grad_with(
            &[&out],
            &refs,
            GradOptions {
                grad_outputs: v,
                create_graph: true,
                ..Default::default()
            },
        );
        for (i, (p, r)) in plain.iter().zip(&recorded).enumerate() {
            let (p, r) = (
                p.as_ref().unwrap().to_vec::<f64>(),
                r.as_ref().unwrap().to_vec::<f64>(),
            );
            let close = p
                .iter()
                .zip(&r)
                .all(|(a, b)| (a - b).abs() <= 1e-12 * (1.0 + a.abs()));
            assert!(
                close,
                "{name}: input {i}: create_graph's first derivative {r:?} differs from {p:?}"
            );
        }
        if let Err(e) = gradgradcheck(&f, &inputs, 1e-6, 1e-6, 1e-5) {
            panic!("{name}: {e}");
        }
        covered.extend(backwards_run(&f(&leaves), &leaves));
    }
    covered.extend(casts_differentiate_twice());
    let missing: Vec<_> = (TWICE_DIFFERENTIABLE.iter())
        .filter(|n| !covered.contains(**n))
        .collect();
    assert!(missing.is_empty(), "listed but run by no case: {missing:?}");
    let unlisted: Vec<_> = (covered.iter())
        .filter(|n| !TWICE_DIFFERENTIABLE.contains(&n.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "the cases ran backwards not listed: {unlisted:?}"
    );
}

#[test]
fn grad_returns_without_touching_dot_grad() {
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).requires_grad_(true);
    let w = Tensor::from_vec(vec![0.5f32, -1.0, 2.0], &[3]).requires_grad_(true);
    let y = (&(&x * &w) * &x).sum();
    let g = autograd::grad(&[&y], &[&x]);
    assert_eq!(g[0].to_vec::<f32>(), vec![1.0, -4.0, 12.0]);
    assert!(x.grad().is_none() && w.grad().is_none());
    assert!(!g[0].requires_grad());
}

/// One case of `tests/goldens/double_backward.json` (from
/// `scripts/gen_double_backward_goldens.py`, PyTorch in float64).
pub(crate) struct Golden(serde_json::Value);

impl Golden {
    pub(crate) fn load(case: &str) -> Golden {
        let path = format!("{}/double_backward.json", crate::common::goldens_dir());
        let text = std::fs::read_to_string(&path)
            .expect("tests/goldens/double_backward.json is checked in");
        let all: serde_json::Value = serde_json::from_str(&text).unwrap();
        Golden(all["cases"][case].clone())
    }

    pub(crate) fn tensor(&self, side: &str, key: &str) -> Tensor {
        let v = &self.0[side][key];
        let shape: Vec<usize> = serde_json::from_value(v["shape"].clone()).unwrap();
        let data: Vec<f64> = serde_json::from_value(v["data"].clone()).unwrap();
        Tensor::from_vec(data, &shape)
    }

    /// An input as a leaf that requires grad.
    pub(crate) fn leaf(&self, key: &str) -> Tensor {
        self.tensor("inputs", key).requires_grad_(true)
    }

    pub(crate) fn check(&self, key: &str, got: &Tensor) {
        let want = self.tensor("outputs", key);
        let got = got.reshape(&want.shape().iter().map(|&n| n as isize).collect::<Vec<_>>());
        crate::common::close(key, &got, &want, 1e-12, 1e-9).unwrap();
    }
}

pub(crate) fn create_graph(grad_outputs: Vec<Tensor>) -> GradOptions {
    GradOptions {
        grad_outputs,
        create_graph: true,
        ..Default::default()
    }
}

const MLP_PARAMS: [&str; 6] = ["w0", "b0", "w1", "b1", "w2", "b2"];

#[test]
fn gradient_penalty_matches_pytorch() {
    let g = Golden::load("gradient_penalty");
    let p: Vec<Tensor> = MLP_PARAMS.iter().map(|k| g.leaf(k)).collect();
    let x = g.leaf("x");
    let h = nn::linear(&x, &p[0], Some(&p[1])).tanh();
    let h = nn::linear(&h, &p[2], Some(&p[3])).leaky_relu(0.2);
    let d = nn::linear(&h, &p[4], Some(&p[5]));
    let gx = grad_with(&[&d], &[&x], create_graph(vec![Tensor::ones_like(&d)]))
        .remove(0)
        .unwrap();
    let penalty = (&gx.norm_dims(2.0, &[1], false) - 1.0).powf(2.0).mean();
    g.check("grad_x", &gx);
    g.check("penalty", &penalty);
    // Through `.grad` as a WGAN-GP critic step does: backward accumulates.
    penalty.backward();
    for (k, w) in MLP_PARAMS.iter().zip(&p) {
        let grad = w.grad().unwrap_or_else(|| Tensor::zeros_like(w));
        g.check(&format!("d_{k}"), &grad);
    }
    assert!(x.grad().is_some(), "the penalty depends on x too");
}

#[test]
fn hessian_vector_product_matches_pytorch() {
    let g = Golden::load("hessian_vector_product");
    let names = ["w0", "b0", "w1", "b1"];
    let p: Vec<Tensor> = names.iter().map(|k| g.leaf(k)).collect();
    let x = g.tensor("inputs", "x");
    let target = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4]);
    let h = nn::linear(&x, &p[0], Some(&p[1])).gelu();
    let loss = nn::cross_entropy(&nn::linear(&h, &p[2], Some(&p[3])), &target);
    let refs: Vec<&Tensor> = p.iter().collect();
    let grads = grad_with(&[&loss], &refs, create_graph(vec![]));
    let gv = (grads.iter().zip(&names))
        .map(|(gr, k)| (gr.as_ref().unwrap() * &g.tensor("inputs", &format!("v_{k}"))).sum())
        .reduce(|a, b| &a + &b)
        .unwrap();
    let hv = autograd::grad(&[&gv], &refs);
    g.check("loss", &loss);
    for (k, t) in names.iter().zip(&hv) {
        g.check(&format!("hv_{k}"), t);
    }
}

#[test]
fn physics_informed_residual_matches_pytorch() {
    let g = Golden::load("physics_informed");
    let p: Vec<Tensor> = MLP_PARAMS.iter().map(|k| g.leaf(k)).collect();
    let x = g.leaf("x");
    let h = nn::linear(&x, &p[0], Some(&p[1])).tanh();
    let h = nn::linear(&h, &p[2], Some(&p[3])).tanh();
    let u = nn::linear(&h, &p[4], Some(&p[5]));
    // u'' through two nested create_graph grads: the second runs through
    // the nodes the first recorded.
    let ux = grad_with(&[&u.sum()], &[&x], create_graph(vec![]))
        .remove(0)
        .unwrap();
    let uxx = grad_with(&[&ux.sum()], &[&x], create_graph(vec![]))
        .remove(0)
        .unwrap();
    let residual = (&uxx + &x.sin()).powf(2.0).mean();
    g.check("ux", &ux);
    g.check("uxx", &uxx);
    g.check("residual", &residual);
    let refs: Vec<&Tensor> = p.iter().collect();
    let opts = GradOptions {
        materialize_grads: true,
        ..Default::default()
    };
    for ((k, d), w) in MLP_PARAMS
        .iter()
        .zip(grad_with(&[&residual], &refs, opts))
        .zip(&p)
    {
        let d = d.unwrap();
        assert_eq!(d.shape(), w.shape());
        g.check(&format!("d_{k}"), &d);
    }
}

#[test]
fn grad_of_an_intermediate_and_of_hooked_and_repeated_inputs() {
    let x = Tensor::from_vec(vec![1.0f64, -2.0], &[2]).requires_grad_(true);
    x.register_hook(|g| Some(g * 10.0));
    let h = &x * 3.0;
    let y = (&h * &h).sum();
    // d/dh = 2h; d/dx = 18x, then the hook's x10; x asked twice gets it twice.
    let g = autograd::grad(&[&y], &[&h, &x, &x]);
    assert_eq!(g[0].to_vec::<f64>(), vec![6.0, -12.0]);
    assert_eq!(g[1].to_vec::<f64>(), vec![180.0, -360.0]);
    assert_eq!(g[2].to_vec::<f64>(), vec![180.0, -360.0]);
    assert!(x.grad().is_none());
}

#[test]
fn backward_with_inputs_accumulates_into_those_only() {
    let a = Tensor::from_vec(vec![2.0f64], &[1]).requires_grad_(true);
    let b = Tensor::from_vec(vec![5.0f64], &[1]).requires_grad_(true);
    let y = (&a * &b).sum();
    let opts = autograd::BackwardOptions {
        inputs: vec![b.clone()],
        ..Default::default()
    };
    autograd::backward(&[&y], opts);
    assert_eq!(b.grad().unwrap().to_vec::<f64>(), vec![2.0]);
    assert!(a.grad().is_none());
}

#[test]
fn misuse_panics_name_the_call() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).requires_grad_(true);
    let unused = Tensor::ones(&[3]).requires_grad_(true);
    let msg = crate::common::panic_message(|| {
        autograd::grad(&[&(&x * 2.0).sum()], &[&x, &unused]);
    });
    assert!(
        msg.contains("autograd::grad: input 1 (shape [3]) was not used")
            && msg.contains("allow_unused"),
        "{msg}"
    );
    let plain = Tensor::ones(&[2]);
    let msg = crate::common::panic_message(|| {
        autograd::grad(&[&(&x * &plain).sum()], &[&plain]);
    });
    assert!(
        msg.contains("input 0 (shape [2]) does not require grad"),
        "{msg}"
    );
    let msg = crate::common::panic_message(|| {
        autograd::grad(&[&(&x * 2.0)], &[&x]);
    });
    assert!(
        msg.contains("only for scalar outputs; output 0 has shape [2]"),
        "{msg}"
    );
    // Without retain_graph the first grad frees the graph.
    let y = (&x * &x).sum();
    autograd::grad(&[&y], &[&x]);
    let msg = crate::common::panic_message(|| {
        autograd::grad(&[&y], &[&x]);
    });
    assert!(
        msg.contains("a second time") && msg.contains("SumBackward1"),
        "{msg}"
    );
}

/// A float32 round trip, whose f64 finite differences would see f32's
/// rounding, checked against the closed form instead: `y = Σ x³` computed
/// in f32 at points f32 holds exactly, `∂y/∂x = 3x²`, `∂²(Σ∂y/∂x)/∂x =
/// 6x`. Returns the backwards it ran.
fn casts_differentiate_twice() -> BTreeSet<String> {
    let x = Tensor::from_vec(vec![0.5f64, 1.25, -2.0], &[3]).requires_grad_(true);
    let y = || x.to_dtype(DType::F32).powf(3.0).to_dtype(DType::F64).sum();
    let g = grad_with(&[&y()], &[&x], create_graph(vec![]))
        .remove(0)
        .unwrap();
    assert_eq!(g.to_vec::<f64>(), vec![0.75, 4.6875, 12.0], "3x² in f32");
    let gg = autograd::grad(&[&g.sum()], &[&x]).remove(0);
    assert_eq!(gg.to_vec::<f64>(), vec![3.0, 7.5, -12.0], "6x");
    backwards_run(&y(), std::slice::from_ref(&x))
}
