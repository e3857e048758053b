//! Graph lifetime and the CPU caching allocator, measured alone in their
//! own test binary so that resident memory and the allocator's counters
//! reflect only these tests (which take turns through `ALONE`).

use std::sync::Mutex;
use tapir::memory;
use tapir::optim::{AdamW, AdamWConfig};
use tapir::prelude::*;

static ALONE: Mutex<()> = Mutex::new(());

/// Resident set size in KiB (Linux).
fn rss_kib() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    s.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<usize>()
        .unwrap()
        * 4
}

/// Runs `step` 3 times to warm the cache, then 5 more, and asserts that
/// those 5 took no new buffer from the system; the stats after them.
fn assert_steady(step: &mut dyn FnMut()) -> memory::MemoryStats {
    for _ in 0..3 {
        step();
    }
    let warm = memory::memory_stats(Device::Cpu).unwrap();
    for _ in 0..5 {
        step();
    }
    let after = memory::memory_stats(Device::Cpu).unwrap();
    assert_eq!(
        after.num_device_alloc,
        warm.num_device_alloc,
        "5 steady-state steps took {} new buffers from the system",
        after.num_device_alloc - warm.num_device_alloc
    );
    after
}

/// How far the CPU's allocated bytes rose above their level now while
/// `f` ran (its peak, from a reset peak counter).
fn peak_above_now(f: impl FnOnce()) -> usize {
    let base = memory::memory_allocated(Device::Cpu).unwrap();
    memory::reset_peak_memory_stats(Device::Cpu).unwrap();
    f();
    memory::max_memory_allocated(Device::Cpu).unwrap() - base
}

#[test]
fn graphs_are_freed_without_backward_and_after_backward() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let w = Tensor::randn(&[256, 256]).requires_grad_(true);
    let x = Tensor::randn(&[64, 256]);
    // Warm up allocator pools, then 1000 forwards that are never backpropagated.
    for _ in 0..50 {
        let _ = x.matmul(&w).relu().matmul(&w).sum();
    }
    let before = rss_kib();
    for _ in 0..1000 {
        let _ = x.matmul(&w).relu().matmul(&w).sum();
    }
    let grown = rss_kib().saturating_sub(before);
    // Each forward saves ~192 KiB of activations; a leaking tape would grow by ~190 MiB.
    assert!(
        grown < 20 * 1024,
        "RSS grew by {grown} KiB over 1000 forward passes"
    );

    // After backward, the saved activations are released: a weak observer of
    // the saved input's storage sees it freed once the graph is gone.
    let h = x.matmul(&w).relu();
    let loss = h.matmul(&w).sum();
    drop(h);
    loss.backward();
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loss.backward()));
    assert!(again.is_err(), "saved tensors must be gone after backward");
}

/// A steady-state training step takes no new buffer from the system: every
/// output comes from the caching allocator's free lists (PyTorch's
/// `num_device_alloc` stays flat), and `empty_cache` gives them back.
#[test]
fn a_steady_state_step_allocates_nothing_new_from_the_system() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    tapir::manual_seed(0);
    let model = nn::Sequential::new()
        .add(nn::Linear::new(784, 256, true))
        .add(nn::LayerNorm::new(&[256], 1e-5, true))
        .add(nn::GELU::default())
        .add(nn::Linear::new(256, 10, true));
    let params = model.parameters();
    let mut opt = AdamW::new(params.clone(), AdamWConfig::default());
    let x = Tensor::randn(&[128, 784]);
    let y = Tensor::randint(0, 10, &[128]);
    let mut step = || {
        opt.zero_grad();
        let loss = nn::cross_entropy(&model.forward(&x), &y);
        loss.backward();
        clip_grad_norm_(&params, 1.0);
        opt.step();
    };
    let after = assert_steady(&mut step);
    // The freed activations are cached, not returned...
    assert!(after.reserved > after.allocated, "{after:?}");
    // ...until empty_cache.
    memory::empty_cache(Device::Cpu).unwrap();
    let emptied = memory::memory_stats(Device::Cpu).unwrap();
    assert_eq!(emptied.reserved, emptied.allocated, "{emptied:?}");
    // And the next step refills the cache from the system.
    step();
    let refilled = memory::memory_stats(Device::Cpu).unwrap();
    assert!(refilled.num_device_alloc > after.num_device_alloc);
}

/// A graph network's aggregation step (gather, index_add, scatter_reduce,
/// sort, reductions), head-split attention and a solve of strided views,
/// with their backward, in a steady state take nothing new from the
/// system either: every kernel's output comes from the cache and every
/// temporary copy goes back to it. Before the index kernels did, each step
/// paged in fresh memory for its gathered rows (the `scatter` workload's
/// index_add step: 37 ms, 9 ms after); attention's head-order copies and
/// linalg's dense copies were dropped, not given back.
#[test]
fn steady_state_scatter_attention_and_solve_steps_allocate_nothing_new() {
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    let g = tapir::Generator::new(3);
    let (nodes, edges, features) = (2_000usize, 20_000usize, 16usize);
    let x = Tensor::randn_with(&[nodes, features], &g).requires_grad_(true);
    let src = Tensor::randint_with(0, nodes as i64, &[edges], &g);
    let dst = Tensor::randint_with(0, nodes as i64, &[edges], &g);
    let spread = dst.reshape(&[-1, 1]).expand(&[edges, features]);
    let zeros = Tensor::zeros(&[nodes, features]);
    let mut step = || {
        x.set_grad(None);
        let rows = x.index_select(0, &src);
        let summed = zeros.index_add(0, &dst, &rows, 1.0);
        let peak = zeros.scatter_reduce(0, &spread, &rows, tapir::ScatterReduce::Amax, false);
        let gathered = summed.gather(0, &spread.narrow(0, 0, nodes));
        let (sorted, _) = gathered.sort(1, false);
        let loss = &(&summed.sum() + &peak.amax_dim(1, false).sum()) + &sorted.cumsum(1).mean();
        // Heads split from the rows (attention's copies into and out of
        // head order) and a solve of a transposed (strided) matrix.
        let heads = x.reshape(&[4, 500, 2, 8]).transpose(1, 2);
        let attn = nn::scaled_dot_product_attention(&heads, &heads, &heads, None, 0.0, true, None);
        let m = &x
            .narrow(0, 0, 128)
            .reshape(&[128, 16])
            .matmul(&x.narrow(0, 0, 128).t())
            + &(&Tensor::eye(128) * 64.0);
        let solved = tapir::linalg::solve(&m.t(), &x.narrow(0, 128, 128).narrow(1, 0, 8));
        (&(&loss + &attn.sum()) + &solved.sum()).backward();
    };
    assert_steady(&mut step);
}

/// The fused attention keeps no `[L, S]` score matrix: through forward and
/// backward its peak above the inputs is a few times their size, where the
/// composition's holds the scores and the softmax (16 MiB each here).
#[test]
fn flash_attention_peak_memory_stays_linear_in_the_sequence() {
    use tapir::nn::{SdpBackend, scaled_dot_product_attention, sdpa_kernel};
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    tapir::manual_seed(3);
    // 4 heads of 1024 positions x 32: each input 512 KiB, scores 16 MiB.
    let qkv = [0, 1, 2].map(|_| Tensor::randn(&[1, 4, 1024, 32]).requires_grad_(true));
    let peak = |backend: SdpBackend| {
        peak_above_now(|| {
            sdpa_kernel(&[backend], || {
                let [q, k, v] = &qkv;
                scaled_dot_product_attention(q, k, v, None, 0.0, true, None)
                    .sum()
                    .backward();
            });
            for t in &qkv {
                t.set_grad(None);
            }
        })
    };
    let (flash, math) = (peak(SdpBackend::Flash), peak(SdpBackend::Math));
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    assert!(
        flash < 4 << 20 && math > 32 << 20,
        "peak above the inputs: flash {:.1} MiB, math {:.1} MiB",
        mib(flash),
        mib(math)
    );
    eprintln!(
        "attention peak above inputs: flash {:.1} MiB, math {:.1} MiB",
        mib(flash),
        mib(math)
    );
}

/// The chunked `linear_cross_entropy` keeps one chunk's logits at a time:
/// through forward and backward its peak above the inputs is about the
/// weight gradient's size, where the reference path holds the `[N, C]`
/// logits, their log-softmax and its gradient (16 MiB each here).
#[test]
fn chunked_linear_cross_entropy_peak_memory_stays_below_the_logits() {
    use tapir::nn::{LinearCrossEntropyArgs, LinearCrossEntropyOptions, linear_cross_entropy_with};
    let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
    tapir::manual_seed(5);
    // 512 rows of 64 features, 8192 classes: logits 16 MiB, weight 2 MiB.
    let x = Tensor::randn(&[512, 64]).requires_grad_(true);
    let w = (&Tensor::randn(&[8192, 64]) * 0.1).requires_grad_(true);
    let y = Tensor::randint(0, 8192, &[512]);
    let peak = |options: Option<LinearCrossEntropyOptions>| {
        peak_above_now(|| {
            let args = LinearCrossEntropyArgs {
                options,
                ..Default::default()
            };
            linear_cross_entropy_with(&x, &w, &y, &args).backward();
            x.set_grad(None);
            w.set_grad(None);
        })
    };
    let chunked = peak(Some(LinearCrossEntropyOptions::default()));
    let reference = peak(None);
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    assert!(
        chunked < 12 << 20 && reference > 40 << 20,
        "peak above the inputs: chunked {:.1} MiB, reference {:.1} MiB",
        mib(chunked),
        mib(reference)
    );
    eprintln!(
        "linear_cross_entropy peak above inputs: chunked {:.1} MiB, reference {:.1} MiB",
        mib(chunked),
        mib(reference)
    );
}
