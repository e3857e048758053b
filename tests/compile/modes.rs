//! `mode: ReduceOverhead` and `compile_step` off a GPU: the same results as
//! eager code, the reason no CUDA graph was captured, and the optimizer
//! refused inside a compiled step (the GPU side is in
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

#[test]
fn compile_step_on_the_cpu_trains_as_eager_and_says_why() {
    let _serial = serial();
    let (eager, stepped) = twins(seed::Mlp::seed);
    let cfg = AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    };
    let mut opt_e = AdamW::new(eager.parameters(), cfg);
    let mut opt_s = AdamW::new(stepped.parameters(), cfg);
    let mut step = tapir::compile_step(stepped.parameters(), |xs| {
        let loss = cross_entropy(&stepped.forward(xs[0]), xs[1]);
        loss.backward();
        vec![loss]
    });
    let g = Generator::new(13);
    for k in 0..5 {
        let x = Tensor::randn_with(&[16, 784], &g);
        let y = Tensor::randint_with(0, 10, &[16], &g);
        opt_e.zero_grad();
        let want = cross_entropy(&eager.forward(&x), &y);
        want.backward();
        opt_e.step();
        opt_s.zero_grad();
        let got = step.run(&[&x, &y]).remove(0);
        opt_s.step();
        assert_eq!(got.item::<f32>(), want.item::<f32>(), "step {k}: loss");
    }
    for ((name, a), b) in eager.named_parameters().iter().zip(&stepped.parameters()) {
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "{name} after 5 steps");
    }
    let e = step.explain();
    assert_eq!(
        (e.eager_calls, e.cuda_graphs, e.cudagraph_replays),
        (5, 0, 0),
        "{e}"
    );
    assert_eq!(e.cudagraph_skips.len(), 1, "{e}");
    assert!(e.cudagraph_skips[0].contains("cpu device"), "{e}");
}

#[test]
fn an_optimizer_step_inside_compile_step_panics_with_the_reason() {
    let _serial = serial();
    manual_seed(3);
    let model = Linear::new(4, 2, true);
    let opt = std::cell::RefCell::new(SGD::new(model.parameters(), SgdConfig::default()));
    let mut step = tapir::compile_step(model.parameters(), |xs| {
        let loss = model.forward(xs[0]).square().sum();
        loss.backward();
        opt.borrow_mut().step();
        vec![loss]
    });
    let x = Tensor::ones(&[3, 4]);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step.run(&[&x])));
    let payload = caught.expect_err("an optimizer step inside the closure must panic");
    let message = match payload.downcast_ref::<&str>() {
        Some(s) => s.to_string(),
        None => payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default(),
    };
    assert!(
        message.starts_with("optimizer step inside a compile_step closure"),
        "{message}"
    );
    // Outside the closure the optimizer steps as usual.
    opt.borrow_mut().step();
}

#[test]
fn run_with_optimizer_on_the_cpu_steps_as_eager_with_a_schedule() {
    let _serial = serial();
    let (eager, stepped) = twins(seed::Mlp::seed);
    let cfg = AdamWConfig {
        lr: 1e-3,
        ..AdamWConfig::default()
    };
    let mut opt_e = AdamW::new(eager.parameters(), cfg);
    let mut opt_s = AdamW::new(stepped.parameters(), cfg);
    let mut sched_e = StepLR::new(&mut opt_e, 2, 0.5);
    let mut sched_s = StepLR::new(&mut opt_s, 2, 0.5);
    let params = stepped.parameters();
    let mut step = tapir::compile_step(stepped.parameters(), |xs| {
        let loss = cross_entropy(&stepped.forward(xs[0]), xs[1]);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        vec![loss]
    });
    let g = Generator::new(17);
    for k in 0..5 {
        let x = Tensor::randn_with(&[16, 784], &g);
        let y = Tensor::randint_with(0, 10, &[16], &g);
        opt_e.zero_grad();
        let want = cross_entropy(&eager.forward(&x), &y);
        want.backward();
        clip_grad_norm_(&eager.parameters(), 1.0);
        opt_e.step();
        sched_e.step(&mut opt_e);
        opt_s.zero_grad();
        let got = step.run_with_optimizer(&[&x, &y], &mut opt_s).remove(0);
        sched_s.step(&mut opt_s);
        assert_eq!(got.item::<f32>(), want.item::<f32>(), "step {k}: loss");
    }
    assert_eq!(opt_s.lr(), opt_e.lr());
    for ((name, a), b) in eager.named_parameters().iter().zip(&stepped.parameters()) {
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "{name} after 5 steps");
    }
    assert_eq!(step.explain().eager_calls, 5);
}

#[test]
fn cuda_graphs_turned_off_say_so_and_run_as_before() {
    let _serial = serial();
    let (eager, compiled) = twins(seed::Mlp::seed);
    let compiled = compile_with(
        compiled,
        CompileOptions {
            mode: Mode::ReduceOverhead,
            ..CompileOptions::default()
        },
    );
    tapir::cuda::set_graphs_enabled(false);
    let x = Tensor::ones(&[2, 784]);
    let outs: Vec<Vec<f32>> = (0..3)
        .map(|_| tapir::no_grad(|| compiled.forward(&x).to_vec::<f32>()))
        .collect();
    tapir::cuda::set_graphs_enabled(true);
    let want = tapir::no_grad(|| eager.forward(&x).to_vec::<f32>());
    assert!(outs.iter().all(|o| *o == want));
    let e = compiled.explain();
    assert!(e.cudagraph_skips[0].contains("they are off"), "{e}");
}
