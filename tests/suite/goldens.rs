//! Replays the PyTorch goldens of `scripts/gen_goldens.py` (committed under
//! `tests/goldens/`): every case's outputs and input gradients, in f64 and
//! again in f32, with the tolerances stated below; the outputs of cases with
//! gradients again under `no_grad`.

use crate::common;
use crate::core_ops;

use common::{close, load};
use core_ops::{run, view};
use safetensors::SafeTensors;
use serde_json::Value;
use tapir::prelude::*;

const F64_TOL: (f64, f64) = (1e-10, 1e-9); // (atol, rtol)
const F32_TOL: (f64, f64) = (2e-4, 2e-4);

/// Cases whose golden carries a rounding of PyTorch's own in f64, with the
/// relative tolerance that admits it and why.
const F64_LOOSER: &[(&str, f64, &str)] = &[(
    "hardsigmoid",
    1e-7,
    "PyTorch's f64 hardsigmoid backward multiplies by 1/6 rounded to f32 (3e-8 relative)",
)];

/// Cases of tiny values, compared relatively only (no absolute tolerance):
/// what they check is precision near 0 (`expm1`, and ELU's family through
/// it, where `e^x - 1` would keep only the rounding of `exp`).
const RELATIVE_ONLY: &[&str] = &["expm1_tiny", "elu_tiny", "celu_tiny", "selu_tiny"];

/// Cases whose golden gradient is PyTorch's mistake, and why; their
/// outputs are still compared, and `autograd.rs` checks their gradients by
/// finite differences.
const PYTORCH_GRADIENT_WRONG: &[(&str, &str)] = &[
    (
        "linalg_det_singular",
        "at an exactly singular matrix of rank n - 1 PyTorch 2.15's det gradient is all zeros and fails \
         PyTorch's own gradcheck; the true gradient is the cofactor matrix (-10 at [0, 0] here)",
    ),
    (
        "linalg_det_batch_with_singular",
        "the same PyTorch 2.15 zeros for the batch's singular matrix of rank 2",
    ),
];

fn check_case(st: &SafeTensors, c: &Value, dtype: DType, tol: (f64, f64)) -> Result<(), String> {
    let name = c["name"].as_str().unwrap();
    let tol = match F64_LOOSER.iter().find(|(n, _, _)| *n == name) {
        Some((_, rtol, _)) if dtype == DType::F64 => (tol.0, *rtol),
        _ if RELATIVE_ONLY.contains(&name) => (0.0, tol.1),
        _ => tol,
    };
    let n_in = c["n_in"].as_u64().unwrap() as usize;
    let grads = core_ops::grads(c);
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
    let outs = run(c["op"].as_str().unwrap(), &c["args"], &views)
        .unwrap_or_else(|| panic!("golden op {} has no entry in the op table", c["op"]));
    if leaves.iter().any(|t| t.requires_grad()) {
        // Without grad, ops may take an inference-only kernel (conv2d's
        // tiled forward): its outputs must be PyTorch's too.
        let plain = tapir::no_grad(|| run(c["op"].as_str().unwrap(), &c["args"], &views));
        for (k, o) in plain.into_iter().flatten().enumerate() {
            let want = load(st, &format!("{name}.out{k}"));
            close(
                &format!("{name} ({dtype}) no_grad out{k}"),
                &o,
                &want,
                tol.0,
                tol.1,
            )?;
        }
    }
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
    let gradients_wrong = PYTORCH_GRADIENT_WRONG.iter().any(|(n, _)| *n == name);
    for (k, leaf) in leaves.iter().enumerate() {
        if grads[k] && !gradients_wrong {
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
    let (bytes, manifest) = core_ops::core_goldens();
    let st = SafeTensors::deserialize(&bytes).unwrap();
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

/// conv2d without grad (the tiled kernel) reads strided and offset views of
/// its input, weight and bias as the im2col lowering (with grad) does, on
/// both of the kernel's strategies.
#[test]
fn conv2d_without_grad_reads_views_as_the_lowering() {
    for (c, oc, stride) in [(9, 6, 1), (3, 4, 2), (8, 130, 1)] {
        let x = Tensor::randn(&[3, 10, 11, 2 * c]).to_dtype(DType::F64);
        // [2, c, 10, 11]: channels 1..=c and samples 1..=2 of a permuted buffer.
        let x = x
            .permute(&[3, 0, 1, 2])
            .narrow(0, 1, c)
            .permute(&[1, 0, 2, 3]);
        let x = x.narrow(0, 1, 2);
        let w = Tensor::randn(&[3, 3, c, oc])
            .to_dtype(DType::F64)
            .permute(&[3, 2, 0, 1]);
        let b = Tensor::randn(&[2 * oc])
            .to_dtype(DType::F64)
            .narrow(0, oc, oc);
        assert!(!x.is_contiguous() && !w.is_contiguous());
        let opts = Conv2dOptions::default().padding(1).stride(stride);
        let plain = tapir::no_grad(|| x.conv2d(&w, Some(&b), opts));
        let lowered = x.conv2d(&w.detach().requires_grad_(true), Some(&b), opts);
        assert!(lowered.requires_grad() && !plain.requires_grad());
        let diff = (&plain - &lowered.detach()).abs().max().item::<f64>();
        assert!(
            diff < 1e-12,
            "c {c}, oc {oc}, stride {stride}: differs by {diff}"
        );
    }
}

/// conv3d, built on conv2d, gives the same volume without grad (where its
/// 2-D convolution takes the tiled kernel) as with it.
#[test]
fn conv3d_without_grad_matches_the_lowering() {
    let x = Tensor::randn(&[2, 8, 5, 6, 7]).to_dtype(DType::F64);
    let w = Tensor::randn(&[4, 8, 3, 3, 2]).to_dtype(DType::F64);
    let b = Tensor::randn(&[4]).to_dtype(DType::F64);
    let opts = tapir::nn::Conv3dOptions {
        padding: (1, 1, 0),
        ..Default::default()
    };
    let plain = tapir::no_grad(|| tapir::nn::conv3d(&x, &w, Some(&b), opts));
    let wg = w.detach().requires_grad_(true);
    let lowered = tapir::nn::conv3d(&x, &wg, Some(&b), opts).detach();
    assert!(
        plain.shape() == lowered.shape(),
        "{:?} against {:?}",
        plain.shape(),
        lowered.shape()
    );
    let diff = (&plain - &lowered).abs().max().item::<f64>();
    assert!(diff < 1e-12, "differs by {diff}");
}

/// Degenerate convolutions without grad: no input channels gives the bias,
/// an empty batch gives an empty output.
#[test]
fn conv2d_without_grad_handles_empty_inputs() {
    let w = Tensor::zeros(&[3, 0, 3, 3]);
    let b = Tensor::from_vec(vec![1.0f32, -2.0, 0.5], &[3]);
    let opts = Conv2dOptions::default().padding(1);
    let y = tapir::no_grad(|| Tensor::zeros(&[2, 0, 4, 4]).conv2d(&w, Some(&b), opts));
    assert!(y.shape() == [2, 3, 4, 4], "got {:?}", y.shape());
    assert!(y.to_vec::<f32>()[16..32].iter().all(|&v| v == -2.0));
    let w = Tensor::ones(&[3, 9, 3, 3]);
    let y = tapir::no_grad(|| Tensor::zeros(&[0, 9, 4, 4]).conv2d(&w, Some(&b), opts));
    assert!(y.shape() == [0, 3, 4, 4], "got {:?}", y.shape());
}
