//! The `Module` trait: named parameters and buffers with PyTorch's dotted
//! names, train/eval, freezing, state dicts and a PyTorch-style repr.

use super::module_tree::{AsModule, collect_modules};
use crate::{DType, Device, Result, Tensor};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a named tensor is a trainable parameter or a buffer (running stats).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// A trainable tensor (gets gradients, goes to the optimizer).
    Parameter,
    /// State that is saved but not trained (running statistics).
    Buffer,
}

/// A state dict: (dotted name, tensor) pairs in registration order.
pub type StateDict = Vec<(String, Tensor)>;

/// What `load_state_dict` found: keys the module has but the dict lacks,
/// keys the dict has but the module lacks, and shape mismatches.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Keys the module has and the dict lacks.
    pub missing: Vec<String>,
    /// Keys the dict has and the module lacks.
    pub unexpected: Vec<String>,
    /// Keys whose shapes differ (`name: dict [..] vs module [..]`).
    pub mismatched: Vec<String>,
}

impl LoadReport {
    /// Whether every key matched.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty() && self.mismatched.is_empty()
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = vec![];
        if !self.missing.is_empty() {
            parts.push(format!("missing keys: {}", self.missing.join(", ")));
        }
        if !self.unexpected.is_empty() {
            parts.push(format!("unexpected keys: {}", self.unexpected.join(", ")));
        }
        if !self.mismatched.is_empty() {
            parts.push(format!("shape mismatches: {}", self.mismatched.join("; ")));
        }
        write!(f, "{}", parts.join("; "))
    }
}

/// A neural-network module (PyTorch's `nn.Module`). A layer implements the
/// two tensor visitors (its parameters and buffers, with names relative to
/// this module) and a repr. A composite names its children instead
/// ([`Module::visit_children`] and [`Module::visit_children_mut`]): its
/// tensors, train/eval switch, `named_modules` and `apply` then come from
/// them. Everything else is provided.
///
/// ```
/// use tapir_runtime::nn::{Linear, Module};
/// let l = Linear::new(3, 2, true);
/// let names: Vec<String> = l.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["weight", "bias"]);
/// assert_eq!(l.num_parameters(), 8);
/// assert_eq!(l.to_string(), "Linear(in_features=3, out_features=2, bias=True)");
/// ```
pub trait Module: AsModule + Send + Sync {
    /// Calls `f` with every parameter and buffer, recursively, with dotted
    /// names. By default, the children's under their names.
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.visit_children(&mut |name, child| visit_child(name, child, f));
    }
    /// As [`Module::visit`], with the tensors replaceable (dtype/device moves).
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.visit_children_mut(&mut |name, child| visit_child_mut(name, child, f));
    }
    /// Calls `f` with each direct child module and the name it sits under,
    /// in registration order (PyTorch's `named_children`). A layer has none,
    /// the default.
    fn visit_children<'a>(&'a self, _f: &mut dyn FnMut(&str, &'a dyn Module)) {}
    /// As [`Module::visit_children`], with the children changeable (what
    /// [`Module::apply`] walks).
    fn visit_children_mut(&mut self, _f: &mut dyn FnMut(&str, &mut dyn Module)) {}
    /// PyTorch's repr of this module (children indented, as `print(model)`).
    fn repr(&self) -> String;
    /// Sets train (true) or eval (false) mode here and in every child. By
    /// default, in every child; a module with a mode of its own overrides it.
    fn set_training(&self, on: bool) {
        self.visit_children(&mut |_, child| child.set_training(on));
    }
    /// Whether the module is in train mode.
    fn is_training(&self) -> bool {
        true
    }

    /// Training mode (dropout active, batch statistics).
    fn train(&self) {
        self.set_training(true);
    }

    /// Evaluation mode (`train(false)`).
    fn eval(&self) {
        self.set_training(false);
    }

    /// Every parameter with its dotted PyTorch name, each once: a tensor
    /// registered twice (tied weights) is listed under its first name, as
    /// PyTorch's `remove_duplicate=True` does, so an optimizer steps it once.
    fn named_parameters(&self) -> Vec<(String, Tensor)> {
        named_once(self, TensorKind::Parameter)
    }

    /// Every parameter.
    fn parameters(&self) -> Vec<Tensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Every buffer with its dotted PyTorch name, each once (as
    /// [`Module::named_parameters`]).
    fn named_buffers(&self) -> Vec<(String, Tensor)> {
        named_once(self, TensorKind::Buffer)
    }

    /// The direct children with their names (`named_children()`).
    fn named_children(&self) -> Vec<(String, &dyn Module)> {
        let mut out = vec![];
        self.visit_children(&mut |name, child| out.push((name.to_string(), child)));
        out
    }

    /// The direct children (`children()`).
    fn children(&self) -> Vec<&dyn Module> {
        let mut out = vec![];
        self.visit_children(&mut |_, child| out.push(child));
        out
    }

    /// This module (named `""`) and every module below it with its dotted
    /// name, each after its parent, as PyTorch's `named_modules()`. A module
    /// shared through an `Arc` is listed at each place it sits.
    ///
    /// ```
    /// use tapir_runtime::nn::{Linear, Module, ReLU, Sequential};
    /// let net = Sequential::new().add(Linear::new(4, 8, true)).add(ReLU);
    /// let names: Vec<String> = net.named_modules().into_iter().map(|(n, _)| n).collect();
    /// assert_eq!(names, ["", "0", "1"]);
    /// ```
    fn named_modules(&self) -> Vec<(String, &dyn Module)> {
        let mut out = vec![(String::new(), self.as_module())];
        collect_modules(self.as_module(), "", &mut out);
        out
    }

    /// This module and every module below it (`modules()`).
    fn modules(&self) -> Vec<&dyn Module> {
        self.named_modules().into_iter().map(|(_, m)| m).collect()
    }

    /// The module at a dotted path (`"blocks.0.net.3"`; `""` is this one),
    /// or `None` when nothing sits there (`get_submodule`).
    fn get_submodule(&self, target: &str) -> Option<&dyn Module> {
        self.named_modules()
            .into_iter()
            .find(|(name, _)| name == target)
            .map(|(_, m)| m)
    }

    /// Calls `f` on every module below this one, children before their
    /// parent, then on this one (PyTorch's `apply`, what custom
    /// initialisation uses).
    ///
    /// ```
    /// use tapir_runtime::nn::{Linear, Module, ReLU, Sequential, init};
    /// let mut net = Sequential::new().add(Linear::new(4, 8, true)).add(ReLU);
    /// net.apply(&mut |m| {
    ///     if let Some(l) = m.downcast_mut::<Linear>() {
    ///         init::xavier_uniform_(&l.weight, 1.0);
    ///         l.bias.iter().for_each(init::zeros_);
    ///     }
    /// });
    /// assert!(net.named_parameters()[1].1.to_vec::<f32>().iter().all(|b| *b == 0.0));
    /// ```
    fn apply(&mut self, f: &mut dyn FnMut(&mut dyn Module)) {
        self.visit_children_mut(&mut |_, child| child.apply(f));
        f(self.as_module_mut());
    }

    /// What `downcast_ref` looks at: this module as `Any`. A wrapper that
    /// stands for the module it holds (`Box`, `Arc`) answers with that one.
    fn module_any(&self) -> &dyn std::any::Any {
        self.as_any()
    }

    /// As [`Module::module_any`], mutably.
    fn module_any_mut(&mut self) -> &mut dyn std::any::Any {
        self.as_any_mut()
    }

    /// Total number of parameter elements.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(Tensor::numel).sum()
    }

    /// Freezes (false) or unfreezes every parameter.
    fn requires_grad_(&self, on: bool) {
        for p in self.parameters() {
            p.set_requires_grad(on);
        }
    }

    /// Sets every parameter's gradient to None (`zero_grad(set_to_none=True)`).
    fn zero_grad(&self) {
        for p in self.parameters() {
            p.set_grad(None);
        }
    }

    /// Parameters and buffers by name (shares data with the module).
    fn state_dict(&self) -> StateDict {
        let mut out = vec![];
        self.visit(&mut |n, t, _| out.push((n.to_string(), t.detach())));
        out
    }

    /// Copies matching entries of `dict` into the module. With `strict`, any
    /// missing, unexpected or mis-shaped key is an error listing all of them
    /// (and nothing is loaded); otherwise what matches is loaded and the
    /// report says what was skipped.
    ///
    /// ```
    /// use tapir_runtime::nn::{Linear, Module};
    /// let a = Linear::new(3, 2, true);
    /// let mut b = Linear::new(3, 2, true);
    /// let report = b.load_state_dict(&a.state_dict(), true).unwrap();
    /// assert!(report.is_clean());
    /// assert_eq!(a.weight.to_vec::<f32>(), b.weight.to_vec::<f32>());
    /// ```
    fn load_state_dict(&mut self, dict: &[(String, Tensor)], strict: bool) -> Result<LoadReport> {
        let mut report = LoadReport::default();
        let mut seen = BTreeSet::new();
        let find = |name: &str| dict.iter().find(|(n, _)| n == name).map(|(_, t)| t);
        self.visit(&mut |n, t, _| {
            seen.insert(n.to_string());
            match find(n) {
                None => report.missing.push(n.to_string()),
                Some(src) if src.shape() != t.shape() => report.mismatched.push(format!(
                    "{n}: checkpoint {:?} vs model {:?}",
                    src.shape(),
                    t.shape()
                )),
                Some(_) => {}
            }
        });
        report.unexpected = dict
            .iter()
            .filter(|(n, _)| !seen.contains(n))
            .map(|(n, _)| n.clone())
            .collect();
        if strict && !report.is_clean() {
            return Err(crate::Error::Format(format!("load_state_dict: {report}")));
        }
        crate::no_grad(|| {
            self.visit(&mut |n, t, _| {
                if let Some(src) = find(n).filter(|s| s.shape() == t.shape()) {
                    t.copy_(src);
                }
            })
        });
        Ok(report)
    }

    /// Converts every floating-point parameter and buffer to `dtype`.
    fn to_dtype(&mut self, dtype: DType) {
        self.visit_mut(&mut |_, t, _| {
            if t.dtype().is_float() && t.dtype() != dtype {
                let rg = t.requires_grad();
                *t = t.detach().to_dtype(dtype).requires_grad_(rg);
            }
        });
    }

    /// `module.half()`: floating parameters and buffers to f16.
    fn half(&mut self) {
        self.to_dtype(DType::F16)
    }

    /// `module.bfloat16()`: floating parameters and buffers to bf16.
    fn bfloat16(&mut self) {
        self.to_dtype(DType::BF16)
    }

    /// `module.float()`: floating parameters and buffers to f32.
    fn float(&mut self) {
        self.to_dtype(DType::F32)
    }

    /// Moves every parameter and buffer to `device`.
    fn to_device(&mut self, device: Device) -> Result<()> {
        let mut err = None;
        self.visit_mut(&mut |_, t, _| {
            if err.is_none() && t.device() != device {
                match t.detach().to(device) {
                    Ok(moved) => {
                        let rg = t.requires_grad();
                        *t = moved.requires_grad_(rg);
                    }
                    Err(e) => err = Some(e),
                }
            }
        });
        err.map_or(Ok(()), Err)
    }
}

/// A module with one input and one output (what `Sequential` chains).
pub trait Forward: Module {
    /// The layer applied to `x`.
    fn forward(&self, x: &Tensor) -> Tensor;
}

/// A shared module (what a `#[checkpoint]` field of a `model!` holds, so
/// that a recompute can own a handle to it). Changing its tensors (device
/// or dtype moves, loading) needs the only handle: a graph that still holds
/// one must be backpropagated or dropped first.
impl<M: Module> Module for std::sync::Arc<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        (**self).visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        arc_only_handle(self).visit_mut(f)
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        (**self).visit_children(f)
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        arc_only_handle(self).visit_children_mut(f)
    }
    fn repr(&self) -> String {
        (**self).repr()
    }
    fn set_training(&self, on: bool) {
        (**self).set_training(on)
    }
    fn is_training(&self) -> bool {
        (**self).is_training()
    }
    fn module_any(&self) -> &dyn std::any::Any {
        (**self).module_any()
    }
    fn module_any_mut(&mut self) -> &mut dyn std::any::Any {
        arc_only_handle(self).module_any_mut()
    }
}

/// The module behind the only handle to it (see the `Arc` impl's note).
fn arc_only_handle<M>(m: &mut std::sync::Arc<M>) -> &mut M {
    std::sync::Arc::get_mut(m)
        .expect("a checkpointed module cannot be changed while a graph that will recompute it is alive: run backward (or drop the output) first")
}

impl<M: Forward> Forward for std::sync::Arc<M> {
    fn forward(&self, x: &Tensor) -> Tensor {
        (**self).forward(x)
    }
}

/// A boxed module (a model chosen at run time, `Box<dyn Forward>`) is a
/// module, so it can be compiled, trained and saved as the model itself.
impl<M: Module + ?Sized> Module for Box<M> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        (**self).visit(f)
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        (**self).visit_mut(f)
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        (**self).visit_children(f)
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        (**self).visit_children_mut(f)
    }
    fn repr(&self) -> String {
        (**self).repr()
    }
    fn set_training(&self, on: bool) {
        (**self).set_training(on)
    }
    fn is_training(&self) -> bool {
        (**self).is_training()
    }
    fn module_any(&self) -> &dyn std::any::Any {
        (**self).module_any()
    }
    fn module_any_mut(&mut self) -> &mut dyn std::any::Any {
        (**self).module_any_mut()
    }
}

impl<M: Forward + ?Sized> Forward for Box<M> {
    fn forward(&self, x: &Tensor) -> Tensor {
        (**self).forward(x)
    }
}

/// The tensors of `kind` with their names, each tensor once (by identity:
/// the first name a tied tensor is met under).
fn named_once<M: Module + ?Sized>(m: &M, kind: TensorKind) -> Vec<(String, Tensor)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    m.visit(&mut |n, t, k| {
        if k == kind && seen.insert(std::sync::Arc::as_ptr(&t.0)) {
            out.push((n.to_string(), t.clone()));
        }
    });
    out
}

/// Visits a child's tensors under `name.` — the building block of a
/// composite module's `visit`.
pub fn visit_child(name: &str, child: &dyn Module, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
    child.visit(&mut |n, t, k| f(&format!("{name}.{n}"), t, k));
}

/// As [`visit_child`] for `visit_mut`.
pub fn visit_child_mut(
    name: &str,
    child: &mut dyn Module,
    f: &mut dyn FnMut(&str, &mut Tensor, TensorKind),
) {
    child.visit_mut(&mut |n, t, k| f(&format!("{name}.{n}"), t, k));
}

/// A float as Python's `repr` writes it (`1e-05`, `0.001`, `1.0`), for
/// reprs that match PyTorch's.
pub(crate) fn py_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let exp = v.abs().log10().floor() as i32;
    if (-4..16).contains(&exp) {
        let s = format!("{v}");
        return if s.contains('.') { s } else { s + ".0" };
    }
    let s = format!("{v:e}");
    let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let sign = if e < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", e.abs())
}

/// PyTorch's repr of a composite: `Name(\n  (child): ...\n)`.
pub fn repr_children(name: &str, children: &[(&str, &dyn Module)]) -> String {
    if children.is_empty() {
        return format!("{name}()");
    }
    let mut s = format!("{name}(\n");
    for (n, c) in children {
        let inner = c.repr().replace('\n', "\n  ");
        s.push_str(&format!("  ({n}): {inner}\n"));
    }
    s.push(')');
    s
}

/// PyTorch's repr of a composite from its own children
/// ([`Module::named_children`]): what a hand-written composite's `repr`
/// can return.
///
/// ```
/// use tapir_runtime::nn::{Linear, ReLU, Sequential, repr_of_children};
/// let net = Sequential::new().add(Linear::new(2, 3, true)).add(ReLU);
/// assert_eq!(repr_of_children("Net", &net), net.to_string().replacen("Sequential", "Net", 1));
/// ```
pub fn repr_of_children(name: &str, module: &dyn Module) -> String {
    let kids = module.named_children();
    let refs: Vec<(&str, &dyn Module)> = kids.iter().map(|(n, m)| (n.as_str(), *m)).collect();
    repr_children(name, &refs)
}

/// A train/eval flag for modules to embed (starts in train mode, as PyTorch).
#[derive(Debug)]
pub struct TrainingFlag(AtomicBool);

impl Default for TrainingFlag {
    fn default() -> Self {
        TrainingFlag(AtomicBool::new(true))
    }
}

impl TrainingFlag {
    /// Whether the module is in training mode.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
    /// Sets training mode.
    pub fn set(&self, on: bool) {
        self.0.store(on, Ordering::Relaxed)
    }
}

/// Implements `visit_children` and `visit_children_mut` inside a `Module`
/// impl from one list of `"name" => field` pairs, so the two walks cannot
/// disagree.
macro_rules! named_children {
    ($($name:literal => $field:ident),* $(,)?) => {
        fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn $crate::nn::Module)) {
            $(f($name, &self.$field);)*
        }
        fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn $crate::nn::Module)) {
            $(f($name, &mut self.$field);)*
        }
    };
}
pub(crate) use named_children;

/// Implements [`Module`] for parameterless layers (nothing to visit) with
/// the repr each gives, and `Display` as that repr.
macro_rules! stateless_module {
    ($($name:ident => |$s:ident| $repr:expr;)*) => {$(
        impl $crate::nn::Module for $name {
            fn visit(&self, _: &mut dyn FnMut(&str, &Tensor, $crate::nn::TensorKind)) {}
            fn visit_mut(&mut self, _: &mut dyn FnMut(&str, &mut Tensor, $crate::nn::TensorKind)) {}
            fn repr(&self) -> String {
                let $s = self;
                $repr
            }
        }
        crate::display_as_repr!($name);
    )*};
}
pub(crate) use stateless_module;

/// A bool as Python prints it.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Implements `Display` as the module's repr.
#[macro_export]
macro_rules! display_as_repr {
    ($($t:ty),*) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&$crate::nn::Module::repr(self))
            }
        }
    )*};
}
