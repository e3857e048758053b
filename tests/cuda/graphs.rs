//! CUDA graphs: `cuda::CudaGraph` captures and replays, refuses what a graph
//! cannot hold without breaking the device, and `compile`'s
//! `mode: ReduceOverhead` replays inference through one graph with eager's
//! bits.

use super::*;
use tapir::compile::{CompileOptions, Mode, compile_with};
use tapir::cuda::CudaGraph;

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn a_captured_graph_replays_on_new_inputs_and_refuses_host_reads() {
    let Some(device) = gpu() else { return };
    let x = Tensor::from_vec(values(1000, 1), &[1000])
        .to(device)
        .unwrap();
    let w = Tensor::from_vec(values(1000, 2), &[1000])
        .to(device)
        .unwrap();
    let eager = |x: &Tensor| x.mul(&w).tanh().add(&x.sigmoid());
    let warm = eager(&x);
    let syncs = tapir::cuda::host_syncs();
    let (graph, y) = CudaGraph::capture(device, || eager(&x)).unwrap();
    assert_eq!(graph.device(), device);
    assert_eq!(
        tapir::cuda::host_syncs(),
        syncs + 1,
        "capture waits once, before"
    );
    for seed in 3..6 {
        let fresh = Tensor::from_vec(values(1000, seed), &[1000])
            .to(device)
            .unwrap();
        x.copy_(&fresh);
        graph.replay().unwrap();
        assert_eq!(
            y.to_vec::<f32>(),
            eager(&fresh).to_vec::<f32>(),
            "replay {seed}: the same kernels on the new input"
        );
    }
    drop(warm);

    // A host read inside the capture panics with the reason, ends the
    // capture, and leaves the device working.
    let allocated = tapir::cuda::memory_allocated(device).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        CudaGraph::capture(device, || x.sum().item::<f32>())
    }));
    let message = match caught {
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| "(not a string)".into()),
        Ok(r) => panic!("a host read inside a capture did not panic: {r:?}"),
    };
    assert!(
        message.contains("while a CUDA graph is being captured"),
        "{message}"
    );
    assert_eq!(
        x.add(&x).to_vec::<f32>().len(),
        1000,
        "the device still works"
    );
    assert_eq!(
        tapir::cuda::memory_allocated(device).unwrap(),
        allocated,
        "the failed capture's blocks went back"
    );
    drop((graph, y));
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn masks_and_zero_states_are_made_on_the_device_so_they_capture() {
    // `tril`, `triu`, the causal mask of attention on the Math backend and
    // a recurrent layer's zero state were built on the host and uploaded:
    // a capture refuses the upload. Made on the device, they capture, and
    // replay as the CPU computes them.
    let Some(device) = gpu() else { return };
    let x = Tensor::from_vec(values(6 * 5, 7), &[6, 5]);
    let q = Tensor::from_vec(values(2 * 4 * 8, 8), &[2, 4, 8]);
    let (kv, rnn_in) = (
        Tensor::from_vec(values(2 * 4 * 8, 9), &[2, 4, 8]),
        Tensor::from_vec(values(3 * 2 * 4, 10), &[3, 2, 4]),
    );
    let twin_gru = || {
        tapir::manual_seed(3);
        GRU::new(4, 5, RnnOptions::default())
    };
    let gru = twin_gru();
    let work = |x: &Tensor, q: &Tensor, kv: &Tensor, rnn_in: &Tensor, gru: &GRU| {
        let attn = sdpa_kernel(&[SdpBackend::Math], || {
            scaled_dot_product_attention(q, kv, kv, None, 0.0, true, None)
        });
        vec![x.tril(1), x.triu(-1), attn, gru.forward(rnn_in, None).0]
    };
    let want = no_grad(|| work(&x, &q, &kv, &rnn_in, &gru));
    let on = |t: &Tensor| t.to(device).unwrap();
    let mut gru_dev = twin_gru();
    gru_dev.to_device(device).unwrap();
    let inputs = [on(&x), on(&q), on(&kv), on(&rnn_in)];
    let (graph, got) = no_grad(|| {
        CudaGraph::capture(device, || {
            work(&inputs[0], &inputs[1], &inputs[2], &inputs[3], &gru_dev)
        })
    })
    .unwrap();
    graph.replay().unwrap();
    for (i, (got, want)) in got.iter().zip(&want).enumerate() {
        close(&format!("output {i}"), got, want, 1e-6, 1e-5).unwrap();
    }
}

fn reduce_overhead<M: Module>(model: M) -> tapir::compile::Compiled<M> {
    let options = CompileOptions {
        mode: Mode::ReduceOverhead,
        ..CompileOptions::default()
    };
    compile_with(model, options)
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn reduce_overhead_replays_inference_through_one_cuda_graph() {
    let Some(device) = gpu() else { return };
    let eager = SeedMlp::<48, 10>::new(&device);
    // Everything made from here on goes when the compiled model drops.
    let baseline = tapir::cuda::memory_allocated(device).unwrap();
    let compiled = reduce_overhead(SeedMlp::<48, 10>::new(&device));
    for ((_, a), (_, b)) in eager
        .named_parameters()
        .iter()
        .zip(&compiled.named_parameters())
    {
        tapir::no_grad(|| b.copy_(a));
    }
    let input = |seed| {
        Tensor::from_vec(values(8 * 48, seed), &[8, 48])
            .to(device)
            .unwrap()
    };
    tapir::no_grad(|| {
        let mut kept = Vec::new();
        for call in 0..6 {
            let x = input(call);
            let got = compiled.forward(&x);
            // Record, warm-up, capture, then replays: the same kernels as
            // eager (cuBLAS may pick another algorithm inside a capture, so
            // within f32 rounding rather than bitwise).
            let what = format!("call {call}");
            close(&what, &got, &eager.forward(&x), 1e-6, 1e-5).unwrap();
            kept.push(got);
        }
        // Results are copies: an earlier call's output survives replays.
        close(
            "call 3, kept",
            &kept[3],
            &eager.forward(&input(3)),
            1e-6,
            1e-5,
        )
        .unwrap();
        // An in-place update of the parameters (what an optimizer does) is
        // read by the next replay.
        for (a, b) in eager.parameters().iter().zip(&compiled.parameters()) {
            a.mul_scalar_(0.5);
            b.mul_scalar_(0.5);
        }
        let x = input(9);
        let (got, want) = (compiled.forward(&x), eager.forward(&x));
        close(
            "after an in-place parameter update",
            &got,
            &want,
            1e-6,
            1e-5,
        )
        .unwrap();
    });
    let e = compiled.explain();
    assert_eq!((e.cuda_graphs, e.cudagraph_replays), (1, 5), "{e}");
    assert!(e.cudagraph_skips.is_empty(), "{e}");
    drop(compiled);
    assert_eq!(
        tapir::cuda::memory_allocated(device).unwrap(),
        baseline,
        "the model, its graph's pool and its static tensors went back"
    );

    // With grad on, the replay records autograd: no graph, and why.
    let training = reduce_overhead(SeedMlp::<48, 10>::new(&device));
    for _ in 0..3 {
        let y = training.forward(&input(1));
        y.sum().backward();
    }
    let e = training.explain();
    assert_eq!(e.cuda_graphs, 0, "{e}");
    assert!(e.cudagraph_skips[0].contains("records autograd"), "{e}");
}

/// Two copies of one seed MLP on `device`: the second's parameters are the
/// first's values.
fn twin_mlps(device: Device) -> (SeedMlp<48, 10>, SeedMlp<48, 10>) {
    let a = SeedMlp::<48, 10>::new(&device);
    let b = SeedMlp::<48, 10>::new(&device);
    for (p, q) in a.parameters().iter().zip(&b.parameters()) {
        tapir::no_grad(|| q.copy_(p));
    }
    (a, b)
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn compile_step_replays_forward_and_backward_through_one_cuda_graph() {
    let Some(device) = gpu() else { return };
    let (eager, stepped) = twin_mlps(device);
    let cfg = SgdConfig {
        lr: 0.05,
        momentum: 0.9,
        ..SgdConfig::default()
    };
    let mut opt_e = SGD::new(eager.parameters(), cfg);
    let mut opt_s = SGD::new(stepped.parameters(), cfg);
    let mut step = tapir::compile_step(stepped.parameters(), |xs| {
        let loss = cross_entropy(&stepped.forward(xs[0]), xs[1]);
        loss.backward();
        vec![loss]
    });
    let mut syncs_in_replays = Vec::new();
    for k in 0..6 {
        let (x, y) = super::training::batch(k);
        let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
        opt_e.zero_grad();
        let want = cross_entropy(&eager.forward(&x), &y);
        want.backward();
        opt_e.step();
        opt_s.zero_grad();
        let syncs = tapir::cuda::host_syncs();
        let got = step.run(&[&x, &y]).remove(0);
        clip_grad_norm_(&stepped.parameters(), 1e9); // reads the graph's gradients
        opt_s.step();
        syncs_in_replays.push(tapir::cuda::host_syncs() - syncs);
        let (got, want) = (got.item::<f64>(), want.item::<f64>());
        assert!(
            (got - want).abs() <= 1e-5 * want.abs(),
            "step {k}: loss {got} against eager {want}"
        );
    }
    for ((name, a), b) in eager.named_parameters().iter().zip(&stepped.parameters()) {
        close(name, b, a, 1e-6, 1e-4).unwrap();
    }
    let e = step.explain();
    assert_eq!(
        (e.eager_calls, e.cuda_graphs, e.cudagraph_replays),
        (1, 1, 5),
        "warm-up, capture, then replays: {e}"
    );
    assert!(e.cudagraph_skips.is_empty(), "{e}");
    // The capture call waits once (before capturing); replays never.
    assert_eq!(
        &syncs_in_replays[2..],
        &[0, 0, 0, 0],
        "{syncs_in_replays:?}"
    );

    // Gradients not zeroed: that call accumulates eagerly, as eager code.
    let (x, y) = super::training::batch(7);
    let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
    let before = stepped.head.weight.grad().unwrap().to_vec::<f32>();
    step.run(&[&x, &y]);
    let after = stepped.head.weight.grad().unwrap().to_vec::<f32>();
    assert_ne!(before, after);
    let e = step.explain();
    assert_eq!(e.eager_calls, 2, "{e}");
    assert!(e.cudagraph_skips[0].contains("not zeroed"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn compile_step_with_dropout_runs_eagerly_with_eagers_draws() {
    let Some(device) = gpu() else { return };
    let (eager, stepped) = twin_mlps(device);
    let dropout = Dropout::new(0.2); // training mode
    let run = |model: &SeedMlp<48, 10>, xs: &[&Tensor]| {
        let h = dropout.forward(&model.forward(xs[0]));
        let loss = cross_entropy(&h, xs[1]);
        loss.backward();
        vec![loss]
    };
    let (x, y) = super::training::batch(1);
    let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
    manual_seed(21);
    let want: Vec<f64> = (0..3)
        .map(|_| {
            eager.zero_grad();
            run(&eager, &[&x, &y])[0].item::<f64>()
        })
        .collect();
    let mut step = tapir::compile_step(stepped.parameters(), |xs| run(&stepped, xs));
    manual_seed(21);
    let got: Vec<f64> = (0..3)
        .map(|_| {
            stepped.zero_grad();
            step.run(&[&x, &y])[0].item::<f64>()
        })
        .collect();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs(), "{got:?} against {want:?}");
    }
    let e = step.explain();
    assert_eq!((e.cuda_graphs, e.eager_calls), (0, 3), "{e}");
    assert!(e.cudagraph_skips[0].contains("draws random numbers"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn an_out_of_range_index_in_a_replay_is_reported_at_the_next_read() {
    let Some(device) = gpu() else { return };
    let on = |t: Tensor| t.to(device).unwrap();
    let table = on(Tensor::from_vec(values(20, 4), &[4, 5]));
    let ids = on(Tensor::from_vec(vec![0i64, 3], &[2]));
    table.embedding(&ids).to_vec::<f32>(); // warm-up
    let (graph, rows) = CudaGraph::capture(device, || table.embedding(&ids)).unwrap();
    graph.replay().unwrap();
    assert_eq!(rows.to_vec::<f32>()[..5], values(20, 4)[..5]);
    // Several reads later the captured launch's id must still be known.
    for _ in 0..3 {
        graph.replay().unwrap();
        rows.to_vec::<f32>();
    }
    ids.copy_(&on(Tensor::from_vec(vec![1i64, 6], &[2])));
    graph.replay().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rows.to_vec::<f32>()));
    let msg = caught
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        msg.starts_with("index_select: index 6 is out of bounds for dim of size 4"),
        "{msg}"
    );
    // Reported once; a good replay reads cleanly.
    ids.copy_(&on(Tensor::from_vec(vec![2i64, 1], &[2])));
    graph.replay().unwrap();
    assert_eq!(rows.to_vec::<f32>()[..5], values(20, 4)[10..15]);
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn run_with_optimizer_captures_adamw_with_its_schedule_in_the_graph() {
    let Some(device) = gpu() else { return };
    let (eager, stepped) = twin_mlps(device);
    let cfg = AdamWConfig {
        lr: 1e-3,
        weight_decay: 1e-2,
        ..AdamWConfig::default()
    };
    let mut opt_e = AdamW::new(eager.parameters(), cfg);
    let mut opt_s = AdamW::new(stepped.parameters(), cfg);
    let mut sched_e = CosineAnnealingLR::new(&mut opt_e, 8, 0.0);
    let mut sched_s = CosineAnnealingLR::new(&mut opt_s, 8, 0.0);
    let params = stepped.parameters();
    let mut step = tapir::compile_step(stepped.parameters(), |xs| {
        let loss = cross_entropy(&stepped.forward(xs[0]), xs[1]);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        vec![loss]
    });
    let mut syncs = Vec::new();
    for k in 0..8 {
        let (x, y) = super::training::batch(k);
        let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
        opt_e.zero_grad();
        let want = cross_entropy(&eager.forward(&x), &y);
        want.backward();
        clip_grad_norm_(&eager.parameters(), 1.0);
        opt_e.step();
        sched_e.step(&mut opt_e);
        opt_s.zero_grad();
        let before = tapir::cuda::host_syncs();
        let got = step.run_with_optimizer(&[&x, &y], &mut opt_s).remove(0);
        sched_s.step(&mut opt_s);
        syncs.push(tapir::cuda::host_syncs() - before);
        let (got, want) = (got.item::<f64>(), want.item::<f64>());
        assert!(
            (got - want).abs() <= 1e-5 * want.abs(),
            "step {k}: loss {got} against eager {want}"
        );
    }
    // The same kernels with the same hyper-parameters: the schedule and the
    // bias corrections reached the graph at every replay.
    for ((name, a), b) in eager.named_parameters().iter().zip(&stepped.parameters()) {
        close(name, b, a, 1e-5, 1e-4).unwrap();
    }
    let e = step.explain();
    assert_eq!(
        (e.eager_calls, e.cuda_graphs, e.cudagraph_replays),
        (1, 1, 7),
        "{e}"
    );
    assert_eq!(&syncs[2..], &[0; 6], "replays never wait: {syncs:?}");

    // State replaced behind the graph's back is refused, not corrupted.
    let state = opt_s.state_dict();
    opt_s.load_state_dict(&state).unwrap();
    opt_s.zero_grad();
    let (x, y) = super::training::batch(9);
    let (x, y) = (x.to(device).unwrap(), y.to(device).unwrap());
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        step.run_with_optimizer(&[&x, &y], &mut opt_s)
    }));
    let msg = caught
        .err()
        .and_then(|p| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        msg.contains("is not the one the CUDA graph captured"),
        "{msg}"
    );
    // After reset the step warms up and captures again on the new state.
    step.reset();
    opt_s.zero_grad();
    step.run_with_optimizer(&[&x, &y], &mut opt_s);
    opt_s.zero_grad();
    step.run_with_optimizer(&[&x, &y], &mut opt_s);
    assert_eq!(step.explain().cuda_graphs, 2);
}
