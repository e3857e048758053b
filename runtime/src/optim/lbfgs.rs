//! L-BFGS (`torch.optim.LBFGS`): a quasi-Newton method that re-evaluates
//! the model several times per step, so its step takes a closure. Built
//! from tensor ops on one flat gradient (no kernel of its own), so it runs
//! wherever the parameters live.

use super::line_search::{LinePoint, Wolfe, strong_wolfe};
use super::{GroupSpec, Optimizer, ParamGroup, load_state, resolve_groups, save_state};
use crate::nn::StateDict;
use crate::{Error, Result, Tensor};
use std::collections::VecDeque;

/// The line search L-BFGS may use (PyTorch's `line_search_fn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineSearch {
    /// `"strong_wolfe"`: steps meeting the strong Wolfe conditions.
    StrongWolfe,
}

/// Hyper-parameters of L-BFGS; `Default` gives `torch.optim.LBFGS`'s: lr 1,
/// 20 iterations and `max_iter * 5 / 4` evaluations per step, tolerances
/// 1e-7 (gradient) and 1e-9 (change), a history of 100, no line search.
///
/// ```
/// use tapir_runtime::optim::{LbfgsConfig, LineSearch};
/// let c = LbfgsConfig { line_search_fn: Some(LineSearch::StrongWolfe), ..Default::default() };
/// assert_eq!((c.max_iter, c.history_size), (20, 100));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct LbfgsConfig {
    /// Learning rate: the step length tried first along each direction.
    pub lr: f64,
    /// Iterations per `step_with` call.
    pub max_iter: usize,
    /// Closure evaluations per `step_with` call; `None` means `max_iter * 5 / 4`.
    pub max_eval: Option<usize>,
    /// Stop when every gradient entry is at most this in magnitude.
    pub tolerance_grad: f64,
    /// Stop when the loss or the parameters change by less than this.
    pub tolerance_change: f64,
    /// How many past updates approximate the inverse Hessian.
    pub history_size: usize,
    /// The line search, or `None` for a fixed step of `lr`.
    pub line_search_fn: Option<LineSearch>,
    /// Maximise the objective instead of minimising it.
    pub maximize: bool,
}

impl Default for LbfgsConfig {
    fn default() -> Self {
        LbfgsConfig {
            lr: 1.0,
            max_iter: 20,
            max_eval: None,
            tolerance_grad: 1e-7,
            tolerance_change: 1e-9,
            history_size: 100,
            line_search_fn: None,
            maximize: false,
        }
    }
}

/// What L-BFGS carries from one step to the next (PyTorch's `state`).
#[derive(Default)]
struct History {
    func_evals: u64,
    n_iter: u64,
    /// The last direction and the step taken along it.
    d: Option<Tensor>,
    t: f64,
    /// Gradient changes `y`, steps `s` and `1 / (y · s)`, oldest first.
    old_dirs: VecDeque<Tensor>,
    old_stps: VecDeque<Tensor>,
    ro: VecDeque<f64>,
    /// The initial inverse-Hessian scale `y · s / y · y`.
    h_diag: f64,
    prev_flat_grad: Option<Tensor>,
    prev_loss: f64,
}

/// L-BFGS (`torch.optim.LBFGS`). Its step re-evaluates the model, so it is
/// [`LBFGS::step_with`] a closure that computes the loss, calls `backward`
/// and returns the loss; `step_with` clears the gradients before each
/// call (the closure's `optimizer.zero_grad()` in PyTorch, which a Rust
/// closure cannot borrow). One parameter group, all on one device and of
/// one dtype, as PyTorch requires.
///
/// ```
/// use tapir_runtime::{optim::{LBFGS, LbfgsConfig, LineSearch}, Tensor};
/// // Minimise (x - 3)^2 + (y + 1)^2.
/// let p = Tensor::from_vec(vec![0.0f64, 0.0], &[2]).requires_grad_(true);
/// let target = Tensor::from_vec(vec![3.0f64, -1.0], &[2]);
/// let cfg = LbfgsConfig { line_search_fn: Some(LineSearch::StrongWolfe), ..Default::default() };
/// let mut opt = LBFGS::new(vec![p.clone()], cfg);
/// opt.step_with(|| {
///     let loss = (&p - &target).square().sum();
///     loss.backward();
///     loss
/// });
/// let v = p.to_vec::<f64>();
/// assert!((v[0] - 3.0).abs() < 1e-6 && (v[1] + 1.0).abs() < 1e-6);
/// ```
pub struct LBFGS {
    groups: Vec<ParamGroup>,
    cfg: LbfgsConfig,
    state: History,
}

impl LBFGS {
    /// L-BFGS over `params`.
    pub fn new(params: Vec<Tensor>, cfg: LbfgsConfig) -> LBFGS {
        let groups = resolve_groups(vec![GroupSpec::new(params)], cfg.lr, 0.0, "LBFGS");
        let ps = &groups[0].params;
        for (i, p) in ps.iter().enumerate().skip(1) {
            assert!(
                p.device() == ps[0].device() && p.dtype() == ps[0].dtype(),
                "LBFGS: all parameters must share one device and dtype (parameter 0 is {} on {}, parameter {i} is \
                 {} on {})",
                ps[0].dtype(),
                ps[0].device(),
                p.dtype(),
                p.device()
            );
        }
        assert!(
            ps[0].dtype().is_float(),
            "LBFGS: parameters must be floating point, got {}",
            ps[0].dtype()
        );
        LBFGS {
            groups,
            cfg,
            state: History::default(),
        }
    }

    fn params(&self) -> &[Tensor] {
        &self.groups[0].params
    }

    /// Calls `closure` with grad mode on and fresh gradients; its loss as
    /// returned and as the objective to minimise.
    fn evaluate(&self, closure: &mut dyn FnMut() -> Tensor) -> (Tensor, f64) {
        for p in self.params() {
            p.set_grad(None);
        }
        let loss = crate::enable_grad(&mut *closure);
        assert!(
            loss.numel() == 1,
            "LBFGS: step_with's closure must return the loss, one element; it returned a tensor of shape {:?}",
            loss.shape()
        );
        let f = loss.item::<f64>();
        (loss, if self.cfg.maximize { -f } else { f })
    }

    /// Every parameter's gradient in one vector (zeros where a parameter
    /// has none), negated when maximising.
    fn flat_grad(&self) -> Tensor {
        let views: Vec<Tensor> = self
            .params()
            .iter()
            .map(|p| match p.grad() {
                Some(g) => g.reshape(&[-1]),
                None => Tensor::zeros_like(p).reshape(&[-1]),
            })
            .collect();
        let flat = Tensor::cat(&views.iter().collect::<Vec<_>>(), 0);
        if self.cfg.maximize { flat.neg() } else { flat }
    }

    /// `params += t * update`, `update` being flat.
    fn add_flat(&self, t: f64, update: &Tensor) {
        let mut offset = 0;
        for p in self.params() {
            let n = p.numel();
            let shape: Vec<isize> = p.shape().iter().map(|&s| s as isize).collect();
            p.add_scaled_(&update.narrow(0, offset, n).view(&shape), t);
            offset += n;
        }
    }

    /// Loss and flat gradient at `x + t d`; the parameters are `x` again after.
    fn directional_evaluate(
        &self,
        closure: &mut dyn FnMut() -> Tensor,
        x: &[Tensor],
        t: f64,
        d: &Tensor,
    ) -> (f64, Tensor) {
        self.add_flat(t, d);
        let (_, f) = self.evaluate(closure);
        let g = self.flat_grad();
        for (p, v) in self.params().iter().zip(x) {
            p.copy_(v);
        }
        (f, g)
    }

    /// One L-BFGS step: up to `max_iter` iterations, each a direction from
    /// the history and a step along it (fixed, or by line search), calling
    /// `closure` up to `max_eval` times. Returns the loss of the first
    /// evaluation, as PyTorch's `step(closure)`.
    pub fn step_with(&mut self, mut closure: impl FnMut() -> Tensor) -> Tensor {
        let _p = crate::profiler::scope("Optimizer.step#LBFGS.step", "optimizer");
        let _g = crate::NoGradGuard::new();
        let c = self.cfg;
        let (lr, max_eval) = (self.groups[0].lr, c.max_eval.unwrap_or(c.max_iter * 5 / 4));
        let (orig_loss, mut loss) = self.evaluate(&mut closure);
        let mut current_evals = 1;
        self.state.func_evals += 1;
        let mut flat_grad = self.flat_grad();
        if abs_max(&flat_grad) <= c.tolerance_grad {
            return orig_loss;
        }
        let mut s = std::mem::take(&mut self.state);
        let mut n_iter = 0;
        while n_iter < c.max_iter {
            n_iter += 1;
            s.n_iter += 1;
            let d = if s.n_iter == 1 {
                s.old_dirs.clear();
                s.old_stps.clear();
                s.ro.clear();
                s.h_diag = 1.0;
                flat_grad.neg()
            } else {
                let prev = s
                    .prev_flat_grad
                    .as_ref()
                    .expect("a previous gradient after the first iteration");
                let last =
                    s.d.as_ref()
                        .expect("a previous direction after the first iteration");
                s.remember(&flat_grad.sub(prev), &(last * s.t), c.history_size);
                s.direction(&flat_grad)
            };
            s.prev_flat_grad = Some(flat_grad.clone());
            s.prev_loss = loss;
            s.t = if s.n_iter == 1 {
                (1.0 / flat_grad.abs().sum().item::<f64>()).min(1.0) * lr
            } else {
                lr
            };
            let gtd = flat_grad.dot(&d).item::<f64>();
            s.d = Some(d.clone());
            // Not a descent direction: nothing more to gain.
            if gtd > -c.tolerance_change {
                break;
            }
            let mut ls_func_evals = 0;
            let mut opt_cond = false;
            if c.line_search_fn == Some(LineSearch::StrongWolfe) {
                let x: Vec<Tensor> = self
                    .params()
                    .iter()
                    .map(|p| p.detach().contiguous_copy())
                    .collect();
                let start = LinePoint {
                    t: 0.0,
                    f: loss,
                    g: flat_grad.clone(),
                    gtd,
                };
                let wolfe = Wolfe {
                    c1: 1e-4,
                    c2: 0.9,
                    // PyTorch passes not the group's tolerance but the search's default.
                    tolerance_change: 1e-9,
                    max_ls: max_eval.saturating_sub(current_evals),
                };
                let evaluate = |t| self.directional_evaluate(&mut closure, &x, t, &d);
                let (found, evals) = strong_wolfe(evaluate, &d, start, s.t, &wolfe);
                (loss, flat_grad, s.t, ls_func_evals) = (found.f, found.g, found.t, evals);
                self.add_flat(s.t, &d);
                opt_cond = abs_max(&flat_grad) <= c.tolerance_grad;
            } else {
                self.add_flat(s.t, &d);
                // The last iteration leaves the next step to evaluate.
                if n_iter != c.max_iter {
                    loss = self.evaluate(&mut closure).1;
                    flat_grad = self.flat_grad();
                    opt_cond = abs_max(&flat_grad) <= c.tolerance_grad;
                    ls_func_evals = 1;
                }
            }
            current_evals += ls_func_evals;
            s.func_evals += ls_func_evals as u64;
            let stalled = || abs_max(&(&d * s.t)) <= c.tolerance_change;
            if n_iter == c.max_iter
                || current_evals >= max_eval
                || opt_cond
                || stalled()
                || (loss - s.prev_loss).abs() < c.tolerance_change
            {
                break;
            }
        }
        self.state = s;
        orig_loss
    }
}

impl History {
    /// Keeps the update `(y, s)` when it has positive curvature, dropping
    /// the oldest past `history_size`.
    fn remember(&mut self, y: &Tensor, s: &Tensor, history_size: usize) {
        let ys = y.dot(s).item::<f64>();
        if ys <= 1e-10 {
            return;
        }
        if self.old_dirs.len() == history_size {
            self.old_dirs.pop_front();
            self.old_stps.pop_front();
            self.ro.pop_front();
        }
        self.h_diag = ys / y.dot(y).item::<f64>();
        self.old_dirs.push_back(y.clone());
        self.old_stps.push_back(s.clone());
        self.ro.push_back(1.0 / ys);
    }

    /// The two-loop recursion: the inverse-Hessian estimate times `-grad`.
    fn direction(&self, grad: &Tensor) -> Tensor {
        let n = self.old_dirs.len();
        let mut al = vec![0.0; n];
        let q = grad.neg();
        for i in (0..n).rev() {
            al[i] = self.old_stps[i].dot(&q).item::<f64>() * self.ro[i];
            q.add_scaled_(&self.old_dirs[i], -al[i]);
        }
        let r = &q * self.h_diag;
        let history = self.old_dirs.iter().zip(&self.old_stps).zip(&self.ro);
        for (((y, s), ro), al) in history.zip(al) {
            let be = y.dot(&r).item::<f64>() * ro;
            r.add_scaled_(s, al - be);
        }
        r
    }
}

fn abs_max(t: &Tensor) -> f64 {
    t.abs().max().item::<f64>()
}

impl Optimizer for LBFGS {
    /// L-BFGS re-evaluates the model within a step: this panics, pointing
    /// to [`LBFGS::step_with`] (PyTorch's `step` requires its closure too).
    fn step(&mut self) {
        panic!(
            "LBFGS: step needs a closure that re-evaluates the model; call step_with(|| {{ let loss = ...; \
             loss.backward(); loss }})"
        )
    }
    group_accessors!();
    fn state_dict(&self) -> StateDict {
        let c = &self.cfg;
        let extra = [
            ("max_iter", c.max_iter as f64),
            ("history_size", c.history_size as f64),
        ];
        let mut out = save_state(&self.groups, &[], &extra);
        let s = &self.state;
        if s.func_evals == 0 {
            return out;
        }
        let mut put = |k: String, t: Tensor| out.push((format!("state.0.{k}"), t));
        for (k, v) in [
            ("func_evals", s.func_evals as f64),
            ("n_iter", s.n_iter as f64),
            ("t", s.t),
            ("H_diag", s.h_diag),
            ("prev_loss", s.prev_loss),
        ] {
            put(k.into(), Tensor::scalar(v));
        }
        for (k, t) in [("d", &s.d), ("prev_flat_grad", &s.prev_flat_grad)] {
            if let Some(t) = t {
                put(k.into(), t.contiguous_copy());
            }
        }
        for i in 0..s.old_dirs.len() {
            put(format!("old_dirs.{i}"), s.old_dirs[i].contiguous_copy());
            put(format!("old_stps.{i}"), s.old_stps[i].contiguous_copy());
            put(format!("ro.{i}"), Tensor::scalar(s.ro[i]));
        }
        out
    }
    fn load_state_dict(&mut self, dict: &[(String, Tensor)]) -> Result<()> {
        load_state(&mut self.groups, &mut [], dict, &[])?;
        self.state = History::load(dict, &self.groups[0].params)?;
        Ok(())
    }
}

impl History {
    /// The history `state_dict` saved, its vectors checked against the
    /// parameters' total size and moved to their device and dtype.
    fn load(dict: &[(String, Tensor)], params: &[Tensor]) -> Result<History> {
        let get = |k: &str| {
            dict.iter()
                .find(|(n, _)| n == &format!("state.0.{k}"))
                .map(|(_, t)| t)
        };
        let Some(func_evals) = get("func_evals") else {
            return Ok(History::default());
        };
        let numel: usize = params.iter().map(|p| p.numel()).sum();
        let vector = |k: &str| -> Result<Tensor> {
            let t =
                get(k).ok_or_else(|| Error::Format(format!("LBFGS state: missing state.0.{k}")))?;
            if t.shape() != [numel] {
                return Err(Error::Format(format!(
                    "LBFGS state: state.0.{k} has shape {:?}, the parameters have {numel} elements",
                    t.shape()
                )));
            }
            Ok(t.to(params[0].device())?
                .to_dtype(params[0].dtype())
                .contiguous_copy())
        };
        let scalar = |k: &str| {
            get(k)
                .map(|t| t.item::<f64>())
                .ok_or_else(|| Error::Format(format!("LBFGS state: missing state.0.{k}")))
        };
        let n_iter = scalar("n_iter")? as u64;
        // A run that stopped at its first evaluation has no direction yet.
        let iterated = |k: &str| match n_iter {
            0 => Ok(None),
            _ => vector(k).map(Some),
        };
        let mut h = History {
            func_evals: func_evals.item::<f64>() as u64,
            n_iter,
            d: iterated("d")?,
            t: scalar("t")?,
            h_diag: scalar("H_diag")?,
            prev_flat_grad: iterated("prev_flat_grad")?,
            prev_loss: scalar("prev_loss")?,
            ..History::default()
        };
        for i in 0.. {
            if get(&format!("old_dirs.{i}")).is_none() {
                break;
            }
            h.old_dirs.push_back(vector(&format!("old_dirs.{i}"))?);
            h.old_stps.push_back(vector(&format!("old_stps.{i}"))?);
            h.ro.push_back(scalar(&format!("ro.{i}"))?);
        }
        Ok(h)
    }
}
