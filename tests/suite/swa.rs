//! Weight averaging (`swa_utils.AveragedModel`) against PyTorch's: a
//! Linear + BatchNorm1d over four snapshots, SWA and EMA, buffers copied
//! or averaged (the integer batch count truncated as PyTorch's).

use crate::common::*;
use safetensors::SafeTensors;
use tapir::nn::{BatchNorm, Linear, Module, Sequential};
use tapir::optim::swa_utils::{AveragedModel, Averaging};
use tapir::prelude::*;

fn net() -> Sequential {
    let mut n = Sequential::new()
        .add(Linear::new(3, 4, true))
        .add(BatchNorm::new_1d(4));
    n.to_dtype(DType::F64);
    n
}

/// Writes snapshot `k` of the goldens into every parameter and buffer.
fn snapshot(net: &Sequential, st: &SafeTensors, k: usize) {
    tapir::no_grad(|| {
        for (name, t) in net.state_dict() {
            t.copy_(&load(st, &format!("swa.snap{k}.{name}")));
        }
    });
}

#[test]
fn averaged_models_match_pytorch() {
    let (bytes, m) = read_goldens("nn");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let n = run_all(m["swa"].as_array().unwrap().iter(), |c| {
        let name = c["name"].as_str().unwrap();
        let averaging = match c["ema"].as_f64() {
            Some(decay) => Averaging::ema(decay),
            None => Averaging::Swa,
        };
        let model = net();
        snapshot(&model, &st, 0);
        let mut avg =
            AveragedModel::new(&model, net(), averaging).use_buffers(c["use_buffers"] == true);
        for k in 0..4 {
            snapshot(&model, &st, k);
            avg.update_parameters(&model);
            for (key, t) in avg.module().state_dict() {
                let want = load(&st, &format!("swa.{name}.step{k}.{key}"));
                close(
                    &format!("{name} step {k} {key}"),
                    &t.to_dtype(DType::F64),
                    &want.to_dtype(DType::F64),
                    1e-12,
                    1e-12,
                )?;
            }
        }
        assert_eq!(avg.n_averaged(), 4);
        Ok(())
    });
    assert_eq!(n, 4);
}

/// A copy of another architecture is refused, naming both.
#[test]
fn an_averaged_model_needs_the_models_architecture() {
    let got = panic_message(|| {
        AveragedModel::new(&net(), Linear::new(3, 4, true), Averaging::Swa);
    });
    assert!(
        got.contains("AveragedModel: the model's parameters and buffers")
            && got.contains("0.weight"),
        "{got}"
    );
}
