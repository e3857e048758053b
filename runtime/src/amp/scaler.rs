//! `GradScaler`: multiplies the loss by a large factor so that small f16
//! gradients do not flush to zero, divides it out of the gradients before
//! the step, skips steps whose gradients overflowed, and adapts the factor
//! (PyTorch's `torch.amp.GradScaler`, same defaults, state keys and rules).

use crate::optim::Optimizer;
use crate::{DType, Tensor, no_grad};
use std::collections::HashMap;

/// `GradScaler`'s settings, with PyTorch's defaults.
///
/// ```
/// use tapir_runtime::amp::GradScalerConfig;
/// let c = GradScalerConfig::default();
/// assert_eq!((c.init_scale, c.growth_factor, c.backoff_factor, c.growth_interval), (65536.0, 2.0, 0.5, 2000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradScalerConfig {
    /// The first scale (2^16).
    pub init_scale: f64,
    /// The factor the scale grows by after `growth_interval` clean steps (2).
    pub growth_factor: f64,
    /// The factor the scale shrinks by after a step with inf/NaN gradients (0.5).
    pub backoff_factor: f64,
    /// Clean steps between growths (2000).
    pub growth_interval: u64,
    /// When false every method passes through (`scale` returns the loss).
    pub enabled: bool,
}

impl Default for GradScalerConfig {
    fn default() -> Self {
        GradScalerConfig {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            enabled: true,
        }
    }
}

/// Where an optimizer is in the current iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Unscaled,
    Stepped,
}

#[derive(Clone, Copy, Debug)]
struct PerOptimizer {
    stage: Stage,
    found_inf: bool,
}

/// Loss scaling for mixed-precision training. The loop:
///
/// ```
/// use tapir_runtime::amp::{GradScaler, GradScalerConfig};
/// use tapir_runtime::optim::{Optimizer, SGD, SgdConfig};
/// use tapir_runtime::Tensor;
/// let w = Tensor::ones(&[3]).requires_grad_(true);
/// let mut opt = SGD::new(vec![w.clone()], SgdConfig { lr: 0.1, ..Default::default() });
/// let mut scaler = GradScaler::new(GradScalerConfig::default());
/// let loss = (&w * 2.0).sum();
/// scaler.scale(&loss).backward(); // gradients are 65536x
/// scaler.unscale_(&mut opt); // now true gradients (clip here)
/// assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![2.0; 3]);
/// assert!(scaler.step(&mut opt)); // stepped: they were finite
/// scaler.update();
/// assert_eq!(w.to_vec::<f32>(), vec![0.8; 3]);
/// ```
#[derive(Debug, Clone)]
pub struct GradScaler {
    cfg: GradScalerConfig,
    scale: f64,
    growth_tracker: u64,
    optimizers: HashMap<usize, PerOptimizer>,
}

/// An optimizer's identity for the per-iteration state (PyTorch keys by `id(optimizer)`).
fn key(opt: &dyn Optimizer) -> usize {
    opt as *const dyn Optimizer as *const () as usize
}

impl GradScaler {
    /// A scaler with these settings. Panics on a non-positive scale or factor
    /// ordering PyTorch rejects (growth > 1, 0 < backoff < 1).
    pub fn new(cfg: GradScalerConfig) -> GradScaler {
        assert!(
            cfg.init_scale > 0.0
                && cfg.growth_factor > 1.0
                && (0.0..1.0).contains(&cfg.backoff_factor)
                && cfg.backoff_factor > 0.0
                && cfg.growth_interval > 0,
            "GradScaler: init_scale must be positive, growth_factor > 1, 0 < backoff_factor < 1 and growth_interval > 0, got {cfg:?}"
        );
        GradScaler {
            cfg,
            scale: f32_round(cfg.init_scale),
            growth_tracker: 0,
            optimizers: HashMap::new(),
        }
    }

    /// Whether scaling is on.
    pub fn is_enabled(&self) -> bool {
        self.cfg.enabled
    }

    /// The current scale (1.0 when disabled).
    pub fn get_scale(&self) -> f64 {
        if self.cfg.enabled { self.scale } else { 1.0 }
    }

    /// `loss * scale`, to call `backward` on. A 0-d f16/bf16 loss is scaled
    /// in f32, as PyTorch's 0-d promotion does (65536 overflows f16).
    pub fn scale(&self, loss: &Tensor) -> Tensor {
        if !self.cfg.enabled {
            return loss.clone();
        }
        let loss = match (loss.ndim(), loss.dtype()) {
            (0, DType::F16 | DType::BF16) => loss.to_dtype(DType::F32),
            _ => loss.clone(),
        };
        &loss * self.scale
    }

    /// Divides the optimizer's gradients by the scale, in place, and notes
    /// whether any is inf or NaN (one host read). Call it before clipping.
    /// Panics if called twice for one optimizer before `update`, or after
    /// `step` (as PyTorch raises).
    pub fn unscale_(&mut self, opt: &mut dyn Optimizer) {
        if !self.cfg.enabled {
            return;
        }
        match self.optimizers.get(&key(opt)).map(|s| s.stage) {
            Some(Stage::Unscaled) => panic!(
                "GradScaler::unscale_: unscale_() has already been called on this optimizer since the last update()"
            ),
            Some(Stage::Stepped) => {
                panic!("GradScaler::unscale_: unscale_() is being called after step()")
            }
            None => {}
        }
        let inv = f32_round(1.0 / self.scale);
        let found_inf = no_grad(|| {
            let mut poison: Option<Tensor> = None;
            for group in opt.param_groups() {
                for p in &group.params {
                    let Some(g) = p.grad() else { continue };
                    // 0 when every element is finite, NaN otherwise (inf * 0 = NaN).
                    let check = (&g * 0.0).to_dtype(DType::F32).sum();
                    poison = Some(match poison {
                        Some(acc) => &acc + &check,
                        None => check,
                    });
                    g.mul_scalar_(inv);
                }
            }
            poison.is_some_and(|t| !t.item::<f32>().is_finite())
        });
        self.optimizers.insert(
            key(opt),
            PerOptimizer {
                stage: Stage::Unscaled,
                found_inf,
            },
        );
    }

    /// Unscales (unless `unscale_` already did) and steps the optimizer when
    /// its gradients are finite; returns whether it stepped. Panics when
    /// called twice before `update`.
    pub fn step(&mut self, opt: &mut dyn Optimizer) -> bool {
        if !self.cfg.enabled {
            opt.step();
            return true;
        }
        match self.optimizers.get(&key(opt)).map(|s| s.stage) {
            Some(Stage::Stepped) => {
                panic!("GradScaler::step: step() has already been called since the last update()")
            }
            Some(Stage::Unscaled) => {}
            None => self.unscale_(opt),
        }
        let state = self
            .optimizers
            .get_mut(&key(opt))
            .expect("unscale_ recorded this optimizer");
        state.stage = Stage::Stepped;
        if state.found_inf {
            return false;
        }
        opt.step();
        true
    }

    /// Adapts the scale for the next iteration: times `backoff_factor` if
    /// any optimizer found inf/NaN gradients, times `growth_factor` after
    /// `growth_interval` clean iterations in a row.
    pub fn update(&mut self) {
        if !self.cfg.enabled {
            return;
        }
        assert!(
            !self.optimizers.is_empty(),
            "GradScaler::update: no inf checks were recorded prior to update (call unscale_ or step first)"
        );
        let found_inf = self.optimizers.values().any(|s| s.found_inf);
        if found_inf {
            self.scale = f32_round(self.scale * self.cfg.backoff_factor);
            self.growth_tracker = 0;
        } else {
            self.growth_tracker += 1;
            if self.growth_tracker == self.cfg.growth_interval {
                self.scale = f32_round(self.scale * self.cfg.growth_factor);
                self.growth_tracker = 0;
            }
        }
        self.optimizers.clear();
    }

    /// PyTorch's state: `scale`, `growth_factor`, `backoff_factor`,
    /// `growth_interval`, `_growth_tracker`.
    pub fn state_dict(&self) -> Vec<(String, f64)> {
        vec![
            ("scale".into(), self.scale),
            ("growth_factor".into(), self.cfg.growth_factor),
            ("backoff_factor".into(), self.cfg.backoff_factor),
            ("growth_interval".into(), self.cfg.growth_interval as f64),
            ("_growth_tracker".into(), self.growth_tracker as f64),
        ]
    }

    /// Restores a [`GradScaler::state_dict`]; a missing key is an error naming it.
    pub fn load_state_dict(&mut self, state: &[(String, f64)]) -> crate::Result<()> {
        let get = |k: &str| {
            state
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    crate::Error::Format(format!("GradScaler::load_state_dict: `{k}` is missing"))
                })
        };
        self.scale = get("scale")?;
        self.cfg.growth_factor = get("growth_factor")?;
        self.cfg.backoff_factor = get("backoff_factor")?;
        self.cfg.growth_interval = get("growth_interval")? as u64;
        self.growth_tracker = get("_growth_tracker")? as u64;
        Ok(())
    }
}

/// PyTorch keeps the scale in an f32 tensor: the same rounding here.
fn f32_round(v: f64) -> f64 {
    v as f32 as f64
}
