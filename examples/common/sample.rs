//! Sampling text from a language model, for the language-model examples.

use tapir::{Generator, Tensor, no_grad};

/// Draws an index from `softmax(logits / temperature)` (a 1-D tensor).
pub fn sample(logits: &Tensor, temperature: f64, g: &Generator) -> i64 {
    (logits / temperature)
        .softmax(-1)
        .multinomial_with(1, true, g)
        .item::<i64>()
}

/// Appends `n` sampled tokens to `ids`, one at a time, each conditioned on
/// the last `ctx` tokens. `forward(ids [1, T], positions [T])` gives the
/// logits `[1, T, V]`.
pub fn extend(
    ids: &mut Vec<i64>,
    n: usize,
    ctx: usize,
    temperature: f64,
    g: &Generator,
    forward: impl Fn(&Tensor, &Tensor) -> Tensor,
) {
    no_grad(|| {
        for _ in 0..n {
            let window = &ids[ids.len().saturating_sub(ctx)..];
            let t = window.len();
            let logits = forward(
                &Tensor::from_vec(window.to_vec(), &[1, t]),
                &Tensor::arange(t as i64),
            );
            ids.push(sample(
                &logits.select(1, t as isize - 1).squeeze_dim(0),
                temperature,
                g,
            ));
        }
    });
}
