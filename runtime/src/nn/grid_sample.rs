//! `F.affine_grid` and `F.grid_sample`: sampling an image at arbitrary
//! normalised coordinates (spatial transformer networks, warping).
//!
//! Composed from existing ops, so autograd gives both gradients: the
//! coordinates are unnormalised, folded into the image by the padding
//! mode (PyTorch's `clip_coordinates` and `reflect_coordinates`), and the
//! taps are gathered from each `[H·W]` plane and blended (bilinear: 4
//! taps around the folded point; bicubic: 16, each folded). Floors and
//! rounds have zero gradient, so the gradient of the grid is the blend
//! weights' (PyTorch's), and the image's is the gather's scatter.

use crate::{DType, Tensor};

/// How [`grid_sample`] reads a point (`mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GridMode {
    /// The four neighbours, blended by distance (PyTorch's default).
    #[default]
    Bilinear,
    /// The nearest pixel (halves round to even, as PyTorch's `nearbyint`).
    Nearest,
    /// The 4 x 4 neighbours, blended by Keys's cubic convolution (a =
    /// -0.75, as PyTorch's); the padding mode folds each tap in.
    Bicubic,
}

/// What [`grid_sample`] reads outside the image (`padding_mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum GridPadding {
    /// Zeros (PyTorch's default).
    #[default]
    Zeros,
    /// The nearest border pixel.
    Border,
    /// The image mirrored at its border.
    Reflection,
}

/// `F.affine_grid(theta, size, align_corners)`: for `theta` `[N, 2, 3]`
/// and `size` `[N, C, H, W]`, the `[N, H, W, 2]` grid of `theta` applied
/// to every output pixel's normalised `(x, y, 1)`, x and y in [-1, 1]
/// (the corners' centres with `align_corners`, their edges without).
///
/// ```
/// use tapir_runtime::{nn::affine_grid, Tensor};
/// let identity = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0], &[1, 2, 3]);
/// let grid = affine_grid(&identity, [1, 1, 2, 2], false);
/// assert_eq!(grid.to_vec::<f32>(), [-0.5, -0.5, 0.5, -0.5, -0.5, 0.5, 0.5, 0.5]);
/// ```
#[track_caller]
pub fn affine_grid(theta: &Tensor, size: [usize; 4], align_corners: bool) -> Tensor {
    let [n, _, h, w] = size;
    assert!(
        theta.shape() == [n, 2, 3] && theta.dtype().is_float(),
        "affine_grid: expects a floating theta [N, 2, 3] for size {size:?}, got {} {:?}",
        theta.dtype(),
        theta.shape()
    );
    let steps = |k: usize| -> Vec<f64> {
        (0..k)
            .map(|i| match (k, align_corners) {
                (1, _) => 0.0,
                (_, true) => -1.0 + 2.0 * i as f64 / (k - 1) as f64,
                (_, false) => (2.0 * i as f64 + 1.0) / k as f64 - 1.0,
            })
            .collect()
    };
    let (xs, ys) = (steps(w), steps(h));
    let base: Vec<f64> = (0..h * w)
        .flat_map(|p| [xs[p % w], ys[p / w], 1.0])
        .collect();
    let base = Tensor::from_vec(base, &[h * w, 3])
        .to_dtype(theta.dtype())
        .to(theta.device())
        .unwrap_or_else(|e| panic!("affine_grid: {e}"));
    // [N, H·W, 3] @ [N, 3, 2]: each point's (x, y) after theta.
    base.unsqueeze(0)
        .matmul(&theta.transpose(1, 2))
        .reshape(&[n as isize, h as isize, w as isize, 2])
}

/// `F.grid_sample(input, grid, mode, padding_mode, align_corners)`: the
/// `[N, C, Ho, Wo]` image read from `input` `[N, C, H, W]` at `grid`
/// `[N, Ho, Wo, 2]`'s normalised `(x, y)` points, -1 and 1 the image's
/// edges (or its corner pixels' centres with `align_corners`).
///
/// ```
/// use tapir_runtime::{nn::{GridMode, GridPadding, affine_grid, grid_sample}, Tensor};
/// let img = Tensor::arange_f(0.0, 4.0, 1.0).reshape(&[1, 1, 2, 2]);
/// let identity = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0], &[1, 2, 3]);
/// let grid = affine_grid(&identity, [1, 1, 2, 2], false);
/// let same = grid_sample(&img, &grid, GridMode::Bilinear, GridPadding::Zeros, false);
/// assert_eq!(same.to_vec::<f32>(), [0.0, 1.0, 2.0, 3.0]);
/// ```
#[track_caller]
pub fn grid_sample(
    input: &Tensor,
    grid: &Tensor,
    mode: GridMode,
    padding: GridPadding,
    align_corners: bool,
) -> Tensor {
    let (n, c) = (input.size(0), input.size(1));
    assert!(
        input.ndim() == 4
            && grid.ndim() == 4
            && grid.size(0) == n
            && grid.size(3) == 2
            && input.dtype().is_float()
            && grid.dtype() == input.dtype(),
        "grid_sample: expects input [N, C, H, W] and grid [N, Ho, Wo, 2] of one floating dtype, got {} {:?} and {} {:?}",
        input.dtype(),
        input.shape(),
        grid.dtype(),
        grid.shape()
    );
    let (h, w) = (input.size(2), input.size(3));
    let (ho, wo) = (grid.size(1), grid.size(2));
    let (gx, gy) = (grid.select(3, 0), grid.select(3, 1));
    let planes = input.reshape(&[n as isize, c as isize, -1]);
    // One tap: the plane's value at integer (xi, yi) [N, Ho, Wo], zero
    // where that falls outside the image.
    let tap = |xi: &Tensor, yi: &Tensor| {
        let inside = xi
            .ge_scalar(0.0)
            .logical_and(&xi.le_scalar(w as f64 - 1.0))
            .logical_and(&yi.ge_scalar(0.0))
            .logical_and(&yi.le_scalar(h as f64 - 1.0));
        let flat = &(&yi.clamp(0.0, h as f64 - 1.0) * w as f64) + &xi.clamp(0.0, w as f64 - 1.0);
        let index = flat
            .to_dtype(DType::I64)
            .reshape(&[n as isize, 1, -1])
            .expand(&[n, c, ho * wo]);
        let values = planes.gather(2, &index);
        let inside = inside.reshape(&[n as isize, 1, -1]);
        values.masked_fill(&inside.logical_not(), 0.0)
    };
    let weight = |t: &Tensor| t.reshape(&[n as isize, 1, -1]);
    let out = match mode {
        GridMode::Nearest => {
            let x = source_index(&gx, w, padding, align_corners);
            let y = source_index(&gy, h, padding, align_corners);
            tap(&x.round(), &y.round())
        }
        GridMode::Bicubic => {
            // PyTorch folds each tap by the padding mode, not the point.
            let x = unnormalize(&gx, w, align_corners);
            let y = unnormalize(&gy, h, align_corners);
            let (x0, y0) = (x.floor(), y.floor());
            let (cx, cy) = (cubic_weights(&(&x - &x0)), cubic_weights(&(&y - &y0)));
            let along = |base: &Tensor, k: usize, size: usize| {
                fold(&(base + (k as f64 - 1.0)), size, padding, align_corners)
            };
            (0..4)
                .map(|i| {
                    let yi = along(&y0, i, h);
                    let row = (0..4)
                        .map(|j| &tap(&along(&x0, j, w), &yi) * &weight(&cx[j]))
                        .reduce(|a, b| &a + &b)
                        .expect("four taps");
                    &row * &weight(&cy[i])
                })
                .reduce(|a, b| &a + &b)
                .expect("four rows")
        }
        GridMode::Bilinear => {
            let x = source_index(&gx, w, padding, align_corners);
            let y = source_index(&gy, h, padding, align_corners);
            let (x0, y0) = (x.floor(), y.floor());
            let (x1, y1) = (&x0 + 1.0, &y0 + 1.0);
            let (fx, fy) = (&x - &x0, &y - &y0);
            let (gx, gy) = (&(-&fx) + 1.0, &(-&fy) + 1.0);
            let corners = [
                (tap(&x0, &y0), &gx * &gy),
                (tap(&x1, &y0), &fx * &gy),
                (tap(&x0, &y1), &gx * &fy),
                (tap(&x1, &y1), &fx * &fy),
            ];
            corners
                .iter()
                .map(|(v, k)| v * &weight(k))
                .reduce(|a, b| &a + &b)
                .expect("four corners")
        }
    };
    out.reshape(&[n as isize, c as isize, ho as isize, wo as isize])
}

/// A normalised coordinate as a pixel index along a dim of `size`, folded
/// in by the padding mode (PyTorch's `grid_sampler_compute_source_index`).
fn source_index(coord: &Tensor, size: usize, padding: GridPadding, align_corners: bool) -> Tensor {
    fold(
        &unnormalize(coord, size, align_corners),
        size,
        padding,
        align_corners,
    )
}

/// A normalised coordinate as a pixel index along a dim of `size`
/// (PyTorch's `grid_sampler_unnormalize`).
fn unnormalize(coord: &Tensor, size: usize, align_corners: bool) -> Tensor {
    let s = size as f64;
    if align_corners {
        &(coord + 1.0) * ((s - 1.0) / 2.0)
    } else {
        &(&(coord + 1.0) * s - 1.0) / 2.0
    }
}

/// A pixel index folded into a dim of `size` by the padding mode
/// (PyTorch's `compute_coordinates`): as it is for zeros, clipped for the
/// border, mirrored then clipped for reflection.
fn fold(x: &Tensor, size: usize, padding: GridPadding, align_corners: bool) -> Tensor {
    let s = size as f64;
    let x = x.clone();
    let clip = |t: &Tensor| t.clamp(0.0, s - 1.0);
    match padding {
        GridPadding::Zeros => x,
        GridPadding::Border => clip(&x),
        GridPadding::Reflection if align_corners => clip(&reflect(&x, 0.0, 2.0 * (s - 1.0))),
        GridPadding::Reflection => clip(&reflect(&x, -1.0, 2.0 * s - 1.0)),
    }
}

/// The weights of the four taps at offsets -1, 0, 1, 2 from a point `t`
/// past its floor, by Keys's cubic convolution with a = -0.75 (PyTorch's
/// `get_cubic_upsample_coefficients`).
fn cubic_weights(t: &Tensor) -> [Tensor; 4] {
    const A: f64 = -0.75;
    // |d| ≤ 1: ((a + 2) d - (a + 3)) d² + 1; 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a.
    let near = |d: &Tensor| &(&(&(d * (A + 2.0)) - (A + 3.0)) * &d.square()) + 1.0;
    let far = |d: &Tensor| &(&(&(&(d * A) - 5.0 * A) * d) + 8.0 * A) * d - 4.0 * A;
    let rest = &(-t) + 1.0;
    [far(&(t + 1.0)), near(t), near(&rest), far(&(&rest + 1.0))]
}

/// `x` mirrored into `[low / 2, high / 2]` (PyTorch's `reflect_coordinates`).
fn reflect(x: &Tensor, twice_low: f64, twice_high: f64) -> Tensor {
    if twice_low == twice_high {
        return Tensor::zeros_like(x);
    }
    let (min, span) = (twice_low / 2.0, (twice_high - twice_low) / 2.0);
    let d = (x - min).abs();
    let flips = (&d / span).floor();
    let extra = &d - &(&flips * span);
    let even = (&flips - &(&(&flips / 2.0).floor() * 2.0)).eq_scalar(0.0);
    Tensor::where_(&even, &(&extra + min), &(&(-&extra) + (span + min)))
}
