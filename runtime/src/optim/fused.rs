//! Running the optimizers' fused updates: each parameter's step is queued
//! in [`Updates`], and consecutive parameters with the same step (the same
//! group, step count and options) run together through
//! `Storage::optim_step_many`. On a GPU that is one launch per
//! `launch::MULTI` tensors (PyTorch's default multi-tensor `foreach`
//! optimizers on CUDA) instead of one per parameter; on the CPU each
//! parameter runs the same kernel as before, in the same order.

use crate::Tensor;
use crate::storage::{OptimItem, Storage};
use std::sync::{RwLockReadGuard, RwLockWriteGuard};
use tapir_kernels::optim::OptimStep;

/// A parameter, its gradient and its state tensors, in the step's order.
type Item = (Tensor, Tensor, Vec<Tensor>);

/// The updates of one optimizer step, queued in parameter order.
#[derive(Default)]
pub(crate) struct Updates {
    queued: Vec<(Item, OptimStep)>,
}

impl Updates {
    /// Queues `step` of parameter `p` with gradient `g` and `states`.
    pub(crate) fn push(&mut self, p: &Tensor, g: &Tensor, states: &[&Tensor], step: OptimStep) {
        let states = states.iter().map(|&t| t.clone()).collect();
        self.queued.push(((p.clone(), g.clone(), states), step));
    }

    /// Runs every queued update: runs of equal steps together.
    pub(crate) fn run(mut self) {
        let mut staged: Vec<(Tensor, Tensor)> = vec![];
        for ((p, _, states), _) in &mut self.queued {
            std::iter::once(p)
                .chain(states)
                .for_each(|t| stage(t, &mut staged));
        }
        let mut rest = &self.queued[..];
        while let Some(((_, step), _)) = rest.split_first() {
            let run = rest.iter().take_while(|(_, s)| s == step).count();
            let items: Vec<&Item> = rest[..run].iter().map(|(item, _)| item).collect();
            fused_many(&items, *step);
            rest = &rest[run..];
        }
        for (original, work) in staged {
            let w = work.read();
            original
                .write()
                .assign(original.layout(), &w, work.layout());
        }
    }
}

/// Whether `t` is what the fused kernels walk: a whole row-major buffer
/// from offset 0.
fn is_whole(t: &Tensor) -> bool {
    t.is_contiguous() && t.layout().offset == 0 && t.read().len() == t.numel()
}

/// Puts a row-major copy in place of a tensor that is not whole (a
/// transposed or sliced parameter, which PyTorch's optimizers take as any
/// other), and keeps `(original, copy)` in `staged` so the updated copy is
/// written back; a tensor met again gets the same copy. A whole tensor is
/// updated where it lies.
fn stage(t: &mut Tensor, staged: &mut Vec<(Tensor, Tensor)>) {
    if is_whole(t) {
        return;
    }
    let same = |o: &Tensor| o.storage_id() == t.storage_id() && o.layout() == t.layout();
    let work = match staged.iter().find(|(o, _)| same(o)) {
        Some((_, w)) => w.clone(),
        None => {
            let w = t.contiguous_copy();
            staged.push((t.clone(), w.clone()));
            w
        }
    };
    *t = work;
}

fn check_whole(t: &Tensor) {
    assert!(
        is_whole(t),
        "optimizer: parameters and their state must be whole contiguous tensors (got shape {:?}, strides {:?})",
        t.shape(),
        t.strides()
    );
}

fn check_not_compiling() {
    assert!(
        !crate::compile::in_compiled_step(),
        "optimizer step inside a compile_step closure: a CUDA graph would freeze its learning \
         rate and step count; call the optimizer after step.run()"
    );
}

/// Runs one fused update (`step`) of a parameter with its gradient and its
/// state tensors, on whatever device they live (see `Storage::optim_step`).
pub(crate) fn fused(p: &Tensor, g: &Tensor, states: &[&Tensor], step: OptimStep) {
    check_not_compiling();
    std::iter::once(p)
        .chain(states.iter().copied())
        .for_each(check_whole);
    let g = crate::ops::dense0(&g.to_dtype(p.dtype()));
    let gs = g.read();
    let mut guards: Vec<RwLockWriteGuard<'_, Storage>> = std::iter::once(p)
        .chain(states.iter().copied())
        .map(|t| t.write())
        .collect();
    let (pg, rest) = guards.split_first_mut().expect("the parameter");
    let mut rest: Vec<&mut Storage> = rest.iter_mut().map(|s| &mut **s).collect();
    Storage::optim_step(pg, &gs, &mut rest, &step);
}

/// The same `step` of every item at once. Each tensor is locked for the
/// whole update, so a tensor that appears twice (a parameter listed in two
/// groups) takes the one-at-a-time path instead.
fn fused_many(items: &[&Item], step: OptimStep) {
    let written = items
        .iter()
        .flat_map(|(p, _, s)| std::iter::once(p).chain(s));
    let mut ids: Vec<usize> = written.map(Tensor::storage_id).collect();
    ids.sort_unstable();
    let repeated = ids.windows(2).any(|w| w[0] == w[1]);
    if items.len() == 1 || repeated {
        for (p, g, states) in items {
            fused(p, g, &states.iter().collect::<Vec<_>>(), step);
        }
        return;
    }
    check_not_compiling();
    for (p, _, states) in items {
        std::iter::once(p).chain(states).for_each(check_whole);
    }
    let grads: Vec<Tensor> = items
        .iter()
        .map(|(p, g, _)| crate::ops::dense0(&g.to_dtype(p.dtype())))
        .collect();
    let gs: Vec<RwLockReadGuard<'_, Storage>> = grads.iter().map(|g| g.read()).collect();
    let mut ps: Vec<RwLockWriteGuard<'_, Storage>> =
        items.iter().map(|(p, ..)| p.write()).collect();
    let mut sts: Vec<Vec<RwLockWriteGuard<'_, Storage>>> = items
        .iter()
        .map(|(_, _, s)| s.iter().map(|t| t.write()).collect())
        .collect();
    let mut batch: Vec<OptimItem<'_>> = ps
        .iter_mut()
        .zip(&gs)
        .zip(sts.iter_mut())
        .map(|((p, g), st)| (&mut **p, &**g, st.iter_mut().map(|s| &mut **s).collect()))
        .collect();
    Storage::optim_step_many(&mut batch, &step);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tapir_kernels::optim::SgdStep;

    /// Queued updates run in runs of equal steps, each parameter exactly
    /// once, as one at a time would: steps `a a b a` (the last `a` a run of
    /// its own), and a run that holds one parameter twice.
    #[test]
    fn queued_updates_equal_one_at_a_time() {
        let step = |lr| OptimStep::Sgd {
            h: SgdStep {
                lr,
                momentum: 0.9,
                ..Default::default()
            },
            first: true,
        };
        let steps = [step(0.1), step(0.1), step(0.2), step(0.1)];
        let make = || -> Vec<(Tensor, Tensor, Tensor)> {
            (0..4)
                .map(|k| {
                    let v: Vec<f32> = (0..5).map(|i| (i + k) as f32 * 0.5 - 1.0).collect();
                    let g: Vec<f32> = (0..5).map(|i| (i * k) as f32 * 0.25).collect();
                    let buf = Tensor::zeros(&[5]);
                    (Tensor::from_vec(v, &[5]), Tensor::from_vec(g, &[5]), buf)
                })
                .collect()
        };
        let (queued, alone) = (make(), make());
        let mut updates = Updates::default();
        for ((p, g, buf), s) in queued.iter().zip(steps) {
            updates.push(p, g, &[buf], s);
        }
        // The last parameter again, in the same run of steps: a run that
        // holds one tensor twice goes one at a time.
        updates.push(&queued[3].0, &queued[3].1, &[&queued[3].2], steps[3]);
        updates.run();
        for ((p, g, buf), s) in alone.iter().zip(steps) {
            fused(p, g, &[buf], s);
        }
        fused(&alone[3].0, &alone[3].1, &[&alone[3].2], steps[3]);
        for (k, (a, b)) in queued.iter().zip(&alone).enumerate() {
            assert_eq!(a.0.to_vec::<f32>(), b.0.to_vec::<f32>(), "parameter {k}");
            assert_eq!(a.2.to_vec::<f32>(), b.2.to_vec::<f32>(), "momentum {k}");
        }
    }
}
