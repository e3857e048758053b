//! Image transforms (`torchvision.transforms`) over `[C, H, W]` (or
//! `[H, W]`) tensors; the random ones draw from the generator they are given.

use crate::{DType, Generator, Tensor, no_grad};

/// A transform of one image.
pub trait Transform: Send + Sync {
    /// The transformed sample, drawing any randomness from `g`.
    fn apply(&self, x: &Tensor, g: &Generator) -> Tensor;
}

/// To float32, times `scale` (`ToTensor` is `scale = 1/255`).
pub struct ToFloat {
    /// The factor each value is multiplied by.
    pub scale: f64,
}

impl Transform for ToFloat {
    fn apply(&self, x: &Tensor, _: &Generator) -> Tensor {
        &x.to_dtype(DType::F32) * self.scale
    }
}

/// `(x - mean[c]) / std[c]` per channel (`Normalize`); one value for `[H, W]`.
pub struct Normalize {
    /// Per-channel mean subtracted.
    pub mean: Vec<f64>,
    /// Per-channel standard deviation divided by.
    pub std: Vec<f64>,
}

impl Transform for Normalize {
    fn apply(&self, x: &Tensor, _: &Generator) -> Tensor {
        let c = if x.ndim() == 3 { x.size(0) } else { 1 };
        assert!(
            self.mean.len() == c && self.std.len() == c,
            "Normalize: {c} channel(s) in an image of shape {:?}, but {} means and {} stds",
            x.shape(),
            self.mean.len(),
            self.std.len()
        );
        let shape: Vec<usize> = if x.ndim() == 3 {
            vec![c, 1, 1]
        } else {
            vec![1, 1]
        };
        let mean = Tensor::from_vec(self.mean.clone(), &shape).to_dtype(x.dtype());
        let std = Tensor::from_vec(self.std.clone(), &shape).to_dtype(x.dtype());
        &(x - &mean) / &std
    }
}

/// Zero-pads by `padding` on every side, then crops `size` at a random place (`RandomCrop`).
pub struct RandomCrop {
    /// Output height and width.
    pub size: (usize, usize),
    /// Zeros added on each side before cropping.
    pub padding: usize,
}

impl Transform for RandomCrop {
    fn apply(&self, x: &Tensor, g: &Generator) -> Tensor {
        let n = x.ndim();
        let (h, w) = (x.size(-2) + 2 * self.padding, x.size(-1) + 2 * self.padding);
        let (ch, cw) = self.size;
        assert!(
            ch <= h && cw <= w,
            "RandomCrop: crop {:?} is larger than the padded image {h}x{w}",
            self.size
        );
        let mut padded_shape = x.shape().to_vec();
        padded_shape[n - 2] = h;
        padded_shape[n - 1] = w;
        let padded = Tensor::zeros(&padded_shape).to_dtype(x.dtype());
        no_grad(|| {
            padded
                .narrow(-2, self.padding, x.size(-2))
                .narrow(-1, self.padding, x.size(-1))
                .copy_(x);
        });
        let u = Tensor::rand_with(&[2], g).to_vec::<f64>();
        let top = ((u[0] * (h - ch + 1) as f64) as usize).min(h - ch);
        let left = ((u[1] * (w - cw + 1) as f64) as usize).min(w - cw);
        padded.narrow(-2, top, ch).narrow(-1, left, cw).contiguous()
    }
}

/// Mirrors the image left-right with probability `p` (`RandomHorizontalFlip`).
pub struct RandomHorizontalFlip {
    /// Probability of a flip.
    pub p: f64,
}

impl Transform for RandomHorizontalFlip {
    fn apply(&self, x: &Tensor, g: &Generator) -> Tensor {
        if Tensor::rand_with(&[1], g).to_vec::<f64>()[0] >= self.p {
            return x.clone();
        }
        let w = x.size(-1) as i64;
        let reversed = Tensor::arange_step(w - 1, -1, -1);
        x.index_select(-1, &reversed)
    }
}

/// Transforms in order (`Compose`).
///
/// ```
/// use tapir_runtime::data::{Compose, Normalize, ToFloat, Transform};
/// use tapir_runtime::{Generator, Tensor};
/// let t = Compose(vec![Box::new(ToFloat { scale: 1.0 / 16.0 }), Box::new(Normalize { mean: vec![0.5], std: vec![0.5] })]);
/// let x = Tensor::from_vec(vec![0u8, 8, 16, 16], &[1, 2, 2]);
/// assert_eq!(t.apply(&x, &Generator::new(0)).to_vec::<f32>(), vec![-1.0, 0.0, 1.0, 1.0]);
/// ```
pub struct Compose(pub Vec<Box<dyn Transform>>);

impl Transform for Compose {
    fn apply(&self, x: &Tensor, g: &Generator) -> Tensor {
        self.0.iter().fold(x.clone(), |acc, t| t.apply(&acc, g))
    }
}
