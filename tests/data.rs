//! The data pipeline: loader determinism across workers and epochs, worker
//! shutdown and panics, samplers, splits, transforms and file formats.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tapir::data::*;
use tapir::prelude::*;

fn numbers(n: usize) -> TensorDataset {
    TensorDataset::new(vec![
        Tensor::arange(2 * n as i64).reshape(&[n as isize, 2]),
        Tensor::arange(n as i64),
    ])
}

fn epoch_labels<B>(
    loader: &mut DataLoader<TensorDataset, B>,
    f: impl Fn(B) -> Vec<i64>,
) -> Vec<Vec<i64>>
where
    B: Send + 'static,
{
    loader.iter().map(f).collect()
}

#[test]
fn shuffled_batches_are_reproducible_whatever_the_workers() {
    let run = |workers: usize| {
        let opts = DataLoaderOptions {
            batch_size: 4,
            shuffle: true,
            seed: Some(7),
            num_workers: workers,
            ..Default::default()
        };
        let mut loader = DataLoader::new(numbers(30), opts);
        let e0 = epoch_labels(&mut loader, |b: Vec<Tensor>| b[1].to_vec::<i64>());
        let e1 = epoch_labels(&mut loader, |b: Vec<Tensor>| b[1].to_vec::<i64>());
        (e0, e1)
    };
    let (a0, a1) = run(0);
    assert_eq!(run(1), (a0.clone(), a1.clone()));
    assert_eq!(run(3), (a0.clone(), a1.clone()));
    assert_ne!(a0, a1, "each epoch gets a fresh order");
    let mut seen: Vec<i64> = a0.concat();
    seen.sort();
    assert_eq!(
        seen,
        (0..30).collect::<Vec<_>>(),
        "an epoch visits every item once"
    );
    // Inputs and labels stay paired.
    let opts = DataLoaderOptions {
        batch_size: 5,
        shuffle: true,
        seed: Some(1),
        num_workers: 2,
        ..Default::default()
    };
    for b in &mut DataLoader::new(numbers(20), opts) {
        let (x, y) = (b[0].to_vec::<i64>(), b[1].to_vec::<i64>());
        for (k, label) in y.iter().enumerate() {
            assert_eq!(x[2 * k], 2 * label);
        }
    }
}

#[test]
// The only test here that uses the default generator (tests run in parallel).
fn manual_seed_makes_unseeded_shuffles_reproducible() {
    let order = || {
        manual_seed(3);
        let opts = DataLoaderOptions {
            batch_size: 10,
            shuffle: true,
            ..Default::default()
        };
        DataLoader::new(numbers(10), opts).iter().next().unwrap()[1].to_vec::<i64>()
    };
    assert_eq!(order(), order());
}

#[test]
fn drop_last_len_and_skipping() {
    let opts = DataLoaderOptions {
        batch_size: 4,
        drop_last: true,
        ..Default::default()
    };
    let mut loader = DataLoader::new(numbers(10), opts);
    assert_eq!(loader.len(), 2);
    assert_eq!(loader.iter().count(), 2);
    let opts = DataLoaderOptions {
        batch_size: 4,
        ..Default::default()
    };
    let mut loader = DataLoader::new(numbers(10), opts);
    assert_eq!(loader.len(), 3);
    loader.set_epoch(5);
    loader.skip_batches(2);
    let rest: Vec<Vec<i64>> = loader.iter().map(|b| b[1].to_vec::<i64>()).collect();
    assert_eq!(rest, vec![vec![8, 9]]);
    assert_eq!(loader.epoch(), 6);
}

/// Counts its loads; each one sleeps a little.
struct Slow {
    loads: Arc<AtomicUsize>,
    panic_at: Option<usize>,
}

impl Dataset for Slow {
    type Item = Tensor;
    fn len(&self) -> usize {
        1000
    }
    fn get(&self, i: usize) -> Tensor {
        if Some(i) == self.panic_at {
            panic!("boom at item {i}");
        }
        self.loads.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(1));
        Tensor::from_vec(vec![i as f32], &[1])
    }
}

#[test]
fn dropping_a_loader_mid_epoch_stops_its_workers() {
    let loads = Arc::new(AtomicUsize::new(0));
    let ds = Slow {
        loads: loads.clone(),
        panic_at: None,
    };
    let opts = DataLoaderOptions {
        batch_size: 2,
        num_workers: 3,
        prefetch_factor: 2,
        ..Default::default()
    };
    let mut loader = DataLoader::new(ds, opts);
    let mut it = loader.iter();
    let first: Vec<f32> = it.next().unwrap().to_vec();
    assert_eq!(first, vec![0.0, 1.0]);
    it.next().unwrap();
    let start = Instant::now();
    drop(it); // joins the workers
    assert!(start.elapsed() < Duration::from_secs(5));
    let after_drop = loads.load(Ordering::SeqCst);
    // Workers stay within the prefetch window: 2 consumed + 3 workers x 2 batches.
    assert!(
        after_drop <= 2 * (2 + 3 * 2 + 3),
        "loaded {after_drop} items"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        loads.load(Ordering::SeqCst),
        after_drop,
        "no worker is still loading"
    );
    // The loader is usable again: the next epoch starts from the beginning.
    assert_eq!(
        loader.iter().next().unwrap().to_vec::<f32>(),
        vec![0.0, 1.0]
    );
}

#[test]
fn a_panic_in_a_worker_reaches_the_caller() {
    for workers in [0, 2] {
        let ds = Slow {
            loads: Arc::new(AtomicUsize::new(0)),
            panic_at: Some(7),
        };
        let opts = DataLoaderOptions {
            batch_size: 4,
            num_workers: workers,
            ..Default::default()
        };
        let mut loader = DataLoader::new(ds, opts);
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| loader.iter().count()));
        let err = result.unwrap_err();
        let msg = err
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap();
        assert!(msg.contains("boom at item 7"), "{msg}");
        if workers > 0 {
            assert!(
                msg.starts_with("DataLoader: a worker panicked while loading batch 1"),
                "{msg}"
            );
        }
    }
}

#[test]
fn custom_collate_and_samplers() {
    let opts = DataLoaderOptions {
        batch_size: 3,
        ..Default::default()
    };
    let mut loader = DataLoader::with_collate(numbers(6), opts, |items: Vec<Vec<Tensor>>| {
        items.iter().map(|it| it[1].item::<i64>()).sum::<i64>()
    });
    assert_eq!(loader.iter().collect::<Vec<_>>(), vec![3, 12]);

    // Weighted: index 2 has nine times the weight of the others together.
    let s = WeightedRandomSampler::new(vec![0.25, 0.25, 4.5, 0.0], 20_000, true, 1);
    let draws = s.indices(0);
    let share = draws.iter().filter(|&&i| i == 2).count() as f64 / draws.len() as f64;
    assert!((share - 0.9).abs() < 0.01, "{share}");
    assert!(!draws.contains(&3), "zero weight is never drawn");
    let without = WeightedRandomSampler::new(vec![1.0, 1.0, 1.0], 3, false, 2).indices(0);
    let mut sorted = without.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, 1, 2]);

    // Distributed: replicas split an epoch evenly, together covering it.
    let shards: Vec<Vec<usize>> = (0..4)
        .map(|r| DistributedSampler::new(10, 4, r, true, 9, false).indices(3))
        .collect();
    assert!(shards.iter().all(|s| s.len() == 3));
    let mut all: Vec<usize> = shards.concat();
    all.sort();
    all.dedup();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
    let dropped = DistributedSampler::new(10, 4, 0, false, 0, true);
    assert_eq!((dropped.len(), dropped.indices(0)), (2, vec![0, 4]));
    // A loader over one shard.
    let opts = DataLoaderOptions {
        batch_size: 2,
        ..Default::default()
    };
    let mut loader = DataLoader::new(numbers(10), opts)
        .with_sampler(DistributedSampler::new(10, 2, 1, false, 0, false));
    let got: Vec<i64> = loader.iter().flat_map(|b| b[1].to_vec::<i64>()).collect();
    assert_eq!(got, vec![1, 3, 5, 7, 9]);
}

#[test]
fn splits_subsets_and_concatenation() {
    let ds = Arc::new(numbers(10));
    let parts = random_split(ds.clone(), &[6, 4], 5);
    let again = random_split(ds.clone(), &[6, 4], 5);
    assert_eq!(parts[0].indices, again[0].indices);
    let mut all: Vec<usize> = parts.iter().flat_map(|p| p.indices.clone()).collect();
    all.sort();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
    assert_eq!(parts[1].get(0)[1].item::<i64>(), parts[1].indices[0] as i64);
    let cat = ConcatDataset::new(vec![numbers(3), numbers(2)]);
    assert_eq!(cat.len(), 5);
    assert_eq!(cat.get(4)[1].item::<i64>(), 1);
}

#[test]
fn transforms_are_seeded_and_shape_correct() {
    let img = Tensor::arange(16).reshape(&[1, 4, 4]).to_dtype(DType::F32);
    let g = Generator::new(0);
    let crop = RandomCrop {
        size: (4, 4),
        padding: 1,
    };
    let c = crop.apply(&img, &g);
    assert_eq!(c.shape(), &[1, 4, 4]);
    // Every crop is a shifted window of the padded image: its values come
    // from the image or the zero border.
    let vals = c.to_vec::<f32>();
    assert!(vals.iter().all(|v| *v == 0.0 || (0.0..16.0).contains(v)));
    let flip = RandomHorizontalFlip { p: 1.0 }.apply(&img, &g);
    assert_eq!(flip.to_vec::<f32>()[..4], [3.0, 2.0, 1.0, 0.0]);
    let keep = RandomHorizontalFlip { p: 0.0 }.apply(&img, &g);
    assert_eq!(keep.to_vec::<f32>(), img.to_vec::<f32>());
    let norm = Normalize {
        mean: vec![8.0],
        std: vec![2.0],
    }
    .apply(&img, &g);
    assert_eq!(norm.to_vec::<f32>()[0], -4.0);

    // Through a loader with workers: the same augmentations for the same
    // (seed, epoch, index), different ones in the next epoch.
    let images = TensorDataset::new(vec![
        Tensor::randn_with(&[12, 1, 6, 6], &Generator::new(3)),
        Tensor::arange(12),
    ]);
    let aug = Transformed::new(
        images,
        RandomCrop {
            size: (6, 6),
            padding: 2,
        },
        11,
    );
    let opts = DataLoaderOptions {
        batch_size: 4,
        num_workers: 2,
        ..Default::default()
    };
    let mut loader = DataLoader::new(aug, opts);
    let e0: Vec<Vec<f32>> = loader.iter().map(|b| b[0].to_vec::<f32>()).collect();
    let e1: Vec<Vec<f32>> = loader.iter().map(|b| b[0].to_vec::<f32>()).collect();
    loader.set_epoch(0);
    let again: Vec<Vec<f32>> = loader.iter().map(|b| b[0].to_vec::<f32>()).collect();
    assert_eq!(e0, again);
    assert_ne!(e0, e1);
}

#[test]
fn the_shipped_digits_read_as_idx() {
    let images = read_idx("data/digits-images-idx3-ubyte").unwrap();
    let labels = read_idx("data/digits-labels-idx1-ubyte").unwrap();
    assert_eq!(images.shape(), &[1797, 8, 8]);
    assert_eq!(labels.shape(), &[1797]);
    assert_eq!(images.dtype(), DType::U8);
    assert_eq!(images.to_vec::<u8>().into_iter().max(), Some(16));
    let l = labels.to_vec::<u8>();
    assert!(l.iter().all(|&c| c < 10));
    assert_eq!(&l[..10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
}

#[test]
fn idx_gzip_and_bad_files() {
    use std::io::Write;
    let raw = std::fs::read("data/digits-labels-idx1-ubyte").unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    assert_eq!(
        parse_idx(&gz).unwrap().to_vec::<u8>(),
        parse_idx(&raw).unwrap().to_vec::<u8>()
    );
    // Every truncation is an error, never a panic.
    for cut in 0..raw.len() {
        assert!(parse_idx(&raw[..cut]).is_err(), "cut at {cut}");
    }
    for cut in [1, 10, gz.len() / 2, gz.len() - 1] {
        assert!(parse_idx(&gz[..cut]).is_err());
    }
    // A header that claims 2^32 x 2^32 elements.
    let huge = [0, 0, 8, 2, 255, 255, 255, 255, 255, 255, 255, 255];
    assert!(parse_idx(&huge).unwrap_err().contains("need"));
    let err = read_idx("data/missing-file").unwrap_err().to_string();
    assert!(err.starts_with("data/missing-file: "), "{err}");
    let err = parse_idx(&[0, 0, 0x42, 1, 0, 0, 0, 1, 0]).unwrap_err();
    assert_eq!(err, "unknown IDX element type 0x42");
}

#[test]
fn csv_and_text() {
    let dir = std::env::temp_dir().join(format!("tapir-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.csv");
    std::fs::write(&path, "x,y,label\n0.5,1,0\n\n-2,3e2,1\n").unwrap();
    let (names, t) = read_csv(&path, true).unwrap();
    assert_eq!(names, ["x", "y", "label"]);
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(t.to_vec::<f32>(), vec![0.5, 1.0, 0.0, -2.0, 300.0, 1.0]);
    std::fs::write(&path, "1,2\n3,x\n").unwrap();
    let err = read_csv(&path, false).unwrap_err().to_string();
    assert!(
        err.ends_with("line 2, column 2: `x` is not a number"),
        "{err}"
    );
    std::fs::write(&path, "1,2\n3\n").unwrap();
    assert!(
        read_csv(&path, false)
            .unwrap_err()
            .to_string()
            .ends_with("line 2: 1 columns, expected 2")
    );

    let text = std::fs::read_to_string("data/shakespeare.txt").unwrap();
    let tok = CharTokenizer::from_text(&text);
    assert!(tok.vocab_size() < 128);
    let ids = tok.encode(&text[..1000]).unwrap();
    assert_eq!(tok.decode(&ids), &text[..1000]);
    assert!(tok.encode("\u{2603}").is_err());
}

/// Lines of a text as a stream; panics at line `fail_at` if set.
struct Lines {
    n: usize,
    fail_at: Option<usize>,
}

impl IterableDataset for Lines {
    type Item = Tensor;
    fn iter(&self) -> Box<dyn Iterator<Item = Tensor> + Send + '_> {
        Box::new((0..self.n).map(move |i| {
            if Some(i) == self.fail_at {
                panic!("bad line {i}");
            }
            Tensor::scalar(i as i64)
        }))
    }
}

#[test]
fn streaming_sources_batch_in_order_and_restart_each_pass() {
    for prefetch in [0, 1, 4] {
        let loader = StreamLoader::new(
            Lines {
                n: 7,
                fail_at: None,
            },
            3,
            true,
            prefetch,
        );
        let pass =
            |l: &StreamLoader<Lines>| l.iter().map(|b| b.to_vec::<i64>()).collect::<Vec<_>>();
        assert_eq!(pass(&loader), vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(pass(&loader), pass(&loader));
    }
    // Dropping a pass early stops the reader; a panic in the stream surfaces.
    let big = StreamLoader::new(
        Lines {
            n: 1_000_000,
            fail_at: None,
        },
        10,
        false,
        2,
    );
    assert_eq!(big.iter().take(2).count(), 2);
    let bad = StreamLoader::new(
        Lines {
            n: 100,
            fail_at: Some(42),
        },
        10,
        false,
        2,
    );
    let err =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| bad.iter().count())).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap();
    assert_eq!(msg, "StreamLoader: the stream panicked: bad line 42");
}
