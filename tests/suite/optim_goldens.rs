//! The optimizers against PyTorch's: every option of each in f64 and f32
//! (`torch.optim`'s single-tensor updates, and the state a user reads), f16/bf16 parameters against
//! PyTorch's fused kernels, and a resumed optimizer against the run it
//! was saved from.

use crate::common::*;
use safetensors::SafeTensors;
use tapir::optim::*;
use tapir::prelude::*;

fn make_opt(name: &str, ps: Vec<Tensor>) -> Box<dyn Optimizer> {
    let sgd = |c: SgdConfig| -> Box<dyn Optimizer> { Box::new(SGD::new(ps.clone(), c)) };
    let adam = AdamConfig::default();
    let adamw = AdamWConfig::default();
    let d = SgdConfig::default();
    match name {
        "sgd" => sgd(SgdConfig { lr: 0.1, ..d }),
        "sgd_momentum_damp" => sgd(SgdConfig {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.2,
            ..d
        }),
        "sgd_nesterov_wd" => sgd(SgdConfig {
            lr: 0.05,
            momentum: 0.8,
            nesterov: true,
            weight_decay: 0.1,
            ..d
        }),
        "sgd_maximize" => sgd(SgdConfig {
            lr: 0.1,
            momentum: 0.5,
            maximize: true,
            ..d
        }),
        "adam" => Box::new(Adam::new(ps, AdamConfig { lr: 0.01, ..adam })),
        "adam_wd" => Box::new(Adam::new(
            ps,
            AdamConfig {
                lr: 0.01,
                weight_decay: 0.1,
                betas: (0.8, 0.99),
                ..adam
            },
        )),
        "adam_amsgrad" => Box::new(Adam::new(
            ps,
            AdamConfig {
                lr: 0.01,
                amsgrad: true,
                ..adam
            },
        )),
        "adam_maximize" => Box::new(Adam::new(
            ps,
            AdamConfig {
                lr: 0.01,
                maximize: true,
                ..adam
            },
        )),
        "adamw" => Box::new(AdamW::new(ps, AdamWConfig { lr: 0.01, ..adamw })),
        "adamw_amsgrad" => Box::new(AdamW::new(
            ps,
            AdamWConfig {
                lr: 0.02,
                weight_decay: 0.05,
                amsgrad: true,
                ..adamw
            },
        )),
        "adamw_groups" => Box::new(AdamW::with_groups(
            vec![
                GroupSpec::new(vec![ps[0].clone()]),
                GroupSpec::new(vec![ps[1].clone()])
                    .lr(0.05)
                    .weight_decay(0.0),
            ],
            AdamWConfig {
                lr: 0.01,
                weight_decay: 0.1,
                ..adamw
            },
        )),
        "rmsprop" => Box::new(RMSprop::new(
            ps,
            RMSpropConfig {
                lr: 0.01,
                ..Default::default()
            },
        )),
        "rmsprop_centered_mom_wd" => Box::new(RMSprop::new(
            ps,
            RMSpropConfig {
                lr: 0.01,
                centered: true,
                momentum: 0.9,
                weight_decay: 0.1,
                ..Default::default()
            },
        )),
        other => make_adaptive_opt(other, ps),
    }
}

/// The adaptive-rate optimizers' cases, as `gen_nn_goldens.py` makes them.
fn make_adaptive_opt(name: &str, ps: Vec<Tensor>) -> Box<dyn Optimizer> {
    let nadam = NAdamConfig {
        lr: 0.01,
        ..Default::default()
    };
    let radam = RAdamConfig {
        lr: 0.01,
        ..Default::default()
    };
    let adamax = AdamaxConfig {
        lr: 0.01,
        ..Default::default()
    };
    match name {
        "adagrad" => Box::new(Adagrad::new(
            ps,
            AdagradConfig {
                lr: 0.1,
                ..Default::default()
            },
        )),
        "adagrad_decay_wd_init_max" => Box::new(Adagrad::new(
            ps,
            AdagradConfig {
                lr: 0.1,
                lr_decay: 0.3,
                weight_decay: 0.1,
                initial_accumulator_value: 0.5,
                maximize: true,
                ..Default::default()
            },
        )),
        "adadelta" => Box::new(Adadelta::new(ps, AdadeltaConfig::default())),
        "adadelta_wd_max" => Box::new(Adadelta::new(
            ps,
            AdadeltaConfig {
                lr: 0.5,
                rho: 0.8,
                eps: 1e-4,
                weight_decay: 0.1,
                maximize: true,
            },
        )),
        "adamax" => Box::new(Adamax::new(ps, adamax)),
        "adamax_wd_max" => Box::new(Adamax::new(
            ps,
            AdamaxConfig {
                betas: (0.8, 0.99),
                weight_decay: 0.1,
                maximize: true,
                ..adamax
            },
        )),
        "nadam" => Box::new(NAdam::new(ps, nadam)),
        "nadam_wd_max" => Box::new(NAdam::new(
            ps,
            NAdamConfig {
                weight_decay: 0.1,
                momentum_decay: 0.01,
                maximize: true,
                ..nadam
            },
        )),
        "nadamw" => Box::new(NAdam::new(
            ps,
            NAdamConfig {
                weight_decay: 0.1,
                decoupled_weight_decay: true,
                ..nadam
            },
        )),
        "radam" => Box::new(RAdam::new(ps, radam)),
        "radam_wd_max" => Box::new(RAdam::new(
            ps,
            RAdamConfig {
                betas: (0.8, 0.99),
                weight_decay: 0.1,
                maximize: true,
                ..radam
            },
        )),
        "radamw" => Box::new(RAdam::new(
            ps,
            RAdamConfig {
                weight_decay: 0.1,
                decoupled_weight_decay: true,
                ..radam
            },
        )),
        "rprop" => Box::new(Rprop::new(
            ps,
            RpropConfig {
                lr: 0.01,
                ..Default::default()
            },
        )),
        "rprop_bounded_max" => Box::new(Rprop::new(
            ps,
            RpropConfig {
                lr: 0.05,
                etas: (0.3, 1.5),
                step_sizes: (0.02, 0.06),
                maximize: true,
            },
        )),
        "asgd" => Box::new(ASGD::new(
            ps,
            AsgdConfig {
                lr: 0.01,
                ..Default::default()
            },
        )),
        "asgd_averaged_wd_max" => Box::new(ASGD::new(
            ps,
            AsgdConfig {
                lr: 0.05,
                lambd: 1e-2,
                alpha: 0.5,
                t0: 2.0,
                weight_decay: 0.1,
                maximize: true,
            },
        )),
        "adafactor" => Box::new(Adafactor::new(ps, AdafactorConfig::default())),
        "adafactor_wd_max_eps_d" => Box::new(Adafactor::new(
            ps,
            AdafactorConfig {
                lr: 0.05,
                beta2_decay: -0.5,
                eps: (Some(0.5), 1e-2),
                d: 1.2,
                weight_decay: 0.1,
                maximize: true,
            },
        )),
        other => panic!("no optimizer {other}"),
    }
}

#[test]
fn optimizers_match_pytorch_for_five_steps() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5)] {
        let n = run_all(m["optim"].as_array().unwrap().iter(), |c| {
            let name = c["name"].as_str().unwrap();
            let ps: Vec<Tensor> = (0..2)
                .map(|j| {
                    load(&st, &format!("optim.p0.{j}"))
                        .to_dtype(dtype)
                        .requires_grad_(true)
                })
                .collect();
            let mut opt = make_opt(name, ps.clone());
            for k in 0..c["steps"].as_u64().unwrap_or(5) {
                for (j, p) in ps.iter().enumerate() {
                    p.set_grad(Some(
                        load(&st, &format!("optim.grad{}.{j}", k % 5)).to_dtype(dtype),
                    ));
                }
                opt.step();
                let saved = opt.state_dict();
                for (j, p) in ps.iter().enumerate() {
                    close(
                        &format!("{name} ({dtype}) step {k} param {j}"),
                        p,
                        &load(&st, &format!("optim.{name}.step{k}.{j}")),
                        tol,
                        tol,
                    )?;
                    // State the optimizer's user reads (ASGD's average).
                    for key in c["state"].as_array().into_iter().flatten() {
                        let key = key.as_str().unwrap();
                        let want = format!("optim.{name}.step{k}.{j}.{key}");
                        if st.tensor(&want).is_err() {
                            continue; // Adafactor: factored or not, by the parameter's rank
                        }
                        let ours = saved.iter().find(|(n, _)| *n == format!("state.{j}.{key}"));
                        let ours = &ours.ok_or_else(|| format!("{name}: no state.{j}.{key}"))?.1;
                        close(
                            &format!("{name} ({dtype}) step {k} param {j} {key}"),
                            ours,
                            &load(&st, &want),
                            tol,
                            tol,
                        )?;
                    }
                }
            }
            Ok(())
        });
        assert_eq!(n, 31);
    }
}

/// f16 and bf16 parameters (state in the parameter's dtype, math in f32)
/// against PyTorch's fused kernels, which round the same way: bit for bit
/// on the CPU. On a GPU, fused multiply-adds may move a result by one unit
/// in the last place of the dtype, which the tolerance there allows.
#[test]
fn half_precision_optimizers_match_pytorch_fused() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let on_cpu = test_device() == Device::Cpu;
    for (dname, dtype, ulp) in [("bf16", DType::BF16, 8e-3), ("f16", DType::F16, 1e-3)] {
        let tol = if on_cpu { 0.0 } else { ulp };
        let n = run_all(m["optim_half"].as_array().unwrap().iter(), |c| {
            let name = c["name"].as_str().unwrap();
            let input = |k: &str| load(&st, &format!("optim_half.{dname}.{k}")).to_dtype(dtype);
            let ps: Vec<Tensor> = (0..2)
                .map(|j| input(&format!("p0.{j}")).requires_grad_(true))
                .collect();
            let mut opt = make_opt(name, ps.clone());
            for k in 0..5 {
                for (j, p) in ps.iter().enumerate() {
                    p.set_grad(Some(input(&format!("grad{k}.{j}"))));
                }
                opt.step();
                for (j, p) in ps.iter().enumerate() {
                    assert_eq!(p.dtype(), dtype);
                    close(
                        &format!("{name} ({dname}) step {k} param {j}"),
                        &p.to_dtype(DType::F64),
                        &load(&st, &format!("optim_half.{name}.{dname}.step{k}.{j}")),
                        tol,
                        tol,
                    )?;
                }
            }
            Ok(())
        });
        assert_eq!(n, 12);
    }
}

#[test]
fn optimizers_skip_parameters_without_grad() {
    let p = Tensor::ones(&[2]).requires_grad_(true);
    let q = Tensor::ones(&[2]).requires_grad_(true);
    let mut opt = AdamW::new(vec![p.clone(), q.clone()], AdamWConfig::default());
    q.set_grad(Some(Tensor::ones(&[2])));
    opt.step();
    assert_eq!(p.to_vec::<f32>(), vec![1.0, 1.0]);
    assert_ne!(q.to_vec::<f32>(), vec![1.0, 1.0]);
    opt.zero_grad();
    assert!(q.grad().is_none());
}

/// Every optimizer case saved after two steps and loaded into a fresh
/// optimizer over copies of the parameters continues exactly as the run it
/// was saved from: the step counts, every state buffer and scalar state
/// (NAdam's `mu_product`) come back. RAdam's seven steps cross into its
/// rectified branch after the resume.
#[test]
fn resumed_optimizers_continue_as_the_saved_run() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let grad = |k: usize, j: usize| load(&st, &format!("optim.grad{}.{j}", k % 5));
    let n = run_all(m["optim"].as_array().unwrap().iter(), |c| {
        let name = c["name"].as_str().unwrap();
        let steps = c["steps"].as_u64().unwrap_or(5) as usize;
        let start = || -> Vec<Tensor> {
            (0..2)
                .map(|j| load(&st, &format!("optim.p0.{j}")).requires_grad_(true))
                .collect()
        };
        let step = |opt: &mut Box<dyn Optimizer>, ps: &[Tensor], k: usize| {
            for (j, p) in ps.iter().enumerate() {
                p.set_grad(Some(grad(k, j)));
            }
            opt.step();
        };
        let ps = start();
        let mut opt = make_opt(name, ps.clone());
        for k in 0..2 {
            step(&mut opt, &ps, k);
        }
        let resumed_ps: Vec<Tensor> = ps
            .iter()
            .map(|p| Tensor::from_vec(p.to_vec::<f64>(), p.shape()).requires_grad_(true))
            .collect();
        let mut resumed = make_opt(name, resumed_ps.clone());
        resumed
            .load_state_dict(&opt.state_dict())
            .map_err(|e| format!("{name}: {e}"))?;
        for k in 2..steps.max(7) {
            step(&mut opt, &ps, k);
            step(&mut resumed, &resumed_ps, k);
            for (j, (a, b)) in ps.iter().zip(&resumed_ps).enumerate() {
                if a.to_vec::<f64>() != b.to_vec::<f64>() {
                    return Err(format!("{name}: step {k} param {j} differs after a resume"));
                }
            }
        }
        Ok(())
    });
    assert_eq!(n, 31);
}

/// Options PyTorch refuses are refused with PyTorch's sentence, naming the
/// optimizer and the value.
#[test]
fn adaptive_optimizers_refuse_bad_options() {
    fn ps() -> Vec<Tensor> {
        vec![Tensor::ones(&[2]).requires_grad_(true)]
    }
    let cases: [(fn(), &str); 9] = [
        (
            || {
                let c = AdadeltaConfig {
                    rho: 1.5,
                    ..Default::default()
                };
                Adadelta::new(ps(), c);
            },
            "Adadelta: invalid rho value: 1.5",
        ),
        (
            || {
                let c = AdagradConfig {
                    lr_decay: -1.0,
                    ..Default::default()
                };
                Adagrad::new(ps(), c);
            },
            "Adagrad: invalid lr_decay value: -1",
        ),
        (
            || {
                let c = NAdamConfig {
                    betas: (1.0, 0.999),
                    ..Default::default()
                };
                NAdam::new(ps(), c);
            },
            "NAdam: invalid beta parameter at index 0: 1",
        ),
        (
            || {
                let c = RAdamConfig {
                    lr: -0.1,
                    ..Default::default()
                };
                RAdam::new(ps(), c);
            },
            "RAdam: invalid learning rate -0.1",
        ),
        (
            || {
                let c = RpropConfig {
                    etas: (1.5, 1.2),
                    ..Default::default()
                };
                Rprop::new(ps(), c);
            },
            "Rprop: invalid eta values: 1.5, 1.2",
        ),
        (
            || {
                let g = GroupSpec::new(ps()).weight_decay(0.1);
                Rprop::with_groups(vec![g], RpropConfig::default());
            },
            "Rprop: has no weight_decay, but group 0 sets 0.1",
        ),
        (
            || {
                let c = AsgdConfig {
                    lambd: -1.0,
                    ..Default::default()
                };
                ASGD::new(ps(), c);
            },
            "ASGD: invalid lambd value: -1",
        ),
        (
            || {
                let c = AdafactorConfig {
                    d: 0.5,
                    ..Default::default()
                };
                Adafactor::new(ps(), c);
            },
            "Adafactor: Clipping threshold d should be >= 1 but is: 0.5",
        ),
        (
            || {
                Muon::new(ps(), MuonConfig::default());
            },
            "Muon: only supports 2D parameters, but parameter 0 of group 0 has shape [2]; optimize it with AdamW",
        ),
    ];
    for (make, want) in cases {
        let got = panic_message(make);
        assert!(got.contains(want), "{got:?} should say {want:?}");
    }
}

fn muon_config(options: &serde_json::Value) -> MuonConfig {
    let d = MuonConfig::default();
    let f = |k: &str, v: f64| options.get(k).and_then(|x| x.as_f64()).unwrap_or(v);
    MuonConfig {
        lr: f("lr", d.lr),
        weight_decay: f("weight_decay", d.weight_decay),
        momentum: f("momentum", d.momentum),
        nesterov: options
            .get("nesterov")
            .and_then(|x| x.as_bool())
            .unwrap_or(d.nesterov),
        ns_steps: options
            .get("ns_steps")
            .and_then(|x| x.as_u64())
            .map_or(d.ns_steps, |x| x as usize),
        adjust_lr_fn: match options.get("adjust_lr_fn").and_then(|x| x.as_str()) {
            None | Some("original") => AdjustLr::Original,
            Some("match_rms_adamw") => AdjustLr::MatchRmsAdamW,
            Some("spectral_unclamped") => AdjustLr::SpectralUnclamped,
            Some(other) => panic!("no adjust_lr_fn {other}"),
        },
        ..d
    }
}

/// Muon on a wide and a tall matrix, three steps. In f64 the parameters
/// and momentum buffer are PyTorch's to 1e-12: the bf16 Newton-Schulz
/// iteration rounds where PyTorch's does. In f32 the iteration's input
/// differs from the f64 golden's by f32 rounding, which can move a bf16
/// rounding; the parameters are then held to 2e-2 of lr (the update is
/// about lr per entry).
#[test]
fn muon_matches_pytorch() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 1e-5)] {
        let n = run_all(m["muon"].as_array().unwrap().iter(), |c| {
            let name = c["name"].as_str().unwrap();
            let cfg = muon_config(&c["options"]);
            let ps: Vec<Tensor> = (0..2)
                .map(|j| {
                    load(&st, &format!("muon.p0.{j}"))
                        .to_dtype(dtype)
                        .requires_grad_(true)
                })
                .collect();
            let mut opt = Muon::new(ps.clone(), cfg);
            for k in 0..3 {
                for (j, p) in ps.iter().enumerate() {
                    p.set_grad(Some(
                        load(&st, &format!("muon.grad{k}.{j}")).to_dtype(dtype),
                    ));
                }
                opt.step();
                let saved = opt.state_dict();
                for (j, p) in ps.iter().enumerate() {
                    let what = format!("{name} ({dtype}) step {k} param {j}");
                    let want = load(&st, &format!("muon.{name}.step{k}.{j}"));
                    let ptol = if dtype == DType::F64 {
                        tol
                    } else {
                        2e-2 * cfg.lr
                    };
                    close(&what, p, &want, ptol, ptol)?;
                    let key = format!("state.{j}.momentum_buffer");
                    let buf = &saved.iter().find(|(n, _)| *n == key).unwrap().1;
                    let want = load(&st, &format!("muon.{name}.step{k}.{j}.momentum_buffer"));
                    close(&format!("{what} momentum_buffer"), buf, &want, tol, tol)?;
                }
            }
            Ok(())
        });
        assert_eq!(n, 3);
    }
}
