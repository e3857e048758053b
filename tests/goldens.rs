//! Replays the PyTorch goldens of `scripts/gen_goldens.py` (committed under
//! `tests/goldens/`): every case's outputs and input gradients, in f64 and
//! again in f32, with the tolerances stated below.

mod common;

use common::{close, dev};
use safetensors::{Dtype, SafeTensors};
use serde_json::Value;
use tapir::prelude::*;

const F64_TOL: (f64, f64) = (1e-10, 1e-9); // (atol, rtol)
const F32_TOL: (f64, f64) = (2e-4, 2e-4);

fn load(st: &SafeTensors, key: &str) -> Tensor {
    dev(load_cpu(st, key))
}

fn load_cpu(st: &SafeTensors, key: &str) -> Tensor {
    let v = st
        .tensor(key)
        .unwrap_or_else(|_| panic!("golden {key} missing"));
    let shape = v.shape().to_vec();
    match v.dtype() {
        Dtype::F64 => Tensor::from_vec(
            v.data()
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            &shape,
        ),
        Dtype::I64 => Tensor::from_vec(
            v.data()
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            &shape,
        ),
        other => panic!("unexpected golden dtype {other:?}"),
    }
}

fn view(t: &Tensor, recipe: &Value) -> Tensor {
    match recipe.as_str() {
        None => t.clone(),
        Some("t") => t.transpose(-1, -2),
        Some("step2") => t.slice(0, 0, isize::MAX, 2),
        Some("expand0") => {
            let mut s = t.shape().to_vec();
            s[0] = 3;
            t.expand(&s)
        }
        Some(r) => panic!("unknown view recipe {r}"),
    }
}

fn i(a: &Value, k: &str) -> isize {
    a[k].as_i64().unwrap_or_else(|| panic!("arg {k}")) as isize
}
fn u(a: &Value, k: &str) -> usize {
    i(a, k) as usize
}
fn f(a: &Value, k: &str) -> f64 {
    a[k].as_f64().unwrap()
}
fn b(a: &Value, k: &str) -> bool {
    a[k].as_bool().unwrap()
}
fn list(a: &Value, k: &str) -> Vec<isize> {
    a[k].as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap() as isize)
        .collect()
}
fn f64s(t: &Tensor) -> Tensor {
    t.to_dtype(DType::F64)
}

/// The op table; mirrors `run` in scripts/gen_goldens.py name for name.
fn run(op: &str, a: &Value, x: &[Tensor]) -> Vec<Tensor> {
    let one = |t: Tensor| vec![t];
    match op {
        "neg" => one(x[0].neg()),
        "exp" => one(x[0].exp()),
        "log" => one(x[0].log()),
        "log1p" => one(x[0].log1p()),
        "sqrt" => one(x[0].sqrt()),
        "rsqrt" => one(x[0].rsqrt()),
        "abs" => one(x[0].abs()),
        "sign" => one(x[0].sign()),
        "sin" => one(x[0].sin()),
        "cos" => one(x[0].cos()),
        "tanh" => one(x[0].tanh()),
        "sigmoid" => one(x[0].sigmoid()),
        "relu" => one(x[0].relu()),
        "erf" => one(x[0].erf()),
        "silu" => one(x[0].silu()),
        "softplus" => one(x[0].softplus()),
        "square" => one(x[0].square()),
        "reciprocal" => one(x[0].reciprocal()),
        "gelu" => one(x[0].gelu()),
        "gelu_tanh" => one(x[0].gelu_tanh()),
        "sum" => one(x[0].sum()),
        "mean" => one(x[0].mean()),
        "max" => one(x[0].max()),
        "min" => one(x[0].min()),
        "var" => one(x[0].var()),
        "std" => one(x[0].std()),
        "add" => one(&x[0] + &x[1]),
        "sub" => one(&x[0] - &x[1]),
        "mul" => one(&x[0] * &x[1]),
        "div" => one(&x[0] / &x[1]),
        "pow" => one(x[0].pow(&x[1])),
        "maximum" => one(x[0].maximum(&x[1])),
        "minimum" => one(x[0].minimum(&x[1])),
        "matmul" => one(x[0].matmul(&x[1])),
        "bmm" => one(x[0].bmm(&x[1])),
        "eq" => one(f64s(&x[0].eq(&x[1]))),
        "ne" => one(f64s(&x[0].ne(&x[1]))),
        "lt" => one(f64s(&x[0].lt(&x[1]))),
        "le" => one(f64s(&x[0].le(&x[1]))),
        "gt" => one(f64s(&x[0].gt(&x[1]))),
        "ge" => one(f64s(&x[0].ge(&x[1]))),
        "logical_and" => one(f64s(&x[0].gt_scalar(0.0).logical_and(&x[1].gt_scalar(0.0)))),
        "logical_or" => one(f64s(&x[0].gt_scalar(0.0).logical_or(&x[1].gt_scalar(0.0)))),
        "logical_not" => one(f64s(&x[0].gt_scalar(0.0).logical_not())),
        "leaky_relu" => one(x[0].leaky_relu(f(a, "slope"))),
        "powf" => one(x[0].powf(f(a, "e"))),
        "clamp" => one(x[0].clamp(f(a, "min"), f(a, "max"))),
        "add_scalar" => one(&x[0] + f(a, "v")),
        "mul_scalar" => one(&x[0] * f(a, "v")),
        "rsub_scalar" => one(f(a, "v") - &x[0]),
        "div_scalar" => one(&x[0] / f(a, "v")),
        "sum_dims" => one(x[0].sum_dims(&list(a, "dims"), b(a, "keepdim"))),
        "mean_dims" => one(x[0].mean_dims(&list(a, "dims"), b(a, "keepdim"))),
        "var_dims" => one(x[0].var_dims(&list(a, "dims"), u(a, "correction"), b(a, "keepdim"))),
        "std_dims" => one(x[0].std_dims(&list(a, "dims"), u(a, "correction"), b(a, "keepdim"))),
        "logsumexp" => one(x[0].logsumexp(&list(a, "dims"), b(a, "keepdim"))),
        "norm" => one(x[0].norm(f(a, "p"))),
        "max_dim" => {
            let (v, ix) = x[0].max_dim(i(a, "dim"), b(a, "keepdim"));
            vec![v, f64s(&ix)]
        }
        "min_dim" => {
            let (v, ix) = x[0].min_dim(i(a, "dim"), b(a, "keepdim"));
            vec![v, f64s(&ix)]
        }
        "amax" => one(x[0].amax_dim(i(a, "dim"), b(a, "keepdim"))),
        "argmax" => one(f64s(&x[0].argmax(i(a, "dim"), b(a, "keepdim")))),
        "softmax" => one(x[0].softmax(i(a, "dim"))),
        "log_softmax" => one(x[0].log_softmax(i(a, "dim"))),
        "reshape" => one(x[0].reshape(&list(a, "shape"))),
        "transpose" => one(x[0].transpose(i(a, "a"), i(a, "b"))),
        "permute" => one(x[0].permute(&list(a, "perm"))),
        "unsqueeze" => one(x[0].unsqueeze(i(a, "dim"))),
        "squeeze" => one(x[0].squeeze()),
        "expand" => one(x[0].expand(
            &list(a, "shape")
                .iter()
                .map(|&s| s as usize)
                .collect::<Vec<_>>(),
        )),
        "slice" => one(x[0].slice(i(a, "dim"), i(a, "start"), i(a, "end"), u(a, "step"))),
        "select" => one(x[0].select(i(a, "dim"), i(a, "index"))),
        "flatten" => one(x[0].flatten(i(a, "start"), i(a, "end"))),
        "unflatten" => one(x[0].unflatten(i(a, "dim"), &list(a, "sizes"))),
        "cat" => one(Tensor::cat(&x.iter().collect::<Vec<_>>(), i(a, "dim"))),
        "stack" => one(Tensor::stack(&x.iter().collect::<Vec<_>>(), i(a, "dim"))),
        "split" => x[0].split(u(a, "size"), i(a, "dim")),
        "chunk" => x[0].chunk(u(a, "chunks"), i(a, "dim")),
        "tril" => one(x[0].tril(i(a, "k"))),
        "triu" => one(x[0].triu(i(a, "k"))),
        "where" => one(Tensor::where_(&x[0].gt_scalar(0.0), &x[1], &x[2])),
        "masked_fill" => one(x[0].masked_fill(&x[1].gt_scalar(0.0), f(a, "v"))),
        "index_select" => one(x[0].index_select(i(a, "dim"), &x[1])),
        "gather" => one(x[0].gather(i(a, "dim"), &x[1])),
        "scatter_add" => one(x[0].scatter_add(i(a, "dim"), &x[1], &x[2])),
        "embedding" => one(x[0].embedding(&x[1])),
        "conv2d" => {
            let o = Conv2dOptions::default()
                .stride(u(a, "stride"))
                .padding(u(a, "padding"))
                .dilation(u(a, "dilation"))
                .groups(u(a, "groups"));
            one(x[0].conv2d(&x[1], x.get(2), o))
        }
        "max_pool2d" => {
            let (k, s, p, d) = (
                u(a, "kernel"),
                u(a, "stride"),
                u(a, "padding"),
                u(a, "dilation"),
            );
            one(x[0].max_pool2d((k, k), (s, s), (p, p), (d, d)))
        }
        "avg_pool2d" => {
            let (k, s, p) = (u(a, "kernel"), u(a, "stride"), u(a, "padding"));
            one(x[0].avg_pool2d((k, k), (s, s), (p, p)))
        }
        "unfold" => {
            let k = u(a, "kernel");
            let o = Conv2dOptions::default()
                .stride(u(a, "stride"))
                .padding(u(a, "padding"))
                .dilation(u(a, "dilation"));
            one(x[0].unfold2d((k, k), o))
        }
        other => panic!("golden op {other} has no entry in the Rust op table"),
    }
}

fn check_case(st: &SafeTensors, c: &Value, dtype: DType, tol: (f64, f64)) -> Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let n_in = c["n_in"].as_u64().unwrap() as usize;
    let grads: Vec<bool> = c["grads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_bool().unwrap())
        .collect();
    let leaves: Vec<Tensor> = (0..n_in)
        .map(|k| {
            let t = load(st, &format!("{name}.in{k}"));
            if c["in_int"][k].as_bool().unwrap() {
                t
            } else {
                let t = t.to_dtype(dtype);
                if grads[k] { t.requires_grad_(true) } else { t }
            }
        })
        .collect();
    let views: Vec<Tensor> = leaves
        .iter()
        .enumerate()
        .map(|(k, t)| view(t, &c["views"][k]))
        .collect();
    let outs = run(c["op"].as_str().unwrap(), &c["args"], &views);
    let mut loss: Option<Tensor> = None;
    for (k, o) in outs.iter().enumerate() {
        close(
            &format!("{name} ({dtype}) out{k}"),
            o,
            &load(st, &format!("{name}.out{k}")),
            tol.0,
            tol.1,
        )?;
        if o.requires_grad() {
            let w = load(st, &format!("{name}.w{k}")).to_dtype(o.dtype());
            let term = (o * &w).sum();
            loss = Some(match loss {
                None => term,
                Some(l) => &l + &term,
            });
        }
    }
    if let Some(l) = loss {
        l.backward();
    }
    for (k, leaf) in leaves.iter().enumerate() {
        if grads[k] {
            let g = leaf.grad().unwrap_or_else(|| Tensor::zeros_like(leaf));
            close(
                &format!("{name} ({dtype}) grad{k}"),
                &g,
                &load(st, &format!("{name}.grad{k}")),
                tol.0,
                tol.1,
            )?;
        }
    }
    Ok(())
}

fn replay(dtype: DType, tol: (f64, f64)) {
    let dir = common::goldens_dir();
    let bytes = std::fs::read(format!("{dir}/core.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/core.json")).unwrap())
            .unwrap();
    let cases = manifest["cases"].as_array().unwrap();
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_case(&st, c, dtype, tol)
            }));
            match r {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(p) => Some(format!(
                    "{}: panicked: {:?}",
                    c["name"],
                    p.downcast_ref::<String>()
                )),
            }
        })
        .collect();
    assert!(
        cases.len() >= 140,
        "expected the full golden set, found {} cases",
        cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} golden cases failed in {dtype}:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn goldens_match_pytorch_in_f64() {
    replay(DType::F64, F64_TOL);
}

#[test]
fn goldens_match_pytorch_in_f32() {
    replay(DType::F32, F32_TOL);
}
