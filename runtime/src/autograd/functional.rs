//! `torch.autograd.functional`: vector-Jacobian and Jacobian-vector
//! products, whole Jacobians and Hessians of a function of tensors, built
//! on [`super::grad_with`].
//!
//! Each function takes `f` (tensors in, one tensor out) and the point to
//! differentiate at. The `_with` forms take [`FunctionalOptions`]
//! (PyTorch's `create_graph` and `strict`, off by default). Without
//! `create_graph` the inputs are used as fresh leaves, so nothing the
//! caller holds is touched, and the results carry no graph. Where the
//! output does not depend on an input, its part is zeros, or, with
//! `strict`, a panic naming the input.

use super::{GradOptions, grad_with};
use crate::Tensor;

/// PyTorch's keyword arguments of `torch.autograd.functional` (defaults:
/// both off).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::{FunctionalOptions, jacobian_with}};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]).requires_grad_(true);
/// let opts = FunctionalOptions { create_graph: true, ..Default::default() };
/// let j = jacobian_with(|t| t[0].powf(3.0), &[x.clone()], opts).remove(0); // diag(3x²)
/// j.sum().backward(); // d/dx Σ 3x² = 6x
/// assert_eq!(x.grad().unwrap().to_vec::<f64>(), vec![6.0, 12.0]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionalOptions {
    /// The results keep their graph back to the inputs that require grad
    /// (and the value of `f` keeps its own), so they can be differentiated
    /// again: a Jacobian penalty, a meta-gradient.
    pub create_graph: bool,
    /// Panic, naming the input, where PyTorch's `strict=True` raises: the
    /// output (or, for the Hessian products, the gradient) does not depend
    /// on an input, the output does not require grad, or, with
    /// `create_graph`, a derivative is a constant.
    pub strict: bool,
}

/// The call being made: its name and options, for the checks' messages.
#[derive(Clone, Copy)]
struct Call {
    op: &'static str,
    opts: FunctionalOptions,
}

impl Call {
    fn new(op: &'static str, opts: FunctionalOptions) -> Call {
        Call { op, opts }
    }

    fn refuse(&self, why: String) -> ! {
        panic!("autograd::functional::{} (strict): {why}", self.op)
    }

    /// Under `strict`, `t` (named `what`) must depend on the inputs.
    fn require_graph(&self, t: &Tensor, what: impl FnOnce() -> String) {
        if self.opts.strict && !t.requires_grad() {
            self.refuse(format!("{} does not depend on the inputs", what()))
        }
    }
}

/// `f` at the inputs: fresh leaves copied from them, or, under
/// `create_graph`, views of those that require grad (so the results reach
/// them). Returns the output and the tensors `f` saw.
fn at_inputs(
    f: &impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    call: Call,
) -> (Tensor, Vec<Tensor>) {
    crate::enable_grad(|| {
        let seen: Vec<Tensor> = (inputs.iter())
            .map(|x| match call.opts.create_graph && x.requires_grad() {
                true => x.view(&x.shape().iter().map(|&d| d as isize).collect::<Vec<_>>()),
                false => x.detach().requires_grad_(true),
            })
            .collect();
        let out = f(&seen);
        call.require_graph(&out, || "the output".into());
        (out, seen)
    })
}

/// `vᵀ ∂out/∂x` for every input: zeros where `out` does not depend on it,
/// or a panic under `strict` (`of` names `out` in it). With
/// `create_graph` the products carry their graph.
fn pull_back(
    out: &Tensor,
    seen: &[Tensor],
    v: Tensor,
    create_graph: bool,
    (call, of): (Call, &str),
) -> Vec<Tensor> {
    let grads: Vec<Option<Tensor>> = match out.requires_grad() {
        false => vec![None; seen.len()],
        true => {
            let refs: Vec<&Tensor> = seen.iter().collect();
            let opts = GradOptions {
                grad_outputs: vec![v],
                retain_graph: Some(true),
                create_graph,
                allow_unused: true,
                ..Default::default()
            };
            grad_with(&[out], &refs, opts)
        }
    };
    (grads.into_iter().zip(seen).enumerate())
        .map(|(i, (g, x))| match g {
            Some(g) => g,
            None if call.opts.strict => call.refuse(format!("{of} does not depend on input {i}")),
            None => Tensor::zeros_like(x),
        })
        .collect()
}

/// Under `strict` with `create_graph`: each result must still depend on
/// the inputs (PyTorch refuses a constant derivative there).
fn check_not_constant(call: Call, results: &[Tensor], what: &str) {
    if call.opts.create_graph {
        for (i, r) in results.iter().enumerate() {
            call.require_graph(r, || {
                format!("{what} with respect to input {i} (create_graph)")
            });
        }
    }
}

/// The output as the caller gets it: without its graph unless
/// `create_graph`.
fn returned(out: Tensor, call: Call) -> Tensor {
    if call.opts.create_graph {
        out
    } else {
        out.detach()
    }
}

/// Panics unless `v` holds one tensor of each input's shape, naming `op`.
fn check_one_per_input(op: &str, what: &str, inputs: &[Tensor], v: &[Tensor]) {
    let shapes = |ts: &[Tensor]| ts.iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>();
    assert!(
        v.len() == inputs.len() && v.iter().zip(inputs).all(|(v, x)| v.shape() == x.shape()),
        "autograd::functional::{op}: pass one {what} per input, each of its input's shape (inputs {:?}, {what}s \
         {:?})",
        shapes(inputs),
        shapes(v)
    );
}

/// `Σᵢ <aᵢ, bᵢ>` over the `aᵢ` that carry a graph; `None` when none does.
fn inner_with_graph(a: &[Tensor], b: &[Tensor]) -> Option<Tensor> {
    (a.iter().zip(b))
        .filter(|(a, _)| a.requires_grad())
        .map(|(a, b)| (a * &b.to_dtype(a.dtype())).sum())
        .reduce(|x, y| &x + &y)
}

/// The scalar `f` at the inputs, the tensors it saw, and its gradients
/// with their graph (`hessian` and the Hessian products differentiate
/// them again).
fn scalar_and_gradients(
    f: &impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    call: Call,
) -> (Tensor, Vec<Tensor>, Vec<Tensor>) {
    let (out, seen) = at_inputs(f, inputs, call);
    assert!(
        out.numel() == 1,
        "autograd::functional::{}: f must return a single value, got shape {:?}",
        call.op,
        out.shape()
    );
    let grads = crate::enable_grad(|| {
        pull_back(
            &out,
            &seen,
            Tensor::ones_like(&out),
            true,
            (call, "the output"),
        )
    });
    if call.opts.strict {
        // PyTorch: the Jacobian of a function linear in an input is constant.
        for (i, g) in grads.iter().enumerate() {
            call.require_graph(g, || {
                format!("the gradient with respect to input {i} (f is linear in it)")
            });
        }
    }
    (out, seen, grads)
}

/// `f(inputs)` and the vector-Jacobian product `vᵀ J` for each input
/// (`torch.autograd.functional.vjp`); `v` has the output's shape.
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::vjp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (y, g) = vjp(|t| &t[0] * &t[0], &[x], &Tensor::from_vec(vec![1.0f64, 10.0], &[2]));
/// assert_eq!((y.to_vec::<f64>(), g[0].to_vec::<f64>()), (vec![1.0, 4.0], vec![2.0, 40.0]));
/// ```
pub fn vjp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &Tensor,
) -> (Tensor, Vec<Tensor>) {
    vjp_with(f, inputs, v, FunctionalOptions::default())
}

/// [`vjp`] with PyTorch's `create_graph` and `strict`.
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::{FunctionalOptions, vjp_with}};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let strict = FunctionalOptions { strict: true, ..Default::default() };
/// let ignores_x = std::panic::catch_unwind(|| vjp_with(|t| t[1].exp(), &[x.clone(), x.clone()], &x, strict));
/// assert!(ignores_x.is_err()); // "... the output does not depend on input 0"
/// ```
pub fn vjp_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &Tensor,
    opts: FunctionalOptions,
) -> (Tensor, Vec<Tensor>) {
    let call = Call::new("vjp", opts);
    let (out, seen) = at_inputs(&f, inputs, call);
    assert!(
        v.shape() == out.shape(),
        "autograd::functional::vjp: v has shape {:?} but the output has shape {:?}",
        v.shape(),
        out.shape()
    );
    let v = v.to_dtype(out.dtype());
    let products = pull_back(&out, &seen, v, opts.create_graph, (call, "the output"));
    check_not_constant(call, &products, "the vector-Jacobian product");
    (returned(out, call), products)
}

/// `f(inputs)` and the Jacobian-vector product `J v` (`v`: one tangent per
/// input, each of its input's shape), by PyTorch's double-backward trick:
/// the vector-Jacobian product is linear in its vector `u`, so
/// differentiating `uᵀ J` with respect to `u` along `v` gives `J v`
/// (`torch.autograd.functional.jvp`).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::jvp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (_, t) = jvp(|t| t[0].sum() * &t[0], &[x], &[Tensor::from_vec(vec![1.0f64, 0.0], &[2])]);
/// assert_eq!(t.to_vec::<f64>(), vec![4.0, 2.0]); // J = s I + x 1ᵀ, s = 3
/// ```
pub fn jvp(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor], v: &[Tensor]) -> (Tensor, Tensor) {
    jvp_with(f, inputs, v, FunctionalOptions::default())
}

/// [`jvp`] with PyTorch's `create_graph` and `strict`.
pub fn jvp_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
    opts: FunctionalOptions,
) -> (Tensor, Tensor) {
    check_one_per_input("jvp", "tangent", inputs, v);
    let call = Call::new("jvp", opts);
    let (out, seen) = at_inputs(&f, inputs, call);
    if !out.requires_grad() {
        let zeros = Tensor::zeros_like(&out);
        return (out, zeros);
    }
    let u = Tensor::zeros_like(&out).requires_grad_(true);
    let pulled =
        crate::enable_grad(|| pull_back(&out, &seen, u.clone(), true, (call, "the output")));
    // <uᵀJ, v> summed over the inputs, differentiated with respect to u.
    let Some(dot) = inner_with_graph(&pulled, v) else {
        return (returned(out.clone(), call), Tensor::zeros_like(&out));
    };
    let opts_u = GradOptions {
        create_graph: opts.create_graph,
        materialize_grads: true,
        ..Default::default()
    };
    let jv = grad_with(&[&dot], &[&u], opts_u)
        .remove(0)
        .expect("materialized");
    check_not_constant(
        call,
        std::slice::from_ref(&jv),
        "the Jacobian-vector product",
    );
    (returned(out, call), jv)
}

/// The Jacobian of `f` at `inputs`, one tensor per input of shape
/// `out.shape ++ input.shape` (`torch.autograd.functional.jacobian`,
/// reverse mode: one backward per output element).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::jacobian};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let j = jacobian(|t| &t[0] * &t[0], &[x]);
/// assert_eq!((j[0].shape(), j[0].to_vec::<f64>()), (&[2, 2][..], vec![2.0, 0.0, 0.0, 4.0]));
/// ```
pub fn jacobian(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) -> Vec<Tensor> {
    jacobian_with(f, inputs, FunctionalOptions::default())
}

/// [`jacobian`] with PyTorch's `create_graph` and `strict` (see
/// [`FunctionalOptions`] for an example).
pub fn jacobian_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    opts: FunctionalOptions,
) -> Vec<Tensor> {
    let call = Call::new("jacobian", opts);
    let (out, seen) = at_inputs(&f, inputs, call);
    let j = rows_of(&out, &seen, (call, "the output"));
    check_not_constant(call, &j, "the Jacobian");
    j
}

/// The `k`-th unit tensor of `like`'s shape, dtype and device.
fn basis_vector(like: &Tensor, k: usize) -> Tensor {
    let basis = crate::ops::creation::filled_on(like.shape(), 0.0, like.dtype(), like.device());
    // Row-major, so the flat view shares its data.
    basis.reshape(&[-1]).narrow(0, k, 1).fill_(1.0);
    basis
}

/// For each input, the rows `∂out[k]/∂input` stacked, shaped
/// `out.shape ++ input.shape` (with their graph under `create_graph`).
fn rows_of(out: &Tensor, seen: &[Tensor], (call, of): (Call, &str)) -> Vec<Tensor> {
    let n = out.numel();
    let mut rows: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); seen.len()];
    for k in 0..n {
        let one_hot = basis_vector(out, k);
        let products = pull_back(out, seen, one_hot, call.opts.create_graph, (call, of));
        for (i, g) in products.into_iter().enumerate() {
            rows[i].push(g);
        }
    }
    (rows.into_iter().zip(seen))
        .map(|(r, x)| {
            let shape: Vec<isize> = (out.shape().iter().chain(x.shape()))
                .map(|&d| d as isize)
                .collect();
            if r.is_empty() {
                return Tensor::zeros(&[0]).to_dtype(x.dtype()).reshape(&shape);
            }
            Tensor::stack(&r.iter().collect::<Vec<_>>(), 0).reshape(&shape)
        })
        .collect()
}

/// The Hessian of the scalar `f` at `inputs`: `h[i][j]` of shape
/// `inputs[i].shape ++ inputs[j].shape` (`torch.autograd.functional.hessian`:
/// the Jacobian of the gradient, one second backward per input element).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::hessian};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// // f = (Σ x²)(Σ x): H = 2 (Σ x) I + 2 x 1ᵀ + 2 · 1 xᵀ
/// let h = hessian(|t| &(&t[0] * &t[0]).sum() * &t[0].sum(), &[x]);
/// assert_eq!(h[0][0].to_vec::<f64>(), vec![10.0, 6.0, 6.0, 14.0]);
/// ```
pub fn hessian(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor]) -> Vec<Vec<Tensor>> {
    hessian_with(f, inputs, FunctionalOptions::default())
}

/// [`hessian`] with PyTorch's `create_graph` and `strict`.
pub fn hessian_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    opts: FunctionalOptions,
) -> Vec<Vec<Tensor>> {
    let call = Call::new("hessian", opts);
    let (_, seen, grads) = scalar_and_gradients(&f, inputs, call);
    (grads.iter().enumerate())
        .map(|(i, g)| {
            let rows = rows_of(
                g,
                &seen,
                (call, &format!("the gradient with respect to input {i}")),
            );
            check_not_constant(call, &rows, "the Hessian");
            rows
        })
        .collect()
}

/// `f(inputs)` and the vector-Hessian product `vᵀ H` for the scalar `f`
/// (`torch.autograd.functional.vhp`; for a twice continuously
/// differentiable `f`, H is symmetric and this is `hvp` too).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::vhp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let (_, hv) = vhp(|t| t[0].powf(3.0).sum(), &[x], &[Tensor::ones(&[2]).to_dtype(tapir_runtime::DType::F64)]);
/// assert_eq!(hv[0].to_vec::<f64>(), vec![6.0, 12.0]); // 6x
/// ```
pub fn vhp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
) -> (Tensor, Vec<Tensor>) {
    vhp_with(f, inputs, v, FunctionalOptions::default())
}

/// [`vhp`] with PyTorch's `create_graph` and `strict`.
pub fn vhp_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
    opts: FunctionalOptions,
) -> (Tensor, Vec<Tensor>) {
    vector_hessian(f, inputs, v, Call::new("vhp", opts))
}

/// `vᵀ H` for [`vhp_with`] and [`hvp_with`] (`call` names the one called).
fn vector_hessian(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
    call: Call,
) -> (Tensor, Vec<Tensor>) {
    check_one_per_input(call.op, "vector", inputs, v);
    let opts = call.opts;
    let (out, seen, grads) = scalar_and_gradients(&f, inputs, call);
    let products = match inner_with_graph(&grads, v) {
        Some(dot) => {
            let of = (call, "the gradient's product with v");
            pull_back(&dot, &seen, Tensor::ones_like(&dot), opts.create_graph, of)
        }
        None => seen.iter().map(Tensor::zeros_like).collect(),
    };
    check_not_constant(call, &products, "the vector-Hessian product");
    (returned(out, call), products)
}

/// `f(inputs)` and the Hessian-vector product `H v` for the scalar `f`
/// (`torch.autograd.functional.hvp`): `vᵀ H` transposed, which for the
/// symmetric Hessian of a twice continuously differentiable `f` is the
/// same vector ([`vhp`]).
///
/// ```
/// use tapir_runtime::{Tensor, autograd::functional::hvp};
/// let x = Tensor::from_vec(vec![1.0f64, 2.0], &[2]);
/// let v = Tensor::from_vec(vec![1.0f64, 0.0], &[2]);
/// // f = x0² x1: H = [[2 x1, 2 x0], [2 x0, 0]], H v = [4, 2]
/// let (_, hv) = hvp(|t| &(&t[0].select(0, 0) * &t[0].select(0, 0)) * &t[0].select(0, 1), &[x], &[v]);
/// assert_eq!(hv[0].to_vec::<f64>(), vec![4.0, 2.0]);
/// ```
pub fn hvp(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
) -> (Tensor, Vec<Tensor>) {
    hvp_with(f, inputs, v, FunctionalOptions::default())
}

/// [`hvp`] with PyTorch's `create_graph` and `strict`.
pub fn hvp_with(
    f: impl Fn(&[Tensor]) -> Tensor,
    inputs: &[Tensor],
    v: &[Tensor],
    opts: FunctionalOptions,
) -> (Tensor, Vec<Tensor>) {
    vector_hessian(f, inputs, v, Call::new("hvp", opts))
}
