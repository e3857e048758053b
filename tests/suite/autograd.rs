//! Autograd rules: accumulation, retain_graph, no_grad, detach, hooks,
//! freezing, memory release, and finite-difference gradchecks of every
//! differentiable golden op in f64.

use crate::common;
use crate::core_ops;

use safetensors::SafeTensors;
use tapir::gradcheck;
use tapir::prelude::*;

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

/// Golden cases whose inputs sit where the op is not differentiable, so a
/// central difference sees the average of two slopes while PyTorch (and
/// tapir) take one by convention; their gradients are still checked against
/// PyTorch's by the golden replay.
const AT_A_KINK: &[(&str, &str)] = &[
    (
        "mode",
        "mode is made of equal values: moving one by the difference step breaks its run and another value \
         becomes the mode; the gradient (gather's, to the last occurrence) is checked against PyTorch's",
    ),
    (
        "mode_keep_t",
        "as mode: rounded values, so ties and runs by design",
    ),
    (
        "copysign_zeros",
        "self and other at ±0, where copysign's value or sign jumps: PyTorch's gradient there is 0 (the golden \
         checks it); finite differences see the jump",
    ),
    (
        "selu_tiny",
        "inputs within the difference step (1e-6) of 0, where SELU's slope jumps from scale * alpha to \
         scale (elu_tiny and celu_tiny, whose slopes meet at 0, are checked)",
    ),
    (
        "ndtri_deep",
        "p = 1e-30 and 1e-10 lie closer to 0 than the difference step (1e-6); ndtri is NaN below 0",
    ),
    (
        "xlogy",
        "x = y = 0: PyTorch's gradient for y there is 0 / 0 = NaN (the value is 0 around it)",
    ),
    (
        "maximum_ties",
        "equal inputs: the gradient is split by convention",
    ),
    (
        "amax",
        "two equal maxima: the gradient is split by convention",
    ),
    (
        "amin",
        "two equal minima: the gradient is split by convention",
    ),
    (
        "clamp_at_bounds",
        "inputs at the bounds: the subgradient of minimum norm, 0, by convention",
    ),
    (
        "hardswish_at_kinks",
        "inputs at -3 and 3: the subgradient of minimum norm by convention",
    ),
    (
        "normalize_zero_row",
        "a zero row divides by eps = 1e-12: a step of the difference leaves the clamp",
    ),
    (
        "cosine_similarity_tiny",
        "a norm below eps: a step of the difference changes the norm past eps",
    ),
    (
        "max_dim_rows_ties",
        "equal maxima in a row: a step makes one of them the max",
    ),
    (
        "min_dim_rows_ties",
        "equal minima in a row: a step makes one of them the min",
    ),
    (
        "sort_ties_nan",
        "a NaN input and equal elements: a step moves ties past each other",
    ),
];

/// Every golden op with a gradient (`tests/goldens/core.json`), checked by
/// central finite differences in f64 on its golden inputs and views: the
/// gradcheck list is the golden list (one op table, `common/core_ops.rs`).
#[test]
fn gradcheck_every_golden_op() {
    let (bytes, manifest) = core_ops::core_goldens();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (mut checked, mut failures) = (0, vec![]);
    for c in manifest["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let grads = core_ops::grads(c);
        if !grads.contains(&true) || AT_A_KINK.iter().any(|(k, _)| *k == name) {
            continue;
        }
        let inputs: Vec<Tensor> = (0..grads.len())
            .map(|k| common::load_cpu(&st, &format!("{name}.in{k}")))
            .collect();
        let weights: Vec<Option<Tensor>> = (0..c["n_out"].as_u64().unwrap())
            .map(|k| {
                let key = format!("{name}.w{k}");
                st.tensor(&key).is_ok().then(|| common::load_cpu(&st, &key))
            })
            .collect();
        let varying: Vec<Tensor> = (0..grads.len())
            .filter(|&k| grads[k])
            .map(|k| inputs[k].clone())
            .collect();
        let f = |t: &[Tensor]| {
            let mut next = t.iter();
            let xs: Vec<Tensor> = (0..grads.len())
                .map(|k| {
                    let x = if grads[k] {
                        next.next().unwrap()
                    } else {
                        &inputs[k]
                    };
                    core_ops::view(x, &c["views"][k])
                })
                .collect();
            let outs = core_ops::run(c["op"].as_str().unwrap(), &c["args"], &xs).unwrap();
            let mut total = Tensor::scalar(0.0f64);
            for (o, w) in outs.iter().zip(&weights) {
                if let Some(w) = w {
                    total = &total + &(o * w).sum();
                }
            }
            total
        };
        checked += 1;
        if let Err(e) = gradcheck(f, &varying, 1e-6, 1e-6, 1e-5) {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(checked >= 100, "only {checked} golden cases have gradients");
    assert!(
        failures.is_empty(),
        "{} of {checked} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What the golden list cannot hold: a cast's gradient through f32.
#[test]
fn gradcheck_through_a_cast() {
    let a = rnd(&[3, 4], 1);
    // Through f32 the finite difference needs a larger step.
    if let Err(e) = gradcheck(
        |t| t[0].to_dtype(DType::F32).to_dtype(DType::F64),
        std::slice::from_ref(&a),
        1e-2,
        1e-4,
        1e-3,
    ) {
        panic!("to_dtype: {e}");
    }
}

#[test]
fn gradcheck_rejects_a_wrong_gradient() {
    // A hook that doubles the gradient makes analytic != numeric.
    let x = rnd(&[3], 20);
    let r = gradcheck(
        |t| {
            let y = t[0].exp();
            if y.requires_grad() {
                y.register_hook(|g| Some(g * 2.0));
            }
            y
        },
        &[x],
        1e-6,
        1e-6,
        1e-5,
    );
    assert!(r.is_err(), "gradcheck must catch a doubled gradient");
}

#[test]
fn gradients_accumulate_across_backward_calls() {
    let w = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    (&w * 3.0).sum().backward();
    (&w * 3.0).sum().backward();
    assert_eq!(w.grad().unwrap().to_vec::<f64>(), vec![6.0, 6.0]);
    w.set_grad(None);
    assert!(w.grad().is_none());
}

/// As PyTorch's AccumulateGrad without `create_graph`: later gradients are
/// added into the existing one in place, so a handle taken between two
/// backwards (a gradient-accumulation monitor, say) sees the sum, and so
/// does a gradient the user set.
#[test]
fn later_backwards_add_into_the_gradient_a_handle_already_holds() {
    let w = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    (&w * 3.0).sum().backward();
    let first = w.grad().unwrap();
    (&w * &w).sum().backward();
    assert_eq!(first.to_vec::<f64>(), vec![5.0, 7.0]);
    assert_eq!(w.grad().unwrap().to_vec::<f64>(), vec![5.0, 7.0]);

    let mine = t64(&[10.0, 20.0], &[2]);
    w.set_grad(Some(mine.clone()));
    (&w * 3.0).sum().backward();
    assert_eq!(mine.to_vec::<f64>(), vec![13.0, 23.0]);

    // A leaf used twice in one graph gets both contributions.
    let v = t64(&[1.0, -2.0], &[2]).requires_grad_(true);
    (&v * 2.0 + &v * &v).sum().backward();
    assert_eq!(v.grad().unwrap().to_vec::<f64>(), vec![4.0, -2.0]);
}

/// `a + b`'s backward hands one tensor to both inputs; each leaf still gets
/// a gradient of its own, so scaling one in place (clipping does) leaves
/// the other alone.
#[test]
fn leaves_fed_the_same_gradient_tensor_get_their_own_copies() {
    let a = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    let b = t64(&[3.0, 4.0], &[2]).requires_grad_(true);
    (&a + &b).sum().backward();
    no_grad(|| {
        a.grad().unwrap().mul_scalar_(0.5);
    });
    assert_eq!(a.grad().unwrap().to_vec::<f64>(), vec![0.5, 0.5]);
    assert_eq!(b.grad().unwrap().to_vec::<f64>(), vec![1.0, 1.0]);
    (&a + &b).sum().backward();
    assert_eq!(a.grad().unwrap().to_vec::<f64>(), vec![1.5, 1.5]);
    assert_eq!(b.grad().unwrap().to_vec::<f64>(), vec![2.0, 2.0]);
}

/// PyTorch's layout contract: a dense leaf's gradient has the leaf's
/// strides (`torch.arange(12.).reshape(4, 3).t()` as a leaf gets a
/// gradient of strides (1, 3)), any other leaf's is row-major. Later
/// accumulation keeps the layout.
#[test]
fn a_dense_leafs_gradient_has_the_leafs_strides() {
    let base: Vec<f64> = (0..12).map(f64::from).collect();
    let w = t64(&base, &[4, 3]).t().requires_grad_(true);
    assert_eq!(w.strides(), &[1, 3]);
    let c = t64(&base, &[3, 4]);
    (&w * &c).sum().backward();
    let g = w.grad().unwrap();
    assert_eq!(g.strides(), &[1, 3]);
    assert_eq!(g.to_vec::<f64>(), base, "the gradient of sum(w * c) is c");
    (&w * &c).sum().backward();
    assert_eq!(w.grad().unwrap().strides(), &[1, 3]);
    assert_eq!(
        w.grad().unwrap().to_vec::<f64>(),
        base.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    );

    // Three dims in another order, with a size-1 dim.
    let p = rnd(&[2, 1, 3, 4], 3)
        .permute(&[2, 0, 3, 1])
        .requires_grad_(true);
    (&p * 2.0).exp().sum().backward();
    let g = p.grad().unwrap();
    assert_eq!(g.strides()[0], p.strides()[0]);
    assert_eq!(g.strides()[1], p.strides()[1]);
    assert_eq!(g.strides()[2], p.strides()[2]);
    let want: Vec<f64> = p
        .to_vec::<f64>()
        .iter()
        .map(|x| 2.0 * (2.0 * x).exp())
        .collect();
    assert_eq!(g.to_vec::<f64>(), want);

    // A strided slice is not dense: its gradient is row-major.
    let s = t64(&base, &[12]).slice(0, 0, 12, 2).requires_grad_(true);
    (&s * 2.0).sum().backward();
    let g = s.grad().unwrap();
    assert!(g.is_contiguous());
    assert_eq!(g.to_vec::<f64>(), vec![2.0; 6]);
}

#[test]
fn backward_twice_without_retain_graph_is_an_error() {
    let w = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    let loss = (&w * &w).sum();
    loss.backward();
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loss.backward()));
    let msg = *again.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.contains("backward through the graph a second time"),
        "{msg}"
    );
}

#[test]
fn retain_graph_allows_a_second_backward() {
    let w = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    let loss = (&w * &w).sum();
    loss.backward_with(&Tensor::ones_like(&loss), true);
    loss.backward();
    assert_eq!(w.grad().unwrap().to_vec::<f64>(), vec![4.0, 8.0]);
}

#[test]
fn no_grad_records_nothing_and_nests() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let y = no_grad(|| {
        let inner = enable_grad(|| &w * 2.0);
        assert!(inner.requires_grad());
        &w * 2.0
    });
    assert!(!y.requires_grad() && y.grad_fn_name().is_none());
    assert!(tapir::is_grad_enabled());
}

#[test]
fn detach_cuts_the_graph_and_shares_data() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let d = (&w * 2.0).detach();
    assert!(!d.requires_grad() && d.is_leaf());
    let y = &w * &d;
    y.sum().backward();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![2.0, 2.0]);
}

#[test]
fn grad_fn_names_follow_pytorch() {
    let a = Tensor::ones(&[2, 2]).requires_grad_(true);
    assert_eq!((&a * &a).grad_fn_name(), Some("MulBackward0"));
    assert_eq!(a.matmul(&a).grad_fn_name(), Some("MmBackward0"));
    assert_eq!(a.sum().grad_fn_name(), Some("SumBackward1"));
    assert_eq!(
        (&a * &a).to_string(),
        "tensor([[1., 1.],\n        [1., 1.]], grad_fn=<MulBackward0>)"
    );
}

#[test]
fn broadcasting_reduces_gradients_to_input_shapes() {
    let a = Tensor::ones(&[2, 3]).requires_grad_(true);
    let b = Tensor::ones(&[3]).requires_grad_(true);
    let c = Tensor::ones(&[2, 1]).requires_grad_(true);
    ((&a + &b) * &c).sum().backward();
    assert_eq!(b.grad().unwrap().shape(), &[3]);
    assert_eq!(b.grad().unwrap().to_vec::<f32>(), vec![2.0; 3]);
    assert_eq!(c.grad().unwrap().to_vec::<f32>(), vec![6.0, 6.0]);
}

#[test]
fn non_scalar_backward_needs_a_gradient() {
    let a = Tensor::ones(&[2]).requires_grad_(true);
    let y = &a * 3.0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| y.backward()));
    assert!(r.is_err());
    y.backward_with(&Tensor::from_vec(vec![1.0f32, 2.0], &[2]), false);
    assert_eq!(a.grad().unwrap().to_vec::<f32>(), vec![3.0, 6.0]);
}

#[test]
fn hooks_see_and_replace_gradients() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let h = &w * 2.0;
    h.register_hook(|g| Some(g * 10.0));
    h.sum().backward();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![20.0, 20.0]);
}

/// `split`'s pieces share one node (PyTorch's `SplitBackward0`): each
/// piece's gradient lands in its place, a piece nothing flowed into gets
/// zeros, a hook on one piece changes only that piece, a piece used twice
/// sums, and a piece can be the root of a backward.
#[test]
fn split_pieces_share_one_node_with_a_gradient_slot_each() {
    let x = Tensor::arange(6)
        .to_dtype(DType::F32)
        .reshape(&[2, 3])
        .requires_grad_(true);
    let p = x.split(1, 1); // three [2, 1] columns
    assert!(p.iter().all(|t| t.grad_fn_name() == Some("SplitBackward0")));
    // Column 0 used twice (1 + 2), column 1 unused, column 2 hooked (x10).
    p[2].register_hook(|g| Some(g * 10.0));
    let y = &(&p[0] + &(&p[0] * 2.0)).sum() + &p[2].sum();
    y.backward();
    let want = vec![3.0, 0.0, 10.0, 3.0, 0.0, 10.0];
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), want);

    // Backward from a piece that is not the node's first output.
    x.set_grad(None);
    let q = x.chunk(3, 1);
    (&q[1] * 4.0).sum().backward();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>(),
        vec![0.0, 4.0, 0.0, 0.0, 4.0, 0.0]
    );

    // Uneven pieces along dim 0, every one weighted, checked by finite differences.
    let a = rnd(&[5, 3], 31);
    let f = |t: &[Tensor]| {
        let s = t[0].split(2, 0); // 2 + 2 + 1 rows
        let w: Vec<f64> = vec![1.5, -2.0, 0.5];
        s.iter().zip(w).fold(Tensor::scalar(0.0f64), |acc, (p, w)| {
            &acc + &(&(p * p) * w).sum()
        })
    };
    if let Err(e) = gradcheck(f, std::slice::from_ref(&a), 1e-6, 1e-6, 1e-5) {
        panic!("split: {e}");
    }
}

/// `unbind`'s slices share one node too (`UnbindBackward0`): an RNN's
/// time steps used in any order and some not at all give one gradient
/// buffer, with zeros where nothing flowed.
#[test]
fn unbind_slices_share_one_node() {
    let x = Tensor::arange(6)
        .to_dtype(DType::F64)
        .reshape(&[3, 2])
        .requires_grad_(true);
    let rows = x.unbind(0);
    assert!(
        rows.iter()
            .all(|r| r.grad_fn_name() == Some("UnbindBackward0"))
    );
    assert_eq!(rows[1].shape(), &[2]);
    (&(&rows[2] * 3.0).sum() + &(&rows[0] * &rows[0]).sum()).backward();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>(),
        vec![0.0, 2.0, 0.0, 0.0, 3.0, 3.0]
    );
    let a = rnd(&[4, 3], 32);
    let f = |t: &[Tensor]| {
        let cols = t[0].t().unbind(0); // strided slices of a transposed view
        cols.iter()
            .enumerate()
            .fold(Tensor::scalar(0.0f64), |acc, (i, c)| {
                &acc + &(&c.exp() * (i as f64 - 1.0)).sum()
            })
    };
    if let Err(e) = gradcheck(f, std::slice::from_ref(&a), 1e-6, 1e-6, 1e-5) {
        panic!("unbind: {e}");
    }
}

#[test]
fn frozen_inputs_get_no_gradient_work() {
    // A weight that does not require grad stays without one while the input
    // gets its gradient. (That its GEMM is skipped is shown by counting
    // launches in tests/suite/training.rs.)
    let x = Tensor::randn(&[4, 3]).requires_grad_(true);
    let w = Tensor::randn(&[3, 2]);
    x.matmul(&w).sum().backward();
    assert!(w.grad().is_none());
    assert_eq!(x.grad().unwrap().shape(), &[4, 3]);
}

#[test]
fn inplace_on_a_leaf_requiring_grad_is_an_error() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        w.add_(&Tensor::ones(&[2]));
    }));
    let msg = *r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("add_") && msg.contains("in-place"), "{msg}");
    no_grad(|| w.add_scaled_(&Tensor::ones(&[2]), -0.5));
    assert_eq!(w.to_vec::<f32>(), vec![0.5, 0.5]);
}

#[test]
fn inplace_ops_update_views_and_broadcast() {
    let base = Tensor::zeros(&[2, 3]);
    base.select(0, 1).fill_(7.0);
    base.add_(&Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]));
    assert_eq!(base.to_vec::<f32>(), vec![1.0, 2.0, 3.0, 8.0, 9.0, 10.0]);
    base.mul_(&base.clone());
    assert_eq!(base.to_vec::<f32>()[5], 100.0);
}

#[test]
fn linear_with_bias_is_one_fused_op_that_gradchecks_and_matches_the_composition() {
    // nn::linear with a bias runs addmm (the bias starts the GEMM): check it
    // by finite differences, and against matmul + add, for 2-D, 3-D and
    // transposed inputs and for a batch of one row (the GEMV path).
    for (shape, transposed) in [
        (&[5usize, 3][..], false),
        (&[2, 4, 3][..], false),
        (&[5, 3][..], true),
        (&[1, 3][..], false),
    ] {
        let x = if transposed {
            let mut s = shape.to_vec();
            s.reverse();
            rnd(&s, 1).t().requires_grad_(true)
        } else {
            rnd(shape, 1).requires_grad_(true)
        };
        let (w, b) = (
            rnd(&[2, 3], 2).requires_grad_(true),
            rnd(&[2], 3).requires_grad_(true),
        );
        let y = nn::linear(&x, &w, Some(&b));
        assert_eq!(
            y.grad_fn_name(),
            Some(if shape.len() == 2 {
                "AddmmBackward0"
            } else {
                "ViewBackward0"
            })
        );
        let composed = &x.matmul(&w.t()) + &b;
        let diff = (&y - &composed).abs().max().item::<f64>();
        assert!(
            diff < 1e-12,
            "{shape:?}: fused and composed differ by {diff}"
        );
        let f = |t: &[Tensor]| nn::linear(&t[0], &t[1], Some(&t[2])).sum();
        gradcheck(f, &[x, w, b], 1e-6, 1e-6, 1e-5).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
    }
    // In f32 and bf16 the fused result equals PyTorch's addmm: the bias
    // joins the f32 sum and a bf16 result is rounded once.
    let x = Tensor::from_vec(vec![1.0f32, 1.0 / 256.0], &[1, 2]);
    let w = Tensor::from_vec(vec![1.0f32, 1.0], &[1, 2]);
    let b = Tensor::from_vec(vec![1.0f32 / 256.0], &[1]);
    let y = nn::linear(&x.bfloat16(), &w.bfloat16(), Some(&b.bfloat16()));
    // 1 + 1/256 + 1/256 = 1.0078125 is a bf16 value; rounding after the
    // matmul (1.00390625 -> 1.0) and again after the add would give 1.0.
    assert_eq!(y.float().to_vec::<f32>(), vec![1.0078125]);
}

#[test]
fn a_broadcast_left_operand_gets_the_summed_gradient_in_either_orientation() {
    // A convolution's weight against its unfolded images: `a` broadcast over
    // the batch. With fewer rows than columns its gradient is computed as
    // (b @ g^T)^T summed; with more, as g @ b^T summed. Both must equal the
    // per-product definition, come out contiguous, and pass finite
    // differences (the conv goldens check the same against PyTorch).
    for (m, k) in [(3usize, 7usize), (7, 3)] {
        let a = rnd(&[2, m, k], 4).requires_grad_(true); // batch [2] kept
        let b = rnd(&[5, 2, k, 4], 5); // batch [5, 2]: a is summed over 5
        let g = rnd(&[5, 2, m, 4], 6);
        (&a.matmul(&b) * &g).sum().backward();
        let grad = a.grad().unwrap();
        assert!(grad.is_contiguous(), "{m}x{k}: gradient layout");
        let want = g.matmul(&b.transpose(-1, -2)).sum_dims(&[0], false);
        let diff = (&grad - &want).abs().max().item::<f64>();
        assert!(diff < 1e-12, "{m}x{k}: gradient off by {diff}");
        let f = |t: &[Tensor]| (&t[0].matmul(&t[1]) * &g).sum();
        gradcheck(
            f,
            &[a.detach().requires_grad_(true), b.requires_grad_(true)],
            1e-6,
            1e-6,
            1e-5,
        )
        .unwrap_or_else(|e| panic!("{m}x{k}: {e}"));
    }
}

#[test]
fn relu_backward_passes_the_gradient_where_the_output_is_positive_or_nan() {
    // PyTorch's threshold_backward at 0, read off torch 2.x:
    // relu([-1, 0, 2, nan, -0]) backward with [5, 6, 7, 8, 9] gives
    // [0, 0, 7, 8, 0]: zero at and below 0, the gradient through a NaN.
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let x = Tensor::from_vec(vec![-1.0f32, 0.0, 2.0, f32::NAN, -0.0], &[5])
            .to_dtype(dtype)
            .requires_grad_(true);
        let g = Tensor::from_vec(vec![5.0f32, 6.0, 7.0, 8.0, 9.0], &[5]).to_dtype(dtype);
        x.relu().backward_with(&g, false);
        let grad = x.grad().unwrap().to_dtype(DType::F32).to_vec::<f32>();
        assert_eq!(grad, [0.0, 0.0, 7.0, 8.0, 0.0], "{dtype:?}");
    }
}

#[test]
fn sign_and_the_gradient_of_abs_are_zero_at_both_zeros_and_nan() {
    // PyTorch's sign is `(0 < x) - (x < 0)`, read off torch 2.x:
    // sign([nan, -0, 0, -2, 3]) = [0, 0, 0, -1, 1] (positive zeros), and
    // abs's backward (grad * sign) gives the same with a gradient of ones.
    for dtype in [DType::F32, DType::F64, DType::BF16] {
        let x = Tensor::from_vec(vec![f32::NAN, -0.0, 0.0, -2.0, 3.0], &[5])
            .to_dtype(dtype)
            .requires_grad_(true);
        let bits = |t: &Tensor| -> Vec<u32> {
            let v = t.to_dtype(DType::F32).to_vec::<f32>();
            v.iter().map(|v| v.to_bits()).collect()
        };
        let want: Vec<u32> = [0.0f32, 0.0, 0.0, -1.0, 1.0]
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits(&x.sign()), want, "sign {dtype:?}");
        x.abs().sum().backward();
        assert_eq!(bits(&x.grad().unwrap()), want, "abs backward {dtype:?}");
    }
}

#[test]
fn a_flat_parameter_vector_carries_gradients_and_writes_back() {
    use tapir::optim::{parameters_to_vector, vector_to_parameters};
    let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).requires_grad_(true);
    let b = Tensor::from_vec(vec![5.0f32], &[1]).requires_grad_(true);
    let flat = parameters_to_vector(&[a.clone(), b.clone()]);
    assert_eq!(flat.to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0, 5.0]);
    (&flat * &Tensor::arange_f(1.0, 6.0, 1.0)).sum().backward();
    assert_eq!(a.grad().unwrap().to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(b.grad().unwrap().to_vec::<f32>(), [5.0]);
    vector_to_parameters(&Tensor::arange_f(10.0, 15.0, 1.0), &[a.clone(), b.clone()]);
    assert_eq!(a.to_vec::<f32>(), [10.0, 11.0, 12.0, 13.0]);
    assert_eq!(b.to_vec::<f32>(), [14.0]);
    let m = crate::common::panic_message(|| {
        vector_to_parameters(&Tensor::zeros(&[4]), &[a.clone(), b.clone()]);
    });
    assert_eq!(
        m,
        "vector_to_parameters: expects a 1-D vector of the parameters' 5 elements, got [4]"
    );
}
