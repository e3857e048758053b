//! Datasets: indexable (`len`, `get`) and streaming, with PyTorch's wrappers.

use super::transforms::Transform;
use crate::{Generator, Tensor};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A map-style dataset (`torch.utils.data.Dataset`): `len` items, any of
/// which `get` returns. Shared by the loader's worker threads.
///
/// ```
/// use tapir_runtime::data::{Dataset, TensorDataset};
/// use tapir_runtime::Tensor;
/// let ds = TensorDataset::new(vec![Tensor::arange(6).reshape(&[3, 2]), Tensor::arange(3)]);
/// assert_eq!(ds.len(), 3);
/// assert_eq!(ds.get(1)[0].to_vec::<i64>(), vec![2, 3]);
/// ```
pub trait Dataset: Send + Sync {
    /// What `get` returns (a sample).
    type Item: Send + 'static;
    /// Number of samples.
    fn len(&self) -> usize;
    /// Sample `index` (below `len()`).
    fn get(&self, index: usize) -> Self::Item;
    /// Whether there are no samples.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Told the epoch before each pass (random transforms draw from it).
    fn set_epoch(&self, _epoch: u64) {}
}

impl<D: Dataset + ?Sized> Dataset for Arc<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        (**self).len()
    }
    fn get(&self, index: usize) -> D::Item {
        (**self).get(index)
    }
    fn set_epoch(&self, epoch: u64) {
        (**self).set_epoch(epoch)
    }
}

/// A streaming source (`IterableDataset`): each pass calls `iter` afresh.
pub trait IterableDataset: Send + Sync {
    /// What the stream yields.
    type Item: Send + 'static;
    /// A fresh pass over the stream.
    fn iter(&self) -> Box<dyn Iterator<Item = Self::Item> + Send + '_>;
}

/// Rows of equally long tensors (`TensorDataset`): item `i` is every
/// tensor's row `i`.
pub struct TensorDataset {
    tensors: Vec<Tensor>,
}

impl TensorDataset {
    /// Panics unless every tensor has the same first dim.
    pub fn new(tensors: Vec<Tensor>) -> TensorDataset {
        let n = tensors.first().map_or(0, |t| t.size(0));
        for t in &tensors {
            assert!(
                t.ndim() > 0 && t.size(0) == n,
                "TensorDataset: every tensor needs the same first dim; got shapes {:?}",
                tensors
                    .iter()
                    .map(|t| t.shape().to_vec())
                    .collect::<Vec<_>>()
            );
        }
        TensorDataset { tensors }
    }

    /// The tensors, each indexed along dim 0.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
}

impl Dataset for TensorDataset {
    type Item = Vec<Tensor>;
    fn len(&self) -> usize {
        self.tensors.first().map_or(0, |t| t.size(0))
    }
    fn get(&self, index: usize) -> Vec<Tensor> {
        self.tensors
            .iter()
            .map(|t| t.select(0, index as isize).contiguous())
            .collect()
    }
}

/// The items of `dataset` at `indices`, in that order (`Subset`).
pub struct Subset<D> {
    /// The dataset the subset draws from.
    pub dataset: Arc<D>,
    /// The dataset indices it holds, in order.
    pub indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// The samples of `dataset` at `indices`.
    pub fn new(dataset: Arc<D>, indices: Vec<usize>) -> Subset<D> {
        let n = dataset.len();
        if let Some(bad) = indices.iter().find(|&&i| i >= n) {
            panic!("Subset: index {bad} is out of range for a dataset of {n} items");
        }
        Subset { dataset, indices }
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.indices.len()
    }
    fn get(&self, index: usize) -> D::Item {
        self.dataset.get(self.indices[index])
    }
    fn set_epoch(&self, epoch: u64) {
        self.dataset.set_epoch(epoch)
    }
}

/// Splits `dataset` into non-overlapping random subsets of the given lengths
/// (`random_split` with a seeded generator).
///
/// ```
/// use std::sync::Arc;
/// use tapir_runtime::data::{random_split, Dataset, TensorDataset};
/// use tapir_runtime::Tensor;
/// let ds = Arc::new(TensorDataset::new(vec![Tensor::arange(10)]));
/// let parts = random_split(ds, &[7, 3], 0);
/// assert_eq!((parts[0].len(), parts[1].len()), (7, 3));
/// ```
pub fn random_split<D: Dataset>(dataset: Arc<D>, lengths: &[usize], seed: u64) -> Vec<Subset<D>> {
    let total: usize = lengths.iter().sum();
    assert!(
        total == dataset.len(),
        "random_split: the lengths {lengths:?} add up to {total}, but the dataset has {} items",
        dataset.len()
    );
    let perm = super::sampler::permutation(total, &Generator::new(seed));
    let mut start = 0;
    lengths
        .iter()
        .map(|&n| {
            let part = perm[start..start + n].to_vec();
            start += n;
            Subset::new(dataset.clone(), part)
        })
        .collect()
}

/// Several datasets one after another (`ConcatDataset`).
pub struct ConcatDataset<D> {
    parts: Vec<D>,
}

impl<D: Dataset> ConcatDataset<D> {
    /// The datasets one after another.
    pub fn new(parts: Vec<D>) -> ConcatDataset<D> {
        ConcatDataset { parts }
    }
}

impl<D: Dataset> Dataset for ConcatDataset<D> {
    type Item = D::Item;
    fn len(&self) -> usize {
        self.parts.iter().map(Dataset::len).sum()
    }
    fn get(&self, mut index: usize) -> D::Item {
        for p in &self.parts {
            if index < p.len() {
                return p.get(index);
            }
            index -= p.len();
        }
        panic!("ConcatDataset: index out of range ({} items)", self.len())
    }
    fn set_epoch(&self, epoch: u64) {
        self.parts.iter().for_each(|p| p.set_epoch(epoch))
    }
}

/// A dataset of `(image, label)` pairs with a transform applied to the image.
/// Random transforms draw from a generator seeded by (seed, epoch, index), so
/// the result does not depend on which worker loads the item, and a resumed
/// run sees the same augmentations.
pub struct Transformed<D> {
    dataset: D,
    transform: Box<dyn Transform>,
    seed: u64,
    epoch: AtomicU64,
}

impl<D> Transformed<D> {
    /// `dataset` with `transform` applied to each sample, its randomness drawn from `seed`.
    pub fn new(dataset: D, transform: impl Transform + 'static, seed: u64) -> Transformed<D> {
        Transformed {
            dataset,
            transform: Box::new(transform),
            seed,
            epoch: AtomicU64::new(0),
        }
    }
}

/// splitmix-style mix of the three numbers into one seed.
fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut x = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ c.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl<D: Dataset<Item = Vec<Tensor>>> Dataset for Transformed<D> {
    type Item = Vec<Tensor>;
    fn len(&self) -> usize {
        self.dataset.len()
    }
    fn get(&self, index: usize) -> Vec<Tensor> {
        let mut item = self.dataset.get(index);
        let g = Generator::new(mix(
            self.seed,
            self.epoch.load(Ordering::Relaxed),
            index as u64,
        ));
        if let Some(x) = item.first_mut() {
            *x = self.transform.apply(x, &g);
        }
        item
    }
    fn set_epoch(&self, epoch: u64) {
        self.epoch.store(epoch, Ordering::Relaxed);
        self.dataset.set_epoch(epoch);
    }
}
