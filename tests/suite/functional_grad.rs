//! `autograd::functional` (jacobian, hessian, vjp, jvp, hvp, vhp, with and
//! without `create_graph`, `strict`) and meta-learning through
//! `create_graph` (MAML, by hand and through `functional_call`), against
//! PyTorch's values in `tests/goldens/double_backward.json`.

use crate::double_backward::{Golden, create_graph};
use tapir::autograd::{self, grad_with};
use tapir::nn;
use tapir::{Conv2dOptions, DType, Tensor};

#[test]
fn functional_jacobian_hessian_and_products_match_pytorch() {
    use tapir::autograd::functional::{hessian, hvp, jacobian, jvp, vjp};
    let g = Golden::load("functional");
    let (x, w) = (g.tensor("inputs", "x"), g.tensor("inputs", "w"));
    let (tx, tw, u) = (
        g.tensor("inputs", "tx"),
        g.tensor("inputs", "tw"),
        g.tensor("inputs", "u"),
    );
    let f = |t: &[Tensor]| t[0].matmul(&t[1]).tanh();
    let scalar = |t: &[Tensor]| t[0].matmul(&t[1]).tanh().powf(2.0).sum();
    let inputs = [x.clone(), w.clone()];
    let j = jacobian(f, &inputs);
    assert_eq!(
        (j[0].shape(), j[1].shape()),
        (&[2, 3, 2, 4][..], &[2, 3, 4, 3][..])
    );
    g.check("jx", &j[0]);
    g.check("jw", &j[1]);
    let h = hessian(scalar, &inputs);
    assert_eq!(h[0][1].shape(), &[2, 4, 4, 3]);
    for (name, t) in [
        ("hxx", &h[0][0]),
        ("hxw", &h[0][1]),
        ("hwx", &h[1][0]),
        ("hww", &h[1][1]),
    ] {
        g.check(name, t);
    }
    let (y, v) = vjp(f, &inputs, &u);
    g.check("vjp_x", &v[0]);
    g.check("vjp_w", &v[1]);
    assert!(!y.requires_grad());
    let (_, jv) = jvp(f, &inputs, &[tx.clone(), tw.clone()]);
    g.check("jvp", &jv);
    let (_, hv) = hvp(scalar, &inputs, &[tx, tw]);
    g.check("hvp_x", &hv[0]);
    g.check("hvp_w", &hv[1]);
    // The caller's tensors are untouched: no grad, no graph.
    assert!(!x.requires_grad() && x.grad().is_none());
}

#[test]
fn functional_create_graph_results_differentiate_as_pytorch() {
    use tapir::autograd::functional::{
        FunctionalOptions, hessian_with, hvp_with, jacobian_with, jvp_with, vhp_with, vjp_with,
    };
    let g = Golden::load("functional_create_graph");
    let (x, w) = (g.leaf("x"), g.leaf("w"));
    let (tx, tw, u) = (
        g.tensor("inputs", "tx"),
        g.tensor("inputs", "tw"),
        g.tensor("inputs", "u"),
    );
    let f = |t: &[Tensor]| t[0].matmul(&t[1]).tanh();
    let scalar = |t: &[Tensor]| t[0].matmul(&t[1]).tanh().powf(2.0).sum();
    let opts = FunctionalOptions {
        create_graph: true,
        ..Default::default()
    };
    let inputs = [x.clone(), w.clone()];
    let sq = |ts: &[&Tensor]| {
        (ts.iter().map(|t| t.powf(2.0).sum()))
            .reduce(|a, b| &a + &b)
            .unwrap()
    };
    let tangents = [tx, tw];
    let h = hessian_with(scalar, &inputs, opts);
    let (y, v) = vjp_with(f, &inputs, &u, opts);
    let losses = [
        (
            "jacobian",
            sq(&jacobian_with(f, &inputs, opts).iter().collect::<Vec<_>>()),
        ),
        ("hessian", sq(&h.iter().flatten().collect::<Vec<_>>())),
        ("vjp", sq(&[&y, &v[0], &v[1]])),
        ("jvp", sq(&[&jvp_with(f, &inputs, &tangents, opts).1])),
        (
            "hvp",
            sq(&hvp_with(scalar, &inputs, &tangents, opts)
                .1
                .iter()
                .collect::<Vec<_>>()),
        ),
        (
            "vhp",
            sq(&vhp_with(scalar, &inputs, &tangents, opts)
                .1
                .iter()
                .collect::<Vec<_>>()),
        ),
    ];
    for (name, loss) in losses {
        g.check(name, &loss);
        let d = autograd::grad(&[&loss], &[&x, &w]);
        g.check(&format!("{name}_dx"), &d[0]);
        g.check(&format!("{name}_dw"), &d[1]);
    }
    // Nothing was accumulated into the caller's tensors on the way.
    assert!(x.grad().is_none() && w.grad().is_none());
}

#[test]
fn functional_strict_refuses_what_pytorch_refuses() {
    use tapir::autograd::functional::{
        FunctionalOptions, hessian_with, jacobian_with, jvp_with, vhp_with,
    };
    let a = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
    let b = Tensor::from_vec(vec![3.0f64], &[1]);
    let strict = FunctionalOptions {
        strict: true,
        ..Default::default()
    };
    let both = FunctionalOptions {
        create_graph: true,
        strict: true,
    };
    type Call<'a> = Box<dyn Fn() + 'a>;
    let msg = |f: &dyn Fn()| crate::common::panic_message(f);
    let cases: Vec<(Call, &str)> = vec![
        (
            Box::new(|| {
                drop(jacobian_with(
                    |t| &t[0] * 2.0,
                    &[a.clone(), b.clone()],
                    strict,
                ))
            }),
            "autograd::functional::jacobian (strict): the output does not depend on input 1",
        ),
        (
            Box::new(|| {
                drop(jacobian_with(
                    |_| Tensor::ones(&[2]),
                    std::slice::from_ref(&a),
                    strict,
                ))
            }),
            "autograd::functional::jacobian (strict): the output does not depend on the inputs",
        ),
        (
            // Linear in a: its gradient is a constant.
            Box::new(|| {
                drop(hessian_with(
                    |t| (&t[0] * 2.0).sum(),
                    std::slice::from_ref(&a),
                    strict,
                ))
            }),
            "autograd::functional::hessian (strict): the gradient with respect to input 0 (f is linear in it) does \
             not depend on the inputs",
        ),
        (
            // Quadratic: the Hessian is a constant, refused under create_graph.
            // (As PyTorch's, the check is on the graph: `powf(2.0)`'s
            // Hessian is `2 x⁰`, which records, and passes.)
            Box::new(|| {
                drop(hessian_with(
                    |t| (&t[0] * &t[0]).sum(),
                    std::slice::from_ref(&a),
                    both,
                ))
            }),
            "autograd::functional::hessian (strict): the Hessian with respect to input 0 (create_graph) does not \
             depend on the inputs",
        ),
        (
            Box::new(|| {
                drop(jvp_with(
                    |t| &t[0] * 3.0,
                    std::slice::from_ref(&a),
                    std::slice::from_ref(&a),
                    both,
                ))
            }),
            "autograd::functional::jvp (strict): the Jacobian-vector product with respect to input 0 \
             (create_graph) does not depend on the inputs",
        ),
        (
            Box::new(|| {
                drop(vhp_with(
                    |t| &t[0].powf(3.0).sum() + &t[1].sum(),
                    &[a.clone(), b.clone()],
                    &[a.clone(), b.clone()],
                    strict,
                ))
            }),
            "autograd::functional::vhp (strict): the gradient with respect to input 1 (f is linear in it) does \
             not depend on the inputs",
        ),
    ];
    for (call, want) in cases {
        assert_eq!(msg(&*call), want);
    }
    // Not strict: zeros, as PyTorch's default.
    let h = hessian_with(
        |t| (&t[0] * 2.0).sum(),
        std::slice::from_ref(&a),
        FunctionalOptions::default(),
    );
    assert_eq!(h[0][0].to_vec::<f64>(), vec![0.0; 4]);
    // Strict where everything depends on everything passes (PyTorch 2.15
    // raises in exactly the six cases above and passes these two).
    let j = jacobian_with(|t| &t[0] * &t[1], &[a.clone(), b.clone()], both);
    assert_eq!(j[1].to_vec::<f64>(), vec![1.0, 2.0]);
    let h = hessian_with(|t| t[0].powf(2.0).sum(), std::slice::from_ref(&a), both);
    assert_eq!(h[0][0].to_vec::<f64>(), vec![2.0, 0.0, 0.0, 2.0]);
}

#[test]
fn functional_gives_zeros_where_the_output_ignores_an_input() {
    use tapir::autograd::functional::{hessian, jacobian};
    let a = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
    let b = Tensor::from_vec(vec![3.0f64], &[1]);
    let j = jacobian(|t| &t[0] * 2.0, &[a.clone(), b.clone()]);
    assert_eq!(j[1].shape(), &[2, 1]);
    assert_eq!(j[1].to_vec::<f64>(), vec![0.0, 0.0]);
    // Linear in a: every second derivative is zero.
    let h = hessian(|t| (&t[0] * 2.0).sum(), &[a, b]);
    assert_eq!(h[0][0].to_vec::<f64>(), vec![0.0; 4]);
    assert_eq!(h[1][1].to_vec::<f64>(), vec![0.0]);
}

#[test]
fn maml_meta_gradient_matches_pytorch() {
    let g = Golden::load("maml_step");
    let names = ["conv_w", "conv_b", "bn_w", "bn_b", "fc_w", "fc_b"];
    let p: Vec<Tensor> = names.iter().map(|k| g.leaf(k)).collect();
    let (xs, xq) = (g.tensor("inputs", "xs"), g.tensor("inputs", "xq"));
    let ys = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2], &[6]);
    let yq = Tensor::from_vec(vec![2i64, 1, 0, 0, 2, 1], &[6]);
    let model = |x: &Tensor, q: &[Tensor]| {
        let h = x.conv2d(&q[0], Some(&q[1]), Conv2dOptions::default().padding(1));
        let h = nn::batch_norm(&h, None, None, Some(&q[2]), Some(&q[3]), true, 0.1, 1e-5);
        let h = nn::max_pool2d(&h.relu(), (2, 2), (2, 2), (0, 0), (1, 1), false);
        nn::linear(&h.reshape(&[x.size(0) as isize, -1]), &q[4], Some(&q[5]))
    };
    let loss_s = nn::cross_entropy(&model(&xs, &p), &ys);
    let refs: Vec<&Tensor> = p.iter().collect();
    let grads = grad_with(&[&loss_s], &refs, create_graph(vec![]));
    // The inner step keeps the graph: the fast weights are functions of p.
    let fast: Vec<Tensor> = (p.iter().zip(&grads))
        .map(|(w, gr)| w - &(gr.as_ref().unwrap() * 0.4))
        .collect();
    let loss_q = nn::cross_entropy(&model(&xq, &fast), &yq);
    let meta = autograd::grad(&[&loss_q], &refs);
    g.check("loss_s", &loss_s);
    g.check("loss_q", &loss_q);
    for (k, m) in names.iter().zip(&meta) {
        g.check(&format!("meta_{k}"), m);
    }
}

#[test]
fn maml_through_functional_call_on_a_module_matches_pytorch() {
    use std::collections::HashMap;
    use tapir::nn::{
        BatchNorm, Conv2d, Flatten, Forward, Linear, MaxPool2d, Module, ReLU, Sequential,
    };
    let g = Golden::load("maml_step");
    let mut model = Sequential::new()
        .add(Conv2d::new(
            1,
            4,
            (3, 3),
            Conv2dOptions::default().padding(1),
            true,
        ))
        .add(BatchNorm::new_2d(4))
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(Flatten::default())
        .add(Linear::new(16, 3, true));
    let names = [
        ("0.weight", "conv_w"),
        ("0.bias", "conv_b"),
        ("1.weight", "bn_w"),
        ("1.bias", "bn_b"),
        ("5.weight", "fc_w"),
        ("5.bias", "fc_b"),
    ];
    model.to_dtype(DType::F64);
    let own: HashMap<String, Tensor> = names
        .iter()
        .map(|(m, k)| (m.to_string(), g.leaf(k)))
        .collect();
    let (xs, xq) = (g.tensor("inputs", "xs"), g.tensor("inputs", "xq"));
    let ys = Tensor::from_vec(vec![0i64, 1, 2, 0, 1, 2], &[6]);
    let yq = Tensor::from_vec(vec![2i64, 1, 0, 0, 2, 1], &[6]);
    let loss_s = nn::functional_call(&mut model, &own, |m| {
        nn::cross_entropy(&m.forward(&xs), &ys)
    });
    let theta: Vec<&Tensor> = names.iter().map(|(m, _)| &own[*m]).collect();
    let grads = grad_with(&[&loss_s], &theta, create_graph(vec![]));
    let fast: HashMap<String, Tensor> = (names.iter().zip(&grads))
        .map(|((m, _), gr)| (m.to_string(), &own[*m] - &(gr.as_ref().unwrap() * 0.4)))
        .collect();
    let loss_q = nn::functional_call(&mut model, &fast, |m| {
        nn::cross_entropy(&m.forward(&xq), &yq)
    });
    let meta = autograd::grad(&[&loss_q], &theta);
    g.check("loss_s", &loss_s);
    g.check("loss_q", &loss_q);
    for ((_, k), m) in names.iter().zip(&meta) {
        g.check(&format!("meta_{k}"), m);
    }
    // The module's own parameters are back (its random init, not the
    // golden values), and no gradient reached them.
    let after = model.named_parameters();
    assert_eq!(after.len(), 6);
    for (n, t) in &after {
        assert!(t.grad().is_none(), "{n} got a gradient");
        assert_ne!(
            t.to_vec::<f64>(),
            own[n.as_str()].to_vec::<f64>(),
            "{n} kept the passed tensor"
        );
    }
    let msg = crate::common::panic_message(|| {
        let bad = HashMap::from([("0.weights".to_string(), own["0.weight"].clone())]);
        nn::functional_call(&mut model, &bad, |m| m.forward(&xs));
    });
    assert!(
        msg.contains("no parameter or buffer named [\"0.weights\"]"),
        "{msg}"
    );
}
