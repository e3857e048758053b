//! Second derivatives: `autograd::grad` with `create_graph`, checked by
//! finite differences of the first derivative (`gradgradcheck`), and every
//! backward tapir lists as twice differentiable run by some case.

use std::collections::BTreeSet;
use tapir::Tensor;
use tapir::autograd::{self, GradOptions, TWICE_DIFFERENTIABLE, grad_with, gradgradcheck};
use tapir::gradcheck;
use tapir::nn::{self, Reduction};
use tapir::profiler::{ProfilerOptions, profile, record_function};

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
                &(&(&a * &b) + &c) * &x[0]
            }),
            vec![t(&[9], 7, -2.5, 2.5)],
        ),
        (
            "selection",
            Box::new(|x: &[Tensor]| {
                let m = &x[0].maximum(&x[1]) * &x[0].minimum(&x[1]);
                let w = Tensor::where_(&x[0].gt_scalar(0.0), &(&x[0] * &x[0]), &x[1]);
                &(&m * &w) + &(&x[0] * &x[0].amax_dim(0, true))
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
