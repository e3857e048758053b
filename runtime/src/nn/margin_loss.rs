//! The margin (two-class and multi-class), ranking, embedding and Poisson losses of
//! `torch.nn.functional`, each its PyTorch formula over existing ops (so
//! their gradients and devices are those ops'), with `reduction`. Labels in
//! {1, -1} are not checked, as PyTorch does not check them.

use super::functional::pairwise_distance;
use super::loss::{Reduction, check_same, reduce};
use crate::{DType, Tensor};

/// `log(1 + exp(-y x))` (`F.soft_margin_loss`), labels `y` in {1, -1}.
///
/// ```
/// use tapir_runtime::{nn::{soft_margin_loss, Reduction}, Tensor};
/// let x = Tensor::from_vec(vec![0.0f32], &[1]);
/// let l = soft_margin_loss(&x, &Tensor::ones(&[1]), Reduction::Sum);
/// assert!((l.item::<f32>() - 2f32.ln()).abs() < 1e-6);
/// ```
pub fn soft_margin_loss(input: &Tensor, target: &Tensor, r: Reduction) -> Tensor {
    check_same("soft_margin_loss", input, target);
    reduce((&(-&(input * target)).exp() + 1.0).log(), r)
}

/// `max(0, -y (x1 - x2) + margin)` (`F.margin_ranking_loss`): `x1` should
/// rank above `x2` where `y` is 1, below where it is -1.
///
/// ```
/// use tapir_runtime::{nn::{margin_ranking_loss, Reduction}, Tensor};
/// let (a, b) = (Tensor::from_vec(vec![2.0f32], &[1]), Tensor::from_vec(vec![1.0f32], &[1]));
/// assert_eq!(margin_ranking_loss(&a, &b, &Tensor::ones(&[1]), 0.5, Reduction::Sum).item::<f32>(), 0.0);
/// ```
pub fn margin_ranking_loss(
    input1: &Tensor,
    input2: &Tensor,
    target: &Tensor,
    margin: f64,
    r: Reduction,
) -> Tensor {
    check_same("margin_ranking_loss", input1, input2);
    check_same("margin_ranking_loss", input1, target);
    reduce(
        (&(&-target * &(input1 - input2)) + margin).clamp_min(0.0),
        r,
    )
}

/// `x` where `y` is 1 and `max(0, margin - x)` where `y` is -1
/// (`F.hinge_embedding_loss`; PyTorch's default margin 1.0).
///
/// ```
/// use tapir_runtime::{nn::{hinge_embedding_loss, Reduction}, Tensor};
/// let x = Tensor::from_vec(vec![0.3f32, 0.3], &[2]);
/// let y = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
/// assert_eq!(hinge_embedding_loss(&x, &y, 1.0, Reduction::None).to_vec::<f32>(), vec![0.3, 0.7]);
/// ```
pub fn hinge_embedding_loss(input: &Tensor, target: &Tensor, margin: f64, r: Reduction) -> Tensor {
    check_same("hinge_embedding_loss", input, target);
    // As PyTorch: each branch applies where the label is not the other one.
    let zero = Tensor::zeros_like(input);
    let below_margin = (&-input + margin).clamp_min(0.0);
    let from_margin = Tensor::where_(&target.ne_scalar(1.0), &below_margin, &zero);
    let from_input = Tensor::where_(&target.ne_scalar(-1.0), input, &zero);
    reduce(&from_margin + &from_input, r)
}

/// `1 - cos(x1, x2)` where `y` is 1 and `max(0, cos(x1, x2) - margin)` where
/// `y` is -1, the cosine over the last dim (`F.cosine_embedding_loss`;
/// PyTorch's 1e-12 added to each squared norm).
///
/// ```
/// use tapir_runtime::{nn::{cosine_embedding_loss, Reduction}, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]);
/// let y = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
/// assert_eq!(cosine_embedding_loss(&a, &a, &y, 0.0, Reduction::None).to_vec::<f32>(), vec![0.0, 1.0]);
/// ```
pub fn cosine_embedding_loss(
    input1: &Tensor,
    input2: &Tensor,
    target: &Tensor,
    margin: f64,
    r: Reduction,
) -> Tensor {
    check_same("cosine_embedding_loss", input1, input2);
    assert!(
        input1.ndim() == target.ndim() + 1 && input1.shape()[..target.ndim()] == *target.shape(),
        "cosine_embedding_loss: inputs of shape {:?} need a target of shape {:?}, got {:?}",
        input1.shape(),
        &input1.shape()[..input1.ndim().saturating_sub(1)],
        target.shape()
    );
    const EPSILON: f64 = 1e-12;
    let dot = (input1 * input2).sum_dim(-1, false);
    let square1 = &(input1 * input1).sum_dim(-1, false) + EPSILON;
    let square2 = &(input2 * input2).sum_dim(-1, false) + EPSILON;
    let cos = &dot / &(&square1 * &square2).sqrt();
    let zero = Tensor::zeros_like(&cos);
    let pos = Tensor::where_(&target.eq_scalar(1.0), &(&-&cos + 1.0), &zero);
    let below = (&cos - margin).clamp_min(0.0);
    let neg = Tensor::where_(&target.eq_scalar(-1.0), &below, &zero);
    reduce(&pos + &neg, r)
}

/// Options of [`triplet_margin_loss`] (PyTorch's defaults: margin 1.0, the
/// 2-norm, eps 1e-6, no swap).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TripletMarginOptions {
    /// How much nearer the positive must be than the negative.
    pub margin: f64,
    /// The norm of the distances.
    pub p: f64,
    /// Added to each difference before its norm.
    pub eps: f64,
    /// Use the positive-negative distance when it is smaller (the "distance
    /// swap" of Balntas et al.).
    pub swap: bool,
}

impl Default for TripletMarginOptions {
    fn default() -> Self {
        TripletMarginOptions {
            margin: 1.0,
            p: 2.0,
            eps: 1e-6,
            swap: false,
        }
    }
}

/// `max(0, d(a, p) - d(a, n) + margin)` with `d` the pairwise distance over
/// the last dim (`F.triplet_margin_loss`).
///
/// ```
/// use tapir_runtime::{nn::{triplet_margin_loss, Reduction, TripletMarginOptions}, Tensor};
/// let a = Tensor::zeros(&[1, 2]);
/// let near = Tensor::from_vec(vec![0.0f32, 1.0], &[1, 2]);
/// let far = Tensor::from_vec(vec![0.0f32, 3.0], &[1, 2]);
/// let o = TripletMarginOptions { eps: 0.0, ..Default::default() };
/// assert_eq!(triplet_margin_loss(&a, &near, &far, o, Reduction::Sum).item::<f32>(), 0.0);
/// assert_eq!(triplet_margin_loss(&a, &far, &near, o, Reduction::Sum).item::<f32>(), 3.0);
/// ```
pub fn triplet_margin_loss(
    anchor: &Tensor,
    positive: &Tensor,
    negative: &Tensor,
    o: TripletMarginOptions,
    r: Reduction,
) -> Tensor {
    check_same("triplet_margin_loss", anchor, positive);
    check_same("triplet_margin_loss", anchor, negative);
    let d_pos = pairwise_distance(anchor, positive, o.p, o.eps, false);
    let mut d_neg = pairwise_distance(anchor, negative, o.p, o.eps, false);
    if o.swap {
        d_neg = d_neg.minimum(&pairwise_distance(positive, negative, o.p, o.eps, false));
    }
    reduce((&(&d_pos - &d_neg) + o.margin).clamp_min(0.0), r)
}

/// A distance of two `[N, ..]` batches to `[N]`, as
/// [`triplet_margin_with_distance_loss`] takes it.
pub type Distance<'a> = &'a dyn Fn(&Tensor, &Tensor) -> Tensor;

/// `F.triplet_margin_with_distance_loss`: `max(0, d(a, p) - d(a, n) +
/// margin)` with any distance `d` of two `[N, ..]` batches to `[N]`
/// (PyTorch's default: [`pairwise_distance`] with p = 2, eps = 1e-6);
/// `swap` uses `d(p, n)` when it is smaller.
///
/// ```
/// use tapir_runtime::{nn::{cosine_similarity, triplet_margin_with_distance_loss, Reduction}, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 0.0], &[1, 2]);
/// let p = Tensor::from_vec(vec![2.0f32, 0.0], &[1, 2]);
/// let n = Tensor::from_vec(vec![0.0f32, 1.0], &[1, 2]);
/// let cosine = |x: &Tensor, y: &Tensor| &(&cosine_similarity(x, y, 1, 1e-8) * -1.0) + 1.0;
/// let l = triplet_margin_with_distance_loss(&a, &p, &n, Some(&cosine), 0.5, false, Reduction::Sum);
/// assert_eq!(l.item::<f32>(), 0.0); // d(a, p) = 0, d(a, n) = 1
/// ```
pub fn triplet_margin_with_distance_loss(
    anchor: &Tensor,
    positive: &Tensor,
    negative: &Tensor,
    distance: Option<Distance>,
    margin: f64,
    swap: bool,
    r: Reduction,
) -> Tensor {
    assert!(
        margin > 0.0,
        "triplet_margin_with_distance_loss: margin must be greater than 0, got {margin}"
    );
    let default = |x: &Tensor, y: &Tensor| pairwise_distance(x, y, 2.0, 1e-6, false);
    let d: Distance = distance.unwrap_or(&default);
    let d_pos = d(anchor, positive);
    let mut d_neg = d(anchor, negative);
    if swap {
        d_neg = d_neg.minimum(&d(positive, negative));
    }
    reduce((&(&d_pos - &d_neg) + margin).clamp_min(0.0), r)
}

/// `F.poisson_nll_loss`: `exp(x) - y x` for log-rate inputs, else
/// `x - y log(x + eps)`; `full` adds Stirling's approximation of
/// `log(y!)`, `y log y - y + log(2 pi y) / 2`, where `y > 1` (PyTorch's
/// defaults: log_input, not full, eps 1e-8).
///
/// ```
/// use tapir_runtime::{nn::{poisson_nll_loss, Reduction}, Tensor};
/// let x = Tensor::zeros(&[1]);
/// let l = poisson_nll_loss(&x, &Tensor::ones(&[1]), true, false, 1e-8, Reduction::Sum);
/// assert_eq!(l.item::<f32>(), 1.0);
/// ```
pub fn poisson_nll_loss(
    input: &Tensor,
    target: &Tensor,
    log_input: bool,
    full: bool,
    eps: f64,
    r: Reduction,
) -> Tensor {
    check_same("poisson_nll_loss", input, target);
    let mut loss = if log_input {
        &input.exp() - &(target * input)
    } else {
        input - &(target * &(input + eps).log())
    };
    if full {
        let stirling = &(&(target * &target.log()) - target)
            + &(&(target * (2.0 * std::f64::consts::PI)).log() * 0.5);
        let zero = Tensor::zeros_like(&stirling);
        loss = &loss + &Tensor::where_(&target.gt_scalar(1.0), &stirling, &zero);
    }
    reduce(loss, r)
}

/// `F.gaussian_nll_loss`: `(log(var) + (x - y)² / var) / 2` (plus
/// `log(2 pi) / 2` when `full`), `var` of the input's shape, or one short
/// of it, or with a last dim of 1 (one variance per row). As PyTorch's,
/// `var` is clamped to at least `eps` for the value while its gradient
/// passes the clamp unchanged, and a negative variance is an error.
///
/// ```
/// use tapir_runtime::{nn::{gaussian_nll_loss, Reduction}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0], &[1, 2]);
/// let l = gaussian_nll_loss(&x, &Tensor::ones(&[1, 2]), &Tensor::ones(&[1]), false, 1e-6, Reduction::None);
/// assert_eq!(l.to_vec::<f32>(), vec![0.0, 2.0]);
/// ```
pub fn gaussian_nll_loss(
    input: &Tensor,
    target: &Tensor,
    var: &Tensor,
    full: bool,
    eps: f64,
    r: Reduction,
) -> Tensor {
    check_same("gaussian_nll_loss", input, target);
    let n = input.ndim();
    let var = if var.shape() == input.shape() {
        var.clone()
    } else if n > 0 && var.shape() == &input.shape()[..n - 1] {
        var.unsqueeze(-1)
    } else if n > 0
        && var.ndim() == n
        && var.shape()[..n - 1] == input.shape()[..n - 1]
        && var.shape()[n - 1] == 1
    {
        var.clone()
    } else {
        panic!(
            "gaussian_nll_loss: var of shape {:?} is of incorrect size for input of shape {:?}",
            var.shape(),
            input.shape()
        )
    };
    assert!(
        !var.lt_scalar(0.0).any().item::<bool>(),
        "gaussian_nll_loss: var has negative entry/entries"
    );
    // The clamped value with the unclamped gradient (PyTorch clamps in
    // place under no_grad).
    let var = &var + &(&var.clamp_min(eps) - &var).detach();
    let d = input - target;
    let mut loss = &(&var.log() + &(&(&d * &d) / &var)) * 0.5;
    if full {
        loss = &loss + 0.5 * (2.0 * std::f64::consts::PI).ln();
    }
    reduce(loss, r)
}

/// `F.multi_margin_loss(input, target, p, margin, weight)`: for each
/// sample, `Σ_{i ≠ y} w[y] · max(0, margin - x[y] + x[i])^p / C` over
/// `input` `[N, C]` (or `[C]`) and int64 class ids `target` `[N]` (or a
/// scalar); p is 1 or 2, and the class weight multiplies after the power,
/// as PyTorch's kernel does.
///
/// ```
/// use tapir_runtime::{nn::{multi_margin_loss, Reduction}, Tensor};
/// let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.4, 0.8], &[1, 4]);
/// let y = Tensor::from_vec(vec![3i64], &[1]);
/// let l = multi_margin_loss(&x, &y, 1, 1.0, None, Reduction::Mean);
/// assert!((l.item::<f32>() - 0.325).abs() < 1e-6);
/// ```
#[track_caller]
pub fn multi_margin_loss(
    input: &Tensor,
    target: &Tensor,
    p: u32,
    margin: f64,
    weight: Option<&Tensor>,
    r: Reduction,
) -> Tensor {
    let (x, y, batched) = class_rows("multi_margin_loss", input, target, 1);
    assert!(
        p == 1 || p == 2,
        "multi_margin_loss: p must be 1 or 2, got {p}"
    );
    let classes = x.size(1);
    let y = y.reshape(&[-1, 1]);
    let own = x.gather(1, &y);
    let others = one_hot_rows(&y, classes, x.dtype()).neg() + 1.0;
    let hinge = (&(&x - &own) + margin).clamp_min(0.0);
    let mut per = &(if p == 2 { &hinge * &hinge } else { hinge }) * &others;
    if let Some(w) = weight {
        assert!(
            w.shape() == [classes],
            "multi_margin_loss: weight must be [{classes}] (one per class), got {:?}",
            w.shape()
        );
        per = &per * &w.index_select(0, &y.flatten_all()).unsqueeze(1);
    }
    let per = &per.sum_dim(1, false) / classes as f64;
    reduce(if batched { per } else { per.squeeze_dim(0) }, r)
}

/// `F.multilabel_margin_loss(input, target)`: for each sample,
/// `Σ_j Σ_{i ∉ targets} max(0, 1 - (x[y_j] - x[i])) / C`, where the
/// targets `y_j` are the int64 class ids of `target`'s row up to its first
/// -1 (`[N, C]` or `[C]`, as `input`).
///
/// ```
/// use tapir_runtime::{nn::{multilabel_margin_loss, Reduction}, Tensor};
/// let x = Tensor::from_vec(vec![0.1f32, 0.2, 0.4, 0.8], &[4]);
/// let y = Tensor::from_vec(vec![3i64, 0, -1, 1], &[4]);
/// let l = multilabel_margin_loss(&x, &y, Reduction::Mean);
/// assert!((l.item::<f32>() - 0.85).abs() < 1e-6);
/// ```
#[track_caller]
pub fn multilabel_margin_loss(input: &Tensor, target: &Tensor, r: Reduction) -> Tensor {
    let (x, y, batched) = class_rows("multilabel_margin_loss", input, target, 2);
    let (n, classes) = (x.size(0), x.size(1));
    // Per row: how often each class is listed (a class listed twice counts
    // twice, as PyTorch's loop over the list does).
    let mut listed = vec![0.0f64; n * classes];
    for (row, ids) in y.to_vec::<i64>().chunks(classes.max(1)).enumerate() {
        for &id in ids.iter().take_while(|&&id| id >= 0) {
            assert!(
                (id as usize) < classes,
                "multilabel_margin_loss: target class {id} in row {row} is not below {classes}"
            );
            listed[row * classes + id as usize] += 1.0;
        }
    }
    let listed = Tensor::from_vec(listed, &[n, classes])
        .to_dtype(x.dtype())
        .to(x.device())
        .unwrap_or_else(|e| panic!("multilabel_margin_loss: {e}"));
    let unlisted = listed.eq_scalar(0.0).to_dtype(x.dtype());
    // hinge[n, j, i] = max(0, 1 - x[j] + x[i]), weighted by listed j, unlisted i.
    let hinge = (&(&x.unsqueeze(1) - &x.unsqueeze(2)) + 1.0).clamp_min(0.0);
    let pairs = &listed.unsqueeze(2) * &unlisted.unsqueeze(1);
    let per = &(&hinge * &pairs).sum_dims(&[1, 2], false) / classes as f64;
    reduce(if batched { per } else { per.squeeze_dim(0) }, r)
}

/// `F.multilabel_soft_margin_loss(input, target, weight)`: each class a
/// logistic loss on its own, `-(y log σ(x) + (1 - y) log σ(-x))`, weighted
/// per class and averaged over the classes.
///
/// ```
/// use tapir_runtime::{nn::{multilabel_soft_margin_loss, Reduction}, Tensor};
/// let x = Tensor::zeros(&[2, 3]);
/// let l = multilabel_soft_margin_loss(&x, &Tensor::ones(&[2, 3]), None, Reduction::Mean);
/// assert!((l.item::<f32>() - 2f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn multilabel_soft_margin_loss(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    r: Reduction,
) -> Tensor {
    check_same("multilabel_soft_margin_loss", input, target);
    let mut per =
        -&(&(target * &input.logsigmoid()) + &(&(-target + 1.0) * &(-input).logsigmoid()));
    if let Some(w) = weight {
        per = &per * w;
    }
    let classes = input.size(-1) as f64;
    reduce(&per.sum_dim(-1, false) / classes, r)
}

/// `input` as `[N, C]` rows and `target` as int64 (`target_rank` 1: one
/// class id per row; 2: a row of ids per row), with whether it was batched.
#[track_caller]
fn class_rows(
    op: &str,
    input: &Tensor,
    target: &Tensor,
    target_rank: usize,
) -> (Tensor, Tensor, bool) {
    let batched = input.ndim() == 2;
    let (x, y) = if batched {
        (input.clone(), target.clone())
    } else {
        (input.unsqueeze(0), target.unsqueeze(0))
    };
    let want: Vec<usize> = if target_rank == 1 {
        vec![x.size(0)]
    } else {
        x.shape().to_vec()
    };
    assert!(
        (input.ndim() == 1 || batched)
            && target.dtype() == DType::I64
            && y.shape() == want.as_slice(),
        "{op}: expected input [N, C] or [C] with int64 target {}, got input {:?} and target {} {:?}",
        if target_rank == 1 {
            "[N] or a scalar"
        } else {
            "of input's shape"
        },
        input.shape(),
        target.dtype(),
        target.shape()
    );
    (x, y, batched)
}

/// `[N, C]` ones at each row's class in `y` (`[N, 1]` int64), zeros elsewhere.
fn one_hot_rows(y: &Tensor, classes: usize, dtype: DType) -> Tensor {
    let zeros = Tensor::zeros_on(&[y.size(0), classes], dtype, y.device());
    zeros.scatter_add(1, y, &Tensor::ones_on(y.shape(), dtype, y.device()))
}
