//! Volumetric layers: `Conv3d`, `ConvTranspose3d`, the 3-D pools and pads,
//! `InstanceNorm3d`. Their values and gradients are checked against
//! PyTorch in `nn_goldens` (built here by [`build`]); this file adds finite
//! differences, errors and reprs (compile replay and ONNX export are in
//! their own test binaries).

use super::nn_goldens::{flat, loaded};
use crate::common::{close, dev, panic_message};
use tapir::gradcheck;
use tapir::nn::*;
use tapir::prelude::*;

/// The 3-D layers of `scripts/gen_nn_goldens.py`, by name.
pub(super) fn build(name: &str) -> Option<Box<dyn Forward>> {
    let o = Conv3dOptions::default();
    Some(match name {
        "conv3d_pad" => Box::new(Conv3d::new(2, 4, (3, 3, 3), o.padding(1), true)),
        "conv3d_stride_dil_groups" => {
            let o = Conv3dOptions {
                stride: (2, 1, 2),
                padding: (1, 0, 1),
                dilation: (2, 1, 1),
                groups: 2,
            };
            Box::new(Conv3d::new(4, 6, (3, 2, 2), o, false))
        }
        "conv3d_unbatched_reflect" => Box::new(
            Conv3d::new(2, 3, (2, 2, 2), o.padding(1), true).padding_mode(PadMode::Reflect),
        ),
        "conv3d_circular" => {
            let o = Conv3dOptions {
                padding: (1, 2, 1),
                ..o
            };
            Box::new(Conv3d::new(1, 2, (2, 3, 3), o, true).padding_mode(PadMode::Circular))
        }
        "convtranspose3d" => Box::new(ConvTranspose3d::new(3, 4, (3, 3, 3), o, (0, 0, 0), true)),
        "convtranspose3d_stride_pad_outpad_groups" => {
            let o = Conv3dOptions {
                stride: (2, 2, 1),
                padding: (1, 0, 1),
                dilation: (1, 1, 2),
                groups: 2,
            };
            Box::new(ConvTranspose3d::new(4, 6, (3, 2, 3), o, (1, 1, 0), true))
        }
        "convtranspose3d_outpad_dilation_unbatched" => {
            let o = o.padding(1).dilation(3);
            Box::new(ConvTranspose3d::new(2, 2, (2, 2, 2), o, (2, 2, 2), false))
        }
        "maxpool3d" => Box::new(MaxPool3d::new(2)),
        "maxpool3d_stride_pad_dil_ceil" => Box::new(MaxPool3d {
            kernel: (3, 2, 3),
            stride: (2, 1, 2),
            padding: (1, 1, 0),
            dilation: (1, 2, 1),
            ceil_mode: true,
        }),
        "maxpool3d_unbatched_ties" => Box::new(MaxPool3d {
            stride: (1, 1, 1),
            ..MaxPool3d::new(2)
        }),
        "avgpool3d_pad_ceil" => Box::new(AvgPool3d {
            kernel: (2, 3, 2),
            stride: (2, 2, 1),
            padding: (1, 1, 1),
            ceil_mode: true,
            ..AvgPool3d::new(2)
        }),
        "avgpool3d_exclude_pad" => Box::new(AvgPool3d {
            stride: (2, 2, 2),
            padding: (1, 1, 1),
            count_include_pad: false,
            ..AvgPool3d::new(3)
        }),
        "avgpool3d_divisor_unbatched" => Box::new(AvgPool3d {
            divisor_override: Some(3),
            ..AvgPool3d::new(2)
        }),
        "adaptiveavgpool3d" => Box::new(AdaptiveAvgPool3d {
            output_size: (2, 3, 2),
        }),
        "adaptiveavgpool3d_1" => Box::new(AdaptiveAvgPool3d {
            output_size: (1, 1, 1),
        }),
        "adaptivemaxpool3d_unbatched" => Box::new(AdaptiveMaxPool3d {
            output_size: (3, 2, 2),
        }),
        "pad_reflect_3d" => Box::new(ReflectionPad3d {
            padding: [1, 2, 0, 1, 2, 1],
        }),
        "pad_replicate_3d_unbatched" => Box::new(ReplicationPad3d {
            padding: [2, 0, 1, 1, 0, 3],
        }),
        "pad_circular_3d" => Box::new(CircularPad3d {
            padding: [1, 1, 2, 0, 1, 2],
        }),
        "pad_zero_3d" => Box::new(ZeroPad3d {
            padding: [1, 0, 0, 2, 1, 1],
        }),
        "pad_constant_3d" => Box::new(ConstantPad {
            padding: vec![0, 1, 1, 0, 2, 0],
            value: 1.5,
        }),
        "instancenorm3d_affine" => Box::new(InstanceNorm::new_3d(3, 1e-5, true)),
        "lppool3d_ceil_stride" => Box::new(LPPool3d {
            kernel: (2, 3, 2),
            stride: Some((1, 2, 2)),
            ceil_mode: true,
            ..LPPool3d::new(2.0, 2)
        }),
        "lppool3d_p3_unbatched" => Box::new(LPPool3d::new(3.0, 2)),
        _ => return None,
    })
}

/// The 3-D cases that pool with indices (the replay flattens both outputs).
pub(super) const STATEFUL: [&str; 2] = [
    "maxunpool3d_overlapping",
    "maxpool3d_indices_ceil_dilation_unbatched",
];

/// Runs a [`STATEFUL`] case as the script did: the output and the module.
pub(super) fn run_stateful(
    name: &str,
    inputs: &[Tensor],
    sd: &StateDict,
    dtype: DType,
) -> Result<(Tensor, Box<dyn Module>), String> {
    let x = &inputs[0];
    Ok(match name {
        "maxunpool3d_overlapping" => {
            let pool = MaxPool3d {
                stride: (1, 1, 1),
                ..MaxPool3d::new(2)
            };
            let (v, i) = pool.forward_with_indices(x);
            let unpool = MaxUnpool3d {
                stride: (1, 1, 1),
                ..MaxUnpool3d::new(2)
            };
            (
                unpool.forward(&v, &i, None),
                loaded(Box::new(unpool), sd, dtype)?,
            )
        }
        _ => {
            let pool = MaxPool3d {
                kernel: (2, 3, 2),
                stride: (2, 2, 2),
                padding: (1, 1, 0),
                dilation: (1, 1, 2),
                ceil_mode: true,
            };
            let (v, i) = pool.forward_with_indices(x);
            (
                flat(&[&v, &i.to_dtype(dtype)]),
                loaded(Box::new(pool), sd, dtype)?,
            )
        }
    })
}

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    dev(Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64))
}

#[test]
fn conv3d_gradients_match_finite_differences() {
    let x = rnd(&[1, 4, 5, 4, 3], 1).requires_grad_(true);
    let w = rnd(&[6, 2, 3, 2, 2], 2).requires_grad_(true);
    let b = rnd(&[6], 3).requires_grad_(true);
    let o = Conv3dOptions {
        stride: (2, 1, 2),
        padding: (1, 0, 1),
        dilation: (1, 2, 1),
        groups: 2,
    };
    let f = |t: &[Tensor]| conv3d(&t[0], &t[1], Some(&t[2]), o).sin().sum();
    gradcheck(f, &[x.clone(), w, b], 1e-6, 1e-6, 1e-5).unwrap();
    let wt = rnd(&[4, 3, 2, 3, 2], 4).requires_grad_(true);
    let bt = rnd(&[6], 5).requires_grad_(true);
    let f = |t: &[Tensor]| {
        conv_transpose3d(&t[0], &t[1], Some(&t[2]), o, (1, 1, 0))
            .sin()
            .sum()
    };
    gradcheck(f, &[x, wt, bt], 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn pool3d_gradients_match_finite_differences() {
    // Distinct values, so no maximum is tied within a step of the check.
    let distinct: Vec<f64> = (0..240).map(|i| ((i * 37) % 240) as f64 / 24.0).collect();
    let x = dev(Tensor::from_vec(distinct, &[2, 5, 6, 4])).requires_grad_(true);
    let f = |t: &[Tensor]| {
        max_pool3d(&t[0], (3, 2, 2), (2, 1, 2), (1, 1, 0), (1, 2, 1), true)
            .sin()
            .sum()
    };
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| adaptive_max_pool3d(&t[0], (2, 4, 3)).sin().sum();
    gradcheck(f, std::slice::from_ref(&x), 1e-6, 1e-6, 1e-5).unwrap();
    let y = rnd(&[1, 2, 5, 6, 4], 7).requires_grad_(true);
    let f = |t: &[Tensor]| {
        avg_pool3d(&t[0], (2, 3, 2), (2, 2, 1), (1, 1, 1), true, false, None)
            .sin()
            .sum()
    };
    gradcheck(f, std::slice::from_ref(&y), 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| adaptive_avg_pool3d(&t[0], (3, 4, 3)).sin().sum();
    gradcheck(f, std::slice::from_ref(&y), 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn a_depth_one_volume_is_the_planar_layer() {
    // Conv3d with a depth-1 kernel over each depth slice is Conv2d; the
    // pools with a depth-1 window are the 2-D pools.
    let x = rnd(&[2, 3, 4, 5, 6], 8);
    let w = rnd(&[4, 3, 1, 3, 2], 9);
    let o = Conv3dOptions::default().padding(1).stride(2);
    let o = Conv3dOptions {
        padding: (0, 1, 1),
        stride: (1, 2, 2),
        ..o
    };
    let y = conv3d(&x, &w, None, o);
    let slices: Vec<Tensor> = (0..4)
        .map(|d| {
            let plane = x.select(2, d);
            plane.conv2d(
                &w.select(2, 0),
                None,
                Conv2dOptions::default().padding(1).stride(2),
            )
        })
        .collect();
    let want = Tensor::stack(&slices.iter().collect::<Vec<_>>(), 2);
    close("conv3d", &y, &want, 1e-12, 0.0).unwrap();
    let pooled = max_pool3d(&x, (1, 2, 2), (1, 2, 2), (0, 0, 0), (1, 1, 1), false);
    let want: Vec<Tensor> = (0..4)
        .map(|d| x.select(2, d).max_pool2d((2, 2), (2, 2), (0, 0), (1, 1)))
        .collect();
    let want = Tensor::stack(&want.iter().collect::<Vec<_>>(), 2);
    close("max_pool3d", &pooled, &want, 0.0, 0.0).unwrap();
}

#[test]
fn reprs_are_pytorchs() {
    let o = Conv3dOptions {
        stride: (2, 2, 1),
        padding: (1, 0, 1),
        dilation: (1, 1, 2),
        groups: 2,
    };
    let t = ConvTranspose3d::new(4, 6, (3, 2, 3), o, (1, 1, 0), true);
    assert_eq!(
        t.repr(),
        "ConvTranspose3d(4, 6, kernel_size=(3, 2, 3), stride=(2, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2), output_padding=(1, 1, 0), groups=2)"
    );
    let c = Conv3d::new(1, 2, (2, 3, 3), Conv3dOptions::default(), false)
        .padding_mode(PadMode::Circular);
    assert_eq!(
        c.repr(),
        "Conv3d(1, 2, kernel_size=(2, 3, 3), stride=(1, 1, 1), bias=False, padding_mode=circular)"
    );
    let m = MaxPool3d {
        kernel: (3, 2, 3),
        ceil_mode: true,
        ..MaxPool3d::new(2)
    };
    assert_eq!(
        m.repr(),
        "MaxPool3d(kernel_size=(3, 2, 3), stride=2, padding=0, dilation=1, ceil_mode=True)"
    );
    assert_eq!(
        AvgPool3d::new(3).repr(),
        "AvgPool3d(kernel_size=3, stride=3, padding=0)"
    );
    let a = AdaptiveMaxPool3d {
        output_size: (1, 2, 2),
    };
    assert_eq!(a.repr(), "AdaptiveMaxPool3d(output_size=(1, 2, 2))");
}

#[test]
fn bad_volumes_are_named_errors() {
    let x = Tensor::zeros(&[1, 2, 3, 4, 4]);
    let w = Tensor::zeros(&[4, 3, 2, 2, 2]);
    let msg = panic_message(|| {
        conv3d(&x, &w, None, Conv3dOptions::default());
    });
    assert_eq!(
        msg,
        "conv3d: expected input [N, 3, D, H, W] or [3, D, H, W] for weight [4, 3, 2, 2, 2], got [1, 2, 3, 4, 4]"
    );
    let w = Tensor::zeros(&[4, 2, 4, 2, 2]);
    let msg = panic_message(|| {
        conv3d(&x, &w, None, Conv3dOptions::default());
    });
    assert_eq!(
        msg,
        "conv3d: input [1, 2, 3, 4, 4] padded by (0, 0, 0) is smaller than the kernel [4, 2, 2] with dilation (1, 1, 1)"
    );
    let msg = panic_message(|| {
        conv3d(
            &x,
            &Tensor::zeros(&[4, 2, 2, 2]),
            None,
            Conv3dOptions::default(),
        );
    });
    assert_eq!(msg, "conv3d: weight must be 5-D, got shape [4, 2, 2, 2]");
    let wt = Tensor::zeros(&[2, 3, 2, 2, 2]);
    let msg = panic_message(|| {
        conv_transpose3d(&x, &wt, None, Conv3dOptions::default().stride(2), (0, 2, 0));
    });
    assert_eq!(
        msg,
        "conv_transpose3d: output_padding (0, 2, 0) must be smaller than either the stride (2, 2, 2) or the dilation (1, 1, 1) in each dim"
    );
    let msg = panic_message(|| {
        max_pool3d(&x, (2, 2, 2), (2, 2, 2), (0, 2, 0), (1, 1, 1), false);
    });
    assert_eq!(
        msg,
        "max_pool3d: padding (0, 2, 0) should be at most half of kernel (2, 2, 2)"
    );
    let msg = panic_message(|| {
        avg_pool3d(
            &Tensor::zeros(&[3, 4, 4]),
            (2, 2, 2),
            (2, 2, 2),
            (0, 0, 0),
            false,
            true,
            None,
        );
    });
    assert_eq!(
        msg,
        "avg_pool3d: expects a 5-D [N, C, D, H, W] or 4-D [C, D, H, W] input, got shape [3, 4, 4]"
    );
    let msg = panic_message(|| {
        adaptive_avg_pool3d(&x, (0, 1, 1));
    });
    assert_eq!(
        msg,
        "adaptive_avg_pool3d: output size (0, 1, 1) must be positive"
    );
}
