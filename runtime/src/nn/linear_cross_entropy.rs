//! `F.linear_cross_entropy` and `nn.LinearCrossEntropyLoss` (PyTorch 2.15):
//! a linear layer's logits and their cross entropy in one call. With
//! [`LinearCrossEntropyOptions`] the batch runs in chunks, so an LM head's
//! `[N, vocab]` logits never exist whole (see `chunked_cross_entropy.rs`).

use super::chunked_cross_entropy::ChunkedLoss;
use super::linear::{Linear, linear};
use super::loss::{CrossEntropyOptions, Reduction, cross_entropy_as};
use super::module::{Module, TensorKind, named_children, py_float, visit_child, visit_child_mut};
use crate::{DType, Device, Tensor};

const OP: &str = "linear_cross_entropy";

/// How [`LinearCrossEntropyOptions`] sizes its chunks (PyTorch's `chunking_method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChunkingMethod {
    /// `"auto"`: `AspectRatio(1)`, capped (in f32 and f64, or on a GPU) so
    /// the chunked peak stays below the unchunked one when `in_features`
    /// is not much smaller than the class count.
    #[default]
    Auto,
    /// `"aspect_ratio:N"`: chunks whose `[chunk, C]` logits are about the
    /// size of the `[N, in_features]` input (a power of two), divided by N.
    AspectRatio(usize),
}

impl std::fmt::Display for ChunkingMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkingMethod::Auto => write!(f, "auto"),
            ChunkingMethod::AspectRatio(1) => write!(f, "aspect_ratio"),
            ChunkingMethod::AspectRatio(n) => write!(f, "aspect_ratio:{n}"),
        }
    }
}

/// PyTorch's `LinearCrossEntropyOptions`: passing it (even
/// `Default::default()`) opts into the chunked path, whose peak memory is
/// a chunk's logits instead of the whole batch's.
///
/// ```
/// use tapir_runtime::nn::LinearCrossEntropyOptions;
/// use tapir_runtime::{DType, Device};
/// let o = LinearCrossEntropyOptions::default(); // "auto"
/// // 4096 tokens, 512 features, a 32000-word vocabulary: 128 rows a chunk
/// // (its [128, 32000] logits about the size of the [4096, 512] input).
/// assert_eq!(o.chunk_size(4096, 512, 32000, DType::F32, Device::Cpu, false), 128);
/// let fixed = LinearCrossEntropyOptions { batch_chunk_size: Some(256), ..o };
/// assert_eq!(fixed.chunk_size(4096, 512, 32000, DType::F32, Device::Cpu, false), 256);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearCrossEntropyOptions {
    /// Rows per chunk; `None` lets `chunking_method` choose (default).
    pub batch_chunk_size: Option<usize>,
    /// The heuristic for the chunk size (`Some(Auto)`); `None` uses
    /// `batch_chunk_size`, or one chunk.
    pub chunking_method: Option<ChunkingMethod>,
    /// Keep the gradients the forward computed for a second backward
    /// (`retain_graph`); off, a second backward panics (default `false`).
    pub allow_retain_graph: bool,
}

impl Default for LinearCrossEntropyOptions {
    fn default() -> Self {
        LinearCrossEntropyOptions {
            batch_chunk_size: None,
            chunking_method: Some(ChunkingMethod::Auto),
            allow_retain_graph: false,
        }
    }
}

impl LinearCrossEntropyOptions {
    /// The rows per chunk for a batch of `num_batches` rows, as PyTorch
    /// picks them (`LinearCrossEntropyOptions._adjust`). Panics when
    /// `batch_chunk_size` and an explicit `chunking_method` disagree.
    pub fn chunk_size(
        &self,
        num_batches: usize,
        in_features: usize,
        num_classes: usize,
        dtype: DType,
        device: Device,
        prob_target: bool,
    ) -> usize {
        assert!(
            self.batch_chunk_size != Some(0),
            "{OP}: batch_chunk_size must be positive, got 0"
        );
        assert!(
            self.chunking_method != Some(ChunkingMethod::AspectRatio(0)),
            "{OP}: invalid chunking_method aspect_ratio:0 (the divisor must be at least 1)"
        );
        let was_auto = self.chunking_method == Some(ChunkingMethod::Auto);
        let factor = match self.chunking_method {
            Some(ChunkingMethod::Auto) if self.batch_chunk_size.is_some() => None,
            Some(ChunkingMethod::Auto) => Some(1),
            Some(ChunkingMethod::AspectRatio(n)) => Some(n),
            None => None,
        };
        let mut size = self
            .batch_chunk_size
            .map_or(num_batches, |b| b.min(num_batches));
        if let Some(factor) = factor {
            let in_features = in_features.max(1);
            let per_row = num_classes.div_ceil(in_features).max(1);
            let rows = num_batches.div_ceil(per_row);
            let pow2 = if rows == 0 {
                2
            } else {
                rows.next_power_of_two()
            };
            size = (pow2 / factor).min(num_batches);
            // PyTorch's "compact" policy (all but half types on the CPU)
            // caps auto chunks at the largest power of two whose peak stays
            // at or below the unchunked reference's.
            let compact = !(device == Device::Cpu && matches!(dtype, DType::F16 | DType::BF16));
            if was_auto && compact {
                let limit = if prob_target {
                    num_batches / 2
                } else {
                    num_batches * num_classes / (4 * in_features)
                };
                let limit = if limit >= 1 { 1 << limit.ilog2() } else { 1 };
                size = size.min(limit).max(1);
            }
            if let Some(b) = self.batch_chunk_size {
                let method = ChunkingMethod::AspectRatio(factor);
                assert!(
                    b == size,
                    "{OP}: batch_chunk_size (={b}) and chunking_method ('{method}') give different chunk sizes \
                     ({b} vs {size}); pass only one"
                );
            }
        }
        size.max(1)
    }

    /// PyTorch's repr of the options.
    fn repr(&self) -> String {
        let chunk = self
            .batch_chunk_size
            .map_or("None".into(), |b| b.to_string());
        let method = self
            .chunking_method
            .map_or("None".into(), |m| format!("'{m}'"));
        let retain = if self.allow_retain_graph {
            "True"
        } else {
            "False"
        };
        format!(
            "LinearCrossEntropyOptions(allow_retain_graph={retain}, batch_chunk_size={chunk}, \
             chunking_method={method}, acc_policy='auto', acc_dtype=None)"
        )
    }
}

/// The keyword arguments of [`linear_cross_entropy_with`], with PyTorch's
/// defaults (`Default`).
#[derive(Clone, Debug, Default)]
pub struct LinearCrossEntropyArgs {
    /// `[C]` (or `[C, d1, ..]`), added to the logits.
    pub linear_bias: Option<Tensor>,
    /// A weight per class, `[C]`.
    pub weight: Option<Tensor>,
    /// How per-row losses are reduced (mean).
    pub reduction: Reduction,
    /// A target class whose rows are left out; `None` means -100 for class
    /// indices, and is the only choice with probability targets.
    pub ignore_index: Option<i64>,
    /// Mixes the target with the uniform distribution by this much (0).
    pub label_smoothing: f64,
    /// `Some` opts into the chunked path (see [`LinearCrossEntropyOptions`]).
    pub options: Option<LinearCrossEntropyOptions>,
}

/// `F.linear_cross_entropy(input, linear_weight, target)`: the cross entropy
/// of `linear(input, linear_weight)` against `target`, with PyTorch's defaults.
///
/// ```
/// use tapir_runtime::{nn::linear_cross_entropy, Tensor};
/// let x = Tensor::ones(&[2, 3]);
/// let w = Tensor::zeros(&[4, 3]); // four classes, equally likely
/// let loss = linear_cross_entropy(&x, &w, &Tensor::from_vec(vec![1i64, 3], &[2]));
/// assert!((loss.item::<f32>() - 4f32.ln()).abs() < 1e-6);
/// ```
#[track_caller]
pub fn linear_cross_entropy(input: &Tensor, linear_weight: &Tensor, target: &Tensor) -> Tensor {
    linear_cross_entropy_with(
        input,
        linear_weight,
        target,
        &LinearCrossEntropyArgs::default(),
    )
}

/// `F.linear_cross_entropy` with its keyword arguments. `input` is
/// `[in_features]` or `[N, in_features]` (flatten a sequence to rows),
/// `linear_weight` `[C, in_features]` or `[C, d1, .., dK, in_features]` for
/// a K-dimensional loss; `target` holds class indices (int64, `[]`, `[N]`
/// or `[N, d1, ..]`) or class probabilities shaped as the logits.
///
/// Without `options` this is `cross_entropy(linear(..))` (PyTorch's
/// reference path). With them, class-index or probability targets without
/// label smoothing over a `[C, in_features]` weight run in chunks: the same
/// loss and gradients, without the whole logits. Other configurations warn
/// once and take the reference path, as PyTorch does. The chunked path's
/// gradients cannot be differentiated again.
///
/// ```
/// use tapir_runtime::nn::{linear_cross_entropy_with, LinearCrossEntropyArgs, LinearCrossEntropyOptions};
/// use tapir_runtime::Tensor;
/// let x = Tensor::randn(&[64, 16]).requires_grad_(true);
/// let w = Tensor::randn(&[1000, 16]).requires_grad_(true);
/// let y = Tensor::randint(0, 1000, &[64]);
/// let chunked = LinearCrossEntropyArgs {
///     options: Some(LinearCrossEntropyOptions { batch_chunk_size: Some(8), ..Default::default() }),
///     ..Default::default()
/// };
/// let a = linear_cross_entropy_with(&x, &w, &y, &chunked); // 8 chunks of [8, 1000]
/// let b = linear_cross_entropy_with(&x, &w, &y, &Default::default());
/// assert!((a.item::<f32>() - b.item::<f32>()).abs() < 1e-4);
/// a.backward();
/// assert_eq!(w.grad().unwrap().shape(), &[1000, 16]);
/// ```
#[track_caller]
pub fn linear_cross_entropy_with(
    input: &Tensor,
    linear_weight: &Tensor,
    target: &Tensor,
    a: &LinearCrossEntropyArgs,
) -> Tensor {
    let logits_shape = check(input, linear_weight, target, a);
    let prob = target.shape() == logits_shape.as_slice();
    let out_features = &linear_weight.shape()[1..linear_weight.ndim() - 1];
    if let Some(o) = &a.options {
        let chunkable_prob = prob
            && target.dtype() == input.dtype()
            && !(target.requires_grad() && crate::autograd::is_grad_enabled());
        if a.label_smoothing == 0.0
            && (chunkable_prob || (!prob && target.dtype() == DType::I64))
            && out_features.is_empty()
        {
            return chunked(input, linear_weight, target, a, o, prob);
        }
        warn_options_ignored(a, target, out_features);
    }
    let in_features = input.size(-1) as isize;
    let (w, b) = if out_features.is_empty() {
        (linear_weight.clone(), a.linear_bias.clone())
    } else {
        let b = a.linear_bias.as_ref().map(|b| b.reshape(&[-1]));
        (linear_weight.reshape(&[-1, in_features]), b)
    };
    let logits = linear(input, &w, b.as_ref());
    let shape: Vec<isize> = logits_shape.iter().map(|&s| s as isize).collect();
    let o = CrossEntropyOptions {
        weight: a.weight.clone(),
        ignore_index: a.ignore_index.unwrap_or(-100),
        reduction: a.reduction,
        label_smoothing: a.label_smoothing,
    };
    cross_entropy_as(&logits.reshape(&shape), target, &o, OP)
}

/// Checks the shapes as PyTorch does; the logits' shape.
fn check(input: &Tensor, w: &Tensor, target: &Tensor, a: &LinearCrossEntropyArgs) -> Vec<usize> {
    assert!(
        matches!(input.ndim(), 1 | 2),
        "{OP}: input must be [in_features] or [N, in_features] (flatten sequences to rows), got shape {:?}",
        input.shape()
    );
    assert!(
        w.ndim() >= 2 && w.size(-1) == input.size(-1),
        "{OP}: linear_weight of shape {:?} must be [C, .., in_features] with in_features = {} (input {:?})",
        w.shape(),
        input.size(-1),
        input.shape()
    );
    let classes = &w.shape()[..w.ndim() - 1];
    if let Some(b) = &a.linear_bias {
        assert!(
            b.shape() == classes,
            "{OP}: linear_bias must have shape {classes:?} (linear_weight {:?}), got {:?}",
            w.shape(),
            b.shape()
        );
    }
    assert!(
        classes.len() == 1 || input.ndim() == 2,
        "{OP}: a K-dimensional loss (linear_weight {:?}) needs a batched input [N, {}], got {:?}",
        w.shape(),
        input.size(-1),
        input.shape()
    );
    let mut logits_shape = input.shape()[..input.ndim() - 1].to_vec();
    logits_shape.extend_from_slice(classes);
    if target.shape() == logits_shape.as_slice() {
        assert!(
            target.dtype().is_float(),
            "{OP}: a target shaped as the logits {logits_shape:?} holds probabilities and must be float, got {}",
            target.dtype()
        );
        assert!(
            a.ignore_index.is_none(),
            "{OP}: ignore_index cannot be specified when target contains probabilities"
        );
    } else {
        let mut ids = logits_shape.clone();
        ids.remove(input.ndim() - 1);
        assert!(
            target.shape() == ids.as_slice() && target.dtype() == DType::I64,
            "{OP}: target must be int64 class indices of shape {ids:?} or float probabilities of shape \
             {logits_shape:?}, got {} of shape {:?}",
            target.dtype(),
            target.shape()
        );
    }
    logits_shape
}

fn chunked(
    input: &Tensor,
    w: &Tensor,
    target: &Tensor,
    a: &LinearCrossEntropyArgs,
    o: &LinearCrossEntropyOptions,
    prob: bool,
) -> Tensor {
    let batched = input.ndim() == 2;
    let (x, t) = if batched {
        (input.clone(), target.clone())
    } else {
        (input.unsqueeze(0), target.unsqueeze(0))
    };
    let (n, f, c) = (x.shape()[0], x.shape()[1], w.shape()[0]);
    if let Some(cw) = &a.weight {
        assert!(
            cw.shape() == [c],
            "{OP}: weight must have shape [{c}], got {:?}",
            cw.shape()
        );
    }
    let loss = ChunkedLoss {
        x: &x,
        w,
        target: &t,
        bias: a.linear_bias.as_ref(),
        class_weight: a.weight.as_ref(),
        reduction: a.reduction,
        ignore_index: a.ignore_index.unwrap_or(-100),
        chunk: o.chunk_size(n, f, c, x.dtype(), x.device(), prob),
        allow_retain_graph: o.allow_retain_graph,
    }
    .run();
    if batched || loss.ndim() == 0 {
        loss
    } else {
        loss.squeeze_dim(0)
    }
}

fn warn_options_ignored(a: &LinearCrossEntropyArgs, target: &Tensor, out_features: &[usize]) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        eprintln!(
            "warning: {OP}: options ignored; the chunked path needs label_smoothing == 0, int64 targets (or \
             probabilities in the input's dtype that do not require grad) and out_features == []. Got \
             label_smoothing={}, target dtype {}, out_features={out_features:?}",
            a.label_smoothing,
            target.dtype()
        )
    });
}

/// `nn.LinearCrossEntropyLoss`: a `Linear(in_features, C * prod(out_features))`
/// head (`linear`, without a bias by default) and its cross entropy,
/// through [`linear_cross_entropy_with`]. `linear.weight` is stored flat and
/// reshaped in `forward`, as PyTorch's; the class weight is a buffer.
///
/// ```
/// use tapir_runtime::nn::{LinearCrossEntropyLoss, LinearCrossEntropyOptions, Module};
/// use tapir_runtime::Tensor;
/// let mut head = LinearCrossEntropyLoss::new(16, 1000, false);
/// head.options = Some(LinearCrossEntropyOptions::default());
/// let loss = head.forward(&Tensor::randn(&[64, 16]), &Tensor::randint(0, 1000, &[64]));
/// loss.backward();
/// assert_eq!(head.named_parameters()[0].0, "linear.weight");
/// ```
pub struct LinearCrossEntropyLoss {
    /// The projection to the logits, `[C * prod(out_features), in_features]`.
    pub linear: Linear,
    /// The class count C.
    pub num_classes: usize,
    /// The K-dimensional loss's extra dims (empty).
    pub out_features: Vec<usize>,
    /// A weight per class (a buffer).
    pub weight: Option<Tensor>,
    /// How per-row losses are reduced (mean).
    pub reduction: Reduction,
    /// A target class whose rows are left out (`None`: -100 for indices).
    pub ignore_index: Option<i64>,
    /// Mixes the target with the uniform distribution by this much (0).
    pub label_smoothing: f64,
    /// `Some` runs the loss in chunks (`None`).
    pub options: Option<LinearCrossEntropyOptions>,
}

impl LinearCrossEntropyLoss {
    /// `nn.LinearCrossEntropyLoss(in_features, num_classes, bias=bias)`.
    pub fn new(in_features: usize, num_classes: usize, bias: bool) -> LinearCrossEntropyLoss {
        LinearCrossEntropyLoss::with_out_features(in_features, num_classes, &[], bias)
    }

    /// A K-dimensional loss: logits `[N, C, d1, .., dK]` (`out_features=(d1, ..)`).
    pub fn with_out_features(
        in_features: usize,
        num_classes: usize,
        out_features: &[usize],
        bias: bool,
    ) -> LinearCrossEntropyLoss {
        let outputs = num_classes * out_features.iter().product::<usize>();
        LinearCrossEntropyLoss {
            linear: Linear::new(in_features, outputs, bias),
            num_classes,
            out_features: out_features.to_vec(),
            weight: None,
            reduction: Reduction::Mean,
            ignore_index: None,
            label_smoothing: 0.0,
            options: None,
        }
    }

    /// The loss of `input` (`[in_features]` or `[N, in_features]`) against
    /// class indices or probabilities.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, target: &Tensor) -> Tensor {
        let mut shape: Vec<isize> = vec![self.num_classes as isize];
        shape.extend(self.out_features.iter().map(|&d| d as isize));
        let bias = self.linear.bias.as_ref().map(|b| b.reshape(&shape));
        shape.push(self.linear.in_features as isize);
        let args = LinearCrossEntropyArgs {
            linear_bias: bias,
            weight: self.weight.clone(),
            reduction: self.reduction,
            ignore_index: self.ignore_index,
            label_smoothing: self.label_smoothing,
            options: self.options.clone(),
        };
        linear_cross_entropy_with(input, &self.linear.weight.reshape(&shape), target, &args)
    }
}

impl Module for LinearCrossEntropyLoss {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        if let Some(w) = &self.weight {
            f("weight", w, TensorKind::Buffer);
        }
        visit_child("linear", &self.linear, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        if let Some(w) = &mut self.weight {
            f("weight", w, TensorKind::Buffer);
        }
        visit_child_mut("linear", &mut self.linear, f);
    }
    named_children!("linear" => linear);
    fn repr(&self) -> String {
        let dims: Vec<String> = self.out_features.iter().map(|d| d.to_string()).collect();
        let out_features = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let reduction = match self.reduction {
            Reduction::None => "none",
            Reduction::Mean => "mean",
            Reduction::Sum => "sum",
        };
        format!(
            "LinearCrossEntropyLoss(\n  in_features={}, num_classes={}, out_features={out_features}, bias={}, \
             reduction={reduction}, ignore_index={}, label_smoothing={}, options={}\n  (linear): {}\n)",
            self.linear.in_features,
            self.num_classes,
            if self.linear.bias.is_some() {
                "True"
            } else {
                "False"
            },
            self.ignore_index.map_or("None".into(), |i| i.to_string()),
            py_float(self.label_smoothing),
            self.options.as_ref().map_or("None".into(), |o| o.repr()),
            self.linear.repr()
        )
    }
}

crate::display_as_repr!(LinearCrossEntropyLoss);
