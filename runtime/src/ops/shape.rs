//! Rearranging ops that copy: `repeat`, `tile`, `flip`, `roll`,
//! `repeat_interleave` and `movedim`. Each is built from views, `cat` and
//! `index_select`, so its gradient, its CUDA path and its compiled replay
//! come from those. `flip`, `roll` and `repeat` are wrapped for ONNX export
//! (Slice, Slice + Concat, Tile), which their parts could not express over a
//! dim whose size varies.

use crate::Tensor;
use crate::trace::{self, Attr};

/// Each of `dims` normalised and checked distinct, naming `op`.
fn distinct_dims(x: &Tensor, dims: &[isize], op: &str) -> Vec<usize> {
    let mut seen = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = x.dim(d, op);
        assert!(
            !seen.contains(&n),
            "{op}: dim {d} appears more than once in {dims:?}"
        );
        seen.push(n);
    }
    seen
}

/// A fresh copy of `x` whose gradient flows back unchanged (PyTorch's
/// `clone`): what `flip` and `roll` return when they move nothing.
fn copied(x: &Tensor) -> Tensor {
    Tensor::record(x.contiguous_copy(), "CloneBackward0", &[x], || {
        move |g: &Tensor, _: &[bool]| vec![Some(g.clone())]
    })
}

impl Tensor {
    /// Repeats the tensor `repeats[k]` times along dim `k` (`Tensor.repeat`).
    /// `repeats` may be longer than the tensor has dims: the tensor is then
    /// treated as having leading dims of size 1.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let y = x.repeat(&[2, 2]);
    /// assert_eq!(y.shape(), &[2, 4]);
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    /// ```
    pub fn repeat(&self, repeats: &[usize]) -> Tensor {
        trace::op(
            "repeat",
            [self],
            || {
                vec![(
                    "repeats",
                    Attr::Ints(repeats.iter().map(|&r| r as i64).collect()),
                )]
            },
            || {
                assert!(
                    repeats.len() >= self.ndim(),
                    "repeat: {} repeats were given for a tensor of shape {:?}; give at least one per dim",
                    repeats.len(),
                    self.shape()
                );
                let lead = repeats.len() - self.ndim();
                let shape: Vec<usize> = std::iter::repeat_n(1, lead)
                    .chain(self.shape().iter().copied())
                    .collect();
                // [s0, s1, ..] as [1, s0, 1, s1, ..], broadcast to
                // [r0, s0, r1, s1, ..], then merged pairwise.
                let mut split = Vec::with_capacity(2 * shape.len());
                let mut wide = Vec::with_capacity(2 * shape.len());
                for (&s, &r) in shape.iter().zip(repeats) {
                    split.extend([1, s as isize]);
                    wide.extend([r, s]);
                }
                let merged: Vec<isize> = shape
                    .iter()
                    .zip(repeats)
                    .map(|(&s, &r)| (s * r) as isize)
                    .collect();
                self.reshape(&split).expand(&wide).reshape(&merged)
            },
        )
    }

    /// [`Tensor::repeat`] as `torch.tile`: fewer `reps` than dims repeat
    /// the trailing dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::ones(&[2, 3]);
    /// assert_eq!(x.tile(&[2]).shape(), &[2, 6]);
    /// ```
    pub fn tile(&self, reps: &[usize]) -> Tensor {
        let lead = self.ndim().saturating_sub(reps.len());
        let full: Vec<usize> = std::iter::repeat_n(1, lead)
            .chain(reps.iter().copied())
            .collect();
        self.repeat(&full)
    }

    /// Reverses the order of elements along each of `dims` (`torch.flip`; a
    /// copy, as PyTorch's).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(x.flip(&[1]).to_vec::<i64>(), vec![2, 1, 0, 5, 4, 3]);
    /// assert_eq!(x.flip(&[0, 1]).to_vec::<i64>(), vec![5, 4, 3, 2, 1, 0]);
    /// ```
    pub fn flip(&self, dims: &[isize]) -> Tensor {
        trace::op(
            "flip",
            [self],
            || vec![("dims", Attr::Ints(dims.iter().map(|&d| d as i64).collect()))],
            || {
                let dims_of = distinct_dims(self, dims, "flip");
                if self.ndim() == 0 {
                    // A 0-d tensor has one element: nothing to reverse.
                    return copied(self);
                }
                let mut out = self.clone();
                for d in dims_of {
                    let n = self.shape()[d] as i64;
                    let reversed = Tensor::arange_on((n - 1..-1, -1), self.device());
                    out = out.index_select(d as isize, &reversed);
                }
                if dims.is_empty() {
                    out = copied(self);
                }
                out
            },
        )
    }

    /// Reverses the columns, dim 1 (`torch.fliplr`); needs 2 or more dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(x.fliplr().to_vec::<i64>(), vec![2, 1, 0, 5, 4, 3]);
    /// ```
    #[track_caller]
    pub fn fliplr(&self) -> Tensor {
        assert!(
            self.ndim() >= 2,
            "fliplr: the input must have 2 or more dims, got shape {:?}",
            self.shape()
        );
        self.flip(&[1])
    }

    /// Reverses the rows, dim 0 (`torch.flipud`); needs 1 or more dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[3, 2]);
    /// assert_eq!(x.flipud().to_vec::<i64>(), vec![4, 5, 2, 3, 0, 1]);
    /// ```
    #[track_caller]
    pub fn flipud(&self) -> Tensor {
        assert!(
            self.ndim() >= 1,
            "flipud: the input must have 1 or more dims, got a 0-d tensor"
        );
        self.flip(&[0])
    }

    /// Shifts elements along `dims` by `shifts` places, wrapping around
    /// (`torch.roll`). With no dims the tensor is rolled as if flattened.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(5);
    /// assert_eq!(x.roll(&[2], &[0]).to_vec::<i64>(), vec![3, 4, 0, 1, 2]);
    /// assert_eq!(x.roll(&[-1], &[]).to_vec::<i64>(), vec![1, 2, 3, 4, 0]);
    /// ```
    pub fn roll(&self, shifts: &[i64], dims: &[isize]) -> Tensor {
        trace::op(
            "roll",
            [self],
            || {
                vec![
                    ("shifts", Attr::Ints(shifts.to_vec())),
                    ("dims", Attr::Ints(dims.iter().map(|&d| d as i64).collect())),
                ]
            },
            || {
                assert!(
                    self.ndim() > 0 || dims.is_empty(),
                    "roll: a 0-d tensor has no dim {dims:?} to roll along (give no dims)"
                );
                if dims.is_empty() {
                    assert!(
                        shifts.len() == 1,
                        "roll: without dims it takes one shift, got {shifts:?}"
                    );
                    let shape: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
                    return self.flatten_all().roll(shifts, &[0]).reshape(&shape);
                }
                assert!(
                    shifts.len() == dims.len(),
                    "roll: {} shifts were given for {} dims ({shifts:?} and {dims:?}); give one per dim",
                    shifts.len(),
                    dims.len()
                );
                let mut out = self.clone();
                for (&s, &d) in shifts.iter().zip(dims) {
                    let d = self.dim(d, "roll");
                    let n = self.shape()[d];
                    if n == 0 {
                        continue;
                    }
                    let s = s.rem_euclid(n as i64) as usize;
                    if s != 0 {
                        let d = d as isize;
                        out = Tensor::cat(&[&out.narrow(d, n - s, s), &out.narrow(d, 0, n - s)], d);
                    }
                }
                if out.same_storage(self) {
                    out = copied(self);
                }
                out
            },
        )
    }

    /// Repeats each element `repeats` times along `dim`, next to itself
    /// (`torch.repeat_interleave` with an integer count); with no dim the
    /// tensor is flattened first.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]);
    /// assert_eq!(x.repeat_interleave(2, Some(0)).to_vec::<i64>(), vec![1, 2, 1, 2, 3, 4, 3, 4]);
    /// assert_eq!(x.repeat_interleave(2, None).to_vec::<i64>(), vec![1, 1, 2, 2, 3, 3, 4, 4]);
    /// ```
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Tensor {
        let Some(dim) = dim else {
            return self.flatten_all().repeat_interleave(repeats, Some(0));
        };
        assert!(
            self.ndim() > 0,
            "repeat_interleave: a 0-d tensor has no dim {dim} (give dim None)"
        );
        let d = self.dim(dim, "repeat_interleave");
        let mut wide = self.shape().to_vec();
        wide.insert(d + 1, repeats);
        let mut merged: Vec<isize> = self.shape().iter().map(|&s| s as isize).collect();
        merged[d] *= repeats as isize;
        self.unsqueeze(d as isize + 1)
            .expand(&wide)
            .reshape(&merged)
    }

    /// Moves dim `source` to position `destination`, the others keeping
    /// their order (`torch.movedim`; a view).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[2, 3, 4]);
    /// assert_eq!(x.movedim(0, -1).shape(), &[3, 4, 2]);
    /// ```
    #[doc(alias = "moveaxis")]
    pub fn movedim(&self, source: isize, destination: isize) -> Tensor {
        let s = self.dim(source, "movedim");
        let d = self.dim(destination, "movedim");
        if self.ndim() == 0 {
            return self.clone();
        }
        let mut order: Vec<isize> = (0..self.ndim() as isize)
            .filter(|&k| k != s as isize)
            .collect();
        order.insert(d, s as isize);
        self.permute(&order)
    }
}
