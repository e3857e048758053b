//! The fused optimizer kernels against `OptimStep::apply` (the CPU twin),
//! in every configuration of [`configs`] (which the emulator runs too).

use super::*;
use crate::optim::{
    AdadeltaStep, AdagradStep, AdamStep, AdamaxStep, AsgdStep, NadamStep, OptimStep, RadamStep,
    RmspropStep, RpropStep, SgdStep,
};

/// Rounds through `dtype` as a kernel stores it (f32 unchanged).
fn round_through(dtype: &str, v: &mut [f32]) {
    for x in v {
        *x = match dtype {
            "f16" => half::f16::from_f32(*x).to_f32(),
            "bf16" => half::bf16::from_f32(*x).to_f32(),
            _ => *x,
        }
    }
}

/// Uploads f32 values stored as `dtype`.
fn up_as(dev: &Arc<CudaDevice>, v: &[f32], dtype: &str) -> CudaBuffer {
    match dtype {
        "f16" => dev.upload(
            &v.iter()
                .map(|&x| half::f16::from_f32(x).to_bits())
                .collect::<Vec<_>>(),
        ),
        "bf16" => dev.upload(
            &v.iter()
                .map(|&x| half::bf16::from_f32(x).to_bits())
                .collect::<Vec<_>>(),
        ),
        _ => dev.upload(v),
    }
    .unwrap()
}

/// Reads `n` elements stored as `dtype`, as f32.
fn down_as(b: &CudaBuffer, n: usize, dtype: &str) -> Vec<f32> {
    let bits = || b.read::<u16>(n).unwrap().into_iter();
    match dtype {
        "f16" => bits().map(|x| half::f16::from_bits(x).to_f32()).collect(),
        "bf16" => bits().map(|x| half::bf16::from_bits(x).to_f32()).collect(),
        _ => down(b, n),
    }
}

type CpuStep<'a> = &'a dyn Fn(&mut [f32], &[f32], &mut [Vec<f32>], usize);
type GpuStep<'a> = &'a dyn Fn(&mut CudaBuffer, &CudaBuffer, &mut [&mut CudaBuffer], usize);

/// Three steps (0, 1, 2) of one optimizer with `states` zeroed state
/// buffers, on the GPU in `dtype` and on its CPU twin from the same rounded
/// values; the twin rounds what it stores, as the kernel does. Compares the
/// parameter and every state buffer.
fn three_steps(
    dev: &Arc<CudaDevice>,
    (dtype, tol): (&str, f32),
    what: &str,
    states: usize,
    cpu: CpuStep<'_>,
    gpu: GpuStep<'_>,
) {
    let n = 5000;
    let (mut p, mut g) = (inputs(n, 17), inputs(n, 19));
    round_through(dtype, &mut p);
    round_through(dtype, &mut g);
    let mut st = vec![vec![0.0f32; n]; states];
    let (mut dp, dg) = (up_as(dev, &p, dtype), up_as(dev, &g, dtype));
    let mut dst: Vec<CudaBuffer> = st.iter().map(|s| up_as(dev, s, dtype)).collect();
    for step in 0..3 {
        cpu(&mut p, &g, &mut st, step);
        round_through(dtype, &mut p);
        st.iter_mut().for_each(|s| round_through(dtype, s));
        let mut bufs: Vec<&mut CudaBuffer> = dst.iter_mut().collect();
        gpu(&mut dp, &dg, &mut bufs, step);
    }
    let what = format!("{what} ({dtype})");
    close(&what, &down_as(&dp, n, dtype), &p, tol);
    for (k, (d, s)) in dst.iter().zip(&st).enumerate() {
        close(&format!("{what} state {k}"), &down_as(d, n, dtype), s, tol);
    }
}

/// An optimizer's step at step index `t` (0, 1, 2).
pub(in crate::cuda) type StepAt = Box<dyn Fn(usize) -> OptimStep>;

/// Every configuration of the twin test, and two more RMSprop ones.
pub(in crate::cuda) fn configs() -> Vec<(&'static str, StepAt)> {
    let adamw = AdamStep {
        lr: 1e-2,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 1e-2,
        decoupled: true,
        amsgrad: false,
        maximize: false,
        step: 0,
    };
    let amsgrad_max = AdamStep {
        weight_decay: 0.1,
        decoupled: false,
        amsgrad: true,
        maximize: true,
        ..adamw
    };
    let nesterov = SgdStep {
        lr: 0.05,
        momentum: 0.9,
        dampening: 0.0,
        weight_decay: 1e-3,
        nesterov: true,
        maximize: false,
    };
    let damped_max = SgdStep {
        lr: 0.1,
        momentum: 0.5,
        dampening: 0.2,
        weight_decay: 0.0,
        nesterov: false,
        maximize: true,
    };
    let plain = SgdStep {
        lr: 0.1,
        ..Default::default()
    };
    let rms_all = RmspropStep {
        weight_decay: 0.1,
        momentum: 0.9,
        centered: true,
        maximize: true,
        ..Default::default()
    };
    let rms_momentum = RmspropStep {
        momentum: 0.5,
        ..Default::default()
    };
    let rms_centered = RmspropStep {
        centered: true,
        ..Default::default()
    };
    let adam = |h: AdamStep| -> StepAt {
        Box::new(move |t| {
            OptimStep::Adam(AdamStep {
                step: t as u64 + 1,
                ..h
            })
        })
    };
    let sgd = |h: SgdStep| -> StepAt { Box::new(move |t| OptimStep::Sgd { h, first: t == 0 }) };
    let rms = |h: RmspropStep| -> StepAt { Box::new(move |_| OptimStep::Rmsprop(h)) };
    vec![
        ("adamw", adam(adamw)),
        ("adam amsgrad maximize", adam(amsgrad_max)),
        ("sgd nesterov", sgd(nesterov)),
        ("sgd damped maximize", sgd(damped_max)),
        ("sgd plain", sgd(plain)),
        ("rmsprop plain", rms(RmspropStep::default())),
        ("rmsprop centered momentum", rms(rms_all)),
        ("rmsprop momentum", rms(rms_momentum)),
        ("rmsprop centered", rms(rms_centered)),
    ]
    .into_iter()
    .chain(adaptive_configs())
    .collect()
}

/// The adaptive-rate updates: each with its options off, and with weight
/// decay and maximize (and decoupled decay where it has one). RAdam's
/// steps count from 5 (a resumed run): step 5 is not rectified, 6 and 7
/// are, so both of its branches run.
fn adaptive_configs() -> Vec<(&'static str, StepAt)> {
    let adagrad = |lr_decay, weight_decay, maximize| -> StepAt {
        Box::new(move |t| {
            OptimStep::Adagrad(AdagradStep {
                lr: 1e-2,
                lr_decay,
                weight_decay,
                eps: 1e-10,
                maximize,
                step: t as u64 + 1,
            })
        })
    };
    let adadelta = |h: AdadeltaStep| -> StepAt { Box::new(move |_| OptimStep::Adadelta(h)) };
    let adamax = |weight_decay, maximize| -> StepAt {
        Box::new(move |t| {
            OptimStep::Adamax(AdamaxStep {
                lr: 2e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay,
                maximize,
                step: t as u64 + 1,
            })
        })
    };
    let nadam = |weight_decay, decoupled, maximize| -> StepAt {
        Box::new(move |t| {
            // PyTorch's running product of the momentum schedule.
            let mu_product =
                (1..=t as u64 + 1).fold(1.0f32, |acc, k| acc * NadamStep::mu(0.9, 4e-3, k) as f32);
            OptimStep::Nadam(NadamStep {
                lr: 2e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay,
                momentum_decay: 4e-3,
                decoupled,
                maximize,
                step: t as u64 + 1,
                mu_product: mu_product as f64,
            })
        })
    };
    let radam = |weight_decay, decoupled, maximize| -> StepAt {
        Box::new(move |t| {
            OptimStep::Radam(RadamStep {
                lr: 1e-3,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay,
                decoupled,
                maximize,
                step: t as u64 + 5,
            })
        })
    };
    vec![
        ("adagrad", adagrad(0.0, 0.0, false)),
        ("adagrad lr_decay wd maximize", adagrad(0.1, 0.1, true)),
        ("adadelta", adadelta(AdadeltaStep::default())),
        (
            "adadelta wd maximize",
            adadelta(AdadeltaStep {
                lr: 0.5,
                weight_decay: 0.1,
                maximize: true,
                ..Default::default()
            }),
        ),
        ("adamax", adamax(0.0, false)),
        ("adamax wd maximize", adamax(0.1, true)),
        ("nadam", nadam(0.0, false, false)),
        ("nadam wd maximize", nadam(0.1, false, true)),
        ("nadam decoupled", nadam(0.1, true, false)),
        ("radam", radam(0.0, false, false)),
        ("radam wd maximize", radam(0.1, false, true)),
        ("radam decoupled", radam(0.1, true, false)),
    ]
    .into_iter()
    .chain(averaging_configs())
    .collect()
}

/// Rprop (its first step sets the step sizes; the gradient keeps its sign,
/// so later steps grow them, up to a bound small enough to be reached) and
/// ASGD (weights copied into the average, then averaged with mu < 1).
fn averaging_configs() -> Vec<(&'static str, StepAt)> {
    let rprop = |step_size_max, maximize| -> StepAt {
        Box::new(move |t| {
            OptimStep::Rprop(RpropStep {
                lr: 1e-2,
                etaminus: 0.5,
                etaplus: 1.2,
                step_size_min: 1e-6,
                step_size_max,
                maximize,
                first: t == 0,
            })
        })
    };
    let asgd = |weight_decay, maximize, mu: f64| -> StepAt {
        Box::new(move |t| {
            let eta = 1e-2 / (1.0 + 1e-4 * 1e-2 * t as f64).powf(0.75);
            OptimStep::Asgd(AsgdStep {
                lambd: 1e-4,
                weight_decay,
                maximize,
                eta: eta as f32 as f64,
                mu: if t == 0 { 1.0 } else { mu },
            })
        })
    };
    vec![
        ("rprop", rprop(50.0, false)),
        ("rprop bounded maximize", rprop(0.011, true)),
        ("asgd", asgd(0.0, false, 1.0)),
        ("asgd wd maximize averaged", asgd(0.1, true, 0.5)),
    ]
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn optimizers_match_their_cpu_twins_in_every_float_dtype() {
    let Some(dev) = gpu() else { return };
    let n = 5000;
    // Fused multiply-adds on the GPU can move a half result by one unit in
    // the last place.
    for dt in [("f32", 1e-5), ("f16", 4e-3), ("bf16", 2e-2)] {
        let dtype = dt.0;
        for (name, step) in configs() {
            three_steps(
                &dev,
                dt,
                name,
                step(0).state_len(),
                &|p, g, st, t| {
                    let mut views: Vec<&mut [f32]> = st.iter_mut().map(|v| &mut v[..]).collect();
                    step(t).apply(p, g, &mut views)
                },
                &|p, g, st, t| launch::optim_step(p, g, st, n, dtype, &step(t)).unwrap(),
            );
        }
    }
}

/// Optimizer steps inside a CUDA graph read their hyper-parameters from a
/// table the host rewrites before each replay: three replays of one
/// captured update equal three eager updates bit for bit, with the step
/// count and the learning rate changing between them.
#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn optimizer_steps_replay_from_a_hyper_table_as_eager_steps() {
    use crate::cuda::{HyperTable, TableMode};
    let Some(dev) = gpu() else { return };
    let n = 3000;
    let adam = |step: u64| AdamStep {
        lr: 1e-2 / step as f64, // a schedule
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 1e-2,
        decoupled: true,
        amsgrad: false,
        maximize: false,
        step,
    };
    let sgd = |step: u64| SgdStep {
        lr: 0.1 / step as f64,
        momentum: 0.9,
        ..Default::default()
    };
    let fresh = || {
        let mut bufs = vec![up(&dev, &inputs(n, 3)), up(&dev, &inputs(n, 5))];
        bufs.extend((0..3).map(|_| up(&dev, &vec![0.0; n])));
        bufs
    };
    // bufs: [p, g, exp_avg, exp_avg_sq, momentum]
    let update = |b: &mut [CudaBuffer], step: u64| {
        let (pg, st) = b.split_at_mut(2);
        let (p, g) = pg.split_at_mut(1);
        let (m, rest) = st.split_at_mut(1);
        let (v, mom) = rest.split_at_mut(1);
        launch::adam(
            &mut p[0],
            &g[0],
            &mut [&mut m[0], &mut v[0]],
            n,
            "f32",
            &adam(step),
        )
        .unwrap();
        launch::sgd(
            &mut p[0],
            &g[0],
            Some(&mut mom[0]),
            n,
            "f32",
            &sgd(step),
            step == 1,
        )
        .unwrap();
    };
    let mut eager = fresh();
    for step in 1..=3 {
        update(&mut eager, step);
    }
    let mut graphed = fresh();
    update(&mut graphed, 1); // warm-up: the first SGD step starts its buffer
    let table = HyperTable::new(&dev, 4).unwrap();
    let (graph, table) = dev
        .capture(|| {
            dev.set_hyper_table(table, TableMode::Capture);
            update(&mut graphed, 2);
            dev.take_hyper_table().unwrap()
        })
        .unwrap();
    let mut table = table;
    assert_eq!(table.captured(), 2);
    table.upload().unwrap();
    graph.replay().unwrap();
    dev.set_hyper_table(table, TableMode::Prepare);
    update(&mut graphed, 3); // writes the rows, launches nothing
    let mut table = dev.take_hyper_table().unwrap();
    assert_eq!(table.written(), 2);
    table.upload().unwrap();
    graph.replay().unwrap();
    for (k, (a, b)) in eager.iter().zip(&graphed).enumerate() {
        assert_eq!(down(a, n), down(b, n), "buffer {k} after three steps");
    }
}
