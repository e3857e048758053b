//! PyTorch names that were missing (`prod`, `amin`, `isclose`, `fmax`,
//! `floor_divide`, `hstack`, `tensor_split`, `diag`, `randperm`, ...):
//! what the golden replay (`scripts/gen_goldens.py`, values and gradients)
//! cannot hold — dtypes, empty inputs, errors naming the op, seeding.
//! Expected values are PyTorch 2.15's on this CPU.

use crate::common::panic_message;
use tapir::prelude::*;
use tapir::{Generator, RoundingMode};

/// `torch.prod`: int64 for integers and bools, the input's dtype for
/// floats (f16 computed in f32), 1 for nothing.
#[test]
fn prod_dtypes_and_empty_products_are_pytorchs() {
    let bools = Tensor::from_vec(vec![true, true, false], &[3]);
    assert_eq!(bools.prod().dtype(), DType::I64);
    assert_eq!(bools.prod().to_vec::<i64>(), vec![0]);
    let bytes = Tensor::from_vec(vec![200u8, 2], &[2]);
    // PyTorch multiplies uint8 as int64: 400, not 400 mod 256.
    assert_eq!(bytes.prod().to_vec::<i64>(), vec![400]);
    let half = Tensor::from_vec(vec![300.0f32, 300.0, 1.0 / 300.0], &[3]).to_dtype(DType::F16);
    let p = half.prod();
    assert_eq!(p.dtype(), DType::F16);
    // 300 * 300 = 90000 overflows f16, and PyTorch, rounding every step
    // to f16, gives inf; multiplied in f32 the product comes back to about
    // 300 (the difference is said in `prod`'s doc).
    assert!((p.to_dtype(DType::F32).item::<f32>() - 300.0).abs() < 1.0);
    let empty = Tensor::zeros(&[2, 0]);
    assert_eq!(empty.prod_dim(1, false).to_vec::<f32>(), vec![1.0, 1.0]);
    assert_eq!(empty.prod().item::<f32>(), 1.0);
    assert_eq!(
        Tensor::scalar(-3.0f32).prod_dim(0, true).shape(),
        &[] as &[usize]
    );
}

/// A zero factor's gradient is the product of the others, two zeros give
/// every element 0, and the second derivative goes through the tree.
#[test]
fn prod_gradients_through_zeros_are_exact() {
    let x = Tensor::from_vec(vec![0.0f64, 2.0, 3.0, 0.0, 0.0, 5.0, 4.0], &[7]).requires_grad_(true);
    let rows = Tensor::cat(&[&x.narrow(0, 0, 3), &x.narrow(0, 3, 3)], 0).reshape(&[2, 3]);
    rows.prod_dim(1, false).sum().backward();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>(),
        vec![6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn amin_takes_nan_and_empty_dims_name_the_op() {
    let x = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0, -2.0], &[2, 2]);
    let m = x.amin_dim(1, false).to_vec::<f32>();
    assert!(m[0].is_nan() && m[1] == -2.0, "{m:?}");
    let msg = panic_message(|| {
        Tensor::zeros(&[3, 0]).amin_dim(1, false);
    });
    assert!(msg.starts_with("amin:") && msg.contains("[3, 0]"), "{msg}");
    let msg = panic_message(|| {
        Tensor::zeros(&[3]).prod_dim(2, false);
    });
    assert!(msg.starts_with("prod: dim 2 is out of range"), "{msg}");
}

#[test]
fn isclose_follows_pytorch_and_allclose_counts_infinities_equal() {
    let msg = panic_message(|| {
        Tensor::zeros(&[2]).isclose(&Tensor::zeros(&[2]).to_dtype(DType::F64), 1e-5, 1e-8, false);
    });
    assert!(
        msg.starts_with("isclose:") && msg.contains("float32") && msg.contains("float64"),
        "{msg}"
    );
    let ints = Tensor::from_vec(vec![100i64, 100, 7], &[3]);
    let near = Tensor::from_vec(vec![100i64, 101, 9], &[3]);
    // PyTorch: rtol 0.01 allows |a - b| <= 1.01 for b = 101.
    assert_eq!(
        ints.isclose(&near, 0.01, 0.0, false).to_vec::<bool>(),
        vec![true, true, false]
    );
    let inf = Tensor::from_vec(vec![f32::INFINITY, 1.0], &[2]);
    assert!(inf.allclose(&inf, 1e-5, 1e-8));
    assert!(inf.equal(&inf));
    assert!(!inf.allclose(&(&inf * -1.0), 1e-5, 1e-8));
}

/// f32 keeps its own rounding: 0.6 is 0.6000000238 in f32, so `6 // 0.6`
/// is 9 there (PyTorch in f32 too), 10 in f64.
#[test]
fn floor_divide_rounds_the_exact_quotient_in_each_dtype() {
    let a = Tensor::from_vec(vec![6.0f32, 3.0], &[2]);
    let b = Tensor::from_vec(vec![0.6f32, 0.1], &[2]);
    assert_eq!(a.floor_divide(&b).to_vec::<f32>(), vec![9.0, 29.0]);
    let t = a.div_rounding(&b, RoundingMode::Trunc);
    assert_eq!(t.to_vec::<f32>(), vec![10.0, 30.0]);
    let a64 = a.to_dtype(DType::F64);
    let b64 = Tensor::from_vec(vec![0.6f64, 0.1], &[2]);
    assert_eq!(a64.floor_divide(&b64).to_vec::<f64>(), vec![10.0, 29.0]);
    let big = Tensor::from_vec(vec![(1i64 << 52) + 1, -((1i64 << 52) + 1)], &[2]);
    assert_eq!(
        big.floor_divide(&Tensor::scalar(2i64)).to_vec::<i64>(),
        vec![1 << 51, -(1i64 << 51) - 1]
    );
    let msg = panic_message(|| {
        Tensor::from_vec(vec![1i64], &[1]).floor_divide(&Tensor::from_vec(vec![0i64], &[1]));
    });
    assert!(
        msg.starts_with("floor_divide: integer division by zero"),
        "{msg}"
    );
    let x = Tensor::from_vec(vec![7.0f32], &[1]).requires_grad_(true);
    assert!(!x.floor_divide(&Tensor::scalar(2.0f32)).requires_grad());
}

#[test]
fn stacking_errors_name_the_op_and_shapes() {
    let msg = panic_message(|| {
        Tensor::hstack(&[]);
    });
    assert_eq!(msg, "hstack: expected a non-empty list of tensors");
    let msg = panic_message(|| {
        Tensor::vstack(&[&Tensor::zeros(&[3]), &Tensor::zeros(&[2])]);
    });
    assert_eq!(
        msg,
        "vstack: tensor 1 has shape [1, 2], which does not match tensor 0's shape [1, 3] outside dim 0"
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[4]).tensor_split(0, 0);
    });
    assert!(msg.starts_with("tensor_split:"), "{msg}");
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 3, 4]).diag(0);
    });
    assert_eq!(
        msg,
        "diag: expects a vector or a matrix, got shape [2, 3, 4]"
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 3]).mv(&Tensor::zeros(&[2]));
    });
    assert_eq!(
        msg,
        "mv: expects a matrix [n, m] and a vector [m], got [2, 3] and [2]"
    );
}

/// More sections than elements give empty pieces (chunk would give fewer
/// pieces), and one backward fills every piece's gradient.
#[test]
fn tensor_split_gives_every_section_and_one_gradient() {
    let x = Tensor::arange_f(0.0, 2.0, 1.0)
        .to_dtype(DType::F32)
        .requires_grad_(true);
    let parts = x.tensor_split(4, 0);
    let lens: Vec<usize> = parts.iter().map(|p| p.numel()).collect();
    assert_eq!(lens, vec![1, 1, 0, 0]);
    (&parts[0] * 3.0).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![3.0, 0.0]);
    let y = Tensor::arange(6);
    let cut = y.tensor_split_at(&[4, 1], 0);
    let got: Vec<Vec<i64>> = cut.iter().map(|p| p.to_vec()).collect();
    assert_eq!(got, vec![vec![0, 1, 2, 3], vec![], vec![1, 2, 3, 4, 5]]);
}

#[test]
fn randperm_is_a_seeded_permutation() {
    // Own generators: seeding the global one would disturb other tests'
    // draws (they run on several threads).
    let a = Tensor::randperm_with(50, &Generator::new(7)).to_vec::<i64>();
    let b = Tensor::randperm_with(50, &Generator::new(7)).to_vec::<i64>();
    assert_eq!(a, b);
    assert_eq!(Tensor::randperm(50).numel(), 50);
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..50).collect::<Vec<i64>>());
    assert_ne!(a, sorted, "50 elements left in order");
    assert_eq!(Tensor::randperm(0).shape(), &[0]);
}

#[test]
fn new_tensors_take_the_dtype_and_device() {
    let x = Tensor::from_vec(vec![1u8, 2], &[2]);
    let z = x.new_ones(&[2, 2]);
    assert_eq!((z.dtype(), z.device()), (DType::U8, x.device()));
    assert_eq!(z.to_vec::<u8>(), vec![1, 1, 1, 1]);
    assert_eq!(x.new_zeros(&[1]).to_vec::<u8>(), vec![0]);
}

/// Without a gradient the CPU's product kernel runs (rows, columns, a
/// transposed view walked in memory order); with one, the halving tree.
/// They agree to rounding.
#[test]
fn prod_kernel_and_tree_agree_on_every_layout() {
    let x = &(&Tensor::randn_with(&[37, 70], &Generator::new(3)).to_dtype(DType::F64) * 0.05) + 1.0;
    for (view, dim) in [(x.clone(), 0), (x.clone(), 1), (x.t(), 0), (x.t(), 1)] {
        let fast = tapir::no_grad(|| view.prod_dim(dim, false));
        let leaf = view.detach().requires_grad_(true);
        let tree = leaf.prod_dim(dim, false);
        assert!(tree.requires_grad() && !fast.requires_grad());
        assert!(
            fast.allclose(&tree.detach(), 1e-13, 0.0),
            "dim {dim} of {:?}: {:?} vs {:?}",
            view.shape(),
            fast.to_vec::<f64>(),
            tree.to_vec::<f64>()
        );
    }
}

/// `&`, `|`, `^` and `!` combine bool masks, as PyTorch's operators;
/// integers panic naming the op (no bitwise kernel yet).
#[test]
fn masks_combine_with_operators() {
    let x = Tensor::from_vec(vec![-2.0f32, -0.5, 0.5, 2.0], &[4]);
    let (pos, small) = (x.gt_scalar(0.0), x.abs().lt_scalar(1.0));
    assert_eq!(
        (&pos & &small).to_vec::<bool>(),
        vec![false, false, true, false]
    );
    assert_eq!(
        (&pos | &small).to_vec::<bool>(),
        vec![false, true, true, true]
    );
    assert_eq!(
        (&pos ^ &small).to_vec::<bool>(),
        vec![false, true, false, true]
    );
    assert_eq!((!pos).to_vec::<bool>(), vec![true, true, false, false]);
    let column = Tensor::from_vec(vec![true, false], &[2, 1]);
    assert_eq!((&column & &small).shape(), &[2, 4]);
    let msg = panic_message(|| {
        let _ = &Tensor::from_vec(vec![3i64], &[1]) & &small;
    });
    assert_eq!(
        msg,
        "bitwise_and: takes bool masks, got int64 and bool (integer bitwise ops have no kernel yet)"
    );
}
