//! Replays the scheduler half of `scripts/gen_nn_goldens.py`: 25 steps of
//! every scheduler configuration against PyTorch's lrs and momenta, and
//! scheduler state restored mid-schedule.

use crate::common::*;
use safetensors::SafeTensors;
use tapir::optim::*;
use tapir::prelude::*;

/// PyTorch's SWALR example: another scheduler for 8 epochs, then SWALR
/// annealing from wherever that left the lr (the script's `DecayThenSwa`).
struct DecayThenSwa {
    decay: ClosedForm,
    swa: swa_utils::SWALR,
    steps: i64,
}

impl DecayThenSwa {
    fn new(o: &mut dyn Optimizer) -> DecayThenSwa {
        DecayThenSwa {
            decay: MultiplicativeLR::new(o, |_| 0.8),
            swa: swa_utils::SWALR::new(o, 0.05, 6, swa_utils::AnnealStrategy::Linear),
            steps: 0,
        }
    }
}

impl LrScheduler for DecayThenSwa {
    fn set_epoch(&mut self, opt: &mut dyn Optimizer, _: i64) {
        self.steps += 1;
        if self.steps <= 8 {
            self.decay.step(opt)
        } else {
            self.swa.step(opt)
        }
    }
    fn last_epoch(&self) -> i64 {
        self.steps
    }
    fn get_last_lr(&self) -> Vec<f64> {
        self.swa.get_last_lr()
    }
}

#[test]
#[allow(clippy::needless_range_loop)]
fn schedulers_match_pytorch_for_25_steps() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let n = run_all(m["sched"].as_array().unwrap().iter(), |c| {
        let name = c["name"].as_str().unwrap();
        let p = Tensor::zeros(&[1]).requires_grad_(true);
        let mut opt: Box<dyn Optimizer> = if c["opt"] == "sgd" {
            Box::new(SGD::new(
                vec![p.clone()],
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    ..Default::default()
                },
            ))
        } else {
            Box::new(AdamW::new(
                vec![p.clone()],
                AdamWConfig {
                    lr: 0.1,
                    ..AdamWConfig::default()
                },
            ))
        };
        let o = opt.as_mut();
        let metrics: Vec<f64> = if name == "plateau" {
            load(&st, "sched.plateau.metrics").to_vec()
        } else {
            vec![]
        };
        let mut plateau = ReduceLROnPlateau::new(PlateauMode::Min);
        (plateau.patience, plateau.factor, plateau.cooldown) = (2, 0.5, 1);
        let mut s: Option<Box<dyn LrScheduler>> = match name {
            "step" => Some(Box::new(StepLR::new(o, 4, 0.5))),
            "multistep" => Some(Box::new(MultiStepLR::new(o, vec![3, 10, 18], 0.3))),
            "exponential" => Some(Box::new(ExponentialLR::new(o, 0.9))),
            "cosine" => Some(Box::new(CosineAnnealingLR::new(o, 10, 0.001))),
            "linear" => Some(Box::new(LinearLR::new(o, 0.1, 1.0, 8))),
            "onecycle_sgd" => Some(Box::new(OneCycleLR::new(o, 1.0, 25))),
            "onecycle_adamw" => Some(Box::new(OneCycleLR::with(o, 0.5, 30, 0.25, 25.0, 1e4))),
            "sequential" => {
                let warm: Box<dyn LrScheduler> = Box::new(LinearLR::new(o, 0.01, 1.0, 5));
                let cos: Box<dyn LrScheduler> = Box::new(CosineAnnealingLR::new(o, 20, 0.0));
                Some(Box::new(SequentialLR::new(o, vec![warm, cos], vec![5])))
            }
            "warm_restarts" => Some(Box::new(CosineAnnealingWarmRestarts::new(o, 3, 2, 0.01))),
            "lambda" => Some(Box::new(LambdaLR::new(o, |e| {
                ((e + 1) as f64 / 6.0).min(1.0) * 0.97f64.powi(e as i32)
            }))),
            "multiplicative" => Some(Box::new(MultiplicativeLR::new(o, |e| {
                if e % 3 != 0 { 0.9 } else { 0.5 }
            }))),
            "constant" => Some(Box::new(ConstantLR::new(o, 0.25, 7))),
            "polynomial" => Some(Box::new(PolynomialLR::new(o, 12, 2.0))),
            "cyclic" => Some(Box::new(CyclicLR::new(
                o,
                CyclicLrConfig {
                    base_lr: 0.01,
                    max_lr: 0.1,
                    step_size_up: 4,
                    ..Default::default()
                },
            ))),
            "cyclic_triangular2_adamw" => Some(Box::new(CyclicLR::new(
                o,
                CyclicLrConfig {
                    base_lr: 0.02,
                    max_lr: 0.2,
                    step_size_up: 3,
                    step_size_down: Some(5),
                    mode: CyclicMode::Triangular2,
                    base_momentum: 0.85,
                    max_momentum: 0.95,
                    ..Default::default()
                },
            ))),
            "cyclic_exp_range" => Some(Box::new(CyclicLR::new(
                o,
                CyclicLrConfig {
                    base_lr: 0.01,
                    max_lr: 0.1,
                    step_size_up: 2,
                    step_size_down: Some(4),
                    mode: CyclicMode::ExpRange { gamma: 0.9 },
                    cycle_momentum: false,
                    ..Default::default()
                },
            ))),
            "swalr_cos" => Some(Box::new(swa_utils::SWALR::new(
                o,
                0.02,
                10,
                swa_utils::AnnealStrategy::Cos,
            ))),
            "swalr_linear_at_once" => Some(Box::new(swa_utils::SWALR::new(
                o,
                0.05,
                0,
                swa_utils::AnnealStrategy::Linear,
            ))),
            "swalr_after_decay" => Some(Box::new(DecayThenSwa::new(o))),
            "chained_linear_exponential" => {
                let warm: Box<dyn LrScheduler> = Box::new(LinearLR::new(o, 0.1, 1.0, 5));
                let decay: Box<dyn LrScheduler> = Box::new(ExponentialLR::new(o, 0.9));
                Some(Box::new(ChainedScheduler::new(o, vec![warm, decay])))
            }
            "chained_constant_cosine_step" => {
                let chain: Vec<Box<dyn LrScheduler>> = vec![
                    Box::new(ConstantLR::new(o, 0.5, 4)),
                    Box::new(CosineAnnealingLR::new(o, 6, 0.01)),
                    Box::new(StepLR::new(o, 3, 0.7)),
                ];
                Some(Box::new(ChainedScheduler::new(o, chain)))
            }
            "chained_poly_multistep_mult" => {
                let chain: Vec<Box<dyn LrScheduler>> = vec![
                    Box::new(PolynomialLR::new(o, 10, 1.5)),
                    Box::new(MultiStepLR::new(o, vec![4, 4, 9], 0.5)),
                    Box::new(MultiplicativeLR::new(o, |_| 0.95)),
                ];
                Some(Box::new(ChainedScheduler::new(o, chain)))
            }
            "plateau" => None,
            other => panic!("no scheduler {other}"),
        };
        let (mut lrs, mut moms) = (vec![], vec![]);
        for k in 0..25 {
            lrs.push(opt.lr());
            moms.push(opt.momentum().unwrap());
            p.set_grad(Some(Tensor::zeros(&[1])));
            opt.step();
            match &mut s {
                Some(s) => s.step(opt.as_mut()),
                None => plateau.step(opt.as_mut(), metrics[k]),
            }
        }
        close(
            &format!("{name} lr"),
            &Tensor::from_vec(lrs, &[25]),
            &load(&st, &format!("sched.{name}.lr")),
            1e-12,
            1e-10,
        )?;
        close(
            &format!("{name} momentum"),
            &Tensor::from_vec(moms, &[25]),
            &load(&st, &format!("sched.{name}.momentum")),
            1e-12,
            1e-10,
        )
    });
    assert_eq!(n, 23);
}

#[test]
fn scheduler_state_restores_the_schedule() {
    // Run warmup + cosine for 7 steps, save, rebuild in a fresh optimizer,
    // restore, and check the next 10 lrs agree with an uninterrupted run.
    let make = |opt: &mut dyn Optimizer| -> SequentialLR {
        let warm: Box<dyn LrScheduler> = Box::new(LinearLR::new(opt, 0.1, 1.0, 3));
        let cos: Box<dyn LrScheduler> = Box::new(CosineAnnealingLR::new(opt, 12, 0.0));
        SequentialLR::new(opt, vec![warm, cos], vec![3])
    };
    let p = Tensor::zeros(&[1]).requires_grad_(true);
    let mut a = SGD::new(
        vec![p.clone()],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    );
    let mut sa = make(&mut a);
    for _ in 0..7 {
        sa.step(&mut a);
    }
    let saved = sa.state_dict();
    let mut b = SGD::new(
        vec![p.clone()],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    );
    let mut sb = make(&mut b);
    sb.load_state_dict(&mut b, &saved);
    assert_eq!(a.lr(), b.lr());
    for _ in 0..10 {
        sa.step(&mut a);
        sb.step(&mut b);
        assert!((a.lr() - b.lr()).abs() < 1e-15, "{} vs {}", a.lr(), b.lr());
    }
    let mut w = SGD::new(
        vec![p.clone()],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    );
    let mut r = CosineAnnealingWarmRestarts::new(&mut w, 2, 2, 0.0);
    for _ in 0..5 {
        r.step(&mut w);
    }
    let st = r.state_dict();
    let mut w2 = SGD::new(
        vec![p],
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    );
    let mut r2 = CosineAnnealingWarmRestarts::new(&mut w2, 2, 2, 0.0);
    r2.load_state_dict(&mut w2, &st);
    r.step(&mut w);
    r2.step(&mut w2);
    assert_eq!(w.lr(), w2.lr());

    // SWALR counts its steps: restored mid-anneal, it continues the anneal.
    use swa_utils::{AnnealStrategy, SWALR};
    let sgd = |p: &Tensor| {
        let config = SgdConfig {
            lr: 0.5,
            ..Default::default()
        };
        SGD::new(vec![p.clone()], config)
    };
    let p = Tensor::zeros(&[1]).requires_grad_(true);
    let (mut a, mut b) = (sgd(&p), sgd(&p));
    let mut sa = SWALR::new(&mut a, 0.1, 8, AnnealStrategy::Cos);
    for _ in 0..3 {
        sa.step(&mut a);
    }
    let mut sb = SWALR::new(&mut b, 0.1, 8, AnnealStrategy::Cos);
    assert_eq!(b.lr(), 0.5);
    sb.load_state_dict(&mut b, &sa.state_dict());
    assert_eq!(a.lr(), b.lr());
    for _ in 0..8 {
        sa.step(&mut a);
        sb.step(&mut b);
        assert_eq!(a.lr(), b.lr());
    }
    assert!((a.lr() - 0.1).abs() < 1e-15, "annealed to the SWA lr");
}

#[test]
fn a_restored_chain_continues_where_it_stopped() {
    let make = |opt: &mut dyn Optimizer| {
        let chain: Vec<Box<dyn LrScheduler>> = vec![
            Box::new(LinearLR::new(opt, 0.2, 1.0, 4)),
            Box::new(CosineAnnealingLR::new(opt, 5, 0.001)),
        ];
        ChainedScheduler::new(opt, chain)
    };
    let sgd = || {
        let p = Tensor::zeros(&[1]).requires_grad_(true);
        SGD::new(
            vec![p],
            SgdConfig {
                lr: 0.3,
                ..Default::default()
            },
        )
    };
    let (mut a, mut b) = (sgd(), sgd());
    let mut sa = make(&mut a);
    for _ in 0..7 {
        sa.step(&mut a);
    }
    let mut sb = make(&mut b);
    sb.load_state_dict(&mut b, &sa.state_dict());
    for k in 0..12 {
        assert!(
            (a.lr() - b.lr()).abs() < 1e-15,
            "step {k}: {} vs {}",
            a.lr(),
            b.lr()
        );
        assert_eq!(sa.get_last_lr(), sb.get_last_lr());
        sa.step(&mut a);
        sb.step(&mut b);
    }
}
