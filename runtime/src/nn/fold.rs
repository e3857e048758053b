//! `nn.Unfold` and `nn.Fold`: the modules of `F.unfold` (image to sliding
//! blocks, [`Tensor::unfold2d`]) and `F.fold` (blocks summed back into an
//! image, [`Tensor::fold2d`]), batched or not.

use super::module::{Forward, stateless_module};
use super::pool::pair_repr;
use crate::{Conv2dOptions, Tensor};

/// `nn.Unfold(kernel_size, dilation=1, padding=0, stride=1)`:
/// `[N, C, H, W]` (or `[C, H, W]`) to `[N, C·kh·kw, L]`, one column per
/// window.
///
/// ```
/// use tapir_runtime::{nn::{Forward, Unfold}, Tensor};
/// let unfold = Unfold::new((2, 3));
/// assert_eq!(unfold.forward(&Tensor::zeros(&[2, 3, 4, 5])).shape(), &[2, 18, 9]);
/// assert_eq!(unfold.to_string(), "Unfold(kernel_size=(2, 3), dilation=1, padding=0, stride=1)");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Unfold {
    /// Window height and width.
    pub kernel: (usize, usize),
    /// Stride, padding and dilation (groups unused).
    pub opts: Conv2dOptions,
}

impl Unfold {
    /// `nn.Unfold(kernel_size)`: stride 1, no padding, no dilation.
    pub fn new(kernel: (usize, usize)) -> Unfold {
        Unfold {
            kernel,
            opts: Conv2dOptions::default(),
        }
    }
}

impl Forward for Unfold {
    fn forward(&self, x: &Tensor) -> Tensor {
        match x.ndim() {
            3 => self.forward(&x.unsqueeze(0)).squeeze_dim(0),
            _ => x.unfold2d(self.kernel, self.opts),
        }
    }
}

/// `nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)`:
/// `[N, C·kh·kw, L]` (or `[C·kh·kw, L]`) to `[N, C, H, W]`, overlapping
/// windows summed.
///
/// ```
/// use tapir_runtime::{nn::{Fold, Forward, Unfold}, Tensor};
/// let x = Tensor::ones(&[1, 1, 3, 3]);
/// let cols = Unfold::new((2, 2)).forward(&x);
/// let y = Fold::new((3, 3), (2, 2)).forward(&cols);
/// assert_eq!(y.to_vec::<f32>(), [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Fold {
    /// The image's height and width.
    pub output_size: (usize, usize),
    /// Window height and width.
    pub kernel: (usize, usize),
    /// Stride, padding and dilation (groups unused).
    pub opts: Conv2dOptions,
}

impl Fold {
    /// `nn.Fold(output_size, kernel_size)`: stride 1, no padding, no dilation.
    pub fn new(output_size: (usize, usize), kernel: (usize, usize)) -> Fold {
        Fold {
            output_size,
            kernel,
            opts: Conv2dOptions::default(),
        }
    }
}

impl Forward for Fold {
    fn forward(&self, x: &Tensor) -> Tensor {
        match x.ndim() {
            2 => self.forward(&x.unsqueeze(0)).squeeze_dim(0),
            _ => x.fold2d(self.output_size, self.kernel, self.opts),
        }
    }
}

/// `dilation=.., padding=.., stride=..` of the options.
fn opts_repr(o: &Conv2dOptions) -> String {
    format!(
        "dilation={}, padding={}, stride={}",
        pair_repr(o.dilation),
        pair_repr(o.padding),
        pair_repr(o.stride)
    )
}

stateless_module! {
    Unfold => |s| format!("Unfold(kernel_size={}, {})", pair_repr(s.kernel), opts_repr(&s.opts));
    Fold => |s| format!(
        "Fold(output_size={}, kernel_size={}, {})",
        pair_repr(s.output_size), pair_repr(s.kernel), opts_repr(&s.opts)
    );
}
