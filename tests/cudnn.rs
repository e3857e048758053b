//! Convolution on cuDNN against its CPU twin, the im2col + GEMM lowering.
//! The GPU test needs a GPU, the `cuda` feature and `libcudnn.so.9`
//! (`scripts/gpu-check.sh` runs it); without them it prints SKIPPED, and
//! what is checked is that everything falls back cleanly.

use tapir::cuda::cudnn;
use tapir::prelude::*;

/// Deterministic values in about [-1, 1].
fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (i as u64 * 2654435761 + seed * 97) % 2001;
            v as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Largest |a - b| / (atol + rtol |b|), over every element.
fn worst(a: &Tensor, b: &Tensor, atol: f64, rtol: f64) -> f64 {
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / (atol + rtol * y.abs()))
        .fold(0.0, f64::max)
}

struct Case {
    name: &'static str,
    input: [usize; 4],
    weight: [usize; 4],
    opts: Conv2dOptions,
    /// Feed the input as a transposed (non-contiguous) view.
    strided_input: bool,
}

fn cases() -> Vec<Case> {
    let o = Conv2dOptions::default();
    let case = |name, input, weight, opts, strided_input| Case {
        name,
        input,
        weight,
        opts,
        strided_input,
    };
    vec![
        case(
            "3x3 pad 1",
            [4, 3, 12, 12],
            [8, 3, 3, 3],
            o.padding(1),
            false,
        ),
        case(
            "stride 2, dilation 2",
            [2, 4, 15, 13],
            [6, 4, 3, 3],
            o.stride(2).dilation(2).padding(2),
            false,
        ),
        case(
            "groups 2",
            [2, 4, 9, 9],
            [6, 2, 3, 3],
            o.groups(2).padding(1),
            false,
        ),
        case("depthwise", [2, 6, 8, 8], [6, 1, 3, 3], o.groups(6), false),
        case("1x1", [3, 16, 7, 7], [32, 16, 1, 1], o, false),
        case(
            "5x5 strided input view",
            [2, 3, 10, 10],
            [4, 3, 5, 5],
            o.padding(2),
            true,
        ),
    ]
}

/// Output and the gradients of input, weight and bias for `(y * probe).sum()`.
fn run(c: &Case, device: Device, dtype: DType) -> (Tensor, [Tensor; 3], Option<&'static str>) {
    let n = |s: &[usize]| s.iter().product::<usize>();
    let x = Tensor::from_vec(values(n(&c.input), 1), &c.input);
    let x = x.to_dtype(dtype).to(device).unwrap().requires_grad_(true);
    // On the device: the same values laid out [N, C, W, H], viewed back.
    let x_in = match c.strided_input {
        true => x.transpose(2, 3).contiguous().transpose(2, 3),
        false => x.clone(),
    };
    assert_eq!(x_in.is_contiguous(), !c.strided_input);
    let w = Tensor::from_vec(values(n(&c.weight), 2), &c.weight);
    let w = w.to_dtype(dtype).to(device).unwrap().requires_grad_(true);
    let b = Tensor::from_vec(values(c.weight[0], 3), &[c.weight[0]]);
    let b = b.to_dtype(dtype).to(device).unwrap().requires_grad_(true);
    let y = x_in.conv2d(&w, Some(&b), c.opts);
    // y = conv + bias; the conv's own node, from the same call without bias.
    let conv_node = x_in.conv2d(&w, None, c.opts).grad_fn_name();
    let probe = Tensor::from_vec(values(y.numel(), 4), y.shape());
    let probe = probe.to_dtype(dtype).to(device).unwrap();
    y.mul(&probe).sum().backward();
    let grads = [&x, &w, &b].map(|t| t.grad().unwrap().to(Device::Cpu).unwrap());
    (y.to(Device::Cpu).unwrap(), grads, conv_node)
}

#[test]
#[ignore = "needs a CUDA GPU and cuDNN: scripts/gpu-check.sh runs it"]
fn cudnn_convolutions_and_gradients_match_the_cpu_in_every_float_dtype() {
    let Ok(gpu) = Device::cuda(0) else {
        println!("SKIPPED: no GPU");
        return;
    };
    if !cudnn::is_available() {
        println!("SKIPPED: libcudnn.so.9 is not on the library path");
        return;
    }
    println!("cuDNN {:?}", cudnn::version());
    let mut failures = Vec::new();
    // f32 without TF32 is held to f32 accuracy; TF32 (PyTorch's default for
    // cuDNN) and the half types to their 10- and 7-bit mantissas; sums of
    // up to 400 products keep the bound a few units of the last place.
    for (dtype, tf32, rtol) in [
        (DType::F32, false, 1e-4),
        (DType::F32, true, 5e-3),
        (DType::F16, false, 5e-3),
        (DType::BF16, false, 4e-2),
    ] {
        cudnn::set_allow_tf32(tf32);
        for c in cases() {
            let (y_cpu, g_cpu, _) = run(&c, Device::Cpu, DType::F32);
            let (y, g, node) = run(&c, gpu, dtype);
            let label = format!("{} ({dtype}, tf32 {tf32})", c.name);
            if node != Some("ConvolutionBackward0") {
                failures.push(format!("{label}: recorded {node:?}, not cuDNN's node"));
            }
            let atol = rtol * 10.0;
            for (what, a, b) in [
                ("output", &y, &y_cpu),
                ("input grad", &g[0], &g_cpu[0]),
                ("weight grad", &g[1], &g_cpu[1]),
                ("bias grad", &g[2], &g_cpu[2]),
            ] {
                let e = worst(a, b, atol, rtol);
                if e > 1.0 {
                    failures.push(format!("{label}: {what} off by {e:.2}x the bound"));
                }
            }
        }
    }
    cudnn::set_allow_tf32(true);
    // Disabled, the GPU takes the im2col path, with the same numbers.
    cudnn::set_enabled(false);
    let c = &cases()[0];
    let (y, _, node) = run(c, gpu, DType::F32);
    cudnn::set_enabled(true);
    assert_ne!(
        node,
        Some("ConvolutionBackward0"),
        "disabled, cuDNN still ran"
    );
    assert!(worst(&y, &run(c, Device::Cpu, DType::F32).0, 1e-3, 1e-4) <= 1.0);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn without_cudnn_convolution_takes_the_im2col_path() {
    if cudnn::is_available() {
        println!("SKIPPED: cuDNN is present");
        return;
    }
    assert_eq!(cudnn::version(), None);
    let c = &cases()[0];
    let (y, g, node) = run(c, Device::Cpu, DType::F32);
    assert_ne!(node, Some("ConvolutionBackward0"));
    assert_eq!(y.shape(), &[4, 8, 12, 12]);
    // The bias gradient is the probe summed over all but the channel dim.
    let probe = Tensor::from_vec(values(y.numel(), 4), y.shape());
    let want = probe.sum_dims(&[0, 2, 3], false);
    assert!(worst(&g[2], &want, 1e-5, 1e-5) <= 1.0);
}
