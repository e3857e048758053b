//! Autograd rules: accumulation, retain_graph, no_grad, detach, hooks,
//! freezing, memory release, and finite-difference gradchecks of every
//! differentiable op in f64.

use tapir::gradcheck;
use tapir::prelude::*;

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64)
}

fn pos(shape: &[usize], seed: u64) -> Tensor {
    &(&Tensor::rand_with(shape, &Generator::new(seed)).to_dtype(DType::F64) * 2.0) + 0.2
}

fn check(name: &str, f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) {
    if let Err(e) = gradcheck(f, inputs, 1e-6, 1e-6, 1e-5) {
        panic!("{name}: {e}");
    }
}

#[test]
fn gradcheck_every_differentiable_op() {
    let a = rnd(&[3, 4], 1);
    let b = rnd(&[3, 4], 2);
    let v = rnd(&[4], 3);
    let p = pos(&[3, 4], 4);
    type Op = fn(&Tensor) -> Tensor;
    let unary: Vec<(&str, Op)> = vec![
        ("neg", |x| x.neg()),
        ("exp", |x| x.exp()),
        ("sin", |x| x.sin()),
        ("cos", |x| x.cos()),
        ("tanh", |x| x.tanh()),
        ("sigmoid", |x| x.sigmoid()),
        ("erf", |x| x.erf()),
        ("gelu", |x| x.gelu()),
        ("gelu_tanh", |x| x.gelu_tanh()),
        ("silu", |x| x.silu()),
        ("softplus", |x| x.softplus()),
        ("leaky_relu", |x| x.leaky_relu(0.2)),
        ("powf3", |x| x.powf(3.0)),
        ("square", |x| x.square()),
        ("clamp", |x| x.clamp(-0.7, 0.6)),
        ("relu", |x| x.relu()),
        ("abs", |x| x.abs()),
        ("sum_dims", |x| x.sum_dims(&[0], true)),
        ("mean", |x| x.mean()),
        ("var_dims", |x| x.var_dims(&[1], 1, false)),
        ("std_dims", |x| x.std_dims(&[0], 0, true)),
        ("logsumexp", |x| x.logsumexp(&[1], false)),
        ("norm2", |x| x.norm(2.0)),
        ("norm1", |x| x.norm(1.0)),
        ("max_dim", |x| x.max_dim(1, false).0),
        ("min_dim", |x| x.min_dim(0, true).0),
        ("max_all", |x| x.max()),
        ("softmax", |x| x.softmax(-1)),
        ("softmax0", |x| x.softmax(0)),
        ("log_softmax", |x| x.log_softmax(1)),
        ("transpose", |x| x.t().contiguous()),
        ("reshape_t", |x| x.t().reshape(&[2, 6])),
        ("permute", |x| x.unsqueeze(0).permute(&[2, 0, 1])),
        ("expand", |x| x.unsqueeze(0).expand(&[2, 3, 4])),
        ("slice", |x| x.slice(1, 1, 4, 2)),
        ("select", |x| x.select(0, -1)),
        ("flatten", |x| x.flatten(0, 1)),
        ("split", |x| &x.split(2, 1)[1] * 2.0),
        ("chunk", |x| x.chunk(2, 0)[0].clone()),
        ("tril", |x| x.tril(1)),
        ("triu", |x| x.triu(0)),
        ("masked_fill", |x| x.masked_fill(&x.gt_scalar(0.3), 1.0)),
        ("index_select", |x| {
            x.index_select(1, &Tensor::from_vec(vec![3i64, 0, 3], &[3]))
        }),
        ("gather", |x| {
            x.gather(1, &Tensor::from_vec(vec![0i64, 2, 1, 1, 3, 0], &[3, 2]))
        }),
        ("embedding", |x| {
            x.embedding(&Tensor::from_vec(vec![2i64, 0, 2], &[3]))
        }),
    ];
    for (name, f) in unary {
        check(name, |t| f(&t[0]), std::slice::from_ref(&a));
    }
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
    for (name, f) in [
        ("log", (|x: &Tensor| x.log()) as fn(&Tensor) -> Tensor),
        ("log1p", |x| x.log1p()),
        ("sqrt", |x| x.sqrt()),
        ("rsqrt", |x| x.rsqrt()),
        ("reciprocal", |x| x.reciprocal()),
        ("powf_frac", |x| x.powf(1.7)),
    ] {
        check(name, |t| f(&t[0]), std::slice::from_ref(&p));
    }
    check("add_bcast", |t| &t[0] + &t[1], &[a.clone(), v.clone()]);
    check("sub", |t| &t[0] - &t[1], &[a.clone(), b.clone()]);
    check("mul_bcast", |t| &t[0] * &t[1], &[a.clone(), v.clone()]);
    check("div", |t| &t[0] / &t[1], &[a.clone(), p.clone()]);
    check("pow", |t| t[0].pow(&t[1]), &[p.clone(), a.clone()]);
    check("maximum", |t| t[0].maximum(&t[1]), &[a.clone(), b.clone()]);
    check("minimum", |t| t[0].minimum(&t[1]), &[a.clone(), b.clone()]);
    check(
        "where",
        |t| Tensor::where_(&t[0].gt_scalar(0.0), &t[0], &t[1]),
        &[a.clone(), v.clone()],
    );
    check(
        "matmul",
        |t| t[0].matmul(&t[1].t()),
        &[a.clone(), b.clone()],
    );
    check(
        "matmul_batched",
        |t| t[0].matmul(&t[1]),
        &[rnd(&[2, 3, 4], 5), rnd(&[4, 2], 6)],
    );
    check(
        "matmul_broadcast",
        |t| t[0].matmul(&t[1]),
        &[rnd(&[2, 1, 3, 4], 7), rnd(&[3, 4, 2], 8)],
    );
    check(
        "matmul_vec",
        |t| t[0].matmul(&t[1]),
        &[rnd(&[4], 9), rnd(&[4, 3], 10)],
    );
    check(
        "cat",
        |t| Tensor::cat(&[&t[0], &t[1]], 0),
        &[a.clone(), v.unsqueeze(0)],
    );
    check(
        "stack",
        |t| Tensor::stack(&[&t[0], &t[1]], 1),
        &[a.clone(), b.clone()],
    );
    check(
        "scatter_add",
        |t| {
            t[0].scatter_add(
                1,
                &Tensor::from_vec(vec![0i64, 0, 3, 1, 2, 2], &[3, 2]),
                &t[1],
            )
        },
        &[a.clone(), rnd(&[3, 2], 11)],
    );
    let x = rnd(&[2, 4, 5, 5], 12);
    check(
        "conv2d",
        |t| {
            t[0].conv2d(
                &t[1],
                Some(&t[2]),
                Conv2dOptions::default().padding(1).stride(2),
            )
        },
        &[x.clone(), rnd(&[3, 4, 3, 3], 13), rnd(&[3], 14)],
    );
    check(
        "conv2d_groups",
        |t| t[0].conv2d(&t[1], None, Conv2dOptions::default().groups(2).dilation(2)),
        &[x.clone(), rnd(&[2, 2, 2, 2], 15)],
    );
    check(
        "max_pool2d",
        |t| t[0].max_pool2d((2, 2), (2, 2), (1, 1), (1, 1)),
        std::slice::from_ref(&x),
    );
    check(
        "avg_pool2d",
        |t| t[0].avg_pool2d((3, 3), (2, 2), (1, 1)),
        std::slice::from_ref(&x),
    );
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

#[test]
fn frozen_inputs_get_no_gradient_work() {
    // A weight that does not require grad stays without one while the input
    // gets its gradient. (That its GEMM is skipped is shown by counting
    // launches in tests/training.rs.)
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
