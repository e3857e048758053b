//! `nn.FractionalMaxPool2d` (Graham's fractional max-pooling): windows of
//! a fixed size whose starts step pseudo-randomly by ⌊α⌋ or ⌈α⌉, α = (in -
//! k) / (out - 1), so an output of any size covers the input. The starts
//! are PyTorch's, from one sample `u` in [0, 1) per plane and direction:
//! ⌊(i + u) α⌋ - ⌊u α⌋ for i < out - 1, and in - k for the last.
//!
//! The pooling is gathers and a max: the rows of every window, then their
//! columns, then the largest of each window with its index, so the
//! gradient (to each window's first maximum, as PyTorch's) comes from
//! those ops.

use super::module::{Forward, stateless_module};
use crate::{DType, Tensor};

/// How large the output is: a size, or a fraction of the input's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FractionalOutput {
    /// `output_size=(oh, ow)`.
    Size(usize, usize),
    /// `output_ratio=(rh, rw)`, each in (0, 1): ⌊input · ratio⌋.
    Ratio(f64, f64),
}

/// `nn.FractionalMaxPool2d(kernel_size, output_size | output_ratio)` over
/// `[N, C, H, W]` or `[C, H, W]`. Each call draws new samples from the
/// global generator, as PyTorch's; [`fractional_max_pool2d`] takes them.
///
/// ```
/// use tapir_runtime::{nn::{Forward, FractionalMaxPool2d, FractionalOutput}, Tensor};
/// let pool = FractionalMaxPool2d::new((2, 2), FractionalOutput::Ratio(0.5, 0.5));
/// assert_eq!(pool.forward(&Tensor::randn(&[2, 3, 9, 10])).shape(), &[2, 3, 4, 5]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FractionalMaxPool2d {
    /// Window height and width.
    pub kernel: (usize, usize),
    /// The output's size.
    pub output: FractionalOutput,
}

impl FractionalMaxPool2d {
    /// `nn.FractionalMaxPool2d(kernel, output_size=.. | output_ratio=..)`.
    pub fn new(kernel: (usize, usize), output: FractionalOutput) -> FractionalMaxPool2d {
        if let FractionalOutput::Ratio(rh, rw) = output {
            assert!(
                rh > 0.0 && rh < 1.0 && rw > 0.0 && rw < 1.0,
                "FractionalMaxPool2d: output_ratio must be between 0 and 1 (exclusive), got ({rh}, {rw})"
            );
        }
        FractionalMaxPool2d { kernel, output }
    }

    /// The pooled input and each maximum's flat index `h · W + w` in its
    /// plane (`return_indices=True`).
    pub fn forward_with_indices(&self, x: &Tensor) -> (Tensor, Tensor) {
        let (h, w) = (x.size(-2), x.size(-1));
        let size = match self.output {
            FractionalOutput::Size(oh, ow) => (oh, ow),
            FractionalOutput::Ratio(rh, rw) => ((h as f64 * rh) as usize, (w as f64 * rw) as usize),
        };
        fractional_max_pool2d(x, self.kernel, size, None)
    }
}

impl Forward for FractionalMaxPool2d {
    fn forward(&self, x: &Tensor) -> Tensor {
        self.forward_with_indices(x).0
    }
}

stateless_module! {
    FractionalMaxPool2d => |_s| "FractionalMaxPool2d()".to_string();
}

/// `F.fractional_max_pool2d(x, kernel, output_size, return_indices=True,
/// _random_samples=samples)`: `samples` is `[N, C, 2]` in [0, 1) (width's
/// sample first, as PyTorch's), drawn from the global generator when
/// `None`. Returns the pooled `[N, C, oh, ow]` and the flat indices.
///
/// ```
/// use tapir_runtime::{nn::fractional_max_pool2d, Tensor};
/// let x = Tensor::from_vec((0..25).map(|v| v as f32).collect(), &[1, 1, 5, 5]);
/// let u = Tensor::from_vec(vec![0.5f32, 0.5], &[1, 1, 2]);
/// let (y, i) = fractional_max_pool2d(&x, (2, 2), (3, 3), Some(&u));
/// // α = 1.5: the windows start at rows and columns 0, 2, 3.
/// assert_eq!(y.to_vec::<f32>(), vec![6.0, 8.0, 9.0, 16.0, 18.0, 19.0, 21.0, 23.0, 24.0]);
/// assert_eq!(i.to_vec::<i64>()[4], 18);
/// ```
#[track_caller]
pub fn fractional_max_pool2d(
    x: &Tensor,
    kernel: (usize, usize),
    output: (usize, usize),
    samples: Option<&Tensor>,
) -> (Tensor, Tensor) {
    let op = "fractional_max_pool2d";
    let batched = x.ndim() == 4;
    assert!(
        batched || x.ndim() == 3,
        "{op}: expected a 3-D or 4-D input, got shape {:?}",
        x.shape()
    );
    let x = if batched { x.clone() } else { x.unsqueeze(0) };
    let (n, c, h, w) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let ((kh, kw), (oh, ow)) = (kernel, output);
    assert!(
        kh >= 1 && kw >= 1 && oh >= 1 && ow >= 1 && oh + kh - 1 <= h && ow + kw - 1 <= w,
        "{op}: kernel {kernel:?} and output size {output:?} do not fit an input of {h} x {w} (output + kernel - 1 must not exceed the input)"
    );
    let drawn;
    let samples = match samples {
        Some(s) => s,
        None => {
            drawn = Tensor::rand(&[n, c, 2]).to_dtype(x.dtype());
            &drawn
        }
    };
    assert!(
        samples.shape() == [n, c, 2],
        "{op}: samples must be [N, C, 2] = [{n}, {c}, 2], got {:?}",
        samples.shape()
    );
    // PyTorch computes the starts in the input's float type.
    let single = !matches!(x.dtype(), DType::F64);
    let u = samples.to_dtype(DType::F64).to_vec::<f64>();
    let mut rows = Vec::with_capacity(n * c * oh * kh);
    let mut cols = Vec::with_capacity(n * c * ow * kw);
    for plane in 0..n * c {
        let (uw, uh) = (u[2 * plane], u[2 * plane + 1]);
        for start in window_starts(uh, h, oh, kh, single) {
            rows.extend((0..kh).map(|a| (start + a) as i64));
        }
        for start in window_starts(uw, w, ow, kw, single) {
            cols.extend((0..kw).map(|b| (start + b) as i64));
        }
    }
    let rows = Tensor::from_vec(rows, &[n, c, oh * kh, 1]).to(x.device());
    let cols = Tensor::from_vec(cols, &[n, c, 1, ow * kw]).to(x.device());
    let (rows, cols) = (rows.expect("a device copy"), cols.expect("a device copy"));
    // [N, C, oh·kh, W], then [N, C, oh·kh, ow·kw]: every window's taps.
    let taps = x
        .gather(2, &rows.expand(&[n, c, oh * kh, w]))
        .gather(3, &cols.expand(&[n, c, oh * kh, ow * kw]));
    let windows = taps
        .reshape(&[
            n as isize,
            c as isize,
            oh as isize,
            kh as isize,
            ow as isize,
            kw as isize,
        ])
        .permute(&[0, 1, 2, 4, 3, 5])
        .reshape(&[
            n as isize,
            c as isize,
            oh as isize,
            ow as isize,
            (kh * kw) as isize,
        ]);
    let (values, tap) = windows.max_dim(-1, false);
    // Each tap's flat index in its plane, picked by the winning tap.
    let flat = &(&rows.reshape(&[n as isize, c as isize, oh as isize, 1, kh as isize, 1])
        * w as f64)
        + &cols.reshape(&[n as isize, c as isize, 1, ow as isize, 1, kw as isize]);
    let flat = flat.expand(&[n, c, oh, ow, kh, kw]).reshape(&[
        n as isize,
        c as isize,
        oh as isize,
        ow as isize,
        (kh * kw) as isize,
    ]);
    let indices = flat.gather(-1, &tap.unsqueeze(-1)).squeeze_dim(-1);
    match batched {
        true => (values, indices),
        false => (values.squeeze_dim(0), indices.squeeze_dim(0)),
    }
}

/// PyTorch's window starts along one direction of `input` for `output`
/// windows of `kernel`, from the plane's sample `u`, with α and the
/// products rounded to f32 when `single` (the input is not f64).
fn window_starts(u: f64, input: usize, output: usize, kernel: usize, single: bool) -> Vec<usize> {
    let mut starts = Vec::with_capacity(output);
    if output > 1 {
        let span = (input - kernel) as f64;
        let floor_of = |i: f64| -> i64 {
            match single {
                true => {
                    let alpha = span as f32 / (output - 1) as f32;
                    ((i as f32 + u as f32) * alpha) as i64 - (u as f32 * alpha) as i64
                }
                false => {
                    let alpha = span / (output - 1) as f64;
                    ((i + u) * alpha) as i64 - (u * alpha) as i64
                }
            }
        };
        starts.extend((0..output - 1).map(|i| floor_of(i as f64) as usize));
    }
    starts.push(input - kernel);
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_cover_the_input_and_misfits_are_named() {
        // Every start steps by ⌊α⌋ or ⌈α⌉ and the last window ends at the edge.
        for u in [0.0, 0.3, 0.999] {
            let s = window_starts(u, 20, 7, 3, false);
            assert_eq!((s[0], s[6]), (0, 17), "{s:?}");
            assert!(
                s.windows(2).all(|p| (2..=3).contains(&(p[1] - p[0]))),
                "{s:?}"
            );
        }
        assert_eq!(window_starts(0.5, 6, 1, 3, true), vec![3]);
        let x = Tensor::randn(&[1, 2, 5, 5]);
        let err = std::panic::catch_unwind(|| fractional_max_pool2d(&x, (2, 2), (5, 4), None))
            .unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("fractional_max_pool2d: kernel (2, 2) and output size (5, 4) do not fit an input of 5 x 5"),
            "{msg}"
        );
    }
}
