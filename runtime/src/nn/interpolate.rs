//! `F.interpolate` and `nn.Upsample`: nearest and nearest-exact (1 to 3
//! spatial dims), linear (3-D input), bilinear and bicubic (4-D),
//! trilinear (5-D) resizing with PyTorch's source-index formulas, and area
//! (adaptive average pooling). Each spatial dim is
//! resized on its own (bilinear is linear along H, then along W; bicubic's
//! 4 x 4 taps are 4 along H, then 4 along W) by `index_select` and weighted
//! sums, so the gradient and the devices are those ops'.

use super::module::{Forward, Module, TensorKind};
use super::pool::adaptive_avg_pool2d;
use crate::Tensor;
use crate::trace::Attr;

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
    /// Cubic convolution (Keys, `A = -0.75`, PyTorch's) over the 4 x 4
    /// nearest elements of a `[N, C, H, W]` input, edges repeated.
    Bicubic,
    /// The mean of each output element's window (adaptive average
    /// pooling) over a `[N, C, L]`, `[N, C, H, W]` or `[N, C, D, H, W]`
    /// input.
    Area,
    /// Linear along the three spatial dims of a `[N, C, D, H, W]` input.
    Trilinear,
    /// The input element whose centre is nearest the output element's
    /// (`"nearest-exact"`: source `floor((j + 0.5) · n / m)`), which,
    /// unlike `Nearest`, does not shift the image left on resizing.
    NearestExact,
}

impl InterpolateMode {
    const ALL: [InterpolateMode; 7] = [
        InterpolateMode::Nearest,
        InterpolateMode::Linear,
        InterpolateMode::Bilinear,
        InterpolateMode::Bicubic,
        InterpolateMode::Area,
        InterpolateMode::Trilinear,
        InterpolateMode::NearestExact,
    ];

    /// The mode as a recorded attribute (its place in [`Self::ALL`]).
    fn code(self) -> i64 {
        Self::ALL.iter().position(|&m| m == self).unwrap_or(0) as i64
    }

    /// The mode a recorded attribute names.
    pub(crate) fn from_code(code: i64) -> InterpolateMode {
        Self::ALL[code.clamp(0, Self::ALL.len() as i64 - 1) as usize]
    }

    /// PyTorch's name for the mode (`mode=`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            InterpolateMode::Nearest => "nearest",
            InterpolateMode::Linear => "linear",
            InterpolateMode::Bilinear => "bilinear",
            InterpolateMode::Bicubic => "bicubic",
            InterpolateMode::Area => "area",
            InterpolateMode::Trilinear => "trilinear",
            InterpolateMode::NearestExact => "nearest-exact",
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
        InterpolateMode::NearestExact => {
            let s = ((j as f64 + 0.5) * ratio(n as f64 / m as f64)).floor();
            s.min(n as f64 - 1.0)
        }
        _ if corners => {
            if m > 1 {
                j as f64 * (n as f64 - 1.0) / (m as f64 - 1.0)
            } else {
                0.0
            }
        }
        // Cubic reads one element further left, so its source may be
        // negative (PyTorch's `cubic` flag skips the clamp at 0).
        InterpolateMode::Bicubic => (j as f64 + 0.5) * ratio(n as f64 / m as f64) - 0.5,
        _ => ((j as f64 + 0.5) * ratio(n as f64 / m as f64) - 0.5).max(0.0),
    }
}

/// The four weights of cubic convolution at fraction `t` (PyTorch's
/// `get_cubic_upsample_coefficients`, `A = -0.75`), for the elements at
/// offsets -1, 0, 1 and 2 from the source's floor.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
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
    let mut shape = vec![1usize; x.ndim()];
    shape[d] = m;
    if mode == InterpolateMode::Bicubic {
        // Four taps, their indices clamped into the input (edges repeat).
        let mut out: Option<Tensor> = None;
        for k in 0..4 {
            let at: Vec<i64> = lower
                .iter()
                .map(|&i| (i - 1 + k as i64).clamp(0, n as i64 - 1))
                .collect();
            let w: Vec<f64> = srcs
                .iter()
                .zip(&lower)
                .map(|(s, &i)| cubic_weights(s - i as f64)[k])
                .collect();
            let w = on(Tensor::from_vec(w, &shape).to_dtype(x.dtype()));
            let tap = &x.index_select(dim, &on(Tensor::from_vec(at, &[m]))) * &w;
            out = Some(match out {
                Some(sum) => &sum + &tap,
                None => tap,
            });
        }
        return out.expect("four taps");
    }
    let near = x.index_select(dim, &on(Tensor::from_vec(lower.clone(), &[m])));
    if matches!(
        mode,
        InterpolateMode::Nearest | InterpolateMode::NearestExact
    ) {
        return near;
    }
    let upper: Vec<i64> = lower.iter().map(|&i| (i + 1).min(n as i64 - 1)).collect();
    let far = x.index_select(dim, &on(Tensor::from_vec(upper, &[m])));
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
    // One recorded op (its index tensors are made inside it), so compile
    // replays it and ONNX export maps it to Resize.
    let attrs = || {
        let size = size.unwrap_or(&[]).iter().map(|&d| d as i64).collect();
        let corners = align_corners.map_or(-1, |c| c as i64);
        let mut a = vec![
            ("size", Attr::Ints(size)),
            ("mode", Attr::Int(mode.code())),
            ("align_corners", Attr::Int(corners)),
        ];
        const SCALES: [&str; 3] = ["scale0", "scale1", "scale2"];
        for (k, &f) in scale_factor.unwrap_or(&[]).iter().enumerate().take(3) {
            a.push((SCALES[k], Attr::Float(f)));
        }
        a
    };
    crate::trace::op("interpolate", [x], attrs, || {
        resize(x, size, scale_factor, mode, align_corners)
    })
}

fn resize(
    x: &Tensor,
    size: Option<&[usize]>,
    scale_factor: Option<&[f64]>,
    mode: InterpolateMode,
    align_corners: Option<bool>,
) -> Tensor {
    let spatial = x.ndim().saturating_sub(2);
    let want = match mode {
        InterpolateMode::Nearest | InterpolateMode::NearestExact | InterpolateMode::Area => {
            (1..=3).contains(&spatial)
        }
        InterpolateMode::Linear => spatial == 1,
        InterpolateMode::Bilinear | InterpolateMode::Bicubic => spatial == 2,
        InterpolateMode::Trilinear => spatial == 3,
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
        !matches!(
            mode,
            InterpolateMode::Nearest | InterpolateMode::NearestExact | InterpolateMode::Area
        ) || align_corners.is_none(),
        "interpolate: align_corners can only be set with the linear and cubic modes, not '{}'",
        mode.name()
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
    assert!(
        sizes.iter().all(|&m| m > 0),
        "interpolate: output size {sizes:?} has an empty dim"
    );
    if mode == InterpolateMode::Area {
        // PyTorch's area mode is adaptive average pooling.
        let pool = |x: &Tensor, output_size| adaptive_avg_pool2d(x, output_size);
        return match sizes[..] {
            [l] => pool(&x.unsqueeze(2), (1, l)).squeeze_dim(2),
            [h, w] => pool(x, (h, w)),
            _ => super::adaptive_avg_pool3d(x, (sizes[0], sizes[1], sizes[2])),
        };
    }
    let mut out = x.clone();
    for (k, &m) in sizes.iter().enumerate() {
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
