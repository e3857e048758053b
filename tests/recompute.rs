//! Gradient checkpointing: gradients bit-identical to the plain run with
//! dropout inside (the generator is replayed), the forward provably run
//! again, and the peak memory of a deep residual MLP at most half.
//!
//! Its own test binary: these read the process-wide generator and memory
//! figures, so its tests also take one lock.

use std::sync::{Arc, Mutex};
use tapir::nn::{Dropout, Forward, GELU, LayerNorm, Linear, Module, ReLU, Sequential};
use tapir::prelude::*;
use tapir::{checkpoint, checkpoint_sequential, default_generator, memory, profiler};

static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn grads(m: &dyn Module) -> Vec<Vec<f32>> {
    m.parameters()
        .iter()
        .map(|p| p.grad().expect("every parameter gets a gradient").to_vec())
        .collect()
}

#[test]
fn checkpointed_gradients_are_bit_identical_with_dropout_inside() {
    let _g = alone();
    manual_seed(0);
    let seq = Arc::new(
        Sequential::new()
            .add(Linear::new(16, 64, true))
            .add(ReLU)
            .add(Dropout::new(0.3))
            .add(Linear::new(64, 16, true))
            .add(GELU::default())
            .add(Linear::new(16, 4, true)),
    );
    let x = Tensor::randn(&[32, 16]).requires_grad_(true);
    let w = Tensor::randn(&[32, 4]);
    let run = |checkpointed: bool| {
        seq.zero_grad();
        x.set_grad(None);
        manual_seed(5);
        let launches = profiler::matmul_launches();
        let y = if checkpointed {
            checkpoint_sequential(&seq, 2, &x)
        } else {
            seq.forward(&x)
        };
        let after_forward = default_generator().get_state();
        (&y * &w).sum().backward();
        assert_eq!(
            default_generator().get_state(),
            after_forward,
            "backward leaves the generator where the forward left it"
        );
        let launches = profiler::matmul_launches() - launches;
        (
            grads(seq.as_ref()),
            x.grad().unwrap().to_vec::<f32>(),
            launches,
        )
    };
    let (plain, plain_x, plain_launches) = run(false);
    let (ckpt, ckpt_x, ckpt_launches) = run(true);
    assert!(
        plain == ckpt,
        "parameter gradients differ with checkpointing"
    );
    assert!(
        plain_x == ckpt_x,
        "input gradients differ with checkpointing"
    );
    // The first segment (Linear, ReLU, Dropout) ran its one GEMM again.
    assert_eq!(ckpt_launches, plain_launches + 1);
}

#[test]
fn checkpoint_records_the_region_even_when_no_input_needs_a_gradient() {
    let _g = alone();
    let layer = Arc::new(Linear::new(4, 3, true));
    let l = layer.clone();
    let data = Tensor::randn(&[5, 4]);
    let inner = Arc::new(Linear::new(3, 3, false));
    let i2 = inner.clone();
    // Nested: a checkpoint inside a checkpoint.
    let y = checkpoint(
        move |xs| {
            let i3 = i2.clone();
            let h = l.forward(&xs[0]);
            checkpoint(move |hs| i3.forward(&hs[0]).tanh(), &[h])
        },
        &[data],
    );
    y.sum().backward();
    assert!(layer.weight.grad().is_some() && inner.weight.grad().is_some());
}

/// The seed's residual block: `x + net(x)`.
struct ResBlock {
    net: Sequential,
}

impl Forward for ResBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        x + &self.net.forward(x)
    }
}

impl Module for ResBlock {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, tapir::nn::TensorKind)) {
        tapir::nn::visit_child("net", &self.net, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, tapir::nn::TensorKind)) {
        tapir::nn::visit_child_mut("net", &mut self.net, f);
    }
    fn repr(&self) -> String {
        "ResBlock".into()
    }
}

/// Peak bytes of one forward and backward of 8 residual blocks (width 256,
/// batch 4096), each block checkpointed or not.
fn peak_bytes(blocks: &[Arc<ResBlock>], checkpointed: bool) -> usize {
    let x = Tensor::randn(&[4096, 256]);
    let base = memory::memory_allocated(Device::Cpu).unwrap();
    memory::reset_peak_memory_stats(Device::Cpu).unwrap();
    let mut h = x;
    for b in blocks {
        h = if checkpointed {
            let b = b.clone();
            checkpoint(move |xs| b.forward(&xs[0]), &[h])
        } else {
            b.forward(&h)
        };
    }
    h.mean().backward();
    memory::max_memory_allocated(Device::Cpu).unwrap() - base
}

#[test]
fn per_block_checkpointing_halves_the_peak_memory_of_the_seed_mlp() {
    let _g = alone();
    let blocks: Vec<Arc<ResBlock>> = (0..8)
        .map(|_| {
            Arc::new(ResBlock {
                net: Sequential::new()
                    .add(Linear::new(256, 256, true))
                    .add(LayerNorm::new(&[256], 1e-5, true))
                    .add(GELU::default())
                    .add(Linear::new(256, 256, true)),
            })
        })
        .collect();
    let plain = peak_bytes(&blocks, false);
    let ckpt = peak_bytes(&blocks, true);
    let ratio = ckpt as f64 / plain as f64;
    println!(
        "seed MLP, 8 blocks, batch 4096: peak {:.1} MiB plain, {:.1} MiB checkpointed ({ratio:.2}x)",
        plain as f64 / 1048576.0,
        ckpt as f64 / 1048576.0
    );
    assert!(ratio <= 0.5, "checkpointing kept {ratio:.2}x of the peak");
}

tapir::model! {
    pub struct Residual<const D: usize> {
        net: Sequential<(Linear<D, D>, GELU, Linear<D, D>)>,
    }
    fn forward(&self, x: [B, D]) -> [B, D] {
        x + self.net(x)
    }
}

tapir::model! {
    /// Three residual blocks and a head, every call as written.
    pub struct Plain {
        blocks: [Residual<16>; 3],
        head: Linear<16, 4>,
    }
    fn forward(&self, x: [B, 16]) -> [B, 4] {
        let mut h = x;
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }

    /// The same, its blocks and head checkpointed: shape-checked alike.
    pub struct Checkpointed {
        #[checkpoint]
        blocks: [Residual<16>; 3],
        #[checkpoint]
        head: Linear<16, 4>,
    }
    fn forward(&self, x: [B, 16]) -> [B, 4] {
        let mut h = x;
        for block in &self.blocks {
            h = block(h);
        }
        self.head(h)
    }
}

#[test]
fn checkpoint_fields_in_model_recompute_and_give_the_same_gradients() {
    let _g = alone();
    let plain = Plain::new(&Device::Cpu);
    let mut ckpt = Checkpointed::new(&Device::Cpu);
    let report = ckpt.load_state_dict(&plain.state_dict(), true).unwrap();
    assert!(report.is_clean(), "{report}");
    let x = Tensor::randn(&[8, 16]);
    let run = |m: &dyn Fn(&Tensor) -> Tensor, model: &dyn Module| {
        let launches = profiler::matmul_launches();
        m(&x).square().sum().backward();
        (grads(model), profiler::matmul_launches() - launches)
    };
    let (g_plain, n_plain) = run(&|x| plain.forward(x), &plain);
    let (g_ckpt, n_ckpt) = run(&|x| ckpt.forward(x), &ckpt);
    assert!(g_plain == g_ckpt, "gradients differ under #[checkpoint]");
    // 3 blocks x 2 Linear + the head, run again in backward.
    assert_eq!(n_ckpt, n_plain + 7);
    assert!(ckpt.to_string().contains("(blocks): ModuleList"), "{ckpt}");
}

include!("../examples/models/transformer.rs");

tapir::model! {
    /// `CharLm` with its blocks checkpointed.
    pub struct CheckpointedLm<const V: usize, const E: usize, const H: usize, const L: usize, const CTX: usize> {
        pub tok: Embedding<V, E>,
        pub pos: Embedding<CTX, E>,
        #[checkpoint]
        pub blocks: [Block<E, H>; L],
        pub ln: LayerNorm<E>,
        pub head: Linear<E, V>,
    }
    fn forward(&self, ids: [B, T], positions: [T]) -> [B, T, V] {
        let mut h = self.tok(ids) + self.pos(positions);
        for block in &self.blocks {
            h = block(h);
        }
        self.head(self.ln(h))
    }
}

#[test]
fn per_block_checkpointing_halves_the_peak_memory_of_the_char_transformer() {
    let _g = alone();
    let plain = CharLm::<128, 256, 4, 4, 128>::new(&Device::Cpu);
    let mut ckpt = CheckpointedLm::<128, 256, 4, 4, 128>::new(&Device::Cpu);
    ckpt.load_state_dict(&plain.state_dict(), true).unwrap();
    let ids = Tensor::randint(0, 128, &[8, 128]);
    let positions = Tensor::arange(0..128);
    let step = |f: &dyn Fn() -> Tensor| {
        let base = memory::memory_allocated(Device::Cpu).unwrap();
        memory::reset_peak_memory_stats(Device::Cpu).unwrap();
        let logits = f();
        tapir::nn::cross_entropy(&logits.reshape(&[-1, 128]), &ids.reshape(&[-1])).backward();
        memory::max_memory_allocated(Device::Cpu).unwrap() - base
    };
    let a = step(&|| plain.forward(&ids, &positions));
    let b = step(&|| ckpt.forward(&ids, &positions));
    let ratio = b as f64 / a as f64;
    println!(
        "char transformer, 4 blocks, batch 8 x 128: peak {:.1} MiB plain, {:.1} MiB checkpointed ({ratio:.2}x)",
        a as f64 / 1048576.0,
        b as f64 / 1048576.0
    );
    assert!(ratio <= 0.5, "checkpointing kept {ratio:.2}x of the peak");
    assert!(
        grads(&plain) == grads(&ckpt),
        "gradients differ under #[checkpoint]"
    );
}
