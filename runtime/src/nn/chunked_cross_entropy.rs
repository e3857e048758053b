//! The chunked path of [`linear_cross_entropy_with`](super::linear_cross_entropy_with):
//! the batch runs `chunk` rows at a time, so a large vocabulary's `[N, C]`
//! logits never exist whole; the largest temporaries are a chunk's
//! `[chunk, C]` logits and the `[C, in_features]` weight gradient.
//!
//! As in PyTorch, the scalar reductions compute every gradient in the
//! forward (one pass over the chunks) and their backward only scales them
//! by the incoming gradient; `reduction = None` computes the per-row losses
//! in the forward and runs the chunks again in its backward, weighted by
//! the incoming gradient per row. Everything is tensor ops, so it runs on
//! either device; f16 / bf16 inputs run in f32 (PyTorch's `"accurate"`
//! policy, its choice on the CPU) and their gradients come back in their
//! own dtype.

use super::loss::Reduction;
use crate::amp::{AutocastGuard, DeviceType};
use crate::trace::{self, Attr};
use crate::{DType, Tensor, autograd};

const OP: &str = "linear_cross_entropy";

/// One chunked loss: the op's inputs and settings (what compile replays).
pub(crate) struct ChunkedLoss<'a> {
    /// `[N, in_features]`.
    pub x: &'a Tensor,
    /// `[C, in_features]`.
    pub w: &'a Tensor,
    /// `[N]` int64 class indices, or `[N, C]` probabilities in `x`'s dtype.
    pub target: &'a Tensor,
    /// `[C]`.
    pub bias: Option<&'a Tensor>,
    /// `[C]`, a weight per class.
    pub class_weight: Option<&'a Tensor>,
    pub reduction: Reduction,
    pub ignore_index: i64,
    /// Rows per chunk (at least 1).
    pub chunk: usize,
    /// Whether a second backward may reuse the gradients the forward made.
    pub allow_retain_graph: bool,
}

impl ChunkedLoss<'_> {
    /// The loss: `[N]` for `Reduction::None`, else a scalar.
    pub(crate) fn run(&self) -> Tensor {
        trace::op(
            "linear_cross_entropy_chunked",
            [
                Some(self.x),
                Some(self.w),
                Some(self.target),
                self.bias,
                self.class_weight,
            ],
            || {
                vec![
                    ("reduction", Attr::Int(self.reduction.code())),
                    ("ignore_index", Attr::Int(self.ignore_index)),
                    ("chunk", Attr::Int(self.chunk as i64)),
                    (
                        "allow_retain_graph",
                        Attr::Int(self.allow_retain_graph as i64),
                    ),
                ]
            },
            || self.untraced(),
        )
    }

    fn untraced(&self) -> Tensor {
        let plan = Chunks::new(self);
        let mut inputs = vec![self.x, self.w];
        inputs.extend(self.bias);
        let grads_on = autograd::is_grad_enabled();
        let need = [
            grads_on && self.x.requires_grad(),
            grads_on && self.w.requires_grad(),
            grads_on && self.bias.is_some_and(|b| b.requires_grad()),
        ];
        let dtypes = [
            self.x.dtype(),
            self.w.dtype(),
            self.bias.map_or(DType::F32, |b| b.dtype()),
        ];
        let has_bias = self.bias.is_some();
        if self.reduction == Reduction::None {
            // Cast inside the closure: the rows it casts from die there, so
            // the recorded output is not shared.
            let rows = autograd::no_grad(|| plan.pass(None, [false; 3]).0.to_dtype(self.x.dtype()));
            return Tensor::record(
                rows,
                "LinearCrossEntropyChunkedNoReductionBackward0",
                &inputs,
                || {
                    move |g: &Tensor, _: &[bool]| {
                        let g = g.to_dtype(plan.dtype);
                        let (_, grads) = autograd::no_grad(|| plan.pass(Some(&g), need));
                        in_dtypes(grads, dtypes, has_bias)
                    }
                },
            );
        }
        let (loss, grads) = autograd::no_grad(|| {
            let scale = plan.mean_scale(self.reduction);
            let (rows, grads) = plan.pass(scale.as_ref(), need);
            let total = rows.sum();
            let loss = match self.reduction {
                Reduction::Mean if plan.prob => &total * (1.0 / self.x.shape()[0] as f64),
                Reduction::Mean => &total / &plan.total_weight(),
                _ => total,
            };
            (loss.to_dtype(self.x.dtype()), grads)
        });
        let mut stash = Some(in_dtypes(grads, dtypes, has_bias));
        let keep = self.allow_retain_graph;
        Tensor::record(loss, "LinearCrossEntropyChunkedBackward0", &inputs, || {
            move |g: &Tensor, _: &[bool]| {
                let grads = if keep { stash.clone() } else { stash.take() };
                let grads = grads.unwrap_or_else(|| {
                    panic!(
                        "{OP}: backward ran twice through the chunked loss, whose gradients the first backward \
                         used up; set allow_retain_graph in LinearCrossEntropyOptions to keep them"
                    )
                });
                grads
                    .into_iter()
                    .map(|t| t.map(|t| &t * &g.to_dtype(t.dtype())))
                    .collect()
            }
        })
    }
}

/// `grads` in their inputs' dtypes, one per input (no bias slot without a bias).
fn in_dtypes(
    grads: [Option<Tensor>; 3],
    dtypes: [DType; 3],
    has_bias: bool,
) -> Vec<Option<Tensor>> {
    let [x, w, b] = grads;
    let mut out = vec![
        x.map(|t| t.to_dtype(dtypes[0])),
        w.map(|t| t.to_dtype(dtypes[1])),
    ];
    if has_bias {
        out.push(b.map(|t| t.to_dtype(dtypes[2])));
    }
    out
}

/// The loss's inputs detached and in the dtype the chunks run in, and what
/// every chunk shares: the class-index targets made safe for gathering
/// (ignored rows at class 0) and each row's weight (0 where ignored).
struct Chunks {
    x: Tensor,
    w: Tensor,
    bias: Option<Tensor>,
    target: Tensor,
    class_weight: Option<Tensor>,
    /// Whether `target` holds probabilities.
    prob: bool,
    /// Class-index targets: `(safe targets, row weights)`, `[N]` each.
    rows: Option<(Tensor, Tensor)>,
    chunk: usize,
    dtype: DType,
}

impl Chunks {
    fn new(l: &ChunkedLoss) -> Chunks {
        let dtype = match l.x.dtype() {
            DType::F16 | DType::BF16 => DType::F32,
            d => d,
        };
        let cast = |t: &Tensor| t.detach().to_dtype(dtype);
        let prob = l.target.dtype().is_float();
        let class_weight = l.class_weight.map(cast);
        let rows = (!prob).then(|| {
            let valid = l.target.ne_scalar(l.ignore_index as f64);
            let safe = Tensor::where_(&valid, l.target, &Tensor::zeros_like(l.target));
            let mut weight = valid.to_dtype(dtype);
            if let Some(cw) = &class_weight {
                // A gather: a target outside [0, C) names the op.
                weight = &weight * &cw.gather_as(0, &safe, OP);
            }
            (safe.detach(), weight)
        });
        Chunks {
            x: cast(l.x),
            w: cast(l.w),
            bias: l.bias.map(cast),
            target: if prob {
                cast(l.target)
            } else {
                l.target.detach()
            },
            class_weight,
            prob,
            rows,
            chunk: l.chunk.max(1),
            dtype,
        }
    }

    /// Sum of the row weights: a mean's denominator for class-index targets.
    fn total_weight(&self) -> Tensor {
        let (_, weight) = self.rows.as_ref().expect("class-index targets");
        weight.sum()
    }

    /// Each row's factor in the loss a backward differentiates: `1 / sum of
    /// row weights` for a mean over class indices, `1 / N` for a mean over
    /// probabilities (PyTorch's), none for a sum.
    fn mean_scale(&self, r: Reduction) -> Option<Tensor> {
        if r != Reduction::Mean {
            return None;
        }
        let n = self.x.shape()[0];
        Some(if self.prob {
            Tensor::full_on(&[n], 1.0 / n as f64, self.dtype, self.x.device())
        } else {
            &Tensor::full_on(&[n], 1.0, self.dtype, self.x.device()) / &self.total_weight()
        })
    }

    /// One pass over the chunks: each row's loss `[N]` (its weight applied),
    /// and, where `need` asks, the gradients of `sum_n scale_n * loss_n`
    /// for the input, the weight and the bias (`scale`: `[N]`, or 1).
    fn pass(&self, scale: Option<&Tensor>, need: [bool; 3]) -> (Tensor, [Option<Tensor>; 3]) {
        let _no_autocast = [
            AutocastGuard::new(DeviceType::Cpu, None, false),
            AutocastGuard::new(DeviceType::Cuda, None, false),
        ];
        let n = self.x.shape()[0];
        let (c, f) = (self.w.shape()[0], self.w.shape()[1]);
        let dev = self.x.device();
        let any = need.iter().any(|&b| b);
        // Each row's factor in the gradient: its weight times its scale.
        let row_scale = any.then(|| match (&self.rows, scale) {
            (Some((_, weight)), Some(s)) => weight * s,
            (Some((_, weight)), None) => weight.clone(),
            (None, Some(s)) => s.clone(),
            (None, None) => Tensor::full_on(&[n], 1.0, self.dtype, dev),
        });
        let mut losses = Vec::new();
        let mut gx = Vec::new();
        let gw = need[1].then(|| Tensor::zeros_on(&[c, f], self.dtype, dev));
        let gb = (need[2]).then(|| Tensor::zeros_on(&[c], self.dtype, dev));
        for start in (0..n).step_by(self.chunk) {
            let len = self.chunk.min(n - start);
            let xc = self.x.narrow(0, start, len);
            let logits = self.logits(&xc);
            // The fused row kernels (one pass each, vectorised) rather than
            // logsumexp and exp: half the time of a chunk's elementwise work.
            let logp = logits.log_softmax(1);
            let prob_weights = self.prob.then(|| self.prob_weights(start, len));
            let loss = match (&self.rows, &prob_weights) {
                (Some((safe, weight)), _) => {
                    let t = safe.narrow(0, start, len).unsqueeze(1);
                    let picked = logp.gather_as(1, &t, OP).squeeze_dim(1);
                    &picked.neg() * &weight.narrow(0, start, len)
                }
                (None, Some((wt, _))) => (wt * &logp).sum_dim(1, false).neg(),
                (None, None) => unreachable!("a chunk has class indices or probabilities"),
            };
            drop(logp);
            losses.push(loss);
            let Some(row_scale) = &row_scale else {
                continue;
            };
            // The logits' gradient: softmax times each row's factor, less
            // (probabilities) the weighted target; class indices subtract
            // theirs after the loop, from the whole batch at once.
            let s = row_scale.narrow(0, start, len).unsqueeze(1);
            let g = logits.softmax(1);
            drop(logits);
            let g = match &prob_weights {
                Some((wt, mass)) => &(&(&g * mass) - wt) * &s,
                None => {
                    g.mul_(&s);
                    g
                }
            };
            if need[0] {
                gx.push(g.mm(&self.w));
            }
            if let Some(gw) = &gw {
                gw.addmm_(&g.t(), &xc, 1.0, 1.0);
            }
            if let Some(gb) = &gb {
                gb.add_(&g.sum_dim(0, false));
            }
        }
        let losses = if losses.is_empty() {
            Tensor::zeros_on(&[0], self.dtype, dev)
        } else {
            Tensor::cat(&losses.iter().collect::<Vec<_>>(), 0)
        };
        let mut gx = need[0].then(|| match gx.len() {
            0 => Tensor::zeros_on(&[0, f], self.dtype, dev),
            _ => Tensor::cat(&gx.iter().collect::<Vec<_>>(), 0),
        });
        let (mut gw, mut gb) = (gw, gb);
        if let (Some((safe, _)), Some(row_scale)) = (&self.rows, &row_scale) {
            // The one-hot part of softmax - one_hot(target), for every row.
            let s = row_scale.unsqueeze(1);
            gx = gx.map(|gx| &gx - &(&self.w.index_select(0, safe) * &s));
            gw = gw.map(|gw| gw.index_add(0, safe, &(&self.x * &s), -1.0));
            gb = gb.map(|gb| gb.index_add(0, safe, row_scale, -1.0));
        }
        (losses, [gx, gw, gb])
    }

    /// A chunk's logits `[len, C]`, computed as `(W xᵀ)ᵀ`: with the few
    /// rows of a chunk, `W` as the product's many-rowed left operand ran
    /// 1.4x faster than `x Wᵀ`, whose column-major `Wᵀ` gemm packs slowly
    /// (`bench_ref --one lm_head.chunked_v32k --profile`).
    fn logits(&self, xc: &Tensor) -> Tensor {
        let logits = self.w.mm(&xc.t()).t().contiguous();
        if let Some(b) = &self.bias {
            logits.add_(b);
        }
        logits
    }

    /// Probability targets of rows `start..start + len`: the weighted
    /// targets `[len, C]` and each row's mass `[len, 1]`.
    fn prob_weights(&self, start: usize, len: usize) -> (Tensor, Tensor) {
        let t = self.target.narrow(0, start, len);
        let wt = match &self.class_weight {
            Some(cw) => &t * &cw.unsqueeze(0),
            None => t,
        };
        let mass = wt.sum_dim(1, true);
        (wt, mass)
    }
}
