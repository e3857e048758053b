//! L-BFGS against `torch.optim.LBFGS`: the same closure (a small nonlinear
//! least-squares problem stored in the goldens) stepped with each option
//! set, comparing the returned loss, the parameters and the evaluation and
//! iteration counts after every step; a resumed run; misuse.

use crate::common::*;
use safetensors::SafeTensors;
use tapir::optim::*;
use tapir::prelude::*;

fn config(options: &serde_json::Value) -> LbfgsConfig {
    let d = LbfgsConfig::default();
    let f = |k: &str, v: f64| options.get(k).and_then(|x| x.as_f64()).unwrap_or(v);
    let n = |k: &str, v: usize| {
        options
            .get(k)
            .and_then(|x| x.as_u64())
            .map_or(v, |x| x as usize)
    };
    LbfgsConfig {
        lr: f("lr", d.lr),
        max_iter: n("max_iter", d.max_iter),
        max_eval: options
            .get("max_eval")
            .and_then(|x| x.as_u64())
            .map(|x| x as usize),
        tolerance_grad: f("tolerance_grad", d.tolerance_grad),
        tolerance_change: f("tolerance_change", d.tolerance_change),
        history_size: n("history_size", d.history_size),
        line_search_fn: match options.get("line_search_fn").and_then(|x| x.as_str()) {
            Some("strong_wolfe") => Some(LineSearch::StrongWolfe),
            Some(other) => panic!("no line search {other}"),
            None => None,
        },
        maximize: options
            .get("maximize")
            .and_then(|x| x.as_bool())
            .unwrap_or(false),
    }
}

/// The problem's parameters `w`, `b` at the start, in `dtype`.
fn start(st: &SafeTensors, dtype: DType) -> (Tensor, Tensor) {
    let p = |k: &str| load(st, k).to_dtype(dtype).requires_grad_(true);
    (p("lbfgs.w0"), p("lbfgs.b0"))
}

/// The golden closure's loss: mean((tanh(x w + b) - y)^2) + 0.01 sum(w^4),
/// negated when maximising.
fn objective(st: &SafeTensors, w: &Tensor, b: &Tensor, maximize: bool) -> Tensor {
    let (x, y) = (
        load(st, "lbfgs.x").to_dtype(w.dtype()),
        load(st, "lbfgs.y").to_dtype(w.dtype()),
    );
    let fit = (&x.matmul(w) + b).tanh().sub(&y).square().mean();
    let loss = &fit + &(&w.powf(4.0).sum() * 0.01);
    if maximize { loss.neg() } else { loss }
}

fn step(opt: &mut LBFGS, st: &SafeTensors, w: &Tensor, b: &Tensor, maximize: bool) -> Tensor {
    opt.step_with(|| {
        let loss = objective(st, w, b, maximize);
        loss.backward();
        loss
    })
}

/// The evaluation and iteration counts, as PyTorch's `state` holds them.
fn counts(opt: &LBFGS) -> Vec<f64> {
    let sd = opt.state_dict();
    let get = |k: &str| {
        sd.iter()
            .find(|(n, _)| n == k)
            .map_or(-1.0, |(_, t)| t.item::<f64>())
    };
    vec![get("state.0.func_evals"), get("state.0.n_iter")]
}

/// f64 follows PyTorch's run to rounding: same iterations, same
/// evaluations, parameters to 1e-9. f32 (where PyTorch does the line
/// search's interpolation in f32 and tapir in f64) to 2e-4, except the
/// run of tiny extrapolated steps: there f32 rounding flips the search's
/// comparisons and PyTorch's own f32 run ends 3x away from its f64 run.
#[test]
fn lbfgs_matches_pytorch_with_every_option() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    for (dtype, tol) in [(DType::F64, 1e-9), (DType::F32, 2e-4)] {
        let n = run_all(m["lbfgs"].as_array().unwrap().iter(), |c| {
            let name = c["name"].as_str().unwrap();
            if dtype == DType::F32 && name == "wolfe_extrapolate" {
                return Ok(());
            }
            let cfg = config(&c["options"]);
            let (w, b) = start(&st, dtype);
            let mut opt = LBFGS::new(vec![w.clone(), b.clone()], cfg);
            for k in 0..c["steps"].as_u64().unwrap() {
                let loss = step(&mut opt, &st, &w, &b, cfg.maximize);
                let want = |what: &str| load(&st, &format!("lbfgs.{name}.step{k}.{what}"));
                let what = |x: &str| format!("{name} ({dtype}) step {k} {x}");
                close(&what("loss"), &loss, &want("loss"), tol, tol)?;
                close(&what("w"), &w, &want("w"), tol, tol)?;
                close(&what("b"), &b, &want("b"), tol, tol)?;
                if dtype == DType::F64 && counts(&opt) != want("counts").to_vec::<f64>() {
                    return Err(format!(
                        "{} evaluations and iterations {:?}, PyTorch's {:?}",
                        what(""),
                        counts(&opt),
                        want("counts").to_vec::<f64>()
                    ));
                }
            }
            Ok(())
        });
        assert_eq!(n, 8);
    }
}

/// A run saved after one step and loaded into a fresh optimizer over
/// copies of the parameters takes the same second and third steps: the
/// history, the last direction and step, and the counts come back.
#[test]
fn a_resumed_lbfgs_continues_as_the_saved_run() {
    let (bytes, _) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let cfg = LbfgsConfig {
        lr: 0.5,
        max_iter: 4,
        history_size: 2,
        ..Default::default()
    };
    let (w, b) = start(&st, DType::F64);
    let mut opt = LBFGS::new(vec![w.clone(), b.clone()], cfg);
    step(&mut opt, &st, &w, &b, false);
    step(&mut opt, &st, &w, &b, false);
    let copy = |t: &Tensor| Tensor::from_vec(t.to_vec::<f64>(), t.shape()).requires_grad_(true);
    let (w2, b2) = (copy(&w), copy(&b));
    let mut resumed = LBFGS::new(vec![w2.clone(), b2.clone()], cfg);
    resumed.load_state_dict(&opt.state_dict()).unwrap();
    assert!(
        opt.state_dict()
            .iter()
            .any(|(k, _)| k == "state.0.old_dirs.1")
    );
    for _ in 0..2 {
        step(&mut opt, &st, &w, &b, false);
        step(&mut resumed, &st, &w2, &b2, false);
        assert_eq!(w.to_vec::<f64>(), w2.to_vec::<f64>());
        assert_eq!(b.to_vec::<f64>(), b2.to_vec::<f64>());
    }
    assert_eq!(counts(&opt), counts(&resumed));
    // A fresh optimizer (no history) steps differently: the state mattered.
    let (w3, b3) = (copy(&w), copy(&b));
    let mut fresh = LBFGS::new(vec![w3.clone(), b3.clone()], cfg);
    step(&mut fresh, &st, &w3, &b3, false);
    step(&mut opt, &st, &w, &b, false);
    assert_ne!(w.to_vec::<f64>(), w3.to_vec::<f64>());
}

/// A state whose vectors do not fit the parameters is refused, naming the
/// key and both sizes.
#[test]
fn lbfgs_refuses_a_state_of_other_parameters() {
    let (bytes, _) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (w, b) = start(&st, DType::F64);
    let mut opt = LBFGS::new(vec![w.clone(), b.clone()], LbfgsConfig::default());
    step(&mut opt, &st, &w, &b, false);
    let mut other = LBFGS::new(vec![w.clone()], LbfgsConfig::default());
    let err = other
        .load_state_dict(&opt.state_dict())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("state.0.d has shape [8], the parameters have 6 elements"),
        "{err}"
    );
}

/// `step` without a closure, a closure returning a non-scalar, parameters
/// of two dtypes: each a sentence naming LBFGS and what to do.
#[test]
fn lbfgs_misuse_is_explained() {
    let p = || Tensor::ones(&[2]).requires_grad_(true);
    let got = panic_message(|| LBFGS::new(vec![p()], LbfgsConfig::default()).step());
    assert!(
        got.contains("LBFGS: step needs a closure") && got.contains("step_with"),
        "{got}"
    );
    let got = panic_message(|| {
        let w = p();
        LBFGS::new(vec![w.clone()], LbfgsConfig::default()).step_with(|| {
            let l = &w * 2.0;
            l.sum().backward();
            l
        });
    });
    assert!(
        got.contains("must return the loss, one element") && got.contains("[2]"),
        "{got}"
    );
    let got = panic_message(|| {
        LBFGS::new(
            vec![p(), p().to_dtype(DType::F64).detach().requires_grad_(true)],
            LbfgsConfig::default(),
        );
    });
    assert!(
        got.contains("one device and dtype") && got.contains("float64"),
        "{got}"
    );
}
