//! `torch.func.functional_call`: a module run with other tensors in place
//! of its parameters and buffers. MAML's inner loop needs it: the fast
//! weights are functions of the module's own (a step with `create_graph`),
//! and the query loss must flow back through them.

use super::Module;
use crate::Tensor;
use crate::tensor::Inner;
use std::collections::{HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;

/// Runs `f` on `model` with the tensors of `params`, keyed by the names of
/// `named_parameters` / `named_buffers`, in place of the module's own, and
/// puts the module's own back afterwards, also when `f` panics
/// (`torch.func.functional_call` with PyTorch's defaults: a name not
/// given keeps the module's tensor, and tensors tied under several names
/// are replaced together). Gradients of what `f` computes flow to the
/// given tensors, not to the module's.
///
/// ```
/// use std::collections::HashMap;
/// use tapir_runtime::{Tensor, nn::{self, Forward, Linear, Module}};
/// let mut lin = Linear::new(2, 1, false);
/// let w = Tensor::from_vec(vec![3.0f32, 4.0], &[1, 2]).requires_grad_(true);
/// let params = HashMap::from([("weight".to_string(), w.clone())]);
/// let x = Tensor::ones(&[1, 2]);
/// let y = nn::functional_call(&mut lin, &params, |m| m.forward(&x));
/// assert_eq!(y.to_vec::<f32>(), vec![7.0]);
/// y.sum().backward();
/// assert!(w.grad().is_some() && lin.named_parameters()[0].1.grad().is_none());
/// ```
pub fn functional_call<M: Module + ?Sized, R>(
    model: &mut M,
    params: &HashMap<String, Tensor>,
    f: impl FnOnce(&M) -> R,
) -> R {
    // The module's tensor each given name stands for: ties follow it.
    let mut replacing: HashMap<*const Inner, Tensor> = HashMap::new();
    let mut found: HashSet<&str> = HashSet::new();
    model.visit(&mut |name, t, _| {
        if let Some((key, new)) = params.get_key_value(name) {
            assert!(
                new.shape() == t.shape(),
                "functional_call: {name} has shape {:?} in the module but the tensor passed for it has shape {:?}",
                t.shape(),
                new.shape()
            );
            replacing.insert(Arc::as_ptr(&t.0), new.clone());
            found.insert(key.as_str());
        }
    });
    let mut unknown: Vec<&str> = (params.keys())
        .map(String::as_str)
        .filter(|k| !found.contains(k))
        .collect();
    unknown.sort_unstable();
    assert!(
        unknown.is_empty(),
        "functional_call: the module has no parameter or buffer named {unknown:?}"
    );
    // Swap in, remembering each slot's own tensor by its place in the walk.
    let mut own: HashMap<usize, Tensor> = HashMap::new();
    let mut slot = 0;
    model.visit_mut(&mut |_, t, _| {
        if let Some(new) = replacing.get(&Arc::as_ptr(&t.0)) {
            own.insert(slot, std::mem::replace(t, new.clone()));
        }
        slot += 1;
    });
    let out = catch_unwind(AssertUnwindSafe(|| f(&*model)));
    let mut slot = 0;
    model.visit_mut(&mut |_, t, _| {
        if let Some(original) = own.remove(&slot) {
            *t = original;
        }
        slot += 1;
    });
    out.unwrap_or_else(|p| resume_unwind(p))
}
