//! `nn.init` and default initialisations: bounds and statistics follow PyTorch's formulas.

use tapir::nn::init::{self, FanMode};
use tapir::nn::{Conv2d, Embedding, Linear, Module};
use tapir::prelude::*;

fn stats(t: &Tensor) -> (f64, f64, f64, f64) {
    let v: Vec<f64> = t.to_vec();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let (lo, hi) = v
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    (mean, std, lo, hi)
}

#[test]
fn default_inits_follow_pytorch_bounds() {
    manual_seed(0);
    let l = Linear::new(400, 300, true);
    let bound = 1.0 / 400f64.sqrt(); // kaiming_uniform(a=sqrt(5)) reduces to 1/sqrt(fan_in)
    let (_, std, lo, hi) = stats(&l.weight);
    assert!(
        lo >= -bound && hi <= bound && hi > 0.95 * bound,
        "{lo} {hi} vs {bound}"
    );
    assert!((std - bound / 3f64.sqrt()).abs() < 0.02 * bound);
    let (_, _, blo, bhi) = stats(l.bias.as_ref().unwrap());
    assert!(blo >= -bound && bhi <= bound);
    let c = Conv2d::new(8, 16, (3, 3), Conv2dOptions::default(), true);
    let cb = 1.0 / 72f64.sqrt();
    let (_, _, lo, hi) = stats(&c.weight);
    assert!(lo >= -cb && hi <= cb && hi > 0.9 * cb);
    let e = Embedding::new(1000, 64, None);
    let (m, s, _, _) = stats(&e.weight);
    assert!(
        m.abs() < 0.02 && (s - 1.0).abs() < 0.02,
        "N(0,1): mean {m} std {s}"
    );
    assert_eq!(l.num_parameters(), 400 * 300 + 300);
}

#[test]
fn init_functions() {
    manual_seed(1);
    let t = Tensor::zeros(&[256, 512]);
    init::xavier_uniform_(&t, 1.0);
    let a = (6.0f64 / 768.0).sqrt();
    let (_, _, lo, hi) = stats(&t);
    assert!(lo >= -a && hi <= a && hi > 0.98 * a);
    init::xavier_normal_(&t, 2.0);
    let (_, s, _, _) = stats(&t);
    assert!((s - 2.0 * (2.0f64 / 768.0).sqrt()).abs() < 0.01 * s);
    init::kaiming_normal_(&t, 0.0, FanMode::FanOut, "relu");
    let (_, s, _, _) = stats(&t);
    assert!(
        (s - (2.0f64 / 256.0).sqrt()).abs() < 0.01 * s,
        "kaiming fan_out std {s}"
    );
    init::kaiming_uniform_(&t, 0.0, FanMode::FanIn, "relu");
    let (_, _, _, hi) = stats(&t);
    assert!(hi <= (6.0f64 / 512.0).sqrt());
    init::trunc_normal_(&t, 0.0, 1.0, -0.5, 0.5);
    let (_, _, lo, hi) = stats(&t);
    assert!(lo >= -0.5 && hi <= 0.5);
    init::ones_(&t);
    assert_eq!(t.sum().item::<f32>(), (256 * 512) as f32);
    init::constant_(&t, 0.25);
    init::zeros_(&t);
    assert_eq!(t.abs().sum().item::<f32>(), 0.0);
}

#[test]
fn trunc_normal_draws_the_truncated_normal_even_far_in_the_tail() {
    manual_seed(5);
    let t = Tensor::zeros(&[200_000]);
    // N(0, 1) on [1, 3]: mean 1.5100, std 0.4165 (uniform would be 2.0, 0.577).
    init::trunc_normal_(&t, 0.0, 1.0, 1.0, 3.0);
    let (m, s, lo, hi) = stats(&t);
    assert!(
        (m - 1.5100).abs() < 0.005 && (s - 0.4165).abs() < 0.005,
        "mean {m}, std {s}"
    );
    assert!(lo >= 1.0 && hi <= 3.0);
    // Six sigmas out, where drawing and rejecting would take ~1e9 draws a value.
    init::trunc_normal_(&t, 2.0, 0.5, 5.0, 6.0);
    let (m, _, lo, hi) = stats(&t);
    assert!(
        lo >= 5.0 && hi <= 6.0 && m < 5.2,
        "mean {m} in [{lo}, {hi}]"
    );
}

#[test]
fn orthogonal_gives_orthonormal_rows_or_columns() {
    manual_seed(2);
    for shape in [[6usize, 4], [4, 6]] {
        let t = Tensor::zeros(&shape);
        init::orthogonal_(&t, 1.0);
        let g = if shape[0] >= shape[1] {
            t.t().matmul(&t)
        } else {
            t.matmul(&t.t())
        };
        let eye = Tensor::eye(shape[0].min(shape[1]));
        let err = (&g - &eye).abs().max().item::<f32>();
        assert!(err < 1e-5, "{shape:?}: |QᵀQ - I| = {err}");
    }
    assert_eq!(init::calculate_gain("tanh", None), 5.0 / 3.0);
    assert!((init::calculate_gain("leaky_relu", Some(0.2)) - (2.0f64 / 1.04).sqrt()).abs() < 1e-12);
}

#[test]
fn eye_dirac_and_sparse_follow_pytorch() {
    // The nonzero positions torch.nn.init.dirac_ gives a [6, 2, 3, 3]
    // weight in 2 groups, and eye_ of a [3, 4] one.
    let w = Tensor::ones(&[6, 2, 3, 3]);
    init::dirac_(&w, 2);
    let ones: Vec<usize> = w
        .to_vec::<f32>()
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != 0.0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(ones, [4, 31, 58, 85]);
    let e = Tensor::ones(&[3, 4]);
    init::eye_(&e);
    assert_eq!(
        e.to_vec::<f32>(),
        [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    );
    // A Dirac-initialised convolution (same channels, padded) is the identity.
    let conv = Conv2d::new(
        3,
        3,
        (3, 3),
        Conv2dOptions {
            padding: (1, 1),
            ..Default::default()
        },
        false,
    );
    init::dirac_(&conv.weight, 1);
    let x = Tensor::randn(&[2, 3, 5, 6]);
    use tapir::nn::Forward;
    assert!(conv.forward(&x).allclose(&x, 0.0, 1e-6));
    // sparse_: ceil(0.25 * 40) = 10 zeros per column, N(0, 0.05²) elsewhere.
    manual_seed(3);
    let s = Tensor::zeros(&[40, 50]);
    init::sparse_(&s, 0.25, 0.05);
    let zeros = s.eq_scalar(0.0).to_dtype(DType::F32).sum_dims(&[0], false);
    assert_eq!(zeros.to_vec::<f32>(), vec![10.0; 50]);
    let kept: Vec<f64> = s
        .to_vec::<f32>()
        .iter()
        .filter(|v| **v != 0.0)
        .map(|&v| v as f64)
        .collect();
    let std = (kept.iter().map(|v| v * v).sum::<f64>() / kept.len() as f64).sqrt();
    assert!((std - 0.05).abs() < 0.003, "std {std}");
    // Different columns zero different rows.
    let col = |c: isize| s.select(1, c).eq_scalar(0.0).to_vec::<bool>();
    assert!((1..50).any(|c| col(c) != col(0)));
}
