//! Helpers shared by the golden tests.
#![allow(dead_code)]

use safetensors::{Dtype, SafeTensors};
use tapir::prelude::*;

/// The device the golden suites run on: the CPU, or the GPU named by
/// `TAPIR_TEST_DEVICE` (`cuda:0`), which is how `scripts/gpu-check.sh`
/// instantiates every golden test on a GPU.
pub fn test_device() -> Device {
    match std::env::var("TAPIR_TEST_DEVICE").as_deref() {
        Err(_) | Ok("") | Ok("cpu") => Device::Cpu,
        Ok(s) => {
            let ordinal = s
                .strip_prefix("cuda:")
                .and_then(|i| i.parse().ok())
                .unwrap_or_else(|| panic!("TAPIR_TEST_DEVICE={s}: expected cpu or cuda:N"));
            // Goldens hold f32 accuracy: no TF32 in cuDNN's convolutions
            // (PyTorch allows it by default there; matmul's is off already).
            tapir::cuda::cudnn::set_allow_tf32(false);
            Device::cuda(ordinal).unwrap_or_else(|e| panic!("TAPIR_TEST_DEVICE={s}: {e}"))
        }
    }
}

/// `t` on the test device.
pub fn dev(t: Tensor) -> Tensor {
    t.to(test_device()).expect("the test device is usable")
}

/// A golden tensor, on the test device.
pub fn load(st: &SafeTensors, key: &str) -> Tensor {
    dev(load_cpu(st, key))
}

pub fn load_cpu(st: &SafeTensors, key: &str) -> Tensor {
    let v = st
        .tensor(key)
        .unwrap_or_else(|_| panic!("golden {key} missing"));
    let shape = v.shape().to_vec();
    let d = v.data();
    match v.dtype() {
        Dtype::F64 => Tensor::from_vec(
            d.chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            &shape,
        ),
        Dtype::F32 => Tensor::from_vec(
            d.chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            &shape,
        ),
        Dtype::I64 => Tensor::from_vec(
            d.chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect(),
            &shape,
        ),
        Dtype::BOOL => Tensor::from_vec(d.iter().map(|&b| b != 0).collect::<Vec<bool>>(), &shape),
        other => panic!("unexpected golden dtype {other:?}"),
    }
}

pub fn has(st: &SafeTensors, key: &str) -> bool {
    st.tensor(key).is_ok()
}

/// PyTorch's `torch.linspace(-1, 1.5, n)` in f64 (`[-1]` for one element),
/// the loss weights of every golden.
pub fn loss_weights(shape: &[usize], dtype: DType) -> Tensor {
    let n: usize = shape.iter().product();
    let (start, end) = (-1.0f64, 1.5f64);
    let step = if n > 1 {
        (end - start) / (n - 1) as f64
    } else {
        0.0
    };
    let v: Vec<f64> = (0..n)
        .map(|i| {
            if i < n / 2 || n == 1 {
                start + step * i as f64
            } else {
                end - step * (n - 1 - i) as f64
            }
        })
        .collect();
    dev(Tensor::from_vec(v, shape).to_dtype(dtype))
}

pub fn close(what: &str, got: &Tensor, want: &Tensor, atol: f64, rtol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "{what}: shape {:?}, want {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let (g, w): (Vec<f64>, Vec<f64>) = (got.to_vec(), want.to_vec());
    for (k, (&x, &y)) in g.iter().zip(&w).enumerate() {
        if !((x - y).abs() <= atol + rtol * y.abs() || x == y || (x.is_nan() && y.is_nan())) {
            return Err(format!("{what}[{k}]: got {x:e}, want {y:e}"));
        }
    }
    Ok(())
}

/// `tests/goldens`: under the run-time `CARGO_MANIFEST_DIR` when set (cargo
/// sets it; `scripts/gpu-check.sh` sets it for prebuilt test binaries run on
/// another machine), else where the crate was built.
pub fn goldens_dir() -> String {
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{root}/tests/goldens")
}

pub fn read_goldens(name: &str) -> (Vec<u8>, serde_json::Value) {
    let dir = goldens_dir();
    let bytes = std::fs::read(format!("{dir}/{name}.safetensors")).unwrap();
    let json = std::fs::read_to_string(format!("{dir}/{name}.json"))
        .map(|s| serde_json::from_str(&s).unwrap())
        .unwrap_or(serde_json::Value::Null);
    (bytes, json)
}

/// Runs `check` over every case, collecting failures (and panics) into one report.
pub fn run_all<'a>(
    cases: impl Iterator<Item = &'a serde_json::Value>,
    check: impl Fn(&serde_json::Value) -> Result<(), String>,
) -> usize {
    let mut failures = vec![];
    let mut n = 0;
    for c in cases {
        n += 1;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(c))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failures.push(e),
            Err(p) => failures.push(format!(
                "{}: panicked: {:?}",
                c["name"],
                p.downcast_ref::<String>()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    n
}

/// The largest `|a - b|` over the largest `|b|` (at least 1e-3): how far a
/// fused kernel's result is from its composition's, relative to its scale.
pub fn max_rel_diff(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    let scale = b.iter().fold(1e-3f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / scale)
        .fold(0.0, f64::max)
}

/// The message `f` panics with, or `None` when it returns.
pub fn panic_text(f: impl FnOnce()) -> Option<String> {
    let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).err()?;
    Some(match e.downcast::<String>() {
        Ok(s) => *s,
        Err(e) => e.downcast::<&str>().map_or("?".into(), |s| s.to_string()),
    })
}

/// The message `f` panics with (a test failure when it returns).
pub fn panic_message(f: impl FnOnce()) -> String {
    panic_text(f).expect("expected a panic")
}
