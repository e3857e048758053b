//! Batches from a streaming source (`IterableDataset`): each pass reads the
//! stream afresh; with `prefetch > 0` a background thread reads ahead into a
//! bounded queue.

use super::dataset::IterableDataset;
use super::loader::Collate;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread::JoinHandle;

/// A loader over an [`IterableDataset`].
///
/// ```
/// use tapir_runtime::data::{IterableDataset, StreamLoader};
/// use tapir_runtime::Tensor;
/// struct Counter(usize);
/// impl IterableDataset for Counter {
///     type Item = Tensor;
///     fn iter(&self) -> Box<dyn Iterator<Item = Tensor> + Send + '_> {
///         Box::new((0..self.0).map(|i| Tensor::scalar(i as i64)))
///     }
/// }
/// let loader = StreamLoader::new(Counter(5), 2, false, 2);
/// let batches: Vec<Vec<i64>> = loader.iter().map(|b| b.to_vec()).collect();
/// assert_eq!(batches, vec![vec![0, 1], vec![2, 3], vec![4]]);
/// ```
pub struct StreamLoader<D: IterableDataset> {
    dataset: Arc<D>,
    batch_size: usize,
    drop_last: bool,
    prefetch: usize,
}

impl<D: IterableDataset + 'static> StreamLoader<D>
where
    D::Item: Collate,
{
    /// Batches of `batch_size` from `dataset`, `prefetch` batches read ahead by a thread.
    pub fn new(dataset: D, batch_size: usize, drop_last: bool, prefetch: usize) -> Self {
        assert!(batch_size > 0, "StreamLoader: batch_size must be positive");
        StreamLoader {
            dataset: Arc::new(dataset),
            batch_size,
            drop_last,
            prefetch,
        }
    }

    /// One pass over the stream.
    pub fn iter(&self) -> StreamIter<<D::Item as Collate>::Batch> {
        let (ds, bs, drop_last) = (self.dataset.clone(), self.batch_size, self.drop_last);
        let batches = move |emit: &mut dyn FnMut(<D::Item as Collate>::Batch) -> bool| {
            let mut buf = Vec::with_capacity(bs);
            for item in ds.iter() {
                buf.push(item);
                if buf.len() == bs && !emit(<D::Item as Collate>::collate(std::mem::take(&mut buf)))
                {
                    return;
                }
            }
            if !buf.is_empty() && !drop_last {
                emit(<D::Item as Collate>::collate(buf));
            }
        };
        if self.prefetch == 0 {
            let mut all = vec![];
            batches(&mut |b| {
                all.push(b);
                true
            });
            return StreamIter {
                rx: None,
                handle: None,
                ready: all.into_iter(),
            };
        }
        let (tx, rx) = sync_channel(self.prefetch);
        let handle = std::thread::Builder::new()
            .name("tapir-stream".into())
            .spawn(move || {
                let panic_tx = tx.clone();
                let result = catch_unwind(AssertUnwindSafe(|| {
                    batches(&mut |b| tx.send(Ok(b)).is_ok())
                }));
                if let Err(p) = result {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "(a non-string panic)".into());
                    let _ = panic_tx.send(Err(msg));
                }
            })
            .expect("StreamLoader: cannot spawn its thread");
        StreamIter {
            rx: Some(rx),
            handle: Some(handle),
            ready: Vec::new().into_iter(),
        }
    }
}

/// One pass of batches; dropping it stops the reading thread.
pub struct StreamIter<B> {
    rx: Option<Receiver<Result<B, String>>>,
    handle: Option<JoinHandle<()>>,
    ready: std::vec::IntoIter<B>,
}

impl<B> Iterator for StreamIter<B> {
    type Item = B;
    fn next(&mut self) -> Option<B> {
        let Some(rx) = &self.rx else {
            return self.ready.next();
        };
        match rx.recv() {
            Ok(Ok(b)) => Some(b),
            Ok(Err(msg)) => {
                self.rx = None;
                panic!("StreamLoader: the stream panicked: {msg}");
            }
            Err(_) => None,
        }
    }
}

impl<B> Drop for StreamIter<B> {
    fn drop(&mut self) {
        self.rx = None; // the reader's next send fails and it returns
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
