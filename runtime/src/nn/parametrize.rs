//! Parametrized weights (`torch.nn.utils.parametrizations`): a module's
//! tensor recomputed from others at every call, so the optimizer trains
//! those. [`weight_norm`] splits a weight into a magnitude and a direction;
//! [`spectral_norm`] divides it by its largest singular value, estimated by
//! power iteration. Both are compositions, so gradients flow to the
//! originals by autograd; the state dict uses PyTorch's names
//! (`parametrizations.weight.original0`, ...), so weights load both ways.

use super::functional::normalize;
use super::module::{Forward, Module, TensorKind, TrainingFlag};
use crate::Tensor;
use std::sync::{Mutex, MutexGuard};

/// How a [`Parametrized`] module computes its tensor, and the tensors that
/// computation owns (under `parametrizations.<name>.` in the state dict).
pub trait Parametrization: Send + Sync + 'static {
    /// The tensor to use, from the owned ones; `training` is the module's
    /// mode (spectral norm's power iteration runs only in training).
    fn value(&self, training: bool) -> Tensor;
    /// Calls `f` with every owned tensor, named as PyTorch's state dict.
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind));
    /// As [`Parametrization::visit`], the tensors replaceable.
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind));
    /// The class name PyTorch's repr shows (`_WeightNorm`).
    fn class(&self) -> &'static str;
}

/// A module whose tensor `name` is computed by a [`Parametrization`] at
/// every call (PyTorch's `parametrize.register_parametrization`). Call it
/// with [`Forward::forward`] or, for any other call, [`Parametrized::call`];
/// [`Parametrized::remove`] gives back the module with the tensor fixed
/// at its current value (`remove_parametrizations(leave_parametrized=True)`).
///
/// ```
/// use tapir_runtime::{nn::{weight_norm, Forward, Linear, Module}, Tensor};
/// let layer = weight_norm(Linear::new(4, 3, true), "weight", Some(0));
/// let names: Vec<String> = layer.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]);
/// assert_eq!(layer.forward(&Tensor::ones(&[2, 4])).shape(), &[2, 3]);
/// ```
pub struct Parametrized<M, P> {
    module: Mutex<M>,
    name: String,
    /// The parametrization and the tensors it owns.
    pub parametrization: P,
    training: TrainingFlag,
}

impl<M: Module, P: Parametrization> Parametrized<M, P> {
    fn new(module: M, name: &str, parametrization: P) -> Parametrized<M, P> {
        let training = TrainingFlag::default();
        training.set(module.is_training());
        Parametrized {
            module: Mutex::new(module),
            name: name.to_string(),
            parametrization,
            training,
        }
    }

    fn lock(&self) -> MutexGuard<'_, M> {
        self.module.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The parametrized tensor as the next call will use it.
    pub fn value(&self) -> Tensor {
        self.parametrization.value(self.training.get())
    }

    /// Calls `f` with the module, its tensor `name` computed first: for
    /// calls other than `forward` (an RNN's, a layer's with options).
    pub fn call<R>(&self, f: impl FnOnce(&M) -> R) -> R {
        let value = self.value();
        let mut module = self.lock();
        set_named(&mut *module, &self.name, value);
        f(&module)
    }

    /// The module with the tensor fixed at its current value, a leaf that
    /// requires grad as the original did.
    pub fn remove(self) -> M {
        let value = crate::no_grad(|| self.value()).detach();
        let mut module = self.module.into_inner().unwrap_or_else(|e| e.into_inner());
        set_named(&mut module, &self.name, value.requires_grad_(true));
        module
    }
}

/// Replaces the tensor named `name` in `module`.
fn set_named(module: &mut dyn Module, name: &str, value: Tensor) {
    let mut value = Some(value);
    module.visit_mut(&mut |n, t, _| {
        if n == name
            && let Some(v) = value.take()
        {
            *t = v;
        }
    });
}

/// The tensor named `name` in `module`, or a panic naming what it has.
#[track_caller]
fn named(module: &dyn Module, name: &str, op: &str) -> Tensor {
    let mut found = None;
    let mut names = vec![];
    module.visit(&mut |n, t, kind| {
        if n == name && kind == TensorKind::Parameter {
            found = Some(t.clone());
        }
        names.push(n.to_string());
    });
    found.unwrap_or_else(|| {
        panic!(
            "{op}: {} has no parameter `{name}` (it has {})",
            module.repr().lines().next().unwrap_or_default(),
            names.join(", ")
        )
    })
}

impl<M: Module, P: Parametrization> Module for Parametrized<M, P> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.lock().visit(&mut |n, t, k| {
            if n != self.name {
                f(n, t, k)
            }
        });
        let prefix = format!("parametrizations.{}.", self.name);
        self.parametrization
            .visit(&mut |n, t, k| f(&format!("{prefix}{n}"), t, k));
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        let name = &self.name;
        let module = self.module.get_mut().unwrap_or_else(|e| e.into_inner());
        module.visit_mut(&mut |n, t, k| {
            if n != name {
                f(n, t, k)
            }
        });
        let prefix = format!("parametrizations.{name}.");
        self.parametrization
            .visit_mut(&mut |n, t, k| f(&format!("{prefix}{n}"), t, k));
    }
    /// PyTorch's repr of a parametrized module: `Parametrized` before the
    /// class, the module's own lines, then the parametrization list.
    fn repr(&self) -> String {
        let inner = self.lock().repr();
        let (class, rest) = inner.split_once('(').unwrap_or((&inner, ")"));
        let body = rest.strip_suffix(')').unwrap_or(rest);
        let mut s = format!("Parametrized{class}(\n");
        for line in body.lines().filter(|l| !l.trim().is_empty()) {
            let line = line.strip_prefix("  ").unwrap_or(line);
            s.push_str(&format!("  {line}\n"));
        }
        s + &format!(
            "  (parametrizations): ModuleDict(\n    ({}): ParametrizationList(\n      (0): {}()\n    )\n  )\n)",
            self.name,
            self.parametrization.class()
        )
    }
    fn set_training(&self, on: bool) {
        self.training.set(on);
        self.lock().set_training(on);
    }
    fn is_training(&self) -> bool {
        self.training.get()
    }
}

impl<M: Forward, P: Parametrization> Forward for Parametrized<M, P> {
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        self.call(|m| m.forward(x))
    }
}

/// The 2-norm of `v` over every dim but `dim`, keeping dims (PyTorch's
/// `norm_except_dim`); over everything for `None`.
fn norm_except_dim(v: &Tensor, dim: Option<usize>) -> Tensor {
    match dim {
        None => v.square().sum().sqrt(),
        Some(d) => {
            let others: Vec<isize> = (0..v.ndim())
                .filter(|&i| i != d)
                .map(|i| i as isize)
                .collect();
            if others.is_empty() {
                v.abs()
            } else {
                v.square().sum_dims(&others, true).sqrt()
            }
        }
    }
}

/// `weight_norm`'s parametrization: `original0` the magnitude `g` (the
/// norm over every dim but `dim`, kept as size-1 dims), `original1` the
/// direction `v`; the weight is `g · v / ‖v‖`.
pub struct WeightNorm {
    /// `g`, `original0`.
    pub magnitude: Tensor,
    /// `v`, `original1`.
    pub direction: Tensor,
    /// The dim kept apart (one norm per index of it), or `None` for one
    /// norm of the whole tensor.
    pub dim: Option<usize>,
}

impl Parametrization for WeightNorm {
    fn value(&self, _: bool) -> Tensor {
        let scale = &self.magnitude / &norm_except_dim(&self.direction, self.dim);
        &self.direction * &scale
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("original0", &self.magnitude, TensorKind::Parameter);
        f("original1", &self.direction, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("original0", &mut self.magnitude, TensorKind::Parameter);
        f("original1", &mut self.direction, TensorKind::Parameter);
    }
    fn class(&self) -> &'static str {
        "_WeightNorm"
    }
}

/// `torch.nn.utils.parametrizations.weight_norm(module, name, dim)`: the
/// parameter `name` becomes `g · v / ‖v‖`, `g` and `v` trained in its
/// place (Salimans & Kingma). `dim` (PyTorch's default 0) keeps one norm
/// per index of that dim; `None` one norm of the whole tensor. Starts at
/// the module's weight: `g = ‖w‖`, `v = w`.
///
/// ```
/// use tapir_runtime::{nn::{weight_norm, Linear, Module}, Tensor};
/// let layer = weight_norm(Linear::new(3, 2, false), "weight", Some(0));
/// assert_eq!(layer.parametrization.magnitude.shape(), &[2, 1]);
/// // The same weight as before: ‖v‖ is g at the start.
/// let w = layer.value();
/// assert!((&w - &layer.parametrization.direction).abs().max().item::<f32>() < 1e-6);
/// ```
#[track_caller]
pub fn weight_norm<M: Module>(
    module: M,
    name: &str,
    dim: Option<usize>,
) -> Parametrized<M, WeightNorm> {
    let weight = named(&module, name, "weight_norm");
    assert!(
        dim.is_none_or(|d| d < weight.ndim()),
        "weight_norm: dim {dim:?} is out of range for `{name}` of shape {:?}",
        weight.shape()
    );
    let weight = weight.detach();
    let magnitude = crate::no_grad(|| norm_except_dim(&weight, dim)).requires_grad_(true);
    // The module's own storage, as PyTorch's `original1` is its weight.
    let direction = weight.requires_grad_(true);
    Parametrized::new(
        module,
        name,
        WeightNorm {
            magnitude,
            direction,
            dim,
        },
    )
}

/// `spectral_norm`'s parametrization: `original` the weight, `0._u` and
/// `0._v` the power iteration's left and right singular vector estimates
/// (buffers); the weight used is `original / σ`, `σ = uᵀ W v` with `W`
/// the weight as a matrix of rows along `dim`.
pub struct SpectralNorm {
    /// The weight, `original`.
    pub original: Tensor,
    /// The left singular vector estimate, `0._u` (`[rows]`).
    pub u: Tensor,
    /// The right singular vector estimate, `0._v` (`[columns]`).
    pub v: Tensor,
    /// Power iterations per training call.
    pub n_power_iterations: usize,
    /// Floor of the norms the vectors are divided by.
    pub eps: f64,
    /// The dim that becomes the matrix's rows.
    pub dim: usize,
}

impl SpectralNorm {
    /// The weight as a matrix: `dim` first, the rest flattened.
    fn matrix(&self, w: &Tensor) -> Tensor {
        let w = if self.dim == 0 {
            w.clone()
        } else {
            let mut order: Vec<isize> = (0..w.ndim() as isize)
                .filter(|&i| i != self.dim as isize)
                .collect();
            order.insert(0, self.dim as isize);
            w.permute(&order)
        };
        w.reshape(&[w.shape()[0] as isize, -1])
    }

    /// `n` steps of power iteration from the stored vectors, stored back.
    fn power_method(&self, matrix: &Tensor, n: usize) {
        crate::no_grad(|| {
            for _ in 0..n {
                let u = normalize(&matrix.matmul(&self.v), 2.0, 0, self.eps);
                self.u.copy_(&u);
                let v = normalize(&matrix.t().matmul(&self.u), 2.0, 0, self.eps);
                self.v.copy_(&v);
            }
        });
    }
}

impl Parametrization for SpectralNorm {
    fn value(&self, training: bool) -> Tensor {
        if self.original.ndim() == 1 {
            return normalize(&self.original, 2.0, 0, self.eps);
        }
        let matrix = self.matrix(&self.original);
        if training {
            self.power_method(&matrix.detach(), self.n_power_iterations);
        }
        let (u, v) = (self.u.detach(), self.v.detach());
        let sigma = u.dot(&matrix.matmul(&v));
        &self.original / &sigma
    }
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("original", &self.original, TensorKind::Parameter);
        if self.original.ndim() > 1 {
            f("0._u", &self.u, TensorKind::Buffer);
            f("0._v", &self.v, TensorKind::Buffer);
        }
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("original", &mut self.original, TensorKind::Parameter);
        if self.original.ndim() > 1 {
            f("0._u", &mut self.u, TensorKind::Buffer);
            f("0._v", &mut self.v, TensorKind::Buffer);
        }
    }
    fn class(&self) -> &'static str {
        "_SpectralNorm"
    }
}

/// `torch.nn.utils.parametrizations.spectral_norm(module, name,
/// n_power_iterations, eps, dim)`: the parameter `name` divided by its
/// spectral norm (Miyato et al.), estimated by `n_power_iterations` steps
/// of power iteration (PyTorch's default 1) at every call in training
/// mode; eval mode uses the stored estimate. The vectors start as
/// normalised normal draws, then 15 iterations, as PyTorch's. `dim`
/// defaults (`None`) to 0, or 1 for the transposed convolutions; a 1-D
/// parameter is just normalised.
///
/// ```
/// use tapir_runtime::{nn::{spectral_norm, Linear, Module}, no_grad, Tensor};
/// let layer = spectral_norm(Linear::new(6, 4, false), "weight", 1, 1e-12, None);
/// layer.eval();
/// // After the start's 15 iterations, the weight's largest singular value is about 1.
/// let w = no_grad(|| layer.value());
/// let sigma = w.t().matmul(&w).max().item::<f32>();
/// assert!(sigma > 0.2 && sigma < 1.05);
/// ```
#[track_caller]
pub fn spectral_norm<M: Module>(
    module: M,
    name: &str,
    n_power_iterations: usize,
    eps: f64,
    dim: Option<usize>,
) -> Parametrized<M, SpectralNorm> {
    let weight = named(&module, name, "spectral_norm");
    let transposed = module.repr().starts_with("ConvTranspose");
    let dim = dim.unwrap_or(transposed as usize);
    assert!(
        dim < weight.ndim().max(1) && eps > 0.0,
        "spectral_norm: dim {dim} is out of range for `{name}` of shape {:?} (or eps {eps} is not positive)",
        weight.shape()
    );
    let original = weight.detach().requires_grad_(true);
    let mut sn = SpectralNorm {
        u: Tensor::zeros(&[0]),
        v: Tensor::zeros(&[0]),
        original,
        n_power_iterations,
        eps,
        dim,
    };
    if sn.original.ndim() > 1 {
        let matrix = sn.matrix(&sn.original.detach());
        let (h, w) = (matrix.shape()[0], matrix.shape()[1]);
        let draw = |n: usize| {
            let t = Tensor::randn(&[n]).to_dtype(matrix.dtype());
            let t = t
                .to(matrix.device())
                .unwrap_or_else(|e| panic!("spectral_norm: {e}"));
            normalize(&t, 2.0, 0, eps)
        };
        sn.u = draw(h);
        sn.v = draw(w);
        sn.power_method(&matrix, 15);
    }
    Parametrized::new(module, name, sn)
}
