//! Variable-length sequences (`torch.nn.utils.rnn`): `pad_sequence`, the
//! `PackedSequence` that `pack_padded_sequence` / `pack_sequence` build and
//! `pad_packed_sequence` undoes, and what the recurrent layers need to run
//! over one (`RNN::forward_packed` and its siblings).
//!
//! Packing and unpacking are narrows, cats and an `index_select`, so
//! gradients flow through them. The layers run a packed batch as a padded
//! one whose finished sequences stop updating their state (a mask per
//! step): each sequence's outputs and final state are exactly those of
//! running it alone, as PyTorch's packed kernels give.

use crate::Tensor;

/// A batch of sequences of different lengths, packed time-major: `data`
/// holds step 0 of every sequence, then step 1 of those that have one, and
/// so on (`torch.nn.utils.rnn.PackedSequence`). Sequences are ordered
/// longest first inside; `sorted_indices` / `unsorted_indices` map to and
/// from the caller's order.
///
/// ```
/// use tapir_runtime::{nn::{pack_padded_sequence, pad_packed_sequence}, Tensor};
/// let padded = Tensor::arange_f(0.0, 6.0, 1.0).reshape(&[3, 2]); // [T=3, B=2]
/// let packed = pack_padded_sequence(&padded, &[1, 3], false, false);
/// assert_eq!(packed.batch_sizes, [2, 1, 1]);
/// assert_eq!(packed.data.to_vec::<f32>(), [1.0, 0.0, 3.0, 5.0]);
/// let (back, lengths) = pad_packed_sequence(&packed, false, -1.0, None);
/// assert_eq!(back.to_vec::<f32>(), [0.0, 1.0, -1.0, 3.0, -1.0, 5.0]);
/// assert_eq!(lengths.to_vec::<i64>(), [1, 3]);
/// ```
#[derive(Clone, Debug)]
pub struct PackedSequence {
    /// `[sum of lengths, *]`: the steps, time-major.
    pub data: Tensor,
    /// How many sequences have each step (non-increasing).
    pub batch_sizes: Vec<usize>,
    /// Caller's index of the i-th longest sequence (None: already sorted).
    pub sorted_indices: Option<Vec<usize>>,
    /// Inverse of `sorted_indices`.
    pub unsorted_indices: Option<Vec<usize>>,
}

impl PackedSequence {
    /// Number of sequences.
    pub fn batch(&self) -> usize {
        self.batch_sizes.first().copied().unwrap_or(0)
    }

    /// Each sequence's length, in the packed (longest-first) order.
    fn sorted_lengths(&self) -> Vec<usize> {
        (0..self.batch())
            .map(|b| self.batch_sizes.iter().filter(|&&n| n > b).count())
            .collect()
    }

    /// `[T, B, *]` in the packed order, zeros past each sequence's end.
    pub(super) fn padded_sorted(&self, padding_value: f64) -> Tensor {
        let b = self.batch();
        let mut at = 0;
        let steps: Vec<Tensor> = self
            .batch_sizes
            .iter()
            .map(|&n| {
                let rows = self.data.narrow(0, at, n);
                at += n;
                if n == b {
                    return rows;
                }
                let mut shape = rows.shape().to_vec();
                shape[0] = b - n;
                let fill = Tensor::full_on(&shape, padding_value, rows.dtype(), rows.device());
                Tensor::cat(&[&rows, &fill], 0)
            })
            .collect();
        Tensor::stack(&steps.iter().collect::<Vec<_>>(), 0)
    }

    /// The packing of `[T, B, *]` (packed order) with this one's batch sizes.
    pub(super) fn repack(&self, padded: &Tensor) -> PackedSequence {
        PackedSequence {
            data: packed_steps(padded, &self.batch_sizes),
            ..self.clone()
        }
    }

    /// Per step, which rows of the packed order are still running: `[B, 1]` bools.
    pub(super) fn step_masks(&self) -> Vec<Tensor> {
        let b = self.batch();
        self.batch_sizes
            .iter()
            .map(|&n| {
                let m: Vec<bool> = (0..b).map(|i| i < n).collect();
                Tensor::from_vec(m, &[b, 1])
                    .to(self.data.device())
                    .unwrap_or_else(|e| panic!("PackedSequence: {e}"))
            })
            .collect()
    }

    /// `state` (`[*, B, H]`, the caller's order) in the packed order.
    pub(super) fn sort_state(&self, state: &Tensor) -> Tensor {
        permute_batch(state, 1, self.sorted_indices.as_deref())
    }

    /// `state` (`[*, B, H]`, the packed order) back in the caller's order.
    pub(super) fn unsort_state(&self, state: &Tensor) -> Tensor {
        permute_batch(state, 1, self.unsorted_indices.as_deref())
    }
}

/// The first `batch_sizes[t]` rows of each step `t` of `padded` (`[T, B, *]`),
/// concatenated: a packing's data.
fn packed_steps(padded: &Tensor, batch_sizes: &[usize]) -> Tensor {
    let steps: Vec<Tensor> = batch_sizes
        .iter()
        .enumerate()
        .map(|(t, &n)| padded.select(0, t as isize).narrow(0, 0, n))
        .collect();
    Tensor::cat(&steps.iter().collect::<Vec<_>>(), 0)
}

fn permute_batch(t: &Tensor, dim: isize, order: Option<&[usize]>) -> Tensor {
    match order {
        None => t.clone(),
        Some(order) => {
            let idx: Vec<i64> = order.iter().map(|&i| i as i64).collect();
            let idx = Tensor::from_vec(idx, &[order.len()])
                .to(t.device())
                .unwrap_or_else(|e| panic!("PackedSequence: {e}"));
            t.index_select(dim, &idx)
        }
    }
}

/// `pad_sequence(sequences, batch_first, padding_value)`: `[T_max, B, *]`
/// (`[B, T_max, *]` batch-first) from sequences `[T_i, *]` of equal trailing dims.
///
/// ```
/// use tapir_runtime::{nn::pad_sequence, Tensor};
/// let out = pad_sequence(&[Tensor::ones(&[2, 3]), Tensor::ones(&[4, 3])], true, 0.0);
/// assert_eq!(out.shape(), &[2, 4, 3]);
/// assert_eq!(out.sum().item::<f32>(), 18.0);
/// ```
#[track_caller]
pub fn pad_sequence(sequences: &[Tensor], batch_first: bool, padding_value: f64) -> Tensor {
    assert!(
        !sequences.is_empty(),
        "pad_sequence: expects at least one sequence"
    );
    let trailing = &sequences[0].shape()[1.min(sequences[0].ndim())..];
    let longest = sequences.iter().map(|s| s.size(0)).max().unwrap_or(0);
    let padded: Vec<Tensor> = sequences
        .iter()
        .map(|s| {
            assert!(
                s.ndim() >= 1 && &s.shape()[1..] == trailing,
                "pad_sequence: every sequence must be [T, {trailing:?}..], got {:?} beside {:?}",
                s.shape(),
                sequences[0].shape()
            );
            if s.size(0) == longest {
                return s.clone();
            }
            let mut shape = s.shape().to_vec();
            shape[0] = longest - s.size(0);
            let fill = Tensor::full_on(&shape, padding_value, s.dtype(), s.device());
            Tensor::cat(&[s, &fill], 0)
        })
        .collect();
    Tensor::stack(
        &padded.iter().collect::<Vec<_>>(),
        if batch_first { 0 } else { 1 },
    )
}

/// `pack_padded_sequence(input, lengths, batch_first, enforce_sorted)`:
/// packs `[T, B, *]` (`[B, T, *]` batch-first) whose sequence `b` is
/// `lengths[b]` steps long. With `enforce_sorted` the lengths must be
/// non-increasing; otherwise the batch is sorted and the order recorded.
#[track_caller]
pub fn pack_padded_sequence(
    input: &Tensor,
    lengths: &[usize],
    batch_first: bool,
    enforce_sorted: bool,
) -> PackedSequence {
    let batch = input.shape().get(usize::from(!batch_first)).copied();
    assert!(
        input.ndim() >= 2 && batch == Some(lengths.len()),
        "pack_padded_sequence: input {:?} ({}) has no batch of {} lengths",
        input.shape(),
        if batch_first {
            "[B, T, *]"
        } else {
            "[T, B, *]"
        },
        lengths.len()
    );
    let x = if batch_first {
        input.transpose(0, 1)
    } else {
        input.clone()
    };
    let steps = x.size(0);
    for &l in lengths {
        assert!(
            l > 0 && l <= steps,
            "pack_padded_sequence: every length must be in 1..={steps} (the padded length), got {lengths:?}"
        );
    }
    let sorted = lengths.windows(2).all(|w| w[0] >= w[1]);
    assert!(
        sorted || !enforce_sorted,
        "pack_padded_sequence: lengths {lengths:?} must be non-increasing when enforce_sorted is true (pass false to sort them)"
    );
    let (x, sorted_indices, unsorted_indices) = if enforce_sorted {
        (x, None, None)
    } else {
        let mut order: Vec<usize> = (0..lengths.len()).collect();
        order.sort_by(|&a, &b| lengths[b].cmp(&lengths[a]));
        let mut inverse = vec![0; order.len()];
        for (i, &o) in order.iter().enumerate() {
            inverse[o] = i;
        }
        (
            permute_batch(&x, 1, Some(&order)),
            Some(order),
            Some(inverse),
        )
    };
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let batch_sizes: Vec<usize> = (0..longest)
        .map(|t| lengths.iter().filter(|&&l| l > t).count())
        .collect();
    PackedSequence {
        data: packed_steps(&x, &batch_sizes),
        batch_sizes,
        sorted_indices,
        unsorted_indices,
    }
}

/// `pack_sequence(sequences, enforce_sorted)`: [`pad_sequence`] then
/// [`pack_padded_sequence`].
///
/// ```
/// use tapir_runtime::{nn::pack_sequence, Tensor};
/// let p = pack_sequence(&[Tensor::ones(&[1, 2]), Tensor::ones(&[3, 2])], false);
/// assert_eq!((p.batch_sizes.clone(), p.data.shape().to_vec()), (vec![2, 1, 1], vec![4, 2]));
/// ```
#[track_caller]
pub fn pack_sequence(sequences: &[Tensor], enforce_sorted: bool) -> PackedSequence {
    let lengths: Vec<usize> = sequences.iter().map(|s| s.size(0)).collect();
    pack_padded_sequence(
        &pad_sequence(sequences, false, 0.0),
        &lengths,
        false,
        enforce_sorted,
    )
}

/// `pad_packed_sequence(sequence, batch_first, padding_value, total_length)`:
/// the padded `[T, B, *]` (`[B, T, *]` batch-first; T is `total_length`
/// if given, at least the longest) in the caller's order, and the int64
/// lengths.
#[track_caller]
pub fn pad_packed_sequence(
    sequence: &PackedSequence,
    batch_first: bool,
    padding_value: f64,
    total_length: Option<usize>,
) -> (Tensor, Tensor) {
    let longest = sequence.batch_sizes.len();
    let mut padded = sequence.padded_sorted(padding_value);
    if let Some(total) = total_length {
        assert!(
            total >= longest,
            "pad_packed_sequence: total_length {total} is shorter than the longest sequence ({longest})"
        );
        if total > longest {
            let mut shape = padded.shape().to_vec();
            shape[0] = total - longest;
            let fill = Tensor::full_on(&shape, padding_value, padded.dtype(), padded.device());
            padded = Tensor::cat(&[&padded, &fill], 0);
        }
    }
    let padded = permute_batch(&padded, 1, sequence.unsorted_indices.as_deref());
    let sorted = sequence.sorted_lengths();
    let lengths: Vec<i64> = match &sequence.unsorted_indices {
        None => sorted.iter().map(|&l| l as i64).collect(),
        Some(inv) => inv.iter().map(|&i| sorted[i] as i64).collect(),
    };
    let n = lengths.len();
    let padded = if batch_first {
        padded.transpose(0, 1)
    } else {
        padded
    };
    (padded, Tensor::from_vec(lengths, &[n]))
}

/// `unpad_sequence(padded, lengths, batch_first)`: the sequences of a
/// padded `[T, B, *]` (`[B, T, *]` batch-first) batch, each `[lengths[b], *]`.
///
/// ```
/// use tapir_runtime::{nn::{pad_sequence, unpad_sequence}, Tensor};
/// let seqs = [Tensor::ones(&[2, 3]), Tensor::zeros(&[4, 3])];
/// let back = unpad_sequence(&pad_sequence(&seqs, true, 0.0), &[2, 4], true);
/// assert_eq!((back[0].shape(), back[1].shape()), (&[2, 3][..], &[4, 3][..]));
/// ```
#[track_caller]
pub fn unpad_sequence(padded: &Tensor, lengths: &[usize], batch_first: bool) -> Vec<Tensor> {
    let (batch_dim, time_dim) = if batch_first { (0, 1) } else { (1, 0) };
    assert!(
        padded.ndim() >= 2
            && padded.size(batch_dim) == lengths.len()
            && lengths.iter().all(|&l| l <= padded.size(time_dim)),
        "unpad_sequence: padded {:?} ({}) does not hold sequences of lengths {lengths:?}",
        padded.shape(),
        if batch_first {
            "[B, T, *]"
        } else {
            "[T, B, *]"
        }
    );
    lengths
        .iter()
        .enumerate()
        .map(|(b, &l)| padded.select(batch_dim, b as isize).narrow(0, 0, l))
        .collect()
}

/// `unpack_sequence(packed)`: the sequences of a [`PackedSequence`], in the
/// order they were packed from.
///
/// ```
/// use tapir_runtime::{nn::{pack_sequence, unpack_sequence}, Tensor};
/// let seqs = [Tensor::ones(&[1, 2]), Tensor::zeros(&[3, 2])];
/// let back = unpack_sequence(&pack_sequence(&seqs, false));
/// assert_eq!((back[0].shape(), back[1].shape()), (&[1, 2][..], &[3, 2][..]));
/// ```
pub fn unpack_sequence(packed: &PackedSequence) -> Vec<Tensor> {
    let (padded, lengths) = pad_packed_sequence(packed, true, 0.0, None);
    let lengths: Vec<usize> = lengths
        .to_vec::<i64>()
        .iter()
        .map(|&l| l as usize)
        .collect();
    unpad_sequence(&padded, &lengths, true)
}
