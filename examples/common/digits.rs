//! The digits data for the digits examples: the shipped IDX files (or an IDX
//! dataset on disk), a seeded 80/20 split, pixels scaled and normalised.
#![allow(dead_code)] // each example uses a different part

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tapir::Result;
use tapir::data::{
    Compose, DataLoader, DataLoaderOptions, Dataset, Normalize, TensorDataset, ToFloat,
    Transformed, random_split, read_idx,
};
use tapir::prelude::*;

/// Images `[N, H, W]` (u8) and labels `[N]`.
pub struct Split {
    pub images: Tensor,
    pub labels: Tensor,
}

fn find(dir: &Path, stem: &str) -> Option<PathBuf> {
    [stem.to_string(), format!("{stem}.gz")]
        .into_iter()
        .map(|n| dir.join(n))
        .find(|p| p.exists())
}

/// The shipped digits, or an IDX dataset from `--data`; with no separate
/// validation files, a seeded 80/20 split.
/// A data file shipped in the repository's `data/`, found from the crate's
/// own folder so the examples run from any directory.
pub fn shipped(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}

pub fn load_data(data: Option<&Path>) -> Result<(Split, Option<Split>)> {
    let read = |dir: &Path, kind: &str| -> Result<Option<Split>> {
        let (Some(i), Some(l)) = (
            find(dir, &format!("{kind}-images-idx3-ubyte")),
            find(dir, &format!("{kind}-labels-idx1-ubyte")),
        ) else {
            return Ok(None);
        };
        Ok(Some(Split {
            images: read_idx(i)?,
            labels: read_idx(l)?,
        }))
    };
    match data {
        None => Ok((
            Split {
                images: read_idx(shipped("digits-images-idx3-ubyte"))?,
                labels: read_idx(shipped("digits-labels-idx1-ubyte"))?,
            },
            None,
        )),
        Some(dir) => {
            let train = read(dir, "train")?.ok_or_else(|| {
                tapir::Error::Format(format!(
                    "{}: no train-images-idx3-ubyte[.gz] / train-labels-idx1-ubyte[.gz] there",
                    dir.display()
                ))
            })?;
            Ok((train, read(dir, "t10k")?))
        }
    }
}

/// What would make training meaningless or crash later, said up front:
/// too few images, labels that are not classes 0-9, validation images of
/// another size, or images with no variation at all.
pub fn check_data(train: &Split, val: Option<&Split>) -> std::result::Result<(), String> {
    let mut parts = vec![("training", train)];
    parts.extend(val.map(|v| ("validation", v)));
    for (what, s) in &parts {
        let n = s.images.shape().first().copied().unwrap_or(0);
        if s.images.ndim() != 3 || s.labels.shape() != [n] {
            return Err(format!(
                "{what} images {:?} and labels {:?} do not match",
                s.images.shape(),
                s.labels.shape()
            ));
        }
        let labels: Vec<i64> = s.labels.to_dtype(DType::I64).to_vec();
        if let Some((i, l)) = labels
            .iter()
            .enumerate()
            .find(|(_, l)| !(0..10).contains(*l))
        {
            return Err(format!(
                "{what} label {l} (image {i}) is not a class: this example has 10 classes, 0-9"
            ));
        }
    }
    let n = train.images.size(0);
    match val {
        None if n < 5 => {
            return Err(format!(
                "{n} training images: at least 5 are needed to hold a fifth out for validation"
            ));
        }
        Some(v) if v.images.shape()[1..] != train.images.shape()[1..] => {
            return Err(format!(
                "validation images are {:?}, training images {:?}",
                &v.images.shape()[1..],
                &train.images.shape()[1..]
            ));
        }
        Some(v) if v.images.size(0) == 0 || n == 0 => {
            return Err("the training or validation set has no images".into());
        }
        _ => {}
    }
    if train.images.max().item::<f64>() == train.images.min().item::<f64>() {
        return Err(
            "every pixel of every training image has the same value: nothing to learn".into(),
        );
    }
    Ok(())
}

pub type Loader = DataLoader<Transformed<tapir::data::Subset<TensorDataset>>, Vec<Tensor>>;

/// Train and validation loaders; `pin_memory` for batches bound for a GPU.
pub fn loaders(
    seed: u64,
    batch_size: usize,
    workers: usize,
    pin_memory: bool,
    train: Split,
    val: Option<Split>,
) -> (Loader, Loader) {
    let pixels = ToFloat {
        scale: 1.0
            / train
                .images
                .to_vec::<u8>()
                .into_iter()
                .max()
                .unwrap_or(1)
                .max(1) as f64,
    };
    let scaled = (&train.images.to_dtype(DType::F32) * pixels.scale).to_vec::<f32>();
    let n = scaled.len() as f64;
    let mean = scaled.iter().map(|&v| v as f64).sum::<f64>() / n;
    let std = (scaled
        .iter()
        .map(|&v| (v as f64 - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let transform = || {
        Compose(vec![
            Box::new(ToFloat {
                scale: pixels.scale,
            }),
            Box::new(Normalize {
                mean: vec![mean],
                std: vec![std],
            }),
        ])
    };
    let labels = |t: &Tensor| t.to_dtype(DType::I64);
    let (train_part, val_part) = match val {
        Some(v) => {
            let t = Arc::new(TensorDataset::new(vec![
                train.images.clone(),
                labels(&train.labels),
            ]));
            let v = Arc::new(TensorDataset::new(vec![v.images, labels(&v.labels)]));
            let nt = t.len();
            let nv = v.len();
            (
                tapir::data::Subset::new(t, (0..nt).collect()),
                tapir::data::Subset::new(v, (0..nv).collect()),
            )
        }
        None => {
            let all = Arc::new(TensorDataset::new(vec![
                train.images.clone(),
                labels(&train.labels),
            ]));
            let n = all.len();
            let n_val = n / 5;
            let mut parts = random_split(all, &[n - n_val, n_val], seed);
            let v = parts.pop().unwrap_or_else(|| unreachable!());
            (parts.pop().unwrap_or_else(|| unreachable!()), v)
        }
    };
    let opts = |shuffle| DataLoaderOptions {
        batch_size,
        shuffle,
        seed: Some(seed),
        num_workers: workers,
        pin_memory,
        ..Default::default()
    };
    (
        DataLoader::new(Transformed::new(train_part, transform(), seed), opts(true)),
        DataLoader::new(Transformed::new(val_part, transform(), seed), opts(false)),
    )
}
