//! The loss modules (`criterion = nn.CrossEntropyLoss(label_smoothing=0.1)`):
//! PyTorch's constructor arguments as fields with PyTorch's defaults
//! (`Default`), a `forward` taking the loss's tensors, class weights as
//! buffers (in the state dict as PyTorch's), and PyTorch's repr. Each
//! calls its function in `nn` (`cross_entropy_with`, `mse_loss`, ...).

use super::ctc::{CtcOptions, ctc_loss};
use super::loss::{
    CrossEntropyOptions, Reduction, binary_cross_entropy, binary_cross_entropy_with_logits,
    cross_entropy_with, huber_loss, kl_div, l1_loss, mse_loss, nll_loss_with, smooth_l1_loss,
};
use super::margin_loss::{
    TripletMarginOptions, cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss,
    margin_ranking_loss, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss,
    poisson_nll_loss, soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
};
use super::module::{Module, TensorKind};
use crate::Tensor;

/// Implements [`Module`] for loss modules: their optional tensors as
/// buffers, `Name()` as the repr (PyTorch's losses print no arguments).
macro_rules! loss_module {
    ($($name:ident [$($buf:ident),*];)*) => {$(
        impl Module for $name {
            fn visit(&self, _f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
                $(if let Some(t) = &self.$buf {
                    _f(stringify!($buf), t, TensorKind::Buffer);
                })*
            }
            fn visit_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
                $(if let Some(t) = &mut self.$buf {
                    _f(stringify!($buf), t, TensorKind::Buffer);
                })*
            }
            fn repr(&self) -> String {
                concat!(stringify!($name), "()").to_string()
            }
        }
        crate::display_as_repr!($name);
    )*};
}

/// `nn.CrossEntropyLoss`: see [`cross_entropy_with`].
///
/// ```
/// use tapir_runtime::{nn::{CrossEntropyLoss, Module}, Tensor};
/// let criterion = CrossEntropyLoss { label_smoothing: 0.1, ..Default::default() };
/// let loss = criterion.forward(&Tensor::zeros(&[2, 4]), &Tensor::from_vec(vec![1i64, 3], &[2]));
/// assert!((loss.item::<f32>() - 4f32.ln()).abs() < 1e-6);
/// assert_eq!(criterion.repr(), "CrossEntropyLoss()");
/// ```
#[derive(Clone, Debug)]
pub struct CrossEntropyLoss {
    /// A weight per class (a buffer).
    pub weight: Option<Tensor>,
    /// A target class whose samples are left out (-100).
    pub ignore_index: i64,
    /// How per-sample losses are reduced (mean).
    pub reduction: Reduction,
    /// Mixes the target with the uniform distribution by this much (0).
    pub label_smoothing: f64,
}

impl Default for CrossEntropyLoss {
    fn default() -> Self {
        let o = CrossEntropyOptions::default();
        CrossEntropyLoss {
            weight: o.weight,
            ignore_index: o.ignore_index,
            reduction: o.reduction,
            label_smoothing: o.label_smoothing,
        }
    }
}

impl CrossEntropyLoss {
    fn options(&self) -> CrossEntropyOptions {
        CrossEntropyOptions {
            weight: self.weight.clone(),
            ignore_index: self.ignore_index,
            reduction: self.reduction,
            label_smoothing: self.label_smoothing,
        }
    }

    /// The loss of logits `[N, C, ..]` against class ids `[N, ..]` or class
    /// probabilities shaped as the logits.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        cross_entropy_with(input, target, &self.options())
    }
}

/// `nn.NLLLoss`: see [`nll_loss_with`] (log-probabilities in).
#[derive(Clone, Debug)]
pub struct NLLLoss {
    /// A weight per class (a buffer).
    pub weight: Option<Tensor>,
    /// A target class whose samples are left out (-100).
    pub ignore_index: i64,
    /// How per-sample losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for NLLLoss {
    fn default() -> Self {
        NLLLoss {
            weight: None,
            ignore_index: -100,
            reduction: Reduction::Mean,
        }
    }
}

impl NLLLoss {
    /// The loss of log-probabilities `[N, C, ..]` against class ids.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        let o = CrossEntropyOptions {
            weight: self.weight.clone(),
            ignore_index: self.ignore_index,
            reduction: self.reduction,
            label_smoothing: 0.0,
        };
        nll_loss_with(input, target, &o)
    }
}

/// Losses whose only argument is the reduction: `nn.MSELoss`, `nn.L1Loss`,
/// `nn.SoftMarginLoss`, `nn.MultiLabelMarginLoss`.
macro_rules! reduction_loss {
    ($($(#[$doc:meta])* $name:ident => $f:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            /// How per-element losses are reduced (mean).
            pub reduction: Reduction,
        }

        impl $name {
            /// The loss of `input` against `target`.
            #[track_caller]
            pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
                $f(input, target, self.reduction)
            }
        }
    )*};
}

reduction_loss! {
    /// `nn.MSELoss`: see [`mse_loss`].
    ///
    /// ```
    /// use tapir_runtime::{nn::MSELoss, Tensor};
    /// let loss = MSELoss::default().forward(&Tensor::ones(&[2]), &Tensor::zeros(&[2]));
    /// assert_eq!(loss.item::<f32>(), 1.0);
    /// ```
    MSELoss => mse_loss;
    /// `nn.L1Loss`: see [`l1_loss`].
    L1Loss => l1_loss;
    /// `nn.SoftMarginLoss`: see [`soft_margin_loss`].
    SoftMarginLoss => soft_margin_loss;
    /// `nn.MultiLabelMarginLoss`: see [`multilabel_margin_loss`].
    MultiLabelMarginLoss => multilabel_margin_loss;
}

/// `nn.SmoothL1Loss`: see [`smooth_l1_loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SmoothL1Loss {
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear (1.0).
    pub beta: f64,
}

impl Default for SmoothL1Loss {
    fn default() -> Self {
        SmoothL1Loss {
            reduction: Reduction::Mean,
            beta: 1.0,
        }
    }
}

impl SmoothL1Loss {
    /// The loss of `input` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        smooth_l1_loss(input, target, self.reduction, self.beta)
    }
}

/// `nn.HuberLoss`: see [`huber_loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HuberLoss {
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
    /// Where the loss turns from quadratic to linear (1.0).
    pub delta: f64,
}

impl Default for HuberLoss {
    fn default() -> Self {
        HuberLoss {
            reduction: Reduction::Mean,
            delta: 1.0,
        }
    }
}

impl HuberLoss {
    /// The loss of `input` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        huber_loss(input, target, self.reduction, self.delta)
    }
}

/// `nn.BCELoss`: see [`binary_cross_entropy`] (probabilities in).
#[derive(Clone, Debug, Default)]
pub struct BCELoss {
    /// A weight per element, broadcast (a buffer).
    pub weight: Option<Tensor>,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
}

impl BCELoss {
    /// The loss of probabilities `input` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        binary_cross_entropy(input, target, self.weight.as_ref(), self.reduction)
    }
}

/// `nn.BCEWithLogitsLoss`: see [`binary_cross_entropy_with_logits`].
///
/// ```
/// use tapir_runtime::{nn::{BCEWithLogitsLoss, Module}, Tensor};
/// let criterion = BCEWithLogitsLoss { pos_weight: Some(Tensor::full(&[3], 2.0)), ..Default::default() };
/// let names: Vec<String> = criterion.state_dict().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["pos_weight"]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct BCEWithLogitsLoss {
    /// A weight per element, broadcast (a buffer).
    pub weight: Option<Tensor>,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
    /// A weight of the positive term per class, broadcast (a buffer).
    pub pos_weight: Option<Tensor>,
}

impl BCEWithLogitsLoss {
    /// The loss of logits `input` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        let (w, pw) = (self.weight.as_ref(), self.pos_weight.as_ref());
        binary_cross_entropy_with_logits(input, target, w, pw, self.reduction)
    }
}

/// `nn.KLDivLoss`: see [`kl_div`] (log-probabilities in; PyTorch's
/// default reduction is the mean over elements, `batchmean` is the sum
/// divided by the batch size: use `Sum` and divide).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KLDivLoss {
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
    /// Whether the target is given as log-probabilities (false).
    pub log_target: bool,
}

impl KLDivLoss {
    /// The divergence of `target` from `input`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        kl_div(input, target, self.reduction, self.log_target)
    }
}

/// `nn.HingeEmbeddingLoss`: see [`hinge_embedding_loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HingeEmbeddingLoss {
    /// The margin for dissimilar pairs (1.0).
    pub margin: f64,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for HingeEmbeddingLoss {
    fn default() -> Self {
        HingeEmbeddingLoss {
            margin: 1.0,
            reduction: Reduction::Mean,
        }
    }
}

impl HingeEmbeddingLoss {
    /// The loss of distances `input` against labels ±1.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        hinge_embedding_loss(input, target, self.margin, self.reduction)
    }
}

/// `nn.MultiMarginLoss`: see [`multi_margin_loss`].
#[derive(Clone, Debug)]
pub struct MultiMarginLoss {
    /// 1 or 2: the hinge's power (1).
    pub p: u32,
    /// The margin (1.0).
    pub margin: f64,
    /// A weight per class (a buffer).
    pub weight: Option<Tensor>,
    /// How per-sample losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for MultiMarginLoss {
    fn default() -> Self {
        MultiMarginLoss {
            p: 1,
            margin: 1.0,
            weight: None,
            reduction: Reduction::Mean,
        }
    }
}

impl MultiMarginLoss {
    /// The loss of scores `[N, C]` against class ids `[N]`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        let w = self.weight.as_ref();
        multi_margin_loss(input, target, self.p, self.margin, w, self.reduction)
    }
}

/// `nn.MultiLabelSoftMarginLoss`: see [`multilabel_soft_margin_loss`].
#[derive(Clone, Debug, Default)]
pub struct MultiLabelSoftMarginLoss {
    /// A weight per class (a buffer).
    pub weight: Option<Tensor>,
    /// How per-sample losses are reduced (mean).
    pub reduction: Reduction,
}

impl MultiLabelSoftMarginLoss {
    /// The loss of scores `[N, C]` against 0/1 labels `[N, C]`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        multilabel_soft_margin_loss(input, target, self.weight.as_ref(), self.reduction)
    }
}

/// `nn.PoissonNLLLoss`: see [`poisson_nll_loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoissonNLLLoss {
    /// Whether the input is the rate's log (true).
    pub log_input: bool,
    /// Whether Stirling's term is added (false).
    pub full: bool,
    /// Keeps the log away from zero when `log_input` is false (1e-8).
    pub eps: f64,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for PoissonNLLLoss {
    fn default() -> Self {
        PoissonNLLLoss {
            log_input: true,
            full: false,
            eps: 1e-8,
            reduction: Reduction::Mean,
        }
    }
}

impl PoissonNLLLoss {
    /// The loss of rates `input` against counts `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        let s = *self;
        poisson_nll_loss(input, target, s.log_input, s.full, s.eps, s.reduction)
    }
}

/// `nn.GaussianNLLLoss`: see [`gaussian_nll_loss`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GaussianNLLLoss {
    /// Whether the constant term is added (false).
    pub full: bool,
    /// The variance's floor (1e-6).
    pub eps: f64,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for GaussianNLLLoss {
    fn default() -> Self {
        GaussianNLLLoss {
            full: false,
            eps: 1e-6,
            reduction: Reduction::Mean,
        }
    }
}

impl GaussianNLLLoss {
    /// The loss of means `input` with variances `var` against `target`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor, var: &Tensor) -> Tensor {
        gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)
    }
}

/// `nn.MarginRankingLoss`: see [`margin_ranking_loss`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MarginRankingLoss {
    /// How far apart the ranked pair must be (0.0).
    pub margin: f64,
    /// How per-element losses are reduced (mean).
    pub reduction: Reduction,
}

impl MarginRankingLoss {
    /// The loss of ranking `input1` above `input2` where `target` is 1.
    #[track_caller]
    pub fn forward(&self, input1: &Tensor, input2: &Tensor, target: &Tensor) -> Tensor {
        margin_ranking_loss(input1, input2, target, self.margin, self.reduction)
    }
}

/// `nn.CosineEmbeddingLoss`: see [`cosine_embedding_loss`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CosineEmbeddingLoss {
    /// The cosine below which dissimilar pairs cost nothing (0.0).
    pub margin: f64,
    /// How per-pair losses are reduced (mean).
    pub reduction: Reduction,
}

impl CosineEmbeddingLoss {
    /// The loss of pairs `input1`, `input2` labelled ±1 by `target`.
    #[track_caller]
    pub fn forward(&self, input1: &Tensor, input2: &Tensor, target: &Tensor) -> Tensor {
        cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)
    }
}

/// `nn.TripletMarginLoss`: see [`triplet_margin_loss`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TripletMarginLoss {
    /// Margin, norm, eps and swap (1.0, 2, 1e-6, false).
    pub options: TripletMarginOptions,
    /// How per-triplet losses are reduced (mean).
    pub reduction: Reduction,
}

impl TripletMarginLoss {
    /// The loss of `anchor` nearer `positive` than `negative` by the margin.
    #[track_caller]
    pub fn forward(&self, anchor: &Tensor, positive: &Tensor, negative: &Tensor) -> Tensor {
        triplet_margin_loss(anchor, positive, negative, self.options, self.reduction)
    }
}

/// A distance of two `[N, ..]` batches to `[N]`, shared by clones.
pub type DistanceFn = std::sync::Arc<dyn Fn(&Tensor, &Tensor) -> Tensor + Send + Sync>;

/// `nn.TripletMarginWithDistanceLoss`: see
/// [`triplet_margin_with_distance_loss`].
///
/// ```
/// use std::sync::Arc;
/// use tapir_runtime::{nn::{pairwise_distance, TripletMarginWithDistanceLoss}, Tensor};
/// let l1: tapir_runtime::nn::DistanceFn = Arc::new(|a, b| pairwise_distance(a, b, 1.0, 1e-6, false));
/// let criterion = TripletMarginWithDistanceLoss { distance_function: Some(l1), ..Default::default() };
/// let x = Tensor::zeros(&[2, 3]);
/// assert_eq!(criterion.forward(&x, &x, &x).item::<f32>(), 1.0);
/// ```
#[derive(Clone)]
pub struct TripletMarginWithDistanceLoss {
    /// The distance (the Euclidean [`super::pairwise_distance`] when `None`).
    pub distance_function: Option<DistanceFn>,
    /// How much nearer the positive must be (1.0).
    pub margin: f64,
    /// Use the positive-negative distance when it is smaller (false).
    pub swap: bool,
    /// How per-triplet losses are reduced (mean).
    pub reduction: Reduction,
}

impl Default for TripletMarginWithDistanceLoss {
    fn default() -> Self {
        TripletMarginWithDistanceLoss {
            distance_function: None,
            margin: 1.0,
            swap: false,
            reduction: Reduction::Mean,
        }
    }
}

impl TripletMarginWithDistanceLoss {
    /// The loss of `anchor` nearer `positive` than `negative` by the margin.
    #[track_caller]
    pub fn forward(&self, anchor: &Tensor, positive: &Tensor, negative: &Tensor) -> Tensor {
        let d = self
            .distance_function
            .as_deref()
            .map(|f| f as super::margin_loss::Distance);
        let (m, s, r) = (self.margin, self.swap, self.reduction);
        triplet_margin_with_distance_loss(anchor, positive, negative, d, m, s, r)
    }
}

/// `nn.CTCLoss`: see [`ctc_loss`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CTCLoss {
    /// Blank index, reduction and `zero_infinity` (0, mean, false).
    pub options: CtcOptions,
}

impl CTCLoss {
    /// The loss of `log_probs` `[T, N, C]` against `targets`.
    #[track_caller]
    pub fn forward(
        &self,
        log_probs: &Tensor,
        targets: &Tensor,
        input_lengths: &[usize],
        target_lengths: &[usize],
    ) -> Tensor {
        ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            &self.options,
        )
    }
}

loss_module! {
    CrossEntropyLoss [weight];
    NLLLoss [weight];
    MSELoss [];
    L1Loss [];
    SoftMarginLoss [];
    MultiLabelMarginLoss [];
    SmoothL1Loss [];
    HuberLoss [];
    BCELoss [weight];
    BCEWithLogitsLoss [weight, pos_weight];
    KLDivLoss [];
    HingeEmbeddingLoss [];
    MultiMarginLoss [weight];
    MultiLabelSoftMarginLoss [weight];
    PoissonNLLLoss [];
    GaussianNLLLoss [];
    MarginRankingLoss [];
    CosineEmbeddingLoss [];
    TripletMarginLoss [];
    TripletMarginWithDistanceLoss [];
    CTCLoss [];
}
