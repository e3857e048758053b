//! Ops that take their shape or dtype from another tensor (`expand_as`,
//! `view_as`, `reshape_as`, `type_as`), `sum_to_size` (expand's adjoint),
//! and the sizes in bytes PyTorch reports beside `numel` (`element_size`,
//! `nbytes`). Each is the op it names with `other`'s shape or dtype; only
//! the error messages are their own, so that a mismatch names the op the
//! user called.

use crate::Tensor;

impl Tensor {
    /// Broadcasts to `other`'s shape without copying (`x.expand_as(y)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let bias = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let x = Tensor::zeros(&[3, 2]);
    /// assert_eq!(bias.expand_as(&x).shape(), &[3, 2]);
    /// ```
    #[track_caller]
    pub fn expand_as(&self, other: &Tensor) -> Tensor {
        let (from, to) = (self.shape(), other.shape());
        assert!(
            expands_to(from, to),
            "expand_as: a tensor of shape {from:?} cannot be expanded to the other tensor's shape {to:?}"
        );
        self.expand(to)
    }

    /// A view with `other`'s shape (`x.view_as(y)`); the strides must allow
    /// it, as for [`Tensor::view`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6);
    /// assert_eq!(x.view_as(&Tensor::zeros(&[2, 3])).shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn view_as(&self, other: &Tensor) -> Tensor {
        self.check_same_numel(other, "view_as");
        self.view(&signed(other.shape()))
    }

    /// `other`'s shape, as a view when possible, else a copy
    /// (`x.reshape_as(y)`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]).t();
    /// assert_eq!(x.reshape_as(&Tensor::zeros(&[6])).to_vec::<i64>(), vec![0, 3, 1, 4, 2, 5]);
    /// ```
    #[track_caller]
    pub fn reshape_as(&self, other: &Tensor) -> Tensor {
        self.check_same_numel(other, "reshape_as");
        self.reshape(&signed(other.shape()))
    }

    /// This tensor in `other`'s dtype (`x.type_as(y)`); gradients flow
    /// back between float dtypes, as for [`Tensor::to_dtype`]. The device
    /// stays: moving is [`Tensor::to`], which returns a `Result` (PyTorch's
    /// `type_as` moves too).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let labels = Tensor::from_vec(vec![0i64, 2], &[2]);
    /// let y = labels.type_as(&Tensor::zeros(&[1]));
    /// assert_eq!((y.dtype(), y.to_vec::<f32>()), (DType::F32, vec![0.0, 2.0]));
    /// ```
    pub fn type_as(&self, other: &Tensor) -> Tensor {
        self.to_dtype(other.dtype())
    }

    /// This tensor summed down to `shape`, which must broadcast to its
    /// shape (`x.sum_to_size(shape)`): the dims `shape` lacks or has as 1
    /// are summed, as the gradient of an expand.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::ones(&[2, 3]);
    /// assert_eq!(x.sum_to_size(&[1, 3]).to_vec::<f32>(), vec![2.0; 3]);
    /// assert_eq!(x.sum_to_size(&[2, 1]).to_vec::<f32>(), vec![3.0; 2]);
    /// ```
    #[track_caller]
    pub fn sum_to_size(&self, shape: &[usize]) -> Tensor {
        let to = self.shape();
        assert!(
            expands_to(shape, to),
            "sum_to_size: size {shape:?} is not expandable to the tensor's size {to:?}"
        );
        self.sum_to(shape)
    }

    /// Bytes per element (`x.element_size()`, `x.itemsize`).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::zeros(&[3, 4]).to_dtype(DType::BF16);
    /// assert_eq!((x.element_size(), x.nbytes()), (2, 24));
    /// ```
    #[doc(alias = "itemsize")]
    pub fn element_size(&self) -> usize {
        self.dtype().size_in_bytes()
    }

    /// Bytes the elements take (`x.nbytes`): `numel * element_size`,
    /// whatever the view's strides.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.element_size()
    }

    #[track_caller]
    fn check_same_numel(&self, other: &Tensor, op: &str) {
        assert!(
            self.numel() == other.numel(),
            "{op}: a tensor of shape {:?} ({} elements) cannot take the other tensor's shape {:?} ({} elements)",
            self.shape(),
            self.numel(),
            other.shape(),
            other.numel()
        );
    }
}

/// Whether `from` expands to `to`: as many dims or fewer, each (from the
/// right) equal or 1.
pub(super) fn expands_to(from: &[usize], to: &[usize]) -> bool {
    to.len() >= from.len()
        && (from.iter().rev().zip(to.iter().rev())).all(|(&s, &t)| s == t || s == 1)
}

fn signed(shape: &[usize]) -> Vec<isize> {
    shape.iter().map(|&s| s as isize).collect()
}
