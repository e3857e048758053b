//! Views that share storage (reshape, transpose, permute, expand, slicing, ...)
//! and the ops that join or split tensors (cat, stack, split, chunk).

use crate::Tensor;
use crate::trace::{self, Attr};
use tapir_kernels::Layout;

/// `l` narrowed along `dim` to `len` elements from `start`, every `step`-th.
fn slice_layout(l: &Layout, dim: usize, start: usize, len: usize, step: usize) -> Layout {
    let mut out = l.clone();
    out.offset += start * l.strides[dim];
    out.shape[dim] = len;
    out.strides[dim] *= step;
    out
}

/// Picks a region out of a tensor's layout (a slice, a narrowing, a
/// selected index).
type Region = std::sync::Arc<dyn Fn(&Layout) -> Layout + Send + Sync>;

/// Writes `src` into the region of a fresh zero tensor of `shape` picked by
/// `region` (the adjoint of a slicing view).
/// Recorded (as PyTorch's `SliceBackwardBackward0`) when a `create_graph`
/// backward runs it: its own gradient is `region` of the gradient, a
/// recorded view whose gradient is this embedding again, so slices are
/// differentiable to any order.
fn embed(
    src: &Tensor,
    shape: &[usize],
    region: impl Fn(&Layout) -> Layout + Send + Sync + 'static,
) -> Tensor {
    embed_region(src, shape, std::sync::Arc::new(region))
}

fn embed_region(src: &Tensor, shape: &[usize], region: Region) -> Tensor {
    let out = super::creation::filled_on(shape, 0.0, src.dtype(), src.device());
    let target = region(out.layout());
    out.write().assign(&target, &src.read(), src.layout());
    let shape = shape.to_vec();
    Tensor::record(out, "SliceBackwardBackward0", &[src], move || {
        move |g: &Tensor, _: &[bool]| {
            let (back, shape) = (region.clone(), shape.clone());
            vec![Some(g.view_op(
                region(g.layout()),
                "SliceBackward0",
                move |gg| embed_region(gg, &shape, back.clone()),
            ))]
        }
    })
}

impl Tensor {
    fn resolve_shape(&self, shape: &[isize], op: &str) -> Vec<usize> {
        let known: usize = shape
            .iter()
            .filter(|&&s| s >= 0)
            .map(|&s| s as usize)
            .product();
        let infer = shape.iter().filter(|&&s| s == -1).count();
        assert!(
            infer <= 1,
            "{op}: only one dimension can be inferred (-1) in {shape:?}"
        );
        assert!(
            shape.iter().all(|&s| s >= -1),
            "{op}: invalid shape {shape:?}"
        );
        let out: Vec<usize> = shape
            .iter()
            .map(|&s| {
                if s == -1 {
                    assert!(
                        known > 0 && self.numel().is_multiple_of(known),
                        "{op}: shape {shape:?} is invalid for input of size {}",
                        self.numel()
                    );
                    self.numel() / known
                } else {
                    s as usize
                }
            })
            .collect();
        assert!(
            out.iter().product::<usize>() == self.numel(),
            "{op}: shape {shape:?} is invalid for input of shape {:?} ({} elements)",
            self.shape(),
            self.numel()
        );
        out
    }

    pub(super) fn view_op(
        &self,
        layout: Layout,
        name: &'static str,
        bw: impl Fn(&Tensor) -> Tensor + Send + 'static,
    ) -> Tensor {
        let out = self.view_with(layout);
        Tensor::record(out, name, &[self], move || {
            move |g: &Tensor, _: &[bool]| vec![Some(bw(g))]
        })
    }

    /// A view with `shape` (one dim may be -1); fails when the strides cannot
    /// express it — use [`Tensor::reshape`], which copies then.
    pub fn view(&self, shape: &[isize]) -> Tensor {
        trace::op("view", [self], Vec::new, || {
            let shape = self.resolve_shape(shape, "view");
            let strides = self.layout().reshape_strides(&shape).unwrap_or_else(|| {
            panic!(
                "view: size {shape:?} is not compatible with input of shape {:?} and strides {:?}; use reshape",
                self.shape(),
                self.strides()
            )
        });
            let in_shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
            let l = Layout {
                shape,
                strides,
                offset: self.layout().offset,
            };
            self.view_op(l, "ViewBackward0", move |g| g.reshape(&in_shape))
        })
    }

    /// `shape` (one dim may be -1), as a view when possible, else a copy.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, -1]);
    /// assert_eq!(x.shape(), &[2, 3]);
    /// ```
    pub fn reshape(&self, shape: &[isize]) -> Tensor {
        trace::op("reshape", [self], Vec::new, || {
            let resolved = self.resolve_shape(shape, "reshape");
            if self.layout().reshape_strides(&resolved).is_some() {
                self.view(shape)
            } else {
                self.contiguous().view(shape)
            }
        })
    }

    /// This tensor laid out row-major (itself when it already is).
    pub fn contiguous(&self) -> Tensor {
        trace::op("contiguous", [self], Vec::new, || {
            if self.is_contiguous() {
                return self.clone();
            }
            Tensor::record(self.contiguous_copy(), "CloneBackward0", &[self], || {
                move |g: &Tensor, _: &[bool]| vec![Some(g.clone())]
            })
        })
    }

    /// Swaps dims `a` and `b` (a view).
    #[doc(alias = "swapaxes")]
    #[doc(alias = "swapdims")]
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        trace::op(
            "transpose",
            [self],
            || vec![("dims", Attr::Ints(vec![a as i64, b as i64]))],
            || {
                let (da, db) = (self.dim(a, "transpose"), self.dim(b, "transpose"));
                if self.ndim() == 0 {
                    return self.clone();
                }
                self.view_op(
                    self.layout().transpose(da, db),
                    "TransposeBackward0",
                    move |g| g.transpose(a, b),
                )
            },
        )
    }

    /// Transpose of a matrix (`ndim <= 2`).
    pub fn t(&self) -> Tensor {
        trace::op("t", [self], Vec::new, || {
            assert!(
                self.ndim() <= 2,
                "t: expects a tensor with <= 2 dims, got shape {:?}",
                self.shape()
            );
            if self.ndim() < 2 {
                self.clone()
            } else {
                self.transpose(0, 1)
            }
        })
    }

    /// Reorders dims: output dim `i` is input dim `perm[i]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[2, 3, 4]);
    /// assert_eq!(x.permute(&[2, 0, 1]).shape(), &[4, 2, 3]);
    /// ```
    pub fn permute(&self, perm: &[isize]) -> Tensor {
        trace::op(
            "permute",
            [self],
            || vec![("perm", Attr::Ints(perm.iter().map(|&d| d as i64).collect()))],
            || {
                assert!(
                    perm.len() == self.ndim(),
                    "permute: {perm:?} has {} dims, tensor of shape {:?} has {}",
                    perm.len(),
                    self.shape(),
                    self.ndim()
                );
                let p: Vec<usize> = perm.iter().map(|&d| self.dim(d, "permute")).collect();
                let mut inv = vec![0isize; p.len()];
                for (i, &d) in p.iter().enumerate() {
                    inv[d] = i as isize;
                }
                let mut seen = p.clone();
                seen.sort_unstable();
                seen.dedup();
                assert!(seen.len() == p.len(), "permute: repeated dim in {perm:?}");
                self.view_op(self.layout().permute(&p), "PermuteBackward0", move |g| {
                    g.permute(&inv)
                })
            },
        )
    }

    /// Inserts a size-1 dim at `dim`.
    pub fn unsqueeze(&self, dim: isize) -> Tensor {
        trace::op(
            "unsqueeze",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                let n = self.ndim() as isize + 1;
                let d = if dim < 0 { dim + n } else { dim };
                assert!(
                    (0..n).contains(&d),
                    "unsqueeze: dim {dim} out of range for shape {:?}",
                    self.shape()
                );
                let d = d as usize;
                let mut l = self.layout().clone();
                let stride = if d < self.ndim() {
                    l.strides[d] * l.shape[d]
                } else {
                    1
                };
                l.shape.insert(d, 1);
                l.strides.insert(d, stride);
                self.view_op(l, "UnsqueezeBackward0", move |g| g.squeeze_dim(d as isize))
            },
        )
    }

    /// Removes every size-1 dim.
    pub fn squeeze(&self) -> Tensor {
        trace::op("squeeze", [self], Vec::new, || {
            let in_shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
            let keep: Vec<usize> = (0..self.ndim()).filter(|&d| self.shape()[d] != 1).collect();
            let l = Layout {
                shape: keep.iter().map(|&d| self.shape()[d]).collect(),
                strides: keep.iter().map(|&d| self.strides()[d]).collect(),
                offset: self.layout().offset,
            };
            self.view_op(l, "SqueezeBackward0", move |g| g.reshape(&in_shape))
        })
    }

    /// Removes `dim` if it has size 1 (otherwise returns the tensor unchanged, as PyTorch).
    pub fn squeeze_dim(&self, dim: isize) -> Tensor {
        trace::op(
            "squeeze_dim",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                let d = self.dim(dim, "squeeze");
                if self.ndim() == 0 || self.shape()[d] != 1 {
                    return self.clone();
                }
                let mut l = self.layout().clone();
                l.shape.remove(d);
                l.strides.remove(d);
                self.view_op(l, "SqueezeBackward1", move |g| g.unsqueeze(d as isize))
            },
        )
    }

    /// Broadcasts to `shape` without copying (size-1 dims repeat).
    pub fn expand(&self, shape: &[usize]) -> Tensor {
        trace::op("expand", [self], Vec::new, || {
            if shape == self.shape() {
                return self.clone();
            }
            assert!(
                super::alike::expands_to(self.shape(), shape),
                "expand: shape {:?} cannot be expanded to {shape:?}",
                self.shape()
            );
            let in_shape = self.shape().to_vec();
            self.view_op(
                self.layout().broadcast_to(shape),
                "ExpandBackward0",
                move |g| g.sum_to(&in_shape),
            )
        })
    }

    /// Alias of [`Tensor::expand`].
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        trace::op("broadcast_to", [self], Vec::new, || self.expand(shape))
    }

    /// `len` elements of `dim` from `start` (a view).
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Tensor {
        trace::op(
            "narrow",
            [self],
            || {
                vec![
                    ("dim", Attr::Int(dim as i64)),
                    ("start", Attr::Int(start as i64)),
                    ("end", Attr::Int((start + len) as i64)),
                    ("step", Attr::Int(1)),
                ]
            },
            || {
                assert!(
                    self.ndim() > 0,
                    "narrow: cannot be applied to a 0-dim tensor"
                );
                let size = self.shape()[self.dim(dim, "narrow")];
                assert!(
                    start + len <= size,
                    "narrow: start ({start}) + length ({len}) exceeds dimension size ({size}) of dim {dim} in \
                     shape {:?}",
                    self.shape()
                );
                self.slice(dim, start as isize, (start + len) as isize, 1)
            },
        )
    }

    /// Python-style `x[start:end:step]` along `dim` (negative bounds count
    /// from the end and are clamped), as a view.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(10);
    /// assert_eq!(x.slice(0, 1, -1, 3).to_vec::<i64>(), vec![1, 4, 7]);
    /// ```
    pub fn slice(&self, dim: isize, start: isize, end: isize, step: usize) -> Tensor {
        trace::op(
            "slice",
            [self],
            || {
                vec![
                    ("dim", Attr::Int(dim as i64)),
                    ("start", Attr::Int(start as i64)),
                    ("end", Attr::Int(end as i64)),
                    ("step", Attr::Int(step as i64)),
                ]
            },
            || {
                let d = self.dim(dim, "slice");
                assert!(step > 0, "slice: step must be positive, got {step}");
                let (s, len) = slice_span(self.shape()[d], start, end, step);
                let in_shape = self.shape().to_vec();
                self.view_op(
                    slice_layout(self.layout(), d, s, len, step),
                    "SliceBackward0",
                    move |g| embed(g, &in_shape, move |l| slice_layout(l, d, s, len, step)),
                )
            },
        )
    }

    /// The sub-tensor at `index` of `dim`, which is removed.
    pub fn select(&self, dim: isize, index: isize) -> Tensor {
        trace::op(
            "select",
            [self],
            || {
                vec![
                    ("dim", Attr::Int(dim as i64)),
                    ("index", Attr::Int(index as i64)),
                ]
            },
            || {
                let d = self.dim(dim, "select");
                let size = self.shape()[d] as isize;
                let i = if index < 0 { index + size } else { index };
                assert!(
                    (0..size).contains(&i),
                    "select: index {index} is out of range for dim {dim} of size {size}"
                );
                self.narrow(d as isize, i as usize, 1)
                    .squeeze_dim(d as isize)
            },
        )
    }

    /// Merges dims `start..=end` into one.
    pub fn flatten(&self, start: isize, end: isize) -> Tensor {
        trace::op("flatten", [self], Vec::new, || {
            if self.ndim() == 0 {
                return self.reshape(&[1]);
            }
            let (s, e) = (self.dim(start, "flatten"), self.dim(end, "flatten"));
            assert!(
                s <= e,
                "flatten: start dim {start} must not come after end dim {end}"
            );
            let mut shape: Vec<isize> = self.shape()[..s].iter().map(|&x| x as isize).collect();
            shape.push(self.shape()[s..=e].iter().product::<usize>() as isize);
            shape.extend(self.shape()[e + 1..].iter().map(|&x| x as isize));
            self.reshape(&shape)
        })
    }

    /// All dims merged into one.
    #[doc(alias = "ravel")]
    pub fn flatten_all(&self) -> Tensor {
        trace::op("flatten_all", [self], Vec::new, || self.reshape(&[-1]))
    }

    /// Splits `dim` into `sizes` (one may be -1).
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Tensor {
        trace::op("unflatten", [self], Vec::new, || {
            let d = self.dim(dim, "unflatten");
            let mut shape: Vec<isize> = self.shape()[..d].iter().map(|&x| x as isize).collect();
            let known: isize = sizes.iter().filter(|&&s| s != -1).product();
            let sizes: Vec<isize> = sizes
                .iter()
                .map(|&s| {
                    if s == -1 {
                        self.shape()[d] as isize / known.max(1)
                    } else {
                        s
                    }
                })
                .collect();
            assert!(
                sizes.iter().product::<isize>() == self.shape()[d] as isize,
                "unflatten: sizes {sizes:?} do not multiply to dim {dim} of shape {:?}",
                self.shape()
            );
            shape.extend(sizes);
            shape.extend(self.shape()[d + 1..].iter().map(|&x| x as isize));
            self.reshape(&shape)
        })
    }

    /// Joins tensors along an existing `dim` (`torch.cat`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::ones(&[2, 1]);
    /// let b = Tensor::zeros(&[2, 2]);
    /// assert_eq!(Tensor::cat(&[&a, &b], 1).shape(), &[2, 3]);
    /// ```
    #[doc(alias = "concat")]
    #[doc(alias = "concatenate")]
    pub fn cat(tensors: &[&Tensor], dim: isize) -> Tensor {
        trace::op(
            "cat",
            tensors,
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                assert!(
                    !tensors.is_empty(),
                    "cat: expected a non-empty list of tensors"
                );
                if let Some(i) = tensors.iter().position(|t| t.ndim() == 0) {
                    panic!("cat: zero-dimensional tensor (at position {i}) cannot be concatenated");
                }
                let first = tensors[0];
                let d = first.dim(dim, "cat");
                let mut dtype = first.dtype();
                let mut total = 0;
                for (i, t) in tensors.iter().enumerate() {
                    super::same_device(first, t, "cat");
                    let same_rank = t.ndim() == first.ndim();
                    let ok = same_rank
                        && (0..t.ndim()).all(|k| k == d || t.shape()[k] == first.shape()[k]);
                    assert!(
                        ok,
                        "cat: tensor {i} has shape {:?}, which does not match tensor 0's shape {:?} outside dim {dim}",
                        t.shape(),
                        first.shape()
                    );
                    dtype = crate::DType::promote(dtype, t.dtype());
                    total += t.shape()[d];
                }
                let mut shape = first.shape().to_vec();
                shape[d] = total;
                let out = super::creation::filled_on(&shape, 0.0, dtype, first.device());
                let mut starts = Vec::with_capacity(tensors.len());
                let mut at = 0;
                {
                    let mut dst = out.write();
                    for t in tensors {
                        let n = t.shape()[d];
                        let target = slice_layout(out.layout(), d, at, n, 1);
                        let src = t.to_dtype(dtype).detach();
                        dst.assign(&target, &src.read(), src.layout());
                        starts.push((at, n));
                        at += n;
                    }
                }
                Tensor::record(out, "CatBackward0", tensors, move || {
                    move |g: &Tensor, needs: &[bool]| {
                        starts
                            .iter()
                            .zip(needs)
                            .map(|(&(s, n), &need)| need.then(|| g.narrow(d as isize, s, n)))
                            .collect()
                    }
                })
            },
        )
    }

    /// Joins same-shaped tensors along a new `dim` (`torch.stack`).
    pub fn stack(tensors: &[&Tensor], dim: isize) -> Tensor {
        trace::op(
            "stack",
            tensors,
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                assert!(
                    !tensors.is_empty(),
                    "stack: expected a non-empty list of tensors"
                );
                for t in tensors {
                    assert!(
                        t.shape() == tensors[0].shape(),
                        "stack: expects each tensor to be equal size, got {:?} and {:?}",
                        tensors[0].shape(),
                        t.shape()
                    );
                }
                let us: Vec<Tensor> = tensors.iter().map(|t| t.unsqueeze(dim)).collect();
                Tensor::cat(&us.iter().collect::<Vec<_>>(), dim)
            },
        )
    }

    /// Pieces of `size` along `dim` (the last may be smaller).
    pub fn split(&self, size: usize, dim: isize) -> Vec<Tensor> {
        trace::op(
            "split",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                assert!(size > 0, "split: size must be positive");
                let d = self.dim(dim, "split");
                let n = self.shape()[d];
                let ranges = (0..n).step_by(size).map(|s| (s, size.min(n - s))).collect();
                self.pieces(d, ranges, true, "SplitBackward0")
            },
        )
    }

    /// The slices along `dim`, each without that dim (PyTorch's `unbind`):
    /// a sequence's time steps, one view each.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let rows = Tensor::arange(6).reshape(&[3, 2]).unbind(0);
    /// assert_eq!(rows.len(), 3);
    /// assert_eq!(rows[2].to_vec::<i64>(), vec![4, 5]);
    /// ```
    pub fn unbind(&self, dim: isize) -> Vec<Tensor> {
        trace::op(
            "unbind",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                let d = self.dim(dim, "unbind");
                let ranges = (0..self.shape()[d]).map(|i| (i, 1)).collect();
                self.pieces(d, ranges, false, "UnbindBackward0")
            },
        )
    }

    /// Views of the `(start, len)` ranges of dim `d` (without `d` unless
    /// `keep_dim`; each range is then one long), recorded as one node for
    /// every piece: its backward writes each piece's gradient into its place
    /// in one buffer, zero where no gradient came (PyTorch's SplitBackward0
    /// and UnbindBackward0). One node per piece would make a zero-filled
    /// full-size gradient for each and sum them: quadratic in the pieces
    /// for an RNN's time steps.
    pub(super) fn pieces(
        &self,
        d: usize,
        ranges: Vec<(usize, usize)>,
        keep_dim: bool,
        name: &'static str,
    ) -> Vec<Tensor> {
        let place = move |l: &Layout, (s, len): (usize, usize)| {
            let mut l = slice_layout(l, d, s, len, 1);
            if !keep_dim {
                l.shape.remove(d);
                l.strides.remove(d);
            }
            l
        };
        let views = ranges
            .iter()
            .map(|&r| self.view_with(place(self.layout(), r)))
            .collect();
        let (shape, dtype, device) = (self.shape().to_vec(), self.dtype(), self.device());
        Tensor::record_many(views, name, &[self], move || {
            move |grads: &[Option<Tensor>], _: &[bool]| {
                if crate::autograd::differentiating() {
                    // Recorded for `create_graph`: one embedding per piece.
                    let zeros = super::creation::filled_on(&shape, 0.0, dtype, device);
                    let out = (grads.iter().zip(&ranges))
                        .filter_map(|(g, &r)| {
                            Some(embed(g.as_ref()?, &shape, move |l| place(l, r)))
                        })
                        .fold(zeros, |acc, e| &acc + &e);
                    return vec![Some(out)];
                }
                let out = super::creation::filled_on(&shape, 0.0, dtype, device);
                for (g, &r) in grads.iter().zip(&ranges) {
                    if let Some(g) = g {
                        // `assign` converts a gradient of another dtype.
                        out.write()
                            .assign(&place(out.layout(), r), &g.read(), g.layout());
                    }
                }
                vec![Some(out)]
            }
        })
    }

    /// `chunks` pieces of (nearly) equal size along `dim`.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Vec<Tensor> {
        trace::op(
            "chunk",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                assert!(chunks > 0, "chunk: number of chunks must be positive");
                let n = self.shape()[self.dim(dim, "chunk")];
                self.split(n.div_ceil(chunks).max(1), dim)
            },
        )
    }
}

/// Where `start..end` (step `step`) of a dim of `size` begins and how many
/// elements it holds: negative bounds count from the end, and both clamp
/// to the dim, as Python's slices.
pub(super) fn slice_span(size: usize, start: isize, end: isize, step: usize) -> (usize, usize) {
    let size = size as isize;
    let clamp = |i: isize| {
        if i < 0 {
            (i + size).max(0)
        } else {
            i.min(size)
        }
    };
    let (s, e) = (clamp(start) as usize, clamp(end) as usize);
    (s, if e > s { (e - s).div_ceil(step) } else { 0 })
}
