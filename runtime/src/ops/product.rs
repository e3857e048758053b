//! Products over a dim (`torch.prod`). Where a gradient is wanted they are
//! composed from `mul`: the dim is halved until one element is left, each
//! level multiplying its first half by its second. That is `log2 n`
//! launches and `n` multiplications in all, and autograd differentiates the
//! tree as it stands, so a zero factor gets the product of the others as
//! its gradient, with no division (PyTorch's `ProdBackward0` needs a
//! special case for zeros for the same result). Without one, the device's
//! product kernel reads the input once (the CPU's, for f32 and f64).

use super::reduce::dim_attrs;
use crate::trace;
use crate::{DType, Tensor};

impl Tensor {
    /// Product of all elements (`torch.prod(x)`). Integers and bools
    /// multiply as int64, PyTorch's dtype for them; f16 and bf16 multiply
    /// in f32 and round once at the end, where PyTorch rounds every step
    /// (the f16 product of 300, 300 and 1/300 is 300 here, inf there). The
    /// product of nothing is 1.
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(x.prod().to_vec::<f32>(), vec![24.0]);
    /// let ints = Tensor::from_vec(vec![3i64, -2, 5], &[3]);
    /// assert_eq!(ints.prod().to_vec::<i64>(), vec![-30]);
    /// ```
    pub fn prod(&self) -> Tensor {
        trace::op("prod", [self], Vec::new, || {
            self.flatten_all().prod_dim(0, false)
        })
    }

    /// Product over `dim` (`torch.prod(x, dim, keepdim)`), in the dtypes of
    /// [`Tensor::prod`]. Its gradient with respect to an element is the
    /// product of the others, also where that element is zero.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![2.0f32, 0.0, 3.0, 1.0, 4.0, 5.0], &[2, 3]).requires_grad_(true);
    /// let p = x.prod_dim(1, false);
    /// assert_eq!(p.to_vec::<f32>(), vec![0.0, 20.0]);
    /// p.sum().backward();
    /// assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![0.0, 6.0, 0.0, 20.0, 5.0, 4.0]);
    /// ```
    #[track_caller]
    pub fn prod_dim(&self, dim: isize, keepdim: bool) -> Tensor {
        trace::op(
            "prod_dim",
            [self],
            || dim_attrs(dim, keepdim),
            || {
                let d = self.dim(dim, "prod");
                let dtype = self.dtype();
                let (work, out_dtype) = match dtype {
                    DType::F16 | DType::BF16 => (DType::F32, dtype),
                    DType::F32 | DType::F64 => (dtype, dtype),
                    DType::I64 | DType::U8 | DType::Bool => (DType::I64, DType::I64),
                };
                let x = if self.ndim() == 0 {
                    self.reshape(&[1])
                } else {
                    self.clone()
                };
                let x = x.to_dtype(work);
                let p = match kernel_product(&x, d) {
                    Some(p) => p,
                    None => halving_product(&x, d),
                }
                .to_dtype(out_dtype);
                if keepdim && self.ndim() > 0 {
                    p
                } else {
                    p.squeeze_dim(d as isize)
                }
            },
        )
    }
}

/// `x`'s product over `d` (kept, size 1) by the device's kernel, where it
/// has one and no gradient is wanted: one read of `x`, where the halving
/// levels write each half out (about 9x PyTorch's time along a contiguous
/// dim, `bench_ref --one ops.prod_dim1`).
fn kernel_product(x: &Tensor, d: usize) -> Option<Tensor> {
    if (crate::is_grad_enabled() && x.requires_grad()) || x.shape()[d] == 0 {
        return None;
    }
    let p = x.read().product(x.layout(), d)?;
    Some(Tensor::from_storage(p, &x.reduced_shape(&[d], true)))
}

/// `x`'s product over `d`, kept as a dim of size 1: pairs multiplied
/// level by level (an odd element out is carried to the next level).
fn halving_product(x: &Tensor, d: usize) -> Tensor {
    let dim = d as isize;
    let mut n = x.shape()[d];
    if n == 0 {
        let mut shape = x.shape().to_vec();
        shape[d] = 1;
        return Tensor::ones_on(&shape, x.dtype(), x.device());
    }
    let mut y = x.clone();
    while n > 1 {
        let half = n / 2;
        let pairs = &y.narrow(dim, 0, half) * &y.narrow(dim, half, half);
        y = if n % 2 == 1 {
            Tensor::cat(&[&pairs, &y.narrow(dim, 2 * half, 1)], dim)
        } else {
            pairs
        };
        n = n.div_ceil(2);
    }
    y
}
