//! `F.pixel_shuffle` / `F.pixel_unshuffle` and their modules: channels
//! traded for spatial resolution by a factor `r` (sub-pixel convolution's
//! upsampling), one reshape, a permute and a reshape, so the gradient is
//! those ops'; and `nn.ChannelShuffle`, ShuffleNet's interleaving of
//! channel groups, the same way.

use super::module::{Forward, Module, TensorKind};
use crate::Tensor;

/// `x` split into leading dims, the three it rearranges, as isizes.
fn split(x: &Tensor, op: &str, r: usize) -> (Vec<isize>, [usize; 3]) {
    assert!(r > 0, "{op}: the factor must be positive, got {r}");
    assert!(
        x.ndim() >= 3,
        "{op}: expects an input [*, C, H, W], got shape {:?}",
        x.shape()
    );
    let n = x.ndim();
    let lead = x.shape()[..n - 3].iter().map(|&d| d as isize).collect();
    (lead, [x.shape()[n - 3], x.shape()[n - 2], x.shape()[n - 1]])
}

fn dims(lead: &[isize], rest: &[usize]) -> Vec<isize> {
    lead.iter()
        .copied()
        .chain(rest.iter().map(|&d| d as isize))
        .collect()
}

/// `[*, C r², H, W]` -> `[*, C, H r, W r]` (`F.pixel_shuffle`).
///
/// ```
/// use tapir_runtime::{nn::pixel_shuffle, Tensor};
/// let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0], &[1, 4, 1, 1]);
/// let y = pixel_shuffle(&x, 2);
/// assert_eq!((y.shape(), y.to_vec::<f32>()), (&[1, 1, 2, 2][..], vec![0.0, 1.0, 2.0, 3.0]));
/// ```
pub fn pixel_shuffle(x: &Tensor, upscale_factor: usize) -> Tensor {
    let r = upscale_factor;
    let (lead, [c, h, w]) = split(x, "pixel_shuffle", r);
    assert!(
        c.is_multiple_of(r * r),
        "pixel_shuffle: {c} channels (shape {:?}) do not divide by upscale_factor² = {}",
        x.shape(),
        r * r
    );
    let k = lead.len() as isize;
    let grouped = x.reshape(&dims(&lead, &[c / (r * r), r, r, h, w]));
    let mut order: Vec<isize> = (0..k).collect();
    order.extend([k, k + 3, k + 1, k + 4, k + 2]);
    grouped
        .permute(&order)
        .reshape(&dims(&lead, &[c / (r * r), h * r, w * r]))
}

/// `[*, C, H r, W r]` -> `[*, C r², H, W]` (`F.pixel_unshuffle`), the
/// inverse of [`pixel_shuffle`].
///
/// ```
/// use tapir_runtime::{nn::{pixel_shuffle, pixel_unshuffle}, Tensor};
/// let x = Tensor::randn(&[2, 3, 4, 6]);
/// assert_eq!(pixel_unshuffle(&x, 2).shape(), &[2, 12, 2, 3]);
/// assert!(pixel_shuffle(&pixel_unshuffle(&x, 2), 2).allclose(&x, 0.0, 0.0));
/// ```
pub fn pixel_unshuffle(x: &Tensor, downscale_factor: usize) -> Tensor {
    let r = downscale_factor;
    let (lead, [c, h, w]) = split(x, "pixel_unshuffle", r);
    assert!(
        h.is_multiple_of(r) && w.is_multiple_of(r),
        "pixel_unshuffle: height and width of shape {:?} do not divide by downscale_factor {r}",
        x.shape()
    );
    let k = lead.len() as isize;
    let grouped = x.reshape(&dims(&lead, &[c, h / r, r, w / r, r]));
    let mut order: Vec<isize> = (0..k).collect();
    order.extend([k, k + 2, k + 4, k + 1, k + 3]);
    grouped
        .permute(&order)
        .reshape(&dims(&lead, &[c * r * r, h / r, w / r]))
}

/// `nn.PixelShuffle(upscale_factor)`: [`pixel_shuffle`] as a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelShuffle {
    /// The factor `r` height and width grow by.
    pub upscale_factor: usize,
}

/// `nn.PixelUnshuffle(downscale_factor)`: [`pixel_unshuffle`] as a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelUnshuffle {
    /// The factor `r` height and width shrink by.
    pub downscale_factor: usize,
}

impl Forward for PixelShuffle {
    fn forward(&self, x: &Tensor) -> Tensor {
        pixel_shuffle(x, self.upscale_factor)
    }
}

impl Forward for PixelUnshuffle {
    fn forward(&self, x: &Tensor) -> Tensor {
        pixel_unshuffle(x, self.downscale_factor)
    }
}

impl Module for PixelShuffle {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!("PixelShuffle(upscale_factor={})", self.upscale_factor)
    }
}

impl Module for PixelUnshuffle {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!("PixelUnshuffle(downscale_factor={})", self.downscale_factor)
    }
}

/// `nn.ChannelShuffle(groups)`: `[N, C, *]` with its channels, read as
/// `groups` groups of `C / groups`, interleaved (channel `g * (C / groups)
/// + i` moves to `i * groups + g`).
///
/// ```
/// use tapir_runtime::{nn::{ChannelShuffle, Forward}, Tensor};
/// let x = Tensor::arange_f(0.0, 6.0, 1.0).reshape(&[1, 6, 1]);
/// let y = ChannelShuffle { groups: 2 }.forward(&x);
/// assert_eq!(y.to_vec::<f32>(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelShuffle {
    /// The number of channel groups.
    pub groups: usize,
}

impl Forward for ChannelShuffle {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        channel_shuffle_named(x, self.groups, "ChannelShuffle")
    }
}

/// `F.channel_shuffle(x, groups)`: the channels of `[N, C, *]` regrouped,
/// `C` split into `groups` rows then read by column (ShuffleNet), as
/// [`ChannelShuffle`].
///
/// ```
/// use tapir_runtime::{nn::channel_shuffle, Tensor};
/// let x = Tensor::arange(4).reshape(&[1, 4, 1]);
/// assert_eq!(channel_shuffle(&x, 2).to_vec::<i64>(), vec![0, 2, 1, 3]);
/// ```
#[track_caller]
pub fn channel_shuffle(x: &Tensor, groups: usize) -> Tensor {
    channel_shuffle_named(x, groups, "channel_shuffle")
}

#[track_caller]
fn channel_shuffle_named(x: &Tensor, g: usize, layer: &str) -> Tensor {
    assert!(
        x.ndim() >= 3 && g > 0 && x.size(1).is_multiple_of(g),
        "{layer}: expects [N, C, *] with C divisible by groups {g}, got {:?}",
        x.shape()
    );
    let s: Vec<isize> = x.shape().iter().map(|&d| d as isize).collect();
    let mut grouped = vec![s[0], g as isize, s[1] / g as isize];
    grouped.extend(&s[2..]);
    x.reshape(&grouped).transpose(1, 2).reshape(&s)
}

impl Module for ChannelShuffle {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        format!("ChannelShuffle(groups={})", self.groups)
    }
}

crate::display_as_repr!(PixelShuffle, PixelUnshuffle, ChannelShuffle);
