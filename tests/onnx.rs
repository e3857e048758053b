//! ONNX export: the seed MLP, the CNN and the char transformer, checked
//! structurally here and by onnx's checker and onnxruntime (through
//! `scripts/check_onnx.py`, with the Python that `TAPIR_ONNX_PYTHON` names or
//! `target/onnx-venv`, as `.ci/run` sets up); and the errors for what cannot
//! be exported.

use serde_json::{Value, json};
use std::path::PathBuf;
use tapir::nn::BagMode;
use tapir::onnx::{self, ExportOptions, Exportable};
use tapir::prelude::*;

include!("../examples/models/seed.rs");
include!("../examples/models/small_cnn.rs");
include!("../examples/models/transformer.rs");

tapir::model! {
    /// Conv-BatchNorm-SiLU, a global average pool, dropout and a head: the
    /// eval-mode layers export checks beyond the example models.
    pub struct BnNet {
        pub conv: Conv2d<3, 8, 3, padding = 1>,
        pub bn: BatchNorm2d<8>,
        pub gap: AdaptiveAvgPool2d<1>,
        pub flat: Flatten,
        pub drop: Dropout<0.5>,
        pub head: Linear<8, 5>,
    }
    fn forward(&self, x: [N, 3, 6, 6]) -> [N, 5] {
        let h = self.gap(self.bn(self.conv(x)).silu());
        self.head(self.drop(self.flat(h)))
    }
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tapir-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn flat(t: &Tensor) -> Value {
    let (dtype, data) = match t.dtype() {
        DType::I64 => ("i64", json!(t.to_vec::<i64>())),
        _ => ("f32", json!(t.to_dtype(DType::F32).to_vec::<f32>())),
    };
    json!({"shape": t.shape(), "dtype": dtype, "data": data})
}

/// Exports `model` traced on `inputs(0)`, then records tapir's outputs for
/// every batch in `batches` (for onnxruntime to match).
fn case<M: Exportable>(
    name: &str,
    model: &M,
    inputs: impl Fn(usize) -> Vec<Tensor>,
    batches: &[usize],
) -> (Value, onnx::proto::ModelProto) {
    let path = dir().join(format!("{name}.onnx"));
    let example = inputs(batches[0]);
    let refs: Vec<&Tensor> = example.iter().collect();
    onnx::export(model, &refs, &path, ExportOptions::default()).unwrap();
    model.eval();
    let runs: Vec<Value> = batches
        .iter()
        .map(|&b| {
            let xs = inputs(b);
            let refs: Vec<&Tensor> = xs.iter().collect();
            let ys = no_grad(|| model.export_forward(&refs)).unwrap();
            json!({"inputs": xs.iter().map(flat).collect::<Vec<_>>(),
                   "outputs": ys.iter().map(flat).collect::<Vec<_>>()})
        })
        .collect();
    let proto = onnx::read_model(&path).unwrap();
    (
        json!({"name": name, "model": path.display().to_string(), "runs": runs}),
        proto,
    )
}

fn op_types(m: &onnx::proto::ModelProto) -> Vec<String> {
    let g = m.graph.as_ref().unwrap();
    g.node.iter().map(|n| n.op_type.clone().unwrap()).collect()
}

fn count(m: &onnx::proto::ModelProto, op: &str) -> usize {
    op_types(m).iter().filter(|o| *o == op).count()
}

fn dims(v: &onnx::proto::ValueInfoProto) -> Vec<String> {
    let t = v.r#type.as_ref().unwrap().tensor_type.as_ref().unwrap();
    t.shape
        .as_ref()
        .unwrap()
        .dim
        .iter()
        .map(|d| match (&d.dim_param, d.dim_value) {
            (Some(p), _) => p.clone(),
            (None, Some(v)) => v.to_string(),
            _ => "?".into(),
        })
        .collect()
}

fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TAPIR_ONNX_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/onnx-venv/bin/python");
    venv.exists().then_some(venv)
}

#[test]
fn example_models_export_and_match_onnxruntime_at_two_batch_sizes() {
    manual_seed(0);
    let mlp = SeedMlp::<64, 10>::new(&Device::Cpu);
    let (mlp_case, m) = case("seed_mlp", &mlp, |b| vec![Tensor::randn(&[b, 64])], &[3, 7]);
    assert_eq!(count(&m, "Gemm"), 10, "{:?}", op_types(&m));
    assert_eq!(count(&m, "LayerNormalization"), 4);
    assert_eq!(count(&m, "Erf"), 4, "exact GELU through Erf");
    let g = m.graph.as_ref().unwrap();
    assert_eq!(dims(&g.input[0]), ["B", "64"]);
    assert_eq!(dims(&g.output[0]), ["B", "10"]);
    let mut inits: Vec<String> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    let mut keys: Vec<String> = mlp.state_dict().into_iter().map(|(k, _)| k).collect();
    inits.retain(|n| !n.starts_with("const"));
    inits.sort();
    keys.sort();
    assert_eq!(
        inits, keys,
        "parameters are initializers named by state-dict keys"
    );

    let cnn = SmallCnn::new(&Device::Cpu);
    let (cnn_case, m) = case(
        "small_cnn",
        &cnn,
        |b| vec![Tensor::randn(&[b, 1, 28, 28])],
        &[2, 5],
    );
    assert_eq!(count(&m, "Conv"), 2);
    assert_eq!(count(&m, "MaxPool"), 2);
    assert_eq!(
        dims(&m.graph.as_ref().unwrap().input[0]),
        ["N", "1", "28", "28"]
    );

    let lm = CharLm::<40, 32, 4, 2, 16>::new(&Device::Cpu);
    let tokens = |b: usize, t: usize| {
        let ids: Vec<i64> = (0..b * t).map(|i| ((i * 7 + 3) % 40) as i64).collect();
        vec![
            Tensor::from_vec(ids, &[b, t]),
            Tensor::from_vec((0..t as i64).collect(), &[t]),
        ]
    };
    let (lm_case, m) = case("char_lm", &lm, |b| tokens(b, 12 - b), &[2, 4]);
    assert_eq!(count(&m, "Trilu"), 2, "one causal mask per block");
    assert!(count(&m, "Gather") >= 2, "token and position embeddings");
    let g = m.graph.as_ref().unwrap();
    assert_eq!(dims(&g.input[0]), ["B", "T"]);
    assert_eq!(dims(&g.output[0]), ["B", "T", "40"]);

    let bn = BnNet::new(&Device::Cpu);
    for _ in 0..3 {
        // Training steps move the running statistics away from 0 and 1.
        let _ = bn.forward(&(&Tensor::randn(&[4, 3, 6, 6]) * 2.0 + 0.5));
    }
    let (bn_case, m) = case(
        "bn_net",
        &bn,
        |b| vec![Tensor::randn(&[b, 3, 6, 6])],
        &[2, 3],
    );
    assert_eq!(count(&m, "BatchNormalization"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "GlobalAveragePool"), 1);

    // The fused residual add + LayerNorm exports as its two nodes.
    let fused = Custom(
        |h: &Tensor| {
            let (s, y) = h.add_layer_norm(&h.relu(), &[4], None, None, 1e-5);
            &s * &y
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (fused_case, m) = case(
        "add_layer_norm",
        &fused,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "LayerNormalization"), 1, "{:?}", op_types(&m));

    // unbind exports as one Split into slices of one and a Squeeze each.
    let unbound = Custom(
        |h: &Tensor| {
            let c = h.unbind(1);
            Tensor::stack(&[&(&c[0] * &c[3]), &(&c[1] - &c[2])], 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (unbind_case, m) = case(
        "unbind",
        &unbound,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "Split"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Squeeze"), 4, "{:?}", op_types(&m));

    // Rearranging copies, rounding and ordering: Slice with negative steps,
    // Slice + Concat, Tile, Floor, Round, trunc's Where, TopK for topk and
    // sort, CumSum (roll along the dynamic batch dim too).
    let rearranged = Custom(
        |h: &Tensor| {
            let r = &h.flip(&[1]) * &h.roll(&[1, -1], &[0, 1]);
            let t = h.repeat(&[1, 2]).narrow(1, 3, 4);
            let h3 = h * 3.0;
            let rounded = &(&h3.floor() + &h3.round()) - &h3.trunc();
            let (big, _) = h.topk(2, 1, true);
            let (small, _) = h.topk(2, -1, false);
            let (sorted, idx) = h.sort(1, true);
            let ordered = &(&sorted * &idx.to_dtype(tapir::DType::F32)) + &h.cumsum(1);
            let padded = tapir::nn::pad(h, &[1, -1], 0.5);
            let sum = &(&(&r + &t) + &rounded) + &padded;
            &sum + &(&ordered * &Tensor::cat(&[&big, &small], 1))
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (rearranged_case, m) = case(
        "rearranged",
        &rearranged,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "Tile"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Concat"), 3, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Round"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "TopK"), 3, "{:?}", op_types(&m));
    assert_eq!(count(&m, "CumSum"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Pad"), 1, "{:?}", op_types(&m));

    // An upsampling decoder: ConvTranspose with output padding, and group
    // and instance norm as their formulas (opset 17 has no GroupNormalization).
    let decoder = Decoder::new(&Device::Cpu);
    let (decoder_case, m) = case(
        "decoder",
        &decoder,
        |b| vec![Tensor::randn(&[b, 4, 3, 5])],
        &[2, 3],
    );
    assert_eq!(count(&m, "ConvTranspose"), 2, "{:?}", op_types(&m));
    assert_eq!(count(&m, "ReduceMean"), 6, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Cast"), 0, "{:?}", op_types(&m));

    // interpolate as Resize: sizes after a dynamic batch, or scales; the
    // nearest, bilinear and bicubic modes, with and without align_corners.
    let resized = Custom(
        |h: &Tensor| {
            use tapir::nn::{InterpolateMode as M, interpolate};
            let img = h.reshape(&[-1, 1, 2, 2]);
            let a = interpolate(&img, Some(&[4, 6]), None, M::Bilinear, None);
            let b = interpolate(&img, None, Some(&[2.0, 3.0]), M::Nearest, None);
            let c = interpolate(&img, Some(&[4, 6]), None, M::Bicubic, Some(true));
            let d = interpolate(&img, None, Some(&[2.0, 3.0]), M::Bicubic, None);
            &(&(&a + &b) + &c) + &d
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (resize_case, m) = case(
        "interpolate",
        &resized,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "Resize"), 4, "{:?}", op_types(&m));

    // Pooling options: ceil_mode on both pools (a partial last window),
    // padding left out of the average's divisor, and a 1-D max pool; reflect
    // and replicate (`edge`) padding.
    let pooled = Custom(
        |h: &Tensor| {
            use tapir::nn::{AvgPool2d, MaxPool1d, MaxPool2d};
            let img = h.repeat(&[1, 16]).reshape(&[-1, 2, 4, 8]);
            let (k, s, p) = ((3, 3), (2, 2), (1, 1));
            let max = MaxPool2d {
                kernel: k,
                stride: s,
                padding: p,
                ceil_mode: true,
                ..MaxPool2d::new(3)
            };
            let avg = AvgPool2d {
                kernel: k,
                stride: s,
                padding: p,
                ceil_mode: true,
                count_include_pad: false,
                ..AvgPool2d::new(3)
            };
            let seq = MaxPool1d {
                stride: 2,
                padding: 1,
                ceil_mode: true,
                ..MaxPool1d::new(3)
            };
            let y = &max.forward(&img) + &avg.forward(&img);
            use tapir::nn::{PadMode, pad_with};
            let mirrored = pad_with(&img, &[1, 1, 2, 0], PadMode::Reflect).reshape(&[-1, 120]);
            let edged = pad_with(&h.unsqueeze(1), &[2, 1], PadMode::Replicate).reshape(&[-1, 7]);
            let seq = seq.forward(&h.unsqueeze(1)).reshape(&[-1, 3]);
            Tensor::cat(&[&y.reshape(&[-1, 30]), &seq, &mirrored, &edged], 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (pool_case, m) = case("pools", &pooled, |b| vec![Tensor::randn(&[b, 4])], &[3, 6]);
    assert_eq!(count(&m, "MaxPool"), 2, "{:?}", op_types(&m));
    assert_eq!(count(&m, "AveragePool"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Pad"), 2, "{:?}", op_types(&m));

    // PReLU (a Where), Softmin and LogSoftmax, two LSTMCell steps, the
    // channel dropout (the identity in eval mode), and a GRU and an LSTM
    // from zero states (shaped from the input, so the batch stays dynamic).
    let cell = tapir::nn::LSTMCell::new(4, 3, true);
    let batch_first = tapir::nn::RnnOptions {
        batch_first: true,
        ..Default::default()
    };
    let gru = tapir::nn::GRU::new(2, 3, batch_first);
    let lstm = tapir::nn::LSTM::new(2, 3, batch_first);
    let gated = Custom(
        move |h: &Tensor| {
            use tapir::nn::{Dropout2d, LogSoftmax, PReLU, Softmin};
            let act = PReLU::new(1, 0.25).forward(h);
            let (s, c) = cell.forward(&act, None);
            let (s, c) = cell.forward(h, Some((&s, &c)));
            let drop = Dropout2d::new(0.5);
            drop.eval();
            let img = drop.forward(&h.reshape(&[-1, 1, 2, 2])).reshape(&[-1, 4]);
            let soft = &Softmin { dim: 1 }.forward(&img) + &LogSoftmax { dim: 1 }.forward(&act);
            let seq = h.reshape(&[-1, 2, 2]);
            let (g, _) = gru.forward(&seq, None);
            let (l, (lh, _)) = lstm.forward(&seq, None);
            let rnn = Tensor::cat(
                &[
                    &g.reshape(&[-1, 6]),
                    &l.reshape(&[-1, 6]),
                    &lh.squeeze_dim(0),
                ],
                1,
            );
            Tensor::cat(&[&s, &c, &soft, &rnn], 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (gated_case, m) = case("gated", &gated, |b| vec![Tensor::randn(&[b, 4])], &[3, 6]);
    assert_eq!(count(&m, "Where"), 1, "{:?}", op_types(&m));

    // LP pooling, a channel softmax, constant padding, and bags of ids
    // (the ids computed from the input, so they vary with it) in each mode.
    let bags = [BagMode::Sum, BagMode::Mean, BagMode::Max]
        .map(|mode| tapir::nn::EmbeddingBag::new(10, 3, mode, Some(0)));
    let bagged = Custom(
        move |h: &Tensor| {
            use tapir::nn::{ConstantPad, LPPool2d, Softmax2d};
            let img = h.repeat(&[1, 6]).reshape(&[-1, 2, 3, 4]);
            let lp = LPPool2d {
                stride: Some((1, 2)),
                ceil_mode: true,
                ..LPPool2d::new(2.0, 2)
            }
            .forward(&img);
            let soft = Softmax2d.forward(&img);
            let padded = ConstantPad {
                padding: vec![1, 0, 0, 2],
                value: 0.5,
            }
            .forward(&img);
            let ids = (&h.abs() * 4.0)
                .floor()
                .clamp(0.0, 9.0)
                .to_dtype(DType::I64);
            let mut parts = vec![
                lp.reshape(&[-1, 8]),
                soft.reshape(&[-1, 24]),
                padded.reshape(&[-1, 50]),
            ];
            parts.extend(bags.iter().map(|b| b.forward(&ids)));
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (bag_case, m) = case("bags", &bagged, |b| vec![Tensor::randn(&[b, 4])], &[3, 6]);
    assert_eq!(count(&m, "Gather"), 3, "{:?}", op_types(&m));

    // Volumes: a 3-D convolution (as Conv), its transpose with output
    // padding and groups (ConvTranspose), the 3-D max and average pools,
    // and trilinear and nearest-exact resizing.
    let conv = tapir::nn::Conv3d::new(
        2,
        4,
        (2, 2, 2),
        tapir::nn::Conv3dOptions::default().padding(1),
        true,
    );
    let up_opts = tapir::nn::Conv3dOptions {
        stride: (2, 1, 2),
        groups: 2,
        ..Default::default()
    };
    let up = tapir::nn::ConvTranspose3d::new(4, 2, (2, 1, 2), up_opts, (1, 0, 1), true);
    let volumes = Custom(
        move |h: &Tensor| {
            use tapir::nn::{AvgPool3d, MaxPool3d};
            let vol = h.repeat(&[1, 12]).reshape(&[-1, 2, 2, 3, 4]);
            let c = conv.forward(&vol); // [N, 4, 3, 4, 5]
            let m = MaxPool3d {
                stride: (1, 2, 2),
                ceil_mode: true,
                ..MaxPool3d::new(2)
            }
            .forward(&c); // [N, 4, 2, 2, 3]
            let a = AvgPool3d {
                kernel: (1, 2, 2),
                padding: (0, 1, 1),
                stride: (1, 1, 1),
                count_include_pad: false,
                ..AvgPool3d::new(1)
            }
            .forward(&c); // [N, 4, 3, 5, 6]
            let u = up.forward(&m); // [N, 2, 5, 2, 7]
            use tapir::nn::{InterpolateMode as M, interpolate};
            let t = interpolate(&c, Some(&[4, 5, 6]), None, M::Trilinear, None);
            let e = interpolate(&c, None, Some(&[1.5, 2.0, 0.5]), M::NearestExact, None);
            let parts = [
                m.reshape(&[-1, 48]),
                a.reshape(&[-1, 360]),
                u.reshape(&[-1, 140]),
                t.reshape(&[-1, 480]),
                e.reshape(&[-1, 256]),
            ];
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (volume_case, m) = case(
        "volumes",
        &volumes,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "Conv"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "ConvTranspose"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "MaxPool"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "AveragePool"), 1, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Resize"), 2, "{:?}", op_types(&m));

    // Elementwise math: ONNX's trigonometric and hyperbolic operators, and
    // expm1, log2, log10, exp2, logit, hypot, sinc, fmod, remainder, fmax
    // and logaddexp2 as compositions; amin, prod, tensor_split and unfold.
    let math = Custom(
        |h: &Tensor| {
            let unit = &h.tanh() * 0.9;
            let positive = &h.abs() + 0.5;
            let five = h * 5.0;
            let div = Tensor::from_vec(vec![1.5f32, -1.5, 0.7, -2.5], &[4]);
            let parts = [
                (h * 0.3).tan(),
                unit.asin(),
                unit.acos(),
                h.atan(),
                h.sinh(),
                h.cosh(),
                h.asinh(),
                (&positive + 1.0).acosh(),
                unit.atanh(),
                h.expm1(),
                positive.log2(),
                positive.log10(),
                h.exp2(),
                h.sigmoid().logit(Some(1e-3)),
                five.fmod(&div),
                five.remainder(&div),
                h.hypot(&div),
                h.sinc(),
                h.fmax(&div),
                h.logaddexp2(&div),
                h.amin_dim(1, true),
                (&(h * 0.2) + 1.0).prod_dim(1, true),
                h.tensor_split(3, 1)[2].clone(),
                h.unfold(1, 3, 1).flatten(1, 2),
            ];
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (math_case, m) = case("math", &math, |b| vec![Tensor::randn(&[b, 4])], &[3, 6]);
    assert_eq!(count(&m, "Mod"), 2, "{:?}", op_types(&m));
    assert_eq!(count(&m, "Atanh"), 1, "{:?}", op_types(&m));

    // gather and the scatters (GatherElements, ScatterElements), with
    // constant indices over the first row (index extents below the batch),
    // a source larger than its index, and the row forms.
    let scatters = Custom(
        |h: &Tensor| {
            let at = Tensor::from_vec(vec![3i64, 0, 1, 1], &[1, 4]);
            let distinct = Tensor::from_vec(vec![3i64, 0], &[1, 2]);
            let rows = Tensor::from_vec(vec![2i64, 0], &[2]);
            let src = h * 0.5;
            let reduce = |r, include_self| h.scatter_reduce(1, &at, &src, r, include_self);
            let parts = [
                h + &h.gather(1, &at),
                h.scatter(1, &distinct, &src),
                h.scatter_scalar(1, &distinct, 2.0),
                h.scatter_add(1, &at, &src),
                reduce(tapir::ScatterReduce::Sum, false),
                reduce(tapir::ScatterReduce::Prod, true),
                reduce(tapir::ScatterReduce::Prod, false),
                reduce(tapir::ScatterReduce::Mean, true),
                reduce(tapir::ScatterReduce::Mean, false),
                h.index_add(1, &rows, &src.narrow(1, 0, 2), 1.5),
                h.index_copy(1, &rows, &src.narrow(1, 1, 2)),
                h.index_fill(1, &rows, -1.0),
            ];
            Tensor::cat(&parts.iter().collect::<Vec<_>>(), 1)
        },
        tapir::nn::Linear::new(4, 4, true),
    );
    let (scatter_case, m) = case(
        "scatters",
        &scatters,
        |b| vec![Tensor::randn(&[b, 4])],
        &[3, 6],
    );
    assert_eq!(count(&m, "GatherElements"), 1, "{:?}", op_types(&m));
    assert!(count(&m, "ScatterElements") >= 11, "{:?}", op_types(&m));

    let Some(py) = python() else {
        eprintln!(
            "SKIPPED onnxruntime check: no Python with onnx and onnxruntime (set TAPIR_ONNX_PYTHON)"
        );
        return;
    };
    let cases = dir().join("cases.json");
    std::fs::write(
        &cases,
        json!([
            mlp_case,
            cnn_case,
            lm_case,
            bn_case,
            fused_case,
            unbind_case,
            rearranged_case,
            decoder_case,
            resize_case,
            pool_case,
            gated_case,
            bag_case,
            volume_case,
            math_case,
            scatter_case
        ])
        .to_string(),
    )
    .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/check_onnx.py");
    let out = std::process::Command::new(&py)
        .arg(&script)
        .arg(&cases)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(
        out.status.success(),
        "onnxruntime disagrees with tapir:\n{text}"
    );
    assert_eq!(text.matches(" ok").count(), 30, "{text}");
}

tapir::model! {
    /// Two transposed convolutions (one with output padding and groups)
    /// between group norm and instance norm.
    pub struct Decoder {
        pub up: ConvTranspose2d<4, 6, 3, stride = 2, padding = 1, output_padding = 1>,
        pub gn: GroupNorm<3, 6>,
        pub up2: ConvTranspose2d<6, 4, 2, groups = 2, dilation = 2, bias = false>,
        pub inst: InstanceNorm2d<4, affine = true>,
    }
    fn forward(&self, x: [N, 4, H, W]) -> [N, 4, { 2 * H + 2 }, { 2 * W + 2 }] {
        self.inst(self.up2(self.gn(self.up(x)).relu()))
    }
}

tapir::model! {
    /// A layer with no ONNX mapping, inside a block.
    pub struct HardBlock {
        pub fc: Linear<4, 4>,
        pub act: Hardswish,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.act(self.fc(x))
    }
}

tapir::model! {
    /// Two blocks: the error names where the op ran.
    pub struct HardNet {
        pub blocks: [HardBlock; 2],
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        let mut h = x;
        for block in &self.blocks {
            h = block(h);
        }
        h
    }
}

#[test]
fn an_unmapped_op_in_a_model_is_named_with_its_place() {
    let model = HardNet::new(&Device::Cpu);
    let path = dir().join("hard.onnx");
    let e = onnx::export(
        &model,
        &[&Tensor::randn(&[2, 4])],
        &path,
        ExportOptions::default(),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "onnx::export: cannot export `hardswish` (op #1 in `block.act`): it has no ONNX opset 17 mapping in tapir yet"
    );
}

tapir::model! {
    /// Calls nested in one expression: each op is named by the layer that
    /// ran it, not by the layer its result goes into.
    pub struct Nested {
        pub head: Linear<4, 4>,
        pub act: Hardswish,
        pub stem: Linear<4, 4>,
    }
    fn forward(&self, x: [B, 4]) -> [B, 4] {
        self.head(self.act(self.stem(x)))
    }
}

#[test]
fn an_op_inside_a_nested_call_is_named_by_its_own_layer() {
    let path = dir().join("nested.onnx");
    let e = onnx::export(
        &Nested::new(&Device::Cpu),
        &[&Tensor::randn(&[2, 4])],
        &path,
        ExportOptions::default(),
    );
    assert_eq!(
        e.unwrap_err().to_string(),
        "onnx::export: cannot export `hardswish` (op #1 in `act`): it has no ONNX opset 17 mapping in tapir yet"
    );
}

/// A hand-written model whose forward is a closure over its input.
struct Custom<F: Fn(&Tensor) -> Tensor + Send + Sync>(F, tapir::nn::Linear);

impl<F: Fn(&Tensor) -> Tensor + Send + Sync + 'static> tapir::nn::Module for Custom<F> {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, tapir::nn::TensorKind)) {
        tapir::nn::visit_child("fc", &self.1, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, tapir::nn::TensorKind)) {
        tapir::nn::visit_child_mut("fc", &mut self.1, f);
    }
    fn repr(&self) -> String {
        "Custom".into()
    }
}

impl<F: Fn(&Tensor) -> Tensor + Send + Sync + 'static> Exportable for Custom<F> {
    fn export_forward(&self, inputs: &[&Tensor]) -> tapir::Result<Vec<Tensor>> {
        Ok(vec![(self.0)(&self.1.forward(inputs[0]))])
    }
    fn dynamic_dims(&self) -> Vec<Vec<Option<&'static str>>> {
        vec![vec![Some("batch"), None]]
    }
}

fn export_error<F: Fn(&Tensor) -> Tensor + Send + Sync + 'static>(f: F) -> String {
    let model = Custom(f, tapir::nn::Linear::new(4, 4, true));
    let path = dir().join("bad.onnx");
    let e = onnx::export(
        &model,
        &[&Tensor::randn(&[3, 4])],
        &path,
        ExportOptions::default(),
    );
    assert!(!path.exists(), "nothing is written on error");
    e.unwrap_err().to_string()
}

#[test]
fn what_cannot_be_exported_is_an_error_naming_the_op() {
    let e = export_error(|h| h.hardswish());
    assert_eq!(
        e,
        "onnx::export: cannot export `hardswish` (op #1): it has no ONNX opset 17 mapping in tapir yet"
    );
    // A branch on the batch size: the two runs take different paths.
    let e = export_error(|h| if h.size(0) > 3 { h.relu() } else { h.tanh() });
    assert!(
        e.contains("data-dependent control flow") && e.contains("`tanh`"),
        "{e}"
    );
    // A tensor computed outside any op tapir records (through host memory).
    let e = export_error(|h| {
        let v = h.to_vec::<f32>();
        h + &Tensor::from_vec(v, h.shape())
    });
    assert!(
        e.contains("input 1 of `add`") && e.contains("changes with the model's inputs"),
        "{e}"
    );
    let e = export_error(|h| {
        h.add_(&Tensor::ones(&[1]));
        h.clone()
    });
    assert!(e.contains("`add_`") && e.contains("in place"), "{e}");
    let e = export_error(|h| tapir::nn::pad_with(h, &[1, 1], tapir::nn::PadMode::Circular));
    assert!(e.contains("`pad`") && e.contains("`wrap`"), "{e}");
    let e = export_error(|h| {
        let at = Tensor::from_vec(vec![1i64, 1], &[1, 2]);
        h.scatter_reduce(1, &at, h, tapir::ScatterReduce::Amax, true)
    });
    assert!(
        e.contains("`scatter_reduce`") && e.contains("opset 18"),
        "{e}"
    );
    // A batch norm without running statistics normalises by each batch's.
    let e = export_error(|h| tapir::nn::batch_norm(h, None, None, None, None, true, 0.1, 1e-5));
    assert!(
        e.contains("`batch_norm`") && e.contains("track_running_stats false"),
        "{e}"
    );
}

#[test]
fn options_name_inputs_outputs_and_their_dynamic_axes() {
    let model = tapir::nn::Sequential::new().add(tapir::nn::Linear::new(4, 2, true));
    let path = dir().join("named.onnx");
    let opts = ExportOptions {
        input_names: vec!["features".into()],
        output_names: vec!["scores".into()],
        dynamic_axes: [
            ("features".to_string(), [(0, "batch".to_string())].into()),
            ("scores".to_string(), [(0, "batch".to_string())].into()),
        ]
        .into(),
        ..Default::default()
    };
    model.train();
    onnx::export(&model, &[&Tensor::randn(&[5, 4])], &path, opts).unwrap();
    assert!(
        model.is_training(),
        "export runs in eval mode and puts training back"
    );
    let m = onnx::read_model(&path).unwrap();
    let g = m.graph.as_ref().unwrap();
    assert_eq!(g.input[0].name.as_deref(), Some("features"));
    assert_eq!(dims(&g.input[0]), ["batch", "4"]);
    assert_eq!(g.output[0].name.as_deref(), Some("scores"));
    assert_eq!(dims(&g.output[0]), ["batch", "2"]);
    // Without dynamic axes a plain module exports static shapes.
    onnx::export(
        &model,
        &[&Tensor::randn(&[5, 4])],
        &path,
        ExportOptions::default(),
    )
    .unwrap();
    let m = onnx::read_model(&path).unwrap();
    assert_eq!(dims(&m.graph.as_ref().unwrap().input[0]), ["5", "4"]);
    let e = onnx::export(
        &model,
        &[&Tensor::randn(&[5, 4])],
        &path,
        ExportOptions {
            opset_version: 13,
            ..Default::default()
        },
    );
    assert!(e.unwrap_err().to_string().contains("tapir writes opset 17"));
    // A hand-written Sequential names its layers by index in errors.
    let bad = tapir::nn::Sequential::new()
        .add(tapir::nn::Linear::new(4, 4, true))
        .add(tapir::nn::Hardswish);
    let e = onnx::export(
        &bad,
        &[&Tensor::randn(&[2, 4])],
        &path,
        ExportOptions::default(),
    );
    assert!(e.unwrap_err().to_string().contains("(op #1 in `1`)"));
    std::fs::write(&path, b"not a model").unwrap();
    assert!(
        onnx::read_model(&path)
            .unwrap_err()
            .to_string()
            .contains("not an ONNX model")
    );
}
