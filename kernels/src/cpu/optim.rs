//! Fused optimizer updates over contiguous parameter buffers, following
//! PyTorch's single-tensor (`foreach=False`) implementations operation for
//! operation, so results match to the last bits that float order allows.

use crate::Float;
use crate::elementwise::{BinaryFn, Maximum, sign};
use crate::optim::{
    AdadeltaStep, AdagradStep, AdamStep, AdamaxStep, AsgdStep, NadamStep, RadamStep, RmspropStep,
    RpropStep, SgdStep, split_weight_decay,
};
use crate::threads::simd;

/// One Adam/AdamW step in place over `p`, with state `m`, `v` (and `vmax` for amsgrad).
pub fn adam_update<T: Float>(
    p: &mut [T],
    g: &[T],
    m: &mut [T],
    v: &mut [T],
    vmax: Option<&mut [T]>,
    h: &AdamStep,
) {
    let c = T::from_f64;
    let (b1, b2) = (c(h.beta1), c(h.beta2));
    let bc1 = 1.0 - h.beta1.powi(h.step as i32);
    let bc2_sqrt = c((1.0 - h.beta2.powi(h.step as i32)).sqrt());
    let step_size = c(h.lr / bc1);
    let (wd, eps) = (c(h.weight_decay), c(h.eps));
    let decay = c(1.0 - h.lr * h.weight_decay);
    let w1 = T::one() - b1;
    let w2 = T::one() - b2;
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    if vmax.is_none() && !h.maximize {
        // The common case without per-element branches, so it vectorises.
        let wd_coupled = if h.decoupled { T::zero() } else { wd };
        let decay = if h.decoupled && h.weight_decay != 0.0 {
            decay
        } else {
            T::one()
        };
        let couple = !h.decoupled && h.weight_decay != 0.0;
        simd(
            #[inline(always)]
            || {
                for (((pi, &gi), mi), vi) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut())
                {
                    let gi = if couple { gi + wd_coupled * *pi } else { gi };
                    *pi = *pi * decay;
                    *mi = *mi + w1 * (gi - *mi);
                    *vi = *vi * b2 + w2 * gi * gi;
                    *pi = *pi - step_size * (*mi / ((*vi).sqrt() / bc2_sqrt + eps));
                }
            },
        );
        return;
    }
    let mut vmax = vmax.map(|s| &mut s[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let mut gi = if h.maximize { -g[i] } else { g[i] };
                if h.weight_decay != 0.0 {
                    if h.decoupled {
                        p[i] = p[i] * decay;
                    } else {
                        gi = gi + wd * p[i];
                    }
                }
                // torch.lerp with weight < 0.5: m + w * (g - m)
                m[i] = m[i] + w1 * (gi - m[i]);
                v[i] = v[i] * b2 + w2 * gi * gi;
                let vv = match vmax.as_deref_mut() {
                    Some(vm) => {
                        vm[i] = vm[i].max(v[i]);
                        vm[i]
                    }
                    None => v[i],
                };
                let denom = vv.sqrt() / bc2_sqrt + eps;
                p[i] = p[i] - step_size * (m[i] / denom);
            }
        },
    )
}

/// One SGD step in place; `buf` is the momentum buffer, `first` when it is
/// being created (PyTorch then sets it to the gradient itself).
pub fn sgd_update<T: Float>(p: &mut [T], g: &[T], buf: Option<&mut [T]>, first: bool, h: &SgdStep) {
    let c = T::from_f64;
    let (lr, mom, damp, wd) = (
        c(h.lr),
        c(h.momentum),
        c(1.0 - h.dampening),
        c(h.weight_decay),
    );
    let n = p.len();
    let g = &g[..n];
    let mut buf = buf.map(|b| &mut b[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let mut d = if h.maximize { -g[i] } else { g[i] };
                if h.weight_decay != 0.0 {
                    d = d + wd * p[i];
                }
                if let Some(b) = buf.as_deref_mut() {
                    b[i] = if first { d } else { b[i] * mom + damp * d };
                    d = if h.nesterov { d + mom * b[i] } else { b[i] };
                }
                p[i] = p[i] - lr * d;
            }
        },
    )
}

/// One RMSprop step in place with state `sq` (square average), `gavg`
/// (centered only) and `buf` (momentum only).
pub fn rmsprop_update<T: Float>(
    p: &mut [T],
    g: &[T],
    sq: &mut [T],
    mut gavg: Option<&mut [T]>,
    mut buf: Option<&mut [T]>,
    h: &RmspropStep,
) {
    let c = T::from_f64;
    let (lr, alpha, eps, wd, mom) = (
        c(h.lr),
        c(h.alpha),
        c(h.eps),
        c(h.weight_decay),
        c(h.momentum),
    );
    let w = T::one() - alpha;
    let n = p.len();
    let (g, sq) = (&g[..n], &mut sq[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let mut gi = if h.maximize { -g[i] } else { g[i] };
                if h.weight_decay != 0.0 {
                    gi = gi + wd * p[i];
                }
                sq[i] = sq[i] * alpha + w * gi * gi;
                let avg = match gavg.as_deref_mut() {
                    Some(ga) => {
                        ga[i] = ga[i] + w * (gi - ga[i]);
                        (sq[i] - ga[i] * ga[i]).sqrt() + eps
                    }
                    None => sq[i].sqrt() + eps,
                };
                match buf.as_deref_mut() {
                    Some(b) => {
                        b[i] = b[i] * mom + gi / avg;
                        p[i] = p[i] - lr * b[i];
                    }
                    None => p[i] = p[i] - lr * (gi / avg),
                }
            }
        },
    )
}

/// The gradient as the update uses it: negated to maximise, plus the L2
/// term `weight_decay * p` when that is not 0 (PyTorch's
/// `grad.add(param, alpha=weight_decay)`).
#[inline(always)]
fn decayed_grad<T: Float>(g: T, p: T, maximize: bool, weight_decay: T) -> T {
    let g = if maximize { -g } else { g };
    if weight_decay != T::zero() {
        g + weight_decay * p
    } else {
        g
    }
}

/// One Adagrad step in place with state `sum` (of squared gradients).
pub fn adagrad_update<T: Float>(p: &mut [T], g: &[T], sum: &mut [T], h: &AdagradStep) {
    let c = T::from_f64;
    let (clr, wd, eps) = (c(h.clr()), c(h.weight_decay), c(h.eps));
    let n = p.len();
    let (g, sum) = (&g[..n], &mut sum[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                sum[i] = sum[i] + gi * gi;
                let std = sum[i].sqrt() + eps;
                p[i] = p[i] - clr * (gi / std);
            }
        },
    )
}

/// One Adadelta step in place with state `sq` (running average of squared
/// gradients) and `acc` (of squared deltas).
pub fn adadelta_update<T: Float>(
    p: &mut [T],
    g: &[T],
    sq: &mut [T],
    acc: &mut [T],
    h: &AdadeltaStep,
) {
    let c = T::from_f64;
    let (lr, rho, eps, wd) = (c(h.lr), c(h.rho), c(h.eps), c(h.weight_decay));
    let w = c(1.0 - h.rho);
    let n = p.len();
    let (g, sq, acc) = (&g[..n], &mut sq[..n], &mut acc[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                sq[i] = sq[i] * rho + w * gi * gi;
                let std = (sq[i] + eps).sqrt();
                let delta = (acc[i] + eps).sqrt() / std * gi;
                acc[i] = acc[i] * rho + w * delta * delta;
                p[i] = p[i] - lr * delta;
            }
        },
    )
}

/// One Adamax step in place with state `m` (first moment) and `u` (the
/// exponentially weighted infinity norm).
pub fn adamax_update<T: Float>(p: &mut [T], g: &[T], m: &mut [T], u: &mut [T], h: &AdamaxStep) {
    let c = T::from_f64;
    let (b2, eps, wd, clr) = (c(h.beta2), c(h.eps), c(h.weight_decay), c(h.clr()));
    // PyTorch's lerp weight `1 - beta1`, computed in f64 and then rounded.
    let w1 = c(1.0 - h.beta1);
    let n = p.len();
    let (g, m, u) = (&g[..n], &mut m[..n], &mut u[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                m[i] = m[i] + w1 * (gi - m[i]);
                // `torch.maximum`: NaN propagates.
                u[i] = Maximum.f(u[i] * b2, gi.abs() + eps);
                p[i] = p[i] - clr * (m[i] / u[i]);
            }
        },
    )
}

/// Adam's moment updates as PyTorch writes them: `exp_avg.lerp_(g, w1)`
/// and `exp_avg_sq.mul_(b2).addcmul_(g, g, value=w2)`.
#[inline(always)]
fn adam_moments<T: Float>(m: T, v: T, g: T, w1: T, (b2, w2): (T, T)) -> (T, T) {
    (m + w1 * (g - m), v * b2 + w2 * g * g)
}

/// One NAdam step in place with state `m` and `v` (first and second moments).
pub fn nadam_update<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], h: &NadamStep) {
    let c = T::from_f64;
    let s = h.scalars();
    let (b2, eps) = (c(h.beta2), c(h.eps));
    let (w1, w2) = (c(1.0 - h.beta1), c(1.0 - h.beta2));
    let (grad_coef, avg_coef, bc2) = (c(s.grad_coef), c(s.avg_coef), c(s.bias_correction2));
    let (l2, decay) = split_weight_decay(h.lr, h.weight_decay, h.decoupled);
    let (wd, decay) = (c(l2), c(decay));
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                p[i] = p[i] * decay; // exactly p when not decoupled
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                (m[i], v[i]) = adam_moments(m[i], v[i], gi, w1, (b2, w2));
                let denom = (v[i] / bc2).sqrt() + eps;
                p[i] = p[i] + grad_coef * (gi / denom);
                p[i] = p[i] + avg_coef * (m[i] / denom);
            }
        },
    )
}

/// One RAdam step in place with state `m` and `v` (first and second moments).
pub fn radam_update<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], h: &RadamStep) {
    let c = T::from_f64;
    let s = h.scalars();
    let (b2, eps, lr) = (c(h.beta2), c(h.eps), c(h.lr));
    let (w1, w2) = (c(1.0 - h.beta1), c(1.0 - h.beta2));
    let (bc1, bc2_sqrt) = (c(s.bias_correction1), c(s.bias_correction2_sqrt));
    let (l2, decay) = split_weight_decay(h.lr, h.weight_decay, h.decoupled);
    let (wd, decay) = (c(l2), c(decay));
    let (rectified, rect) = (s.rect.is_some(), c(s.rect.unwrap_or(1.0)));
    let n = p.len();
    let (g, m, v) = (&g[..n], &mut m[..n], &mut v[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                p[i] = p[i] * decay; // exactly p when not decoupled
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                (m[i], v[i]) = adam_moments(m[i], v[i], gi, w1, (b2, w2));
                let corrected = m[i] / bc1;
                p[i] = if rectified {
                    let adaptive = (v[i].sqrt() + eps).recip() * bc2_sqrt;
                    p[i] - corrected * lr * adaptive * rect
                } else {
                    p[i] - corrected * lr
                };
            }
        },
    )
}

/// One Rprop step in place with state `prev` (the last gradient used) and
/// `step_size` (per coordinate).
pub fn rprop_update<T: Float>(
    p: &mut [T],
    g: &[T],
    prev: &mut [T],
    step_size: &mut [T],
    h: &RpropStep,
) {
    let c = T::from_f64;
    let (lr, etaminus, etaplus) = (c(h.lr), c(h.etaminus), c(h.etaplus));
    let (lo, hi) = (c(h.step_size_min), c(h.step_size_max));
    let n = p.len();
    let (g, prev, step_size) = (&g[..n], &mut prev[..n], &mut step_size[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let gi = if h.maximize { -g[i] } else { g[i] };
                let product = gi * prev[i];
                // The factor PyTorch writes over sign(g * prev); NaN stays NaN.
                let eta = if product > T::zero() {
                    etaplus
                } else if product < T::zero() {
                    etaminus
                } else if product == T::zero() {
                    T::one()
                } else {
                    product
                };
                let size = if h.first { lr } else { step_size[i] } * eta;
                // clamp_, which keeps NaN (f32::clamp would too, but Float has no clamp).
                let size = if size < lo {
                    lo
                } else if size > hi {
                    hi
                } else {
                    size
                };
                step_size[i] = size;
                // After a sign change the coordinate waits a step.
                let gi = if eta == etaminus { T::zero() } else { gi };
                p[i] = p[i] - sign(gi) * size;
                prev[i] = gi;
            }
        },
    )
}

/// One ASGD step in place with state `ax` (the running average of the
/// parameter).
pub fn asgd_update<T: Float>(p: &mut [T], g: &[T], ax: &mut [T], h: &AsgdStep) {
    let c = T::from_f64;
    let (wd, eta, mu) = (c(h.weight_decay), c(h.eta), c(h.mu));
    let decay = c(1.0 - h.lambd * h.eta);
    let n = p.len();
    let (g, ax) = (&g[..n], &mut ax[..n]);
    simd(
        #[inline(always)]
        || {
            for i in 0..n {
                let gi = decayed_grad(g[i], p[i], h.maximize, wd);
                p[i] = p[i] * decay;
                p[i] = p[i] + -eta * gi;
                ax[i] = if h.mu != 1.0 {
                    ax[i] + (p[i] - ax[i]) * mu
                } else {
                    p[i]
                };
            }
        },
    )
}
