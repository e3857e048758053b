//! The training loop end to end: the seed MLP's trajectory against PyTorch,
//! gradient accumulation, freezing, train/eval semantics, state dicts.

use crate::common;
use crate::seed;

use common::*;
use safetensors::SafeTensors;
use seed::Mlp;
use tapir::nn::*;
use tapir::optim::*;
use tapir::prelude::*;

// The seed MLP written with `model!`: it must train exactly as PyTorch too.
include!("../../examples/models/seed.rs");

fn trajectory_batches() -> (Vec<Tensor>, Vec<Tensor>) {
    let (b, d) = (64usize, 784usize);
    let xs = (0..10)
        .map(|k| {
            let v: Vec<f64> = (0..b * d)
                .map(|i| (((k * b * d + i) as f64) * 0.37 + 0.5).sin())
                .collect();
            Tensor::from_vec(v, &[b, d]).to_dtype(DType::F32)
        })
        .collect();
    let ys = (0..10)
        .map(|k| {
            Tensor::from_vec(
                (0..b)
                    .map(|i| (((k * b + i) * 7 + 3) % 10) as i64)
                    .collect(),
                &[b],
            )
        })
        .collect();
    (xs, ys)
}

fn pytorch_init(st: &SafeTensors) -> Vec<(String, Tensor)> {
    st.names()
        .into_iter()
        .filter_map(|k| {
            k.strip_prefix("init.")
                .map(|n| (n.to_string(), load(st, k)))
        })
        .collect()
}

#[test]
fn seed_mlp_state_dict_keys_match_pytorch() {
    let (bytes, _) = read_goldens("trajectory");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut torch_keys: Vec<String> = pytorch_init(&st).into_iter().map(|(k, _)| k).collect();
    let mut ours: Vec<String> = Mlp::seed()
        .state_dict()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    torch_keys.sort();
    ours.sort();
    assert_eq!(ours, torch_keys);
    assert!(ours.contains(&"blocks.3.net.3.weight".to_string()));
}

#[test]
fn seed_mlp_trajectory_matches_pytorch() {
    let mut model = Mlp::seed();
    follow_pytorch_trajectory(&mut model);
    assert_head_matches(&model.head.weight);
}

#[test]
fn model_macro_seed_mlp_trajectory_matches_pytorch() {
    // PyTorch's state dict loads strictly: the keys are identical.
    let mut model = SeedMlp::<784, 10>::new(&Device::Cpu);
    follow_pytorch_trajectory(&mut model);
    assert_head_matches(&model.head.weight);
}

fn assert_head_matches(head: &Tensor) {
    let (bytes, _) = read_goldens("trajectory");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    close(
        "final head.weight",
        head,
        &load(&st, "final.head.weight"),
        1e-6,
        1e-4,
    )
    .unwrap();
}

/// PyTorch's initial weights, then 10 steps of AdamW + clipping + cosine;
/// the loss and gradient norm must match PyTorch's at every step.
fn follow_pytorch_trajectory<M: Module + Forward>(model: &mut M) {
    let (bytes, _) = read_goldens("trajectory");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    model.to_device(test_device()).unwrap();
    let report = model.load_state_dict(&pytorch_init(&st), true).unwrap();
    assert!(report.is_clean());
    let (xs, ys) = trajectory_batches();
    let (xs, ys): (Vec<Tensor>, Vec<Tensor>) = (
        xs.into_iter().map(dev).collect(),
        ys.into_iter().map(dev).collect(),
    );
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 3e-4,
            weight_decay: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let mut sched = CosineAnnealingLR::new(&mut opt, 10, 0.0);
    let want_loss: Vec<f64> = load(&st, "losses").to_vec();
    let want_norm: Vec<f64> = load(&st, "grad_norms").to_vec();
    model.train();
    for k in 0..10 {
        opt.zero_grad();
        let loss = cross_entropy(&model.forward(&xs[k]), &ys[k]);
        loss.backward();
        let norm = clip_grad_norm_(&model.parameters(), 1.0).item::<f64>();
        opt.step();
        sched.step(&mut opt);
        let l = loss.item::<f64>();
        assert!(
            (l - want_loss[k]).abs() <= 1e-4 * want_loss[k].abs(),
            "step {k}: loss {l} vs PyTorch {}",
            want_loss[k]
        );
        assert!(
            (norm - want_norm[k]).abs() <= 1e-4 * want_norm[k].abs(),
            "step {k}: grad norm {norm} vs PyTorch {}",
            want_norm[k]
        );
    }
}

#[test]
fn gradient_accumulation_equals_one_big_batch() {
    manual_seed(1);
    let model = Mlp::new(16, 32, 5, 2);
    let x = Tensor::randn(&[12, 16]);
    let y = Tensor::randint(0, 5, &[12]);
    cross_entropy(&model.forward(&x), &y).backward();
    let big: Vec<Vec<f32>> = model
        .parameters()
        .iter()
        .map(|p| p.grad().unwrap().to_vec())
        .collect();
    model.zero_grad();
    let k = 3;
    for i in 0..k {
        let (xb, yb) = (x.narrow(0, i * 4, 4), y.narrow(0, i * 4, 4));
        (cross_entropy(&model.forward(&xb), &yb) / k as f64).backward();
    }
    for (p, want) in model.parameters().iter().zip(&big) {
        let got: Vec<f32> = p.grad().unwrap().to_vec();
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() <= 1e-5 + 1e-4 * b.abs(), "{a} vs {b}");
        }
    }
}

#[test]
fn frozen_parameters_get_no_grad_no_update_and_no_gradient_work() {
    manual_seed(2);
    let model = Mlp::new(16, 32, 5, 2);
    model.stem.requires_grad_(false);
    model.blocks.requires_grad_(false);
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    let stem_before = model.stem.weight.to_vec::<f32>();
    let x = Tensor::randn(&[8, 16]);
    let y = Tensor::randint(0, 5, &[8]);

    let before = tapir::profiler::matmul_launches();
    let logits = model.forward(&x);
    let forward_gemms = tapir::profiler::matmul_launches() - before;
    let loss = cross_entropy(&logits, &y);
    let before = tapir::profiler::matmul_launches();
    loss.backward();
    let backward_gemms = tapir::profiler::matmul_launches() - before;
    // Only the head trains: its weight gradient is one GEMM; nothing flows
    // into the frozen stem and blocks (no input gradient is needed either).
    assert_eq!(forward_gemms, 6, "stem + 2 blocks x 2 + head");
    assert_eq!(backward_gemms, 1, "only the head's weight gradient");
    opt.step();
    assert!(model.stem.weight.grad().is_none());
    assert!(
        model.blocks[0]
            .parameters()
            .iter()
            .all(|p| p.grad().is_none())
    );
    assert_eq!(model.stem.weight.to_vec::<f32>(), stem_before);
    assert!(model.head.weight.grad().is_some());
}

#[test]
fn dropout_is_active_only_in_train_mode() {
    manual_seed(3);
    let d = Dropout::new(0.25);
    let x = Tensor::ones(&[20000]);
    let y = d.forward(&x);
    let zeros = y.eq_scalar(0.0).count_nonzero() as f64 / 20000.0;
    assert!((zeros - 0.25).abs() < 0.02, "dropped fraction {zeros}");
    let kept: Vec<f32> = y
        .to_vec::<f32>()
        .into_iter()
        .filter(|&v| v != 0.0)
        .collect();
    assert!(
        kept.iter().all(|&v| (v - 1.0 / 0.75).abs() < 1e-6),
        "survivors are scaled by 1/(1-p)"
    );
    d.eval();
    assert_eq!(d.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
}

#[test]
fn batchnorm_uses_batch_stats_in_train_and_running_stats_in_eval() {
    let bn = BatchNorm::new_1d(2);
    let x = Tensor::from_vec(vec![1.0f32, 10.0, 3.0, 20.0], &[2, 2]);
    let y = bn.forward(&x);
    // Train: normalised by the batch -> each column is [-1, 1] (up to eps).
    for (a, b) in y.to_vec::<f32>().iter().zip([-1.0, -1.0, 1.0, 1.0]) {
        assert!((a - b).abs() < 1e-3, "{a} vs {b}");
    }
    // running_mean = 0.9 * 0 + 0.1 * [2, 15]; running_var = 0.9 + 0.1 * unbiased var [2, 50].
    close(
        "running_mean",
        bn.running_mean.as_ref().unwrap(),
        &Tensor::from_vec(vec![0.2f32, 1.5], &[2]),
        1e-6,
        1e-6,
    )
    .unwrap();
    close(
        "running_var",
        bn.running_var.as_ref().unwrap(),
        &Tensor::from_vec(vec![1.1f32, 5.9], &[2]),
        1e-5,
        1e-5,
    )
    .unwrap();
    assert_eq!(bn.num_batches_tracked.as_ref().unwrap().item::<i64>(), 1);
    bn.eval();
    let ye = bn.forward(&x).to_vec::<f32>();
    assert!((ye[0] - (1.0 - 0.2) / (1.1f32 + 1e-5).sqrt()).abs() < 1e-5);
    assert_eq!(
        bn.num_batches_tracked.as_ref().unwrap().item::<i64>(),
        1,
        "eval does not update statistics"
    );
}

/// Outside a process group a SyncBatchNorm is its BatchNorm, bit for bit
/// (PyTorch's fallback); `tests/distributed.rs` runs it on 2 and 4 ranks.
#[test]
fn sync_batch_norm_without_a_process_group_is_a_batch_norm() {
    let make = |sync: bool| {
        manual_seed(5);
        let mut net = Sequential::new()
            .add(Linear::new(3, 4, true))
            .add(BatchNorm::new_1d(4))
            .add(ReLU);
        if sync {
            assert_eq!(convert_sync_batchnorm(&mut net), 1);
        }
        net
    };
    let (plain, mut synced) = (make(false), make(true));
    // The same weights whatever other tests draw from the global generator
    // between the two seeded constructions (tests run on several threads).
    synced.load_state_dict(&plain.state_dict(), true).unwrap();
    assert!(
        synced
            .to_string()
            .contains("(1): SyncBatchNorm(4, eps=1e-05, momentum=0.1")
    );
    assert!(plain.to_string().contains("(1): BatchNorm1d(4"));
    let x = Tensor::randn(&[6, 3]);
    for net in [&plain, &synced] {
        (&net.forward(&x) * &Tensor::linspace(-1.0, 1.0, 24).reshape(&[6, 4]))
            .sum()
            .backward();
    }
    for ((n, a), (_, b)) in plain.state_dict().iter().zip(synced.state_dict()) {
        assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "{n}");
    }
    for (a, b) in plain.parameters().iter().zip(synced.parameters()) {
        assert_eq!(
            a.grad().unwrap().to_vec::<f32>(),
            b.grad().unwrap().to_vec::<f32>()
        );
    }
}

#[test]
fn strict_loading_reports_every_problem_at_once() {
    let mut model = Mlp::new(4, 8, 3, 1);
    let mut sd = model.state_dict();
    sd.retain(|(k, _)| k != "head.bias");
    sd.push(("extra.weight".into(), Tensor::zeros(&[1])));
    sd.iter_mut().find(|(k, _)| k == "stem.weight").unwrap().1 = Tensor::zeros(&[2, 2]);
    let err = model.load_state_dict(&sd, true).unwrap_err().to_string();
    assert!(err.contains("missing keys: head.bias"), "{err}");
    assert!(err.contains("unexpected keys: extra.weight"), "{err}");
    assert!(
        err.contains("stem.weight: checkpoint [2, 2] vs model [8, 4]"),
        "{err}"
    );
    let report = model.load_state_dict(&sd, false).unwrap();
    assert_eq!(report.missing, vec!["head.bias".to_string()]);
}

#[test]
fn module_repr_and_counts_follow_pytorch() {
    let model = Mlp::seed();
    assert_eq!(
        model.num_parameters(),
        784 * 256 + 256 + 4 * (2 * (256 * 256 + 256) + 2 * 256) + 2570
    );
    let r = model.repr();
    assert!(r.starts_with("Mlp(\n  (stem): Linear(in_features=784, out_features=256, bias=True)\n  (blocks): ModuleList(\n    (0): ResBlock(\n      (net): Sequential(\n        (0): Linear(in_features=256, out_features=256, bias=True)\n        (1): LayerNorm((256,), eps=1e-05, elementwise_affine=True, bias=True)\n        (2): GELU(approximate='none')"), "{r}");
}

#[test]
fn optimizer_state_round_trips() {
    manual_seed(4);
    let model = Mlp::new(4, 8, 3, 1);
    let mut opt = AdamW::new(model.parameters(), AdamWConfig::default());
    let x = Tensor::randn(&[5, 4]);
    let y = Tensor::randint(0, 3, &[5]);
    cross_entropy(&model.forward(&x), &y).backward();
    opt.step();
    let saved = opt.state_dict();
    let mut fresh = AdamW::new(model.parameters(), AdamWConfig::default());
    fresh.load_state_dict(&saved).unwrap();
    let again = fresh.state_dict();
    assert_eq!(saved.len(), again.len());
    for ((k1, a), (k2, b)) in saved.iter().zip(&again) {
        assert_eq!(k1, k2);
        assert_eq!(a.to_vec::<f64>(), b.to_vec::<f64>(), "{k1}");
    }
}

/// PyTorch's optimizers take any leaf: a transposed parameter (a weight
/// loaded as `w.t()`) and a strided slice update exactly as row-major
/// copies of them would, and a slice leaves the rest of its buffer alone.
#[test]
fn optimizers_update_transposed_and_sliced_parameters() {
    let base: Vec<f32> = (0..24).map(|i| (i as f32 - 11.5) * 0.1).collect();
    type MakeOptimizer = fn(Vec<Tensor>) -> Box<dyn Optimizer>;
    let optimizers: [(&str, MakeOptimizer); 3] = [
        ("sgd", |ps| {
            Box::new(SGD::new(
                ps,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    ..Default::default()
                },
            ))
        }),
        ("adamw", |ps| {
            Box::new(AdamW::new(ps, AdamWConfig::default()))
        }),
        ("rmsprop", |ps| {
            Box::new(RMSprop::new(ps, RMSpropConfig::default()))
        }),
    ];
    for (name, make) in optimizers {
        let buffer = Tensor::from_vec(base.clone(), &[24]);
        let transposed = Tensor::from_vec(base[..12].to_vec(), &[4, 3])
            .t()
            .requires_grad_(true);
        let sliced = buffer.slice(0, 0, 24, 2).requires_grad_(true);
        let strided = [transposed.clone(), sliced.clone()];
        let dense: Vec<Tensor> = strided
            .iter()
            .map(|p| Tensor::from_vec(p.to_vec::<f32>(), p.shape()).requires_grad_(true))
            .collect();
        let mut a = make(strided.to_vec());
        let mut b = make(dense.clone());
        for _ in 0..3 {
            for (ps, opt) in [(&strided[..], &mut a), (&dense[..], &mut b)] {
                opt.zero_grad();
                let loss = (&ps[0] * &ps[0]).sum() + (&ps[1] * &ps[1] * &ps[1]).sum();
                loss.backward();
                opt.step();
            }
        }
        for (s, d) in strided.iter().zip(&dense) {
            assert_eq!(s.to_vec::<f32>(), d.to_vec::<f32>(), "{name}");
        }
        assert_eq!(
            transposed.strides(),
            &[1, 3],
            "{name}: the parameter keeps its layout"
        );
        let all = buffer.to_vec::<f32>();
        for i in (1..24).step_by(2) {
            assert_eq!(all[i], base[i], "{name}: element {i} is outside the slice");
        }
        assert_ne!(
            all[0], base[0],
            "{name}: the slice was updated in its buffer"
        );
    }
}

#[test]
fn optimizers_refuse_the_parameter_lists_pytorch_refuses() {
    let sgd = |groups: Vec<GroupSpec>| {
        SGD::with_groups(
            groups,
            SgdConfig {
                lr: 0.1,
                ..Default::default()
            },
        );
    };
    let w = Tensor::ones(&[2, 3]).requires_grad_(true);
    assert_eq!(
        panic_message(|| sgd(vec![GroupSpec::new(vec![])])),
        "SGD: optimizer got an empty parameter list"
    );
    assert_eq!(
        panic_message(|| sgd(vec![GroupSpec::new(vec![&w * 2.0])])),
        "SGD: can't optimize a non-leaf tensor (parameter 0 of group 0, [2, 3], comes from MulBackward0); pass \
         the leaf it was computed from"
    );
    let b = Tensor::zeros(&[3]).requires_grad_(true);
    assert_eq!(
        panic_message(|| sgd(vec![
            GroupSpec::new(vec![w.clone()]),
            GroupSpec::new(vec![b, w.clone()])
        ])),
        "SGD: some parameters appear in more than one parameter group (parameter 1 of group 1, [2, 3], is in \
         group 0 too)"
    );
}

/// A tied weight: one tensor registered under two names (an embedding and
/// the output head that shares it).
struct Tied {
    weight: Tensor,
}

impl Module for Tied {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("embed.weight", &self.weight, TensorKind::Parameter);
        f("head.weight", &self.weight, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("embed.weight", &mut self.weight, TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        "Tied()".into()
    }
}

#[test]
fn a_tied_weight_is_one_parameter_stepped_once() {
    let m = Tied {
        weight: Tensor::from_vec(vec![1.0f64, 2.0], &[2]).requires_grad_(true),
    };
    // PyTorch's parameters() lists a tensor once; its state dict keeps both keys.
    let names: Vec<String> = m.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["embed.weight"]);
    assert_eq!(m.num_parameters(), 2);
    assert_eq!(m.state_dict().len(), 2);
    let mut opt = SGD::new(
        m.parameters(),
        SgdConfig {
            lr: 0.5,
            ..Default::default()
        },
    );
    // Both uses add into one gradient, 1 + 1 per element; one step of 0.5.
    (&m.weight + &m.weight).sum().backward();
    opt.step();
    assert_eq!(m.weight.to_vec::<f64>(), vec![0.0, 1.0]);
}

/// A tensor listed twice in one group is stepped twice, as PyTorch (which
/// warns) does today.
#[test]
fn a_parameter_listed_twice_in_a_group_is_stepped_twice() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let cfg = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    let mut opt = SGD::new(vec![w.clone(), w.clone()], cfg);
    w.sum().backward();
    opt.step();
    // torch 2.15 gives 0x1.999998p-1 for each: two steps of 0.1.
    assert_eq!(w.to_vec::<f32>(), vec![1.0f32 - 0.1 - 0.1; 2]);
    assert_eq!(w.to_vec::<f32>()[0].to_bits(), 0x3f4c_cccc);
}
