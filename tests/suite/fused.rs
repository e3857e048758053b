//! Fused kernels against the compositions they replace, in f64 and f32,
//! with gradients, and by finite differences: residual add + LayerNorm and
//! GELU's one-pass backward (attention has its own file).

use crate::common::max_rel_diff;
use tapir::gradcheck;
use tapir::prelude::*;

/// Both outputs and every gradient of `(s, y) = f(x, r, w, b)` under the
/// loss `sum(s * ws) + sum(y * wy)`.
fn add_norm_run(inputs: &[Tensor; 4], fused: bool) -> Vec<Tensor> {
    let [x, r, w, b] = inputs.each_ref().map(|t| t.detach().requires_grad_(true));
    let d = x.size(-1);
    let (s, y) = if fused {
        x.add_layer_norm(&r, &[d], Some(&w), Some(&b), 1e-5)
    } else {
        let s = &x + &r;
        let y = s.layer_norm(&[d], Some(&w), Some(&b), 1e-5);
        (s, y)
    };
    let weights = |t: &Tensor, lo: f64| {
        let shape: Vec<isize> = t.shape().iter().map(|&n| n as isize).collect();
        Tensor::linspace(lo, 1.5, t.numel())
            .reshape(&shape)
            .to_dtype(t.dtype())
    };
    ((&s * &weights(&s, -0.5)).sum() + (&y * &weights(&y, -1.0)).sum()).backward();
    let mut out = vec![s.detach(), y.detach()];
    out.extend([x, r, w, b].iter().map(|t| t.grad().unwrap()));
    out
}

#[test]
fn add_layer_norm_matches_its_composition_in_f64_and_f32() {
    tapir::manual_seed(21);
    // 600 rows of 96: large enough for the threaded path, with a tail.
    for (dtype, tol) in [(DType::F64, 1e-13), (DType::F32, 2e-6)] {
        let inputs = [
            Tensor::randn(&[4, 150, 96]),
            Tensor::randn(&[4, 150, 96]),
            Tensor::randn(&[96]),
            Tensor::randn(&[96]),
        ]
        .map(|t| t.to_dtype(dtype));
        let fused = add_norm_run(&inputs, true);
        let plain = add_norm_run(&inputs, false);
        let names = ["s", "y", "dx", "dr", "dw", "db"];
        for (name, (f, p)) in names.iter().zip(fused.iter().zip(&plain)) {
            let d = max_rel_diff(f, p);
            assert!(d <= tol, "{dtype} {name}: fused differs by {d:e}");
        }
    }
}

#[test]
fn add_layer_norm_gradients_match_finite_differences() {
    tapir::manual_seed(22);
    let inputs = [
        Tensor::randn(&[3, 5]),
        Tensor::randn(&[3, 5]),
        Tensor::randn(&[5]),
        Tensor::randn(&[5]),
    ]
    .map(|t| t.to_dtype(DType::F64));
    for output in [0, 1] {
        let f = |t: &[Tensor]| {
            let (s, y) = t[0].add_layer_norm(&t[1], &[5], Some(&t[2]), Some(&t[3]), 1e-5);
            // Each output weighted, so every gradient path is exercised.
            if output == 0 { &s * &y } else { y }
        };
        gradcheck(f, &inputs, 1e-6, 1e-7, 1e-5).unwrap_or_else(|e| panic!("output {output}: {e}"));
    }
}

#[test]
fn add_layer_norm_takes_what_the_kernel_does_not_through_the_composition() {
    // A broadcast residual and no affine parameters: the composite path.
    let x = Tensor::randn(&[2, 3, 4]);
    let r = Tensor::randn(&[4]);
    let (s, y) = x.add_layer_norm(&r, &[4], None, None, 1e-5);
    let want = (&x + &r).layer_norm(&[4], None, None, 1e-5);
    assert!(s.allclose(&(&x + &r), 0.0, 0.0) && y.allclose(&want, 0.0, 0.0));
    // A wrong normalized shape is the same one-sentence error as layer_norm's.
    let err = std::panic::catch_unwind(|| x.add_layer_norm(&x, &[5], None, None, 1e-5));
    let msg = *err.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.starts_with(
            "layer_norm: input of shape [2, 3, 4] does not end with normalized shape [5]"
        ),
        "{msg}"
    );
}

/// GELU's backward, one fused pass, against `g * (Φ(x) + x φ(x))` composed
/// from plain ops in f64.
#[test]
fn gelu_backward_matches_its_composition() {
    tapir::manual_seed(23);
    let x = (Tensor::randn(&[2000]) * 3.0)
        .to_dtype(DType::F64)
        .requires_grad_(true);
    let g = Tensor::randn(&[2000]).to_dtype(DType::F64);
    (&x.gelu() * &g).sum().backward();
    let xd = x.detach();
    let cdf = (&(&xd * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0) * 0.5;
    let pdf = (&(&xd * &xd) * -0.5).exp() * (1.0 / (2.0 * std::f64::consts::PI).sqrt());
    let want = &g * &(&cdf + &(&xd * &pdf));
    let d = max_rel_diff(&x.grad().unwrap(), &want);
    assert!(d < 1e-14, "gelu backward differs by {d:e}");
}

/// f32 `erf` and GELU saturate as PyTorch 2.15's do on the CPU
/// (`torch.erf`, `F.gelu` of these values): erf is ±1 from 3.919206 on, so
/// GELU passes large positives through unchanged and large negatives to
/// -0, where the approximation's 2-ulp shortfall gave 9.999999 and -6e-7.
#[test]
fn f32_gelu_and_erf_saturate_as_pytorch() {
    let x = Tensor::from_vec(vec![4.0f32, 5.0, 10.0, 100.0, -10.0, -100.0], &[6]);
    let erf: Vec<f32> = x.erf().to_vec();
    assert_eq!(erf, [1.0, 1.0, 1.0, 1.0, -1.0, -1.0]);
    let gelu: Vec<f32> = x.gelu().to_vec();
    assert_eq!(&gelu[2..4], [10.0, 100.0]);
    for v in &gelu[4..] {
        assert!(
            *v == 0.0 && v.is_sign_negative(),
            "gelu of a large negative is {v}, not -0"
        );
    }
}

/// Dropout on the CPU: one parallel Philox mask, `1 / keep` or 0 per
/// element; its gradient is the same mask; each call draws anew.
#[test]
fn dropout_masks_scale_and_follow_the_generator() {
    let x = Tensor::randn(&[64, 1000]).requires_grad_(true);
    let drop = tapir::nn::Dropout::new(0.25);
    let y = drop.forward(&x);
    y.sum().backward();
    let (xs, ys, gs) = (
        x.to_vec::<f32>(),
        y.to_vec::<f32>(),
        x.grad().unwrap().to_vec::<f32>(),
    );
    let mut dropped = 0;
    for ((&a, &b), &g) in xs.iter().zip(&ys).zip(&gs) {
        if g == 0.0 {
            dropped += 1;
            assert_eq!(b, 0.0);
        } else {
            assert_eq!(g, 1.0 / 0.75);
            assert_eq!(b, a * (1.0 / 0.75));
        }
    }
    let share = dropped as f64 / xs.len() as f64;
    assert!((share - 0.25).abs() < 0.01, "dropped {share}");
    // (Same seed, same mask is checked where no other test draws from the
    // global generator meanwhile: tests/recompute.rs replays dropout.)
    assert_ne!(
        drop.forward(&x).to_vec::<f32>(),
        ys,
        "the next call draws anew"
    );
}

#[test]
fn clip_grad_norm_in_one_job_matches_its_composition() {
    tapir::manual_seed(31);
    // f32 gradients take the one-job path; the same values in f64 take the
    // per-tensor composition.
    let shapes: [&[usize]; 4] = [&[300, 200], &[200], &[70_000], &[3, 5]];
    let make = |dtype: DType| -> Vec<Tensor> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let p = Tensor::zeros(s).to_dtype(dtype).requires_grad_(true);
                let g = Tensor::randn_with(s, &tapir::Generator::new(i as u64)).to_dtype(dtype);
                (&p * &g).sum().backward();
                p
            })
            .collect()
    };
    let (fast, plain) = (make(DType::F32), make(DType::F64));
    let (tf, tp) = (
        tapir::optim::clip_grad_norm_(&fast, 1.0).item::<f64>(),
        tapir::optim::clip_grad_norm_(&plain, 1.0).item::<f64>(),
    );
    assert!((tf - tp).abs() <= 1e-5 * tp, "total norm {tf} vs {tp}");
    for (a, b) in fast.iter().zip(&plain) {
        let d = max_rel_diff(&a.grad().unwrap(), &b.grad().unwrap());
        assert!(d <= 1e-5, "a clipped gradient differs by {d:e}");
    }
    // A NaN gradient makes the norm and every gradient NaN, as in PyTorch.
    let p = Tensor::zeros(&[3]).requires_grad_(true);
    (&p * &Tensor::from_vec(vec![1.0f32, f32::NAN, 2.0], &[3]))
        .sum()
        .backward();
    let q = Tensor::zeros(&[2]).requires_grad_(true);
    q.sum().backward();
    assert!(
        tapir::optim::clip_grad_norm_(&[p, q.clone()], 1.0)
            .item::<f32>()
            .is_nan()
    );
    assert!(q.grad().unwrap().to_vec::<f32>().iter().all(|v| v.is_nan()));
}

/// AdaptiveAvgPool2d whose windows tile the input runs as one average
/// pooling: the mean of each window (its definition), with the gradient of
/// `sum(out * w)` checked by finite differences.
#[test]
fn adaptive_average_pooling_over_equal_windows_is_their_mean() {
    use tapir::nn::{AdaptiveAvgPool2d, Forward};
    let pool = AdaptiveAvgPool2d {
        output_size: (2, 3),
    };
    let x = Tensor::randn_with(&[2, 3, 6, 9], &Generator::new(41)).to_dtype(DType::F64);
    let out = pool.forward(&x);
    assert_eq!(out.shape(), &[2, 3, 2, 3]);
    for (i, j) in [(0, 0), (1, 2), (0, 1)] {
        let window = x
            .narrow(2, 3 * i, 3)
            .narrow(3, 3 * j, 3)
            .mean_dims(&[2, 3], false);
        let got = out.narrow(2, i, 1).narrow(3, j, 1).reshape(&[2, 3]);
        assert!(max_rel_diff(&got, &window) < 1e-14, "window ({i}, {j})");
    }
    let w = Tensor::linspace(-1.0, 2.0, 36)
        .reshape(&[2, 3, 2, 3])
        .to_dtype(DType::F64);
    let f = |t: &[Tensor]| (&pool.forward(&t[0]) * &w).sum();
    if let Err(e) = gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5) {
        panic!("adaptive_avg_pool2d: {e}");
    }
}

/// `addmm_` adds the product where the destination stands (one GEMM on
/// the CPU in f32 and f64) and is `beta * self + alpha * a @ b` otherwise:
/// against the composition, with transposed operands, for a view
/// destination, `beta` 0 over NaN, and a half dtype.
#[test]
fn addmm_in_place_is_the_composition() {
    for dtype in [DType::F64, DType::F32, DType::BF16] {
        let tol = match dtype {
            DType::F64 => 1e-12,
            DType::F32 => 1e-5,
            _ => 1e-2,
        };
        let a = Tensor::randn(&[70, 33]).to_dtype(dtype);
        let b = Tensor::randn(&[50, 33]).to_dtype(dtype).t(); // column-major [33, 50]
        for (beta, alpha) in [(1.0, 1.0), (0.5, -2.0), (0.0, 1.0)] {
            let start = Tensor::randn(&[70, 50]).to_dtype(dtype);
            if beta == 0.0 {
                start.fill_(f64::NAN);
            }
            let want = if beta == 0.0 {
                &a.mm(&b) * alpha
            } else {
                &(&start * beta) + &(&a.mm(&b) * alpha)
            };
            let acc = start.clone();
            acc.addmm_(&a, &b, beta, alpha);
            let d = max_rel_diff(&acc.to_dtype(DType::F64), &want.to_dtype(DType::F64));
            assert!(d < tol, "{dtype} beta {beta} alpha {alpha}: {d}");
        }
        // A strided destination (a column slice) takes the composed path.
        let wide = Tensor::zeros(&[70, 60]).to_dtype(dtype);
        let view = wide.narrow(1, 5, 50);
        view.addmm_(&a, &b, 1.0, 1.0);
        let d = max_rel_diff(&view.to_dtype(DType::F64), &a.mm(&b).to_dtype(DType::F64));
        assert!(d < tol, "{dtype} view: {d}");
        assert_eq!(wide.narrow(1, 0, 5).abs().sum().item::<f64>(), 0.0);
    }
    let msg = crate::common::panic_message(|| {
        Tensor::zeros(&[3, 3]).addmm_(&Tensor::zeros(&[3, 2]), &Tensor::zeros(&[3, 3]), 1.0, 1.0);
    });
    assert!(
        msg.starts_with("addmm_: [3, 3] += [3, 2] @ [3, 3] does not fit"),
        "{msg}"
    );
}
