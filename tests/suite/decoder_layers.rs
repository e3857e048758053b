//! GroupNorm, InstanceNorm, fold, ConvTranspose2d and the transformer
//! decoder layer beyond their PyTorch goldens (`nn_goldens`): gradients by
//! finite differences, half precision rounded once, the output size a
//! caller asks for, reprs (with the norms' as torch 2.15 prints them) and
//! errors.

use crate::common::panic_message;
use tapir::gradcheck;
use tapir::nn::{
    AdaptiveAvgPool1d, AdaptiveMaxPool2d, AvgPool1d, BatchNorm, ConstantPad, Conv2d,
    ConvTranspose2d, Forward, GRUCell, GroupNorm, Identity, InstanceNorm, LSTMCell, LayerNorm,
    MaxPool1d, MaxPool2d, Module, PadMode, PixelShuffle, PixelUnshuffle, RMSNorm, RNN, RNNCell,
    ReflectionPad2d, RnnOptions, TransformerDecoderLayer, TransformerDecoderLayerOptions,
    ZeroPad2d, group_norm, instance_norm, pixel_shuffle, pixel_unshuffle,
};
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

#[test]
fn group_and_instance_norm_gradients_match_finite_differences() {
    let x = rnd(&[2, 6, 3, 2], 1).requires_grad_(true);
    let w = rnd(&[6], 2).requires_grad_(true);
    let b = rnd(&[6], 3).requires_grad_(true);
    // A weighting makes the gradient of x non-trivial (a plain sum of a
    // normalised group has gradient zero).
    let mix = rnd(&[2, 6, 3, 2], 4);
    let f = |t: &[Tensor]| (&group_norm(&t[0], 3, Some(&t[1]), Some(&t[2]), 1e-5) * &mix).sum();
    gradcheck(f, &[x.clone(), w.clone(), b.clone()], 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| (&instance_norm(&t[0], Some(&t[1]), Some(&t[2]), 1e-3) * &mix).sum();
    gradcheck(f, &[x, w, b], 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn fold_and_transposed_convolution_gradients_match_finite_differences() {
    let opts = Conv2dOptions {
        stride: (2, 1),
        padding: (1, 0),
        dilation: (1, 2),
        groups: 2,
    };
    let x = rnd(&[2, 4, 3, 3], 5).requires_grad_(true);
    let w = rnd(&[4, 3, 2, 3], 6).requires_grad_(true);
    let b = rnd(&[6], 7).requires_grad_(true);
    let mix = rnd(&[2, 6, 5, 7], 8);
    let f = |t: &[Tensor]| (&t[0].conv_transpose2d(&t[1], Some(&t[2]), opts, (1, 0)) * &mix).sum();
    assert_eq!(f(&[x.clone(), w.clone(), b.clone()]).ndim(), 0);
    gradcheck(f, &[x, w, b], 1e-6, 1e-6, 1e-5).unwrap();

    let cols = rnd(&[2, 6, 9], 9).requires_grad_(true);
    let fold_opts = Conv2dOptions::default().stride(2).padding(1);
    let mix = rnd(&[2, 1, 5, 6], 10);
    let f = |t: &[Tensor]| (&t[0].fold2d((5, 6), (2, 3), fold_opts) * &mix).sum();
    gradcheck(f, &[cols], 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn fold_is_the_adjoint_of_unfold() {
    // <unfold(x), c> == <x, fold(c)> for every x and c: what makes fold
    // unfold's backward and the other way round.
    let opts = Conv2dOptions::default().stride(2).padding(1).dilation(2);
    let x = rnd(&[2, 3, 7, 6], 11);
    let cols = x.unfold2d((3, 2), opts);
    let c = rnd(cols.shape(), 12);
    let lhs = (&cols * &c).sum().item::<f64>();
    let rhs = (&x * &c.fold2d((7, 6), (3, 2), opts)).sum().item::<f64>();
    assert!((lhs - rhs).abs() < 1e-10, "{lhs} vs {rhs}");
}

#[test]
fn half_precision_group_norm_is_computed_in_f32_and_rounded_once() {
    let x = rnd(&[2, 4, 8], 13).to_dtype(DType::F32);
    let w = rnd(&[4], 14).to_dtype(DType::F32);
    for half in [DType::BF16, DType::F16] {
        let (xh, wh) = (x.to_dtype(half), w.to_dtype(half));
        let got = group_norm(&xh, 2, Some(&wh), None, 1e-5);
        assert_eq!(got.dtype(), half);
        let want = group_norm(
            &xh.to_dtype(DType::F32),
            2,
            Some(&wh.to_dtype(DType::F32)),
            None,
            1e-5,
        )
        .to_dtype(half);
        assert_eq!(
            got.to_dtype(DType::F32).to_vec::<f32>(),
            want.to_dtype(DType::F32).to_vec::<f32>(),
            "{half:?}"
        );
    }
}

#[test]
fn conv_transpose_reaches_the_output_size_asked_for() {
    manual_seed(3);
    let up = ConvTranspose2d::new(
        2,
        3,
        (3, 3),
        Conv2dOptions::default().stride(3),
        (0, 0),
        true,
    );
    let x = Tensor::randn(&[1, 2, 4, 5]);
    // (4 - 1) * 3 + 3 = 12 rows at least; a stride of 3 allows 12 to 14.
    for (h, w) in [(12, 15), (13, 16), (14, 17)] {
        let y = up.forward_with_output_size(&x, (h, w));
        assert_eq!(y.shape(), &[1, 3, h, w]);
        // The extra rows and columns see only the bias.
        let plain = up.forward(&x);
        let top = y.narrow(2, 0, 12).narrow(3, 0, 15);
        assert!(top.allclose(&plain, 0.0, 0.0));
    }
    let m = panic_message(|| {
        up.forward_with_output_size(&x, (15, 15));
    });
    assert_eq!(
        m,
        "ConvTranspose2d: requested an output size of (15, 15), but valid sizes for input of shape [1, 2, 4, 5] range from 12 to 14 in that dim"
    );
}

#[test]
fn reprs_read_as_pytorch_prints_them() {
    let c = Conv2dOptions::default();
    let cases: Vec<(Box<dyn Module>, &str)> = vec![
        (
            Box::new(ConvTranspose2d::new(
                16,
                8,
                (3, 3),
                c.stride(2).padding(1),
                (1, 1),
                true,
            )),
            "ConvTranspose2d(16, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))",
        ),
        (
            Box::new(ConvTranspose2d::new(
                4,
                6,
                (2, 2),
                c.dilation(2).groups(2),
                (0, 0),
                false,
            )),
            "ConvTranspose2d(4, 6, kernel_size=(2, 2), stride=(1, 1), dilation=(2, 2), groups=2, bias=False)",
        ),
        (
            Box::new(Conv2d::new(1, 32, (3, 3), c.padding(1), true)),
            "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))",
        ),
        (
            Box::new(Conv2d::new(
                4,
                6,
                (3, 1),
                c.stride(2).dilation(2).groups(2),
                false,
            )),
            "Conv2d(4, 6, kernel_size=(3, 1), stride=(2, 2), dilation=(2, 2), groups=2, bias=False)",
        ),
        (
            Box::new(GroupNorm::new(2, 4, 1e-5, true)),
            "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)",
        ),
        (
            Box::new(InstanceNorm::new_2d(3, 1e-5, false)),
            "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)",
        ),
        (
            Box::new(LayerNorm::new(&[8], 1e-5, false)),
            "LayerNorm((8,), eps=1e-05, elementwise_affine=False, bias=False)",
        ),
        (
            Box::new(LayerNorm::new(&[3, 4], 1e-6, true)),
            "LayerNorm((3, 4), eps=1e-06, elementwise_affine=True, bias=True)",
        ),
        (
            Box::new(RMSNorm::new(&[6], Some(1e-6), true)),
            "RMSNorm((6,), eps=1e-06, elementwise_affine=True)",
        ),
        (
            Box::new(BatchNorm::new_2d(3).eps(1e-3).momentum(0.01)),
            "BatchNorm2d(3, eps=0.001, momentum=0.01, affine=True, bias=True, track_running_stats=True)",
        ),
        (
            Box::new(
                BatchNorm::new_3d(2)
                    .momentum(None)
                    .affine(false)
                    .track_running_stats(false),
            ),
            "BatchNorm3d(2, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=False)",
        ),
        (
            Box::new(BatchNorm::new_1d(4).bias(false)),
            "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=False, track_running_stats=True)",
        ),
        (
            Box::new(
                InstanceNorm::new_1d(3, 1e-5, false)
                    .track_running_stats(true)
                    .momentum(None),
            ),
            "InstanceNorm1d(3, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)",
        ),
    ];
    let two_layers = RnnOptions {
        num_layers: 2,
        ..Default::default()
    };
    let more: Vec<(Box<dyn Module>, &str)> = vec![
        (
            Box::new(PixelShuffle { upscale_factor: 2 }),
            "PixelShuffle(upscale_factor=2)",
        ),
        (
            Box::new(PixelUnshuffle {
                downscale_factor: 3,
            }),
            "PixelUnshuffle(downscale_factor=3)",
        ),
        (Box::new(Identity), "Identity()"),
        // As torch 2.15 prints the padding layers, pools and padding modes.
        (
            Box::new(ReflectionPad2d::new(2)),
            "ReflectionPad2d((2, 2, 2, 2))",
        ),
        (
            Box::new(ConstantPad {
                padding: vec![2, 2],
                value: 3.5,
            }),
            "ConstantPad1d(padding=(2, 2), value=3.5)",
        ),
        (
            Box::new(ZeroPad2d {
                padding: [1, 1, 2, 0],
            }),
            "ZeroPad2d((1, 1, 2, 0))",
        ),
        (
            Box::new(
                Conv2d::new(2, 3, (3, 3), Conv2dOptions::default().padding(1), true)
                    .padding_mode(PadMode::Reflect),
            ),
            "Conv2d(2, 3, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), padding_mode=reflect)",
        ),
        (
            Box::new(MaxPool2d {
                kernel: (2, 3),
                stride: (2, 3),
                ..MaxPool2d::new(1)
            }),
            "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)",
        ),
        (
            Box::new(MaxPool1d {
                stride: 2,
                padding: 1,
                dilation: 2,
                ceil_mode: true,
                ..MaxPool1d::new(3)
            }),
            "MaxPool1d(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)",
        ),
        (
            Box::new(AvgPool1d {
                stride: 2,
                padding: 1,
                ..AvgPool1d::new(3)
            }),
            "AvgPool1d(kernel_size=(3,), stride=(2,), padding=(1,))",
        ),
        (
            Box::new(AdaptiveMaxPool2d {
                output_size: (2, 3),
            }),
            "AdaptiveMaxPool2d(output_size=(2, 3))",
        ),
        (
            Box::new(AdaptiveAvgPool1d { output_size: 4 }),
            "AdaptiveAvgPool1d(output_size=4)",
        ),
        (
            Box::new(RNN::new(3, 4, two_layers).relu()),
            "RNN(3, 4, num_layers=2)",
        ),
        (
            Box::new(RNNCell::new(3, 4, false).relu()),
            "RNNCell(3, 4, bias=False, nonlinearity=relu)",
        ),
        (Box::new(LSTMCell::new(3, 4, true)), "LSTMCell(3, 4)"),
        (
            Box::new(GRUCell::new(3, 4, false)),
            "GRUCell(3, 4, bias=False)",
        ),
    ];
    for (m, want) in cases.into_iter().chain(more) {
        assert_eq!(m.repr(), want);
    }
    // As torch 2.15 prints `nn.TransformerDecoderLayer(8, 2, dim_feedforward=16)`.
    let opts = TransformerDecoderLayerOptions {
        dim_feedforward: 16,
        ..Default::default()
    };
    let norm = "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)";
    let attn = "MultiheadAttention(\n    (out_proj): NonDynamicallyQuantizableLinear(in_features=8, out_features=8, bias=True)\n  )";
    let drop = "Dropout(p=0.1, inplace=False)";
    assert_eq!(
        TransformerDecoderLayer::new(8, 2, opts).repr(),
        format!(
            "TransformerDecoderLayer(\n  (self_attn): {attn}\n  (multihead_attn): {attn}\n  \
             (linear1): Linear(in_features=8, out_features=16, bias=True)\n  (dropout): {drop}\n  \
             (linear2): Linear(in_features=16, out_features=8, bias=True)\n  (norm1): {norm}\n  \
             (norm2): {norm}\n  (norm3): {norm}\n  (dropout1): {drop}\n  (dropout2): {drop}\n  \
             (dropout3): {drop}\n)"
        )
    );
    let names: Vec<String> = ConvTranspose2d::new(4, 6, (2, 2), c.groups(2), (0, 0), true)
        .named_parameters()
        .into_iter()
        .map(|(n, p)| format!("{n} {:?}", p.shape()))
        .collect();
    assert_eq!(names, ["weight [4, 3, 2, 2]", "bias [6]"]);
}

/// A call that should panic, and its message.
type Misuse = (Box<dyn Fn()>, &'static str);

#[test]
fn misuse_names_the_op_and_the_shapes() {
    let cases: Vec<Misuse> = vec![
        (
            Box::new(|| {
                group_norm(&Tensor::zeros(&[2, 6, 4]), 4, None, None, 1e-5);
            }),
            "group_norm: input of shape [2, 6, 4] has 6 channels, which do not divide into 4 groups",
        ),
        (
            Box::new(|| {
                group_norm(
                    &Tensor::zeros(&[2, 6]),
                    3,
                    Some(&Tensor::ones(&[3])),
                    None,
                    1e-5,
                );
            }),
            "group_norm: weight has shape [3], expected [6] for input of shape [2, 6]",
        ),
        (
            Box::new(|| {
                GroupNorm::new(2, 4, 1e-5, true).forward(&Tensor::zeros(&[1, 6, 2]));
            }),
            "GroupNorm(2, 4): expected input [N, 4, *], got shape [1, 6, 2]",
        ),
        (
            Box::new(|| {
                InstanceNorm::new_2d(3, 1e-5, true).forward(&Tensor::zeros(&[2, 4, 4]));
            }),
            "InstanceNorm2d(3): expected input with 3 channels, got shape [2, 4, 4]",
        ),
        (
            Box::new(|| {
                Tensor::zeros(&[1, 8, 10]).fold2d((4, 4), (2, 2), Conv2dOptions::default());
            }),
            "fold: output size (4, 4) with kernel (2, 2), stride (1, 1), padding (0, 0) and dilation (1, 1) has 3x3 = 9 blocks, but the input of shape [1, 8, 10] has 10",
        ),
        (
            Box::new(|| {
                Tensor::zeros(&[1, 3, 4, 4]).conv_transpose2d(
                    &Tensor::zeros(&[2, 3, 3, 3]),
                    None,
                    Conv2dOptions::default(),
                    (0, 0),
                );
            }),
            "conv_transpose2d: input [1, 3, 4, 4] has 3 channels, but weight [2, 3, 3, 3] expects 2",
        ),
        (
            Box::new(|| {
                Tensor::zeros(&[1, 2, 4, 4]).conv_transpose2d(
                    &Tensor::zeros(&[2, 3, 3, 3]),
                    None,
                    Conv2dOptions::default().stride(2),
                    (2, 0),
                );
            }),
            "conv_transpose2d: output_padding (2, 0) must be smaller than either stride (2, 2) or dilation (1, 1)",
        ),
        (
            Box::new(|| {
                Tensor::zeros(&[1, 2, 1, 1]).conv_transpose2d(
                    &Tensor::zeros(&[2, 3, 1, 1]),
                    None,
                    Conv2dOptions::default().padding(1),
                    (0, 0),
                );
            }),
            "conv_transpose2d: input [1, 2, 1, 1] with weight [2, 3, 1, 1], stride (1, 1), padding (1, 1), dilation (1, 1) and output_padding (0, 0) gives an empty output",
        ),
        (
            Box::new(|| {
                pixel_shuffle(&Tensor::zeros(&[1, 6, 2, 2]), 2);
            }),
            "pixel_shuffle: 6 channels (shape [1, 6, 2, 2]) do not divide by upscale_factor² = 4",
        ),
        (
            Box::new(|| {
                pixel_unshuffle(&Tensor::zeros(&[1, 1, 4, 5]), 2);
            }),
            "pixel_unshuffle: height and width of shape [1, 1, 4, 5] do not divide by downscale_factor 2",
        ),
    ];
    for (f, want) in cases {
        assert_eq!(panic_message(f), want);
    }
}

#[test]
fn a_stack_starts_from_copies_of_its_layer_as_pytorchs_deepcopy() {
    use tapir::nn::{TransformerEncoder, TransformerEncoderLayer, TransformerEncoderLayerOptions};
    let opts = TransformerEncoderLayerOptions {
        dim_feedforward: 8,
        ..Default::default()
    };
    let layer = TransformerEncoderLayer::new(4, 2, opts);
    let first = layer.state_dict();
    let stack = TransformerEncoder::new(layer, 3, None);
    let sd = stack.state_dict();
    assert_eq!(sd.len(), 3 * first.len());
    for (k, t) in &first {
        for i in 0..3 {
            let (_, copy) = sd
                .iter()
                .find(|(n, _)| *n == format!("layers.{i}.{k}"))
                .unwrap_or_else(|| panic!("layers.{i}.{k}"));
            assert_eq!(copy.to_vec::<f32>(), t.to_vec::<f32>(), "layers.{i}.{k}");
        }
    }
    // Copies, not shared tensors: stepping one layer leaves the others.
    stack.layers[1].linear1.weight.detach().add_scalar_(1.0);
    assert_ne!(
        stack.layers[1].linear1.weight.to_vec::<f32>(),
        stack.layers[0].linear1.weight.to_vec::<f32>()
    );
}

#[test]
fn the_transformer_initialises_every_matrix_xavier_uniform() {
    use tapir::nn::{Transformer, TransformerDecoder, TransformerDecoderLayer};
    manual_seed(5);
    let model = Transformer::new(8, 2, 1, 1, TransformerDecoderLayerOptions::default());
    let mut matrices = 0;
    for (name, p) in model.named_parameters() {
        if p.ndim() < 2 {
            continue;
        }
        matrices += 1;
        let (fan_out, fan_in) = (p.shape()[0] as f64, p.shape()[1] as f64);
        let bound = (6.0 / (fan_in + fan_out)).sqrt();
        let max = p.abs().max().item::<f32>() as f64;
        // Within the xavier bound, and using most of it (the default
        // initialisations of the layers are narrower or wider).
        assert!(
            max <= bound && max > 0.9 * bound,
            "{name}: {max} vs {bound}"
        );
    }
    // The encoder layer's attention (in and out projections) and two
    // linears; the decoder layer's two attentions and two linears.
    assert_eq!(matrices, (2 + 2) + (4 + 2));
    // The stacks print as PyTorch's, repeated layers folded.
    let single = TransformerDecoder::new(
        TransformerDecoderLayer::new(
            4,
            1,
            TransformerDecoderLayerOptions {
                dim_feedforward: 8,
                ..Default::default()
            },
        ),
        1,
        None,
    );
    let r = single.repr();
    assert!(r.starts_with("TransformerDecoder(\n  (layers): ModuleList(\n    (0): TransformerDecoderLayer(\n      (self_attn): MultiheadAttention("), "{r}");
    assert!(
        r.ends_with("      (dropout3): Dropout(p=0.1, inplace=False)\n    )\n  )\n)"),
        "{r}"
    );
    assert!(
        model
            .repr()
            .contains("(layers): ModuleList(\n      (0): TransformerEncoderLayer(")
    );
}
