//! The module tree against PyTorch's (`tests/goldens/modules.json`, from
//! `scripts/gen_module_goldens.py`): `named_modules()` gives PyTorch's
//! names in PyTorch's order, each module is what PyTorch says it is, and
//! `apply` / `modules()` act on the layers a PyTorch loop would.

use crate::seed;
use tapir::nn::{
    BatchNorm, Conv2d, Dropout, Flatten, Forward, LSTM, LayerNorm, Linear, MaxPool2d, Module,
    ModuleDict, ReLU, RnnOptions, Sequential, Transformer, TransformerDecoderLayer,
    TransformerDecoderLayerOptions, TransformerEncoder, TransformerEncoderLayer,
    TransformerEncoderLayerOptions, init,
};
use tapir::{Conv2dOptions, Tensor};

/// PyTorch's `[name, class]` rows for one model of the golden file.
fn torch_tree(model: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/goldens/modules.json"
    ))
    .expect("tests/goldens/modules.json is checked in");
    let json: serde_json::Value = serde_json::from_str(&text).expect("modules.json parses");
    json["models"][model]
        .as_array()
        .unwrap_or_else(|| panic!("modules.json has no model {model}"))
        .iter()
        .map(|row| {
            let s = |i: usize| row[i].as_str().expect("a string").to_string();
            (s(0), s(1))
        })
        .collect()
}

/// tapir's rows: each name with the class its repr starts with.
fn tapir_tree(m: &dyn Module) -> Vec<(String, String)> {
    m.named_modules()
        .into_iter()
        .map(|(name, sub)| {
            let repr = sub.repr();
            let class = repr.split(['(', '\n']).next().unwrap_or("").to_string();
            (name, class)
        })
        .collect()
}

/// Asserts the two trees are equal row by row. PyTorch's attention keeps
/// its output projection as a `NonDynamicallyQuantizableLinear` (a
/// `Linear` subclass for quantisation); tapir's is a plain `Linear`.
fn assert_same_tree(model: &str, ours: &dyn Module) {
    let torch: Vec<(String, String)> = torch_tree(model)
        .into_iter()
        .map(|(n, c)| match c.as_str() {
            "NonDynamicallyQuantizableLinear" => (n, "Linear".to_string()),
            _ => (n, c),
        })
        .collect();
    let ours = tapir_tree(ours);
    for (i, (t, o)) in torch.iter().zip(&ours).enumerate() {
        assert_eq!(
            t, o,
            "{model}: module {i} is {o:?} in tapir, {t:?} in PyTorch"
        );
    }
    assert_eq!(
        torch.len(),
        ours.len(),
        "{model}: tapir lists {} modules, PyTorch {}",
        ours.len(),
        torch.len()
    );
}

fn small_layer() -> TransformerEncoderLayerOptions {
    TransformerEncoderLayerOptions {
        dim_feedforward: 16,
        ..Default::default()
    }
}

#[test]
fn named_modules_match_pytorch_for_the_seed_mlp_by_hand_and_by_macro() {
    assert_same_tree("seed_mlp", &seed::Mlp::seed());
    assert_same_tree(
        "seed_mlp",
        &crate::model_macro::Mlp::<784, 10>::new(&tapir::Device::Cpu),
    );
}

#[test]
fn named_modules_match_pytorch_for_the_transformer_stacks() {
    let layer = TransformerEncoderLayer::new(8, 2, small_layer());
    let encoder = TransformerEncoder::new(layer, 2, Some(LayerNorm::new(&[8], 1e-5, true)));
    assert_same_tree("encoder", &encoder);
    let decoder_opts = TransformerDecoderLayerOptions {
        dim_feedforward: 16,
        ..Default::default()
    };
    assert_same_tree(
        "decoder_layer",
        &TransformerDecoderLayer::new(8, 2, decoder_opts),
    );
    assert_same_tree("transformer", &Transformer::new(8, 2, 1, 1, small_layer()));
}

#[test]
fn named_modules_match_pytorch_for_containers() {
    let cnn = Sequential::new()
        .add(Conv2d::new(
            1,
            8,
            (3, 3),
            Conv2dOptions::default().padding(1),
            true,
        ))
        .add(BatchNorm::new_2d(8))
        .add(ReLU)
        .add(MaxPool2d::new(2))
        .add(
            Sequential::new()
                .add(Dropout::new(0.1))
                .add(Flatten::default()),
        )
        .add(Linear::new(8 * 14 * 14, 10, true));
    assert_same_tree("cnn", &cnn);
    let mut dict: ModuleDict<Box<dyn Module>> = ModuleDict::new();
    dict.insert("rnn", Box::new(LSTM::new(4, 8, RnnOptions::default())));
    dict.insert("head", Box::new(Linear::new(8, 2, true)));
    assert_same_tree("lstm_head", &dict);
}

/// `for m in model.modules(): if isinstance(m, nn.Dropout): m.p = 0.0`,
/// and `model.apply(init_weights)`, on a transformer.
#[test]
fn apply_reaches_every_layer_a_pytorch_loop_would() {
    let mut encoder =
        TransformerEncoder::new(TransformerEncoderLayer::new(8, 2, small_layer()), 2, None);
    let mut seen = (0, 0);
    encoder.apply(&mut |m| {
        if let Some(d) = m.downcast_mut::<Dropout>() {
            d.p = 0.0;
            seen.0 += 1;
        }
        if let Some(l) = m.downcast_mut::<Linear>() {
            init::zeros_(&l.weight);
            seen.1 += 1;
        }
    });
    // 3 dropouts and 3 linears (out_proj, linear1, linear2) per layer.
    assert_eq!(seen, (6, 6));
    let x = Tensor::randn(&[5, 2, 8]);
    // Train mode with every dropout at p = 0 is deterministic...
    assert_eq!(
        encoder.forward(&x).to_vec::<f32>(),
        encoder.forward(&x).to_vec::<f32>()
    );
    // ...and equal to eval mode.
    let train = encoder.forward(&x).to_vec::<f32>();
    encoder.eval();
    assert!(
        encoder
            .modules()
            .iter()
            .filter(|m| m.is::<Dropout>())
            .all(|m| !m.is_training())
    );
    assert_eq!(train, encoder.forward(&x).to_vec::<f32>());
    let zeros = encoder
        .get_submodule("layers.1.self_attn.out_proj")
        .and_then(|m| m.downcast_ref::<Linear>())
        .expect("the second layer's attention has an output projection");
    assert!(zeros.weight.to_vec::<f32>().iter().all(|w| *w == 0.0));
    assert!(encoder.get_submodule("layers.2").is_none());
}

/// A compiled model is walked as the model it wraps (its tensors are named
/// the same way), and downcasts see through `Box`.
#[test]
fn walks_see_through_compile_and_boxes() {
    let boxed: Box<dyn Forward> = Box::new(seed::Mlp::seed());
    let compiled = tapir::compile(boxed);
    assert!(compiled.get_submodule("").unwrap().is::<seed::Mlp>());
    assert_eq!(compiled.named_modules().len(), 28);
    assert!(
        compiled
            .get_submodule("blocks.3.net.1")
            .unwrap()
            .is::<LayerNorm>()
    );
}
