//! PyTorch names that were missing (`prod`, `amin`, `isclose`, `fmax`,
//! `floor_divide`, `hstack`, `tensor_split`, `diag`, `randperm`, ...; then
//! `unfold`, `view_as`, `aminmax`, `hsplit`, `slice_scatter`, `copysign`):
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
    // An integer and a mask: the integer's dtype, bits anded.
    let threes = Tensor::from_vec(vec![3i64; 4], &[4]);
    let both = &threes & &small;
    assert_eq!(
        (both.dtype(), both.to_vec::<i64>()),
        (DType::I64, vec![0, 1, 1, 0])
    );
    let msg = panic_message(|| {
        let _ = &x & &small;
    });
    assert_eq!(
        msg,
        "bitwise_and: takes integer or bool tensors, got float32 and bool (bitwise ops are not defined on floats)"
    );
}

/// Integer bitwise ops, shifts, gcd and lcm: PyTorch 2.15's values at the
/// edges (shifts outside 0..64, uint8 truncation) and its dtypes.
#[test]
fn integer_bitwise_ops_follow_pytorch() {
    let u = Tensor::from_vec(vec![200u8, 1, 255], &[3]);
    let by = |v: Vec<u8>| Tensor::from_vec(v, &[3]);
    assert_eq!((&u >> &by(vec![9, 8, 7])).to_vec::<u8>(), vec![0, 0, 1]);
    assert_eq!((&u << &by(vec![1, 8, 9])).to_vec::<u8>(), vec![144, 0, 0]);
    assert_eq!((!&u).to_vec::<u8>(), vec![55, 254, 0]);
    // A scalar wraps into uint8, as PyTorch's: -1 is 255, 256 is 0.
    assert_eq!((&u & -1).to_vec::<u8>(), vec![200, 1, 255]);
    assert_eq!((&u & 256).to_vec::<u8>(), vec![0, 0, 0]);
    let shifted = &u >> 2;
    assert_eq!(
        (shifted.dtype(), shifted.to_vec::<u8>()),
        (DType::U8, vec![50, 0, 63])
    );
    assert_eq!(
        (&u & &Tensor::from_vec(vec![15i64], &[1])).dtype(),
        DType::I64
    );
    assert_eq!(
        (&u & &Tensor::from_vec(vec![true], &[1])).dtype(),
        DType::U8
    );
    let i = Tensor::from_vec(vec![-8i64, 8, 5, -1], &[4]);
    let amounts = |v: Vec<i64>| Tensor::from_vec(v, &[4]);
    assert_eq!(
        (&i >> &amounts(vec![64, 64, -1, 70])).to_vec::<i64>(),
        vec![-1, 0, 0, -1]
    );
    assert_eq!(
        (&i << &amounts(vec![63, 64, -1, 1])).to_vec::<i64>(),
        vec![0, 0, 0, -2]
    );
    assert_eq!((&i >> 1).to_vec::<i64>(), vec![-4, 4, 2, -1]);
    let mask = Tensor::from_vec(vec![true, false], &[2]) & 1;
    assert_eq!(
        (mask.dtype(), mask.to_vec::<i64>()),
        (DType::I64, vec![1, 0])
    );
    let a = Tensor::from_vec(vec![0i64, -12, 7, 0], &[4]);
    let b = Tensor::from_vec(vec![0i64, 18, -21, -5], &[4]);
    assert_eq!(a.gcd(&b).to_vec::<i64>(), vec![0, 6, 7, 5]);
    assert_eq!(a.lcm(&b).to_vec::<i64>(), vec![0, 36, 21, 0]);
    let flags = Tensor::from_vec(vec![true], &[1]);
    assert_eq!(
        panic_message(|| drop(flags.gcd(&flags))),
        "gcd: takes integer tensors, got bool and bool"
    );
    assert_eq!(
        panic_message(|| drop(Tensor::zeros(&[1]).bitwise_not())),
        "bitwise_not: takes an integer or bool tensor, got float32 (bitwise ops are not defined on floats)"
    );
}

// ---- the second round (2026-12-07): unfold, the `_as` family, aminmax,
// ---- splits, scatters into slices and diagonals, signs.

/// A call that must panic, paired with its message below.
type Misuse = Box<dyn Fn()>;

/// `unfold` is a view (a write to the input shows through), overlapping
/// windows sum their gradients, and the edge shapes are PyTorch's.
#[test]
fn unfold_is_a_view_whose_overlaps_sum_their_gradients() {
    let x = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[6]).requires_grad_(true);
    let w = x.unfold(0, 3, 1);
    assert_eq!(w.shape(), &[4, 3]);
    assert!(!w.is_contiguous());
    w.sum().backward();
    // Positions 2 and 3 lie in three windows, the ends in one.
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>(),
        vec![1.0, 2.0, 3.0, 3.0, 2.0, 1.0]
    );
    let plain = Tensor::zeros(&[4]);
    let view = plain.unfold(0, 2, 2);
    plain.narrow(0, 1, 1).add_scalar_(7.0);
    assert_eq!(view.to_vec::<f32>(), vec![0.0, 7.0, 0.0, 0.0]);
    // PyTorch: a 0-d tensor gives `size` (0 or 1) elements; size 0 gives
    // len / step + 1 empty windows.
    assert_eq!(Tensor::scalar(5.0f32).unfold(0, 1, 1).shape(), &[1]);
    assert_eq!(Tensor::scalar(5.0f32).unfold(0, 0, 1).shape(), &[0]);
    assert_eq!(Tensor::zeros(&[7]).unfold(0, 0, 2).shape(), &[4, 0]);
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 7]).unfold(1, 8, 1);
    });
    assert_eq!(
        msg,
        "unfold: windows of size 8 do not fit in dim 1 of length 7 (shape [2, 7])"
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[7]).unfold(0, 2, 0);
    });
    assert_eq!(msg, "unfold: step must be positive, got 0");
}

/// The `_as` family takes the other tensor's shape or dtype, and a
/// mismatch names the op called; sizes in bytes follow the dtype.
#[test]
fn the_as_family_names_itself_in_errors() {
    let x = Tensor::arange(6);
    let like = Tensor::zeros(&[3, 2]);
    assert_eq!(x.view_as(&like).shape(), &[3, 2]);
    assert_eq!(x.reshape_as(&like).shape(), &[3, 2]);
    assert_eq!(x.type_as(&like).dtype(), DType::F32);
    let msg = panic_message(|| {
        x.view_as(&Tensor::zeros(&[4]));
    });
    assert_eq!(
        msg,
        "view_as: a tensor of shape [6] (6 elements) cannot take the other tensor's shape [4] (4 elements)"
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 3]).expand_as(&Tensor::zeros(&[4, 3, 2]));
    });
    assert_eq!(
        msg,
        "expand_as: a tensor of shape [2, 3] cannot be expanded to the other tensor's shape [4, 3, 2]"
    );
    let cols = Tensor::zeros(&[4, 6]).to_dtype(DType::F16).narrow(1, 0, 2);
    assert_eq!((cols.element_size(), cols.nbytes()), (2, 16));
    assert_eq!((x.element_size(), x.nbytes()), (8, 48));
}

/// `aminmax` keeps integer dtypes, and an empty input is an error naming
/// it (PyTorch: "cannot compute aminmax over an empty dimension").
#[test]
fn aminmax_keeps_dtypes_and_names_empty_inputs() {
    let (lo, hi) = Tensor::from_vec(vec![4u8, 250, 7], &[3]).aminmax();
    assert_eq!(
        (lo.dtype(), lo.item::<u8>(), hi.item::<u8>()),
        (DType::U8, 4, 250)
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 0]).aminmax();
    });
    assert_eq!(
        msg,
        "aminmax: the tensor of shape [2, 0] is empty, so it has no smallest or largest element"
    );
    let msg = panic_message(|| {
        Tensor::zeros(&[2, 0]).aminmax_dim(1, false);
    });
    assert_eq!(
        msg,
        "aminmax: cannot reduce over a zero-size dim 1 of shape [2, 0]"
    );
}

/// The splits check what PyTorch checks, in messages naming the op.
#[test]
fn splits_check_ranks_sizes_and_divisibility() {
    let cases: Vec<(Misuse, &str)> = vec![
        (
            Box::new(|| drop(Tensor::arange(7).split_with_sizes(&[3, 3], 0))),
            "split_with_sizes: the sizes [3, 3] must add up to 7, the length of dim 0 of shape [7]",
        ),
        (
            Box::new(|| drop(Tensor::arange(7).hsplit(2))),
            "hsplit: dim 0 of length 7 (shape [7]) cannot be split into 2 equal sections",
        ),
        (
            Box::new(|| drop(Tensor::arange(6).hsplit(0))),
            "hsplit: dim 0 of length 6 (shape [6]) cannot be split into 0 equal sections",
        ),
        (
            Box::new(|| drop(Tensor::arange(7).vsplit(1))),
            "vsplit: the input must have 2 or more dims, got shape [7]",
        ),
        (
            Box::new(|| drop(Tensor::zeros(&[2, 2]).dsplit_at(&[1]))),
            "dsplit: the input must have 3 or more dims, got shape [2, 2]",
        ),
        (
            Box::new(|| drop(Tensor::zeros(&[3]).fliplr())),
            "fliplr: the input must have 2 or more dims, got shape [3]",
        ),
        (
            Box::new(|| drop(Tensor::scalar(1.0f32).flipud())),
            "flipud: the input must have 1 or more dims, got a 0-d tensor",
        ),
    ];
    for (f, want) in cases {
        assert_eq!(panic_message(f), want);
    }
    let parts = Tensor::zeros(&[2, 6]).hsplit_at(&[1, 4]);
    let widths: Vec<usize> = parts.iter().map(|p| p.shape()[1]).collect();
    assert_eq!(widths, vec![1, 3, 2]);
}

/// Writing into slices and diagonals: shapes checked against the region
/// written, in messages naming the op; gradients flow to both inputs.
#[test]
fn scatters_into_slices_and_diagonals_check_src_shapes() {
    let cases: Vec<(Misuse, &str)> = vec![
        (
            Box::new(|| {
                drop(Tensor::zeros(&[4, 3]).slice_scatter(&Tensor::ones(&[1, 3]), 0, 1, 4, 2))
            }),
            "slice_scatter: src has shape [1, 3], but the slice 1..4 (step 2) of dim 0 of shape [4, 3] has shape \
             [2, 3]",
        ),
        (
            Box::new(|| drop(Tensor::zeros(&[2, 2]).select_scatter(&Tensor::ones(&[2]), 0, 2))),
            "select_scatter: index 2 is out of range for dim 0 of length 2 (shape [2, 2])",
        ),
        (
            Box::new(|| {
                drop(Tensor::zeros(&[3, 3]).diagonal_scatter(&Tensor::ones(&[2]), 0, 0, 1))
            }),
            "diagonal_scatter: src has shape [2], but diagonal 0 of dims 0 and 1 of shape [3, 3] has shape [3]",
        ),
        (
            Box::new(|| drop(Tensor::zeros(&[3]).diag_embed(0, 1, -1))),
            "diag_embed: dim1 and dim2 cannot be the same dim (1 and -1)",
        ),
    ];
    for (f, want) in cases {
        assert_eq!(panic_message(f), want);
    }
    let base = Tensor::ones(&[3]).requires_grad_(true);
    let src = Tensor::full(&[1], 5.0).requires_grad_(true);
    let out = base.slice_scatter(&src, 0, -1, 3, 1);
    assert_eq!(out.to_vec::<f32>(), vec![1.0, 1.0, 5.0]);
    (&out * &Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]))
        .sum()
        .backward();
    assert_eq!(base.grad().unwrap().to_vec::<f32>(), vec![1.0, 2.0, 0.0]);
    assert_eq!(src.grad().unwrap().to_vec::<f32>(), vec![3.0]);
}

/// Signs: the sign bit decides (-0.0, negative NaN), integers promote to
/// float in copysign and compare in signbit; heaviside wants one dtype.
#[test]
fn signs_follow_the_sign_bit_and_pytorchs_dtypes() {
    let ints = Tensor::from_vec(vec![1i64, 2], &[2]);
    let c = ints.copysign(&Tensor::from_vec(vec![-1i64, 0], &[2]));
    assert_eq!(
        (c.dtype(), c.to_vec::<f32>()),
        (DType::F32, vec![-1.0, 2.0])
    );
    let negative_nan = Tensor::from_vec(vec![-f32::NAN, f32::NAN], &[2]);
    assert_eq!(negative_nan.signbit().to_vec::<bool>(), vec![true, false]);
    let signed = Tensor::from_vec(vec![-3i64, 0, 4], &[3]).signbit();
    assert_eq!(signed.to_vec::<bool>(), vec![true, false, false]);
    let msg = panic_message(|| {
        Tensor::zeros(&[2]).heaviside(&Tensor::from_vec(vec![1i64], &[1]));
    });
    assert_eq!(
        msg,
        "heaviside: input and values must have one dtype, got float32 and int64"
    );
    let p = Tensor::from_vec(vec![2.0f32], &[1]).float_power_scalar(3.0);
    assert_eq!((p.dtype(), p.item::<f64>()), (DType::F64, 8.0));
}

/// `mode` of a 0-d tensor is itself at index 0, an empty dim is an error
/// naming it; `unique_consecutive` of nothing is nothing.
#[test]
fn mode_and_unique_consecutive_edges() {
    let (v, i) = Tensor::scalar(4.0f32).mode(0, false);
    assert_eq!((v.item::<f32>(), i.item::<i64>()), (4.0, 0));
    assert_eq!(
        panic_message(|| drop(Tensor::zeros(&[3, 0]).mode(1, false))),
        "mode: cannot reduce over a zero-size dim 1 of shape [3, 0]"
    );
    let (values, inverse, counts) = Tensor::zeros(&[2, 0]).unique_consecutive();
    assert_eq!(
        (values.numel(), inverse.shape(), counts.numel()),
        (0, &[2usize, 0][..], 0)
    );
    let bools = Tensor::from_vec(vec![true, true, false], &[3]).unique_consecutive();
    assert_eq!(bools.0.to_vec::<bool>(), vec![true, false]);
}
