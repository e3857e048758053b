//! Kernels over many tensors at once (PyTorch's `_foreach_*`): one parallel
//! job for all of a model's gradients instead of one small job per tensor,
//! which at the seed MLP's 30 parameters was a serial chain of ~30 kernel
//! calls that a second thread could not shorten.

use crate::threads;

/// Elements per task: big enough to amortise a claim, small enough that the
/// largest tensor splits across threads.
const CHUNK: usize = 1 << 14;

/// Lanes of the partial sums (independent accumulators, so the loop
/// vectorises).
const LANES: usize = 16;

/// `Σ x²` of each slice, squares in f32 (as `x * x` computes them), summed
/// in f32 lanes per chunk and the chunks in f64.
///
/// ```
/// let s = tapir_kernels::cpu::sum_squares_many(&[&[3.0f32, 4.0], &[], &[1.0; 5]]);
/// assert_eq!(s, vec![25.0, 0.0, 5.0]);
/// ```
pub fn sum_squares_many(xs: &[&[f32]]) -> Vec<f64> {
    let tasks: Vec<(usize, usize)> = xs
        .iter()
        .enumerate()
        .flat_map(|(t, x)| (0..x.len().div_ceil(CHUNK)).map(move |c| (t, c * CHUNK)))
        .collect();
    let mut partial = vec![0f64; tasks.len()];
    threads::par_chunks_mut(&mut partial, 1, |i, out| {
        let (t, start) = tasks[i];
        let x = &xs[t][start..(start + CHUNK).min(xs[t].len())];
        out[0] = threads::simd(
            #[inline(always)]
            || {
                let mut acc = [0f32; LANES];
                let chunks = x.chunks_exact(LANES);
                let tail: f32 = chunks.remainder().iter().map(|v| v * v).sum();
                for c in chunks {
                    for l in 0..LANES {
                        acc[l] += c[l] * c[l];
                    }
                }
                acc.iter().map(|&a| a as f64).sum::<f64>() + tail as f64
            },
        );
    });
    let mut sums = vec![0f64; xs.len()];
    for (&(t, _), p) in tasks.iter().zip(&partial) {
        sums[t] += p;
    }
    sums
}

/// The slices' base pointers, shared by the tasks of one job: each task
/// makes the one disjoint piece it owns.
struct Bases(Vec<(*mut f32, usize)>);

// SAFETY: the pointers come from `&mut [f32]` borrowed for the whole job
// (`scale_many`), and tasks only build disjoint pieces of them.
unsafe impl Sync for Bases {}

impl Bases {
    /// Slice `t`'s base and length (a method, so closures capture the
    /// whole `Sync` wrapper rather than its field).
    fn get(&self, t: usize) -> (*mut f32, usize) {
        self.0[t]
    }
}

/// `x *= k` for every element of every slice, as one parallel job.
///
/// ```
/// let (mut a, mut b) = (vec![1.0f32, 2.0], vec![3.0f32]);
/// tapir_kernels::cpu::scale_many(&mut [&mut a, &mut b], 0.5);
/// assert_eq!((a, b), (vec![0.5, 1.0], vec![1.5]));
/// ```
pub fn scale_many(xs: &mut [&mut [f32]], k: f32) {
    let tasks: Vec<(usize, usize)> = xs
        .iter()
        .enumerate()
        .flat_map(|(t, x)| (0..x.len().div_ceil(CHUNK)).map(move |c| (t, c * CHUNK)))
        .collect();
    let bases = Bases(xs.iter_mut().map(|x| (x.as_mut_ptr(), x.len())).collect());
    threads::parallel_for(tasks.len(), |i| {
        let (t, start) = tasks[i];
        let (base, len) = bases.get(t);
        let n = CHUNK.min(len - start);
        // SAFETY: `base` points to `len` elements borrowed mutably for this
        // call, which returns after every task; task `i` alone covers
        // `start..start + n` of slice `t` (tasks are distinct chunks).
        let piece = unsafe { std::slice::from_raw_parts_mut(base.add(start), n) };
        threads::simd(
            #[inline(always)]
            || piece.iter_mut().for_each(|v| *v *= k),
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_many_touches_each_element_once() {
        crate::threads::set_num_threads(2);
        let mut xs: Vec<Vec<f32>> = [3, CHUNK + 1, 0, 2 * CHUNK]
            .iter()
            .map(|&n| (0..n).map(|i| i as f32).collect())
            .collect();
        let mut refs: Vec<&mut [f32]> = xs.iter_mut().map(|v| v.as_mut_slice()).collect();
        scale_many(&mut refs, 2.0);
        for x in &xs {
            assert!(x.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f32));
        }
    }

    #[test]
    fn many_sums_of_squares_agree_with_f64_sums() {
        crate::threads::set_num_threads(2);
        let xs: Vec<Vec<f32>> = [0, 1, 17, CHUNK - 1, CHUNK, 3 * CHUNK + 5]
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                    .collect()
            })
            .collect();
        let refs: Vec<&[f32]> = xs.iter().map(|v| v.as_slice()).collect();
        let got = sum_squares_many(&refs);
        for (x, g) in xs.iter().zip(&got) {
            let want: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
            assert!((g - want).abs() <= 1e-6 * want.max(1.0), "{g} vs {want}");
        }
    }
}
