//! `linear_cross_entropy` and `LinearCrossEntropyLoss` against PyTorch 2.15
//! (`scripts/gen_lce_goldens.py`): both paths, every reduction, f64 and
//! f32; the chunk sizes PyTorch picks; finite differences through the
//! chunked path; its retain-graph rule; errors; the module's state dict
//! and repr.

use crate::common::*;
use safetensors::SafeTensors;
use serde_json::Value;
use tapir::autograd::{GradOptions, grad_with};
use tapir::gradcheck;
use tapir::nn::{
    ChunkingMethod, LinearCrossEntropyArgs, LinearCrossEntropyLoss, LinearCrossEntropyOptions,
    Module, Reduction, linear_cross_entropy_with,
};
use tapir::prelude::*;

const CHUNKED: &str = "LinearCrossEntropyChunkedBackward0";

fn options_of(v: &Value) -> Option<LinearCrossEntropyOptions> {
    if v.is_null() {
        return None;
    }
    let method = match v["chunking_method"].as_str() {
        None => None,
        Some("auto") => Some(ChunkingMethod::Auto),
        Some(m) => {
            let factor = m.split_once(':').map_or(1, |(_, n)| n.parse().unwrap());
            Some(ChunkingMethod::AspectRatio(factor))
        }
    };
    Some(LinearCrossEntropyOptions {
        batch_chunk_size: v["batch_chunk_size"].as_u64().map(|b| b as usize),
        chunking_method: method,
        allow_retain_graph: v["allow_retain_graph"].as_bool().unwrap_or(false),
    })
}

fn check_case(st: &SafeTensors, c: &Value, dtype: DType, tol: f64) -> Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let get = |k: &str| load(st, &format!("{name}.{k}"));
    let float = |t: Tensor| t.to_dtype(dtype).requires_grad_(true);
    let target = get("target");
    let target = if target.dtype().is_float() {
        target.to_dtype(dtype)
    } else {
        target
    };
    for (reduction, rn) in [
        (Reduction::None, "none"),
        (Reduction::Mean, "mean"),
        (Reduction::Sum, "sum"),
    ] {
        let (x, w) = (float(get("x")), float(get("w")));
        let bias = c["bias"].as_bool().unwrap().then(|| float(get("bias")));
        let args = LinearCrossEntropyArgs {
            linear_bias: bias.clone(),
            weight: c["weight"]
                .as_bool()
                .unwrap()
                .then(|| get("weight").to_dtype(dtype)),
            reduction,
            ignore_index: c["ignore_index"].as_i64(),
            label_smoothing: c["label_smoothing"].as_f64().unwrap(),
            options: options_of(&c["options"]),
        };
        let out = linear_cross_entropy_with(&x, &w, &target, &args);
        let what = format!("{name}/{rn} ({dtype})");
        if reduction != Reduction::None {
            let chunked = out.grad_fn_name() == Some(CHUNKED);
            if chunked != c["chunked"].as_bool().unwrap() {
                return Err(format!(
                    "{what}: took the wrong path ({:?})",
                    out.grad_fn_name()
                ));
            }
        }
        close(&what, &out, &get(&format!("{rn}.out")), tol, tol)?;
        if out.ndim() == 0 {
            out.backward();
        } else {
            (&out * &loss_weights(out.shape(), dtype)).sum().backward();
        }
        close(
            &format!("{what} grad x"),
            &x.grad().unwrap(),
            &get(&format!("{rn}.grad_x")),
            tol,
            tol,
        )?;
        close(
            &format!("{what} grad w"),
            &w.grad().unwrap(),
            &get(&format!("{rn}.grad_w")),
            tol,
            tol,
        )?;
        if let Some(b) = &bias {
            close(
                &format!("{what} grad bias"),
                &b.grad().unwrap(),
                &get(&format!("{rn}.grad_bias")),
                tol,
                tol,
            )?;
        }
    }
    Ok(())
}

#[test]
fn both_paths_match_pytorch_for_every_reduction() {
    let (bytes, m) = read_goldens("linear_cross_entropy");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for (dtype, tol) in [(DType::F64, 1e-9), (DType::F32, 1e-4)] {
        let n = run_all(m["cases"].as_array().unwrap().iter(), |c| {
            check_case(&st, c, dtype, tol)
        });
        assert_eq!(n, 14);
    }
}

#[test]
fn chunk_sizes_are_pytorchs() {
    let (_, m) = read_goldens("linear_cross_entropy");
    let mut failures = vec![];
    let sizes = m["chunk_sizes"].as_array().unwrap();
    for s in sizes {
        let spec = &s["options"];
        let o = LinearCrossEntropyOptions {
            batch_chunk_size: spec["batch_chunk_size"].as_u64().map(|b| b as usize),
            chunking_method: match spec.get("chunking_method") {
                None => Some(ChunkingMethod::Auto),
                Some(Value::Null) => None,
                Some(m) => {
                    options_of(&serde_json::json!({ "chunking_method": m }))
                        .unwrap()
                        .chunking_method
                }
            },
            allow_retain_graph: false,
        };
        let n = |k: &str| s[k].as_u64().unwrap() as usize;
        let dtype = if s["half"].as_bool().unwrap() {
            DType::BF16
        } else {
            DType::F32
        };
        let prob = s["prob"].as_bool().unwrap();
        let got = panic_text(|| {
            let size = o.chunk_size(
                n("n"),
                n("in_features"),
                n("num_classes"),
                dtype,
                Device::Cpu,
                prob,
            );
            panic!("size {size}")
        })
        .unwrap();
        let ok = match &s["chunk"] {
            Value::Number(want) => got == format!("size {want}"),
            Value::String(why) => {
                let sizes = why
                    .split("chunk sizes ")
                    .nth(1)
                    .unwrap()
                    .split(')')
                    .next()
                    .unwrap();
                got.contains(&format!("chunk sizes {sizes})"))
                    && got.starts_with("linear_cross_entropy:")
            }
            other => panic!("chunk {other}"),
        };
        if !ok {
            failures.push(format!("{s}: got {got}"));
        }
    }
    assert_eq!(sizes.len(), 216);
    assert!(
        failures.is_empty(),
        "{} of 216 differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn chunked(reduction: Reduction, chunk: usize) -> LinearCrossEntropyArgs {
    LinearCrossEntropyArgs {
        reduction,
        options: Some(LinearCrossEntropyOptions {
            batch_chunk_size: Some(chunk),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn chunked_gradients_match_finite_differences() {
    let x = Tensor::randn(&[7, 3]).to_dtype(DType::F64);
    let w = Tensor::randn(&[6, 3]).to_dtype(DType::F64);
    let b = Tensor::randn(&[6]).to_dtype(DType::F64);
    let ids = Tensor::from_vec(vec![0i64, 5, 2, -100, 2, 1, 4], &[7]);
    let probs = Tensor::randn(&[7, 6]).to_dtype(DType::F64).softmax(1);
    let class_weight = Tensor::from_vec(vec![0.5, 1.0, 2.0, 1.5, 0.7, 1.2], &[6]);
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for target in [&ids, &probs] {
            let f = |t: &[Tensor]| {
                let mut a = chunked(reduction, 3);
                a.linear_bias = Some(t[2].clone());
                a.weight = Some(class_weight.clone());
                linear_cross_entropy_with(&t[0], &t[1], target, &a)
            };
            let on = [x.clone(), w.clone(), b.clone()].map(|t| t.requires_grad_(true));
            if reduction != Reduction::None {
                assert_eq!(f(&on).grad_fn_name(), Some(CHUNKED));
            }
            gradcheck(f, &[x.clone(), w.clone(), b.clone()], 1e-6, 1e-6, 1e-5)
                .unwrap_or_else(|e| panic!("{reduction:?}, {:?} target: {e}", target.dtype()));
        }
    }
}

#[test]
fn a_second_backward_needs_allow_retain_graph() {
    let x = Tensor::randn(&[5, 3]).requires_grad_(true);
    let w = Tensor::randn(&[4, 3]).requires_grad_(true);
    let y = Tensor::from_vec(vec![0i64, 3, 1, 1, 2], &[5]);
    let once = linear_cross_entropy_with(&x, &w, &y, &chunked(Reduction::Mean, 2));
    once.backward_with(&Tensor::ones(&[]), true);
    let msg = panic_message(|| once.backward());
    assert!(
        msg.contains("linear_cross_entropy: backward ran twice"),
        "{msg}"
    );
    assert!(msg.contains("allow_retain_graph"), "{msg}");

    let w2 = w.detach().requires_grad_(true);
    let mut a = chunked(Reduction::Sum, 2);
    a.options.as_mut().unwrap().allow_retain_graph = true;
    let twice = linear_cross_entropy_with(&x, &w2, &y, &a);
    twice.backward_with(&Tensor::ones(&[]), true);
    let first = w2.grad().unwrap().to_vec::<f32>();
    twice.backward();
    let doubled: Vec<f32> = first.iter().map(|g| 2.0 * g).collect();
    assert_eq!(w2.grad().unwrap().to_vec::<f32>(), doubled);
}

#[test]
fn the_chunked_path_refuses_a_second_derivative_clearly() {
    let x = Tensor::randn(&[4, 3]).requires_grad_(true);
    let w = Tensor::randn(&[5, 3]).requires_grad_(true);
    let y = Tensor::from_vec(vec![0i64, 4, 1, 2], &[4]);
    // The loss's gradient for `x`, itself differentiable where it can be.
    let grad_x = |args: &LinearCrossEntropyArgs| {
        let loss = linear_cross_entropy_with(&x, &w, &y, args);
        let opts = GradOptions {
            create_graph: true,
            ..Default::default()
        };
        grad_with(&[&loss], &[&x], opts).remove(0).unwrap()
    };
    let g = grad_x(&chunked(Reduction::Mean, 2));
    let msg = panic_message(|| g.sum().backward());
    assert!(msg.contains(CHUNKED), "{msg}");
    // The reference path differentiates twice, as PyTorch's does.
    let g = grad_x(&Default::default());
    (&g * &g).sum().backward();
    assert!(w.grad().is_some());
}

#[test]
fn half_inputs_run_their_chunks_in_f32() {
    let x = Tensor::randn(&[9, 8]);
    let w = Tensor::randn(&[50, 8]);
    let y = Tensor::randint(0, 50, &[9]);
    let reference = linear_cross_entropy_with(&x, &w, &y, &Default::default());
    let (xb, wb) = (
        x.to_dtype(DType::BF16).requires_grad_(true),
        w.to_dtype(DType::BF16).requires_grad_(true),
    );
    let loss = linear_cross_entropy_with(&xb, &wb, &y, &chunked(Reduction::Mean, 4));
    assert_eq!(loss.dtype(), DType::BF16);
    // Inputs rounded to bf16 (2^-8 relative) move the loss by about that much.
    let (got, want) = (loss.item::<f32>(), reference.item::<f32>());
    assert!(
        (got - want).abs() < 0.02 * want.abs().max(1.0),
        "{got} vs {want}"
    );
    loss.backward();
    assert_eq!(wb.grad().unwrap().dtype(), DType::BF16);
    assert_eq!(xb.grad().unwrap().shape(), &[9, 8]);
}

#[test]
fn bad_input_names_linear_cross_entropy() {
    let x = Tensor::randn(&[4, 3]);
    let w = Tensor::randn(&[5, 3]);
    let y = Tensor::from_vec(vec![0i64, 4, 1, 2], &[4]);
    let call = |x: &Tensor, w: &Tensor, y: &Tensor, a: LinearCrossEntropyArgs| {
        panic_message(|| {
            linear_cross_entropy_with(x, w, y, &a);
        })
    };
    let cases = [
        (
            call(&x.unsqueeze(0), &w, &y, Default::default()),
            "input must be [in_features] or [N, in_features]",
        ),
        (
            call(&x, &Tensor::randn(&[5, 4]), &y, Default::default()),
            "linear_weight of shape [5, 4]",
        ),
        (
            call(
                &x,
                &w,
                &y,
                LinearCrossEntropyArgs {
                    linear_bias: Some(Tensor::zeros(&[4])),
                    ..Default::default()
                },
            ),
            "linear_bias must have shape [5]",
        ),
        (
            call(&x, &w, &y.to_dtype(DType::F32), Default::default()),
            "target must be int64 class indices of shape [4]",
        ),
        (
            call(
                &x,
                &w,
                &Tensor::rand(&[4, 5]),
                LinearCrossEntropyArgs {
                    ignore_index: Some(1),
                    ..Default::default()
                },
            ),
            "ignore_index cannot be specified when target contains probabilities",
        ),
        (
            call(
                &x.narrow(1, 0, 3).select(0, 0),
                &Tensor::randn(&[2, 3, 3]),
                &y,
                Default::default(),
            ),
            "needs a batched input",
        ),
        (
            call(
                &x,
                &w,
                &Tensor::from_vec(vec![0i64, 7, 1, 2], &[4]),
                chunked(Reduction::Mean, 2),
            ),
            "linear_cross_entropy",
        ),
        (
            call(
                &x,
                &w,
                &Tensor::from_vec(vec![0i64, 7, 1, 2], &[4]),
                Default::default(),
            ),
            "linear_cross_entropy",
        ),
        (
            call(
                &x,
                &w,
                &y,
                LinearCrossEntropyArgs {
                    options: Some(LinearCrossEntropyOptions {
                        batch_chunk_size: Some(3),
                        chunking_method: Some(ChunkingMethod::AspectRatio(1)),
                        allow_retain_graph: false,
                    }),
                    ..Default::default()
                },
            ),
            "batch_chunk_size (=3) and chunking_method ('aspect_ratio') give different chunk sizes",
        ),
    ];
    for (msg, want) in cases {
        assert!(
            msg.starts_with("linear_cross_entropy") && msg.contains(want),
            "{msg:?} lacks {want:?}"
        );
    }
}

#[test]
fn the_module_is_pytorchs() {
    let head = LinearCrossEntropyLoss::new(4, 9, false);
    assert_eq!(
        head.repr(),
        "LinearCrossEntropyLoss(\n  in_features=4, num_classes=9, out_features=(), bias=False, reduction=mean, \
         ignore_index=None, label_smoothing=0.0, options=None\n  (linear): Linear(in_features=4, out_features=9, \
         bias=False)\n)"
    );
    let keys: Vec<String> = head.state_dict().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["linear.weight"]);
    let mut head = LinearCrossEntropyLoss::with_out_features(4, 9, &[2, 3], true);
    head.weight = Some(Tensor::ones(&[9]));
    head.reduction = Reduction::Sum;
    head.ignore_index = Some(3);
    head.label_smoothing = 0.1;
    head.options = Some(LinearCrossEntropyOptions {
        batch_chunk_size: Some(4),
        ..Default::default()
    });
    assert_eq!(
        head.repr(),
        "LinearCrossEntropyLoss(\n  in_features=4, num_classes=9, out_features=(2, 3), bias=True, reduction=sum, \
         ignore_index=3, label_smoothing=0.1, options=LinearCrossEntropyOptions(allow_retain_graph=False, \
         batch_chunk_size=4, chunking_method='auto', acc_policy='auto', acc_dtype=None)\n  (linear): \
         Linear(in_features=4, out_features=54, bias=True)\n)"
    );
    let keys: Vec<String> = head.state_dict().into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["weight", "linear.weight", "linear.bias"]);
    // forward is the functional form over the reshaped weight and bias.
    let x = Tensor::randn(&[5, 4]);
    let y = Tensor::randint(0, 9, &[5, 2, 3]);
    let got = head.forward(&x, &y);
    let args = LinearCrossEntropyArgs {
        linear_bias: Some(head.linear.bias.as_ref().unwrap().reshape(&[9, 2, 3])),
        weight: head.weight.clone(),
        reduction: Reduction::Sum,
        ignore_index: Some(3),
        label_smoothing: 0.1,
        options: None,
    };
    let want = linear_cross_entropy_with(&x, &head.linear.weight.reshape(&[9, 2, 3, 4]), &y, &args);
    assert_eq!(got.to_vec::<f32>(), want.to_vec::<f32>());
}

/// Strided features (a transposed view) and an empty batch give the
/// reference path's loss and gradients (an empty mean is NaN in both).
#[test]
fn strided_and_empty_batches_match_the_reference_path() {
    let w = Tensor::randn(&[7, 5]).to_dtype(DType::F64);
    for (x, y) in [
        (
            Tensor::randn(&[5, 9]).to_dtype(DType::F64).t(),
            Tensor::randint(0, 7, &[9]),
        ),
        (
            Tensor::zeros(&[0, 5]).to_dtype(DType::F64),
            Tensor::zeros(&[0]).to_dtype(DType::I64),
        ),
    ] {
        for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
            let run = |args: LinearCrossEntropyArgs| {
                let (x, w) = (
                    x.detach().requires_grad_(true),
                    w.detach().requires_grad_(true),
                );
                let loss = linear_cross_entropy_with(&x, &w, &y, &args);
                loss.sum().backward();
                [loss, x.grad().unwrap(), w.grad().unwrap()]
            };
            let reference = LinearCrossEntropyArgs {
                reduction,
                ..Default::default()
            };
            let want = run(reference);
            let got = run(chunked(reduction, 4));
            for (what, (g, w)) in ["loss", "grad x", "grad w"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                close(
                    &format!("{:?} {reduction:?} {what}", x.shape()),
                    g,
                    w,
                    1e-12,
                    1e-12,
                )
                .unwrap();
            }
        }
    }
}

/// The chunked path sweeps blocks of up to 1024 rows and at least 256
/// classes: 1100 rows over 700 classes cut into two row blocks and three
/// class blocks, with a bias, class weights, ignored rows and probability
/// targets, equal the reference path's losses and gradients.
#[test]
fn blocks_of_rows_and_classes_match_the_reference_path() {
    let (n, c, f) = (1100, 700, 6);
    let w = (&Tensor::randn(&[c, f]) * 0.5).to_dtype(DType::F64);
    let b = Tensor::randn(&[c]).to_dtype(DType::F64);
    let x = Tensor::randn(&[n, f]).to_dtype(DType::F64);
    let class_weight = (&Tensor::rand(&[c]) + 0.5).to_dtype(DType::F64);
    let ids: Vec<i64> = (0..n as i64)
        .map(|i| {
            if i % 13 == 5 {
                -100
            } else {
                (i * 37) % c as i64
            }
        })
        .collect();
    let ids = Tensor::from_vec(ids, &[n]);
    let probs = Tensor::randn(&[n, c]).to_dtype(DType::F64).softmax(1);
    let row_weight = (&Tensor::rand(&[n]) + 0.5).to_dtype(DType::F64);
    for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
        for target in [&ids, &probs] {
            let run = |args: LinearCrossEntropyArgs| {
                let leaves = [&x, &w, &b].map(|t| t.detach().requires_grad_(true));
                let args = LinearCrossEntropyArgs {
                    linear_bias: Some(leaves[2].clone()),
                    weight: Some(class_weight.clone()),
                    ..args
                };
                let loss = linear_cross_entropy_with(&leaves[0], &leaves[1], target, &args);
                // Per-row losses: a different gradient for each row.
                let weighted = match reduction {
                    Reduction::None => &loss * &row_weight,
                    _ => loss.clone(),
                };
                weighted.sum().backward();
                let [gx, gw, gb] = leaves.map(|t| t.grad().unwrap());
                [loss, gx, gw, gb]
            };
            let want = run(LinearCrossEntropyArgs {
                reduction,
                ..Default::default()
            });
            let got = run(chunked(reduction, 16));
            for (what, (g, w)) in ["loss", "grad x", "grad w", "grad bias"]
                .iter()
                .zip(got.iter().zip(&want))
            {
                let label = format!("{reduction:?}, {:?} target, {what}", target.dtype());
                close(&label, g, w, 1e-10, 1e-12).unwrap();
            }
        }
    }
}
