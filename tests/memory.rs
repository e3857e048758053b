//! Graph lifetime, measured alone in its own test binary so that resident
//! memory reflects only this test.

use tapir::prelude::*;

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

#[test]
fn graphs_are_freed_without_backward_and_after_backward() {
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
