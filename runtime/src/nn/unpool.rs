//! `MaxUnpool1d/2d/3d` (`F.max_unpool1d/2d/3d`): the partial inverse of max
//! pooling, each pooled value written back at the index pooling recorded
//! and zeros elsewhere.
//!
//! A scatter-add into zeros, so autograd gives the backward (a gather).
//! Overlapping windows can record one element twice; PyTorch writes it
//! once, so only its first occurrence adds its value, and the others join
//! through a zero-valued term that carries their gradient (each receives
//! the output's gradient at its index, as PyTorch's backward gives).

use super::module::stateless_module;
use crate::Tensor;

/// `F.max_unpool2d(input, indices, kernel_size, stride, padding,
/// output_size)` over `[N, C, h, w]` or `[C, h, w]`: `[.., H, W]` with
/// `input` at the flat `indices` (`ih * W + iw`, as
/// [`super::max_pool2d_with_indices`] gives) and zeros elsewhere. H and W
/// default to `(h - 1) * stride - 2 * padding + kernel`; `output_size`
/// may pick another size strictly within one stride of that.
///
/// ```
/// use tapir_runtime::{nn::{max_pool2d_with_indices, max_unpool2d}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 4.0, 3.0, 2.0], &[1, 1, 2, 2]);
/// let (v, i) = max_pool2d_with_indices(&x, (2, 2), (2, 2), (0, 0), (1, 1), false);
/// let y = max_unpool2d(&v, &i, (2, 2), None, (0, 0), None);
/// assert_eq!(y.to_vec::<f32>(), [0.0, 4.0, 0.0, 0.0]);
/// ```
#[track_caller]
pub fn max_unpool2d(
    input: &Tensor,
    indices: &Tensor,
    kernel: (usize, usize),
    stride: Option<(usize, usize)>,
    padding: (usize, usize),
    output_size: Option<(usize, usize)>,
) -> Tensor {
    let stride = stride.unwrap_or(kernel);
    unpool(
        "max_unpool2d",
        input,
        indices,
        2,
        &[kernel.0, kernel.1],
        &[stride.0, stride.1],
        &[padding.0, padding.1],
        output_size.map(|(h, w)| vec![h, w]),
    )
}

/// `F.max_unpool3d` over `[N, C, d, h, w]` or `[C, d, h, w]`: as
/// [`max_unpool2d`], with flat indices `(id · H + ih) · W + iw` (as
/// [`super::max_pool3d_with_indices`] gives).
///
/// ```
/// use tapir_runtime::{nn::{max_pool3d_with_indices, max_unpool3d}, Tensor};
/// let x = Tensor::arange_f(0.0, 8.0, 1.0).reshape(&[1, 2, 2, 2]);
/// let (v, i) = max_pool3d_with_indices(&x, (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), false);
/// let y = max_unpool3d(&v, &i, (2, 2, 2), None, (0, 0, 0), None);
/// assert_eq!(y.to_vec::<f32>(), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7.0]);
/// ```
#[track_caller]
pub fn max_unpool3d(
    input: &Tensor,
    indices: &Tensor,
    kernel: (usize, usize, usize),
    stride: Option<(usize, usize, usize)>,
    padding: (usize, usize, usize),
    output_size: Option<(usize, usize, usize)>,
) -> Tensor {
    let stride = stride.unwrap_or(kernel);
    unpool(
        "max_unpool3d",
        input,
        indices,
        3,
        &[kernel.0, kernel.1, kernel.2],
        &[stride.0, stride.1, stride.2],
        &[padding.0, padding.1, padding.2],
        output_size.map(|(d, h, w)| vec![d, h, w]),
    )
}

/// `F.max_unpool1d`: [`max_unpool2d`] over the last dim of `[N, C, l]` or `[C, l]`.
///
/// ```
/// use tapir_runtime::{nn::{MaxPool1d, max_unpool1d}, Tensor};
/// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 5.0, 4.0], &[1, 5]);
/// let (v, i) = MaxPool1d::new(2).forward_with_indices(&x);
/// let y = max_unpool1d(&v, &i, 2, None, 0, Some(5));
/// assert_eq!(y.to_vec::<f32>(), [0.0, 3.0, 0.0, 5.0, 0.0]);
/// ```
#[track_caller]
pub fn max_unpool1d(
    input: &Tensor,
    indices: &Tensor,
    kernel: usize,
    stride: Option<usize>,
    padding: usize,
    output_size: Option<usize>,
) -> Tensor {
    let stride = stride.unwrap_or(kernel);
    unpool(
        "max_unpool1d",
        input,
        indices,
        1,
        &[kernel],
        &[stride],
        &[padding],
        output_size.map(|l| vec![l]),
    )
}

/// The unpooling of the last `spatial` dims (1 or 2), batched or not.
#[allow(clippy::too_many_arguments)]
#[track_caller]
fn unpool(
    op: &str,
    input: &Tensor,
    indices: &Tensor,
    spatial: usize,
    kernel: &[usize],
    stride: &[usize],
    padding: &[usize],
    output_size: Option<Vec<usize>>,
) -> Tensor {
    let batched = input.ndim() == spatial + 2;
    assert!(
        (batched || input.ndim() == spatial + 1)
            && indices.shape() == input.shape()
            && indices.dtype() == crate::DType::I64,
        "{op}: expected a {}-D or {}-D input and int64 indices of its shape, got {:?} and {} {:?}",
        spatial + 1,
        spatial + 2,
        input.shape(),
        indices.dtype(),
        indices.shape()
    );
    let lead = input.ndim() - spatial;
    let inner = &input.shape()[lead..];
    let default: Vec<usize> = (0..spatial)
        .map(|d| ((inner[d] - 1) * stride[d] + kernel[d]).saturating_sub(2 * padding[d]))
        .collect();
    let size = match output_size {
        None => default,
        Some(size) => {
            for d in 0..spatial {
                let (lo, hi) = (default[d] as i64 - stride[d] as i64, default[d] + stride[d]);
                assert!(
                    lo < size[d] as i64 && size[d] < hi,
                    "{op}: output_size {size:?} is invalid: dim {d} must be between {lo} and {hi} (exclusive)"
                );
            }
            size
        }
    };
    let plane: usize = size.iter().product();
    let rows: usize = input.shape()[..lead].iter().product();
    let (flat_in, flat_at) = (
        input.reshape(&[rows as isize, -1]),
        indices.reshape(&[rows as isize, -1]),
    );
    let (first, repeated) = first_occurrences(op, &flat_at, plane);
    let zeros = Tensor::zeros_on(&[rows, plane], input.dtype(), input.device());
    let on = |mask: Vec<bool>| {
        Tensor::from_vec(mask, flat_in.shape())
            .to(input.device())
            .unwrap_or_else(|e| panic!("{op}: {e}"))
            .to_dtype(input.dtype())
    };
    let mut out = zeros.scatter_add(1, &flat_at, &(&flat_in * &on(first)));
    if let Some(repeated) = repeated {
        let again = zeros.scatter_add(1, &flat_at, &(&flat_in * &on(repeated)));
        out = &out + &(&again - &again.detach());
    }
    let mut shape: Vec<isize> = input.shape()[..lead].iter().map(|&d| d as isize).collect();
    shape.extend(size.iter().map(|&d| d as isize));
    out.reshape(&shape)
}

/// Per element of `at` (`[rows, n]`): whether it is its row's first
/// occurrence of that index; and, when any index repeats in a row, the
/// repeats. Checks every index against the output plane.
#[track_caller]
fn first_occurrences(op: &str, at: &Tensor, plane: usize) -> (Vec<bool>, Option<Vec<bool>>) {
    let row_len = at.size(1).max(1);
    let at = at.to_vec::<i64>();
    let mut first = Vec::with_capacity(at.len());
    // The last row that wrote each output element.
    let mut seen = vec![usize::MAX; plane];
    let mut any_repeat = false;
    for (k, &i) in at.iter().enumerate() {
        assert!(
            (0..plane as i64).contains(&i),
            "{op}: index {i} is outside the output plane of {plane} elements"
        );
        let row = k / row_len;
        let fresh = seen[i as usize] != row;
        seen[i as usize] = row;
        any_repeat |= !fresh;
        first.push(fresh);
    }
    let repeated = any_repeat.then(|| first.iter().map(|f| !f).collect());
    (first, repeated)
}

/// `nn.MaxUnpool2d(kernel_size, stride=None, padding=0)`: see [`max_unpool2d`].
///
/// ```
/// use tapir_runtime::{nn::{MaxPool2d, MaxUnpool2d}, Tensor};
/// let x = Tensor::randn(&[2, 3, 4, 4]);
/// let (v, i) = MaxPool2d::new(2).forward_with_indices(&x);
/// let unpool = MaxUnpool2d::new(2);
/// assert_eq!(unpool.forward(&v, &i, None).shape(), &[2, 3, 4, 4]);
/// assert_eq!(unpool.to_string(), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MaxUnpool2d {
    /// Window height and width of the pooling undone.
    pub kernel: (usize, usize),
    /// Its stride (PyTorch's default: the kernel).
    pub stride: (usize, usize),
    /// Its padding.
    pub padding: (usize, usize),
}

impl MaxUnpool2d {
    /// `nn.MaxUnpool2d(kernel)`: square window, stride the kernel, no padding.
    pub fn new(kernel: usize) -> MaxUnpool2d {
        MaxUnpool2d {
            kernel: (kernel, kernel),
            stride: (kernel, kernel),
            padding: (0, 0),
        }
    }

    /// `unpool(input, indices, output_size)`.
    #[track_caller]
    pub fn forward(
        &self,
        input: &Tensor,
        indices: &Tensor,
        output_size: Option<(usize, usize)>,
    ) -> Tensor {
        let s = *self;
        max_unpool2d(
            input,
            indices,
            s.kernel,
            Some(s.stride),
            s.padding,
            output_size,
        )
    }
}

/// `nn.MaxUnpool1d(kernel_size, stride=None, padding=0)`: see [`max_unpool1d`].
#[derive(Debug, Clone, Copy)]
pub struct MaxUnpool1d {
    /// Window length of the pooling undone.
    pub kernel: usize,
    /// Its stride (PyTorch's default: the kernel).
    pub stride: usize,
    /// Its padding.
    pub padding: usize,
}

impl MaxUnpool1d {
    /// `nn.MaxUnpool1d(kernel)`: stride the kernel, no padding.
    pub fn new(kernel: usize) -> MaxUnpool1d {
        MaxUnpool1d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    /// `unpool(input, indices, output_size)`.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, indices: &Tensor, output_size: Option<usize>) -> Tensor {
        let s = *self;
        max_unpool1d(
            input,
            indices,
            s.kernel,
            Some(s.stride),
            s.padding,
            output_size,
        )
    }
}

/// `nn.MaxUnpool3d(kernel_size, stride=None, padding=0)`: see [`max_unpool3d`].
///
/// ```
/// use tapir_runtime::{nn::{MaxPool3d, MaxUnpool3d, Module}, Tensor};
/// let (v, i) = MaxPool3d::new(2).forward_with_indices(&Tensor::randn(&[1, 2, 4, 4, 4]));
/// let unpool = MaxUnpool3d::new(2);
/// assert_eq!(unpool.forward(&v, &i, None).shape(), &[1, 2, 4, 4, 4]);
/// assert_eq!(unpool.repr(), "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct MaxUnpool3d {
    /// Window depth, height and width of the pooling undone.
    pub kernel: (usize, usize, usize),
    /// Its stride (PyTorch's default: the kernel).
    pub stride: (usize, usize, usize),
    /// Its padding.
    pub padding: (usize, usize, usize),
}

impl MaxUnpool3d {
    /// `nn.MaxUnpool3d(kernel)`: cubic window, stride the kernel, no padding.
    pub fn new(kernel: usize) -> MaxUnpool3d {
        MaxUnpool3d {
            kernel: (kernel, kernel, kernel),
            stride: (kernel, kernel, kernel),
            padding: (0, 0, 0),
        }
    }

    /// `unpool(input, indices, output_size)`.
    #[track_caller]
    pub fn forward(
        &self,
        input: &Tensor,
        indices: &Tensor,
        output_size: Option<(usize, usize, usize)>,
    ) -> Tensor {
        let s = *self;
        let stride = Some(s.stride);
        max_unpool3d(input, indices, s.kernel, stride, s.padding, output_size)
    }
}

stateless_module! {
    MaxUnpool3d => |s| format!(
        "MaxUnpool3d(kernel_size={:?}, stride={:?}, padding={:?})",
        s.kernel, s.stride, s.padding
    );
    MaxUnpool2d => |s| format!(
        "MaxUnpool2d(kernel_size={:?}, stride={:?}, padding={:?})",
        s.kernel, s.stride, s.padding
    );
    MaxUnpool1d => |s| format!(
        "MaxUnpool1d(kernel_size=({},), stride=({},), padding=({},))",
        s.kernel, s.stride, s.padding
    );
}
