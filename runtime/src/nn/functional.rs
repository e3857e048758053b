//! `torch.nn.functional`'s helpers that are not layers or losses:
//! `one_hot`, `normalize`, `cosine_similarity` and
//! `pairwise_distance`, with PyTorch's defaults and formulas.

use crate::{DType, Tensor};

/// Class indices as one-hot int64 vectors along a new last dim
/// (`F.one_hot`); `num_classes: None` takes the largest index plus one.
///
/// ```
/// use tapir_runtime::{nn::one_hot, Tensor};
/// let y = one_hot(&Tensor::from_vec(vec![2i64, 0], &[2]), Some(3));
/// assert_eq!(y.to_vec::<i64>(), vec![0, 0, 1, 1, 0, 0]);
/// ```
pub fn one_hot(indices: &Tensor, num_classes: Option<usize>) -> Tensor {
    assert!(
        indices.dtype() == DType::I64,
        "one_hot: expected int64 class indices, got {}",
        indices.dtype()
    );
    let (lo, hi) = if indices.numel() == 0 {
        (0, -1)
    } else {
        (indices.min().item::<i64>(), indices.max().item::<i64>())
    };
    assert!(
        lo >= 0,
        "one_hot: class values must be non-negative, got {lo}"
    );
    let c = match num_classes {
        Some(c) => {
            assert!(
                hi < c as i64,
                "one_hot: class values must be smaller than num_classes ({c}), got {hi}"
            );
            c
        }
        None => {
            assert!(
                indices.numel() > 0,
                "one_hot: cannot infer num_classes of an empty tensor; give it"
            );
            (hi + 1) as usize
        }
    };
    let classes = Tensor::arange_on(c as i64, indices.device());
    indices.unsqueeze(-1).eq(&classes).to_dtype(DType::I64)
}

/// `F.gumbel_softmax`: a sample from the Gumbel-softmax (concrete)
/// distribution over `dim`, `softmax((logits + g) / tau)` with `g` drawn
/// from Gumbel(0, 1) by the default generator. With `hard`, the one-hot
/// of its largest entry, with the soft sample's gradient (the
/// straight-through estimator: `y_hard - y_soft.detach() + y_soft`).
///
/// ```
/// use tapir_runtime::{nn::gumbel_softmax, Tensor};
/// let y = gumbel_softmax(&Tensor::zeros(&[4, 5]), 0.5, true, -1);
/// assert_eq!(y.sum_dim(1, false).to_vec::<f32>(), vec![1.0; 4]);
/// assert!(y.to_vec::<f32>().iter().all(|&v| v == 0.0 || v == 1.0));
/// ```
#[track_caller]
pub fn gumbel_softmax(logits: &Tensor, tau: f64, hard: bool, dim: isize) -> Tensor {
    gumbel_softmax_with(logits, tau, hard, dim, crate::default_generator())
}

/// [`gumbel_softmax`] with its noise drawn from `generator`.
#[track_caller]
pub fn gumbel_softmax_with(
    logits: &Tensor,
    tau: f64,
    hard: bool,
    dim: isize,
    generator: &crate::Generator,
) -> Tensor {
    assert!(
        tau > 0.0 && logits.dtype().is_float(),
        "gumbel_softmax: tau must be positive and the logits float, got tau = {tau} and {}",
        logits.dtype()
    );
    // Gumbel noise -log(E), E ~ Exp(1) = -log(1 - U); E kept above 0.
    let uniform = Tensor::rand_with(logits.shape(), generator)
        .to_dtype(logits.dtype())
        .to(logits.device())
        .unwrap_or_else(|e| panic!("gumbel_softmax: {e}"));
    let exponential = (&(&uniform * -1.0) + 1.0)
        .log()
        .neg()
        .clamp_min(f64::from(f32::MIN_POSITIVE));
    let gumbels = exponential.log().neg();
    let soft = (&(logits + &gumbels) / tau).softmax(dim);
    if !hard {
        return soft;
    }
    let d = logits.dim(dim, "gumbel_softmax");
    let index = soft.argmax(d as isize, true);
    let mut shape = vec![1isize; logits.ndim()];
    shape[d] = logits.shape()[d] as isize;
    let positions = Tensor::arange_on(logits.shape()[d] as i64, logits.device()).reshape(&shape);
    let one_hot = positions.eq(&index).to_dtype(logits.dtype());
    &(&one_hot - &soft.detach()) + &soft
}

/// `x / max(||x||_p, eps)` along `dim` (`F.normalize`; PyTorch's defaults
/// are `p = 2`, `dim = 1`, `eps = 1e-12`).
///
/// ```
/// use tapir_runtime::{nn::normalize, Tensor};
/// let y = normalize(&Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]), 2.0, 1, 1e-12);
/// assert_eq!(y.to_vec::<f32>(), vec![0.6, 0.8]);
/// ```
pub fn normalize(x: &Tensor, p: f64, dim: isize, eps: f64) -> Tensor {
    let norm = x.norm_dims(p, &[dim], true).clamp_min(eps);
    x / &norm
}

/// The cosine of the angle between `x1` and `x2` along `dim`, broadcast
/// (`F.cosine_similarity`, defaults `dim = 1`, `eps = 1e-8`). As PyTorch:
/// each input is divided by its norm raised to at least `eps`, the raise
/// taken outside autograd.
///
/// ```
/// use tapir_runtime::{nn::cosine_similarity, Tensor};
/// let a = Tensor::from_vec(vec![1.0f32, 0.0], &[1, 2]);
/// let b = Tensor::from_vec(vec![1.0f32, 1.0], &[1, 2]);
/// let c = cosine_similarity(&a, &b, 1, 1e-8).item::<f32>();
/// assert!((c - 0.5f32.sqrt()).abs() < 1e-6);
/// ```
pub fn cosine_similarity(x1: &Tensor, x2: &Tensor, dim: isize, eps: f64) -> Tensor {
    let shape = crate::ops::broadcast_shapes(x1.shape(), x2.shape(), "cosine_similarity");
    let (a, b) = (x1.expand(&shape), x2.expand(&shape));
    let unit = |t: &Tensor| {
        let n = t.norm_dims(2.0, &[dim], true);
        // The clamp's value, the norm's gradient (PyTorch clamps in place
        // under no_grad).
        let raised = &n + &(&n.clamp_min(eps) - &n).detach();
        t / &raised
    };
    (&unit(&a) * &unit(&b)).sum_dim(dim, false)
}

/// `||x1 - x2 + eps||_p` over the last dim (`F.pairwise_distance`,
/// defaults `p = 2`, `eps = 1e-6`).
///
/// ```
/// use tapir_runtime::{nn::pairwise_distance, Tensor};
/// let d = pairwise_distance(&Tensor::zeros(&[1, 2]), &Tensor::full(&[1, 2], 3.0), 2.0, 0.0, false);
/// assert!((d.item::<f32>() - 18f32.sqrt()).abs() < 1e-5);
/// ```
pub fn pairwise_distance(x1: &Tensor, x2: &Tensor, p: f64, eps: f64, keepdim: bool) -> Tensor {
    (&(x1 - x2) + eps).norm_dims(p, &[-1], keepdim)
}

/// `nn.CosineSimilarity(dim=1, eps=1e-8)`: [`cosine_similarity`] as a
/// module of two inputs.
///
/// ```
/// use tapir_runtime::{nn::CosineSimilarity, Tensor};
/// let cos = CosineSimilarity::default();
/// let a = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]);
/// assert!((cos.forward(&a, &a).item::<f32>() - 1.0).abs() < 1e-6);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineSimilarity {
    /// The dim the cosine is taken along (1).
    pub dim: isize,
    /// The smallest norm divided by (1e-8).
    pub eps: f64,
}

impl Default for CosineSimilarity {
    fn default() -> Self {
        CosineSimilarity { dim: 1, eps: 1e-8 }
    }
}

impl CosineSimilarity {
    /// The cosine of `x1` and `x2` along `dim`, broadcast.
    pub fn forward(&self, x1: &Tensor, x2: &Tensor) -> Tensor {
        cosine_similarity(x1, x2, self.dim, self.eps)
    }
}

/// `nn.PairwiseDistance(p=2.0, eps=1e-6, keepdim=False)`:
/// [`pairwise_distance`] as a module of two inputs.
///
/// ```
/// use tapir_runtime::{nn::PairwiseDistance, Tensor};
/// let d = PairwiseDistance { p: 1.0, eps: 0.0, keepdim: true };
/// let y = d.forward(&Tensor::zeros(&[2, 3]), &Tensor::ones(&[2, 3]));
/// assert_eq!((y.shape(), y.to_vec::<f32>()), (&[2, 1][..], vec![3.0, 3.0]));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairwiseDistance {
    /// The norm's order (2).
    pub p: f64,
    /// Added to the difference (1e-6).
    pub eps: f64,
    /// Keep the reduced last dim (false).
    pub keepdim: bool,
}

impl Default for PairwiseDistance {
    fn default() -> Self {
        PairwiseDistance {
            p: 2.0,
            eps: 1e-6,
            keepdim: false,
        }
    }
}

impl PairwiseDistance {
    /// The `p`-norm distance of `x1` and `x2` over the last dim.
    pub fn forward(&self, x1: &Tensor, x2: &Tensor) -> Tensor {
        pairwise_distance(x1, x2, self.p, self.eps, self.keepdim)
    }
}

crate::nn::module::stateless_module! {
    CosineSimilarity => |_s| "CosineSimilarity()".into();
    PairwiseDistance => |_s| "PairwiseDistance()".into();
}
