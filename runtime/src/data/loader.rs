//! `DataLoader`: batches of a dataset, in the sampler's order, optionally
//! loaded by worker threads that prefetch into a bounded window and deliver
//! in order. Each pass (`iter`) is the next epoch.

use super::dataset::Dataset;
use super::pin::PinMemory;
use super::sampler::{RandomSampler, Sampler, SequentialSampler};
use crate::Tensor;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Turns a list of items into a batch (PyTorch's `default_collate`):
/// tensors are stacked along a new first dim.
pub trait Collate: Sized + Send + 'static {
    /// What a batch of samples becomes.
    type Batch: PinMemory + Send + 'static;
    /// Stacks samples into one batch.
    fn collate(items: Vec<Self>) -> Self::Batch;
}

fn stack(items: &[Tensor]) -> Tensor {
    let refs: Vec<&Tensor> = items.iter().collect();
    Tensor::stack(&refs, 0)
}

impl Collate for Tensor {
    type Batch = Tensor;
    fn collate(items: Vec<Tensor>) -> Tensor {
        stack(&items)
    }
}

impl Collate for Vec<Tensor> {
    type Batch = Vec<Tensor>;
    fn collate(items: Vec<Vec<Tensor>>) -> Vec<Tensor> {
        let width = items.first().map_or(0, Vec::len);
        (0..width)
            .map(|k| stack(&items.iter().map(|it| it[k].clone()).collect::<Vec<_>>()))
            .collect()
    }
}

impl Collate for (Tensor, Tensor) {
    type Batch = (Tensor, Tensor);
    fn collate(items: Vec<(Tensor, Tensor)>) -> (Tensor, Tensor) {
        let (a, b): (Vec<Tensor>, Vec<Tensor>) = items.into_iter().unzip();
        (stack(&a), stack(&b))
    }
}

impl Collate for (Tensor, i64) {
    type Batch = (Tensor, Tensor);
    fn collate(items: Vec<(Tensor, i64)>) -> (Tensor, Tensor) {
        let n = items.len();
        let (a, b): (Vec<Tensor>, Vec<i64>) = items.into_iter().unzip();
        (stack(&a), Tensor::from_vec(b, &[n]))
    }
}

/// The loader's settings, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct DataLoaderOptions {
    /// Samples per batch.
    pub batch_size: usize,
    /// A fresh random order each epoch (seeded by `seed`).
    pub shuffle: bool,
    /// Drop the last batch when it is short.
    pub drop_last: bool,
    /// Worker threads; 0 loads in the calling thread.
    pub num_workers: usize,
    /// Batches each worker may have loaded ahead.
    pub prefetch_factor: usize,
    /// Batches in page-locked memory ([`PinMemory`]), pinned by the
    /// worker that loads them (or the calling thread with no workers), so
    /// `batch.to(device)` copies them to the GPU by DMA without a staging
    /// copy. Without a usable GPU it warns once and loads unpinned
    /// batches, as PyTorch does.
    pub pin_memory: bool,
    /// The shuffle seed; `None` draws one from the default generator, so
    /// `manual_seed` makes runs reproducible.
    pub seed: Option<u64>,
}

impl Default for DataLoaderOptions {
    fn default() -> Self {
        DataLoaderOptions {
            batch_size: 1,
            shuffle: false,
            drop_last: false,
            num_workers: 0,
            prefetch_factor: 2,
            pin_memory: false,
            seed: None,
        }
    }
}

type CollateFn<I, B> = dyn Fn(Vec<I>) -> B + Send + Sync;
/// Loads one batch from its indices in the calling thread.
type InlineLoad<B> = Box<dyn Fn(&[usize]) -> B>;

/// Batches of a dataset (`torch.utils.data.DataLoader`).
///
/// ```
/// use tapir_runtime::data::{DataLoader, DataLoaderOptions, TensorDataset};
/// use tapir_runtime::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::arange(10).reshape(&[5, 2]), Tensor::arange(5)]);
/// let opts = DataLoaderOptions { batch_size: 2, num_workers: 2, ..Default::default() };
/// let mut loader = DataLoader::new(ds, opts);
/// let sizes: Vec<usize> = loader.iter().map(|b| b[1].size(0)).collect();
/// assert_eq!(sizes, vec![2, 2, 1]);
/// ```
pub struct DataLoader<D: Dataset, B> {
    dataset: Arc<D>,
    sampler: Box<dyn Sampler>,
    collate: Arc<CollateFn<D::Item, B>>,
    opts: DataLoaderOptions,
    epoch: u64,
    skip: usize,
}

impl<D: Dataset + 'static> DataLoader<D, <D::Item as Collate>::Batch>
where
    D::Item: Collate,
{
    /// A loader with the default collate (stacking).
    pub fn new(dataset: D, opts: DataLoaderOptions) -> Self {
        DataLoader::with_collate(dataset, opts, <D::Item as Collate>::collate)
    }
}

impl<D: Dataset + 'static, B: PinMemory + Send + 'static> DataLoader<D, B> {
    /// A loader with a custom collate function.
    pub fn with_collate(
        dataset: D,
        opts: DataLoaderOptions,
        collate: impl Fn(Vec<D::Item>) -> B + Send + Sync + 'static,
    ) -> Self {
        assert!(
            opts.batch_size > 0,
            "DataLoader: batch_size must be positive"
        );
        let n = dataset.len();
        let sampler: Box<dyn Sampler> = if opts.shuffle {
            let seed = opts.seed.unwrap_or_else(|| {
                crate::Tensor::randint(0, i64::MAX, &[1]).to_vec::<i64>()[0] as u64
            });
            Box::new(RandomSampler::new(n, seed))
        } else {
            Box::new(SequentialSampler { n })
        };
        let collate: Arc<CollateFn<D::Item, B>> = if opts.pin_memory && pinning_available() {
            Arc::new(move |items| {
                collate(items)
                    .pinned()
                    .unwrap_or_else(|e| panic!("DataLoader: pin_memory: {e}"))
            })
        } else {
            Arc::new(collate)
        };
        DataLoader {
            dataset: Arc::new(dataset),
            sampler,
            collate,
            opts,
            epoch: 0,
            skip: 0,
        }
    }
}

impl<D: Dataset + 'static, B: Send + 'static> DataLoader<D, B> {
    /// Replaces the sampler (weighted, distributed, ...).
    pub fn with_sampler(mut self, sampler: impl Sampler + 'static) -> Self {
        self.sampler = Box::new(sampler);
        self
    }

    /// The dataset being loaded.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// Batches per epoch.
    pub fn len(&self) -> usize {
        let n = self.sampler.len();
        if self.opts.drop_last {
            n / self.opts.batch_size
        } else {
            n.div_ceil(self.opts.batch_size)
        }
    }

    /// Whether an epoch yields no batch (more samples are needed than one batch with `drop_last`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epoch the next `iter` will run.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sets the epoch the next `iter` runs (for resuming).
    pub fn set_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
    }

    /// Makes the next `iter` start after its first `n` batches (for resuming
    /// mid-epoch; the skipped batches are not loaded).
    pub fn skip_batches(&mut self, n: usize) {
        self.skip = n;
    }

    /// One epoch of batches; the next call gives the next epoch.
    pub fn iter(&mut self) -> EpochIter<B> {
        let epoch = self.epoch;
        self.epoch += 1;
        self.dataset.set_epoch(epoch);
        let indices = self.sampler.indices(epoch);
        let bs = self.opts.batch_size;
        let mut batches: Vec<Vec<usize>> = indices.chunks(bs).map(<[usize]>::to_vec).collect();
        if self.opts.drop_last && batches.last().is_some_and(|b| b.len() < bs) {
            batches.pop();
        }
        let skip = std::mem::take(&mut self.skip).min(batches.len());
        batches.drain(..skip);
        let batches = Arc::new(batches);
        if self.opts.num_workers == 0 {
            let (ds, collate) = (self.dataset.clone(), self.collate.clone());
            let load: InlineLoad<B> =
                Box::new(move |idx| collate(idx.iter().map(|&i| ds.get(i)).collect()));
            return EpochIter {
                batches,
                next: 0,
                inline: Some(load),
                workers: None,
            };
        }
        EpochIter {
            workers: Some(Workers::spawn(
                self.dataset.clone(),
                self.collate.clone(),
                batches.clone(),
                self.opts.num_workers,
                self.opts.num_workers * self.opts.prefetch_factor.max(1),
            )),
            batches,
            next: 0,
            inline: None,
        }
    }
}

/// Whether batches can be pinned; warns once when they cannot.
fn pinning_available() -> bool {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let available = crate::cuda::is_available();
    if !available {
        WARNED.call_once(|| {
            eprintln!(
                "warning: DataLoader: pin_memory is set but no CUDA device can be used, \
                 so batches are not pinned"
            )
        });
    }
    available
}

impl<D: Dataset + 'static, B: Send + 'static> IntoIterator for &mut DataLoader<D, B> {
    type Item = B;
    type IntoIter = EpochIter<B>;
    fn into_iter(self) -> EpochIter<B> {
        self.iter()
    }
}

type Delivery<B> = (usize, Result<B, String>);

struct Shared {
    claim: AtomicUsize,
    delivered: Mutex<usize>,
    window: Condvar,
    stop: AtomicBool,
}

struct Workers<B> {
    shared: Arc<Shared>,
    rx: Option<Receiver<Delivery<B>>>,
    handles: Vec<JoinHandle<()>>,
    pending: BTreeMap<usize, Result<B, String>>,
}

impl<B: Send + 'static> Workers<B> {
    fn spawn<D: Dataset + 'static>(
        dataset: Arc<D>,
        collate: Arc<CollateFn<D::Item, B>>,
        batches: Arc<Vec<Vec<usize>>>,
        n_workers: usize,
        capacity: usize,
    ) -> Workers<B> {
        let shared = Arc::new(Shared {
            claim: AtomicUsize::new(0),
            delivered: Mutex::new(0),
            window: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let (tx, rx) = channel();
        let handles = (0..n_workers)
            .map(|w| {
                let (shared, tx) = (shared.clone(), tx.clone());
                let (dataset, collate, batches) =
                    (dataset.clone(), collate.clone(), batches.clone());
                std::thread::Builder::new()
                    .name(format!("tapir-loader-{w}"))
                    .spawn(move || {
                        while !shared.stop.load(Ordering::Acquire) {
                            let b = shared.claim.fetch_add(1, Ordering::AcqRel);
                            if b >= batches.len() {
                                break;
                            }
                            // Stay within `capacity` batches of the consumer.
                            let mut d = shared.delivered.lock().unwrap_or_else(|e| e.into_inner());
                            while b >= *d + capacity && !shared.stop.load(Ordering::Acquire) {
                                d = shared.window.wait(d).unwrap_or_else(|e| e.into_inner());
                            }
                            drop(d);
                            if shared.stop.load(Ordering::Acquire) {
                                break;
                            }
                            let result = catch_unwind(AssertUnwindSafe(|| {
                                collate(batches[b].iter().map(|&i| dataset.get(i)).collect())
                            }))
                            .map_err(|p| crate::error::panic_message(&*p));
                            if tx.send((b, result)).is_err() {
                                break;
                            }
                        }
                    })
                    .expect("DataLoader: cannot spawn a worker thread")
            })
            .collect();
        Workers {
            shared,
            rx: Some(rx),
            handles,
            pending: BTreeMap::new(),
        }
    }

    fn take(&mut self, k: usize) -> Result<B, String> {
        loop {
            if let Some(r) = self.pending.remove(&k) {
                let mut d = self
                    .shared
                    .delivered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                *d = k + 1;
                self.shared.window.notify_all();
                return r;
            }
            let rx = self.rx.as_ref().ok_or("the loader was stopped")?;
            match rx.recv() {
                Ok((b, r)) => {
                    self.pending.insert(b, r);
                }
                Err(_) => return Err(format!("the workers exited before batch {k}")),
            }
        }
    }
}

impl<B> Workers<B> {
    /// Tells every worker to stop, wakes those waiting for room, and joins them.
    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        {
            let _d = self
                .shared
                .delivered
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            self.shared.window.notify_all();
        }
        self.rx = None; // a worker blocked in `send` now fails and exits
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

impl<B> Drop for Workers<B> {
    fn drop(&mut self) {
        self.stop();
    }
}
/// One epoch of batches. Dropping it mid-epoch stops and joins the workers.
pub struct EpochIter<B> {
    batches: Arc<Vec<Vec<usize>>>,
    next: usize,
    inline: Option<InlineLoad<B>>,
    workers: Option<Workers<B>>,
}

impl<B: Send + 'static> Iterator for EpochIter<B> {
    type Item = B;
    fn next(&mut self) -> Option<B> {
        let k = self.next;
        if k >= self.batches.len() {
            return None;
        }
        self.next += 1;
        let _p = crate::profiler::scope("enumerate(DataLoader)#next", "dataloader");
        if let Some(load) = &self.inline {
            return Some(load(&self.batches[k]));
        }
        let workers = self.workers.as_mut()?;
        match workers.take(k) {
            Ok(b) => Some(b),
            Err(msg) => {
                workers.stop();
                panic!("DataLoader: a worker panicked while loading batch {k}: {msg}");
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batches.len() - self.next;
        (left, Some(left))
    }
}

impl<B: Send + 'static> ExactSizeIterator for EpochIter<B> {}
