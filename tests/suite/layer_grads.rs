//! The padding modes, pooling options, PReLU and the recurrent cells
//! beyond their PyTorch goldens (`nn_goldens`): gradients by finite
//! differences, and the channel and alpha dropouts' statistics.

use tapir::gradcheck;
use tapir::nn::{
    AlphaDropout, Dropout2d, Forward, LSTMCell, Module, PReLU, PadMode, adaptive_max_pool2d,
    avg_pool2d, max_pool2d, pad_with,
};
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

/// Weights that make every output element count differently.
fn mixed(y: &Tensor) -> Tensor {
    let w = Tensor::arange_f(0.0, y.numel() as f64, 1.0)
        .to_dtype(DType::F64)
        .reshape(&y.shape().iter().map(|&d| d as isize).collect::<Vec<_>>());
    (y * &(&w * 0.1).sin()).sum()
}

#[test]
fn padding_modes_gradients_match_finite_differences() {
    let x = rnd(&[2, 3, 4, 5], 1).requires_grad_(true);
    for mode in [PadMode::Reflect, PadMode::Replicate, PadMode::Circular] {
        let f = |t: &[Tensor]| mixed(&pad_with(&t[0], &[2, 1, 3, 0], mode));
        gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

#[test]
fn pooling_options_gradients_match_finite_differences() {
    let x = rnd(&[2, 2, 6, 7], 2).requires_grad_(true);
    let f = |t: &[Tensor]| {
        mixed(&avg_pool2d(
            &t[0],
            (3, 3),
            (2, 2),
            (1, 1),
            true,
            false,
            None,
        ))
    };
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| {
        mixed(&avg_pool2d(
            &t[0],
            (2, 3),
            (1, 2),
            (1, 1),
            false,
            true,
            Some(4),
        ))
    };
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| mixed(&max_pool2d(&t[0], (3, 3), (2, 2), (1, 1), (1, 1), true));
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| mixed(&adaptive_max_pool2d(&t[0], (4, 3)));
    gradcheck(f, &[x], 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn prelu_and_lstm_cell_gradients_match_finite_differences() {
    let x = rnd(&[2, 3, 4], 3).requires_grad_(true);
    let w = rnd(&[3], 4).requires_grad_(true);
    let f = |t: &[Tensor]| {
        let act = PReLU {
            weight: t[1].clone(),
        };
        mixed(&act.forward(&t[0]))
    };
    gradcheck(f, &[x, w], 1e-6, 1e-6, 1e-5).unwrap();
    let mut cell = LSTMCell::new(3, 4, true);
    cell.to_dtype(DType::F64);
    let (x, h, c) = (rnd(&[2, 3], 5), rnd(&[2, 4], 6), rnd(&[2, 4], 7));
    let inputs = [x, h, c].map(|t| t.requires_grad_(true));
    let f = |t: &[Tensor]| {
        let (h, c) = cell.forward(&t[0], Some((&t[1], &t[2])));
        let (h, c) = cell.forward(&t[0], Some((&h, &c)));
        &mixed(&h) + &mixed(&c)
    };
    gradcheck(f, &inputs, 1e-6, 1e-6, 1e-5).unwrap();
}

/// Dropout2d zeroes whole channels at rate p and scales the rest by
/// 1 / (1 - p); AlphaDropout keeps a standard normal's mean and variance.
/// Both are the identity in eval mode.
#[test]
fn channel_and_alpha_dropout_keep_their_statistics() {
    let drop = Dropout2d::new(0.3);
    let y = drop.forward(&Tensor::ones(&[64, 32, 3, 3]));
    let per_channel = y.reshape(&[64 * 32, 9]);
    let (lo, hi) = (
        per_channel.neg().amax_dim(1, false).neg(),
        per_channel.amax_dim(1, false),
    );
    assert_eq!(lo.to_vec::<f32>(), hi.to_vec::<f32>(), "whole channels");
    let values = hi.to_vec::<f32>();
    let dropped = values.iter().filter(|&&v| v == 0.0).count() as f64 / values.len() as f64;
    assert!((dropped - 0.3).abs() < 0.05, "dropped {dropped}");
    assert!(
        values
            .iter()
            .all(|&v| v == 0.0 || (v - 1.0 / 0.7).abs() < 1e-6)
    );
    drop.eval();
    assert_eq!(
        drop.forward(&Tensor::ones(&[1, 2, 2, 2])).to_vec::<f32>(),
        vec![1.0; 8]
    );

    let alpha = AlphaDropout::new(0.3);
    let x = Tensor::randn_with(&[400_000], &Generator::new(8));
    let y = alpha.forward(&x);
    assert!(y.mean().item::<f32>().abs() < 0.01, "mean");
    assert!((y.var().item::<f32>() - 1.0).abs() < 0.01, "variance");
    // A dropped value is SELU's saturation after the affine correction:
    // -alpha a (1 - p), with a = ((alpha^2 p + 1)(1 - p))^-1/2.
    let (sat, p) = (1.758_099_340_847_376_6f64, 0.3);
    let at = -sat * (1.0 - p) / ((sat * sat * p + 1.0) * (1.0 - p)).sqrt();
    let near = (&y - at).abs().lt_scalar(1e-5);
    let dropped = near.to_dtype(DType::F32).mean().item::<f32>();
    assert!((dropped - 0.3).abs() < 0.01, "dropped {dropped}");
    alpha.eval();
    assert_eq!(alpha.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
}

/// As torch 2.15 prints `nn.PReLU(3)`, `nn.LogSoftmax(dim=1)`,
/// `nn.Softmin(dim=-1)`, `nn.Softmax2d()` and the dropouts.
#[test]
fn activation_and_dropout_layers_print_as_torch() {
    use tapir::nn::{Dropout1d, LogSoftmax, Softmax2d, Softmin};
    let cases: Vec<(Box<dyn Module>, &str)> = vec![
        (Box::new(PReLU::new(3, 0.25)), "PReLU(num_parameters=3)"),
        (Box::new(LogSoftmax { dim: 1 }), "LogSoftmax(dim=1)"),
        (Box::new(Softmin::default()), "Softmin(dim=-1)"),
        (Box::new(Softmax2d), "Softmax2d()"),
        (
            Box::new(Dropout2d::new(0.3)),
            "Dropout2d(p=0.3, inplace=False)",
        ),
        (
            Box::new(Dropout1d::new(1.0)),
            "Dropout1d(p=1.0, inplace=False)",
        ),
        (
            Box::new(AlphaDropout::new(0.2)),
            "AlphaDropout(p=0.2, inplace=False)",
        ),
    ];
    for (m, want) in cases {
        assert_eq!(m.repr(), want);
    }
    assert_eq!(PReLU::new(3, 0.25).named_parameters()[0].0, "weight");
    // As torch prints `nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1,
    // output_padding=1, groups=2, bias=False, dilation=2)`.
    let opts = tapir::nn::Conv1dOptions {
        stride: 2,
        padding: 1,
        dilation: 2,
        groups: 2,
    };
    assert_eq!(
        tapir::nn::ConvTranspose1d::new(4, 6, 3, opts, 1, false).repr(),
        "ConvTranspose1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,), dilation=(2,), output_padding=(1,), groups=2, bias=False)"
    );
}

#[test]
fn unpooling_checks_its_output_size_and_indices() {
    use crate::common::panic_message;
    use tapir::nn::{MaxUnpool1d, MaxUnpool2d, max_unpool2d};
    let v = Tensor::ones(&[1, 1, 2, 2]);
    let at = Tensor::from_vec(vec![0i64, 3, 9, 15], &[1, 1, 2, 2]);
    assert_eq!(
        max_unpool2d(&v, &at, (2, 2), None, (0, 0), None)
            .sum()
            .item::<f32>(),
        4.0
    );
    let m = panic_message(|| {
        max_unpool2d(&v, &at, (2, 2), None, (0, 0), Some((6, 4)));
    });
    assert_eq!(
        m,
        "max_unpool2d: output_size [6, 4] is invalid: dim 0 must be between 2 and 6 (exclusive)"
    );
    let m = panic_message(|| {
        max_unpool2d(&v, &at, (2, 2), None, (0, 0), Some((3, 3)));
    });
    assert_eq!(
        m,
        "max_unpool2d: index 9 is outside the output plane of 9 elements"
    );
    assert_eq!(
        MaxUnpool1d {
            padding: 1,
            ..MaxUnpool1d::new(3)
        }
        .to_string(),
        "MaxUnpool1d(kernel_size=(3,), stride=(3,), padding=(1,))"
    );
    assert_eq!(
        MaxUnpool2d::new(2).forward(&v, &at, Some((5, 4))).shape(),
        &[1, 1, 5, 4]
    );
}

#[test]
fn grid_sample_gradients_match_finite_differences() {
    use tapir::nn::{GridMode, GridPadding, affine_grid, grid_sample};
    let img = rnd(&[1, 2, 4, 5], 7).requires_grad_(true);
    let theta = (&rnd(&[1, 2, 3], 8) * 0.3
        + &Tensor::from_vec(vec![1.0f64, 0.0, 0.1, 0.0, 1.0, -0.2], &[1, 2, 3]))
        .requires_grad_(true);
    for pad in [
        GridPadding::Zeros,
        GridPadding::Border,
        GridPadding::Reflection,
    ] {
        let f = |t: &[Tensor]| {
            let grid = affine_grid(&t[1], [1, 2, 3, 6], false);
            mixed(&grid_sample(&t[0], &grid, GridMode::Bilinear, pad, false))
        };
        gradcheck(f, &[img.clone(), theta.clone()], 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("{pad:?}: {e}"));
    }
    let m = crate::common::panic_message(|| {
        grid_sample(
            &Tensor::zeros(&[1, 2, 4, 5]),
            &Tensor::zeros(&[1, 3, 3]),
            GridMode::Nearest,
            GridPadding::Zeros,
            false,
        );
    });
    assert_eq!(
        m,
        "grid_sample: expects input [N, C, H, W] and grid [N, Ho, Wo, 2] of one floating dtype, got float32 [1, 2, 4, 5] and float32 [1, 3, 3]"
    );
}

#[test]
fn rrelu_draws_its_slopes_in_training_and_uses_their_mean_in_eval() {
    use tapir::nn::RReLU;
    manual_seed(11);
    let act = RReLU::new(0.1, 0.3);
    let x = (&Tensor::rand(&[20_000]) * -1.0 - 0.5).requires_grad_(true);
    let y = act.forward(&x);
    y.sum().backward();
    let (xs, ys, gs) = (
        x.to_vec::<f32>(),
        y.to_vec::<f32>(),
        x.grad().unwrap().to_vec::<f32>(),
    );
    let slopes: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| y / x).collect();
    assert!(slopes.iter().all(|a| (0.1 - 1e-6..=0.3 + 1e-6).contains(a)));
    let mean = slopes.iter().sum::<f32>() / slopes.len() as f32;
    assert!((mean - 0.2).abs() < 0.003, "mean slope {mean}");
    // The gradient is each element's own slope, and the slopes differ.
    assert!(gs.iter().zip(&slopes).all(|(g, a)| (g - a).abs() < 1e-5));
    assert!(slopes.iter().any(|a| (a - slopes[0]).abs() > 0.01));
    act.eval();
    assert_eq!(
        act.forward(&Tensor::from_vec(vec![-1.0f32, 2.0], &[2]))
            .to_vec::<f32>(),
        [-0.2, 2.0]
    );
}
