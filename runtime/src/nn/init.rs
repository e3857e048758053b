//! Parameter initialisation (`torch.nn.init`), in place and recording nothing.

use crate::random::default_generator;
use crate::{Tensor, no_grad};
use std::f64::consts::SQRT_2;

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

/// N(mean, std²) truncated to `[a, b]` (`nn.init.trunc_normal_`), as
/// PyTorch draws it: uniform between the normal CDF's values at the bounds,
/// mapped back through the inverse CDF (`erfinv`), then clamped. Any
/// interval works, however far in the tail (rejection would never finish).
///
/// ```
/// use tapir_runtime::{nn::init, Tensor};
/// let w = Tensor::zeros(&[1000]);
/// init::trunc_normal_(&w, 0.0, 1.0, 4.0, 5.0);
/// assert!(w.min().item::<f32>() >= 4.0 && w.max().item::<f32>() <= 5.0);
/// ```
pub fn trunc_normal_(t: &Tensor, mean: f64, std: f64, a: f64, b: f64) {
    assert!(a < b, "trunc_normal_: a ({a}) must be below b ({b})");
    let cdf = |x: f64| (1.0 + tapir_kernels::Float::erf((x - mean) / std / SQRT_2)) / 2.0;
    no_grad(|| {
        // In f64 whatever `t`'s dtype: beyond about 5 sigmas the CDF's
        // values are 1 in f32, and every draw would land on the bound.
        let u = Tensor::zeros_on(t.shape(), crate::DType::F64, t.device());
        u.uniform_(2.0 * cdf(a) - 1.0, 2.0 * cdf(b) - 1.0);
        let drawn = &(&u.erfinv() * (std * SQRT_2)) + mean;
        t.copy_(&drawn.clamp(a, b));
    });
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
    fill_from(t, out);
}

/// Writes `values` (row-major, `t`'s shape) into `t`, outside autograd.
fn fill_from(t: &Tensor, values: Vec<f64>) {
    let src = Tensor::from_vec(values, t.shape())
        .to(t.device())
        .expect("the tensor's device is in use");
    no_grad(|| t.copy_(&src));
}

/// The identity matrix in a 2-D tensor, ones on the main diagonal of a
/// rectangular one (`nn.init.eye_`).
///
/// ```
/// use tapir_runtime::{nn::init, Tensor};
/// let w = Tensor::zeros(&[2, 3]);
/// init::eye_(&w);
/// assert_eq!(w.to_vec::<f32>(), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
/// ```
pub fn eye_(t: &Tensor) {
    assert!(
        t.ndim() == 2,
        "eye_: only 2-D tensors are supported, got shape {:?}",
        t.shape()
    );
    let cols = t.shape()[1];
    fill_from(
        t,
        (0..t.numel())
            .map(|i| f64::from(u8::from(i / cols == i % cols)))
            .collect(),
    );
}

/// The Dirac delta in a `[out, in, *spatial]` convolution weight, so the
/// convolution keeps its input (`nn.init.dirac_`): with `groups`, each
/// group's first `min(out / groups, in)` output channels pass the input
/// channel of their index at the kernel's centre.
///
/// ```
/// use tapir_runtime::{nn::init, Tensor};
/// let w = Tensor::ones(&[2, 2, 3]);
/// init::dirac_(&w, 1);
/// assert_eq!(w.to_vec::<f32>(), [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
/// ```
pub fn dirac_(t: &Tensor, groups: usize) {
    let s = t.shape();
    assert!(
        (3..=5).contains(&t.ndim()) && groups > 0 && s[0].is_multiple_of(groups),
        "dirac_: expects a 3-, 4- or 5-D weight whose dim 0 divides into {groups} groups, got shape {s:?}"
    );
    let per_group = s[0] / groups;
    let kernel: usize = s[2..].iter().product();
    // The centre tap's offset inside one [*spatial] kernel.
    let centre = s[2..].iter().fold(0, |at, &k| at * k + k / 2);
    let mut out = vec![0.0; t.numel()];
    for g in 0..groups {
        for d in 0..per_group.min(s[1]) {
            out[((g * per_group + d) * s[1] + d) * kernel + centre] = 1.0;
        }
    }
    fill_from(t, out);
}

/// A sparse 2-D matrix (`nn.init.sparse_`): N(0, std²) values, with
/// `ceil(sparsity * rows)` entries of every column, chosen at random,
/// set to zero.
///
/// ```
/// use tapir_runtime::{nn::init, Tensor};
/// let w = Tensor::zeros(&[10, 4]);
/// init::sparse_(&w, 0.3, 0.01);
/// let zeros = w.eq_scalar(0.0).to_dtype(tapir_runtime::DType::F32).sum_dims(&[0], false);
/// assert_eq!(zeros.to_vec::<f32>(), [3.0; 4]);
/// ```
pub fn sparse_(t: &Tensor, sparsity: f64, std: f64) {
    assert!(
        t.ndim() == 2 && (0.0..=1.0).contains(&sparsity),
        "sparse_: expects a 2-D tensor and a sparsity in [0, 1], got shape {:?} and {sparsity}",
        t.shape()
    );
    let (rows, cols) = (t.shape()[0], t.shape()[1]);
    let zeros = (sparsity * rows as f64).ceil() as usize;
    let g = default_generator();
    let mut out: Vec<f64> = g.normal(rows * cols).into_iter().map(|z| z * std).collect();
    let keys = g.uniform(rows * cols);
    for c in 0..cols {
        // A random permutation of the rows: sort by a uniform key each.
        let mut order: Vec<usize> = (0..rows).collect();
        order.sort_by(|&a, &b| keys[a * cols + c].total_cmp(&keys[b * cols + c]));
        for &r in &order[..zeros] {
            out[r * cols + c] = 0.0;
        }
    }
    fill_from(t, out);
}
