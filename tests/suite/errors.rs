//! Misuse panics with one message naming the op and its operands; run-time
//! conditions (no device) are `Result`s.

use crate::common::panic_message;
use tapir::Error;
use tapir::prelude::*;

#[test]
fn matmul_names_both_shapes() {
    let m = panic_message(|| {
        Tensor::zeros(&[32, 784]).matmul(&Tensor::zeros(&[128, 10]));
    });
    assert_eq!(
        m,
        "matmul: [32, 784] @ [128, 10] — inner dims differ (784 != 128)"
    );
}

#[test]
fn broadcasting_errors_name_op_and_shapes() {
    let m = panic_message(|| {
        let _ = Tensor::zeros(&[2, 3]) + Tensor::zeros(&[4]);
    });
    assert_eq!(
        m,
        "add: shapes [2, 3] and [4] cannot be broadcast together (dim 1: 3 vs 4)"
    );
}

#[test]
fn dtype_errors_name_both_dtypes() {
    let m = panic_message(|| {
        Tensor::zeros(&[2, 2]).matmul(&Tensor::zeros(&[2, 2]).to_dtype(DType::F64));
    });
    assert!(
        m.contains("matmul") && m.contains("float32") && m.contains("float64"),
        "{m}"
    );
    let m = panic_message(|| {
        Tensor::zeros(&[2]).index_select(0, &Tensor::zeros(&[1]));
    });
    assert!(
        m.contains("index_select: index must be int64, got float32"),
        "{m}"
    );
}

#[test]
fn index_and_dim_errors() {
    let m = panic_message(|| {
        Tensor::zeros(&[3, 2]).index_select(0, &Tensor::from_vec(vec![5i64], &[1]));
    });
    assert_eq!(
        m,
        "index_select: index 5 is out of bounds for dim of size 3"
    );
    let m = panic_message(|| {
        Tensor::zeros(&[3, 2]).sum_dim(2, false);
    });
    assert!(
        m.contains("sum: dim 2 is out of range for a tensor of shape [3, 2]"),
        "{m}"
    );
    let m = panic_message(|| {
        Tensor::zeros(&[3, 2]).reshape(&[4, -1]);
    });
    assert!(
        m.contains("reshape: shape [4, -1] is invalid for input of size 6"),
        "{m}"
    );
    let m = panic_message(|| {
        Tensor::zeros(&[3, 2]).t().view(&[6]);
    });
    assert!(
        m.contains("view: size [6] is not compatible") && m.contains("use reshape"),
        "{m}"
    );
}

#[test]
fn conv_errors_describe_the_mismatch() {
    let m = panic_message(|| {
        Tensor::zeros(&[1, 3, 8, 8]).conv2d(
            &Tensor::zeros(&[4, 2, 3, 3]),
            None,
            Conv2dOptions::default(),
        );
    });
    assert!(
        m.contains("conv2d: input [1, 3, 8, 8] has 3 channels") && m.contains("expects 2"),
        "{m}"
    );
    let m = panic_message(|| {
        Tensor::zeros(&[1, 1, 2, 2]).conv2d(
            &Tensor::zeros(&[1, 1, 3, 3]),
            None,
            Conv2dOptions::default(),
        );
    });
    assert!(m.contains("larger than the padded input"), "{m}");
}

#[test]
fn requires_grad_only_on_floats_and_leaves() {
    let m = panic_message(|| {
        let _ = Tensor::arange(3).requires_grad_(true);
    });
    assert!(
        m.contains("only floating point tensors can require gradients, got int64"),
        "{m}"
    );
    let y = &Tensor::ones(&[2]).requires_grad_(true) * 2.0;
    let m = panic_message(|| {
        let _ = y.requires_grad_(false);
    });
    assert!(
        m.contains("only change requires_grad flags of leaf tensors"),
        "{m}"
    );
}

#[test]
fn unavailable_cuda_is_a_result_not_a_crash() {
    // This machine has no GPU (and the default build has no `cuda` feature).
    match Device::cuda(0) {
        Ok(d) => assert_eq!(d, Device::Cuda(0)),
        Err(e) => assert!(
            e.to_string().starts_with("device cuda:0 is unavailable"),
            "{e}"
        ),
    }
    let t = Tensor::ones(&[2]);
    if Device::cuda(0).is_err() {
        assert!(t.to(Device::Cuda(0)).is_err());
    }
    assert_eq!(
        Device::cuda_if_available(),
        Device::cuda(0).unwrap_or(Device::Cpu)
    );
}

/// Out of memory inside an op is a typed panic that `try_forward` turns
/// into `Err(Error::OutOfMemory)`, also through a model nested in another
/// (whose `forward` passes the typed payload on); other panics keep theirs.
#[test]
fn out_of_memory_reaches_the_outermost_try_forward() {
    use tapir::error::catch_out_of_memory;
    let oom = || Error::OutOfMemory {
        device: "cuda:0".into(),
        requested: 1 << 40,
        free: 1 << 30,
    };
    let outer: Result<(), Error> = catch_out_of_memory(|| {
        let inner: Result<(), Error> = catch_out_of_memory(|| std::panic::panic_any(oom()));
        tapir::macro_support::forward_failed(inner.unwrap_err())
    });
    let msg = outer.unwrap_err().to_string();
    assert_eq!(
        msg,
        "cuda:0: out of memory: tried to allocate 1099511627776 bytes with 1073741824 bytes free"
    );
    let other = std::panic::catch_unwind(|| catch_out_of_memory(|| panic!("add: shapes")));
    let payload = other.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"add: shapes"));
}

/// Messages name the op the user called and hold no `left:`/`right:` noise.
#[test]
fn messages_name_the_op_the_user_called() {
    let logits = Tensor::zeros(&[2, 5]);
    let msg = panic_message(|| {
        tapir::nn::cross_entropy(&logits, &Tensor::from_vec(vec![1i64, 200], &[2]));
    });
    assert_eq!(
        msg,
        "cross_entropy: index 200 is out of bounds for dim of size 5"
    );
    let msg = panic_message(|| {
        Tensor::ones(&[4, 6])
            .requires_grad_(true)
            .sum_dim(0, false)
            .backward()
    });
    assert!(
        msg.starts_with("backward: grad can be implicitly created only for scalar outputs"),
        "{msg}"
    );
    assert!(!msg.contains("left") && !msg.contains("right"), "{msg}");
}

#[test]
fn sequence_layers_name_themselves_and_the_shapes() {
    use tapir::nn::*;
    let gru = GRU::new(3, 4, RnnOptions::default());
    let msg = panic_message(|| {
        gru.forward(&Tensor::zeros(&[5, 2, 7]), None);
    });
    assert_eq!(
        msg,
        "GRU: expected input [L, N, 3] or [L, 3], got [5, 2, 7]"
    );
    let lstm = LSTM::new(
        3,
        4,
        RnnOptions {
            num_layers: 2,
            ..Default::default()
        },
    );
    let msg = panic_message(|| {
        let h = Tensor::zeros(&[1, 2, 4]);
        lstm.forward(&Tensor::zeros(&[5, 2, 3]), Some((&h, &h)));
    });
    assert_eq!(msg, "LSTM: expected h0 of shape [2, 2, 4], got [1, 2, 4]");
    let conv = Conv1d::new(3, 4, 3, Conv1dOptions::default(), true);
    let msg = panic_message(|| {
        conv.forward(&Tensor::zeros(&[2, 5, 9]));
    });
    assert_eq!(
        msg,
        "Conv1d: expected input [N, 3, L] or [3, L], got [2, 5, 9]"
    );
    let enc = TransformerEncoderLayer::new(8, 2, TransformerEncoderLayerOptions::default());
    let msg = panic_message(|| {
        enc.forward(&Tensor::zeros(&[5, 2, 6]));
    });
    assert_eq!(
        msg,
        "TransformerEncoderLayer: expected src [L, N, 8], got [5, 2, 6]"
    );
}

/// An in-place op on an expanded view would write each address several
/// times (from several threads): PyTorch refuses it, and so does tapir.
/// Writing one value (`fill_`, `zero_`) is allowed, as in PyTorch.
#[test]
fn in_place_ops_refuse_a_target_whose_elements_share_memory() {
    let x = Tensor::zeros(&[1, 4]);
    let e = x.expand(&[3, 4]);
    type InPlaceOp<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let ops: [InPlaceOp<'_>; 6] = [
        (
            "add_",
            Box::new(|| {
                e.add_(&Tensor::ones(&[3, 4]));
            }),
        ),
        (
            "mul_",
            Box::new(|| {
                e.mul_scalar_(2.0);
            }),
        ),
        (
            "clamp_",
            Box::new(|| {
                e.clamp_(0.0, 1.0);
            }),
        ),
        (
            "copy_",
            Box::new(|| {
                e.copy_(&Tensor::ones(&[3, 4]));
            }),
        ),
        (
            "uniform_",
            Box::new(|| {
                e.uniform_(0.0, 1.0);
            }),
        ),
        (
            "normal_",
            Box::new(|| {
                e.normal_(0.0, 1.0);
            }),
        ),
    ];
    for (op, f) in ops {
        let m = panic_message(f);
        assert_eq!(
            m,
            format!(
                "{op}: more than one element of the written-to tensor refers to a single memory location \
                 (shape [3, 4], strides [0, 1], as an expand makes); clone() the tensor before the in-place op"
            )
        );
    }
    assert_eq!(x.to_vec::<f32>(), vec![0.0; 4], "a refused op wrote");
    e.fill_(2.0);
    assert_eq!(x.to_vec::<f32>(), vec![2.0; 4]);
    // A strided view whose elements are distinct is writable.
    let y = Tensor::zeros(&[6]);
    y.slice(0, 0, isize::MAX, 2).add_scalar_(1.0);
    assert_eq!(y.to_vec::<f32>(), vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0]);
}

/// PyTorch refuses a training batch norm over one value per channel (no
/// variance to normalise by); in eval the running statistics serve.
#[test]
fn batch_norm_needs_more_than_one_value_per_channel_when_training() {
    use tapir::nn::{BatchNorm, Forward, Module};
    let bn = BatchNorm::new_1d(2);
    let m = panic_message(|| {
        bn.forward(&Tensor::ones(&[1, 2]));
    });
    assert_eq!(
        m,
        "BatchNorm1d(2): expected more than 1 value per channel when training, got input of shape [1, 2]"
    );
    let bn2 = BatchNorm::new_2d(3);
    bn2.forward(&Tensor::ones(&[1, 3, 2, 1]));
    bn.eval();
    assert_eq!(bn.forward(&Tensor::ones(&[1, 2])).shape(), &[1, 2]);
}

/// Reflect padding must stay inside the dim (the edge is not repeated);
/// copying modes leave the first dim alone.
#[test]
fn padding_modes_name_the_mode_and_the_sizes() {
    use tapir::nn::{PadMode, pad_with};
    let x = Tensor::zeros(&[2, 3]);
    let m = panic_message(|| {
        pad_with(&x, &[3, 0], PadMode::Reflect);
    });
    assert_eq!(
        m,
        "pad: reflect padding of (3, 0) is too large for dim 1 of size 3 in shape [2, 3]"
    );
    let m = panic_message(|| {
        pad_with(&x, &[1, 1, 1, 1], PadMode::Replicate);
    });
    assert_eq!(
        m,
        "pad: replicate padding takes non-negative (before, after) pairs for at most 3 dims and not the first, got [1, 1, 1, 1] for shape [2, 3]"
    );
    assert_eq!(pad_with(&x, &[3, 0], PadMode::Circular).shape(), &[2, 6]);
}

/// A cell's state must match its input's batch and its hidden size.
#[test]
fn recurrent_cells_name_the_state_they_expected() {
    use tapir::nn::{LSTMCell, RNNCell};
    let cell = LSTMCell::new(3, 4, true);
    let (h, c) = (Tensor::zeros(&[2, 4]), Tensor::zeros(&[2, 5]));
    let m = panic_message(|| {
        cell.forward(&Tensor::zeros(&[2, 3]), Some((&h, &c)));
    });
    assert_eq!(
        m,
        "LSTMCell: expected a hidden state of shape [2, 4] for input of shape [2, 3], got [2, 5]"
    );
    let m = panic_message(|| {
        RNNCell::new(3, 4, true).forward(&Tensor::zeros(&[2, 5]), None);
    });
    assert_eq!(m, "RNNCell: expected input [N, 3] or [3], got [2, 5]");
}

/// Instance norm over one position has no variance either (PyTorch's
/// "more than 1 spatial element", in eval mode too without running
/// statistics); `F.batch_norm` needs running statistics outside training.
#[test]
fn instance_norm_needs_more_than_one_position_and_batch_norm_its_statistics() {
    use tapir::nn::{Forward, InstanceNorm, Module, batch_norm};
    let norm = InstanceNorm::new_1d(2, 1e-5, false);
    norm.eval();
    let m = panic_message(|| {
        norm.forward(&Tensor::ones(&[3, 2, 1]));
    });
    assert_eq!(
        m,
        "InstanceNorm1d(2): expected more than 1 spatial element when training, got input of shape [3, 2, 1]"
    );
    let tracked = InstanceNorm::new_1d(2, 1e-5, false).track_running_stats(true);
    tracked.eval();
    assert_eq!(
        tracked.forward(&Tensor::ones(&[3, 2, 1])).shape(),
        &[3, 2, 1]
    );
    let m = panic_message(|| {
        batch_norm(
            &Tensor::ones(&[3, 2]),
            None,
            None,
            None,
            None,
            false,
            0.1,
            1e-5,
        );
    });
    assert_eq!(
        m,
        "batch_norm: running_mean and running_var are needed when training is false"
    );
}

/// A narrow past the end was clamped to what was there (a shorter view,
/// silently); PyTorch refuses it, and so does tapir. `cat` of 0-d tensors
/// gets PyTorch's message instead of an index panic.
#[test]
fn narrow_past_the_end_and_cat_of_scalars_are_refused() {
    let x = Tensor::zeros(&[3, 4]);
    assert_eq!(
        panic_message(|| {
            x.narrow(1, 3, 2);
        }),
        "narrow: start (3) + length (2) exceeds dimension size (4) of dim 1 in shape [3, 4]"
    );
    assert_eq!(x.narrow(1, 2, 2).shape(), &[3, 2]);
    assert_eq!(
        panic_message(|| {
            Tensor::cat(&[&x, &Tensor::scalar(1.0f32)], 0);
        }),
        "cat: zero-dimensional tensor (at position 1) cannot be concatenated"
    );
}

/// The rearranging copies refuse what PyTorch refuses, naming the op and
/// what was given.
#[test]
fn rearranging_ops_name_their_bad_arguments() {
    let x = Tensor::zeros(&[2, 3]);
    assert_eq!(
        panic_message(|| {
            x.repeat(&[2]);
        }),
        "repeat: 1 repeats were given for a tensor of shape [2, 3]; give at least one per dim"
    );
    assert_eq!(
        panic_message(|| {
            x.flip(&[1, -1]);
        }),
        "flip: dim -1 appears more than once in [1, -1]"
    );
    assert_eq!(
        panic_message(|| {
            x.roll(&[1, 2], &[0]);
        }),
        "roll: 2 shifts were given for 1 dims ([1, 2] and [0]); give one per dim"
    );
    assert!(
        panic_message(|| {
            x.movedim(2, 0);
        })
        .starts_with("movedim: dim 2 is out of range for a tensor of shape [2, 3]"),
    );
    // Nothing to move still gives a fresh tensor, as PyTorch's clone.
    let y = x.flip(&[]);
    y.fill_(1.0);
    assert_eq!(x.sum().item::<f32>(), 0.0);
}

/// The functional helpers refuse what PyTorch refuses, in one sentence
/// naming the function.
#[test]
fn functional_helpers_name_their_bad_inputs() {
    let ids = Tensor::from_vec(vec![0i64, 4], &[2]);
    assert_eq!(
        panic_message(|| {
            tapir::nn::one_hot(&ids, Some(3));
        }),
        "one_hot: class values must be smaller than num_classes (3), got 4"
    );
    assert_eq!(tapir::nn::one_hot(&ids, None).shape(), &[2, 5]);
    let p = Tensor::from_vec(vec![0.5f32, 1.5], &[2]);
    assert_eq!(
        panic_message(|| {
            tapir::nn::binary_cross_entropy(&p, &p, None, tapir::nn::Reduction::Mean);
        }),
        "binary_cross_entropy: all elements of input should be between 0 and 1, got [0.5, 1.5]"
    );
    assert_eq!(
        panic_message(|| {
            tapir::nn::pad(&Tensor::zeros(&[2]), &[1, 1, 1, 1], 0.0);
        }),
        "pad: 4 pad sizes for a tensor of shape [2]; give (before, after) pairs for at most 1 dims"
    );
    // Empty reductions as PyTorch's: any is false, all is true.
    let empty = Tensor::zeros(&[0]);
    assert!(!empty.any().item::<bool>() && empty.all().item::<bool>());
}

/// einsum names the equation and what does not fit it.
#[test]
fn einsum_names_the_equation_and_the_mismatch() {
    let (a, b) = (Tensor::zeros(&[2, 3]), Tensor::zeros(&[4, 5]));
    assert_eq!(
        panic_message(|| {
            Tensor::einsum("ij,jk->ik", &[&a, &b]);
        }),
        "einsum: 'j' is 3 in one operand and 4 in another in \"ij,jk->ik\""
    );
    assert_eq!(
        panic_message(|| {
            Tensor::einsum("ij,jk->ik", &[&a]);
        }),
        "einsum: \"ij,jk->ik\" names 2 operands but 1 were given"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::einsum("...j,...j->j", &[&a, &Tensor::zeros(&[4, 3])]);
        }),
        "einsum: the dims under \"...\" in \"...j,...j->j\" do not broadcast (2 against 4)"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::einsum("i.j->j", &[&a]);
        }),
        "einsum: '.' in \"i.j->j\" is not a letter (at most one ellipsis per operand)"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::einsum("ii->i", &[&Tensor::zeros(&[2, 3])]);
        }),
        "einsum: 'i' repeats within \"ii\" in \"ii->i\" over dims of sizes 2 and 3, which must be equal"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::zeros(&[2, 3]).diagonal(0, 1, -1);
        }),
        "diagonal: dim1 and dim2 cannot be the same dim (1 and -1 of shape [2, 3])"
    );
    assert_eq!(
        panic_message(|| {
            Tensor::zeros(&[2, 3, 4]).trace();
        }),
        "trace: expects a matrix, got shape [2, 3, 4]"
    );
}

/// interpolate refuses the arguments PyTorch refuses.
#[test]
fn interpolate_names_its_bad_arguments() {
    use tapir::nn::{InterpolateMode, interpolate};
    let img = Tensor::zeros(&[1, 1, 2, 2]);
    assert_eq!(
        panic_message(|| {
            interpolate(&img, Some(&[4, 4]), None, InterpolateMode::Linear, None);
        }),
        "interpolate: mode 'linear' does not take an input of shape [1, 1, 2, 2]"
    );
    assert_eq!(
        panic_message(|| {
            interpolate(
                &img,
                Some(&[4, 4]),
                None,
                InterpolateMode::Nearest,
                Some(false),
            );
        }),
        "interpolate: align_corners can only be set with the linear and cubic modes, not 'nearest'"
    );
    assert_eq!(
        panic_message(|| {
            interpolate(&img, Some(&[3, 3]), None, InterpolateMode::Area, Some(true));
        }),
        "interpolate: align_corners can only be set with the linear and cubic modes, not 'area'"
    );
    assert_eq!(
        panic_message(|| {
            interpolate(
                &Tensor::zeros(&[1, 2, 5]),
                Some(&[8]),
                None,
                InterpolateMode::Bicubic,
                None,
            );
        }),
        "interpolate: mode 'bicubic' does not take an input of shape [1, 2, 5]"
    );
    assert!(
        panic_message(|| {
            interpolate(&img, Some(&[4]), None, InterpolateMode::Nearest, None);
        })
        .starts_with("interpolate: give either size or scale_factor, one per spatial dim of shape [1, 1, 2, 2]")
    );
}

/// 0-d tensors in the rearranging copies behave as in PyTorch: flip and
/// movedim return the element, roll and repeat_interleave along a dim refuse.
#[test]
fn rearranging_a_0d_tensor_follows_pytorch() {
    let x = Tensor::scalar(5.0f32);
    assert_eq!(x.flip(&[0]).item::<f32>(), 5.0);
    assert_eq!(x.flip(&[-1]).item::<f32>(), 5.0);
    assert_eq!(x.movedim(0, 0).item::<f32>(), 5.0);
    assert_eq!(x.roll(&[1], &[]).item::<f32>(), 5.0);
    assert_eq!(x.repeat(&[2, 3]).shape(), &[2, 3]);
    assert_eq!(x.tile(&[2]).shape(), &[2]);
    assert_eq!(
        panic_message(|| {
            x.roll(&[1], &[0]);
        }),
        "roll: a 0-d tensor has no dim [0] to roll along (give no dims)"
    );
    assert_eq!(
        panic_message(|| {
            x.repeat_interleave(2, Some(0));
        }),
        "repeat_interleave: a 0-d tensor has no dim 0 (give dim None)"
    );
}

#[test]
fn the_margin_and_likelihood_losses_name_their_bad_inputs() {
    use tapir::nn::{Reduction, cosine_embedding_loss, gaussian_nll_loss};
    let x = Tensor::zeros(&[4, 3]);
    assert_eq!(
        panic_message(|| {
            gaussian_nll_loss(&x, &x, &Tensor::ones(&[3]), false, 1e-6, Reduction::Mean);
        }),
        "gaussian_nll_loss: var of shape [3] is of incorrect size for input of shape [4, 3]"
    );
    assert_eq!(
        panic_message(|| {
            gaussian_nll_loss(
                &x,
                &x,
                &Tensor::full(&[4], -1.0),
                false,
                1e-6,
                Reduction::Mean,
            );
        }),
        "gaussian_nll_loss: var has negative entry/entries"
    );
    assert_eq!(
        panic_message(|| {
            cosine_embedding_loss(&x, &x, &Tensor::ones(&[3]), 0.0, Reduction::Mean);
        }),
        "cosine_embedding_loss: inputs of shape [4, 3] need a target of shape [4], got [3]"
    );
}

#[test]
fn grouped_query_attention_names_the_head_counts() {
    let m = panic_message(|| {
        let q = Tensor::zeros(&[1, 6, 2, 4]);
        let kv = Tensor::zeros(&[1, 4, 2, 4]);
        tapir::nn::scaled_dot_product_attention_gqa(&q, &kv, &kv, None, 0.0, false, None);
    });
    assert_eq!(
        m,
        "scaled_dot_product_attention (enable_gqa): query [1, 6, 2, 4] must have a multiple of the heads (dim -3) of key [1, 4, 2, 4] and value [1, 4, 2, 4], which must agree"
    );
}

#[test]
fn projections_are_lstm_only_and_narrower_than_the_hidden_state() {
    use tapir::nn::{GRU, LSTM, Module, RnnOptions};
    let proj = |p| RnnOptions {
        proj_size: p,
        ..Default::default()
    };
    let m = panic_message(|| {
        GRU::new(4, 6, proj(3));
    });
    assert_eq!(m, "GRU: proj_size is only supported for LSTM, got 3");
    let m = panic_message(|| {
        LSTM::new(4, 6, proj(6));
    });
    assert_eq!(
        m,
        "LSTM: proj_size (6) must be smaller than hidden_size (6)"
    );
    let lstm = LSTM::new(
        4,
        6,
        RnnOptions {
            num_layers: 2,
            bidirectional: true,
            ..proj(3)
        },
    );
    assert_eq!(
        lstm.repr(),
        "LSTM(4, 6, proj_size=3, num_layers=2, bidirectional=True)"
    );
    let m = panic_message(|| {
        let h0 = Tensor::zeros(&[4, 2, 6]);
        let c0 = Tensor::zeros(&[4, 2, 6]);
        lstm.forward(&Tensor::zeros(&[5, 2, 4]), Some((&h0, &c0)));
    });
    assert_eq!(m, "LSTM: expected h0 of shape [4, 2, 3], got [4, 2, 6]");
}

#[test]
fn channel_layers_name_the_shape() {
    use tapir::nn::{ChannelShuffle, Forward, local_response_norm};
    let m = panic_message(|| {
        ChannelShuffle { groups: 4 }.forward(&Tensor::zeros(&[2, 6, 3]));
    });
    assert_eq!(
        m,
        "ChannelShuffle: expects [N, C, *] with C divisible by groups 4, got [2, 6, 3]"
    );
    let m = panic_message(|| {
        local_response_norm(&Tensor::zeros(&[2, 6]), 3, 1e-4, 0.75, 1.0);
    });
    assert_eq!(
        m,
        "local_response_norm: expects [N, C, *] (3 or more dims) and a positive size, got [2, 6] and 3"
    );
}
