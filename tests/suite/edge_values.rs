//! Values at the edges of each function's range (infinities, zeros' signs,
//! the largest floats, logits far from 0, NaN) as PyTorch 2.15 gives them
//! on the CPU: `scripts/edge_values_torch.py` prints PyTorch's value for
//! each input here (the one exception is said where it is). A sweep of
//! every elementwise function and reduction over such inputs against
//! PyTorch found the differences these pin.

use tapir::autograd::{GradOptions, grad_with};
use tapir::{DType, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_dtype(DType::F32).to_vec()
}

/// `got` equals `want` bit for bit but for NaN's payload (`==` would
/// pass -0 for +0, and fail NaN for NaN).
fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan();
        assert!(same, "{what}[{i}]: got {g:?}, PyTorch gives {w:?}");
    }
}

/// `asinh` and `acosh` of the largest floats are finite: `ln 2x`, where
/// libm's form (Rust's) overflowed to `inf`.
#[test]
fn inverse_hyperbolics_of_the_largest_floats_are_finite() {
    let x = Tensor::from_vec(vec![f32::MAX, -f32::MAX, 1e30], &[3]);
    assert_same(
        "asinh",
        &f32s(&x.asinh()),
        &[89.415985, -89.415985, 69.7707],
    );
    let acosh = f32s(&Tensor::from_vec(vec![f32::MAX], &[1]).acosh());
    assert_same("acosh", &acosh, &[89.415985]);
    let wide = Tensor::from_vec(vec![f64::MAX, 1e300], &[2]);
    let want = [f64::MAX.ln() + std::f64::consts::LN_2, 1e300f64.asinh()];
    let got: Vec<f64> = wide.asinh().to_vec();
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() < 1e-12,
            "asinh in f64: {got:?}, want {want:?}"
        );
    }
}

/// Zeros keep PyTorch's signs: `round` keeps the input's, `logsigmoid` of
/// a large positive is +0, and `lerp` at weight 1 is `end`, -0 included
/// as in PyTorch's vectorised loop, `end + (w - 1) (end - start)` (its
/// scalar tail, `end - (end - start) (1 - w)`, gives +0 for this short
/// tensor; tapir takes the vectorised formula at every length).
#[test]
fn zeros_keep_pytorchs_signs() {
    let x = Tensor::from_vec(vec![-0.4f32, -0.5, -1e-7, 0.4, -2.5], &[5]);
    assert_same("round", &f32s(&x.round()), &[-0.0, -0.0, -0.0, 0.0, -2.0]);
    let big = Tensor::from_vec(vec![1e4f32, f32::INFINITY, -100.0], &[3]);
    assert_same("logsigmoid", &f32s(&big.logsigmoid()), &[0.0, 0.0, -100.0]);
    let start = Tensor::from_vec(vec![0.0f32, 1e20, -1.0, 7.0], &[4]);
    let end = Tensor::from_vec(vec![-0.0f32, 1.0, 2.5, -3.0], &[4]);
    let one = Tensor::scalar(1.0f32);
    assert_same(
        "lerp(w = 1)",
        &f32s(&start.lerp(&end, &one)),
        &[-0.0, 1.0, 2.5, -3.0],
    );
    // Weights below 0.5 step from the start (no fused multiply-add here,
    // so within an ulp of PyTorch's).
    let quarter = f32s(&start.lerp(&end, &Tensor::scalar(0.25f32)));
    assert_eq!(&quarter[2..], [-0.125, 4.5]);
}

/// `hypot` neither overflows nor underflows on the way, and its gradient
/// is each input over the result.
#[test]
fn hypot_neither_overflows_nor_underflows() {
    let a = Tensor::from_vec(vec![3.0f32, 1e20, 1e-40, 1e30], &[4]).requires_grad_(true);
    let b = Tensor::from_vec(vec![4.0f32, 0.0, 1e-40, -1e30], &[4]).requires_grad_(true);
    let h = a.hypot(&b);
    assert_same("hypot", &f32s(&h), &[5.0, 1e20, 1.4142e-40, 1.4142135e30]);
    h.sum().backward();
    let (ga, gb) = (f32s(&a.grad().unwrap()), f32s(&b.grad().unwrap()));
    assert_same("d hypot / da", &ga[..2], &[0.6, 1.0]);
    assert_same("d hypot / db", &gb[..2], &[0.8, 0.0]);
    for (g, w) in ga[2..].iter().zip([0.70710754f32, 0.70710677]) {
        assert!((g - w).abs() < 1e-6, "d hypot / da at tiny or huge: {g}");
    }
    // Integers promote to the default float.
    let ints = Tensor::from_vec(vec![5i64], &[1]).hypot(&Tensor::from_vec(vec![12i64], &[1]));
    assert_eq!((ints.dtype(), f32s(&ints)), (DType::F32, vec![13.0]));
}

/// Where the larger operand of `logaddexp` is infinite, it is the result
/// (`inf - inf` made `logaddexp(inf, inf)` NaN, and through it
/// `logcumsumexp` after a second `+inf`).
#[test]
fn logaddexp_of_infinities_is_the_infinity() {
    let inf = f32::INFINITY;
    let a = Tensor::from_vec(vec![inf, -inf, inf, 1.0, f32::NAN], &[5]);
    let b = Tensor::from_vec(vec![inf, -inf, -inf, inf, 1.0], &[5]);
    assert_same(
        "logaddexp",
        &f32s(&a.logaddexp(&b)),
        &[inf, -inf, inf, inf, f32::NAN],
    );
    let row = Tensor::from_vec(vec![inf, inf, 0.0, -inf], &[4]);
    assert_same("logcumsumexp", &f32s(&row.logcumsumexp(0)), &[inf; 4]);
}

/// Log-softmax subtracts the max first and the log of the sum after, as
/// PyTorch: subtracted together, the log was lost beside a large max
/// (`[1e30, 1e30]` gave 0, not `-ln 2`) and logits near 1e4 were off by
/// up to half an ulp of 1e4. A `+inf` logit makes its whole row NaN, as
/// PyTorch's (it was NaN at the infinity and 0 elsewhere).
#[test]
fn log_softmax_keeps_the_log_beside_large_logits() {
    let huge = Tensor::from_vec(vec![1e30f32, 1e30, -1e30, 5.0], &[1, 4]);
    let ln2 = std::f32::consts::LN_2;
    let want = [-ln2, -ln2, -2e30, -1e30];
    assert_same("log_softmax", &f32s(&huge.log_softmax(1)), &want);
    assert_same("down dim 0", &f32s(&huge.t().log_softmax(0).t()), &want);
    let narrow = Tensor::from_vec(vec![10000.0f32, 10000.25, 9999.5, 10001.0], &[4]);
    let want = [-1.7243435f32, -1.4743435, -2.2243435, -0.7243435];
    for (g, w) in f32s(&narrow.log_softmax(0)).iter().zip(want) {
        assert!(
            (g - w).abs() < 1e-6,
            "log_softmax near 1e4: {g}, PyTorch {w}"
        );
    }
    let bf16 = f32s(&huge.to_dtype(DType::BF16).log_softmax(1));
    assert_same("bf16 log_softmax", &bf16[..2], &[-0.69140625; 2]);
    let inf = f32::INFINITY;
    let rows = Tensor::from_vec(vec![inf, 1.0, 2.0, 3.0, -inf, -inf, -inf, -inf], &[2, 4]);
    for (name, y) in [
        ("softmax", rows.softmax(1)),
        ("log_softmax", rows.log_softmax(1)),
    ] {
        assert!(
            f32s(&y).iter().all(|v| v.is_nan()),
            "{name}: {:?}",
            f32s(&y)
        );
    }
    let columns = rows.t().contiguous();
    assert!(f32s(&columns.softmax(0)).iter().all(|v| v.is_nan()));
    // logsumexp keeps PyTorch's own rule: a `+inf` gives `+inf`.
    assert_same(
        "logsumexp",
        &f32s(&rows.logsumexp(&[1], false)),
        &[inf, -inf],
    );
}

/// `median` of a slice holding NaN is NaN, at the first NaN's index, and
/// its gradient goes there (`nanmedian` skips NaN).
#[test]
fn median_of_a_slice_with_nan_is_nan() {
    let nan = f32::NAN;
    let x = Tensor::from_vec(
        vec![nan, 1.0, nan, 3.0, 1.0, 2.0, 3.0, nan, 4.0, 1.0, 2.0, 3.0],
        &[3, 4],
    )
    .requires_grad_(true);
    let (values, indices) = x.median_dim(1, false);
    assert_same("median", &f32s(&values), &[nan, nan, 2.0]);
    assert_eq!(indices.to_vec::<i64>(), [0, 3, 2]);
    let (kept, kept_at) = x.median_dim(1, true);
    assert_eq!((kept.shape(), kept_at.shape()), (&[3, 1][..], &[3, 1][..]));
    values.sum().backward();
    let grad = f32s(&x.grad().unwrap());
    let mut want = [0.0f32; 12];
    (want[0], want[7], want[10]) = (1.0, 1.0, 1.0);
    assert_eq!(grad, want);
    assert!(x.median().item::<f32>().is_nan());
    let nanmedian = f32s(&x.nanmedian_dim(1, false).0);
    assert_eq!(nanmedian, [1.0, 2.0, 2.0]);
}

/// `sinc`'s gradient is PyTorch's `(πx cos πx - sin πx) / (πx²)`, 0 where
/// `πx²` underflows: the quotient's own derivative, two large terms that
/// cancel, gave ∓inf at ±1e-30.
#[test]
fn sinc_gradient_is_finite_near_zero() {
    let x =
        Tensor::from_vec(vec![1e-30f32, -1e-30, 1e-20, 0.5, 0.0, 2.0], &[6]).requires_grad_(true);
    x.sinc().sum().backward();
    let want = [0.0f32, 0.0, 0.0, -1.2732396, 0.0, 0.5];
    for (g, w) in f32s(&x.grad().unwrap()).iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "sinc' : {g}, PyTorch {w}");
    }
    let x = Tensor::from_vec(vec![1e-3f64], &[1]).requires_grad_(true);
    x.sinc().sum().backward();
    let g = x.grad().unwrap().item::<f64>();
    assert!(
        (g + 0.0032898648867414845).abs() < 1e-12,
        "sinc'(1e-3) in f64: {g}"
    );
    // Its double backward still runs through the recorded formula.
    let x = Tensor::from_vec(vec![0.5f64], &[1]).requires_grad_(true);
    let opts = GradOptions {
        create_graph: true,
        ..Default::default()
    };
    let d = grad_with(&[&x.sinc().sum()], &[&x], opts)
        .remove(0)
        .unwrap();
    let dd = tapir::autograd::grad(&[&d.sum()], &[&x]).remove(0);
    // sinc''(x) = ((2 - π²x²) sin πx - 2πx cos πx) / (π x³); at 0.5: (2 - π²/4) · 8 / π.
    let pi = std::f64::consts::PI;
    let want = (2.0 - pi * pi / 4.0) * 8.0 / pi;
    assert!(
        (dd.item::<f64>() - want).abs() < 1e-9,
        "sinc''(0.5): {}",
        dd.item::<f64>()
    );
}

/// `logit`'s gradient is PyTorch's `g / (p (1 - p))`: ∞ at 0 and 1 and
/// NaN outside `[0, 1]`; with `eps`, 0 outside `[eps, 1 - eps]` and the
/// bounds inside. The quotient's derivative gave NaN at 0 and 1.
#[test]
fn logit_gradient_as_pytorch_at_the_bounds() {
    let x = Tensor::from_vec(vec![0.0f32, 1.0, -0.5, 0.25, 1.5], &[5]).requires_grad_(true);
    x.logit(None).sum().backward();
    let inf = f32::INFINITY;
    assert_same(
        "logit'",
        &f32s(&x.grad().unwrap()),
        &[inf, inf, f32::NAN, 5.3333335, f32::NAN],
    );
    let x = Tensor::from_vec(vec![0.05f32, 0.1, 0.5, 0.9, 0.95], &[5]).requires_grad_(true);
    x.logit(Some(0.1)).sum().backward();
    let want = [0.0f32, 11.111112, 4.0, 11.111109, 0.0];
    for (g, w) in f32s(&x.grad().unwrap()).iter().zip(want) {
        assert!((g - w).abs() < 1e-5, "logit' with eps: {g}, PyTorch {w}");
    }
}

/// Integer tensors: a clamp bound with a fraction promotes to f32 as
/// PyTorch's float bound does (the bound was truncated: `clamp(-1.5, 5.5)`
/// of `[7, -7]` gave `[5, -1]`), whole bounds keep int64, and `square`
/// stays int64 (`torch.square` of int64).
#[test]
fn integer_clamp_and_square_keep_pytorchs_dtypes() {
    let i = Tensor::from_vec(vec![7i64, -7, 3], &[3]);
    let f = i.clamp(-1.5, 5.5);
    assert_eq!((f.dtype(), f32s(&f)), (DType::F32, vec![5.5, -1.5, 3.0]));
    let lo = i.clamp_min(-1.5);
    assert_eq!((lo.dtype(), f32s(&lo)), (DType::F32, vec![7.0, -1.5, 3.0]));
    let whole = i.clamp(-1.0, 5.0);
    assert_eq!(
        (whole.dtype(), whole.to_vec::<i64>()),
        (DType::I64, vec![5, -1, 3])
    );
    let sq = i.square();
    assert_eq!(
        (sq.dtype(), sq.to_vec::<i64>()),
        (DType::I64, vec![49, 49, 9])
    );
}

/// `fmod` and `remainder` of two integer tensors are integers, as
/// PyTorch's (they were promoted to f32), so wrapped positions index
/// directly; a zero divisor panics naming the op, PyTorch's
/// `ZeroDivisionError`.
#[test]
fn integer_fmod_and_remainder_stay_integers() {
    let i = Tensor::from_vec(vec![7i64, -7, 3, -8], &[4]);
    let j = Tensor::from_vec(vec![2i64, 2, -2, 3], &[4]);
    let (rem, fmod) = (i.remainder(&j), i.fmod(&j));
    assert_eq!(
        (rem.dtype(), rem.to_vec::<i64>()),
        (DType::I64, vec![1, 1, -1, 1])
    );
    assert_eq!(
        (fmod.dtype(), fmod.to_vec::<i64>()),
        (DType::I64, vec![1, -1, 1, -2])
    );
    let table = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], &[3]);
    let at = Tensor::from_vec(vec![-1i64, 3, 4], &[3]).remainder(&Tensor::scalar(3i64));
    assert_eq!(f32s(&table.index_select(0, &at)), [30.0, 10.0, 20.0]);
    // An integer tensor with a float one is float, as before.
    let half = i.remainder(&Tensor::scalar(2.5f32));
    assert_eq!(
        (half.dtype(), f32s(&half)),
        (DType::F32, vec![2.0, 0.5, 0.5, 2.0])
    );
    let zero = Tensor::from_vec(vec![1i64, 0], &[2]);
    for (op, msg) in [
        (
            "fmod",
            crate::common::panic_message(|| drop(i.narrow(0, 0, 2).fmod(&zero))),
        ),
        (
            "remainder",
            crate::common::panic_message(|| drop(i.narrow(0, 0, 2).remainder(&zero))),
        ),
    ] {
        assert!(
            msg.starts_with(&format!("{op}: integer division by zero")),
            "{msg}"
        );
    }
}

/// Empty reductions as PyTorch's: `logsumexp` over an empty dim is -inf
/// (it panicked, naming `max`), and those with nothing to pick from panic
/// naming the op the user called.
#[test]
fn empty_reductions_as_pytorch() {
    let e = Tensor::zeros(&[2, 0]);
    let lse = e.logsumexp(&[1], false);
    assert_eq!(
        (lse.shape(), f32s(&lse)),
        (&[2][..], vec![f32::NEG_INFINITY; 2])
    );
    assert_eq!(e.logsumexp(&[1], true).shape(), &[2, 1]);
    let picks = [
        ("amax:", 0),
        ("median:", 1),
        ("max:", 2),
        ("min:", 3),
        ("max:", 4),
    ];
    let call = |k: usize| match k {
        0 => drop(e.amax_dim(1, false)),
        1 => drop(e.median_dim(1, false)),
        2 => drop(e.max_dim(-1, true)),
        3 => drop(e.min()),
        _ => drop(e.max()),
    };
    for (op, k) in picks {
        let msg = crate::common::panic_message(|| call(k));
        assert!(msg.starts_with(op) && msg.contains("[2, 0]"), "{msg}");
    }
}
