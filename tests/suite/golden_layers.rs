//! The layers `nn_goldens` builds to replay `scripts/gen_nn_goldens.py`:
//! one-forward layers by name, and the cases that run a module more than
//! once (running statistics, `update_bn`) or with more than one input
//! (`EmbeddingBag` with offsets, packed sequences, unpooling, sampling).

use super::nn_goldens::{flat, loaded};
use crate::common::dev;
use tapir::nn::*;
use tapir::optim::swa_utils::update_bn;
use tapir::prelude::*;

/// The cases [`run_stateful`] replays.
pub(super) const STATEFUL: [&str; 27] = [
    "batchnorm2d_cumulative",
    "instancenorm1d_running",
    "update_bn",
    "rnn_relu_2l_bi_batch_first",
    "rnn_tanh_h0",
    "rnncell_relu",
    "grucell",
    "lstmcell_nobias_unbatched",
    "embeddingbag_sum_offsets_weighted",
    "embeddingbag_mean_pad_last_offset",
    "embeddingbag_max_offsets_maxnorm",
    "gru_packed_bi_2l_unsorted",
    "lstm_packed_batch_first_sorted",
    "rnn_relu_pack_sequence",
    "maxunpool2d_odd_width",
    "maxunpool2d_overlapping",
    "maxunpool1d_ceil",
    "maxpool2d_ceil_indices",
    "grid_sample_bilinear_zeros",
    "grid_sample_bilinear_border_align",
    "grid_sample_bilinear_reflection",
    "grid_sample_nearest_reflection_align",
    "affine_grid_then_sample",
    "affine_grid_align_width1",
    "lstm_proj_2l_bi",
    "lstm_proj_packed_batch_first",
    "embeddingbag_mean_scale_grad_by_freq_offsets",
];

/// A one-forward layer as the script built it.
pub(super) fn build(name: &str) -> Box<dyn Forward> {
    let conv = Conv2dOptions::default();
    let c1 = |padding, stride, dilation, groups| Conv1dOptions {
        stride,
        padding,
        dilation,
        groups,
    };
    match name {
        "linear" => Box::new(Linear::new(5, 3, true)),
        "linear_nobias_3d" => Box::new(Linear::new(5, 3, false)),
        "layernorm" => Box::new(LayerNorm::new(&[6], 1e-5, true)),
        "layernorm_2d_shape" => Box::new(LayerNorm::new(&[3, 4], 1e-5, true)),
        "rmsnorm" => Box::new(RMSNorm::new(&[6], None, true)),
        "batchnorm1d_train" | "batchnorm1d_eval" => Box::new(BatchNorm::new_1d(3)),
        "batchnorm2d_train" => Box::new(BatchNorm::new_2d(2)),
        "embedding_pad" => Box::new(Embedding::new(7, 3, Some(2))),
        "conv2d" => Box::new(Conv2d::new(2, 4, (3, 3), conv.padding(1), true)),
        "conv1d" => Box::new(Conv1d::new(3, 4, 3, c1(1, 1, 1, 1), true)),
        "conv1d_stride_groups" => Box::new(Conv1d::new(4, 6, 3, c1(0, 2, 2, 2), false)),
        "conv1d_unbatched" => Box::new(Conv1d::new(2, 3, 2, c1(0, 1, 1, 1), true)),
        "conv2d_groups" => Box::new(Conv2d::new(
            4,
            6,
            (3, 3),
            conv.stride(2).padding(1).groups(2),
            true,
        )),
        "groupnorm" => Box::new(GroupNorm::new(2, 4, 1e-5, true)),
        "groupnorm_noaffine_3d" => Box::new(GroupNorm::new(3, 6, 1e-3, false)),
        "groupnorm_per_channel" => Box::new(GroupNorm::new(4, 4, 1e-5, true)),
        "instancenorm2d_affine" => Box::new(InstanceNorm::new_2d(3, 1e-5, true)),
        "instancenorm1d_unbatched" => Box::new(InstanceNorm::new_1d(4, 1e-5, false)),
        "convtranspose2d" => Box::new(ConvTranspose2d::new(3, 4, (3, 3), conv, (0, 0), true)),
        "convtranspose2d_stride_pad_outpad" => Box::new(ConvTranspose2d::new(
            4,
            6,
            (3, 2),
            conv.stride(2).padding(1),
            (1, 0),
            true,
        )),
        "convtranspose2d_groups_dilation" => Box::new(ConvTranspose2d::new(
            4,
            6,
            (3, 3),
            Conv2dOptions {
                stride: (1, 2),
                padding: (0, 2),
                dilation: (2, 2),
                groups: 2,
            },
            (0, 0),
            false,
        )),
        "convtranspose2d_outpad_dilation" => Box::new(ConvTranspose2d::new(
            2,
            3,
            (2, 2),
            conv.dilation(3),
            (2, 2),
            true,
        )),
        "maxpool2d" => Box::new(MaxPool2d::new(2)),
        "avgpool2d" => Box::new(AvgPool2d::new(2)),
        "adaptiveavgpool2d" => Box::new(AdaptiveAvgPool2d {
            output_size: (2, 3),
        }),
        "adaptiveavgpool2d_1" => Box::new(AdaptiveAvgPool2d {
            output_size: (1, 1),
        }),
        "flatten" => Box::new(Flatten::default()),
        "relu" => Box::new(ReLU),
        "gelu" => Box::new(GELU::default()),
        "gelu_tanh" => Box::new(GELU { tanh: true }),
        "silu" => Box::new(SiLU),
        "tanh" => Box::new(Tanh),
        "sigmoid" => Box::new(Sigmoid),
        "softmax" => Box::new(Softmax { dim: -1 }),
        "dropout_eval" => Box::new(Dropout::new(0.5)),
        "sequential" => Box::new(
            Sequential::new()
                .add(Linear::new(4, 8, true))
                .add(LayerNorm::new(&[8], 1e-5, true))
                .add(GELU::default())
                .add(Linear::new(8, 2, true)),
        ),
        "batchnorm1d_untracked_eval" => Box::new(
            BatchNorm::new_1d(3)
                .affine(false)
                .track_running_stats(false),
        ),
        "batchnorm3d_eps_momentum_nobias" => {
            Box::new(BatchNorm::new_3d(2).eps(1e-3).momentum(0.3).bias(false))
        }
        "instancenorm2d_running_momentum_none" => Box::new(
            InstanceNorm::new_2d(2, 1e-5, false)
                .track_running_stats(true)
                .momentum(None),
        ),
        "instancenorm1d_running_unbatched" => Box::new(
            InstanceNorm::new_1d(3, 1e-5, false)
                .track_running_stats(true)
                .momentum(0.5),
        ),
        "maxpool2d_ceil_pad" => Box::new(MaxPool2d {
            stride: (2, 2),
            padding: (1, 1),
            ceil_mode: true,
            ..MaxPool2d::new(3)
        }),
        "maxpool2d_ceil_dilation" => Box::new(MaxPool2d {
            kernel: (2, 3),
            stride: (2, 2),
            padding: (1, 0),
            dilation: (2, 1),
            ceil_mode: true,
        }),
        "maxpool2d_unbatched" => Box::new(MaxPool2d::new(2)),
        "avgpool2d_ceil_exclude_pad" | "avgpool2d_ceil_include_pad" => Box::new(AvgPool2d {
            stride: (2, 2),
            padding: (1, 1),
            ceil_mode: true,
            count_include_pad: name.ends_with("include_pad"),
            ..AvgPool2d::new(3)
        }),
        "avgpool2d_divisor" => Box::new(AvgPool2d {
            kernel: (2, 3),
            stride: (1, 2),
            padding: (1, 1),
            divisor_override: Some(4),
            ..AvgPool2d::new(1)
        }),
        "maxpool1d_ceil_dilation" => Box::new(MaxPool1d {
            stride: 2,
            padding: 1,
            dilation: 2,
            ceil_mode: true,
            ..MaxPool1d::new(3)
        }),
        "avgpool1d_unbatched_ceil" => Box::new(AvgPool1d {
            stride: 3,
            padding: 2,
            ceil_mode: true,
            count_include_pad: false,
            ..AvgPool1d::new(4)
        }),
        "adaptiveavgpool1d" => Box::new(AdaptiveAvgPool1d { output_size: 4 }),
        "adaptivemaxpool2d" => Box::new(AdaptiveMaxPool2d {
            output_size: (2, 3),
        }),
        "adaptivemaxpool2d_even" => Box::new(AdaptiveMaxPool2d {
            output_size: (2, 2),
        }),
        "adaptivemaxpool1d_unbatched" => Box::new(AdaptiveMaxPool1d { output_size: 3 }),
        "pad_reflect_2d" => Box::new(ReflectionPad2d {
            padding: [1, 2, 2, 0],
        }),
        "pad_replicate_1d" => Box::new(ReplicationPad1d { padding: [3, 1] }),
        "pad_circular_2d" => Box::new(CircularPad2d {
            padding: [1, 2, 0, 3],
        }),
        "pad_zero_2d_unbatched" => Box::new(ZeroPad2d {
            padding: [1, 0, 2, 1],
        }),
        "pad_constant_1d" => Box::new(ConstantPad {
            padding: vec![2, 1],
            value: 3.5,
        }),
        "conv2d_reflect" => Box::new(
            Conv2d::new(2, 3, (3, 3), Conv2dOptions::default().padding(1), true)
                .padding_mode(PadMode::Reflect),
        ),
        "conv2d_circular_stride" => {
            let opts = Conv2dOptions {
                stride: (2, 2),
                padding: (2, 1),
                ..Default::default()
            };
            Box::new(Conv2d::new(2, 4, (3, 2), opts, true).padding_mode(PadMode::Circular))
        }
        "conv1d_replicate" => {
            let opts = Conv1dOptions {
                padding: 2,
                ..Default::default()
            };
            Box::new(Conv1d::new(3, 2, 3, opts, true).padding_mode(PadMode::Replicate))
        }
        "prelu_channels" => Box::new(PReLU::new(3, 0.1)),
        "prelu_single_1d" => Box::new(PReLU::new(1, 0.25)),
        "logsoftmax" => Box::new(LogSoftmax { dim: 1 }),
        "softmin" => Box::new(Softmin { dim: -1 }),
        "softmax2d_unbatched" => Box::new(Softmax2d),
        "convtranspose1d_stride_pad_outpad_groups" => {
            let opts = Conv1dOptions {
                stride: 2,
                padding: 1,
                dilation: 2,
                groups: 2,
            };
            Box::new(ConvTranspose1d::new(4, 6, 3, opts, 1, false))
        }
        "convtranspose1d_unbatched" => Box::new(ConvTranspose1d::new(
            3,
            2,
            2,
            Conv1dOptions::default(),
            0,
            true,
        )),
        "embeddingbag_max_2d_pad" => Box::new(EmbeddingBag::new(10, 3, BagMode::Max, Some(0))),
        "embedding_maxnorm" => Box::new(Embedding::new(6, 4, None).max_norm(1.0)),
        "lppool2d_p2_stride" => Box::new(LPPool2d {
            stride: Some((2, 2)),
            ..LPPool2d::new(2.0, 3)
        }),
        "lppool2d_ceil" => Box::new(LPPool2d {
            norm_type: 1.5,
            kernel: (2, 3),
            stride: Some((2, 2)),
            ceil_mode: true,
        }),
        "lppool1d_p3" => Box::new(LPPool1d::new(3.0, 2)),
        "lppool1d_ceil_unbatched" => Box::new(LPPool1d {
            stride: Some(2),
            ceil_mode: true,
            ..LPPool1d::new(2.0, 3)
        }),
        "unfold_module_unbatched" => Box::new(Unfold {
            kernel: (2, 3),
            opts: Conv2dOptions {
                dilation: (1, 2),
                padding: (1, 1),
                stride: (2, 1),
                groups: 1,
            },
        }),
        "fold_module" => Box::new(Fold {
            output_size: (5, 6),
            kernel: (2, 3),
            opts: Conv2dOptions {
                dilation: (2, 1),
                padding: (1, 1),
                stride: (1, 2),
                groups: 1,
            },
        }),
        "embedding_scale_grad_by_freq_pad" => {
            Box::new(Embedding::new(6, 3, Some(1)).scale_grad_by_freq(true))
        }
        "embeddingbag_sum_scale_grad_by_freq_2d" => {
            Box::new(EmbeddingBag::new(7, 3, BagMode::Sum, None).scale_grad_by_freq(true))
        }
        "local_response_norm_size3" => Box::new(LocalResponseNorm::new(3)),
        "local_response_norm_size4_3d" => Box::new(LocalResponseNorm {
            alpha: 1e-2,
            beta: 0.5,
            k: 2.0,
            ..LocalResponseNorm::new(4)
        }),
        "channel_shuffle" => Box::new(ChannelShuffle { groups: 3 }),
        "rrelu_eval" => Box::new(RReLU::new(0.1, 0.3)),
        other => super::volumes::build(other)
            .or_else(|| super::parametrize::build(other))
            .unwrap_or_else(|| panic!("no layer {other}")),
    }
}

/// Runs a case that calls its module several times, as the script did:
/// the output, and the module (for gradients and buffers).
pub(super) fn run_stateful(
    name: &str,
    inputs: &[Tensor],
    sd: &StateDict,
    dtype: DType,
) -> Result<(Tensor, Box<dyn Module>), String> {
    let x = &inputs[0];
    Ok(match name {
        "batchnorm2d_cumulative" => {
            let m = loaded(Box::new(BatchNorm::new_2d(2).momentum(None)), sd, dtype)?;
            let out = &(&m.forward(x) + &m.forward(&inputs[1])) + &m.forward(&inputs[2]);
            (out, m)
        }
        "instancenorm1d_running" => {
            let m = InstanceNorm::new_1d(3, 1e-5, true).track_running_stats(true);
            let m = loaded(Box::new(m), sd, dtype)?;
            let trained = m.forward(x);
            m.eval();
            (&m.forward(&inputs[1]) + &trained.mean(), m)
        }
        "update_bn" => {
            let m = Sequential::new()
                .add(Linear::new(3, 4, true))
                .add(BatchNorm::new_1d(4));
            let m = loaded(Box::new(m), sd, dtype)?;
            m.forward(x);
            let batches: Vec<Tensor> = (0..3)
                .map(|i| dev(inputs[1].select(0, i).to_dtype(dtype)))
                .collect();
            update_bn(&batches, &*m);
            m.forward(x);
            m.eval();
            (m.forward(x), m)
        }
        "rnn_relu_2l_bi_batch_first" | "rnn_tanh_h0" => {
            let opts = match name {
                "rnn_tanh_h0" => RnnOptions::default(),
                _ => RnnOptions {
                    num_layers: 2,
                    bidirectional: true,
                    batch_first: true,
                    ..Default::default()
                },
            };
            let rnn = RNN::new(3, 4, opts);
            let rnn = if name == "rnn_tanh_h0" {
                rnn
            } else {
                rnn.relu()
            };
            let m = loaded(Box::new(rnn), sd, dtype)?;
            let (out, h) = m.forward(x, inputs.get(1));
            (flat(&[&out, &h]), m)
        }
        "rnncell_relu" => {
            let m = loaded(Box::new(RNNCell::new(3, 4, true).relu()), sd, dtype)?;
            let h = m.forward(x, Some(&inputs[1]));
            (m.forward(&(x * 0.5), Some(&h)), m)
        }
        "grucell" => {
            let m = loaded(Box::new(GRUCell::new(3, 4, true)), sd, dtype)?;
            let h = m.forward(x, None);
            (m.forward(x, Some(&h)), m)
        }
        "lstmcell_nobias_unbatched" => {
            let m = loaded(Box::new(LSTMCell::new(3, 4, false)), sd, dtype)?;
            let (h, c) = m.forward(x, Some((&inputs[1], &inputs[2])));
            let (h, c) = m.forward(&(x * 2.0), Some((&h, &c)));
            (flat(&[&h, &c]), m)
        }
        "embeddingbag_sum_offsets_weighted" => {
            let m = loaded(
                Box::new(EmbeddingBag::new(10, 3, BagMode::Sum, None)),
                sd,
                dtype,
            )?;
            (m.forward_bags(x, Some(&inputs[1]), Some(&inputs[2])), m)
        }
        "embeddingbag_mean_pad_last_offset" => {
            let bag = EmbeddingBag::new(10, 3, BagMode::Mean, Some(2)).include_last_offset(true);
            let m = loaded(Box::new(bag), sd, dtype)?;
            (m.forward_bags(x, Some(&inputs[1]), None), m)
        }
        "embeddingbag_max_offsets_maxnorm" => {
            let bag = EmbeddingBag::new(8, 3, BagMode::Max, None)
                .max_norm(0.5)
                .norm_type(1.0);
            let m = loaded(Box::new(bag), sd, dtype)?;
            (m.forward_bags(x, Some(&inputs[1]), None), m)
        }
        "gru_packed_bi_2l_unsorted" => {
            let opts = RnnOptions {
                num_layers: 2,
                bidirectional: true,
                ..Default::default()
            };
            let m = loaded(Box::new(GRU::new(3, 4, opts)), sd, dtype)?;
            let packed = pack_padded_sequence(x, &[2, 5, 3], false, false);
            let (out, h) = m.forward_packed(&packed, Some(&inputs[1]));
            let (padded, _) = pad_packed_sequence(&out, false, 0.0, None);
            (flat(&[&padded, &h]), m)
        }
        "lstm_packed_batch_first_sorted" => {
            let opts = RnnOptions {
                batch_first: true,
                ..Default::default()
            };
            let m = loaded(Box::new(LSTM::new(3, 4, opts)), sd, dtype)?;
            let packed = pack_padded_sequence(x, &[4, 2, 1], true, true);
            let (out, (h, c)) = m.forward_packed(&packed, None);
            let (padded, _) = pad_packed_sequence(&out, true, 0.0, None);
            (flat(&[&padded, &h, &c]), m)
        }
        "rnn_relu_pack_sequence" => {
            let m = loaded(
                Box::new(RNN::new(2, 3, RnnOptions::default()).relu()),
                sd,
                dtype,
            )?;
            let (out, h) = m.forward_packed(&pack_sequence(inputs, false), None);
            let (padded, _) = pad_packed_sequence(&out, true, 0.5, None);
            (flat(&[&padded, &h]), m)
        }
        "maxunpool2d_odd_width" | "maxunpool2d_overlapping" => {
            let (pool, unpool, size) = match name {
                "maxunpool2d_odd_width" => (MaxPool2d::new(2), MaxUnpool2d::new(2), Some((4, 5))),
                _ => (
                    MaxPool2d {
                        stride: (1, 1),
                        ..MaxPool2d::new(3)
                    },
                    MaxUnpool2d {
                        stride: (1, 1),
                        ..MaxUnpool2d::new(3)
                    },
                    None,
                ),
            };
            let (v, i) = pool.forward_with_indices(x);
            (
                unpool.forward(&v, &i, size),
                loaded(Box::new(unpool), sd, dtype)?,
            )
        }
        "maxunpool1d_ceil" => {
            let pool = MaxPool1d {
                stride: 2,
                ceil_mode: true,
                ..MaxPool1d::new(3)
            };
            let unpool = MaxUnpool1d {
                stride: 2,
                ..MaxUnpool1d::new(3)
            };
            let (v, i) = pool.forward_with_indices(x);
            (
                unpool.forward(&v, &i, Some(8)),
                loaded(Box::new(unpool), sd, dtype)?,
            )
        }
        "maxpool2d_ceil_indices" => {
            let pool = MaxPool2d {
                ceil_mode: true,
                ..MaxPool2d::new(2)
            };
            let (v, i) = pool.forward_with_indices(x);
            (
                flat(&[&v, &i.to_dtype(dtype)]),
                loaded(Box::new(pool), sd, dtype)?,
            )
        }
        "grid_sample_bilinear_zeros"
        | "grid_sample_bilinear_border_align"
        | "grid_sample_bilinear_reflection"
        | "grid_sample_nearest_reflection_align" => {
            let (mode, pad, align) = match name {
                "grid_sample_bilinear_zeros" => (GridMode::Bilinear, GridPadding::Zeros, false),
                "grid_sample_bilinear_border_align" => {
                    (GridMode::Bilinear, GridPadding::Border, true)
                }
                "grid_sample_bilinear_reflection" => {
                    (GridMode::Bilinear, GridPadding::Reflection, false)
                }
                _ => (GridMode::Nearest, GridPadding::Reflection, true),
            };
            let out = grid_sample(x, &inputs[1], mode, pad, align);
            (out, loaded(Box::new(Identity), sd, dtype)?)
        }
        "affine_grid_then_sample" => {
            let grid = affine_grid(&inputs[1], [2, 3, 5, 4], false);
            let out = grid_sample(x, &grid, GridMode::Bilinear, GridPadding::Zeros, false);
            (out, loaded(Box::new(Identity), sd, dtype)?)
        }
        "affine_grid_align_width1" => (
            affine_grid(x, [2, 1, 3, 1], true),
            loaded(Box::new(Identity), sd, dtype)?,
        ),
        "lstm_proj_2l_bi" => {
            let opts = RnnOptions {
                num_layers: 2,
                bidirectional: true,
                proj_size: 2,
                ..Default::default()
            };
            let m = loaded(Box::new(LSTM::new(3, 5, opts)), sd, dtype)?;
            let (out, (h, c)) = m.forward(x, Some((&inputs[1], &inputs[2])));
            (flat(&[&out, &h, &c]), m)
        }
        "lstm_proj_packed_batch_first" => {
            let opts = RnnOptions {
                batch_first: true,
                proj_size: 3,
                ..Default::default()
            };
            let m = loaded(Box::new(LSTM::new(3, 4, opts)), sd, dtype)?;
            let packed = pack_padded_sequence(x, &[5, 2, 4], true, false);
            let (out, (h, c)) = m.forward_packed(&packed, None);
            let (padded, _) = pad_packed_sequence(&out, true, 0.0, None);
            (flat(&[&padded, &h, &c]), m)
        }
        "embeddingbag_mean_scale_grad_by_freq_offsets" => {
            let bag = EmbeddingBag::new(7, 3, BagMode::Mean, None).scale_grad_by_freq(true);
            let m = loaded(Box::new(bag), sd, dtype)?;
            (m.forward_bags(x, Some(&inputs[1]), None), m)
        }
        other => panic!("no stateful layer {other}"),
    })
}
