//! The connectionist temporal classification loss (`F.ctc_loss`): the
//! negative log-likelihood of a target sequence summed over every
//! alignment of it to the input steps.
//!
//! Composed, so autograd derives the backward: the forward (alpha)
//! recursion over the blank-interleaved targets runs one step at a time
//! on `[N, 2S + 1]` tensors, a guarded log-sum-exp combining the three
//! predecessor states. The guard matters: a state no alignment reaches is
//! `-inf`, and a plain log-sum-exp of only `-inf`s would send NaN back.

use super::loss::{Reduction, reduce};
use crate::{DType, Tensor};

/// Options of [`ctc_loss`] (PyTorch's defaults: blank 0, mean, false).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtcOptions {
    /// The blank label's class index.
    pub blank: usize,
    /// `Mean` divides each loss by its target length, then averages.
    pub reduction: Reduction,
    /// Infinite losses (no alignment fits the input) and their gradients become zero.
    pub zero_infinity: bool,
}

/// `F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
/// reduction, zero_infinity)`: `log_probs` `[T, N, C]` (or `[T, C]`
/// unbatched) are log-softmax outputs; `targets` are int64 class ids,
/// `[N, S]` padded or the targets concatenated (1-D); sequence `n` uses
/// the first `input_lengths[n]` steps and `target_lengths[n]` labels.
///
/// ```
/// use tapir_runtime::{nn::{CtcOptions, ctc_loss}, Tensor};
/// // One step, one class besides the blank: the only alignment of "1" is "1".
/// let lp = Tensor::from_vec(vec![0.3f32.ln(), 0.7f32.ln()], &[1, 1, 2]);
/// let loss = ctc_loss(&lp, &Tensor::from_vec(vec![1i64], &[1, 1]), &[1], &[1], &CtcOptions::default());
/// assert!((loss.item::<f32>() + 0.7f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn ctc_loss(
    log_probs: &Tensor,
    targets: &Tensor,
    input_lengths: &[usize],
    target_lengths: &[usize],
    o: &CtcOptions,
) -> Tensor {
    let batched = log_probs.ndim() == 3;
    let lp = if batched {
        log_probs.clone()
    } else {
        log_probs.unsqueeze(1)
    };
    let labels = Labels::new(&lp, targets, input_lengths, target_lengths, o.blank);
    let (steps, n) = (lp.size(0), lp.size(1));
    let on = |t: Tensor| {
        t.to(lp.device())
            .unwrap_or_else(|e| panic!("ctc_loss: {e}"))
    };
    let width = labels.width;
    let ext = on(Tensor::from_vec(labels.ext, &[n, width]));
    let skip_ok = on(Tensor::from_vec(labels.skip_ok, &[n, width]));
    // Every step's log-probability of every extended label: [T, N, 2S + 1].
    let index = ext.unsqueeze(0).expand(&[steps, n, width]);
    let emit = lp.gather(2, &index).unbind(0);
    let none = Tensor::full_on(&[n, width], f64::NEG_INFINITY, lp.dtype(), lp.device());
    let starts = on(Tensor::from_vec(
        (0..n * width).map(|i| i % width < 2).collect::<Vec<_>>(),
        &[n, width],
    ));
    // Per step, which sequences still run: one [T, N, 1] mask, a view per step.
    let running: Vec<bool> = (0..steps)
        .flat_map(|t| input_lengths.iter().map(move |&l| t < l))
        .collect();
    let running = on(Tensor::from_vec(running, &[steps, n, 1])).unbind(0);
    let mut alpha = Tensor::where_(&starts, &emit[0], &none);
    for (e, running) in emit.iter().zip(&running).skip(1) {
        let one_back = shift_right(&alpha, 1);
        let two_back = Tensor::where_(&skip_ok, &shift_right(&alpha, 2), &none);
        let next = &log_sum_exp(&[&alpha, &one_back, &two_back]) + e;
        alpha = Tensor::where_(running, &next, &alpha);
    }
    // A complete alignment ends on the last label or the blank after it.
    let ends = |offset: usize| {
        let idx: Vec<i64> = target_lengths
            .iter()
            .map(|&s| (2 * s + 1).saturating_sub(offset) as i64)
            .collect();
        alpha.gather(1, &on(Tensor::from_vec(idx, &[n, 1])))
    };
    let has_label: Vec<bool> = target_lengths.iter().map(|&s| s > 0).collect();
    let last_label = Tensor::where_(
        &on(Tensor::from_vec(has_label, &[n, 1])),
        &ends(2),
        &none.narrow(1, 0, 1),
    );
    let mut loss = log_sum_exp(&[&ends(1), &last_label]).neg().squeeze_dim(1);
    if o.zero_infinity {
        loss = loss.masked_fill(&loss.isinf(), 0.0);
    }
    let loss = match o.reduction {
        Reduction::Mean => {
            let per_label: Vec<f64> = target_lengths.iter().map(|&s| s.max(1) as f64).collect();
            let per_label = on(Tensor::from_vec(per_label, &[n]).to_dtype(loss.dtype()));
            reduce(&loss / &per_label, Reduction::Mean)
        }
        r => reduce(loss, r),
    };
    if batched || o.reduction != Reduction::None {
        loss
    } else {
        loss.squeeze_dim(0)
    }
}

/// `x` moved `by` places right along dim 1, `-inf` shifted in.
fn shift_right(x: &Tensor, by: usize) -> Tensor {
    let (n, width) = (x.size(0), x.size(1));
    let fill = Tensor::full_on(
        &[n, by.min(width)],
        f64::NEG_INFINITY,
        x.dtype(),
        x.device(),
    );
    if by >= width {
        return fill.narrow(1, 0, width);
    }
    Tensor::cat(&[&fill, &x.narrow(1, 0, width - by)], 1)
}

/// Elementwise `log(Σ exp(xᵢ))`, `-inf` (with zero gradients, not NaN)
/// where every term is `-inf`.
fn log_sum_exp(xs: &[&Tensor]) -> Tensor {
    let peak = xs[1..]
        .iter()
        .fold(xs[0].detach(), |m, x| m.maximum(&x.detach()));
    let reached = peak.isfinite();
    let shift = peak.masked_fill(&reached.logical_not(), 0.0);
    let total = xs[1..]
        .iter()
        .fold((xs[0] - &shift).exp(), |s, x| &s + &(*x - &shift).exp());
    let safe = Tensor::where_(&reached, &total, &Tensor::ones_like(&total));
    Tensor::where_(
        &reached,
        &(&safe.log() + &shift),
        &Tensor::full_like(&total, f64::NEG_INFINITY),
    )
}

/// The blank-interleaved targets, checked: `ext[n]` is `blank, l1, blank,
/// l2, .., blank`, padded with blanks to the widest.
struct Labels {
    width: usize,
    ext: Vec<i64>,
    /// Whether a state may be entered from two back (a label unlike the
    /// one before the blank between them).
    skip_ok: Vec<bool>,
}

impl Labels {
    #[track_caller]
    fn new(
        lp: &Tensor,
        targets: &Tensor,
        input_lengths: &[usize],
        target_lengths: &[usize],
        blank: usize,
    ) -> Labels {
        assert!(
            lp.ndim() == 3 && lp.dtype().is_float(),
            "ctc_loss: log_probs must be floating point [T, N, C] or [T, C], got {} {:?}",
            lp.dtype(),
            lp.shape()
        );
        let (steps, n, classes) = (lp.size(0), lp.size(1), lp.size(2));
        assert!(
            input_lengths.len() == n && target_lengths.len() == n,
            "ctc_loss: {n} sequences in log_probs {:?} but {} input lengths and {} target lengths",
            lp.shape(),
            input_lengths.len(),
            target_lengths.len()
        );
        assert!(
            blank < classes,
            "ctc_loss: blank {blank} is not a class of log_probs {:?}",
            lp.shape()
        );
        if let Some(&l) = input_lengths.iter().find(|&&l| l == 0 || l > steps) {
            panic!("ctc_loss: input length {l} is not in 1..={steps} (the steps of log_probs)");
        }
        assert!(
            targets.dtype() == DType::I64 && targets.ndim() <= 2,
            "ctc_loss: targets must be int64 [N, S] or concatenated [sum of target lengths], got {} {:?}",
            targets.dtype(),
            targets.shape()
        );
        let flat = targets.to_vec::<i64>();
        let starts: Vec<usize> = if targets.ndim() == 2 {
            let s = targets.size(1);
            assert!(
                targets.size(0) == n && target_lengths.iter().all(|&l| l <= s),
                "ctc_loss: targets {:?} do not hold {n} sequences of lengths {target_lengths:?}",
                targets.shape()
            );
            (0..n).map(|i| i * s).collect()
        } else {
            let total: usize = target_lengths.iter().sum();
            assert!(
                flat.len() == total,
                "ctc_loss: concatenated targets hold {} labels, the target lengths sum to {total}",
                flat.len()
            );
            target_lengths
                .iter()
                .scan(0, |at, &l| {
                    *at += l;
                    Some(*at - l)
                })
                .collect()
        };
        let width = 2 * target_lengths.iter().copied().max().unwrap_or(0) + 1;
        let mut ext = vec![blank as i64; n * width];
        let mut skip_ok = vec![false; n * width];
        for (i, (&start, &len)) in starts.iter().zip(target_lengths).enumerate() {
            for (k, &label) in flat[start..start + len].iter().enumerate() {
                assert!(
                    (0..classes as i64).contains(&label) && label != blank as i64,
                    "ctc_loss: target label {label} of sequence {i} is not a class in 0..{classes} other than the blank {blank}"
                );
                ext[i * width + 2 * k + 1] = label;
                skip_ok[i * width + 2 * k + 1] = k > 0 && flat[start + k - 1] != label;
            }
        }
        Labels {
            width,
            ext,
            skip_ok,
        }
    }
}
