//! Loss functions (`torch.nn.functional`), each with reduction none/mean/sum.

use crate::{DType, Tensor};

/// Inside an autocast region a loss runs in f32 (PyTorch's fp32 list): its
/// floating inputs are cast and the loss is called again.
macro_rules! in_f32 {
    ($f:ident($($t:ident),+) $(, $rest:expr)*) => {
        if let Some(v) = crate::amp::cast(crate::amp::Policy::Fp32, &[$($t),+]) {
            let mut v = v.into_iter();
            $(let $t = &v.next().expect("one cast per input");)+
            return $f($($t),+ $(, $rest)*);
        }
    };
}

/// How a loss reduces per-element values (PyTorch's `reduction=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reduction {
    /// One loss per element.
    None,
    /// The mean (PyTorch's default).
    #[default]
    Mean,
    /// The sum.
    Sum,
}

impl Reduction {
    /// PyTorch's enum value (`torch.nn._reduction`): none 0, mean 1, sum 2;
    /// how a recorded loss keeps its reduction.
    pub(crate) fn code(self) -> i64 {
        match self {
            Reduction::None => 0,
            Reduction::Mean => 1,
            Reduction::Sum => 2,
        }
    }

    /// The reduction of [`Reduction::code`].
    pub(crate) fn from_code(code: i64) -> Reduction {
        match code {
            0 => Reduction::None,
            2 => Reduction::Sum,
            _ => Reduction::Mean,
        }
    }
}

pub(super) fn reduce(l: Tensor, r: Reduction) -> Tensor {
    match r {
        Reduction::None => l,
        Reduction::Mean => l.mean(),
        Reduction::Sum => l.sum(),
    }
}

/// Options of [`cross_entropy_with`] and [`nll_loss_with`] (PyTorch's defaults).
#[derive(Clone, Debug)]
pub struct CrossEntropyOptions {
    /// A weight per class.
    pub weight: Option<Tensor>,
    /// A target class whose samples are left out (PyTorch's default -100).
    pub ignore_index: i64,
    /// How per-sample losses are reduced.
    pub reduction: Reduction,
    /// Mixes the target with the uniform distribution by this much.
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
            label_smoothing: 0.0,
        }
    }
}

/// Mean cross entropy between logits `[N, C]` (or `[N, C, d...]`) and class
/// indices `[N]` (or `[N, d...]`), via a stable fused log-softmax.
///
/// ```
/// use tapir_runtime::{nn::cross_entropy, Tensor};
/// let logits = Tensor::zeros(&[2, 4]);
/// let loss = cross_entropy(&logits, &Tensor::from_vec(vec![1i64, 3], &[2]));
/// assert!((loss.item::<f32>() - 4f32.ln()).abs() < 1e-6);
/// ```
pub fn cross_entropy(logits: &Tensor, target: &Tensor) -> Tensor {
    cross_entropy_with(logits, target, &CrossEntropyOptions::default())
}

/// Cross entropy with class weights, `ignore_index`, label smoothing, or
/// class-probability targets (a float `target` shaped like `logits`).
///
/// ```
/// use tapir_runtime::{nn::{cross_entropy_with, CrossEntropyOptions}, Tensor};
/// let logits = Tensor::zeros(&[2, 4]);
/// let y = Tensor::from_vec(vec![1i64, -100], &[2]); // the second sample is ignored
/// let o = CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() };
/// assert!((cross_entropy_with(&logits, &y, &o).item::<f32>() - 4f32.ln()).abs() < 1e-6);
/// ```
pub fn cross_entropy_with(logits: &Tensor, target: &Tensor, o: &CrossEntropyOptions) -> Tensor {
    cross_entropy_as(logits, target, o, "cross_entropy")
}

/// [`cross_entropy_with`] whose errors name `op`, the function the user called.
pub(super) fn cross_entropy_as(
    logits: &Tensor,
    target: &Tensor,
    o: &CrossEntropyOptions,
    op: &'static str,
) -> Tensor {
    use crate::trace::Attr;
    crate::trace::op(
        "cross_entropy",
        [Some(logits), Some(target), o.weight.as_ref()],
        || {
            vec![
                ("ignore_index", Attr::Int(o.ignore_index)),
                ("reduction", Attr::Int(o.reduction.code())),
                ("label_smoothing", Attr::Float(o.label_smoothing)),
            ]
        },
        || cross_entropy_untraced(logits, target, o, op),
    )
}

fn cross_entropy_untraced(
    logits: &Tensor,
    target: &Tensor,
    o: &CrossEntropyOptions,
    op: &'static str,
) -> Tensor {
    in_f32!(cross_entropy_untraced(logits, target), o, op);
    assert!(
        logits.ndim() >= 1,
        "{op}: logits need a class dim, got shape {:?}",
        logits.shape()
    );
    let class_dim = if logits.ndim() == 1 { 0 } else { 1 };
    let c = logits.shape()[class_dim];
    let logp = logits.log_softmax(class_dim as isize);
    let wshape: Vec<isize> = (0..logits.ndim())
        .map(|d| if d == class_dim { c as isize } else { 1 })
        .collect();
    let w = o.weight.as_ref().map(|w| {
        assert!(
            w.shape() == [c],
            "{op}: weight must have shape [{c}], got {:?}",
            w.shape()
        );
        w.to_dtype(logits.dtype()).reshape(&wshape)
    });
    let eps = o.label_smoothing;
    assert!(
        (0.0..=1.0).contains(&eps),
        "{op}: label_smoothing must be in [0, 1], got {eps}"
    );
    if target.dtype().is_float() {
        assert!(
            target.shape() == logits.shape(),
            "{op}: probability targets {:?} must match logits {:?}",
            target.shape(),
            logits.shape()
        );
        let t = if eps > 0.0 {
            &(target * (1.0 - eps)) + eps / c as f64
        } else {
            target.clone()
        };
        let mut per = &t * &logp;
        if let Some(w) = &w {
            per = &per * w;
        }
        let l = per.sum_dim(class_dim as isize, false).neg();
        return reduce(l, o.reduction);
    }
    let nll = nll_loss_as(
        &logp,
        target,
        &CrossEntropyOptions {
            label_smoothing: 0.0,
            ..o.clone()
        },
        op,
    );
    if eps == 0.0 {
        return nll;
    }
    // Smoothing term: -sum_c w_c logp_c per sample, ignored samples zeroed.
    let valid = target.ne_scalar(o.ignore_index as f64);
    let mut all = logp.clone();
    if let Some(w) = &w {
        all = &all * w;
    }
    let smooth = all
        .sum_dim(class_dim as isize, false)
        .neg()
        .masked_fill(&valid.logical_not(), 0.0);
    let smooth = match o.reduction {
        Reduction::None => smooth,
        Reduction::Sum => smooth.sum(),
        Reduction::Mean => {
            &smooth.sum()
                / &mean_denominator(
                    target,
                    w.as_ref().map(|w| w.flatten_all()).as_ref(),
                    o.ignore_index,
                    logits.dtype(),
                )
        }
    };
    &(&nll * (1.0 - eps)) + &(&smooth * (eps / c as f64))
}

/// Sum of the target classes' weights (or the count) over non-ignored samples.
fn mean_denominator(target: &Tensor, w: Option<&Tensor>, ignore: i64, dtype: DType) -> Tensor {
    let valid = target.ne_scalar(ignore as f64);
    match w {
        None => valid.to_dtype(dtype).sum(),
        Some(w) => {
            let safe = Tensor::where_(&valid, target, &Tensor::zeros_like(target));
            (&w.index_select(0, &safe.flatten_all()).reshape(
                &target
                    .shape()
                    .iter()
                    .map(|&s| s as isize)
                    .collect::<Vec<_>>(),
            ) * &valid.to_dtype(dtype))
                .sum()
        }
    }
}

/// Negative log-likelihood of log-probabilities `[N, C, ...]` at class indices.
pub fn nll_loss(logp: &Tensor, target: &Tensor) -> Tensor {
    nll_loss_with(logp, target, &CrossEntropyOptions::default())
}

/// `F.nll_loss` on log-probabilities, with cross entropy's options.
pub fn nll_loss_with(logp: &Tensor, target: &Tensor, o: &CrossEntropyOptions) -> Tensor {
    in_f32!(nll_loss_with(logp, target), o);
    nll_loss_as(logp, target, o, "nll_loss")
}

/// `nll_loss_with` whose errors name `op`, the function the user called.
fn nll_loss_as(
    logp: &Tensor,
    target: &Tensor,
    o: &CrossEntropyOptions,
    op: &'static str,
) -> Tensor {
    assert!(
        target.dtype() == DType::I64,
        "{op}: target must be int64 class indices (or float class probabilities for cross_entropy), got {}",
        target.dtype()
    );
    let class_dim = if logp.ndim() == 1 { 0 } else { 1 };
    let mut expect: Vec<usize> = logp.shape().to_vec();
    expect.remove(class_dim);
    assert!(
        target.shape() == expect.as_slice(),
        "{op}: target of shape {:?} does not match input {:?} (expected {expect:?})",
        target.shape(),
        logp.shape()
    );
    let valid = target.ne_scalar(o.ignore_index as f64);
    let safe = Tensor::where_(&valid, target, &Tensor::zeros_like(target));
    // The gather checks every target against the class count on either
    // device (on a GPU without making the host wait: the error comes at the
    // next host read), and names the op the user called.
    let picked = logp
        .gather_as(class_dim as isize, &safe.unsqueeze(class_dim as isize), op)
        .squeeze_dim(class_dim as isize);
    let w = o.weight.as_ref().map(|w| {
        let shape: Vec<isize> = target.shape().iter().map(|&s| s as isize).collect();
        w.to_dtype(logp.dtype())
            .index_select(0, &safe.flatten_all())
            .reshape(&shape)
    });
    let mut l = picked.neg().masked_fill(&valid.logical_not(), 0.0);
    if let Some(w) = &w {
        l = &l * w;
    }
    match o.reduction {
        Reduction::None => l,
        Reduction::Sum => l.sum(),
        Reduction::Mean => {
            &l.sum() / &mean_denominator(target, o.weight.as_ref(), o.ignore_index, logp.dtype())
        }
    }
}

pub(super) fn check_same(op: &str, a: &Tensor, b: &Tensor) {
    assert!(
        a.shape() == b.shape(),
        "{op}: input of shape {:?} and target of shape {:?} differ",
        a.shape(),
        b.shape()
    );
}

/// Mean squared error.
pub fn mse_loss(input: &Tensor, target: &Tensor, r: Reduction) -> Tensor {
    let attrs = || vec![("reduction", crate::trace::Attr::Int(r.code()))];
    crate::trace::op("mse_loss", [input, target], attrs, || {
        in_f32!(mse_loss(input, target), r);
        check_same("mse_loss", input, target);
        let d = input - target;
        reduce(&d * &d, r)
    })
}

/// Mean absolute error.
pub fn l1_loss(input: &Tensor, target: &Tensor, r: Reduction) -> Tensor {
    in_f32!(l1_loss(input, target), r);
    check_same("l1_loss", input, target);
    reduce((input - target).abs(), r)
}

/// `0.5 d² / beta` where `|d| < beta`, else `|d| - 0.5 beta`.
pub fn smooth_l1_loss(input: &Tensor, target: &Tensor, r: Reduction, beta: f64) -> Tensor {
    in_f32!(smooth_l1_loss(input, target), r, beta);
    check_same("smooth_l1_loss", input, target);
    let d = (input - target).abs();
    if beta == 0.0 {
        return reduce(d, r);
    }
    let quad = &(&d * &d) * (0.5 / beta);
    let lin = &d - 0.5 * beta;
    reduce(Tensor::where_(&d.lt_scalar(beta), &quad, &lin), r)
}

/// `0.5 d²` where `|d| <= delta`, else `delta (|d| - 0.5 delta)`.
pub fn huber_loss(input: &Tensor, target: &Tensor, r: Reduction, delta: f64) -> Tensor {
    in_f32!(huber_loss(input, target), r, delta);
    check_same("huber_loss", input, target);
    let d = (input - target).abs();
    let quad = &(&d * &d) * 0.5;
    let lin = &(&d - 0.5 * delta) * delta;
    reduce(Tensor::where_(&d.le_scalar(delta), &quad, &lin), r)
}

/// Binary cross entropy on logits, stable for large |x|, with an optional
/// `pos_weight` (broadcast over the class dim) and per-element `weight`.
pub fn binary_cross_entropy_with_logits(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    pos_weight: Option<&Tensor>,
    r: Reduction,
) -> Tensor {
    in_f32!(
        binary_cross_entropy_with_logits(input, target),
        weight,
        pos_weight,
        r
    );
    check_same("binary_cross_entropy_with_logits", input, target);
    // log(1 + e^{-x}) computed as log1p(e^{-|x|}) + max(-x, 0)
    let softplus_neg = &input.abs().neg().exp().log1p() + &input.neg().clamp_min(0.0);
    let mut l = match pos_weight {
        Some(pw) => {
            let lw = &(&(pw - 1.0) * target) + 1.0;
            &(&(1.0 - target) * input) + &(&lw * &softplus_neg)
        }
        None => &(&(1.0 - target) * input) + &softplus_neg,
    };
    if let Some(w) = weight {
        l = &l * w;
    }
    reduce(l, r)
}

/// Binary cross entropy of probabilities `input` in `[0, 1]` against
/// `target` (`F.binary_cross_entropy`), with an optional per-element
/// `weight`; each log is raised to at least -100, as PyTorch's, so a
/// probability of exactly 0 or 1 gives a finite loss.
///
/// ```
/// use tapir_runtime::{nn::{binary_cross_entropy, Reduction}, Tensor};
/// let p = Tensor::from_vec(vec![0.5f32, 1.0], &[2]);
/// let y = Tensor::from_vec(vec![1.0f32, 0.0], &[2]);
/// let l = binary_cross_entropy(&p, &y, None, Reduction::None).to_vec::<f32>();
/// assert_eq!(l, vec![2f32.ln(), 100.0]);
/// ```
pub fn binary_cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    r: Reduction,
) -> Tensor {
    in_f32!(binary_cross_entropy(input, target), weight, r);
    check_same("binary_cross_entropy", input, target);
    if input.numel() > 0 {
        let (lo, hi) = (
            input.detach().min().item::<f64>(),
            input.detach().max().item::<f64>(),
        );
        assert!(
            lo >= 0.0 && hi <= 1.0,
            "binary_cross_entropy: all elements of input should be between 0 and 1, got [{lo}, {hi}]"
        );
    }
    let log_p = input.log().clamp_min(-100.0);
    let log_q = (1.0 - input).log().clamp_min(-100.0);
    let mut l = (&(target * &log_p) + &(&(1.0 - target) * &log_q)).neg();
    if let Some(w) = weight {
        l = &l * w;
    }
    reduce(l, r)
}

/// Kullback-Leibler divergence of `target` from log-probabilities `input`
/// (`F.kl_div`): `target * (log(target) - input)` per element, 0 where the
/// target is 0; with `log_target` the target is given as log-probabilities.
/// PyTorch's `reduction="batchmean"` is `Reduction::Sum` divided by the
/// batch size.
///
/// ```
/// use tapir_runtime::{nn::{kl_div, Reduction}, Tensor};
/// let q = Tensor::from_vec(vec![0.5f32, 0.5], &[1, 2]).log();
/// let p = Tensor::from_vec(vec![1.0f32, 0.0], &[1, 2]);
/// let d = kl_div(&q, &p, Reduction::Sum, false).item::<f32>();
/// assert!((d - 2f32.ln()).abs() < 1e-6);
/// ```
pub fn kl_div(input: &Tensor, target: &Tensor, r: Reduction, log_target: bool) -> Tensor {
    in_f32!(kl_div(input, target), r, log_target);
    check_same("kl_div", input, target);
    let l = if log_target {
        &target.exp() * &(target - input)
    } else {
        // xlogy: 0 where the target is 0, and no log(0) for a gradient.
        let zero = target.eq_scalar(0.0);
        let log_t = target.masked_fill(&zero, 1.0).log();
        (target * &(&log_t - input)).masked_fill(&zero, 0.0)
    };
    reduce(l, r)
}
