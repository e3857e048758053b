//! Replays `scripts/gen_nn_goldens.py`: every layer's forward and backward
//! from PyTorch's weights (train and eval), every loss and reduction, and
//! clipping (the optimizers are `optim_goldens`, the schedulers
//! `sched_goldens`).

use super::golden_layers::{STATEFUL, build, run_stateful};
use crate::common;
use common::*;
use safetensors::SafeTensors;
use serde_json::Value;
use tapir::nn::*;
use tapir::optim::*;
use tapir::prelude::*;

/// Loads PyTorch's state dict into `m` (in `dtype`, on the test device).
pub(super) fn loaded<M: Module + ?Sized>(
    mut m: Box<M>,
    sd: &StateDict,
    dtype: DType,
) -> Result<Box<M>, String> {
    m.to_dtype(dtype);
    m.to_device(test_device()).unwrap();
    m.load_state_dict(sd, true).map_err(|e| e.to_string())?;
    Ok(m)
}

/// Every output of a multi-output layer as one vector, as the script's `flat`.
pub(super) fn flat(ts: &[&Tensor]) -> Tensor {
    let flat: Vec<Tensor> = ts.iter().map(|t| t.reshape(&[-1])).collect();
    Tensor::cat(&flat.iter().collect::<Vec<_>>(), 0)
}

/// Builds the case's layer from PyTorch's state dict and runs it as the
/// script did: the output, and the module (for gradients and buffers).
fn run_layer(
    name: &str,
    inputs: &[Tensor],
    sd: &StateDict,
    dtype: DType,
    train: bool,
) -> Result<(Tensor, Box<dyn Module>), String> {
    let x = &inputs[0];
    let rnn = |layers, bidirectional, batch_first, bias| RnnOptions {
        num_layers: layers,
        bidirectional,
        batch_first,
        bias,
        ..Default::default()
    };
    let causal = || dev(Tensor::ones(&[5, 5]).triu(1).gt_scalar(0.0));
    let pad = |last: &[bool]| {
        let mut v = vec![false; 5];
        v.extend_from_slice(last);
        dev(Tensor::from_vec(v, &[2, 5]))
    };
    Ok(match name {
        "mha_self" | "mha_causal_pad" | "mha_seq_first" => {
            let seq_first = name == "mha_seq_first";
            let m = loaded(
                Box::new(MultiheadAttention::new(
                    8,
                    if seq_first { 4 } else { 2 },
                    !seq_first,
                )),
                sd,
                dtype,
            )?;
            let out = match name {
                "mha_self" => m.forward(x, x, x, None, None, false, false).0,
                "mha_causal_pad" => {
                    let pad = pad(&[false, false, false, true, true]);
                    m.forward(x, x, x, Some(&pad), Some(&causal()), false, false)
                        .0
                }
                _ => {
                    m.forward(x, &inputs[1], &inputs[1], None, None, false, false)
                        .0
                }
            };
            (out, m)
        }
        "gru" | "gru_2l_bi_batch_first" => {
            let two = name != "gru";
            let m = loaded(
                Box::new(GRU::new(3, 4, rnn(1 + two as usize, two, two, true))),
                sd,
                dtype,
            )?;
            let (out, h) = m.forward(x, inputs.get(1));
            (flat(&[&out, &h]), m)
        }
        "lstm" | "lstm_2l_nobias_state" | "lstm_bi_unbatched" => {
            let opts = match name {
                "lstm" => rnn(1, false, true, true),
                "lstm_2l_nobias_state" => rnn(2, false, false, false),
                _ => rnn(1, true, false, true),
            };
            let m = loaded(Box::new(LSTM::new(3, 4, opts)), sd, dtype)?;
            let state = (inputs.len() == 3).then(|| (&inputs[1], &inputs[2]));
            let (out, (h, c)) = m.forward(x, state);
            (flat(&[&out, &h, &c]), m)
        }
        "transformer_post" | "transformer_pre_gelu_masks" => {
            let post = name == "transformer_post";
            let opts = TransformerEncoderLayerOptions {
                dim_feedforward: 16,
                dropout: 0.0,
                batch_first: post,
                norm_first: !post,
                activation: if post {
                    Activation::Relu
                } else {
                    Activation::Gelu
                },
                ..Default::default()
            };
            let m = loaded(
                Box::new(TransformerEncoderLayer::new(8, 2, opts)),
                sd,
                dtype,
            )?;
            let out = if post {
                m.forward(x)
            } else {
                let pad = pad(&[false, false, false, false, true]);
                m.forward_with(x, Some(&causal()), Some(&pad), false)
            };
            (out, m)
        }
        "sdpa_causal"
        | "sdpa_bool_mask_scale"
        | "sdpa_float_mask"
        | "sdpa_tiles_causal"
        | "sdpa_tiles" => {
            let (mask, causal, scale) = match name {
                "sdpa_causal" => (None, true, None),
                "sdpa_tiles_causal" => (None, true, Some(0.5)),
                "sdpa_tiles" => (None, false, None),
                "sdpa_bool_mask_scale" => (Some(&inputs[3]), false, Some(0.3)),
                _ => (Some(&inputs[3]), false, None),
            };
            let out =
                scaled_dot_product_attention(x, &inputs[1], &inputs[2], mask, 0.0, causal, scale);
            (out, loaded(Box::new(Identity), sd, dtype)?)
        }
        "sdpa_gqa_causal" | "sdpa_gqa_mask_unbatched" => {
            let (mask, causal) = match name {
                "sdpa_gqa_causal" => (None, true),
                _ => (Some(&inputs[3]), false),
            };
            let out = scaled_dot_product_attention_gqa(
                x, &inputs[1], &inputs[2], mask, 0.0, causal, None,
            );
            (out, loaded(Box::new(Identity), sd, dtype)?)
        }
        "transformer_decoder_post" | "transformer_decoder_pre_gelu_masks" => {
            let post = name == "transformer_decoder_post";
            let opts = TransformerDecoderLayerOptions {
                dim_feedforward: if post { 16 } else { 12 },
                dropout: 0.0,
                batch_first: post,
                norm_first: !post,
                activation: if post {
                    Activation::Relu
                } else {
                    Activation::Gelu
                },
                ..Default::default()
            };
            let heads = if post { 2 } else { 4 };
            let m = loaded(
                Box::new(TransformerDecoderLayer::new(8, heads, opts)),
                sd,
                dtype,
            )?;
            let out = if post {
                m.forward(x, &inputs[1])
            } else {
                let memory_pad = dev(Tensor::from_vec(
                    vec![
                        false, false, false, false, false, false, false, false, true, false, true,
                        true,
                    ],
                    &[2, 6],
                ));
                let masks = DecoderMasks {
                    tgt_mask: Some(&causal()),
                    tgt_key_padding_mask: Some(&pad(&[false, false, false, false, true])),
                    memory_key_padding_mask: Some(&memory_pad),
                    ..Default::default()
                };
                m.forward_with(x, &inputs[1], masks)
            };
            (out, m)
        }
        "transformer_encoder_stack" | "transformer_decoder_stack" | "transformer_full" => {
            let opts =
                |ff: usize, batch_first: bool, norm_first: bool| TransformerEncoderLayerOptions {
                    dim_feedforward: ff,
                    dropout: 0.0,
                    batch_first,
                    norm_first,
                    ..Default::default()
                };
            let causal = causal();
            let pad5 = pad(&[false, false, false, true, true]);
            let pad6 = dev(Tensor::from_vec(
                [[false; 6], [false, false, false, false, true, true]].concat(),
                &[2, 6],
            ));
            match name {
                "transformer_encoder_stack" => {
                    let layer = TransformerEncoderLayer::new(8, 2, opts(16, true, false));
                    let norm = Some(LayerNorm::new(&[8], 1e-5, true));
                    let m = loaded(Box::new(TransformerEncoder::new(layer, 2, norm)), sd, dtype)?;
                    (m.forward_with(x, Some(&causal), Some(&pad5), false), m)
                }
                "transformer_decoder_stack" => {
                    let layer = TransformerDecoderLayer::new(8, 2, opts(12, false, true));
                    let m = loaded(Box::new(TransformerDecoder::new(layer, 2, None)), sd, dtype)?;
                    let masks = DecoderMasks {
                        tgt_mask: Some(&causal),
                        tgt_key_padding_mask: Some(&pad5),
                        ..Default::default()
                    };
                    (m.forward_with(x, &inputs[1], masks), m)
                }
                _ => {
                    let m = loaded(
                        Box::new(Transformer::new(8, 2, 2, 1, opts(16, true, false))),
                        sd,
                        dtype,
                    )?;
                    let future =
                        dev(Transformer::generate_square_subsequent_mask(5).to_dtype(dtype));
                    let masks = TransformerMasks {
                        src_key_padding_mask: Some(&pad6),
                        decoder: DecoderMasks {
                            tgt_mask: Some(&future),
                            memory_key_padding_mask: Some(&pad6),
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    (m.forward_with(x, &inputs[1], masks), m)
                }
            }
        }
        "bilinear" | "bilinear_nobias" => {
            let m = match name {
                "bilinear" => Bilinear::new(3, 4, 5, true),
                _ => Bilinear::new(2, 3, 4, false),
            };
            let m = loaded(Box::new(m), sd, dtype)?;
            (m.forward(x, &inputs[1]), m)
        }
        "fold" => {
            let opts = Conv2dOptions {
                stride: (1, 2),
                padding: (1, 1),
                dilation: (2, 1),
                groups: 1,
            };
            let out = x.fold2d((5, 6), (2, 3), opts);
            (out, loaded(Box::new(Identity), sd, dtype)?)
        }
        _ if STATEFUL.contains(&name) => run_stateful(name, inputs, sd, dtype)?,
        _ if super::volumes::STATEFUL.contains(&name) => {
            super::volumes::run_stateful(name, inputs, sd, dtype)?
        }
        _ => {
            let m = loaded(build(name), sd, dtype)?;
            if !train {
                m.eval();
            }
            (m.forward(x), m)
        }
    })
}

fn check_layer(st: &SafeTensors, c: &Value, dtype: DType, tol: f64) -> Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let sd: Vec<(String, Tensor)> = st
        .names()
        .into_iter()
        .filter_map(|k| {
            k.strip_prefix(&format!("{name}.sd."))
                .map(|n| (n.to_string(), load(st, k)))
        })
        .map(|(n, t)| {
            (
                n,
                if t.dtype().is_float() {
                    t.to_dtype(dtype)
                } else {
                    t
                },
            )
        })
        .collect();
    let n_in = c["n_in"].as_u64().unwrap() as usize;
    let inputs: Vec<Tensor> = (0..n_in)
        .map(|i| {
            let t = load(st, &format!("{name}.in{i}"));
            if t.dtype().is_float() {
                t.to_dtype(dtype).requires_grad_(true)
            } else {
                t
            }
        })
        .collect();
    let (out, module) = run_layer(name, &inputs, &sd, dtype, c["train"].as_bool().unwrap())?;
    close(
        &format!("{name} ({dtype}) out"),
        &out,
        &load(st, &format!("{name}.out")),
        tol,
        tol,
    )?;
    (&out * &loss_weights(out.shape(), dtype)).sum().backward();
    for (i, x) in inputs.iter().enumerate() {
        if x.dtype().is_float() {
            close(
                &format!("{name} grad_in{i}"),
                // An input no gradient reaches (a nearest sample's grid) is
                // PyTorch's zeros.
                &x.grad().unwrap_or_else(|| Tensor::zeros_like(x)),
                &load(st, &format!("{name}.grad_in{i}")),
                tol,
                tol,
            )?;
        }
    }
    for (n, p) in module.named_parameters() {
        let g = p.grad().unwrap_or_else(|| Tensor::zeros_like(&p));
        close(
            &format!("{name} ({dtype}) grad.{n}"),
            &g,
            &load(st, &format!("{name}.grad.{n}")),
            tol,
            tol,
        )?;
    }
    for (n, b) in module.named_buffers() {
        close(
            &format!("{name} ({dtype}) buffer {n}"),
            &b,
            &load(st, &format!("{name}.after.{n}")),
            tol,
            tol,
        )?;
    }
    let want: Vec<&str> = c["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let got: Vec<String> = module
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    if got != want {
        return Err(format!(
            "{name}: parameter names {got:?}, PyTorch has {want:?}"
        ));
    }
    Ok(())
}

#[test]
fn layers_match_pytorch() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let cases = m["layers"].as_array().unwrap();
    assert!(cases.len() >= 60);
    run_all(cases.iter(), |c| check_layer(&st, c, DType::F64, 1e-9));
    run_all(cases.iter(), |c| check_layer(&st, c, DType::F32, 2e-4));
}

fn run_loss(name: &str, x: &[Tensor], r: Reduction) -> Tensor {
    let ce = |o: CrossEntropyOptions| {
        cross_entropy_with(&x[0], &x[1], &CrossEntropyOptions { reduction: r, ..o })
    };
    let d = CrossEntropyOptions::default;
    match name {
        "ce" | "ce_probs" | "ce_3d" => ce(d()),
        "ce_smooth" | "ce_probs_smooth" => ce(CrossEntropyOptions {
            label_smoothing: 0.1,
            ..d()
        }),
        "ce_weight_smooth" => ce(CrossEntropyOptions {
            label_smoothing: 0.2,
            weight: Some(x[2].clone()),
            ..d()
        }),
        "ce_ignore" => ce(CrossEntropyOptions {
            ignore_index: 2,
            ..d()
        }),
        "nll" => nll_loss_with(
            &x[0],
            &x[1],
            &CrossEntropyOptions {
                reduction: r,
                ..d()
            },
        ),
        "mse" => mse_loss(&x[0], &x[1], r),
        "l1" => l1_loss(&x[0], &x[1], r),
        "smooth_l1" => smooth_l1_loss(&x[0], &x[1], r, 0.5),
        "huber" => huber_loss(&x[0], &x[1], r, 0.7),
        "bce_logits" => binary_cross_entropy_with_logits(&x[0], &x[1], None, None, r),
        "bce_logits_posw" => binary_cross_entropy_with_logits(&x[0], &x[1], None, Some(&x[2]), r),
        "soft_margin" => soft_margin_loss(&x[0], &x[1], r),
        "margin_ranking" => margin_ranking_loss(&x[0], &x[1], &x[2], 0.3, r),
        "hinge_embedding" => hinge_embedding_loss(&x[0], &x[1], 1.2, r),
        "cosine_embedding" => cosine_embedding_loss(&x[0], &x[1], &x[2], 0.2, r),
        "triplet_margin" | "triplet_margin_p1_swap" => {
            let o = match name {
                "triplet_margin" => TripletMarginOptions {
                    margin: 1.5,
                    ..Default::default()
                },
                _ => TripletMarginOptions {
                    p: 1.0,
                    swap: true,
                    ..Default::default()
                },
            };
            triplet_margin_loss(&x[0], &x[1], &x[2], o, r)
        }
        "triplet_distance_default" => {
            triplet_margin_with_distance_loss(&x[0], &x[1], &x[2], None, 1.0, false, r)
        }
        "triplet_distance_cosine_swap" => {
            let cosine = |a: &Tensor, b: &Tensor| &(&cosine_similarity(a, b, 1, 1e-8) * -1.0) + 1.0;
            triplet_margin_with_distance_loss(&x[0], &x[1], &x[2], Some(&cosine), 0.5, true, r)
        }
        "poisson_nll" => poisson_nll_loss(&x[0], &x[1], true, false, 1e-8, r),
        "gaussian_nll" => gaussian_nll_loss(&x[0], &x[1], &x[2], false, 1e-6, r),
        "gaussian_nll_row_var_full" => gaussian_nll_loss(&x[0], &x[1], &x[2], true, 0.05, r),
        "poisson_nll_rate_full" => poisson_nll_loss(&x[0], &x[1], false, true, 1e-8, r),
        "ctc_padded" | "ctc_concat_blank_last" | "ctc_zero_infinity_empty" => {
            let lengths = |t: &Tensor| -> Vec<usize> {
                t.to_vec::<i64>().iter().map(|&l| l as usize).collect()
            };
            let o = CtcOptions {
                blank: if name == "ctc_concat_blank_last" {
                    4
                } else {
                    0
                },
                reduction: r,
                zero_infinity: name == "ctc_zero_infinity_empty",
            };
            ctc_loss(
                &x[0].log_softmax(2),
                &x[1],
                &lengths(&x[2]),
                &lengths(&x[3]),
                &o,
            )
        }
        "multi_margin" => multi_margin_loss(&x[0], &x[1], 1, 1.0, None, r),
        "multi_margin_p2_weight" => multi_margin_loss(&x[0], &x[1], 2, 0.7, Some(&x[2]), r),
        "multilabel_margin" => multilabel_margin_loss(&x[0], &x[1], r),
        "multilabel_soft_margin_weight" => {
            multilabel_soft_margin_loss(&x[0], &x[1], Some(&x[2]), r)
        }
        other => panic!("no loss {other}"),
    }
}

#[test]
fn losses_match_pytorch_for_every_reduction() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for (dtype, tol) in [(DType::F64, 1e-9), (DType::F32, 2e-4)] {
        run_all(m["losses"].as_array().unwrap().iter(), |c| {
            let name = c["name"].as_str().unwrap();
            let grad_idx: Vec<u64> = c["grad_idx"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            for (r, rn) in [
                (Reduction::None, "none"),
                (Reduction::Mean, "mean"),
                (Reduction::Sum, "sum"),
            ] {
                let x: Vec<Tensor> = (0..c["n_in"].as_u64().unwrap())
                    .map(|i| {
                        let t = load(&st, &format!("{name}.in{i}"));
                        if !t.dtype().is_float() {
                            t
                        } else if grad_idx.contains(&i) {
                            t.to_dtype(dtype).requires_grad_(true)
                        } else {
                            t.to_dtype(dtype)
                        }
                    })
                    .collect();
                let out = run_loss(name, &x, r);
                close(
                    &format!("{name}/{rn} ({dtype})"),
                    &out,
                    &load(&st, &format!("{name}.{rn}.out")),
                    tol,
                    tol,
                )?;
                if out.ndim() == 0 {
                    out.backward()
                } else {
                    (&out * &loss_weights(out.shape(), dtype)).sum().backward()
                }
                for &i in &grad_idx {
                    close(
                        &format!("{name}/{rn} grad{i} ({dtype})"),
                        &x[i as usize].grad().unwrap(),
                        &load(&st, &format!("{name}.{rn}.grad{i}")),
                        tol,
                        tol,
                    )?;
                }
            }
            Ok(())
        });
    }
}

#[test]
fn clipping_matches_pytorch() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    run_all(m["clip"].as_array().unwrap().iter(), |c| {
        let name = c["name"].as_str().unwrap();
        let ps: Vec<Tensor> = (0..2)
            .map(|j| load(&st, &format!("optim.p0.{j}")).requires_grad_(true))
            .collect();
        for (j, p) in ps.iter().enumerate() {
            p.set_grad(Some(load(&st, &format!("optim.grad0.{j}"))));
        }
        let total = match name {
            "norm2" => clip_grad_norm_(&ps, 1.0).item::<f64>(),
            "norm_inf" => clip_grad_norm_with(&ps, 0.5, f64::INFINITY, false)
                .unwrap()
                .item::<f64>(),
            "norm1" => clip_grad_norm_with(&ps, 2.0, 1.0, false)
                .unwrap()
                .item::<f64>(),
            "norm2_noop" => clip_grad_norm_(&ps, 100.0).item::<f64>(),
            _ => {
                clip_grad_value_(&ps, 0.3);
                0.0
            }
        };
        close(
            &format!("{name} total"),
            &Tensor::scalar(total),
            &load(&st, &format!("clip.{name}.total")),
            1e-12,
            1e-10,
        )?;
        for (j, p) in ps.iter().enumerate() {
            close(
                &format!("{name} grad{j}"),
                &p.grad().unwrap(),
                &load(&st, &format!("clip.{name}.grad{j}")),
                1e-12,
                1e-10,
            )?;
        }
        Ok(())
    });
    let p = Tensor::ones(&[2]).requires_grad_(true);
    p.set_grad(Some(Tensor::from_vec(vec![f32::NAN, 1.0], &[2])));
    assert!(clip_grad_norm_with(&[p], 1.0, 2.0, true).is_err());
}

#[test]
fn sequence_layers_drop_out_only_in_training() {
    let opts = TransformerEncoderLayerOptions {
        dim_feedforward: 16,
        ..Default::default()
    };
    let enc = TransformerEncoderLayer::new(8, 2, opts);
    let gru = GRU::new(
        8,
        8,
        RnnOptions {
            num_layers: 2,
            dropout: 0.5,
            ..Default::default()
        },
    );
    let x = Tensor::randn(&[6, 3, 8]);
    let runs = |m: &dyn Fn() -> Tensor| (m(), m());
    for (name, f) in [
        (
            "TransformerEncoderLayer",
            &(|| enc.forward(&x)) as &dyn Fn() -> Tensor,
        ),
        ("GRU", &|| gru.forward(&x, None).0),
    ] {
        let (a, b) = runs(f);
        assert!(
            !a.equal(&b),
            "{name}: two training runs agree, so nothing was dropped"
        );
        enc.eval();
        gru.eval();
        let (a, b) = runs(f);
        assert!(a.equal(&b), "{name}: eval runs differ");
        enc.train();
        gru.train();
    }
}

/// `nn.Identity` for the functional cases (no parameters).
struct Identity;

impl Module for Identity {
    fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, TensorKind)) {}
    fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {}
    fn repr(&self) -> String {
        "Identity()".into()
    }
}
