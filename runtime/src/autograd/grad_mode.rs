//! Thread-local grad mode: `no_grad` and `enable_grad`, as closures and guards.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops on this thread record the graph.
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

fn set(enabled: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(enabled))
}

/// Disables recording until dropped (nestable; restores the previous mode).
///
/// ```
/// use tapir_runtime::{NoGradGuard, is_grad_enabled};
/// {
///     let _g = NoGradGuard::new();
///     assert!(!is_grad_enabled());
/// }
/// assert!(is_grad_enabled());
/// ```
pub struct NoGradGuard {
    prev: bool,
}

impl NoGradGuard {
    /// Stops recording until the guard drops.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        NoGradGuard { prev: set(false) }
    }
}

impl Drop for NoGradGuard {
    fn drop(&mut self) {
        set(self.prev);
    }
}

/// Enables recording until dropped, even inside `no_grad`.
pub struct EnableGradGuard {
    prev: bool,
}

impl EnableGradGuard {
    /// Records again until the guard drops.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        EnableGradGuard { prev: set(true) }
    }
}

impl Drop for EnableGradGuard {
    fn drop(&mut self) {
        set(self.prev);
    }
}

/// Runs `f` with recording disabled (PyTorch's `with torch.no_grad():`).
///
/// ```
/// use tapir_runtime::{no_grad, Tensor};
/// let w = Tensor::ones(&[2]).requires_grad_(true);
/// let y = no_grad(|| &w * 2.0);
/// assert!(!y.requires_grad());
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = NoGradGuard::new();
    f()
}

/// Runs `f` with recording enabled (PyTorch's `torch.enable_grad()`).
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _g = EnableGradGuard::new();
    f()
}

/// Sets grad mode to `enabled` until dropped (a backward runs its closures
/// with grad mode on only under `create_graph`).
pub(crate) struct GradModeGuard {
    prev: bool,
}

impl GradModeGuard {
    pub(crate) fn set(enabled: bool) -> Self {
        GradModeGuard { prev: set(enabled) }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        set(self.prev);
    }
}
