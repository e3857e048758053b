//! `torch.nn.functional`'s names for what the 1-D pooling, convolution,
//! dropout, RMSNorm, PReLU, Softmin and ChannelShuffle modules compute
//! (the modules are checked against PyTorch in the layer goldens): each
//! function gives the module's bits, and its errors name the function.

use crate::common::panic_message;
use tapir::nn::{self, Forward};
use tapir::prelude::*;

/// A call that must panic, paired with its message.
type Misuse = Box<dyn Fn()>;

fn same(a: &Tensor, b: &Tensor) {
    assert_eq!(a.shape(), b.shape());
    assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>());
}

fn input(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &tapir::Generator::new(seed))
}

#[test]
fn functions_give_their_modules_bits() {
    let x = input(&[2, 4, 9], 1);
    let pool = nn::MaxPool1d {
        stride: 2,
        padding: 1,
        dilation: 2,
        ceil_mode: true,
        ..nn::MaxPool1d::new(3)
    };
    same(&nn::max_pool1d(&x, 3, 2, 1, 2, true), &pool.forward(&x));
    let avg = nn::AvgPool1d {
        padding: 1,
        count_include_pad: false,
        ..nn::AvgPool1d::new(3)
    };
    same(&nn::avg_pool1d(&x, 3, 3, 1, false, false), &avg.forward(&x));
    same(
        &nn::adaptive_avg_pool1d(&x, 4),
        &nn::AdaptiveAvgPool1d { output_size: 4 }.forward(&x),
    );
    same(
        &nn::adaptive_max_pool1d(&x.select(0, 0), 5),
        &nn::AdaptiveMaxPool1d { output_size: 5 }.forward(&x.select(0, 0)),
    );
    let opts = nn::Conv1dOptions {
        stride: 2,
        padding: 1,
        dilation: 1,
        groups: 2,
    };
    let conv = nn::Conv1d::new(4, 6, 3, opts, true);
    same(
        &nn::conv1d(&x, &conv.weight, conv.bias.as_ref(), opts),
        &conv.forward(&x),
    );
    let norm = nn::RMSNorm::new(&[9], None, true);
    same(
        &nn::rms_norm(&x, &[9], norm.weight.as_ref(), None),
        &norm.forward(&x),
    );
    let act = nn::PReLU::new(4, 0.1);
    same(&nn::prelu(&x, &act.weight), &act.forward(&x));
    same(&nn::softmin(&x, 1), &nn::Softmin { dim: 1 }.forward(&x));
    let shuffle = nn::ChannelShuffle { groups: 2 };
    same(&nn::channel_shuffle(&x, 2), &shuffle.forward(&x));
}

#[test]
fn dropout_functions_follow_the_training_flag() {
    let x = Tensor::ones(&[4, 6, 8]);
    same(&nn::dropout(&x, 0.5, false), &x);
    same(&nn::dropout2d(&x.unsqueeze(0), 0.5, false), &x.unsqueeze(0));
    let y = nn::dropout(&x, 0.25, true).to_vec::<f32>();
    assert!(y.iter().all(|&v| v == 0.0 || v == 1.0 / 0.75));
    assert!(y.contains(&0.0) && y.iter().any(|&v| v > 1.0));
    // Whole channels: each (sample, channel) row is all 0 or all 2.
    let c = nn::dropout1d(&x, 0.5, true);
    same(&c.amax_dim(2, false), &c.neg().amax_dim(2, false).neg());
    same(&nn::dropout(&x, 1.0, true), &Tensor::zeros(&[4, 6, 8]));
}

#[test]
fn function_errors_name_the_function() {
    let x = Tensor::zeros(&[2, 4, 9]);
    let cases: Vec<(Misuse, &str)> = vec![
        (
            Box::new(|| drop(nn::dropout(&Tensor::zeros(&[2]), 1.5, true))),
            "dropout: probability has to be between 0 and 1, but got 1.5",
        ),
        (
            Box::new(|| drop(nn::dropout2d(&Tensor::zeros(&[2, 3]), 0.5, true))),
            "dropout2d: expected a 4-D [N, C, H, W] input, got shape [2, 3]",
        ),
        (
            Box::new(|| {
                drop(nn::conv1d(
                    &Tensor::zeros(&[2, 3, 9]),
                    &Tensor::zeros(&[6, 2, 3]),
                    None,
                    Default::default(),
                ))
            }),
            "conv1d: expected input [N, 2, L] or [2, L], got [2, 3, 9]",
        ),
        (
            Box::new(|| drop(nn::rms_norm(&Tensor::zeros(&[2, 4]), &[3], None, None))),
            "rms_norm: input of shape [2, 4] does not end with normalized shape [3]",
        ),
        (
            Box::new(|| drop(nn::prelu(&Tensor::zeros(&[2, 4]), &Tensor::zeros(&[3])))),
            "prelu: expected 3 channels in dim 1, got input of shape [2, 4]",
        ),
        (
            Box::new(|| drop(nn::channel_shuffle(&Tensor::zeros(&[2, 5, 3]), 2))),
            "channel_shuffle: expects [N, C, *] with C divisible by groups 2, got [2, 5, 3]",
        ),
    ];
    for (f, want) in cases {
        assert_eq!(panic_message(f), want);
    }
    let msg = panic_message(|| drop(nn::max_pool1d(&x.flatten_all(), 2, 2, 0, 1, false)));
    assert!(msg.starts_with("max_pool1d: "), "{msg}");
}
