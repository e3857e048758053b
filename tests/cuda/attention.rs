//! `scaled_dot_product_attention` on the GPU: the fused kernel (one node,
//! PyTorch's CUDA name) against the same op on the CPU and against the
//! composed Math backend on the GPU, forward and all three gradients, on
//! head-split views; and it captures into a CUDA graph.

use super::*;

/// `[2, 3, 37, 16]` query, key and value as head splits of `[2, 37, 3, 16]`
/// (the layout MultiheadAttention hands over), leaves on `device`.
fn heads(device: Device, seed: u64) -> [Tensor; 3] {
    [0, 1, 2].map(|i| {
        let halves: Vec<f32> = values(2 * 37 * 3 * 16, seed + i)
            .iter()
            .map(|v| v / 2.0)
            .collect();
        Tensor::from_vec(halves, &[2, 37, 3, 16])
            .to(device)
            .unwrap()
            .transpose(1, 2)
            .detach()
            .requires_grad_(true)
    })
}

/// Output and `[dq, dk, dv]` of attention under `backends`.
fn attend(qkv: &[Tensor; 3], causal: bool, backends: &[SdpBackend]) -> (Tensor, Vec<Tensor>) {
    let [q, k, v] = qkv;
    let out = sdpa_kernel(backends, || {
        scaled_dot_product_attention(q, k, v, None, 0.0, causal, None)
    });
    let g = Tensor::from_vec(values(out.numel(), 9), out.shape())
        .to(out.device())
        .unwrap();
    (&out * &g).sum().backward();
    let grads = qkv.iter().map(|t| t.grad().unwrap()).collect();
    (out.detach(), grads)
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn fused_attention_runs_on_the_gpu_as_on_the_cpu() {
    let Some(device) = gpu() else { return };
    for causal in [true, false] {
        let q = heads(device, 1);
        let launches = tapir::cuda::kernel_launches();
        let out = sdpa_kernel(&[SdpBackend::Flash], || {
            scaled_dot_product_attention(&q[0], &q[1], &q[2], None, 0.0, causal, None)
        });
        assert_eq!(
            tapir::cuda::kernel_launches() - launches,
            1,
            "head-split views are read in place: one launch, no copies"
        );
        assert!(
            out.transpose(1, 2).is_contiguous(),
            "the output has its heads inside rows, so merging them is free: strides {:?}",
            out.strides()
        );
        assert_eq!(
            out.grad_fn_name(),
            Some("ScaledDotProductFlashAttentionBackward0"),
            "one fused node, as PyTorch's CUDA flash attention"
        );
        let fallbacks = tapir::cuda::host_fallbacks();
        let (flash, flash_grads) = attend(&heads(device, 1), causal, &[SdpBackend::Flash]);
        assert_eq!(tapir::cuda::host_fallbacks(), fallbacks, "no host copies");
        let (math, math_grads) = attend(&heads(device, 1), causal, &[SdpBackend::Math]);
        let (cpu, cpu_grads) = attend(&heads(Device::Cpu, 1), causal, &[SdpBackend::Flash]);
        for (what, got, want) in [("out vs math", &flash, &math), ("out vs cpu", &flash, &cpu)] {
            close(&format!("causal {causal}: {what}"), got, want, 1e-5, 1e-4).unwrap();
        }
        for (i, name) in ["dq", "dk", "dv"].iter().enumerate() {
            for (what, want) in [("math", &math_grads[i]), ("cpu", &cpu_grads[i])] {
                let what = format!("causal {causal}: {name} vs {what}");
                close(&what, &flash_grads[i], want, 1e-5, 1e-4).unwrap();
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn fused_attention_captures_into_a_cuda_graph() {
    let Some(device) = gpu() else { return };
    let q = heads(device, 4).map(|t| t.detach());
    let eager = scaled_dot_product_attention(&q[0], &q[1], &q[2], None, 0.0, true, None);
    let (graph, out) = no_grad(|| {
        tapir::cuda::CudaGraph::capture(device, || {
            scaled_dot_product_attention(&q[0], &q[1], &q[2], None, 0.0, true, None)
        })
    })
    .unwrap();
    graph.replay().unwrap();
    assert_eq!(
        out.to_vec::<f32>(),
        eager.to_vec::<f32>(),
        "the same kernels"
    );
}
