//! The loss modules: each passes every one of its fields to its function
//! (checked with values other than the defaults, so a field dropped on the
//! way shows), keeps its class weights as PyTorch's buffers, and prints as
//! PyTorch's.

use tapir::nn::*;
use tapir::prelude::*;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn_with(shape, &Generator::new(seed))
}

fn same(what: &str, a: Tensor, b: Tensor) {
    assert_eq!(a.to_vec::<f32>(), b.to_vec::<f32>(), "{what}");
}

#[test]
fn loss_modules_pass_every_option_to_their_function() {
    let (x, y) = (rnd(&[4, 5], 1), rnd(&[4, 5], 2));
    let ids = Tensor::from_vec(vec![1i64, 4, 0, 2], &[4]);
    let w = &rnd(&[5], 3).abs() + 0.5;
    let r = Reduction::Sum;
    let ce = CrossEntropyLoss {
        weight: Some(w.clone()),
        ignore_index: 4,
        reduction: r,
        label_smoothing: 0.2,
    };
    let o = CrossEntropyOptions {
        weight: Some(w.clone()),
        ignore_index: 4,
        reduction: r,
        label_smoothing: 0.2,
    };
    same(
        "CrossEntropyLoss",
        ce.forward(&x, &ids),
        cross_entropy_with(&x, &ids, &o),
    );
    let nll = NLLLoss {
        weight: Some(w.clone()),
        ignore_index: 0,
        reduction: r,
    };
    let o = CrossEntropyOptions {
        ignore_index: 0,
        label_smoothing: 0.0,
        ..o
    };
    let logp = x.log_softmax(1);
    same(
        "NLLLoss",
        nll.forward(&logp, &ids),
        nll_loss_with(&logp, &ids, &o),
    );
    same(
        "MSELoss",
        MSELoss { reduction: r }.forward(&x, &y),
        mse_loss(&x, &y, r),
    );
    same(
        "L1Loss",
        L1Loss { reduction: r }.forward(&x, &y),
        l1_loss(&x, &y, r),
    );
    let smooth = SmoothL1Loss {
        reduction: r,
        beta: 0.3,
    };
    same(
        "SmoothL1Loss",
        smooth.forward(&x, &y),
        smooth_l1_loss(&x, &y, r, 0.3),
    );
    let huber = HuberLoss {
        reduction: r,
        delta: 0.4,
    };
    same(
        "HuberLoss",
        huber.forward(&x, &y),
        huber_loss(&x, &y, r, 0.4),
    );
    let (p, t) = (x.sigmoid(), y.sigmoid());
    let bce = BCELoss {
        weight: Some(w.clone()),
        reduction: r,
    };
    same(
        "BCELoss",
        bce.forward(&p, &t),
        binary_cross_entropy(&p, &t, Some(&w), r),
    );
    let pw = &w * 2.0;
    let bcel = BCEWithLogitsLoss {
        weight: Some(w.clone()),
        reduction: r,
        pos_weight: Some(pw.clone()),
    };
    let want = binary_cross_entropy_with_logits(&x, &t, Some(&w), Some(&pw), r);
    same("BCEWithLogitsLoss", bcel.forward(&x, &t), want);
    let kl = KLDivLoss {
        reduction: r,
        log_target: true,
    };
    same(
        "KLDivLoss",
        kl.forward(&logp, &y.log_softmax(1)),
        kl_div(&logp, &y.log_softmax(1), r, true),
    );
    let signs = y.sign();
    same(
        "SoftMarginLoss",
        SoftMarginLoss { reduction: r }.forward(&x, &signs),
        soft_margin_loss(&x, &signs, r),
    );
    let hinge = HingeEmbeddingLoss {
        margin: 0.7,
        reduction: r,
    };
    same(
        "HingeEmbeddingLoss",
        hinge.forward(&x, &signs),
        hinge_embedding_loss(&x, &signs, 0.7, r),
    );
    let mm = MultiMarginLoss {
        p: 2,
        margin: 0.6,
        weight: Some(w.clone()),
        reduction: r,
    };
    same(
        "MultiMarginLoss",
        mm.forward(&x, &ids),
        multi_margin_loss(&x, &ids, 2, 0.6, Some(&w), r),
    );
    let listed = Tensor::from_vec(
        (0..20).map(|i| [3i64, 0, -1, 2, 1][i % 5]).collect(),
        &[4, 5],
    );
    let mlm = MultiLabelMarginLoss { reduction: r };
    same(
        "MultiLabelMarginLoss",
        mlm.forward(&x, &listed),
        multilabel_margin_loss(&x, &listed, r),
    );
    let labels = y.gt_scalar(0.0).to_dtype(DType::F32);
    let mlsm = MultiLabelSoftMarginLoss {
        weight: Some(w.clone()),
        reduction: r,
    };
    let want = multilabel_soft_margin_loss(&x, &labels, Some(&w), r);
    same("MultiLabelSoftMarginLoss", mlsm.forward(&x, &labels), want);
    let counts = y.abs().floor();
    let pois = PoissonNLLLoss {
        log_input: false,
        full: true,
        eps: 1e-3,
        reduction: r,
    };
    let want = poisson_nll_loss(&x.exp(), &counts, false, true, 1e-3, r);
    same("PoissonNLLLoss", pois.forward(&x.exp(), &counts), want);
    let var = &y.abs() + 0.1;
    let gauss = GaussianNLLLoss {
        full: true,
        eps: 0.2,
        reduction: r,
    };
    same(
        "GaussianNLLLoss",
        gauss.forward(&x, &y, &var),
        gaussian_nll_loss(&x, &y, &var, true, 0.2, r),
    );
    let rank = MarginRankingLoss {
        margin: 0.5,
        reduction: r,
    };
    same(
        "MarginRankingLoss",
        rank.forward(&x, &y, &signs),
        margin_ranking_loss(&x, &y, &signs, 0.5, r),
    );
    let pair = Tensor::from_vec(vec![1.0f32, -1.0, -1.0, 1.0], &[4]);
    let cos = CosineEmbeddingLoss {
        margin: 0.3,
        reduction: r,
    };
    same(
        "CosineEmbeddingLoss",
        cos.forward(&x, &y, &pair),
        cosine_embedding_loss(&x, &y, &pair, 0.3, r),
    );
    let o = TripletMarginOptions {
        margin: 0.4,
        p: 1.0,
        eps: 1e-3,
        swap: true,
    };
    let trip = TripletMarginLoss {
        options: o,
        reduction: r,
    };
    let z = rnd(&[4, 5], 4);
    same(
        "TripletMarginLoss",
        trip.forward(&x, &y, &z),
        triplet_margin_loss(&x, &y, &z, o, r),
    );
    let lp = rnd(&[6, 2, 4], 5).log_softmax(2);
    let targets = Tensor::from_vec(vec![1i64, 2, 3, 3], &[2, 2]);
    let o = CtcOptions {
        blank: 0,
        reduction: r,
        zero_infinity: true,
    };
    let ctc = CTCLoss { options: o };
    same(
        "CTCLoss",
        ctc.forward(&lp, &targets, &[6, 5], &[2, 1]),
        ctc_loss(&lp, &targets, &[6, 5], &[2, 1], &o),
    );
}

#[test]
fn class_weights_are_buffers_and_reprs_are_pytorchs() {
    let ce = CrossEntropyLoss {
        weight: Some(Tensor::ones(&[3])),
        ..Default::default()
    };
    let names: Vec<String> = ce.state_dict().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight"]);
    assert!(ce.parameters().is_empty());
    assert!(CrossEntropyLoss::default().state_dict().is_empty());
    let bce = BCEWithLogitsLoss {
        weight: Some(Tensor::ones(&[3])),
        pos_weight: Some(Tensor::ones(&[3])),
        ..Default::default()
    };
    let names: Vec<String> = bce.named_buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["weight", "pos_weight"]);
    assert_eq!(ce.to_string(), "CrossEntropyLoss()");
    assert_eq!(TripletMarginLoss::default().repr(), "TripletMarginLoss()");
    assert_eq!(CTCLoss::default().repr(), "CTCLoss()");
    // PyTorch's defaults.
    let d = CrossEntropyLoss::default();
    assert_eq!(
        (d.ignore_index, d.reduction, d.label_smoothing),
        (-100, Reduction::Mean, 0.0)
    );
    assert_eq!(
        (SmoothL1Loss::default().beta, HuberLoss::default().delta),
        (1.0, 1.0)
    );
    let p = PoissonNLLLoss::default();
    assert_eq!((p.log_input, p.full, p.eps), (true, false, 1e-8));
    assert_eq!(GaussianNLLLoss::default().eps, 1e-6);
}

#[test]
fn triplet_with_distance_defaults_to_the_euclidean_triplet_loss() {
    let (a, p, n) = (rnd(&[5, 4], 6), rnd(&[5, 4], 7), rnd(&[5, 4], 8));
    let module = TripletMarginWithDistanceLoss {
        swap: true,
        margin: 0.7,
        reduction: Reduction::None,
        ..Default::default()
    };
    let o = TripletMarginOptions {
        margin: 0.7,
        swap: true,
        ..Default::default()
    };
    same(
        "TripletMarginWithDistanceLoss",
        module.forward(&a, &p, &n),
        triplet_margin_loss(&a, &p, &n, o, Reduction::None),
    );
    assert_eq!(module.repr(), "TripletMarginWithDistanceLoss()");
}

#[test]
fn gumbel_softmax_samples_the_softmax_and_hard_passes_the_soft_gradient() {
    // The Gumbel-max trick: the hard sample's class is distributed as
    // softmax(logits); 6000 draws put each frequency within 0.03.
    let logits = Tensor::from_vec(vec![1.0f32, 0.0, -1.0], &[1, 3]).expand(&[6000, 3]);
    let y = gumbel_softmax(&logits, 1.0, true, -1);
    let freq = y.mean_dims(&[0], false).to_vec::<f32>();
    let want = Tensor::from_vec(vec![1.0f32, 0.0, -1.0], &[3])
        .softmax(0)
        .to_vec::<f32>();
    for (f, w) in freq.iter().zip(&want) {
        assert!((f - w).abs() < 0.03, "{freq:?} vs {want:?}");
    }
    // Same draws: the hard sample's gradient is the soft sample's.
    let x = rnd(&[4, 5], 9).requires_grad_(true);
    let w = rnd(&[4, 5], 10);
    let draw = |hard| gumbel_softmax_with(&x, 0.5, hard, 1, &Generator::new(12));
    (&draw(false) * &w).sum().backward();
    let soft = x.grad().unwrap().to_vec::<f32>();
    x.set_grad(None);
    let hard = draw(true);
    (&hard * &w).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), soft);
    assert!(hard.to_vec::<f32>().iter().all(|&v| v == 0.0 || v == 1.0));
}
