//! `weight_norm` and `spectral_norm`: built here for `nn_goldens` (values,
//! gradients, and spectral norm's power-iteration buffers against PyTorch),
//! and checked beyond them: finite differences, removal, training, reprs
//! and errors; `ModuleDict`, holding them by name; and the batch-norm
//! fusions for inference.

use crate::common::{close, dev, panic_message};
use tapir::gradcheck;
use tapir::nn::*;
use tapir::optim::{Optimizer, SGD, SgdConfig};
use tapir::prelude::*;

/// The parametrized layers of `scripts/gen_nn_goldens.py`, by name.
pub(super) fn build(name: &str) -> Option<Box<dyn Forward>> {
    Some(match name {
        "weight_norm_linear" => Box::new(weight_norm(Linear::new(4, 3, true), "weight", Some(0))),
        "weight_norm_conv2d_dim1" => {
            let conv = Conv2d::new(2, 3, (2, 2), Conv2dOptions::default(), true);
            Box::new(weight_norm(conv, "weight", Some(1)))
        }
        "weight_norm_whole" => Box::new(weight_norm(Linear::new(3, 2, false), "weight", None)),
        "spectral_norm_linear_train" => Box::new(spectral_norm(
            Linear::new(4, 5, true),
            "weight",
            2,
            1e-12,
            None,
        )),
        "spectral_norm_conv2d_eval" => {
            let conv = Conv2d::new(2, 3, (3, 3), Conv2dOptions::default(), true);
            Box::new(spectral_norm(conv, "weight", 1, 1e-12, None))
        }
        "spectral_norm_convtranspose2d" => {
            let up = ConvTranspose2d::new(3, 2, (2, 2), Conv2dOptions::default(), (0, 0), true);
            Box::new(spectral_norm(up, "weight", 1, 1e-12, None))
        }
        _ => return None,
    })
}

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    dev(Tensor::randn_with(shape, &Generator::new(seed)).to_dtype(DType::F64))
}

#[test]
fn parametrization_gradients_match_finite_differences() {
    let g = rnd(&[3, 1, 1], 1).requires_grad_(true);
    let v = rnd(&[3, 2, 4], 2).requires_grad_(true);
    for dim in [Some(0), None] {
        let g = if dim.is_none() {
            rnd(&[], 3).requires_grad_(true)
        } else {
            g.clone()
        };
        let f = |t: &[Tensor]| {
            let wn = WeightNorm {
                magnitude: t[0].clone(),
                direction: t[1].clone(),
                dim,
            };
            wn.value(true).sin().sum()
        };
        gradcheck(f, &[g, v.clone()], 1e-6, 1e-6, 1e-5).unwrap();
    }
    // Eval mode: u and v fixed, sigma = u·Wv a function of the weight.
    let (u, vv) = (rnd(&[3], 4), rnd(&[8], 5));
    let f = |t: &[Tensor]| {
        let sn = SpectralNorm {
            original: t[0].clone(),
            u: u.clone(),
            v: vv.clone(),
            n_power_iterations: 1,
            eps: 1e-12,
            dim: 0,
        };
        sn.value(false).sin().sum()
    };
    gradcheck(f, std::slice::from_ref(&v), 1e-6, 1e-6, 1e-5).unwrap();
}

#[test]
fn spectral_norm_converges_to_unit_spectral_norm_in_training() {
    manual_seed(7);
    let layer = spectral_norm(Linear::new(6, 4, false), "weight", 1, 1e-12, None);
    let x = Tensor::randn(&[2, 6]);
    for _ in 0..30 {
        layer.forward(&x);
    }
    // The largest singular value of W / sigma: sqrt of W^T W's largest eigenvalue.
    let w = no_grad(|| layer.value()).to_dtype(DType::F64);
    let gram = w.matmul(&w.t());
    let mut e = Tensor::ones(&[4]).to_dtype(DType::F64);
    for _ in 0..200 {
        let next = gram.matmul(&e);
        e = &next / &next.norm(2.0);
    }
    let top = e.dot(&gram.matmul(&e)).item::<f64>().sqrt();
    assert!((top - 1.0).abs() < 1e-4, "largest singular value {top}");
    // Eval mode keeps the vectors.
    layer.eval();
    let u = layer.parametrization.u.to_vec::<f32>();
    layer.forward(&x);
    assert_eq!(layer.parametrization.u.to_vec::<f32>(), u);
}

#[test]
fn removing_keeps_the_computed_weight_and_training_moves_the_originals() {
    manual_seed(8);
    let layer = weight_norm(Linear::new(3, 2, true), "weight", Some(0));
    let x = Tensor::randn(&[4, 3]);
    let before = layer.forward(&x);
    let g0 = layer.parametrization.magnitude.to_vec::<f32>();
    let cfg = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    let mut opt = SGD::new(layer.parameters(), cfg);
    opt.zero_grad();
    layer.forward(&x).square().sum().backward();
    opt.step();
    assert_ne!(
        layer.parametrization.magnitude.to_vec::<f32>(),
        g0,
        "g trains"
    );
    let after = layer.forward(&x);
    let plain = layer.remove();
    close("removed", &plain.forward(&x), &after, 1e-6, 1e-6).unwrap();
    assert!(plain.weight.requires_grad());
    assert_ne!(before.to_vec::<f32>(), after.to_vec::<f32>());
}

#[test]
fn reprs_and_errors_are_pytorchs() {
    let layer = weight_norm(Linear::new(4, 3, true), "weight", Some(0));
    assert_eq!(
        layer.repr(),
        "ParametrizedLinear(\n  in_features=4, out_features=3, bias=True\n  (parametrizations): ModuleDict(\n    (weight): ParametrizationList(\n      (0): _WeightNorm()\n    )\n  )\n)"
    );
    let conv = Conv2d::new(2, 3, (3, 3), Conv2dOptions::default(), true);
    let sn = spectral_norm(conv, "weight", 1, 1e-12, None);
    assert!(sn.repr().starts_with(
        "ParametrizedConv2d(\n  2, 3, kernel_size=(3, 3), stride=(1, 1)\n  (parametrizations)"
    ));
    assert!(sn.repr().contains("(0): _SpectralNorm()"));
    let msg = panic_message(|| {
        weight_norm(Linear::new(4, 3, true), "weights", Some(0));
    });
    assert_eq!(
        msg,
        "weight_norm: Linear(in_features=4, out_features=3, bias=True) has no parameter `weights` (it has weight, bias)"
    );
    let msg = panic_message(|| {
        weight_norm(Linear::new(4, 3, true), "weight", Some(2));
    });
    assert_eq!(
        msg,
        "weight_norm: dim Some(2) is out of range for `weight` of shape [3, 4]"
    );
}

#[test]
fn module_dicts_name_load_and_print_as_pytorchs() {
    let mut heads: ModuleDict<Box<dyn Forward>> = ModuleDict::new();
    heads.insert("cls", Box::new(Linear::new(4, 3, true)));
    heads.insert(
        "norm",
        Box::new(weight_norm(Linear::new(4, 3, false), "weight", Some(0))),
    );
    let names: Vec<String> = heads.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "cls.weight",
            "cls.bias",
            "norm.parametrizations.weight.original0",
            "norm.parametrizations.weight.original1"
        ]
    );
    assert!(heads.repr().starts_with(
        "ModuleDict(\n  (cls): Linear(in_features=4, out_features=3, bias=True)\n  (norm): ParametrizedLinear("
    ));
    // Replacing a key keeps its place; a state dict loads back by name.
    let old = heads.insert("cls", Box::new(Linear::new(4, 3, true)));
    assert!(old.is_some());
    assert_eq!(heads.keys().collect::<Vec<_>>(), ["cls", "norm"]);
    let mut copy: ModuleDict<Box<dyn Forward>> = ModuleDict::new();
    copy.insert("cls", Box::new(Linear::new(4, 3, true)));
    copy.insert(
        "norm",
        Box::new(weight_norm(Linear::new(4, 3, false), "weight", Some(0))),
    );
    let report = copy.load_state_dict(&heads.state_dict(), true).unwrap();
    assert!(report.is_clean(), "{report}");
    let x = Tensor::randn(&[2, 4]);
    assert_eq!(
        copy["norm"].forward(&x).to_vec::<f32>(),
        heads["norm"].forward(&x).to_vec::<f32>()
    );
    assert_eq!(
        panic_message(|| {
            let _ = &heads["head"];
        }),
        "ModuleDict: no key \"head\" (keys: [\"cls\", \"norm\"])"
    );
    assert!(heads.remove("cls").is_some() && heads.len() == 1);
}

#[test]
fn fused_batch_norms_compute_what_the_pair_did() {
    manual_seed(13);
    let conv = Conv2d::new(3, 4, (3, 3), Conv2dOptions::default().padding(1), true);
    let bn = BatchNorm::new_2d(4).affine(false);
    let linear = Linear::new(5, 4, false);
    let bn1 = BatchNorm::new_1d(4).eps(1e-3);
    for _ in 0..3 {
        bn.forward(&conv.forward(&Tensor::randn(&[6, 3, 5, 5])));
        bn1.forward(&linear.forward(&Tensor::randn(&[6, 5])));
    }
    let msg = panic_message(|| {
        fuse_conv_bn_eval(&conv, &bn);
    });
    assert_eq!(
        msg,
        "fuse_conv_bn_eval: fusing is only for eval mode; call .eval() on the batch norm first"
    );
    bn.eval();
    bn1.eval();
    let x = Tensor::randn(&[2, 3, 5, 5]);
    let fused = fuse_conv_bn_eval(&conv, &bn);
    close(
        "conv",
        &fused.forward(&x),
        &bn.forward(&conv.forward(&x)),
        1e-5,
        1e-5,
    )
    .unwrap();
    let v = Tensor::randn(&[7, 5]);
    let fused = fuse_linear_bn_eval(&linear, &bn1);
    close(
        "linear",
        &fused.forward(&v),
        &bn1.forward(&linear.forward(&v)),
        1e-5,
        1e-5,
    )
    .unwrap();
    assert!(fused.weight.requires_grad() && fused.bias.is_some());
}
