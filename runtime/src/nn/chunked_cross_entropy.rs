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

/// Most rows a block of the pass holds (see [`Chunks::block`]).
const MAX_ROWS: usize = 1024;
/// Fewest classes a block of the pass holds, where the vocabulary has them.
const MIN_COLS: usize = 256;

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

    /// Rows and classes of one block: `chunk * C` logits (what one of
    /// PyTorch's chunks holds) in at most `MAX_ROWS` rows and at least
    /// `MIN_COLS` classes, so that each block's products are large enough to
    /// run at the GEMM's speed rather than the memory's.
    fn block(&self, n: usize, c: usize) -> (usize, usize) {
        let rows = n.clamp(1, MAX_ROWS);
        let cols = (self.chunk * c / rows).max(MIN_COLS).min(c.max(1));
        (rows, cols)
    }

    /// One pass over the blocks: each row's loss `[N]` (its weight applied),
    /// and, where `need` asks, the gradients of `sum_n scale_n * loss_n`
    /// for the input, the weight and the bias (`scale`: `[N]`, or 1).
    ///
    /// PyTorch's chunks of 16 rows each stream the whole weight three times
    /// (logits, input gradient, weight gradient), so their products run at
    /// the memory's speed. Here a block of up to `MAX_ROWS` rows sweeps the
    /// classes twice, a few hundred at a time: first for each row's
    /// log-sum-exp, then recomputing each block's logits for its softmax
    /// and gradients. A third more multiplications, all of them large.
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
        // Each target's weight row: its logit, and the one-hot part of the
        // gradients (a gather, so a target outside [0, C) names the op).
        let target_rows = self
            .rows
            .as_ref()
            .map(|(safe, _)| self.w.gather_as(0, &safe.unsqueeze(1).expand(&[n, f]), OP));
        let gx = need[0].then(|| Tensor::zeros_on(&[n, f], self.dtype, dev));
        let gw = need[1].then(|| Tensor::zeros_on(&[c, f], self.dtype, dev));
        let gb = need[2].then(|| Tensor::zeros_on(&[c], self.dtype, dev));
        let (rows, cols) = self.block(n, c);
        let mut losses = Vec::new();
        for start in (0..n).step_by(rows) {
            let len = rows.min(n - start);
            let xr = self.x.narrow(0, start, len);
            let (lse, loss, reuse) = self.row_loss(&xr, start, cols, target_rows.as_ref());
            losses.push(loss);
            let Some(row_scale) = &row_scale else {
                continue;
            };
            let s = row_scale.narrow(0, start, len).unsqueeze(1);
            let lse = lse.unsqueeze(1);
            let mass = self.prob.then(|| self.mass(start, len).unsqueeze(1));
            let mut reuse = reuse;
            for c0 in (0..c).step_by(cols) {
                let width = cols.min(c - c0);
                let logits = reuse.take().unwrap_or_else(|| self.logits(&xr, c0, width));
                // The logits' gradient: softmax times each row's factor,
                // less (probabilities) the weighted target; class indices
                // subtract theirs after the loop, from the whole batch.
                let g = (&logits - &lse).exp();
                drop(logits);
                let g = match &mass {
                    Some(mass) => {
                        let wt = self.weighted_target(start, len, c0, width);
                        &(&(&g * mass) - &wt) * &s
                    }
                    None => {
                        g.mul_(&s);
                        g
                    }
                };
                if let Some(gx) = &gx {
                    gx.narrow(0, start, len)
                        .addmm_(&g, &self.w.narrow(0, c0, width), 1.0, 1.0);
                }
                if let Some(gw) = &gw {
                    gw.narrow(0, c0, width).addmm_(&g.t(), &xr, 1.0, 1.0);
                }
                if let Some(gb) = &gb {
                    gb.narrow(0, c0, width).add_(&g.sum_dim(0, false));
                }
            }
        }
        let losses = if losses.is_empty() {
            Tensor::zeros_on(&[0], self.dtype, dev)
        } else {
            Tensor::cat(&losses.iter().collect::<Vec<_>>(), 0)
        };
        let (mut gx, mut gw, mut gb) = (gx, gw, gb);
        if let (Some((safe, _)), Some(row_scale), Some(target_rows)) =
            (&self.rows, &row_scale, &target_rows)
        {
            // The one-hot part of softmax - one_hot(target), for every row.
            let s = row_scale.unsqueeze(1);
            gx = gx.map(|gx| &gx - &(target_rows * &s));
            gw = gw.map(|gw| gw.index_add(0, safe, &(&self.x * &s), -1.0));
            gb = gb.map(|gb| gb.index_add(0, safe, row_scale, -1.0));
        }
        (losses, [gx, gw, gb])
    }

    /// Rows `start..start + len` (`xr`): each row's log-sum-exp over the
    /// classes and its loss, both `[len]`, from one sweep over the classes
    /// `cols` at a time; and the logits, when that sweep was one block.
    fn row_loss(
        &self,
        xr: &Tensor,
        start: usize,
        cols: usize,
        target_rows: Option<&Tensor>,
    ) -> (Tensor, Tensor, Option<Tensor>) {
        let (len, c) = (xr.shape()[0], self.w.shape()[0]);
        let mut parts = Vec::new();
        // Probabilities: each row's sum over the classes of its weighted
        // target times its logit.
        let mut dot: Option<Tensor> = None;
        let mut last = None;
        for c0 in (0..c).step_by(cols) {
            let width = cols.min(c - c0);
            let logits = self.logits(xr, c0, width);
            parts.push(logits.logsumexp(&[1], true));
            if self.prob {
                let wt = self.weighted_target(start, len, c0, width);
                let d = (&wt * &logits).sum_dim(1, false);
                dot = Some(dot.map_or(d.clone(), |acc| &acc + &d));
            }
            last = Some(logits);
        }
        let lse = match parts.len() {
            0 => Tensor::full_on(&[len], f64::NEG_INFINITY, self.dtype, xr.device()),
            1 => parts.pop().unwrap().squeeze_dim(1),
            _ => Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1).logsumexp(&[1], false),
        };
        let reuse = if c <= cols { last } else { None };
        let loss = match (&self.rows, target_rows) {
            (Some((safe, weight)), Some(target_rows)) => {
                let mut picked = (xr * &target_rows.narrow(0, start, len)).sum_dim(1, false);
                if let Some(b) = &self.bias {
                    picked = &picked + &b.index_select(0, &safe.narrow(0, start, len));
                }
                &(&lse - &picked) * &weight.narrow(0, start, len)
            }
            _ => {
                let dot = dot.unwrap_or_else(|| Tensor::zeros_on(&[len], self.dtype, xr.device()));
                &(&self.mass(start, len) * &lse) - &dot
            }
        };
        (lse, loss, reuse)
    }

    /// The logits of rows `xr` for classes `c0..c0 + width`: `[len, width]`.
    fn logits(&self, xr: &Tensor, c0: usize, width: usize) -> Tensor {
        let logits = xr.mm(&self.w.narrow(0, c0, width).t());
        if let Some(b) = &self.bias {
            logits.add_(&b.narrow(0, c0, width));
        }
        logits
    }

    /// Probability targets of rows `start..start + len`, classes `c0..c0 +
    /// width`, times their class weights.
    fn weighted_target(&self, start: usize, len: usize, c0: usize, width: usize) -> Tensor {
        let t = self.target.narrow(0, start, len).narrow(1, c0, width);
        match &self.class_weight {
            Some(cw) => &t * &cw.narrow(0, c0, width).unsqueeze(0),
            None => t,
        }
    }

    /// Each probability row's weighted mass, `[len]`.
    fn mass(&self, start: usize, len: usize) -> Tensor {
        let t = self.target.narrow(0, start, len);
        match &self.class_weight {
            Some(cw) => t.mm(&cw.unsqueeze(1)).squeeze_dim(1),
            None => t.sum_dim(1, false),
        }
    }
}
