//! Folding an eval-mode batch norm into the layer before it
//! (`torch.nn.utils.fuse_conv_bn_eval`, `fuse_linear_bn_eval`): one layer
//! computes both, so inference skips the norm's pass over the activations.

use super::batch_norm::BatchNorm;
use super::conv::Conv2d;
use super::linear::Linear;
use super::module::Module;
use crate::Tensor;

/// The weight and bias of a convolution (or linear layer) followed by a
/// batch norm with running statistics, as one layer
/// (`torch.nn.utils.fuse_conv_bn_weights`): `w · γ / √(var + eps)` per
/// output channel and `(b - mean) · γ / √(var + eps) + β`. `transpose`
/// for a transposed convolution's weight (output channels in dim 1).
///
/// ```
/// use tapir_runtime::{nn::fuse_conv_bn_weights, Tensor};
/// let w = Tensor::ones(&[2, 1, 1, 1]);
/// let (mean, var) = (Tensor::zeros(&[2]), Tensor::full(&[2], 4.0));
/// let (fw, fb) = fuse_conv_bn_weights(&w, None, &mean, &var, 0.0, None, None, false);
/// assert_eq!((fw.to_vec::<f32>(), fb.to_vec::<f32>()), (vec![0.5, 0.5], vec![0.0, 0.0]));
/// ```
#[allow(clippy::too_many_arguments)]
pub fn fuse_conv_bn_weights(
    weight: &Tensor,
    bias: Option<&Tensor>,
    running_mean: &Tensor,
    running_var: &Tensor,
    eps: f64,
    bn_weight: Option<&Tensor>,
    bn_bias: Option<&Tensor>,
    transpose: bool,
) -> (Tensor, Tensor) {
    crate::no_grad(|| {
        let scale = (running_var + eps).rsqrt();
        let scale = match bn_weight {
            Some(g) => g * &scale,
            None => scale,
        };
        let mut shape = vec![1isize; weight.ndim().max(2)];
        shape[transpose as usize] = -1;
        let fused_w = (weight * &scale.reshape(&shape)).to_dtype(weight.dtype());
        let centred = match bias {
            Some(b) => b - running_mean,
            None => running_mean * -1.0,
        };
        let shifted = &centred * &scale;
        let fused_b = match bn_bias {
            Some(beta) => &shifted + beta,
            None => shifted,
        };
        (fused_w, fused_b.to_dtype(weight.dtype()))
    })
}

/// A layer's `weight` and `bias` with the eval-mode `bn` after it folded
/// in, or a panic saying why it cannot be folded.
#[track_caller]
fn fused(weight: &Tensor, bias: Option<&Tensor>, bn: &BatchNorm, op: &str) -> (Tensor, Tensor) {
    assert!(
        !bn.is_training(),
        "{op}: fusing is only for eval mode; call .eval() on the batch norm first"
    );
    let (Some(mean), Some(var)) = (&bn.running_mean, &bn.running_var) else {
        panic!("{op}: the batch norm keeps no running statistics (track_running_stats=False)")
    };
    let (gamma, beta) = (bn.weight.as_ref(), bn.bias.as_ref());
    fuse_conv_bn_weights(weight, bias, mean, var, bn.eps, gamma, beta, false)
}

/// `torch.nn.utils.fuse_conv_bn_eval(conv, bn)`: a `Conv2d` computing
/// `bn(conv(x))` of the eval-mode `bn`, its parameters leaves that require
/// grad (fine-tuning the fused layer trains them).
///
/// ```
/// use tapir_runtime::{nn::{fuse_conv_bn_eval, BatchNorm, Conv2d, Forward, Module}, Conv2dOptions, Tensor};
/// let conv = Conv2d::new(3, 4, (3, 3), Conv2dOptions::default(), false);
/// let bn = BatchNorm::new_2d(4);
/// bn.forward(&conv.forward(&Tensor::randn(&[8, 3, 6, 6]))); // running statistics move
/// bn.eval();
/// let fused = fuse_conv_bn_eval(&conv, &bn);
/// let x = Tensor::randn(&[2, 3, 6, 6]);
/// let gap = (&fused.forward(&x) - &bn.forward(&conv.forward(&x))).abs().max().item::<f32>();
/// assert!(gap < 1e-5);
/// ```
#[track_caller]
pub fn fuse_conv_bn_eval(conv: &Conv2d, bn: &BatchNorm) -> Conv2d {
    let (w, b) = fused(&conv.weight, conv.bias.as_ref(), bn, "fuse_conv_bn_eval");
    Conv2d {
        weight: w.requires_grad_(true),
        bias: Some(b.requires_grad_(true)),
        in_channels: conv.in_channels,
        out_channels: conv.out_channels,
        kernel: conv.kernel,
        opts: conv.opts,
        padding_mode: conv.padding_mode,
    }
}

/// `torch.nn.utils.fuse_linear_bn_eval(linear, bn)`: a `Linear` computing
/// `bn(linear(x))` of the eval-mode `BatchNorm1d` `bn`.
#[track_caller]
pub fn fuse_linear_bn_eval(linear: &Linear, bn: &BatchNorm) -> Linear {
    assert!(
        linear.out_features == bn.num_features,
        "fuse_linear_bn_eval: Linear has {} outputs but the batch norm {} features",
        linear.out_features,
        bn.num_features
    );
    let (w, b) = fused(
        &linear.weight,
        linear.bias.as_ref(),
        bn,
        "fuse_linear_bn_eval",
    );
    Linear {
        weight: w.requires_grad_(true),
        bias: Some(b.requires_grad_(true)),
        in_features: linear.in_features,
        out_features: linear.out_features,
    }
}
