//! Sampling the next token from logits, for the language-model examples.

use tapir::{Generator, Tensor};

/// Draws an index from `softmax(logits / temperature)` (a 1-D tensor).
pub fn sample(logits: &Tensor, temperature: f64, g: &Generator) -> i64 {
    let probs = (logits / temperature).softmax(-1).to_vec::<f32>();
    let u = Tensor::rand_with(&[1], g).to_vec::<f32>()[0];
    let mut acc = 0.0;
    let pick = probs.iter().position(|p| {
        acc += p;
        acc >= u
    });
    // Rounding can leave the total a hair under `u`: take the last symbol.
    pick.unwrap_or(probs.len() - 1) as i64
}
