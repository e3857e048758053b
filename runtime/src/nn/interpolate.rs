//! `F.interpolate` and `nn.Upsample`: nearest, linear (3-D input) and
//! bilinear (4-D input) resizing with PyTorch's source-index formulas. Each
//! spatial dim is resized on its own (bilinear is linear along H, then
//! along W) by `index_select` and weighted sums, so the gradient and the
//! devices are those ops'.

use super::module::{Forward, Module, TensorKind};
use crate::Tensor;

/// How [`interpolate`] computes an output element (`mode=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum InterpolateMode {
    /// The nearest input element to the left (`"nearest"`, PyTorch's
    /// default).
    #[default]
    Nearest,
    /// Linear between the two nearest elements of a `[N, C, L]` input.
    Linear,
    /// Linear along both spatial dims of a `[N, C, H, W]` input.
    Bilinear,
}

impl InterpolateMode {
    fn name(self) -> &'static str {
        match self {
            InterpolateMode::Nearest => "nearest",
            InterpolateMode::Linear => "linear",
            InterpolateMode::Bilinear => "bilinear",
        }
    }
}

/// Where output element `j` reads input dim of size `n`, for output size
/// `m` (PyTorch's `area_pixel_compute_source_index` and nearest index).
fn source(
    j: usize,
    n: usize,
    m: usize,
    scale: Option<f64>,
    mode: InterpolateMode,
    corners: bool,
) -> f64 {
    // PyTorch uses 1 / scale_factor when one was given, else n / m.
    let ratio = |fallback: f64| scale.map_or(fallback, |s| 1.0 / s);
    match mode {
        InterpolateMode::Nearest => {
            let s = (j as f64 * ratio(n as f64 / m as f64)).floor();
            s.min(n as f64 - 1.0)
        }
        _ if corners => {
            if m > 1 {
                j as f64 * (n as f64 - 1.0) / (m as f64 - 1.0)
            } else {
                0.0
            }
        }
        _ => ((j as f64 + 0.5) * ratio(n as f64 / m as f64) - 0.5).max(0.0),
    }
}

/// Dim `d` of `x` resized from `n` to `m` elements.
fn resize_dim(
    x: &Tensor,
    d: usize,
    m: usize,
    scale: Option<f64>,
    mode: InterpolateMode,
    corners: bool,
) -> Tensor {
    let n = x.shape()[d];
    let device = x.device();
    let on = |t: Tensor| t.to(device).unwrap_or_else(|e| panic!("interpolate: {e}"));
    let srcs: Vec<f64> = (0..m)
        .map(|j| source(j, n, m, scale, mode, corners))
        .collect();
    let lower: Vec<i64> = srcs.iter().map(|&s| s.floor() as i64).collect();
    let dim = d as isize;
    let near = x.index_select(dim, &on(Tensor::from_vec(lower.clone(), &[m])));
    if mode == InterpolateMode::Nearest {
        return near;
    }
    let upper: Vec<i64> = lower.iter().map(|&i| (i + 1).min(n as i64 - 1)).collect();
    let far = x.index_select(dim, &on(Tensor::from_vec(upper, &[m])));
    let mut shape = vec![1usize; x.ndim()];
    shape[d] = m;
    let weight: Vec<f64> = srcs
        .iter()
        .zip(&lower)
        .map(|(s, &i)| s - i as f64)
        .collect();
    let w1 = on(Tensor::from_vec(weight, &shape).to_dtype(x.dtype()));
    let w0 = &(&w1 * -1.0) + 1.0;
    &(&near * &w0) + &(&far * &w1)
}

/// Resizes the spatial dims of `x` (`F.interpolate`) to `size`, or by
/// `scale_factor` (one per spatial dim); `align_corners` is for the linear
/// modes only (PyTorch's default `None` is false).
///
/// ```
/// use tapir_runtime::{nn::{interpolate, InterpolateMode}, Tensor};
/// let x = Tensor::from_vec(vec![0.0f32, 1.0], &[1, 1, 2]);
/// let y = interpolate(&x, Some(&[4]), None, InterpolateMode::Linear, Some(true));
/// assert_eq!(y.to_vec::<f32>(), vec![0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0]);
/// let z = interpolate(&x, None, Some(&[2.0]), InterpolateMode::Nearest, None);
/// assert_eq!(z.to_vec::<f32>(), vec![0.0, 0.0, 1.0, 1.0]);
/// ```
pub fn interpolate(
    x: &Tensor,
    size: Option<&[usize]>,
    scale_factor: Option<&[f64]>,
    mode: InterpolateMode,
    align_corners: Option<bool>,
) -> Tensor {
    let spatial = x.ndim().saturating_sub(2);
    let want = match mode {
        InterpolateMode::Nearest => (1..=2).contains(&spatial),
        InterpolateMode::Linear => spatial == 1,
        InterpolateMode::Bilinear => spatial == 2,
    };
    assert!(
        want,
        "interpolate: mode '{}' does not take an input of shape {:?}",
        mode.name(),
        x.shape()
    );
    assert!(
        x.dtype().is_float(),
        "interpolate: expected a float input, got {}",
        x.dtype()
    );
    assert!(
        mode != InterpolateMode::Nearest || align_corners.is_none(),
        "interpolate: align_corners can only be set with the linear modes, not 'nearest'"
    );
    let corners = align_corners.unwrap_or(false);
    let sizes: Vec<usize> = match (size, scale_factor) {
        (Some(s), None) if s.len() == spatial => s.to_vec(),
        (None, Some(f)) if f.len() == spatial && f.iter().all(|&v| v > 0.0) => (0..spatial)
            .map(|k| (x.shape()[2 + k] as f64 * f[k]).floor() as usize)
            .collect(),
        _ => panic!(
            "interpolate: give either size or scale_factor, one per spatial dim of shape {:?} (got {size:?} and {scale_factor:?})",
            x.shape()
        ),
    };
    let mut out = x.clone();
    for (k, &m) in sizes.iter().enumerate() {
        assert!(m > 0, "interpolate: output size {sizes:?} has an empty dim");
        let scale = scale_factor.map(|f| f[k]);
        out = resize_dim(&out, 2 + k, m, scale, mode, corners);
    }
    out
}

/// `nn.Upsample`: [`interpolate`] as a module.
///
/// ```
/// use tapir_runtime::{nn::{Forward, InterpolateMode, Module, Upsample}, Tensor};
/// let up = Upsample::scale(2.0, InterpolateMode::Nearest);
/// assert_eq!(up.forward(&Tensor::ones(&[1, 1, 2, 2])).shape(), &[1, 1, 4, 4]);
/// assert_eq!(up.repr(), "Upsample(scale_factor=2.0, mode='nearest')");
/// let sized = Upsample { size: Some(vec![4, 4]), mode: InterpolateMode::Bilinear, ..up };
/// assert_eq!(sized.repr(), "Upsample(size=(4, 4), mode='bilinear')");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Upsample {
    /// The output's spatial size, or `None` to scale.
    pub size: Option<Vec<usize>>,
    /// The factor for every spatial dim, or `None` to give a size.
    pub scale_factor: Option<f64>,
    /// How output elements are computed.
    pub mode: InterpolateMode,
    /// For the linear modes (PyTorch's `None` is false).
    pub align_corners: Option<bool>,
}

impl Upsample {
    /// Upsampling every spatial dim by `factor`.
    pub fn scale(factor: f64, mode: InterpolateMode) -> Upsample {
        Upsample {
            size: None,
            scale_factor: Some(factor),
            mode,
            align_corners: None,
        }
    }
}

impl Forward for Upsample {
    fn forward(&self, x: &Tensor) -> Tensor {
        let spatial = x.ndim().saturating_sub(2);
        let factors = self.scale_factor.map(|f| vec![f; spatial]);
        interpolate(
            x,
            self.size.as_deref(),
            factors.as_deref(),
            self.mode,
            self.align_corners,
        )
    }
}

impl Module for Upsample {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        let what = match (&self.size, self.scale_factor) {
            (Some(s), _) if s.len() == 1 => format!("size={}", s[0]),
            (Some(s), _) => {
                let dims: Vec<String> = s.iter().map(|d| d.to_string()).collect();
                format!("size=({})", dims.join(", "))
            }
            (None, f) => format!("scale_factor={:?}", f.unwrap_or(1.0)),
        };
        // PyTorch's repr leaves align_corners out.
        format!("Upsample({what}, mode='{}')", self.mode.name())
    }
}

crate::display_as_repr!(Upsample);
