//! The main job until the data and training-loop issues land: a two-layer
//! MLP learns to classify three noisy spirals generated in-process, trained
//! with hand-written Adam on raw tensors and autograd.
//!
//! ```sh
//! cargo run --release --example train_synthetic
//! ```

use tapir::prelude::*;

/// Three interleaved spirals, `n` points each: inputs `[3n, 2]`, labels `[3n]`.
fn spirals(n: usize, g: &Generator) -> (Tensor, Tensor) {
    let noise = Tensor::randn_with(&[3 * n, 2], g).to_vec::<f32>();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for class in 0..3 {
        for i in 0..n {
            let r = i as f32 / n as f32;
            let theta = class as f32 * 2.094 + r * 4.0;
            let k = class * n + i;
            xs.push(r * theta.sin() + 0.08 * noise[2 * k]);
            xs.push(r * theta.cos() + 0.08 * noise[2 * k + 1]);
            ys.push(class as i64);
        }
    }
    (
        Tensor::from_vec(xs, &[3 * n, 2]),
        Tensor::from_vec(ys, &[3 * n]),
    )
}

/// PyTorch's nn.Linear init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both.
fn linear(fan_in: usize, fan_out: usize) -> (Tensor, Tensor) {
    let bound = 1.0 / (fan_in as f64).sqrt();
    let w = Tensor::zeros(&[fan_out, fan_in]);
    w.uniform_(-bound, bound);
    let b = Tensor::zeros(&[fan_out]);
    b.uniform_(-bound, bound);
    (w.requires_grad_(true), b.requires_grad_(true))
}

/// Mean cross-entropy of `logits` `[n, c]` against class indices `[n]`.
fn cross_entropy(logits: &Tensor, y: &Tensor) -> Tensor {
    logits
        .log_softmax(-1)
        .gather(1, &y.unsqueeze(1))
        .mean()
        .neg()
}

fn main() {
    manual_seed(0);
    let g = Generator::new(0);
    let (x, y) = spirals(300, &g);
    let (x_val, y_val) = spirals(100, &Generator::new(1));
    let (w1, b1) = linear(2, 64);
    let (w2, b2) = linear(64, 3);
    let params = [&w1, &b1, &w2, &b2];
    let forward = |x: &Tensor| x.matmul(&w1.t()).add(&b1).relu().matmul(&w2.t()).add(&b2);

    // Adam (PyTorch defaults: betas 0.9/0.999, eps 1e-8), written with in-place ops.
    let (lr, beta1, beta2, eps) = (0.01, 0.9, 0.999, 1e-8);
    let m: Vec<Tensor> = params.iter().map(|p| Tensor::zeros_like(p)).collect();
    let v: Vec<Tensor> = params.iter().map(|p| Tensor::zeros_like(p)).collect();
    let (batch, epochs) = (64, 60);
    let n = x.size(0);
    let mut step = 0;
    for epoch in 0..epochs {
        let perm = Tensor::randint_with(0, n as i64, &[n], &g); // sampled with replacement
        for start in (0..n).step_by(batch) {
            let idx = perm.narrow(0, start, batch.min(n - start));
            let (xb, yb) = (x.index_select(0, &idx), y.index_select(0, &idx));
            for p in params {
                p.set_grad(None); // zero_grad(set_to_none=True)
            }
            let loss = cross_entropy(&forward(&xb), &yb);
            loss.backward();
            step += 1;
            no_grad(|| {
                for (i, p) in params.iter().enumerate() {
                    let grad = p.grad().expect("every parameter is used");
                    m[i].mul_scalar_(beta1).add_scaled_(&grad, 1.0 - beta1);
                    v[i].mul_scalar_(beta2)
                        .add_scaled_(&(&grad * &grad), 1.0 - beta2);
                    let m_hat = &m[i] / (1.0 - beta1.powi(step));
                    let v_hat = &v[i] / (1.0 - beta2.powi(step));
                    p.add_scaled_(&(&m_hat / &(v_hat.sqrt() + eps)), -lr);
                }
            });
        }
        if epoch % 10 == 9 || epoch == 0 {
            let (val_loss, acc) = no_grad(|| {
                let logits = forward(&x_val);
                let acc = logits
                    .argmax(-1, false)
                    .eq(&y_val)
                    .to_dtype(DType::F32)
                    .mean();
                (
                    cross_entropy(&logits, &y_val).item::<f32>(),
                    acc.item::<f32>(),
                )
            });
            println!(
                "epoch {:>2}: val_loss={val_loss:.4} val_acc={:.1}%",
                epoch + 1,
                acc * 100.0
            );
        }
    }
}
