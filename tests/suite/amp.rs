//! Mixed precision against PyTorch (`scripts/gen_amp_goldens.py`): every
//! op case under CPU autocast in bf16 and f16 (output dtype, value, f32
//! input gradients), the GradScaler trajectory with an injected inf, the
//! f16 underflow the scaler prevents, and the region's rules (nesting,
//! the parameter-cast cache, the guard).

use crate::common::{close, load_cpu, loss_weights, read_goldens, run_all};
use safetensors::SafeTensors;
use serde_json::Value;
use tapir::amp::{self, AutocastGuard, DeviceType, GradScaler, GradScalerConfig};
use tapir::nn::{self, Conv1d, Conv1dOptions, Forward, Linear, Module, Reduction};
use tapir::optim::{Optimizer, SGD, SgdConfig};
use tapir::{Conv2dOptions, DType, Tensor};

/// The script's op table, name for name.
fn run(name: &str, x: &[Tensor]) -> Tensor {
    let t3 = Tensor::from_vec(vec![0i64, 2, 1, 2], &[4]);
    match name {
        "matmul" => x[0].matmul(&x[1]),
        "linear" => nn::linear(&x[0], &x[1], Some(&x[2])),
        "conv2d" => x[0].conv2d(&x[1], Some(&x[2]), Conv2dOptions::default().padding(1)),
        "conv1d" => {
            let mut c = Conv1d::new(3, 4, 3, Conv1dOptions::default(), true);
            c.weight = x[1].clone();
            c.bias = Some(x[2].clone());
            c.forward(&x[0])
        }
        "mlp_cross_entropy" => {
            let h = nn::linear(&x[0], &x[1], Some(&x[2])).relu();
            nn::cross_entropy(&nn::linear(&h, &x[3], Some(&x[4])), &t3)
        }
        "softmax_of_matmul" => x[0].matmul(&x[1]).softmax(-1),
        "layer_norm_of_matmul" => {
            x[0].matmul(&x[1])
                .layer_norm(&[5], Some(&x[2]), Some(&x[3]), 1e-5)
        }
        "mse_of_matmul" => nn::mse_loss(&x[0].matmul(&x[1]), &x[2], Reduction::Mean),
        "cat_with_f32" => Tensor::cat(&[&x[0].matmul(&x[1]), &x[2]], 0),
        "exp_sum_of_matmul" => (&x[0].matmul(&x[1]) * 0.1).exp().sum(),
        "add_f32_residual" => &x[0].matmul(&x[1]) + &x[2],
        "sdpa" => nn::scaled_dot_product_attention(&x[0], &x[1], &x[2], None, 0.0, true, None),
        other => panic!("no amp case {other}"),
    }
}

fn dtype(name: &str) -> DType {
    match name {
        "bfloat16" => DType::BF16,
        "float16" => DType::F16,
        "float32" => DType::F32,
        other => panic!("unexpected dtype {other}"),
    }
}

fn check_op(st: &SafeTensors, c: &Value) -> Result<(), String> {
    let (name, region) = (c["name"].as_str().unwrap(), c["autocast"].as_str().unwrap());
    let key = format!("{region}.{name}");
    let n = c["n_in"].as_u64().unwrap() as usize;
    let xs: Vec<Tensor> = (0..n)
        .map(|i| {
            load_cpu(st, &format!("{key}.in{i}"))
                .to_dtype(DType::F32)
                .requires_grad_(true)
        })
        .collect();
    let out = amp::autocast(DeviceType::Cpu, Some(dtype(region)), true, || {
        run(name, &xs)
    });
    let want_dtype = dtype(c["out_dtype"].as_str().unwrap());
    if out.dtype() != want_dtype {
        return Err(format!(
            "{key}: output is {}, PyTorch's is {want_dtype}",
            out.dtype()
        ));
    }
    // One rounding of the low dtype (bf16 keeps 8 bits, f16 11), a few
    // times over for the composites.
    let tol = if region == "bfloat16" { 3e-2 } else { 4e-3 };
    let want = load_cpu(st, &format!("{key}.out"));
    close(
        &format!("{key} out"),
        &out.to_dtype(DType::F64),
        &want,
        tol,
        tol,
    )?;
    (&out.to_dtype(DType::F32) * &loss_weights(out.shape(), DType::F32))
        .sum()
        .backward();
    for (i, x) in xs.iter().enumerate() {
        let g = x
            .grad()
            .ok_or_else(|| format!("{key}: input {i} got no gradient"))?;
        if g.dtype() != DType::F32 {
            return Err(format!(
                "{key}: input {i}'s gradient is {}, not float32",
                g.dtype()
            ));
        }
        let want = load_cpu(st, &format!("{key}.grad{i}"));
        close(
            &format!("{key} grad{i}"),
            &g.to_dtype(DType::F64),
            &want,
            tol,
            tol,
        )?;
    }
    Ok(())
}

#[test]
fn ops_under_autocast_match_pytorch_in_bf16_and_f16() {
    let (bytes, m) = read_goldens("amp");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let cases = m["ops"].as_array().unwrap();
    assert!(run_all(cases.iter(), |c| check_op(&st, c)) >= 24);
}

#[test]
fn grad_scaler_follows_pytorch_through_an_overflow() {
    let (bytes, m) = read_goldens("amp");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut lin = Linear::new(4, 3, true);
    let init = vec![
        (
            "weight".to_string(),
            load_cpu(&st, "scaler.init.weight").to_dtype(DType::F32),
        ),
        (
            "bias".to_string(),
            load_cpu(&st, "scaler.init.bias").to_dtype(DType::F32),
        ),
    ];
    lin.load_state_dict(&init, true).unwrap();
    let mut opt = SGD::new(
        lin.parameters(),
        SgdConfig {
            lr: 0.1,
            ..Default::default()
        },
    );
    let mut scaler = GradScaler::new(GradScalerConfig {
        init_scale: 1024.0,
        growth_interval: 2,
        ..Default::default()
    });
    let (xs, ys) = (
        load_cpu(&st, "scaler.xs").to_dtype(DType::F32),
        load_cpu(&st, "scaler.ys").to_dtype(DType::F32),
    );
    let s = &m["scaler"];
    for i in 0..6 {
        opt.zero_grad();
        let loss = nn::mse_loss(
            &lin.forward(&xs.select(0, i)),
            &ys.select(0, i),
            Reduction::Mean,
        );
        scaler.scale(&loss).backward();
        scaler.unscale_(&mut opt);
        let stepped = scaler.step(&mut opt);
        scaler.update();
        assert_eq!(
            stepped,
            s["stepped"][i as usize].as_bool().unwrap(),
            "step {i}: stepped"
        );
        assert_eq!(
            scaler.get_scale(),
            s["scales"][i as usize].as_f64().unwrap(),
            "step {i}: scale"
        );
        for (n, p) in lin.named_parameters() {
            let want = load_cpu(&st, &format!("scaler.step{i}.{n}"));
            close(
                &format!("step {i} {n}"),
                &p.to_dtype(DType::F64),
                &want,
                1e-6,
                1e-6,
            )
            .unwrap();
        }
    }
    let state = scaler.state_dict();
    for (k, v) in &state {
        let want = s["state"][k.as_str()].as_f64().unwrap();
        assert_eq!(*v, want, "state {k}");
    }
    let mut fresh = GradScaler::new(GradScalerConfig::default());
    fresh.load_state_dict(&state).unwrap();
    assert_eq!(fresh.get_scale(), 2048.0);
    let missing = fresh.load_state_dict(&state[1..]).unwrap_err().to_string();
    assert!(missing.contains("`scale` is missing"), "{missing}");
}

#[test]
fn the_scaler_saves_small_f16_gradients_from_underflow() {
    let (bytes, _) = read_goldens("amp");
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let grad = |scaled: bool| {
        let w = Tensor::ones(&[4]).requires_grad_(true);
        let loss = (&w.half().float() * 1e-8).sum();
        let mut scaler = GradScaler::new(GradScalerConfig {
            enabled: scaled,
            ..Default::default()
        });
        let mut opt = SGD::new(vec![w.clone()], SgdConfig::default());
        scaler.scale(&loss).backward();
        scaler.unscale_(&mut opt);
        w.grad().unwrap()
    };
    let (plain, scaled) = (grad(false), grad(true));
    assert_eq!(plain.to_vec::<f32>(), vec![0.0; 4], "1e-8 underflows f16");
    let want = load_cpu(&st, "underflow.scaled");
    close("scaled", &scaled.to_dtype(DType::F64), &want, 0.0, 1e-6).unwrap();
    close(
        "plain",
        &plain.to_dtype(DType::F64),
        &load_cpu(&st, "underflow.plain"),
        0.0,
        0.0,
    )
    .unwrap();
    assert!((scaled.to_vec::<f32>()[0] - 1e-8).abs() < 1e-11);
}

#[test]
fn scaler_misuse_is_refused_as_pytorch_does() {
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let mut opt = SGD::new(vec![w.clone()], SgdConfig::default());
    let mut scaler = GradScaler::new(GradScalerConfig::default());
    scaler.scale(&w.sum()).backward();
    scaler.unscale_(&mut opt);
    let twice =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scaler.unscale_(&mut opt)));
    let e = twice.unwrap_err();
    let msg = e
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap();
    assert!(
        msg.contains(
            "unscale_() has already been called on this optimizer since the last update()"
        ),
        "{msg}"
    );
    let mut scaler = GradScaler::new(GradScalerConfig::default());
    scaler.step(&mut opt);
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scaler.step(&mut opt)));
    assert!(again.is_err(), "a second step before update must panic");
    let off = GradScaler::new(GradScalerConfig {
        enabled: false,
        ..Default::default()
    });
    assert_eq!(off.get_scale(), 1.0);
    assert!(off.scale(&w.sum()).equal(&w.sum()));
}

#[test]
fn autocast_regions_nest_cache_parameter_casts_and_restore() {
    let lin = Linear::new(4, 4, true);
    let x = Tensor::randn(&[2, 4]);
    assert!(!amp::is_autocast_enabled(DeviceType::Cpu));
    {
        let _outer = AutocastGuard::new(DeviceType::Cpu, None, true);
        assert_eq!(amp::get_autocast_dtype(DeviceType::Cpu), DType::BF16);
        let y = lin.forward(&lin.forward(&x));
        assert_eq!(y.dtype(), DType::BF16);
        // weight and bias, cast once for both calls.
        assert_eq!(amp::cached_casts(), 2);
        {
            let _off = AutocastGuard::new(DeviceType::Cpu, None, false);
            assert_eq!(lin.forward(&x).dtype(), DType::F32);
        }
        amp::autocast(DeviceType::Cpu, Some(DType::F16), true, || {
            assert_eq!(lin.forward(&x).dtype(), DType::F16);
        });
        assert_eq!(amp::get_autocast_dtype(DeviceType::Cpu), DType::BF16);
        // CUDA's region is separate: CPU tensors are untouched by it.
        assert!(!amp::is_autocast_enabled(DeviceType::Cuda));
    }
    assert!(!amp::is_autocast_enabled(DeviceType::Cpu));
    assert_eq!(
        amp::cached_casts(),
        0,
        "the cache empties when the outermost region exits"
    );
    let y = amp::autocast(DeviceType::Cuda, None, true, || lin.forward(&x));
    assert_eq!(
        y.dtype(),
        DType::F32,
        "a CUDA region leaves CPU tensors alone"
    );
    let f64_in = amp::autocast(DeviceType::Cpu, None, true, || {
        Tensor::randn(&[2, 2]).to_dtype(DType::F64).exp()
    });
    assert_eq!(f64_in.dtype(), DType::F64);
    let bad =
        std::panic::catch_unwind(|| AutocastGuard::new(DeviceType::Cpu, Some(DType::F32), true));
    let msg = bad
        .err()
        .and_then(|e| e.downcast_ref::<String>().cloned())
        .unwrap();
    assert_eq!(
        msg,
        "autocast: dtype must be float16 or bfloat16, got float32"
    );
}

#[test]
fn modules_and_tensors_convert_as_pytorch_names_them() {
    let mut lin = Linear::new(3, 2, true);
    lin.half();
    assert!(
        lin.parameters()
            .iter()
            .all(|p| p.dtype() == DType::F16 && p.requires_grad())
    );
    lin.bfloat16();
    assert_eq!(lin.weight.dtype(), DType::BF16);
    lin.float();
    assert_eq!(lin.weight.dtype(), DType::F32);
}

tapir::model! {
    /// A residual block like the seed's, to run under autocast unchanged.
    pub struct Block {
        net: Sequential<(Linear<16, 32>, LayerNorm<32>, GELU, Linear<32, 16>)>,
        head: Linear<16, 4>,
    }
    fn forward(&self, x: [B, 16]) -> [B, 4] {
        self.head(x + self.net(x))
    }
}

#[test]
fn model_macro_models_run_under_autocast_unchanged() {
    let m = Block::new(&tapir::Device::Cpu);
    let x = Tensor::randn(&[8, 16]);
    let y = Tensor::from_vec(vec![0i64, 1, 2, 3, 0, 1, 2, 3], &[8]);
    let full = m.forward(&x);
    let (logits, loss) = amp::autocast(DeviceType::Cpu, None, true, || {
        let logits = m.forward(&x);
        (logits.clone(), nn::cross_entropy(&logits, &y))
    });
    assert_eq!((logits.dtype(), loss.dtype()), (DType::BF16, DType::F32));
    close(
        "bf16 logits",
        &logits.to_dtype(DType::F32),
        &full,
        5e-2,
        5e-2,
    )
    .unwrap();
    loss.backward();
    for (n, p) in m.named_parameters() {
        let g = p.grad().unwrap_or_else(|| panic!("{n} got no gradient"));
        assert_eq!(g.dtype(), DType::F32, "{n}");
    }
    // The boundary check still names the model and the dims.
    let e = amp::autocast(DeviceType::Cpu, None, true, || {
        m.try_forward(&Tensor::zeros(&[8, 15]))
    });
    assert!(e.unwrap_err().to_string().contains("[B, 16]"));
}
