//! Exact resume: N training steps straight give bitwise the same parameters
//! as k steps, a checkpoint, and N - k steps in a fresh process. Alone in its
//! test binary, because it relies on the default generator (dropout), which
//! concurrent tests would draw from.

use std::path::PathBuf;
use tapir::Checkpoint;
use tapir::nn::Module;
use tapir::optim::{AdamW, AdamWConfig, CosineAnnealingLR, LrScheduler, Optimizer};
use tapir::prelude::*;

model! {
    /// A model with dropout, so resuming needs the RNG state too.
    pub struct Dropper {
        fc1: Linear<8, 32>,
        drop: Dropout<0.2>,
        fc2: Linear<32, 4>,
    }
    fn forward(&self, x: [B, 8]) -> [B, 4] {
        self.fc2(self.drop(self.fc1(x).relu()))
    }
}

/// A file in this process's scratch folder.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tapir-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Every f32 parameter's bits, by name.
fn bits(sd: &[(String, Tensor)]) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = sd
        .iter()
        .filter(|(_, t)| t.dtype() == DType::F32)
        .map(|(k, t)| {
            (
                k.clone(),
                t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Trains `Dropper` from step `from` to step `to` (AdamW, per-step cosine,
/// shuffled loader), positioning the loader from the step count alone.
fn train_steps(
    model: &Dropper,
    opt: &mut AdamW,
    sched: &mut dyn LrScheduler,
    loader: &mut DataLoader<TensorDataset, Vec<Tensor>>,
    from: usize,
    to: usize,
) {
    let per_epoch = loader.len();
    loader.set_epoch((from / per_epoch) as u64);
    loader.skip_batches(from % per_epoch);
    let mut step = from;
    model.train();
    while step < to {
        for b in loader.iter() {
            opt.zero_grad();
            let loss = cross_entropy(&model.forward(&b[0]), &b[1]);
            loss.backward();
            clip_grad_norm_(&model.parameters(), 1.0);
            opt.step();
            sched.step(opt);
            step += 1;
            if step == to {
                return;
            }
        }
    }
}

use tapir::data::{DataLoader, DataLoaderOptions, TensorDataset};

fn setup() -> (
    Dropper,
    AdamW,
    tapir::optim::ClosedForm,
    DataLoader<TensorDataset, Vec<Tensor>>,
) {
    manual_seed(42);
    let model = Dropper::new(&Device::Cpu);
    let mut opt = AdamW::new(
        model.parameters(),
        AdamWConfig {
            lr: 1e-2,
            ..AdamWConfig::default()
        },
    );
    let sched = CosineAnnealingLR::new(&mut opt, 12, 1e-4);
    let g = Generator::new(9);
    let ds = TensorDataset::new(vec![
        Tensor::randn_with(&[40, 8], &g),
        Tensor::randint_with(0, 4, &[40], &g),
    ]);
    let opts = DataLoaderOptions {
        batch_size: 8,
        shuffle: true,
        seed: Some(5),
        num_workers: 2,
        ..Default::default()
    };
    (model, opt, sched, DataLoader::new(ds, opts))
}

const TOTAL: usize = 12;
const SPLIT: usize = 7; // mid-epoch: 5 batches per epoch

/// The second half of the resume test, in a fresh process.
#[test]
#[ignore]
fn resume_child() {
    let (Ok(ckpt), Ok(out)) = (std::env::var("TAPIR_CKPT"), std::env::var("TAPIR_OUT")) else {
        return;
    };
    let (mut model, mut opt, mut sched, mut loader) = setup();
    let c = Checkpoint::load(&ckpt).unwrap();
    model.load_state_dict(&c.model, true).unwrap();
    opt.load_state_dict(&c.optimizer).unwrap();
    sched.load_state_dict(&mut opt, &c.scheduler);
    c.restore_rng();
    train_steps(
        &model,
        &mut opt,
        &mut sched,
        &mut loader,
        c.step as usize,
        TOTAL,
    );
    tapir::save(&model.state_dict(), &out).unwrap();
}

#[test]
fn resume_in_a_fresh_process_is_bitwise_exact() {
    let (model, mut opt, mut sched, mut loader) = setup();
    train_steps(&model, &mut opt, &mut sched, &mut loader, 0, TOTAL);
    let straight = bits(&model.state_dict());

    let (model, mut opt, mut sched, mut loader) = setup();
    train_steps(&model, &mut opt, &mut sched, &mut loader, 0, SPLIT);
    let mut c = Checkpoint::new(
        model.state_dict(),
        opt.state_dict(),
        sched.state_dict(),
        (SPLIT / 5) as u64,
        SPLIT as u64,
    );
    c.extra.insert("note".into(), "mid-epoch".into());
    let ckpt = scratch("resume.safetensors");
    c.save(&ckpt).unwrap();
    assert_eq!(Checkpoint::load(&ckpt).unwrap().extra["note"], "mid-epoch");
    let out = scratch("resumed-final.safetensors");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "resume_child", "--ignored", "--nocapture"])
        .env("TAPIR_CKPT", &ckpt)
        .env("TAPIR_OUT", &out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let resumed = bits(&tapir::load(&out).unwrap());
    assert_eq!(resumed.len(), straight.len());
    assert_eq!(
        resumed, straight,
        "N straight steps == k steps, save, load in a fresh process, N - k steps"
    );
    // Without the RNG state, dropout draws differ and so do the weights.
    let (model, mut opt, mut sched, mut loader) = setup();
    let c = Checkpoint::load(&ckpt).unwrap();
    let mut m2 = model;
    m2.load_state_dict(&c.model, true).unwrap();
    opt.load_state_dict(&c.optimizer).unwrap();
    sched.load_state_dict(&mut opt, &c.scheduler);
    train_steps(&m2, &mut opt, &mut sched, &mut loader, SPLIT, TOTAL);
    assert_ne!(bits(&m2.state_dict()), straight);
}
