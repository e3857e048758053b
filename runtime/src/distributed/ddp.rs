//! `DistributedDataParallel`: the same model on every rank, rank 0's weights
//! broadcast at construction, and gradients averaged across ranks in
//! buckets. A bucket is all-reduced as soon as backward has finished every
//! gradient in it (a post-accumulate hook on each parameter), so the
//! communication of the last layers overlaps the backward of the first.

use super::{
    Buf, HostBuf, Pending, ReduceOp, all_gather_bytes, all_reduce_buf, broadcast_async, group,
};
use crate::nn::{Forward, Module, TensorKind};
use crate::{Error, Result, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// PyTorch's first bucket is small so that its all-reduce starts early.
const FIRST_BUCKET_MB: f64 = 1.0;

/// Options of [`DistributedDataParallel`] (PyTorch's constructor arguments
/// and defaults).
///
/// ```
/// use tapir_runtime::distributed::DdpOptions;
/// let o = DdpOptions { find_unused_parameters: true, ..Default::default() };
/// assert_eq!(o.bucket_cap_mb, 25.0);
/// ```
#[derive(Clone, Debug)]
pub struct DdpOptions {
    /// Bucket size in MiB (the first bucket is 1 MiB, as PyTorch's).
    pub bucket_cap_mb: f64,
    /// Find, when backward starts, the parameters its graph does not reach
    /// and count them as ready (zero gradient), so their buckets need not
    /// wait for the end of backward. Without it they still work: a bucket
    /// whose parameters got no gradient is reduced when backward ends.
    pub find_unused_parameters: bool,
    /// Copy rank 0's buffers (running statistics) to every rank before each
    /// `forward` through the wrapper.
    pub broadcast_buffers: bool,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_cap_mb: 25.0,
            find_unused_parameters: false,
            broadcast_buffers: true,
        }
    }
}

/// When one bucket's all-reduce ran, relative to backward.
#[derive(Clone, Debug)]
pub struct BucketTiming {
    /// Parameters in the bucket.
    pub params: usize,
    /// Elements in the bucket.
    pub numel: usize,
    /// When its last gradient was ready and it was queued.
    pub queued_at: Instant,
    /// When the engine began its all-reduce.
    pub started_at: Instant,
    /// When its averaged gradients were written back.
    pub finished_at: Instant,
}

/// The last synchronised backward: when it ended and when each bucket ran
/// (in launch order).
#[derive(Clone, Debug)]
pub struct SyncTimeline {
    /// When backward had run every node (the reducer's end-of-backward callback).
    pub backward_end: Instant,
    /// One entry per bucket.
    pub buckets: Vec<BucketTiming>,
}

/// The per-backward state of the reducer.
#[derive(Default)]
struct Step {
    active: bool,
    ready: Vec<bool>,
    /// Per bucket: parameters not yet ready.
    pending: Vec<usize>,
    next_launch: usize,
    launched: Vec<(Pending<Buf>, Instant)>,
    /// Per bucket: the host buffer of the last step, reused (MPI engine).
    staging: Vec<Option<HostBuf>>,
}

/// Averages gradients across ranks, bucket by bucket.
struct Reducer {
    params: Vec<(String, Tensor)>,
    buckets: Vec<Vec<usize>>,
    bucket_of: Vec<usize>,
    world: usize,
    find_unused: bool,
    sync: AtomicBool,
    step: Mutex<Step>,
    timeline: Mutex<Option<SyncTimeline>>,
}

impl Reducer {
    /// A parameter's gradient is final for this backward.
    fn mark_ready(self: &Arc<Self>, i: usize) {
        if !self.sync.load(Ordering::Relaxed) {
            return; // no_sync: gradients accumulate locally
        }
        let mut step = self.step.lock().unwrap_or_else(|e| e.into_inner());
        if !step.active {
            self.begin(&mut step);
        }
        if step.ready[i] {
            assert!(
                self.bucket_of[i] >= step.next_launch,
                "DistributedDataParallel: parameter `{}` received more gradient after its bucket was all-reduced \
                 (a parameter used inside a checkpointed region is seen as unused by find_unused_parameters, and one \
                 used both inside and outside such a region finishes twice); turn find_unused_parameters off or \
                 checkpoint whole modules",
                self.params[i].0
            );
            return;
        }
        self.set_ready(&mut step, i);
        self.launch_ready(&mut step, false);
    }

    /// First gradient of a backward: reset, queue the end-of-backward
    /// callback, and count unreached parameters as ready.
    fn begin(self: &Arc<Self>, step: &mut Step) {
        let mut staging = std::mem::take(&mut step.staging);
        staging.resize_with(self.buckets.len(), || None);
        *step = Step {
            active: true,
            ready: vec![false; self.params.len()],
            pending: self.buckets.iter().map(Vec::len).collect(),
            next_launch: 0,
            launched: vec![],
            staging,
        };
        let me: Weak<Reducer> = Arc::downgrade(self);
        crate::autograd::queue_callback(move || {
            if let Some(r) = me.upgrade() {
                r.finish();
            }
        });
        if self.find_unused {
            for (i, (_, p)) in self.params.iter().enumerate() {
                if crate::autograd::reached_by_current_backward(p) == Some(false) {
                    self.set_ready(step, i);
                }
            }
        }
    }

    fn set_ready(&self, step: &mut Step, i: usize) {
        step.ready[i] = true;
        step.pending[self.bucket_of[i]] -= 1;
    }

    /// Launches buckets in order (every rank must issue the same collectives
    /// in the same order): all ready ones from the next, or all with `all`.
    fn launch_ready(&self, step: &mut Step, all: bool) {
        while step.next_launch < self.buckets.len() && (all || step.pending[step.next_launch] == 0)
        {
            let b = step.next_launch;
            let flat = match super::uses_nccl() {
                true => self.device_bucket(b),
                false => Buf::Host(self.host_bucket(b, step.staging[b].take())),
            };
            let pending = all_reduce_buf("DistributedDataParallel", flat, ReduceOp::Sum)
                .unwrap_or_else(|e| panic!("{e}"));
            step.launched.push((pending, Instant::now()));
            step.next_launch += 1;
        }
    }

    /// Bucket `b`'s gradients copied into `reuse` (the buffer of the last
    /// step, or a new one): no allocation after the first step.
    fn host_bucket(&self, b: usize, reuse: Option<HostBuf>) -> HostBuf {
        let params = &self.buckets[b];
        let numel: usize = params.iter().map(|&i| self.params[i].1.numel()).sum();
        let dtype = self.params[params[0]].1.dtype();
        let mut flat = reuse
            .filter(|h| h.len() == numel && h.dtype() == dtype)
            .unwrap_or_else(|| HostBuf::zeros(dtype, numel, "DistributedDataParallel"));
        let mut at = 0;
        for &i in params {
            let p = &self.params[i].1;
            flat.fill(at, p.numel(), p.grad().as_ref());
            at += p.numel();
        }
        flat
    }

    /// Bucket `b`'s gradients in one buffer on the NCCL engine's GPU.
    fn device_bucket(&self, b: usize) -> Buf {
        let mut flat: Option<Buf> = None;
        for &i in &self.buckets[b] {
            let p = &self.params[i].1;
            let part = match p.grad() {
                Some(g) => Buf::of(&g, "DistributedDataParallel"),
                None => Buf::zeros(p, "DistributedDataParallel"),
            };
            match &mut flat {
                None => flat = Some(part),
                Some(f) => f.append(part),
            }
        }
        flat.expect("buckets are never empty")
    }

    /// End of backward: launch what is left, wait for every bucket, and
    /// write the averaged gradients back.
    fn finish(&self) {
        let mut step = self.step.lock().unwrap_or_else(|e| e.into_inner());
        self.launch_ready(&mut step, true);
        let backward_end = Instant::now();
        let mut buckets = vec![];
        let scale = 1.0 / self.world as f64;
        for (b, (pending, queued_at)) in std::mem::take(&mut step.launched).into_iter().enumerate()
        {
            let started = pending.started.clone();
            let flat = pending
                .wait()
                .unwrap_or_else(|e| panic!("DistributedDataParallel: {e}"));
            let numel = self
                .write_back(b, flat, scale, &mut step)
                .unwrap_or_else(|e| panic!("DistributedDataParallel: {e}"));
            buckets.push(BucketTiming {
                params: self.buckets[b].len(),
                numel,
                queued_at,
                started_at: started.get().copied().unwrap_or(queued_at),
                finished_at: Instant::now(),
            });
        }
        step.active = false;
        *self.timeline.lock().unwrap_or_else(|e| e.into_inner()) = Some(SyncTimeline {
            backward_end,
            buckets,
        });
    }

    /// Sets every gradient of bucket `b` to its summed value · `scale`: in
    /// place where the gradient is a dense CPU tensor (PyTorch's reducer
    /// copies back into `.grad` too), else as a new tensor. A host buffer is
    /// kept for the next step. Returns the bucket's element count.
    fn write_back(&self, b: usize, flat: Buf, scale: f64, step: &mut Step) -> Result<usize> {
        let mut at = 0;
        match flat {
            Buf::Host(h) => {
                for &i in &self.buckets[b] {
                    let p = &self.params[i].1;
                    let range = at..at + p.numel();
                    at += p.numel();
                    if p.grad()
                        .is_some_and(|g| h.write_to(range.clone(), &g, scale))
                    {
                        continue;
                    }
                    let g = Tensor::zeros_on(p.shape(), h.dtype(), crate::Device::Cpu);
                    h.write_to(range, &g, scale);
                    p.set_grad(Some(g.to(p.device())?));
                }
                step.staging[b] = Some(h);
            }
            mut device => {
                device.scale(scale);
                for &i in &self.buckets[b] {
                    let p = &self.params[i].1;
                    p.set_grad(Some(device.tensor(at..at + p.numel(), p.shape(), p)?));
                    at += p.numel();
                }
            }
        }
        Ok(at)
    }
}

/// Groups parameters (in reverse registration order, roughly the order
/// backward finishes them) into buckets of at most `cap_mb`, the first one
/// 1 MiB; a bucket holds one dtype.
fn assign_buckets(params: &[(String, Tensor)], cap_mb: f64) -> Vec<Vec<usize>> {
    let mut buckets: Vec<Vec<usize>> = vec![];
    let mut bytes = 0.0;
    for i in (0..params.len()).rev() {
        let p = &params[i].1;
        let cap = if buckets.len() <= 1 {
            FIRST_BUCKET_MB.min(cap_mb)
        } else {
            cap_mb
        } * 1024.0
            * 1024.0;
        let same_dtype = buckets
            .last()
            .is_some_and(|b| params[b[0]].1.dtype() == p.dtype());
        if buckets.is_empty() || bytes >= cap || !same_dtype {
            buckets.push(vec![]);
            bytes = 0.0;
        }
        buckets.last_mut().expect("pushed above").push(i);
        bytes += (p.numel() * p.dtype().size_in_bytes()) as f64;
    }
    buckets
}

/// The model's parameters and buffers, one line each: what every rank must
/// agree on.
fn signature(module: &dyn Module) -> Vec<String> {
    let mut lines = vec![];
    module.visit(&mut |n, t, k| {
        let kind = if k == TensorKind::Parameter {
            "parameter"
        } else {
            "buffer"
        };
        lines.push(format!(
            "{kind} `{n}` of shape {:?} and dtype {:?}",
            t.shape(),
            t.dtype()
        ));
    });
    lines
}

/// The first difference between rank `r`'s model and rank 0's, in words.
fn first_difference(r: usize, mine: &[String], root: &[String]) -> Option<String> {
    if mine == root {
        return None;
    }
    let at = mine
        .iter()
        .zip(root)
        .position(|(a, b)| a != b)
        .unwrap_or(mine.len().min(root.len()));
    let describe = |lines: &[String]| {
        lines
            .get(at)
            .cloned()
            .unwrap_or_else(|| "nothing more".into())
    };
    Some(format!(
        "DistributedDataParallel: rank {r}'s model differs from rank 0's at tensor {at}: rank {r} has {} where rank 0 \
         has {} ({} vs {} parameters and buffers); every rank must build the same model",
        describe(mine),
        describe(root),
        mine.len(),
        root.len()
    ))
}

/// Data-parallel training (PyTorch's `DistributedDataParallel`): wrap the
/// model on every rank, run forward and backward on this rank's slice of
/// the batch, and after `backward` every parameter's `.grad` holds the
/// average over ranks — the gradient of the whole batch.
///
/// ```
/// use tapir_runtime::distributed::{self, Backend, DdpOptions, DistributedDataParallel};
/// use tapir_runtime::nn::{Forward, Linear, Module};
/// use tapir_runtime::Tensor;
/// if let Ok(group) = distributed::init_process_group(Backend::Mpi) {
///     let ddp = DistributedDataParallel::new(Linear::new(4, 2, true), DdpOptions::default()).unwrap();
///     ddp.forward(&Tensor::ones(&[8, 4])).sum().backward();
///     assert_eq!(ddp.module().weight.grad().unwrap().to_vec::<f32>(), vec![8.0; 8]);
///     group.destroy();
/// }
/// ```
pub struct DistributedDataParallel<M: Module> {
    module: M,
    reducer: Arc<Reducer>,
    broadcast_buffers: bool,
}

impl<M: Module> DistributedDataParallel<M> {
    /// Wraps `module`: checks that every rank built the same parameters and
    /// buffers (an error on every rank naming the first difference), copies
    /// rank 0's values to all ranks, and hooks every trainable parameter.
    pub fn new(module: M, options: DdpOptions) -> Result<Self> {
        let world = group("DistributedDataParallel")?.world;
        let mine = signature(&module);
        let all = all_gather_bytes("DistributedDataParallel", mine.join("\n").into_bytes())?;
        let lines = |b: &Vec<u8>| -> Vec<String> {
            String::from_utf8_lossy(b)
                .lines()
                .map(String::from)
                .collect()
        };
        let root = lines(&all[0]);
        if let Some(msg) = all
            .iter()
            .enumerate()
            .find_map(|(r, b)| first_difference(r, &lines(b), &root))
        {
            return Err(Error::Distributed(msg));
        }
        let mut tensors = vec![];
        module.visit(&mut |_, t, _| tensors.push(t.clone()));
        let works = tensors
            .iter()
            .map(|t| broadcast_async(t, 0))
            .collect::<Result<Vec<_>>>()?;
        works.into_iter().try_for_each(|w| w.wait())?;

        let params: Vec<(String, Tensor)> = module
            .named_parameters()
            .into_iter()
            .filter(|(_, p)| p.requires_grad())
            .collect();
        let buckets = assign_buckets(&params, options.bucket_cap_mb);
        let mut bucket_of = vec![0; params.len()];
        for (b, members) in buckets.iter().enumerate() {
            members.iter().for_each(|&i| bucket_of[i] = b);
        }
        let reducer = Arc::new(Reducer {
            params,
            buckets,
            bucket_of,
            world,
            find_unused: options.find_unused_parameters,
            sync: AtomicBool::new(true),
            step: Mutex::new(Step::default()),
            timeline: Mutex::new(None),
        });
        for (i, (_, p)) in reducer.params.iter().enumerate() {
            let me = Arc::downgrade(&reducer);
            p.register_post_accumulate_grad_hook(move |_| {
                if let Some(r) = me.upgrade() {
                    r.mark_ready(i);
                }
            });
        }
        Ok(DistributedDataParallel {
            module,
            reducer,
            broadcast_buffers: options.broadcast_buffers,
        })
    }

    /// The wrapped model (save `ddp.module().state_dict()` for checkpoints
    /// that load without DDP).
    pub fn module(&self) -> &M {
        &self.module
    }

    /// The wrapped model, mutably (loading a checkpoint into it).
    pub fn module_mut(&mut self) -> &mut M {
        &mut self.module
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.module
    }

    /// Skips the all-reduce for the backwards run while the guard lives
    /// (PyTorch's `no_sync()`): gradients accumulate on each rank, and the
    /// first backward after it averages the accumulated sum.
    pub fn no_sync(&self) -> NoSyncGuard<'_> {
        self.reducer.sync.store(false, Ordering::Relaxed);
        NoSyncGuard {
            reducer: &self.reducer,
        }
    }

    /// Copies rank 0's buffers to every rank (what `forward` does when
    /// `broadcast_buffers` is on; call it before a model's own forward).
    pub fn sync_buffers(&self) -> Result<()> {
        let buffers = self.module.named_buffers();
        let works = buffers
            .iter()
            .map(|(_, t)| broadcast_async(t, 0))
            .collect::<Result<Vec<_>>>()?;
        works.into_iter().try_for_each(|w| w.wait())
    }

    /// The parameter names in each bucket, in launch order.
    pub fn buckets(&self) -> Vec<Vec<String>> {
        let r = &self.reducer;
        r.buckets
            .iter()
            .map(|b| b.iter().map(|&i| r.params[i].0.clone()).collect())
            .collect()
    }

    /// When the last synchronised backward ended and when each bucket's
    /// all-reduce ran: the overlap of communication with backward.
    pub fn last_sync_timeline(&self) -> Option<SyncTimeline> {
        self.reducer
            .timeline
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Returned by [`DistributedDataParallel::no_sync`]; synchronisation
/// resumes when it is dropped.
pub struct NoSyncGuard<'a> {
    reducer: &'a Reducer,
}

impl Drop for NoSyncGuard<'_> {
    fn drop(&mut self) {
        self.reducer.sync.store(true, Ordering::Relaxed);
    }
}

impl<M: Module> Module for DistributedDataParallel<M> {
    /// The model's tensors under `module.`, as PyTorch's DDP names them.
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        crate::nn::visit_child("module", &self.module, f)
    }
    fn visit_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        panic!(
            "DistributedDataParallel: its parameters cannot be replaced (moved or converted) after wrapping; move or \
             convert the model before DistributedDataParallel::new"
        )
    }
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        f("module", &self.module);
    }
    fn visit_children_mut(&mut self, _f: &mut dyn FnMut(&str, &mut dyn Module)) {
        panic!(
            "DistributedDataParallel: its modules cannot be changed after wrapping; change the model before \
             DistributedDataParallel::new"
        )
    }
    fn repr(&self) -> String {
        format!(
            "DistributedDataParallel(\n  (module): {}\n)",
            self.module.repr().replace('\n', "\n  ")
        )
    }
    fn set_training(&self, on: bool) {
        self.module.set_training(on)
    }
    fn is_training(&self) -> bool {
        self.module.is_training()
    }
}

impl<M: Forward> Forward for DistributedDataParallel<M> {
    /// Broadcasts rank 0's buffers (when `broadcast_buffers` is on and the
    /// model has any), then runs the model.
    fn forward(&self, x: &Tensor) -> Tensor {
        if self.broadcast_buffers && self.module.is_training() {
            self.sync_buffers().unwrap_or_else(|e| panic!("{e}"));
        }
        self.module.forward(x)
    }
}
