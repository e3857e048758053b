//! Parameter initialisation (`torch.nn.init`), in place and recording nothing.

use crate::random::{Generator, default_generator};
use crate::{Tensor, no_grad};

/// `(fan_in, fan_out)` as PyTorch computes them: dims 1 and 0 times the
/// receptive field (product of the remaining dims).
pub fn fans(t: &Tensor) -> (usize, usize) {
    assert!(
        t.ndim() >= 2,
        "init: fan in and fan out need a tensor with at least 2 dims, got shape {:?}",
        t.shape()
    );
    let receptive: usize = t.shape()[2..].iter().product();
    (t.shape()[1] * receptive, t.shape()[0] * receptive)
}

/// The recommended gain for a nonlinearity (`nn.init.calculate_gain`).
///
/// ```
/// assert_eq!(tapir_runtime::nn::init::calculate_gain("relu", None), 2f64.sqrt());
/// ```
pub fn calculate_gain(nonlinearity: &str, param: Option<f64>) -> f64 {
    match nonlinearity {
        "linear" | "conv1d" | "conv2d" | "conv3d" | "sigmoid" => 1.0,
        "tanh" => 5.0 / 3.0,
        "relu" => 2f64.sqrt(),
        "leaky_relu" => {
            let slope = param.unwrap_or(0.01);
            (2.0 / (1.0 + slope * slope)).sqrt()
        }
        "selu" => 0.75,
        other => panic!("calculate_gain: unsupported nonlinearity {other}"),
    }
}

/// Which fan Kaiming init scales by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanMode {
    /// Scale by the fan in (preserves the forward variance).
    FanIn,
    /// Scale by the fan out (preserves the backward variance).
    FanOut,
}

/// Fills with draws from `U(low, high)` (`nn.init.uniform_`).
pub fn uniform_(t: &Tensor, low: f64, high: f64) {
    no_grad(|| t.uniform_(low, high));
}

/// Fills with draws from `N(mean, std^2)` (`nn.init.normal_`).
pub fn normal_(t: &Tensor, mean: f64, std: f64) {
    no_grad(|| t.normal_(mean, std));
}

/// Fills with `v` (`nn.init.constant_`).
pub fn constant_(t: &Tensor, v: f64) {
    no_grad(|| t.fill_(v));
}

/// Fills with zeros.
pub fn zeros_(t: &Tensor) {
    constant_(t, 0.0);
}

/// Fills with ones.
pub fn ones_(t: &Tensor) {
    constant_(t, 1.0);
}

/// U(-a, a) with `a = gain * sqrt(6 / (fan_in + fan_out))`.
pub fn xavier_uniform_(t: &Tensor, gain: f64) {
    let (fi, fo) = fans(t);
    let a = gain * (6.0 / (fi + fo) as f64).sqrt();
    uniform_(t, -a, a);
}

/// N(0, std²) with `std = gain * sqrt(2 / (fan_in + fan_out))`.
pub fn xavier_normal_(t: &Tensor, gain: f64) {
    let (fi, fo) = fans(t);
    normal_(t, 0.0, gain * (2.0 / (fi + fo) as f64).sqrt());
}

fn kaiming_std(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) -> f64 {
    let (fi, fo) = fans(t);
    let fan = if mode == FanMode::FanIn { fi } else { fo };
    calculate_gain(nonlinearity, Some(a)) / (fan as f64).sqrt()
}

/// U(-b, b) with `b = gain * sqrt(3 / fan)` (He et al.).
pub fn kaiming_uniform_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) {
    let bound = 3f64.sqrt() * kaiming_std(t, a, mode, nonlinearity);
    uniform_(t, -bound, bound);
}

/// Kaiming (He) normal init (`nn.init.kaiming_normal_`).
pub fn kaiming_normal_(t: &Tensor, a: f64, mode: FanMode, nonlinearity: &str) {
    normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity));
}

/// N(mean, std²) truncated to `[a, b]` (by rejection: the same distribution as PyTorch's).
pub fn trunc_normal_(t: &Tensor, mean: f64, std: f64, a: f64, b: f64) {
    assert!(a < b, "trunc_normal_: a ({a}) must be below b ({b})");
    let g: &Generator = default_generator();
    let mut out = Vec::with_capacity(t.numel());
    while out.len() < t.numel() {
        for z in g.normal(t.numel() - out.len()) {
            let v = mean + std * z;
            if (a..=b).contains(&v) {
                out.push(v);
            }
        }
    }
    let src = Tensor::from_vec(out, t.shape())
        .to(t.device())
        .expect("the tensor's device is in use");
    no_grad(|| t.copy_(&src));
}

/// A (semi-)orthogonal matrix from the QR decomposition of a normal draw,
/// scaled by `gain` (`nn.init.orthogonal_`; dims after the first are flattened).
pub fn orthogonal_(t: &Tensor, gain: f64) {
    assert!(
        t.ndim() >= 2,
        "orthogonal_: needs at least 2 dims, got shape {:?}",
        t.shape()
    );
    let rows = t.shape()[0];
    let cols = t.numel() / rows.max(1);
    let (m, n) = if rows < cols {
        (cols, rows)
    } else {
        (rows, cols)
    };
    // Modified Gram-Schmidt on the columns of an m x n normal matrix (m >= n).
    let z = default_generator().normal(m * n);
    let mut q: Vec<Vec<f64>> = (0..n)
        .map(|j| (0..m).map(|i| z[i * n + j]).collect())
        .collect();
    for j in 0..n {
        let (done, rest) = q.split_at_mut(j);
        let qj = &mut rest[0];
        for qk in done.iter() {
            let dot: f64 = qj.iter().zip(qk).map(|(a, b)| a * b).sum();
            qj.iter_mut().zip(qk).for_each(|(a, b)| *a -= dot * b);
        }
        let norm = qj.iter().map(|v| v * v).sum::<f64>().sqrt();
        qj.iter_mut().for_each(|v| *v /= norm);
    }
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        for c in 0..cols {
            // q is m x n; transpose when the tensor is wide.
            out[r * cols + c] = gain * if rows < cols { q[r][c] } else { q[c][r] };
        }
    }
    let src = Tensor::from_vec(out, t.shape())
        .to(t.device())
        .expect("the tensor's device is in use");
    no_grad(|| t.copy_(&src));
}
