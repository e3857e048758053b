//! Samplers: which dataset indices an epoch visits, in which order. Each is a
//! pure function of (its seed, the epoch), so every epoch gets a fresh order
//! that a resumed run reproduces.

use crate::Generator;

/// The indices of one epoch.
pub trait Sampler: Send + Sync {
    /// The dataset indices of one epoch, in order.
    fn indices(&self, epoch: u64) -> Vec<usize>;
    /// How many indices an epoch yields.
    fn len(&self) -> usize;
    /// Whether an epoch has no index.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A uniform random permutation of `0..n` (Fisher–Yates).
pub(crate) fn permutation(n: usize, g: &Generator) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let u = crate::Tensor::rand_with(&[n.max(1)], g).to_vec::<f64>();
    for i in (1..n).rev() {
        let j = ((u[i] * (i + 1) as f64) as usize).min(i);
        p.swap(i, j);
    }
    p
}

fn epoch_generator(seed: u64, epoch: u64) -> Generator {
    Generator::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ epoch)
}

/// `0, 1, ..., n - 1` (`SequentialSampler`).
pub struct SequentialSampler {
    /// Dataset size.
    pub n: usize,
}

impl Sampler for SequentialSampler {
    fn indices(&self, _epoch: u64) -> Vec<usize> {
        (0..self.n).collect()
    }
    fn len(&self) -> usize {
        self.n
    }
}

/// A fresh permutation each epoch (`RandomSampler`); with `replacement`,
/// `num_samples` uniform draws.
///
/// ```
/// use tapir_runtime::data::{RandomSampler, Sampler};
/// let s = RandomSampler::new(5, 42);
/// let (a, b) = (s.indices(0), s.indices(1));
/// assert_ne!(a, b);                       // a new order each epoch
/// assert_eq!(a, RandomSampler::new(5, 42).indices(0)); // reproducible
/// let mut sorted = a.clone();
/// sorted.sort();
/// assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
/// ```
pub struct RandomSampler {
    /// Dataset size.
    pub n: usize,
    /// Seed; each epoch draws a fresh order from it.
    pub seed: u64,
    /// Draw with replacement.
    pub replacement: bool,
    /// Indices per epoch.
    pub num_samples: usize,
}

impl RandomSampler {
    /// A fresh permutation of `0..n` each epoch (without replacement).
    pub fn new(n: usize, seed: u64) -> RandomSampler {
        RandomSampler {
            n,
            seed,
            replacement: false,
            num_samples: n,
        }
    }
}

impl Sampler for RandomSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let g = epoch_generator(self.seed, epoch);
        if self.replacement {
            let u = crate::Tensor::rand_with(&[self.num_samples.max(1)], &g).to_vec::<f64>();
            return u[..self.num_samples]
                .iter()
                .map(|x| ((x * self.n as f64) as usize).min(self.n.saturating_sub(1)))
                .collect();
        }
        let mut p = permutation(self.n, &g);
        p.truncate(self.num_samples);
        p
    }
    fn len(&self) -> usize {
        self.num_samples
    }
}

/// Draws index `i` with probability `weights[i] / sum` (`WeightedRandomSampler`).
pub struct WeightedRandomSampler {
    /// Relative weight of each index.
    pub weights: Vec<f64>,
    /// Indices per epoch.
    pub num_samples: usize,
    /// Draw with replacement.
    pub replacement: bool,
    /// Seed; each epoch draws afresh from it.
    pub seed: u64,
}

impl WeightedRandomSampler {
    /// Draws `num_samples` indices per epoch with probability proportional to `weights`.
    pub fn new(weights: Vec<f64>, num_samples: usize, replacement: bool, seed: u64) -> Self {
        assert!(
            weights.iter().all(|w| w.is_finite() && *w >= 0.0) && weights.iter().any(|w| *w > 0.0),
            "WeightedRandomSampler: weights must be non-negative and not all zero"
        );
        let positive = weights.iter().filter(|w| **w > 0.0).count();
        assert!(
            replacement || num_samples <= positive,
            "WeightedRandomSampler: cannot draw {num_samples} samples without replacement from {positive} non-zero weights"
        );
        WeightedRandomSampler {
            weights,
            num_samples,
            replacement,
            seed,
        }
    }
}

impl Sampler for WeightedRandomSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let g = epoch_generator(self.seed, epoch);
        let mut w = self.weights.clone();
        let u = crate::Tensor::rand_with(&[self.num_samples.max(1)], &g).to_vec::<f64>();
        let mut out = Vec::with_capacity(self.num_samples);
        for &x in &u[..self.num_samples] {
            let total: f64 = w.iter().sum();
            let mut target = x * total;
            let mut pick = w.len() - 1;
            for (i, wi) in w.iter().enumerate() {
                if target < *wi {
                    pick = i;
                    break;
                }
                target -= wi;
            }
            // Rounding can land past the end: take the last positive weight.
            while w[pick] <= 0.0 && pick > 0 {
                pick -= 1;
            }
            out.push(pick);
            if !self.replacement {
                w[pick] = 0.0;
            }
        }
        out
    }
    fn len(&self) -> usize {
        self.num_samples
    }
}

/// One replica's share of the indices (`DistributedSampler`): the epoch's
/// order (shuffled with `seed` and the epoch, or sequential), padded by
/// repeating from the start — or cut, with `drop_last` — to a multiple of
/// `num_replicas`, then every `num_replicas`-th index from `rank`.
///
/// ```
/// use tapir_runtime::data::{DistributedSampler, Sampler};
/// let shards: Vec<Vec<usize>> = (0..3)
///     .map(|r| DistributedSampler::new(7, 3, r, false, 0, false).indices(0))
///     .collect();
/// assert_eq!(shards, vec![vec![0, 3, 6], vec![1, 4, 0], vec![2, 5, 1]]);
/// ```
pub struct DistributedSampler {
    /// Dataset size.
    pub n: usize,
    /// Number of processes sharing the data.
    pub num_replicas: usize,
    /// This process's rank (below `num_replicas`).
    pub rank: usize,
    /// Shuffle (the same order on every rank) each epoch.
    pub shuffle: bool,
    /// Seed of the shuffle.
    pub seed: u64,
    /// Drop the tail that does not divide evenly instead of padding it.
    pub drop_last: bool,
}

impl DistributedSampler {
    /// This rank's shard of `0..n` (PyTorch's `DistributedSampler`).
    pub fn new(
        n: usize,
        num_replicas: usize,
        rank: usize,
        shuffle: bool,
        seed: u64,
        drop_last: bool,
    ) -> Self {
        assert!(
            num_replicas > 0 && rank < num_replicas,
            "DistributedSampler: rank {rank} must be below num_replicas {num_replicas}"
        );
        DistributedSampler {
            n,
            num_replicas,
            rank,
            shuffle,
            seed,
            drop_last,
        }
    }

    fn total(&self) -> usize {
        if self.drop_last {
            self.n / self.num_replicas * self.num_replicas
        } else {
            self.n.div_ceil(self.num_replicas) * self.num_replicas
        }
    }
}

impl Sampler for DistributedSampler {
    fn indices(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = if self.shuffle {
            permutation(self.n, &epoch_generator(self.seed, epoch))
        } else {
            (0..self.n).collect()
        };
        let total = self.total();
        if order.is_empty() {
            return vec![];
        }
        let mut k = 0;
        while order.len() < total {
            order.push(order[k]);
            k += 1;
        }
        order.truncate(total);
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.num_replicas)
            .collect()
    }
    fn len(&self) -> usize {
        self.total() / self.num_replicas
    }
}
