//! The `lm_head` workload: a language model's output layer and its loss,
//! as `benches/torch_ref.py`'s `bench_lm_head` builds it. 1024 tokens of
//! 256 features against a 32000-word vocabulary, `linear_cross_entropy`'s
//! mean loss, forward and backward for the features and the weight:
//! `reference` materialises the `[1024, 32000]` logits, `chunked` runs
//! PyTorch's default `LinearCrossEntropyOptions()` (16-row chunks here).

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use tapir::nn::{LinearCrossEntropyArgs, LinearCrossEntropyOptions, linear_cross_entropy_with};
use tapir::prelude::*;

/// The workload's variants.
pub(crate) const LM_HEAD_VARIANTS: [&str; 2] = ["reference_v32k", "chunked_v32k"];

pub(crate) fn bench_lm_head(args: &Args, variant: &str) -> String {
    let (tokens, features, vocab) = (1024usize, 256usize, 32_000usize);
    let g = Generator::new(args.seed);
    let dev = args.device;
    let x = Tensor::randn_with(&[tokens, features], &g)
        .to(dev)
        .unwrap()
        .requires_grad_(true);
    let w = (&Tensor::randn_with(&[vocab, features], &g) * 0.05)
        .to(dev)
        .unwrap()
        .requires_grad_(true);
    let y = Tensor::randint_with(0, vocab as i64, &[tokens], &g)
        .to(dev)
        .unwrap();
    let loss_args = LinearCrossEntropyArgs {
        options: variant
            .starts_with("chunked")
            .then(LinearCrossEntropyOptions::default),
        ..Default::default()
    };
    let step = || {
        x.set_grad(None);
        w.set_grad(None);
        linear_cross_entropy_with(&x, &w, &y, &loss_args).backward();
    };
    let (warm, steps) = scaled(args, "lm_head");
    let t = time_loop(dev, step, warm, steps);
    record(
        "lm_head",
        variant,
        warm,
        &t,
        tokens as f64,
        &[
            ("tokens", tokens.to_string()),
            ("features", features.to_string()),
            ("vocab", vocab.to_string()),
        ],
    )
}
