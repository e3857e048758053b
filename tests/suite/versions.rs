//! In-place changes to tensors a backward needs (PyTorch's version
//! counter): a backward that would read data changed since the forward
//! saved it stops with an error naming its node, instead of silently
//! computing a wrong gradient; changes it does not read are allowed.

use crate::common::{self, panic_text};
use crate::core_ops;

use safetensors::SafeTensors;
use tapir::nn::{Forward, Linear, Module};
use tapir::no_grad;
use tapir::optim::{Optimizer, SGD, SgdConfig};
use tapir::prelude::*;

const MODIFIED: &str = "has been modified by an in-place operation";

#[test]
fn the_version_counts_writes_and_is_shared_by_views_and_detached_handles() {
    let x = Tensor::zeros(&[2, 3]);
    assert_eq!(x.version(), 0);
    let (row, handle) = (x.select(0, 1), x.detach());
    row.add_scalar_(1.0);
    handle.mul_scalar_(2.0);
    assert_eq!([x.version(), row.version(), handle.version()], [2, 2, 2]);
    // Out-of-place results are new data at version 0.
    assert_eq!((&x + 1.0).version(), 0);
    assert_eq!((&x * 1.0).version(), 0);
}

#[test]
fn a_saved_input_changed_in_place_stops_the_backward_naming_its_node() {
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).requires_grad_(true);
    let x = Tensor::ones(&[3]);
    let loss = (&w * &x).sum();
    x.mul_scalar_(2.0);
    let msg = panic_text(|| loss.backward()).expect("the backward must refuse");
    assert!(msg.starts_with("MulBackward0: "), "{msg}");
    assert!(
        msg.contains(MODIFIED) && msg.contains("float32 [3]"),
        "{msg}"
    );
    assert!(
        msg.contains("at version 1, the backward expected version 0"),
        "{msg}"
    );
    // Without the check the gradient would be the changed x (all 2s).
    assert!(w.grad().is_none());
}

#[test]
fn a_saved_output_changed_in_place_stops_the_backward() {
    let x = Tensor::from_vec(vec![0.5f64, -1.0], &[2]).requires_grad_(true);
    let y = x.exp();
    no_grad(|| y.add_scalar_(1.0));
    let msg = panic_text(|| y.sum().backward()).expect("exp's backward reads its output");
    assert!(
        msg.starts_with("ExpBackward0: ") && msg.contains(MODIFIED),
        "{msg}"
    );
}

#[test]
fn a_change_through_a_view_or_a_detached_handle_is_seen() {
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).requires_grad_(true);
    let x = Tensor::ones(&[3]);
    let loss = (&w * &x).sum();
    x.detach().narrow(0, 1, 1).fill_(5.0);
    let msg = panic_text(|| loss.backward()).expect("the backward must refuse");
    assert!(msg.contains(MODIFIED), "{msg}");
}

#[test]
fn an_optimizer_step_between_forward_and_backward_is_caught() {
    // The classic mistake: a second backward through a graph whose weights
    // the optimizer has changed since its forward.
    let lin = Linear::new(4, 2, true);
    let x = Tensor::randn_with(&[3, 4], &Generator::new(1)).requires_grad_(true);
    let config = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    let mut opt = SGD::new(lin.parameters(), config);
    let loss = lin.forward(&x).sum();
    loss.backward_with(&Tensor::ones(&[]), true);
    opt.step();
    let msg = panic_text(|| loss.backward()).expect("x's gradient needs the old weight");
    assert!(
        msg.starts_with("AddmmBackward0: ") && msg.contains(MODIFIED),
        "{msg}"
    );
}

#[test]
fn changes_the_backward_does_not_read_are_allowed() {
    // `w + b` saves nothing; `x @ w` with `x` needing no gradient reads
    // only `x` (PyTorch saves mat2 only when mat1 requires grad).
    let w = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]).requires_grad_(true);
    let b = Tensor::ones(&[2]).to_dtype(DType::F64);
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], &[2, 2]);
    let loss = (&x.matmul(&w) + &b).sum();
    b.mul_scalar_(3.0);
    no_grad(|| w.mul_scalar_(10.0));
    loss.backward();
    // d/dw sum(x @ w) = x^T @ ones: column sums of x per row of w.
    assert_eq!(w.grad().unwrap().to_vec::<f64>(), vec![4.0, 4.0, 6.0, 6.0]);
}

#[test]
fn a_checkpoint_refuses_an_input_changed_before_its_recompute() {
    let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).requires_grad_(true);
    let x = Tensor::ones(&[2]);
    let wc = w.clone();
    let y = tapir::checkpoint(move |xs| &xs[0] * &wc, std::slice::from_ref(&x));
    x.add_scalar_(1.0);
    let msg = panic_text(|| y.sum().backward()).expect("the recompute reads x again");
    assert!(msg.contains(MODIFIED), "{msg}");
}

/// The fused ops the golden list does not hold check what they saved too:
/// each case changes one thing its backward reads, and names the node.
#[test]
fn the_fused_ops_check_what_they_saved() {
    let g = Generator::new(7);
    let grad_leaf = |shape: &[usize]| Tensor::randn_with(shape, &g).requires_grad_(true);
    type Case<'a> = (&'static str, Box<dyn Fn() -> Option<String> + 'a>);
    let cases: Vec<Case<'_>> = vec![
        (
            "NativeLayerNormBackward0",
            Box::new(|| {
                let (x, w) = (grad_leaf(&[3, 4]), grad_leaf(&[4]));
                let y = x.layer_norm(&[4], Some(&w), None, 1e-5);
                no_grad(|| w.mul_scalar_(2.0));
                panic_text(|| y.sum().backward())
            }),
        ),
        (
            "ScaledDotProductFlashAttentionForCpuBackward0",
            Box::new(|| {
                let (q, k, v) = (
                    grad_leaf(&[1, 2, 5, 8]),
                    grad_leaf(&[1, 2, 5, 8]),
                    grad_leaf(&[1, 2, 5, 8]),
                );
                let y = tapir::nn::scaled_dot_product_attention(&q, &k, &v, None, 0.0, true, None);
                no_grad(|| k.add_scalar_(1.0));
                panic_text(|| y.sum().backward())
            }),
        ),
        (
            "MaxPool2DWithIndicesBackward0",
            Box::new(|| {
                let x = grad_leaf(&[1, 1, 4, 4]);
                let (y, idx) = x.max_pool2d_with_indices((2, 2), (2, 2), (0, 0), (1, 1));
                idx.zero_();
                panic_text(|| y.sum().backward())
            }),
        ),
        (
            "MaxBackward0",
            Box::new(|| {
                let x = grad_leaf(&[3, 4]);
                let (y, idx) = x.max_dim(1, false);
                idx.zero_();
                panic_text(|| y.sum().backward())
            }),
        ),
    ];
    for (node, case) in cases {
        let msg = case().unwrap_or_else(|| panic!("{node}: the backward ran"));
        assert!(
            msg.starts_with(&format!("{node}: ")) && msg.contains(MODIFIED),
            "{msg}"
        );
    }
}

/// What one golden case's gradients come to, or the backward's refusal,
/// with `change` applied in place after the forward.
#[derive(Clone, Copy, Debug)]
enum Change {
    Nothing,
    Input(usize),
    Output(usize),
}

fn run_case(
    st: &SafeTensors,
    c: &serde_json::Value,
    change: Change,
) -> Result<Vec<Vec<u64>>, String> {
    let name = c["name"].as_str().unwrap();
    let grads = core_ops::grads(c);
    let bases: Vec<Tensor> = (0..grads.len())
        .map(|k| {
            let t = common::load_cpu(st, &format!("{name}.in{k}"));
            t.requires_grad_(grads[k])
        })
        .collect();
    let xs: Vec<Tensor> = (0..grads.len())
        .map(|k| core_ops::view(&bases[k], &c["views"][k]))
        .collect();
    let outs = core_ops::run(c["op"].as_str().unwrap(), &c["args"], &xs).unwrap();
    let modify = |t: &Tensor| {
        // An expanded output takes only one value written to all of it.
        let expanded = (t.shape().iter().zip(t.strides())).any(|(&n, &s)| n > 1 && s == 0);
        no_grad(|| match t.dtype().is_float() && !expanded {
            true => t.mul_scalar_(1.5),
            // Zero is a valid index and a valid mask.
            false => t.zero_(),
        });
    };
    match change {
        Change::Nothing => {}
        Change::Input(k) => modify(&bases[k]),
        Change::Output(j) => modify(&outs[j]),
    }
    let mut total = Tensor::scalar(0.0f64);
    for (j, o) in outs.iter().enumerate() {
        let key = format!("{name}.w{j}");
        if st.tensor(&key).is_ok() {
            total = &total + &(o * &common::load_cpu(st, &key)).sum();
        }
    }
    if let Some(msg) = panic_text(|| total.backward()) {
        return Err(msg);
    }
    Ok((0..grads.len())
        .filter(|&k| grads[k])
        .map(|k| {
            let g = bases[k].grad().unwrap().to_vec::<f64>();
            g.iter().map(|v| v.to_bits()).collect()
        })
        .collect())
}

/// Every golden op with a gradient, each of its inputs and outputs changed
/// in place between forward and backward: the backward either refuses,
/// naming the change, or gives exactly the gradients it gives without the
/// change (it did not read what changed). A backward that read the
/// changed data unchecked would give other gradients and fail here.
#[test]
fn every_golden_op_refuses_or_ignores_a_change_to_its_inputs_and_outputs() {
    let (bytes, manifest) = core_ops::core_goldens();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (mut refused, mut allowed, mut failures) = (vec![], 0, vec![]);
    for c in manifest["cases"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        if !core_ops::grads(c).contains(&true) {
            continue;
        }
        let want = run_case(&st, c, Change::Nothing)
            .unwrap_or_else(|e| panic!("{name}: backward failed without a change: {e}"));
        let n_out = c["n_out"].as_u64().unwrap() as usize;
        let changes = (0..c["n_in"].as_u64().unwrap() as usize)
            .map(Change::Input)
            .chain((0..n_out).map(Change::Output));
        for change in changes {
            match run_case(&st, c, change) {
                Err(msg) if msg.contains(MODIFIED) => refused.push(format!("{name} {change:?}")),
                Err(msg) => failures.push(format!("{name} {change:?}: another panic: {msg}")),
                Ok(got) if got == want => allowed += 1,
                Ok(_) => {
                    failures.push(format!("{name} {change:?}: the gradients changed silently"))
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Both outcomes occur often: the check is neither dead nor everywhere.
    assert!(
        refused.len() >= 50 && allowed >= 50,
        "{} refused, {allowed} allowed",
        refused.len()
    );
    eprintln!("refused ({}):\n{}", refused.len(), refused.join("\n"));
}
