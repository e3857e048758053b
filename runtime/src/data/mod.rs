//! Data loading (`torch.utils.data`): datasets, samplers, the DataLoader with
//! worker threads, image transforms, and readers for IDX, CSV and text.

mod dataset;
mod formats;
mod loader;
mod pin;
pub(crate) mod sampler;
mod stream;
mod transforms;

pub use dataset::{
    ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset, Transformed, random_split,
};
pub use formats::{CharTokenizer, parse_idx, read_csv, read_idx};
pub use loader::{Collate, DataLoader, DataLoaderOptions, EpochIter};
pub use pin::PinMemory;
pub use sampler::{
    DistributedSampler, RandomSampler, Sampler, SequentialSampler, WeightedRandomSampler,
};
pub use stream::{StreamIter, StreamLoader};
pub use transforms::{Compose, Normalize, RandomCrop, RandomHorizontalFlip, ToFloat, Transform};
