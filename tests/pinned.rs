//! Pinned host memory (`Tensor::pin_memory`, the loader's `pin_memory`).
//! The GPU tests need a GPU and the `cuda` feature (`cargo test --features
//! cuda --test pinned`; `scripts/gpu-check.sh` runs them); without one they
//! print SKIPPED, and the no-GPU behaviour is what is checked.

use std::panic::{AssertUnwindSafe, catch_unwind};
use tapir::data::{DataLoader, DataLoaderOptions, PinMemory, TensorDataset};
use tapir::prelude::*;

fn gpu() -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            println!("SKIPPED: {e}");
            None
        }
    }
}

fn loader(pin_memory: bool, num_workers: usize) -> DataLoader<TensorDataset, Vec<Tensor>> {
    let x = Tensor::arange(60).to_dtype(DType::F32).reshape(&[20, 3]);
    let y = Tensor::arange(20);
    let opts = DataLoaderOptions {
        batch_size: 8,
        num_workers,
        pin_memory,
        ..Default::default()
    };
    DataLoader::new(TensorDataset::new(vec![x, y]), opts)
}

fn batches(mut l: DataLoader<TensorDataset, Vec<Tensor>>) -> Vec<Vec<Tensor>> {
    l.iter().collect()
}

#[test]
fn without_a_gpu_pinning_is_an_error_and_the_loader_loads_unpinned() {
    if Device::cuda(0).is_ok() {
        println!("SKIPPED: a GPU is present");
        return;
    }
    let x = Tensor::ones(&[2, 3]);
    let e = x.pin_memory().unwrap_err();
    assert!(
        e.to_string().starts_with("device cuda:0 is unavailable"),
        "{e}"
    );
    assert!(!x.is_pinned());
    // As PyTorch: a warning, then the same batches, unpinned.
    for workers in [0, 2] {
        let (pinned, plain) = (
            batches(loader(true, workers)),
            batches(loader(false, workers)),
        );
        assert_eq!(pinned.len(), 3);
        for (a, b) in pinned.iter().zip(&plain) {
            assert_eq!(a[0].to_vec::<f32>(), b[0].to_vec::<f32>());
            assert_eq!(a[1].to_vec::<i64>(), b[1].to_vec::<i64>());
            assert!(!a[0].is_pinned() && !a[1].is_pinned());
        }
    }
}

#[test]
fn batches_without_tensors_pin_to_themselves() {
    let b = (3i64, vec![1.5f32, 2.5], Some(String::from("id")));
    assert_eq!(b.clone().pinned().unwrap(), b);
    let none: Option<Tensor> = None;
    assert!(none.pinned().unwrap().is_none());
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn pinned_tensors_go_to_the_gpu_by_dma_and_stay_intact_until_read() {
    let Some(dev) = gpu() else { return };
    manual_seed(3);
    let x = Tensor::randn(&[512, 1024]);
    let want = x.to_vec::<f32>();
    let p = x.pin_memory().unwrap();
    assert!(p.is_pinned() && !x.is_pinned());
    assert_eq!(p.to_vec::<f32>(), want);
    assert!(p.t().is_pinned(), "a view of pinned memory is pinned");
    assert!(p.pin_memory().unwrap().is_pinned());

    // The copy is queued without a host wait, and a write to the source
    // waits for the copy to have read it.
    let syncs = tapir::cuda::host_syncs();
    let g = p.to(dev).unwrap();
    assert_eq!(
        tapir::cuda::host_syncs(),
        syncs,
        "to() from pinned memory waited"
    );
    p.add_scalar_(1.0);
    assert_eq!(g.to_vec::<f32>(), want);
    assert_eq!(p.to_vec::<f32>()[0], want[0] + 1.0);

    // Dropping the source right after the copy: the buffer returns to the
    // pinned cache, and the next pin of that size waits before writing it.
    let q = x.pin_memory().unwrap();
    let h = q.to(dev).unwrap();
    drop(q);
    drop(p);
    let r = Tensor::zeros(&[512, 1024]).pin_memory().unwrap();
    assert!(r.is_pinned());
    assert_eq!(h.to_vec::<f32>(), want);
    assert!(r.to_vec::<f32>().iter().all(|&v| v == 0.0));
    drop(r);
    assert!(tapir::cuda::host_empty_cache() >= 512 * 1024 * 4);

    // Non-contiguous pinned views go through staging, with the same values.
    let s = x.pin_memory().unwrap();
    assert_eq!(
        s.t().to(dev).unwrap().to_vec::<f32>(),
        x.t().to_vec::<f32>()
    );

    // Gradient flows back through pin_memory and the copy.
    let w = Tensor::randn(&[4, 3]).requires_grad_(true);
    let on_dev = w.pin_memory().unwrap().to(dev).unwrap();
    on_dev.mul(&on_dev).sum().backward();
    let twice: Vec<f32> = w.to_vec::<f32>().iter().map(|v| 2.0 * v).collect();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), twice);

    // Only CPU tensors can be pinned.
    let on_gpu = Tensor::ones(&[2]).to(dev).unwrap();
    let msg = catch_unwind(AssertUnwindSafe(|| on_gpu.pin_memory()))
        .err()
        .and_then(|p| p.downcast::<String>().ok())
        .expect("pinning a GPU tensor panics with a message");
    assert!(
        msg.contains("pin_memory") && msg.contains("cuda:0"),
        "{msg}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn a_loader_with_pin_memory_delivers_pinned_batches() {
    let Some(dev) = gpu() else { return };
    for workers in [0, 2] {
        let (pinned, plain) = (
            batches(loader(true, workers)),
            batches(loader(false, workers)),
        );
        assert_eq!(pinned.len(), plain.len());
        for (a, b) in pinned.iter().zip(&plain) {
            assert!(a.iter().all(Tensor::is_pinned), "workers {workers}");
            assert!(!b[0].is_pinned());
            let on_gpu = a[0].to(dev).unwrap();
            assert_eq!(on_gpu.to_vec::<f32>(), b[0].to_vec::<f32>());
            assert_eq!(a[1].to_vec::<i64>(), b[1].to_vec::<i64>());
        }
    }
}
