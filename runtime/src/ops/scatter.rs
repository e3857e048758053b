//! The scatters, PyTorch's names and semantics: `scatter` (a tensor or a
//! scalar), `scatter_add`, `scatter_reduce` and the row forms `index_add`,
//! `index_copy`, `index_fill`. One kernel (`Storage::scatter`) combines a
//! source into a copy of `self` at the index's positions; `mean`, the sum
//! without `self` and the row forms are compositions of it.

use super::creation::filled_on;
use super::dense0;
use super::index::{index_dtype, view_at};
use crate::storage::Along;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use tapir_kernels::ScatterMode;

/// How [`Tensor::scatter_reduce`] combines the values sent to one place
/// (PyTorch's `reduce=` strings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// `"sum"`.
    Sum,
    /// `"prod"`.
    Prod,
    /// `"mean"`: the sum over the count (integers divide with floor).
    Mean,
    /// `"amax"`: the largest; a NaN wins.
    Amax,
    /// `"amin"`: the smallest; a NaN wins.
    Amin,
}

impl ScatterReduce {
    /// Every reduction, in `code` order.
    pub const ALL: [ScatterReduce; 5] = [
        ScatterReduce::Sum,
        ScatterReduce::Prod,
        ScatterReduce::Mean,
        ScatterReduce::Amax,
        ScatterReduce::Amin,
    ];

    /// PyTorch's name for it: `"sum"`, `"prod"`, `"mean"`, `"amax"`, `"amin"`.
    ///
    /// ```
    /// use tapir_runtime::ScatterReduce;
    /// assert_eq!(ScatterReduce::from_name("amax"), Some(ScatterReduce::Amax));
    /// assert_eq!(ScatterReduce::Amax.name(), "amax");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            ScatterReduce::Sum => "sum",
            ScatterReduce::Prod => "prod",
            ScatterReduce::Mean => "mean",
            ScatterReduce::Amax => "amax",
            ScatterReduce::Amin => "amin",
        }
    }

    /// The reduction PyTorch calls `name`, if any.
    pub fn from_name(name: &str) -> Option<ScatterReduce> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Its position in [`Self::ALL`] (how traces record it).
    pub(crate) fn code(self) -> i64 {
        Self::ALL.iter().position(|r| *r == self).unwrap_or(0) as i64
    }
}

/// The checks every scatter shares: `dim` in range, an int64 index with
/// `self`'s number of dims, no larger than `src_shape` anywhere nor than
/// `self` off `dim`, one device. Returns `dim` resolved.
fn check_scatter(
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    src: Option<&Tensor>,
    op: &'static str,
) -> usize {
    let d = x.dim(dim, op);
    assert!(
        index.ndim() == x.ndim(),
        "{op}: index has {} dims, self of shape {:?} has {}",
        index.ndim(),
        x.shape(),
        x.ndim()
    );
    super::same_device(x, index, op);
    index_dtype(index, op);
    let src_shape = src.map_or(index.shape(), |s| s.shape());
    for k in 0..x.ndim() {
        assert!(
            src_shape.len() == x.ndim()
                && index.shape()[k] <= src_shape[k]
                && (k == d || index.shape()[k] <= x.shape()[k]),
            "{op}: index shape {:?} exceeds src {:?} or self {:?} at dim {k}",
            index.shape(),
            src_shape,
            x.shape()
        );
    }
    if let Some(src) = src {
        super::same_device(x, src, op);
    }
    d
}

/// `dst` (fresh and contiguous) with `src` combined in by `mode` at the
/// index's positions along `d`; records nothing.
fn scatter_into(
    dst: &Tensor,
    d: usize,
    index: &Tensor,
    src: &Tensor,
    mode: ScatterMode,
    op: &'static str,
) {
    let src = src.to_dtype(dst.dtype()).detach();
    let view = view_at(dst, index.shape());
    let along = Along {
        view: &view,
        dim: d,
        size: dst.shape()[d],
        op,
    };
    let ls = view_at(&src, index.shape());
    // Read at its own strides: an expanded index is not copied out.
    let (s, i) = (src.read(), index.read());
    dst.write()
        .scatter(along, &s, &ls, (&i, index.layout()), mode);
}

/// A gradient of the index's shape, zero-padded at the end of each dim to
/// the source's (only the index's extent of the source is read).
fn grow_to(g: Tensor, shape: &[usize]) -> Tensor {
    if g.shape() == shape {
        return g;
    }
    let pad: Vec<i64> = (0..shape.len())
        .rev()
        .flat_map(|k| [0, (shape[k] - g.shape()[k]) as i64])
        .collect();
    crate::nn::pad(&g, &pad, 0.0)
}

/// `value` of `x`'s dtype on its device, expanded to `shape`.
fn scalar_at(x: &Tensor, value: f64, shape: &[usize]) -> Tensor {
    filled_on(&vec![1; shape.len()], value, x.dtype(), x.device()).expand(shape)
}

/// Whether the reductions run in this dtype directly (the half types go
/// through f32; bool has none).
fn reduces_natively(x: &Tensor, op: &str) -> bool {
    assert!(
        x.dtype() != DType::Bool,
        "{op}: bool tensors cannot be reduced; convert to an integer or float dtype first"
    );
    !matches!(x.dtype(), DType::F16 | DType::BF16)
}

impl Tensor {
    /// `self` with `src` written at `index` along `dim` (`Tensor.scatter`):
    /// for dim 1, `out[i][index[i][j]] = src[i][j]`. Only the index's extent
    /// of `src` is read; where an index repeats, one of its values lands.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![2i64, 0], &[2, 1]);
    /// let src = Tensor::from_vec(vec![5.0f32, 6.0], &[2, 1]);
    /// let out = Tensor::zeros(&[2, 3]).scatter(1, &i, &src);
    /// assert_eq!(out.to_vec::<f32>(), vec![0.0, 0.0, 5.0, 6.0, 0.0, 0.0]);
    /// ```
    pub fn scatter(&self, dim: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let attrs = || vec![("dim", Attr::Int(dim as i64))];
        trace::op("scatter", [self, index, src], attrs, || {
            self.scatter_as(dim, index, src, false, "scatter")
        })
    }

    /// `self` with `value` written at `index` along `dim` (`Tensor.scatter`
    /// with a scalar `value`): a one-hot matrix is
    /// `zeros.scatter_scalar(1, labels, 1.0)`.
    ///
    /// ```
    /// use tapir_runtime::{DType, Device, Tensor};
    /// let labels = Tensor::from_vec(vec![1i64, 0], &[2, 1]);
    /// let hot = Tensor::zeros_on(&[2, 3], DType::I64, Device::Cpu).scatter_scalar(1, &labels, 1.0);
    /// assert_eq!(hot.to_vec::<i64>(), vec![0, 1, 0, 1, 0, 0]);
    /// ```
    pub fn scatter_scalar(&self, dim: isize, index: &Tensor, value: f64) -> Tensor {
        let attrs = || {
            vec![
                ("dim", Attr::Int(dim as i64)),
                ("value", Attr::Float(value)),
            ]
        };
        trace::op("scatter_scalar", [self, index], attrs, || {
            let d = check_scatter(self, dim, index, None, "scatter_scalar");
            let out = self.contiguous_copy();
            let src = scalar_at(self, value, index.shape());
            scatter_into(&out, d, index, &src, ScatterMode::Assign, "scatter_scalar");
            let index = index.saved();
            Tensor::record(out, "ScatterBackward1", &[self], move || {
                move |g: &Tensor, _: &[bool]| vec![Some(g.scatter_scalar(d as isize, &index, 0.0))]
            })
        })
    }

    /// `self` with `src` added at `index` along `dim` (`Tensor.scatter_add`):
    /// for dim 1, `out[i][index[i][j]] += src[i][j]`, repeats adding up.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![0i64, 0, 2], &[3]);
    /// let src = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// assert_eq!(Tensor::zeros(&[3]).scatter_add(0, &i, &src).to_vec::<f32>(), vec![3.0, 0.0, 3.0]);
    /// ```
    pub fn scatter_add(&self, dim: isize, index: &Tensor, src: &Tensor) -> Tensor {
        let attrs = || vec![("dim", Attr::Int(dim as i64))];
        trace::op("scatter_add", [self, index, src], attrs, || {
            self.scatter_as(dim, index, src, true, "scatter_add")
        })
    }

    /// `scatter` (or `scatter_add` when `accumulate`) whose errors name
    /// `op`: the ops composed of them (`put`, `index_put`,
    /// `masked_scatter`) report as themselves.
    pub(super) fn scatter_as(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
        op: &'static str,
    ) -> Tensor {
        let d = check_scatter(self, dim, index, Some(src), op);
        if accumulate && !reduces_natively(self, op) {
            // Half types add in f32 and round once, on either device (a
            // composition, so autograd comes with it).
            let wide = self.to_dtype(DType::F32);
            let src = src.to_dtype(DType::F32);
            return wide
                .scatter_as(dim, index, &src, true, op)
                .to_dtype(self.dtype());
        }
        let out = self.contiguous_copy();
        let mode = if accumulate {
            ScatterMode::Sum
        } else {
            ScatterMode::Assign
        };
        scatter_into(&out, d, index, src, mode, op);
        let (index, src_shape) = (index.saved(), src.shape().to_vec());
        let name = if accumulate {
            "ScatterAddBackward0"
        } else {
            "ScatterBackward0"
        };
        Tensor::record(out, name, &[self, src], move || {
            move |g: &Tensor, n: &[bool]| {
                let overwritten = || g.scatter_scalar(d as isize, &index, 0.0);
                vec![
                    n[0].then(|| if accumulate { g.clone() } else { overwritten() }),
                    n[1].then(|| grow_to(g.gather(d as isize, &index), &src_shape)),
                ]
            }
        })
    }

    /// `self` with `src` reduced in at `index` along `dim`
    /// (`Tensor.scatter_reduce`): every value sent to one place is combined
    /// by `reduce`, with `self`'s value there too when `include_self`
    /// (else `self` shows only where nothing was sent). Gradients follow
    /// PyTorch: `amax`/`amin` share the gradient evenly among ties, `prod`
    /// handles zeros without dividing by them.
    ///
    /// ```
    /// use tapir_runtime::{ScatterReduce, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]);
    /// let i = Tensor::from_vec(vec![0i64, 0, 1], &[3]);
    /// let src = Tensor::from_vec(vec![4.0f32, 6.0, 1.0], &[3]);
    /// let m = x.scatter_reduce(0, &i, &src, ScatterReduce::Mean, true);
    /// assert_eq!(m.to_vec::<f32>(), vec![11.0 / 3.0, 1.5, 3.0]);
    /// let top = x.scatter_reduce(0, &i, &src, ScatterReduce::Amax, false);
    /// assert_eq!(top.to_vec::<f32>(), vec![6.0, 1.0, 3.0]);
    /// ```
    pub fn scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        let attrs = || {
            vec![
                ("dim", Attr::Int(dim as i64)),
                ("reduce", Attr::Int(reduce.code())),
                ("include_self", Attr::Int(include_self as i64)),
            ]
        };
        trace::op("scatter_reduce", [self, index, src], attrs, || {
            let d = check_scatter(self, dim, index, Some(src), "scatter_reduce");
            if !reduces_natively(self, "scatter_reduce") {
                let wide = self.to_dtype(DType::F32);
                let src = src.to_dtype(DType::F32);
                return (wide.scatter_reduce(dim, index, &src, reduce, include_self))
                    .to_dtype(self.dtype());
            }
            let mode = match reduce {
                ScatterReduce::Sum | ScatterReduce::Mean => {
                    return self.scatter_sum_or_mean(d, index, src, reduce, include_self);
                }
                ScatterReduce::Prod => ScatterMode::Prod,
                ScatterReduce::Amax => ScatterMode::Amax,
                ScatterReduce::Amin => ScatterMode::Amin,
            };
            let out = self.contiguous_copy();
            if !include_self {
                // Start each place reached from a value sent there: the
                // product's identity, or (max and min being idempotent) one
                // of the values itself.
                let first = if mode == ScatterMode::Prod {
                    scalar_at(self, 1.0, index.shape())
                } else {
                    src.clone()
                };
                scatter_into(
                    &out,
                    d,
                    index,
                    &first,
                    ScatterMode::Assign,
                    "scatter_reduce",
                );
            }
            scatter_into(&out, d, index, src, mode, "scatter_reduce");
            let saved = [self, index, src, &out].map(|t| t.saved());
            Tensor::record(out, "ScatterReduceBackward0", &[self, src], move || {
                move |g: &Tensor, n: &[bool]| {
                    let [x, index, src, out] = &saved;
                    let how = (d as isize, reduce, include_self);
                    reduce_backward((x, index, src, out), g, how, n)
                }
            })
        })
    }

    /// The sum and the mean, compositions of `scatter_add` (with the places
    /// reached zeroed first when `self` is not included).
    fn scatter_sum_or_mean(
        &self,
        d: usize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        let dim = d as isize;
        let base = if include_self {
            self.clone()
        } else {
            self.scatter_scalar(dim, index, 0.0)
        };
        let sum = base.scatter_add(dim, index, src);
        if reduce == ScatterReduce::Sum {
            return sum;
        }
        let ones = filled_on(index.shape(), 1.0, self.dtype(), self.device());
        let zeros = filled_on(self.shape(), 0.0, self.dtype(), self.device());
        let count = zeros.scatter_add(dim, index, &ones);
        let count = if include_self {
            &count + 1.0
        } else {
            count.masked_fill(&count.eq_scalar(0.0), 1.0)
        };
        if self.dtype().is_float() {
            &sum / &count
        } else {
            // PyTorch divides integers with floor (exact below 2^53).
            let q = &sum.to_dtype(DType::F64) / &count.to_dtype(DType::F64);
            q.floor().to_dtype(self.dtype())
        }
    }
}

/// The gradients of `scatter_reduce`'s product, max and min for `self` and
/// `src` (PyTorch's `scatter_reduce_backward`). One deliberate difference:
/// with `include_self = false` an excluded `self` that happens to equal
/// the result does not take a share of a max's or min's gradient (PyTorch
/// counts it as a tie and then zeroes it, losing that share).
fn reduce_backward(
    (x, index, src, out): (&Tensor, &Tensor, &Tensor, &Tensor),
    g: &Tensor,
    (dim, reduce, include_self): (isize, ScatterReduce, bool),
    needed: &[bool],
) -> Vec<Option<Tensor>> {
    // Only the index's extent of the source took part.
    let src_shape = src.shape().to_vec();
    let mut src = src.clone();
    for (k, &n) in index.shape().iter().enumerate() {
        if src.shape()[k] != n {
            src = src.narrow(k as isize, 0, n);
        }
    }
    let dt = g.dtype();
    let (gx, gs) = if reduce == ScatterReduce::Prod {
        let gx = needed[0].then(|| {
            let masked_x = x.masked_fill(&x.eq_scalar(0.0), 1.0);
            let masked_x_result = masked_x.scatter_reduce(dim, index, &src, reduce, include_self);
            &(g * &masked_x_result) / &masked_x
        });
        // A source value that is the only zero sent to its place gets the
        // product of the others there, which dividing by it would lose.
        let gs = needed[1].then(|| {
            let src_zero = src.eq_scalar(0.0);
            let zeros_at = filled_on(x.shape(), 0.0, dt, x.device())
                .scatter_add(dim, index, &src_zero.to_dtype(dt))
                .gather(dim, index);
            let single_zero = src_zero.logical_and(&zeros_at.eq_scalar(1.0));
            let lone = src.masked_fill(&single_zero, 1.0);
            let others = x.scatter_reduce(dim, index, &lone, reduce, include_self);
            let by_quotient = &(g * out).gather(dim, index) / &src.masked_fill(&src_zero, 1.0);
            Tensor::where_(
                &single_zero,
                &(g * &others).gather(dim, index),
                &by_quotient,
            )
        });
        (gx, gs)
    } else {
        // Ties share the gradient evenly.
        let value = out.gather(dim, index);
        let mut x_is = x.eq(out).to_dtype(dt);
        if !include_self {
            x_is = x_is.scatter_scalar(dim, index, 0.0);
        }
        let src_is = src.eq(&value).to_dtype(dt);
        let shared = g / &x_is.scatter_add(dim, index, &src_is);
        let gx = needed[0].then(|| &x_is * &shared);
        (gx, needed[1].then(|| &src_is * &shared.gather(dim, index)))
    };
    let gx = gx.map(|gx| {
        if include_self {
            gx
        } else {
            gx.scatter_scalar(dim, index, 0.0)
        }
    });
    vec![gx, gs.map(|gs| grow_to(gs, &src_shape))]
}

/// The checks of the row forms (`index_add`, `index_copy`, `index_fill`):
/// a 0-d or 1-d int64 index on `x`'s device, and a source (when there is
/// one) shaped like `x` but with the index's length along `dim`. Returns
/// `dim` resolved.
fn check_rows(x: &Tensor, dim: isize, index: &Tensor, source: Option<&Tensor>, op: &str) -> usize {
    let d = x.dim(dim, op);
    assert!(
        index.ndim() <= 1,
        "{op}: index must be 0-d or 1-d, got shape {:?}",
        index.shape()
    );
    index_dtype(index, op);
    super::same_device(x, index, op);
    if let Some(source) = source {
        super::same_device(x, source, op);
        let mut want = x.shape().to_vec();
        want[d] = index.numel();
        assert!(
            source.shape() == want,
            "{op}: source of shape {:?} does not fit self {:?} with {} indices along dim {d} (expected {want:?})",
            source.shape(),
            x.shape(),
            index.numel()
        );
    }
    d
}

/// A row op's 1-D index as a scatter's: its entries along `d`, expanded to
/// `shape` (the source's).
fn rows_index(index: &Tensor, d: usize, shape: &[usize]) -> Tensor {
    let mut along = vec![1isize; shape.len()];
    along[d] = index.numel() as isize;
    index.reshape(&along).expand(shape)
}

impl Tensor {
    /// `self` with `alpha * source` added to the rows `index` along `dim`
    /// (`Tensor.index_add`): for dim 0, `out[index[i]] += alpha * source[i]`,
    /// repeated rows adding up.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![0i64, 3, 0], &[3]);
    /// let out = Tensor::zeros(&[2, 4]).index_add(1, &i, &Tensor::ones(&[2, 3]), 2.0);
    /// assert_eq!(out.to_vec::<f32>(), vec![4.0, 0.0, 0.0, 2.0, 4.0, 0.0, 0.0, 2.0]);
    /// ```
    pub fn index_add(&self, dim: isize, index: &Tensor, source: &Tensor, alpha: f64) -> Tensor {
        let attrs = || {
            vec![
                ("dim", Attr::Int(dim as i64)),
                ("alpha", Attr::Float(alpha)),
            ]
        };
        trace::op("index_add", [self, index, source], attrs, || {
            let d = check_rows(self, dim, index, Some(source), "index_add");
            if !reduces_natively(self, "index_add") {
                let wide = self.to_dtype(DType::F32);
                let source = source.to_dtype(DType::F32);
                return wide
                    .index_add(dim, index, &source, alpha)
                    .to_dtype(self.dtype());
            }
            let scaled = if alpha == 1.0 {
                source.detach()
            } else {
                source.detach() * alpha
            };
            let out = self.contiguous_copy();
            if matches!(self.dtype(), DType::F32 | DType::F64) {
                // Whole rows at a time, the index read once per row.
                let shape = self.shape();
                let (outer, inner) = (shape[..d].iter().product(), shape[d + 1..].iter().product());
                let src = dense0(&scaled.to_dtype(self.dtype()));
                let idx = dense0(index);
                let (s, i) = (src.read(), idx.read());
                let rows = (index.numel(), "index_add");
                out.write()
                    .index_add([outer, shape[d], inner], &s, &i, rows);
            } else {
                let at = rows_index(index, d, source.shape());
                scatter_into(&out, d, &at, &scaled, ScatterMode::Sum, "index_add");
            }
            let index = index.saved();
            Tensor::record(out, "IndexAddBackward0", &[self, source], move || {
                move |g: &Tensor, n: &[bool]| {
                    let rows = || g.index_select(d as isize, &index);
                    vec![
                        n[0].then(|| g.clone()),
                        n[1].then(|| if alpha == 1.0 { rows() } else { rows() * alpha }),
                    ]
                }
            })
        })
    }

    /// `self` with `source`'s rows combined into its rows `index` along
    /// `dim` by `reduce` (`Tensor.index_reduce`): for dim 0 and `Amax`,
    /// `out[index[i]] = max(out[index[i]], source[i])`. With `include_self`
    /// false, a row that receives source rows starts from them alone. It is
    /// `scatter_reduce` with the index spread over the rows, so its
    /// gradients (ties share amax's and amin's evenly) are that op's.
    ///
    /// ```
    /// use tapir_runtime::{ScatterReduce, Tensor};
    /// let i = Tensor::from_vec(vec![0i64, 2, 0], &[3]);
    /// let src = Tensor::from_vec(vec![5.0f32, 1.0, 7.0], &[3, 1]);
    /// let out = Tensor::full(&[3, 1], 2.0).index_reduce(0, &i, &src, ScatterReduce::Prod, true);
    /// assert_eq!(out.to_vec::<f32>(), vec![70.0, 2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn index_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        source: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        let d = check_rows(self, dim, index, Some(source), "index_reduce");
        let at = rows_index(index, d, source.shape());
        self.scatter_reduce(d as isize, &at, source, reduce, include_self)
    }

    /// `self` with its rows `index` along `dim` replaced by `source`'s
    /// (`Tensor.index_copy`): for dim 0, `out[index[i]] = source[i]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![2i64, 0], &[2]);
    /// let src = Tensor::from_vec(vec![1.0f32, 2.0], &[2, 1]);
    /// let out = Tensor::zeros(&[3, 1]).index_copy(0, &i, &src);
    /// assert_eq!(out.to_vec::<f32>(), vec![2.0, 0.0, 1.0]);
    /// ```
    pub fn index_copy(&self, dim: isize, index: &Tensor, source: &Tensor) -> Tensor {
        let attrs = || vec![("dim", Attr::Int(dim as i64))];
        trace::op("index_copy", [self, index, source], attrs, || {
            let d = check_rows(self, dim, index, Some(source), "index_copy");
            let out = self.contiguous_copy();
            let at = rows_index(index, d, source.shape());
            scatter_into(&out, d, &at, source, ScatterMode::Assign, "index_copy");
            let index = index.saved();
            Tensor::record(out, "IndexCopyBackward0", &[self, source], move || {
                move |g: &Tensor, n: &[bool]| {
                    vec![
                        n[0].then(|| g.index_fill(d as isize, &index, 0.0)),
                        n[1].then(|| g.index_select(d as isize, &index)),
                    ]
                }
            })
        })
    }

    /// `self` with its rows `index` along `dim` set to `value`
    /// (`Tensor.index_fill`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::from_vec(vec![1i64], &[1]);
    /// let out = Tensor::ones(&[2, 2]).index_fill(1, &i, -1.0);
    /// assert_eq!(out.to_vec::<f32>(), vec![1.0, -1.0, 1.0, -1.0]);
    /// ```
    pub fn index_fill(&self, dim: isize, index: &Tensor, value: f64) -> Tensor {
        let attrs = || {
            vec![
                ("dim", Attr::Int(dim as i64)),
                ("value", Attr::Float(value)),
            ]
        };
        trace::op("index_fill", [self, index], attrs, || {
            let d = check_rows(self, dim, index, None, "index_fill");
            let mut shape = self.shape().to_vec();
            shape[d] = index.numel();
            let out = self.contiguous_copy();
            let at = rows_index(index, d, &shape);
            let src = scalar_at(self, value, &shape);
            scatter_into(&out, d, &at, &src, ScatterMode::Assign, "index_fill");
            let index = index.saved();
            Tensor::record(out, "IndexFillBackward0", &[self], move || {
                move |g: &Tensor, _: &[bool]| vec![Some(g.index_fill(d as isize, &index, 0.0))]
            })
        })
    }
}
