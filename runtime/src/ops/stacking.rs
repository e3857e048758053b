//! NumPy's joining and splitting helpers as PyTorch has them: `hstack`,
//! `vstack`, `dstack`, `column_stack` (each a `cat` after raising every
//! tensor to enough dims), `atleast_1d/2d/3d` (views) and `tensor_split`
//! (views, one node for all the pieces, as `split`).

use crate::Tensor;
use crate::trace::{self, Attr};

impl Tensor {
    /// `self` with at least one dim (`torch.atleast_1d`): a 0-d tensor
    /// becomes shape `[1]`, anything else is returned as it is.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::scalar(3.0f32).atleast_1d().shape(), &[1]);
    /// ```
    pub fn atleast_1d(&self) -> Tensor {
        match self.ndim() {
            0 => self.reshape(&[1]),
            _ => self.clone(),
        }
    }

    /// `self` with at least two dims (`torch.atleast_2d`): `[n]` becomes
    /// `[1, n]`, a 0-d tensor `[1, 1]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::zeros(&[3]).atleast_2d().shape(), &[1, 3]);
    /// ```
    pub fn atleast_2d(&self) -> Tensor {
        match self.ndim() {
            0 => self.reshape(&[1, 1]),
            1 => self.unsqueeze(0),
            _ => self.clone(),
        }
    }

    /// `self` with at least three dims (`torch.atleast_3d`): `[n]` becomes
    /// `[1, n, 1]`, `[m, n]` becomes `[m, n, 1]`, a 0-d tensor `[1, 1, 1]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::zeros(&[3]).atleast_3d().shape(), &[1, 3, 1]);
    /// assert_eq!(Tensor::zeros(&[2, 3]).atleast_3d().shape(), &[2, 3, 1]);
    /// ```
    pub fn atleast_3d(&self) -> Tensor {
        match self.ndim() {
            0 => self.reshape(&[1, 1, 1]),
            1 => self.unsqueeze(0).unsqueeze(2),
            2 => self.unsqueeze(2),
            _ => self.clone(),
        }
    }

    /// Joins tensors column-wise (`torch.hstack`): along dim 0 when all
    /// are 1-d (or 0-d), else along dim 1.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let b = Tensor::from_vec(vec![3.0f32], &[1]);
    /// assert_eq!(Tensor::hstack(&[&a, &b]).to_vec::<f32>(), vec![1.0, 2.0, 3.0]);
    /// let m = Tensor::zeros(&[2, 3]);
    /// assert_eq!(Tensor::hstack(&[&m, &m]).shape(), &[2, 6]);
    /// ```
    #[track_caller]
    pub fn hstack(tensors: &[&Tensor]) -> Tensor {
        let raised = raise(tensors, "hstack", Tensor::atleast_1d);
        let dim = if raised.iter().all(|t| t.ndim() == 1) {
            0
        } else {
            1
        };
        join(&raised, dim, "hstack")
    }

    /// Joins tensors row-wise (`torch.vstack`, `torch.row_stack`): 1-d
    /// tensors become rows, then everything is joined along dim 0.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]);
    /// assert_eq!(Tensor::vstack(&[&a, &b]).shape(), &[2, 2]);
    /// ```
    #[doc(alias = "row_stack")]
    #[track_caller]
    pub fn vstack(tensors: &[&Tensor]) -> Tensor {
        join(&raise(tensors, "vstack", Tensor::atleast_2d), 0, "vstack")
    }

    /// Joins tensors depth-wise (`torch.dstack`): raised to 3-d as
    /// [`Tensor::atleast_3d`], then joined along dim 2.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::zeros(&[2, 3]);
    /// assert_eq!(Tensor::dstack(&[&a, &a]).shape(), &[2, 3, 2]);
    /// ```
    #[track_caller]
    pub fn dstack(tensors: &[&Tensor]) -> Tensor {
        join(&raise(tensors, "dstack", Tensor::atleast_3d), 2, "dstack")
    }

    /// Joins tensors as columns (`torch.column_stack`): 0-d and 1-d tensors
    /// become single columns `[n, 1]`, then everything is joined along dim 1.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]);
    /// assert_eq!(Tensor::column_stack(&[&a, &b]).to_vec::<f32>(), vec![1.0, 3.0, 2.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn column_stack(tensors: &[&Tensor]) -> Tensor {
        let column = |t: &Tensor| match t.ndim() {
            0 | 1 => t.reshape(&[t.numel() as isize, 1]),
            _ => t.clone(),
        };
        join(&raise(tensors, "column_stack", column), 1, "column_stack")
    }

    /// `sections` views along `dim` of sizes as equal as can be
    /// (`torch.tensor_split(x, sections, dim)`): the first `len % sections`
    /// are one longer. Unlike [`Tensor::chunk`], there are always exactly
    /// `sections` pieces, empty ones where `len < sections`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(7).tensor_split(3, 0);
    /// let lens: Vec<usize> = parts.iter().map(|p| p.numel()).collect();
    /// assert_eq!(lens, vec![3, 2, 2]);
    /// ```
    #[track_caller]
    pub fn tensor_split(&self, sections: usize, dim: isize) -> Vec<Tensor> {
        assert!(
            sections > 0,
            "tensor_split: the number of sections must be positive, got 0"
        );
        let d = self.dim(dim, "tensor_split");
        let n = self.shape()[d];
        let (base, extra) = (n / sections, n % sections);
        let mut bounds = Vec::with_capacity(sections - 1);
        let mut at = 0;
        for s in 0..sections - 1 {
            at += base + usize::from(s < extra);
            bounds.push(at);
        }
        self.split_at_bounds(&bounds, d, dim)
    }

    /// Views along `dim` cut before each of `indices`
    /// (`torch.tensor_split(x, indices, dim)`): `[0, i0)`, `[i0, i1)`, ...,
    /// `[i_last, len)`, each clamped to the length: indices past the end
    /// give empty pieces, and so does a decreasing pair, as in NumPy.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(6).tensor_split_at(&[1, 4], 0);
    /// assert_eq!(parts[1].to_vec::<i64>(), vec![1, 2, 3]);
    /// assert_eq!(parts[2].to_vec::<i64>(), vec![4, 5]);
    /// ```
    #[track_caller]
    pub fn tensor_split_at(&self, indices: &[usize], dim: isize) -> Vec<Tensor> {
        let d = self.dim(dim, "tensor_split");
        self.split_at_bounds(indices, d, dim)
    }

    /// Views along `dim` of the given `sizes`, which must add up to the
    /// dim's length (`x.split(sizes, dim)` with a list in PyTorch,
    /// `split_with_sizes`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(5).split_with_sizes(&[2, 0, 3], 0);
    /// assert_eq!(parts[2].to_vec::<i64>(), vec![2, 3, 4]);
    /// ```
    #[track_caller]
    pub fn split_with_sizes(&self, sizes: &[usize], dim: isize) -> Vec<Tensor> {
        let d = self.dim(dim, "split_with_sizes");
        let n = self.shape().get(d).copied().unwrap_or(1);
        assert!(
            sizes.iter().sum::<usize>() == n,
            "split_with_sizes: the sizes {sizes:?} must add up to {n}, the length of dim {dim} of shape {:?}",
            self.shape()
        );
        let bounds: Vec<usize> = (sizes.iter().take(sizes.len().saturating_sub(1)))
            .scan(0, |at, &s| {
                *at += s;
                Some(*at)
            })
            .collect();
        self.split_at_bounds(&bounds, d, dim)
    }

    /// `sections` equal pieces along the columns (`torch.hsplit`): dim 1,
    /// or dim 0 of a vector; the length must divide evenly. Cut at indices
    /// instead with [`Tensor::hsplit_at`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(6).reshape(&[1, 6]).hsplit(3);
    /// assert_eq!(parts[1].to_vec::<i64>(), vec![2, 3]);
    /// ```
    #[track_caller]
    pub fn hsplit(&self, sections: usize) -> Vec<Tensor> {
        let dim = self.split_dim("hsplit");
        self.even_split(sections, dim, "hsplit")
    }

    /// [`Tensor::hsplit`] cut before each of `indices`, as
    /// [`Tensor::tensor_split_at`].
    #[track_caller]
    pub fn hsplit_at(&self, indices: &[usize]) -> Vec<Tensor> {
        let dim = self.split_dim("hsplit");
        self.tensor_split_at(indices, dim)
    }

    /// `sections` equal pieces along the rows, dim 0 (`torch.vsplit`);
    /// needs 2 or more dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(6).reshape(&[3, 2]).vsplit(3);
    /// assert_eq!(parts[2].to_vec::<i64>(), vec![4, 5]);
    /// ```
    #[track_caller]
    pub fn vsplit(&self, sections: usize) -> Vec<Tensor> {
        let dim = self.split_dim("vsplit");
        self.even_split(sections, dim, "vsplit")
    }

    /// [`Tensor::vsplit`] cut before each of `indices`.
    #[track_caller]
    pub fn vsplit_at(&self, indices: &[usize]) -> Vec<Tensor> {
        let dim = self.split_dim("vsplit");
        self.tensor_split_at(indices, dim)
    }

    /// `sections` equal pieces along the depth, dim 2 (`torch.dsplit`);
    /// needs 3 or more dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let parts = Tensor::arange(8).reshape(&[1, 2, 4]).dsplit(2);
    /// assert_eq!(parts[1].to_vec::<i64>(), vec![2, 3, 6, 7]);
    /// ```
    #[track_caller]
    pub fn dsplit(&self, sections: usize) -> Vec<Tensor> {
        let dim = self.split_dim("dsplit");
        self.even_split(sections, dim, "dsplit")
    }

    /// [`Tensor::dsplit`] cut before each of `indices`.
    #[track_caller]
    pub fn dsplit_at(&self, indices: &[usize]) -> Vec<Tensor> {
        let dim = self.split_dim("dsplit");
        self.tensor_split_at(indices, dim)
    }

    /// The dim `op` (hsplit, vsplit or dsplit) splits, checking the rank.
    #[track_caller]
    fn split_dim(&self, op: &str) -> isize {
        let (dim, least) = match op {
            "hsplit" => (if self.ndim() == 1 { 0 } else { 1 }, 1),
            "vsplit" => (0, 2),
            _ => (2, 3),
        };
        assert!(
            self.ndim() >= least,
            "{op}: the input must have {least} or more dims, got shape {:?}",
            self.shape()
        );
        dim
    }

    /// `sections` equal pieces along `dim`, or a panic naming `op`.
    #[track_caller]
    fn even_split(&self, sections: usize, dim: isize, op: &str) -> Vec<Tensor> {
        let n = self.shape()[dim as usize];
        assert!(
            sections > 0 && n.is_multiple_of(sections),
            "{op}: dim {dim} of length {n} (shape {:?}) cannot be split into {sections} equal sections",
            self.shape()
        );
        self.tensor_split(sections, dim)
    }

    /// The pieces between consecutive `bounds` (clamped to the dim's
    /// length), recorded as one op.
    fn split_at_bounds(&self, bounds: &[usize], d: usize, dim: isize) -> Vec<Tensor> {
        trace::op(
            "tensor_split",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                let n = self.shape()[d];
                let mut ranges = Vec::with_capacity(bounds.len() + 1);
                let mut start = 0;
                for &b in bounds.iter().chain(std::iter::once(&n)) {
                    let (s, e) = (start.min(n), b.min(n));
                    ranges.push((s, e.saturating_sub(s)));
                    start = b;
                }
                self.pieces(d, ranges, true, "SplitWithSizesBackward0")
            },
        )
    }
}

/// `tensors` raised by `f`, or a panic naming `op` if there are none.
#[track_caller]
fn raise(tensors: &[&Tensor], op: &str, f: impl Fn(&Tensor) -> Tensor) -> Vec<Tensor> {
    assert!(
        !tensors.is_empty(),
        "{op}: expected a non-empty list of tensors"
    );
    tensors.iter().map(|t| f(t)).collect()
}

/// `cat` along `dim`, after checking the shapes match outside it so that a
/// mismatch names the op the user called.
#[track_caller]
fn join(tensors: &[Tensor], dim: usize, op: &str) -> Tensor {
    let first = &tensors[0];
    for (i, t) in tensors.iter().enumerate() {
        let ok = t.ndim() == first.ndim()
            && (0..t.ndim()).all(|k| k == dim || t.shape()[k] == first.shape()[k]);
        assert!(
            ok,
            "{op}: tensor {i} has shape {:?}, which does not match tensor 0's shape {:?} outside dim {dim}",
            t.shape(),
            first.shape()
        );
    }
    let refs: Vec<&Tensor> = tensors.iter().collect();
    Tensor::cat(&refs, dim as isize)
}
