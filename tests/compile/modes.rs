//! `mode: ReduceOverhead` off a GPU: the same replays as the default mode,
//! and the reason no CUDA graph was captured (the GPU side is in
//! `tests/cuda/graphs.rs`).

use super::*;
use tapir::compile::Mode;
use tapir::cuda::CudaGraph;

#[test]
fn reduce_overhead_on_the_cpu_replays_as_default_and_says_why_no_cuda_graph() {
    let _serial = serial();
    let (eager, compiled) = twins(seed::Mlp::seed);
    let options = CompileOptions {
        mode: Mode::ReduceOverhead,
        ..CompileOptions::default()
    };
    let compiled = compile_with(compiled, options);
    let g = Generator::new(11);
    tapir::no_grad(|| {
        for call in 0..4 {
            let x = Tensor::randn_with(&[4, 784], &g);
            assert_eq!(
                compiled.forward(&x).to_vec::<f32>(),
                eager.forward(&x).to_vec::<f32>(),
                "call {call}"
            );
        }
    });
    let e = compiled.explain();
    assert_eq!(
        (e.graphs, e.replays, e.cuda_graphs, e.cudagraph_replays),
        (1, 3, 0, 0),
        "{e}"
    );
    assert_eq!(e.cudagraph_skips.len(), 1, "one reason per signature: {e}");
    assert!(
        e.cudagraph_skips[0].starts_with("skipping CUDA graphs: cpu device"),
        "{e}"
    );
    assert!(
        e.to_string().contains("CUDA Graphs: 0 captured, 0 replays"),
        "{e}"
    );
    compiled.reset();
    assert!(compiled.explain().cudagraph_skips.is_empty());
}

#[test]
fn capturing_a_cuda_graph_off_a_gpu_is_an_error_naming_the_device() {
    match CudaGraph::capture(tapir::Device::Cpu, || 1) {
        Err(Error::DeviceUnavailable { device, reason }) => {
            assert_eq!(device, "cpu");
            assert!(reason.contains("CUDA graphs capture GPU work"), "{reason}");
        }
        other => panic!("capturing on the CPU: {other:?}"),
    }
    if !tapir::cuda::is_available() {
        let r = CudaGraph::capture(tapir::Device::Cuda(0), || 1);
        assert!(matches!(r, Err(Error::DeviceUnavailable { .. })), "{r:?}");
    }
}
