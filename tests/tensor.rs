//! Tensor basics: dtypes, conversions, creation, views sharing storage,
//! repr, thread count.

use tapir::prelude::*;

#[test]
fn dtypes_convert_and_promote() {
    let x = Tensor::from_vec(vec![1.5f32, -2.25, 3.0], &[3]);
    for d in [DType::F64, DType::F16, DType::BF16] {
        assert_eq!(x.to_dtype(d).to_vec::<f64>(), vec![1.5, -2.25, 3.0], "{d}");
    }
    assert_eq!(x.to_dtype(DType::I64).to_vec::<i64>(), vec![1, -2, 3]);
    assert_eq!(
        x.to_dtype(DType::Bool).to_vec::<bool>(),
        vec![true, true, true]
    );
    assert_eq!(
        Tensor::arange(3).to_dtype(DType::U8).to_vec::<u8>(),
        vec![0, 1, 2]
    );
    let i = Tensor::arange(3);
    assert_eq!((&i + &x).dtype(), DType::F32);
    assert_eq!((&i * 2.0).dtype(), DType::I64);
    assert_eq!((&i / 2.0).dtype(), DType::F32);
    assert_eq!((&i / &i.clone()).to_vec::<f32>()[1], 1.0);
    let h = x.to_dtype(DType::F16);
    assert_eq!((&h + &h).dtype(), DType::F16);
    assert_eq!((&h + &x.to_dtype(DType::BF16)).dtype(), DType::F32);
    assert_eq!(
        h.matmul(&h).to_vec::<f32>(),
        vec![1.5 * 1.5 + 2.25 * 2.25 + 9.0]
    );
}

/// `torch.result_type`, read off torch 2.15: a 0-d tensor widens the
/// result only when it is of a higher category (bool < integer < float).
#[test]
fn binary_ops_take_pytorchs_result_type() {
    let f32_ = Tensor::ones(&[2]);
    let of = |d| f32_.to_dtype(d);
    let b = Tensor::from_vec(vec![true, false], &[2]);
    let cases = [
        (of(DType::F32), of(DType::F64), DType::F64),
        (of(DType::F32), Tensor::scalar(2.5f64), DType::F32),
        (of(DType::F16), Tensor::scalar(2.5f64), DType::F16),
        (of(DType::I64), Tensor::scalar(2.5f64), DType::F64),
        (of(DType::I64), Tensor::scalar(2.5f32), DType::F32),
        (of(DType::U8), Tensor::scalar(3i64), DType::U8),
        (of(DType::U8), of(DType::I64), DType::I64),
        (b.clone(), Tensor::scalar(3i64), DType::I64),
        (of(DType::F16), of(DType::BF16), DType::F32),
        (Tensor::scalar(1.0f32), Tensor::scalar(2.5f64), DType::F64),
    ];
    for (x, y, want) in &cases {
        let what = format!(
            "{} {:?} with {} {:?}",
            x.dtype(),
            x.shape(),
            y.dtype(),
            y.shape()
        );
        assert_eq!((x + y).dtype(), *want, "add: {what}");
        assert_eq!((y * x).dtype(), *want, "mul: {what}");
        assert_eq!(Tensor::where_(&b, x, y).dtype(), *want, "where: {what}");
        assert_eq!(DType::result_type(x, y), *want, "{what}");
    }
    // Comparisons compare in the result type: 0.1 as f32 equals the f64
    // scalar rounded to f32.
    let tenth = Tensor::from_vec(vec![0.1f32], &[1]);
    assert_eq!(tenth.eq(&Tensor::scalar(0.1f64)).to_vec::<bool>(), [true]);
    // Each operand's gradient comes back in its own dtype.
    let w = Tensor::ones(&[2]).requires_grad_(true);
    let s = Tensor::scalar(0.5f64).requires_grad_(true);
    (&w * &s).sum().backward();
    assert_eq!(
        (w.grad().unwrap().dtype(), s.grad().unwrap().dtype()),
        (DType::F32, DType::F64)
    );
}

#[test]
fn half_precision_rounds_like_pytorch() {
    // 1/3 in bf16 is 0.333984375; in f16 0.333251953125.
    let t = Tensor::from_vec(vec![1.0f32 / 3.0], &[1]);
    assert_eq!(t.to_dtype(DType::BF16).to_vec::<f64>(), vec![0.333984375]);
    assert_eq!(t.to_dtype(DType::F16).to_vec::<f64>(), vec![0.333251953125]);
}

#[test]
fn strided_half_casts_equal_contiguous_ones() {
    // A transposed, a sliced and a broadcast view, cast between f32 and
    // bf16/f16 both ways: the same values as casting a contiguous copy.
    let x = Tensor::randn(&[6, 5]);
    for d in [DType::BF16, DType::F16] {
        let h = x.to_dtype(d);
        for (name, f32_view, half_view) in [
            ("t", x.t(), h.t()),
            ("slice", x.narrow(1, 1, 3), h.narrow(1, 1, 3)),
            (
                "expand",
                x.narrow(0, 0, 1).expand(&[4, 5]),
                h.narrow(0, 0, 1).expand(&[4, 5]),
            ),
        ] {
            let down = f32_view.to_dtype(d).to_vec::<f64>();
            assert_eq!(
                down,
                f32_view.contiguous().to_dtype(d).to_vec::<f64>(),
                "{d} {name}"
            );
            let up = half_view.to_dtype(DType::F32);
            assert_eq!(up.shape(), half_view.shape());
            assert_eq!(
                up.to_vec::<f64>(),
                half_view.contiguous().to_dtype(DType::F32).to_vec::<f64>(),
                "{d} {name}"
            );
        }
    }
}

#[test]
fn creation_functions() {
    assert_eq!(Tensor::eye(2).to_vec::<f32>(), vec![1.0, 0.0, 0.0, 1.0]);
    assert_eq!(
        Tensor::linspace(0.0, 1.0, 5).to_vec::<f32>(),
        vec![0.0, 0.25, 0.5, 0.75, 1.0]
    );
    assert_eq!(Tensor::arange_step(1, 8, 3).to_vec::<i64>(), vec![1, 4, 7]);
    assert_eq!(Tensor::full(&[2], 3.5).to_vec::<f32>(), vec![3.5, 3.5]);
    manual_seed(3);
    let a = Tensor::randn(&[1000]);
    manual_seed(3);
    assert_eq!(a.to_vec::<f32>(), Tensor::randn(&[1000]).to_vec::<f32>());
    let (m, s) = (a.mean().item::<f32>(), a.std().item::<f32>());
    assert!(
        m.abs() < 0.1 && (s - 1.0).abs() < 0.1,
        "randn mean {m} std {s}"
    );
    let u = Tensor::rand(&[1000]);
    assert!(u.to_vec::<f32>().iter().all(|&v| (0.0..1.0).contains(&v)));
    let p = Tensor::full(&[1000], 0.25).bernoulli();
    let frac = p.mean().item::<f32>();
    assert!((frac - 0.25).abs() < 0.05, "bernoulli frac {frac}");
    let g = Generator::new(1);
    let r = Tensor::randint_with(-2, 2, &[500], &g).to_vec::<i64>();
    assert!(r.iter().all(|v| (-2..2).contains(v)) && r.contains(&-2) && r.contains(&1));
}

#[test]
fn views_share_storage_and_copies_do_not() {
    let base = Tensor::zeros(&[2, 3]);
    let t = base.t();
    assert!(!t.is_contiguous());
    t.select(0, 2).fill_(5.0); // column 2 of base
    assert_eq!(base.to_vec::<f32>(), vec![0.0, 0.0, 5.0, 0.0, 0.0, 5.0]);
    let r = t.reshape(&[6]); // must copy: transposed
    r.fill_(1.0);
    assert_eq!(base.to_vec::<f32>()[0], 0.0);
    let v = base.reshape(&[3, 2]); // a view
    v.fill_(2.0);
    assert_eq!(base.to_vec::<f32>(), vec![2.0; 6]);
    let e = Tensor::ones(&[3, 1]).expand(&[3, 4]);
    assert_eq!(e.strides(), &[1, 0]);
    // data_ptr: views point into their base, copies elsewhere.
    assert_eq!(v.data_ptr(), base.data_ptr());
    assert_eq!(t.select(0, 2).data_ptr(), base.data_ptr() + 2 * 4);
    assert_eq!(base.select(0, 1).data_ptr(), base.data_ptr() + 3 * 4);
    assert_ne!(r.data_ptr(), base.data_ptr());
    let f64s = Tensor::zeros(&[4]).to_dtype(DType::F64);
    assert_eq!(f64s.narrow(0, 1, 2).data_ptr(), f64s.data_ptr() + 8);
}

#[test]
fn item_shape_and_repr() {
    let t = Tensor::from_vec(vec![1i64, 2, 3, 4], &[2, 2]);
    assert_eq!(t.numel(), 4);
    assert_eq!(t.size(-1), 2);
    assert_eq!(t.to_string(), "tensor([[1, 2],\n        [3, 4]])");
    assert_eq!(
        Tensor::scalar(2.5f64).to_string(),
        "tensor(2.5000, dtype=torch.float64)"
    );
    assert_eq!(
        Tensor::ones(&[2]).requires_grad_(true).to_string(),
        "tensor([1., 1.], requires_grad=True)"
    );
    assert_eq!(
        format!("{:?}", Tensor::zeros(&[2, 3])),
        "Tensor(shape=[2, 3], dtype=float32, device=cpu)"
    );
    assert_eq!(Tensor::scalar(7i64).item::<i64>(), 7);
    let big = Tensor::arange(2000).to_string();
    assert!(big.contains("...") && big.contains("size=[2000]"), "{big}");
}

#[test]
fn tensors_cross_threads() {
    let t = Tensor::randn(&[64, 64]).requires_grad_(true);
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || t.matmul(&t).sum().item::<f32>())
        })
        .collect();
    let r: Vec<f32> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(r[0], r[1]);
}

#[test]
fn thread_count_is_settable_and_results_do_not_depend_on_it() {
    let a = Tensor::randn_with(&[300, 300], &Generator::new(5));
    set_num_threads(1);
    assert_eq!(tapir::get_num_threads(), 1);
    let one = a.matmul(&a).sum_dim(0, false).to_vec::<f32>();
    let s1 = (&a * 2.0).exp().sum().item::<f32>();
    set_num_threads(2);
    let two = a.matmul(&a).sum_dim(0, false).to_vec::<f32>();
    let s2 = (&a * 2.0).exp().sum().item::<f32>();
    assert_eq!(s1, s2);
    for (x, y) in one.iter().zip(&two) {
        assert!((x - y).abs() <= 1e-3 * y.abs().max(1.0));
    }
}

/// Sums of 2^24 values stay within 1e-6 (relative) of the f64 sum of the
/// same values — a running f32 sum is off by ~1e-4 there — for `sum`, the
/// sum of squares and `norm`. A bf16 result is itself bf16, so there the
/// bound is the rounding of the exact value: at most one bf16 step from it.
#[test]
fn large_sums_are_accurate_in_f32_and_bf16() {
    let n = 1 << 24;
    let x = Tensor::rand_with(&[n], &Generator::new(3));
    for dtype in [DType::F32, DType::BF16] {
        let x = x.to_dtype(dtype);
        let v: Vec<f64> = x.to_vec();
        let exact_sum: f64 = v.iter().sum();
        let exact_sq: f64 = v.iter().map(|a| a * a).sum();
        let sq_vals: Vec<f64> = (&x * &x).to_vec();
        let exact_sq_rounded: f64 = sq_vals.iter().sum();
        let cases = [
            ("sum", x.sum().item::<f64>(), exact_sum),
            (
                "sum of squares",
                (&x * &x).sum().item::<f64>(),
                exact_sq_rounded,
            ),
            ("norm", x.norm(2.0).item::<f64>(), exact_sq.sqrt()),
        ];
        for (what, got, want) in cases {
            let rel = (got - want).abs() / want;
            let bound = match dtype {
                // One bf16 step is 2^-7 relative at most.
                DType::BF16 => 1e-6 + 2f64.powi(-7),
                _ => 1e-6,
            };
            assert!(
                rel < bound,
                "{what} ({dtype}): {got} vs {want}, relative error {rel:e}"
            );
            if dtype == DType::BF16 {
                let nearest = Tensor::scalar(want).to_dtype(DType::BF16).item::<f64>();
                let step = nearest * 2f64.powi(-7);
                assert!(
                    (got - nearest).abs() <= step,
                    "{what} (bf16): {got}, nearest {nearest}"
                );
            }
        }
    }
}

/// A half-precision norm is computed in f32 and rounded once, as
/// PyTorch's: squaring and summing in bf16 rounded three times and gave
/// 0.24609375 where PyTorch gives 0.2470703125 for these values (Muon's
/// first Newton-Schulz input in the goldens), one bf16 step off.
#[test]
fn half_precision_norms_round_once_as_pytorch() {
    let v = vec![
        0.0,
        0.1279296875,
        -0.0157470703125,
        -0.034423828125,
        0.07421875,
        -0.051513671875,
        -0.12451171875,
        0.06591796875,
        0.0830078125,
        -0.05224609375,
        0.033203125,
        0.06591796875,
    ];
    let x = Tensor::from_vec(v, &[3, 4]);
    assert_eq!(
        x.to_dtype(DType::BF16).norm(2.0).item::<f64>(),
        0.2470703125
    );
    for dtype in [DType::BF16, DType::F16] {
        let h = x.to_dtype(dtype);
        let f = h.to_dtype(DType::F32);
        for (p, dims) in [(2.0, vec![0isize, 1]), (2.0, vec![1]), (3.0, vec![0])] {
            let got = h.norm_dims(p, &dims, false);
            assert_eq!(got.dtype(), dtype);
            let want = f.norm_dims(p, &dims, false).to_dtype(dtype);
            assert_eq!(
                got.to_vec::<f64>(),
                want.to_vec::<f64>(),
                "{dtype} p={p} over {dims:?}"
            );
        }
    }
}

/// PyTorch's `preserve_format`: a dense tensor's strides carry over to
/// `zeros_like` and friends (an optimizer's state for a transposed
/// parameter is laid out as the parameter); anything else is row-major.
#[test]
fn like_constructors_keep_a_dense_tensors_strides() {
    let t = Tensor::arange(6).reshape(&[2, 3]).to_dtype(DType::F32).t();
    let p = Tensor::zeros(&[2, 1, 3]).permute(&[2, 1, 0]);
    for x in [&t, &p] {
        for (name, y) in [
            ("zeros_like", Tensor::zeros_like(x)),
            ("ones_like", Tensor::ones_like(x)),
            ("full_like", Tensor::full_like(x, 2.5)),
        ] {
            assert_eq!((y.shape(), y.strides()), (x.shape(), x.strides()), "{name}");
        }
    }
    assert_eq!(Tensor::full_like(&t, 2.5).to_vec::<f32>(), vec![2.5; 6]);
    let sliced = Tensor::zeros(&[4, 3]).slice(0, 0, isize::MAX, 2);
    assert!(Tensor::zeros_like(&sliced).is_contiguous());
}

/// An empty dim list reduces every dim, as PyTorch's `x.sum(dim=())`
/// (read off torch 2.15: 66.0 and 5.5 for `arange(12)`); it was the
/// identity.
#[test]
fn an_empty_dim_list_reduces_every_dim() {
    let x = Tensor::arange(12).to_dtype(DType::F32).reshape(&[3, 4]);
    assert_eq!(x.sum_dims(&[], false).to_vec::<f32>(), vec![66.0]);
    assert_eq!(x.mean_dims(&[], false).to_vec::<f32>(), vec![5.5]);
    assert_eq!(x.sum_dims(&[], true).shape(), &[1, 1]);
    assert_eq!(
        x.var_dims(&[], 1, false).to_vec::<f32>(),
        x.var().to_vec::<f32>()
    );
}

/// Running sums of integers and bools give int64, as PyTorch's; sorts and
/// running sums of 0-d tensors and empty dims give what PyTorch gives.
#[test]
fn ordering_ops_take_pytorchs_dtypes_and_shapes() {
    let mask = Tensor::from_vec(vec![true, false, true, true], &[4]);
    let c = mask.cumsum(0);
    assert_eq!(c.dtype(), DType::I64);
    assert_eq!(c.to_vec::<i64>(), vec![1, 1, 2, 3]);
    let bytes = Tensor::from_vec(vec![200u8, 100, 50], &[3]).cumsum(0);
    assert_eq!(bytes.to_vec::<i64>(), vec![200, 300, 350], "no wrap at 255");
    let s = Tensor::scalar(2.5f32);
    assert_eq!(s.cumsum(0).item::<f32>(), 2.5);
    let (v, i) = s.sort(-1, true);
    assert_eq!((v.item::<f32>(), i.item::<i64>()), (2.5, 0));
    let empty = Tensor::zeros(&[2, 0]);
    assert_eq!(empty.sort(1, false).0.shape(), &[2, 0]);
    assert_eq!(empty.cumsum(1).shape(), &[2, 0]);
    let (v, i) = Tensor::from_vec(vec![5i64, -2, 9, 0], &[2, 2]).sort(0, false);
    assert_eq!(v.to_vec::<i64>(), vec![5, -2, 9, 0]);
    assert_eq!(i.to_vec::<i64>(), vec![0, 0, 1, 1]);
    // f32 running sums add in f64, as PyTorch's CPU kernel: 1 + 2^-30
    // repeated, which an f32 accumulator would lose.
    let tiny = Tensor::from_vec(
        vec![1.0f32, 2f32.powi(-25), 2f32.powi(-25), 2f32.powi(-25)],
        &[4],
    );
    let last = tiny.cumsum(0).to_vec::<f32>()[3];
    assert_eq!(last, 1.0 + 3.0 * 2f32.powi(-25));
}

/// Draw frequencies follow the weights (within 5 standard errors over
/// 20,000 draws, seeded, so the test is deterministic); a zero weight is
/// never drawn; without replacement a row holds no repeats and its first
/// draw follows the weights too.
#[test]
fn multinomial_draws_follow_the_weights() {
    let w = Tensor::from_vec(vec![1.0f32, 0.0, 2.0, 5.0, 2.0], &[5]);
    let p = [0.1, 0.0, 0.2, 0.5, 0.2];
    let n = 20_000;
    let within = |counts: &[usize], n: usize, what: &str| {
        for (k, (&c, &pk)) in counts.iter().zip(&p).enumerate() {
            let f = c as f64 / n as f64;
            let se = (pk * (1.0 - pk) / n as f64).sqrt();
            assert!(
                (f - pk).abs() <= 5.0 * se + 1e-12,
                "{what}: category {k} drawn {f}, expected {pk}"
            );
        }
    };
    let g = Generator::new(11);
    let draws = w.multinomial_with(n, true, &g).to_vec::<i64>();
    let mut counts = [0usize; 5];
    for d in draws {
        counts[d as usize] += 1;
    }
    assert_eq!(counts[1], 0, "a weight of 0 is never drawn");
    within(&counts, n, "with replacement");

    let rows = w.unsqueeze(0).expand(&[4000, 5]).contiguous();
    let picks = rows.multinomial_with(3, false, &g);
    assert_eq!(picks.shape(), &[4000, 3]);
    let mut first = [0usize; 5];
    for row in picks.to_vec::<i64>().chunks(3) {
        assert!(
            row[0] != row[1] && row[1] != row[2] && row[0] != row[2],
            "{row:?}"
        );
        assert!(!row.contains(&1), "a weight of 0 is never drawn: {row:?}");
        first[row[0] as usize] += 1;
    }
    within(&first, 4000, "first draw without replacement");

    let again = w
        .multinomial_with(50, true, &Generator::new(11))
        .to_vec::<i64>();
    let first_50 = w
        .multinomial_with(50, true, &Generator::new(11))
        .to_vec::<i64>();
    assert_eq!(again, first_50, "a seeded generator repeats its draws");
}

#[test]
fn nonzero_and_masked_select_match_pytorch() {
    // torch.nonzero / masked_select on these inputs (torch 2.15).
    let x = Tensor::from_vec(vec![0.0f32, 1.5, 0.0, -2.0, 0.0, 3.0], &[2, 3]);
    assert_eq!(x.nonzero().to_vec::<i64>(), vec![0, 1, 1, 0, 1, 2]);
    assert_eq!(x.nonzero().shape(), &[3, 2]);
    assert_eq!(Tensor::zeros(&[2, 2]).nonzero().shape(), &[0, 2]);
    assert_eq!(Tensor::scalar(4.0f32).nonzero().shape(), &[1, 0]);
    let keep = x.gt_scalar(0.0);
    let x = x.requires_grad_(true);
    let picked = x.masked_select(&keep);
    assert_eq!(picked.to_vec::<f32>(), vec![1.5, 3.0]);
    (&picked * &Tensor::from_vec(vec![2.0f32, 5.0], &[2]))
        .sum()
        .backward();
    assert_eq!(
        x.grad().unwrap().to_vec::<f32>(),
        vec![0.0, 2.0, 0.0, 0.0, 0.0, 5.0]
    );
    // The mask broadcasts: one column mask picks from every row.
    let cols = Tensor::from_vec(vec![true, false, true], &[3]);
    assert_eq!(
        x.detach().masked_select(&cols).to_vec::<f32>(),
        vec![0.0, 0.0, -2.0, 3.0]
    );
}

/// Along a dim that is not the last, cumsum, softmax, log-softmax and amax
/// of a contiguous tensor run column kernels; through a transposed view the
/// same op runs the row kernels. Both must agree (cumsum and amax bit for
/// bit: the same sums in the same order), and f32 sort must order as f64's.
#[test]
fn column_kernels_agree_with_row_kernels_and_f32_sort_with_f64() {
    let x = Tensor::randn(&[3, 40, 70]);
    let bits = |t: &Tensor| -> Vec<u32> { t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect() };
    for d in [0isize, 1] {
        let rows =
            |f: &dyn Fn(&Tensor) -> Tensor| f(&x.transpose(d, 2)).transpose(d, 2).contiguous();
        assert_eq!(
            bits(&x.cumsum(d)),
            bits(&rows(&|t| t.cumsum(2))),
            "cumsum({d})"
        );
        assert_eq!(
            bits(&x.amax_dim(d, true)),
            bits(&x.max_dim(d, true).0),
            "amax_dim({d}) against max_dim's values"
        );
        for (name, cols, by_rows) in [
            ("softmax", x.softmax(d), rows(&|t| t.softmax(2))),
            ("log_softmax", x.log_softmax(d), rows(&|t| t.log_softmax(2))),
        ] {
            let (a, b) = (cols.to_vec::<f32>(), by_rows.to_vec::<f32>());
            let worst = a
                .iter()
                .zip(&b)
                .map(|(p, q)| (p - q).abs() / q.abs().max(1.0))
                .fold(0.0, f32::max);
            assert!(
                worst <= 1e-6,
                "{name}({d}): columns and rows differ by {worst}"
            );
        }
    }
    let ints = Tensor::from_vec((0..24i64).map(|i| i * 7 % 5 - 2).collect(), &[4, 6]);
    let running: Vec<i64> = (0..24)
        .map(|k| {
            (0..=k / 6)
                .map(|r| (r * 6 + k % 6) as i64 * 7 % 5 - 2)
                .sum()
        })
        .collect();
    assert_eq!(ints.cumsum(0).to_vec::<i64>(), running, "integer cumsum(0)");
    let mut v = Tensor::randn(&[5, 33]).to_vec::<f32>();
    v[3] = f32::NAN;
    (v[7], v[8], v[40]) = (0.0, -0.0, f32::NAN);
    let y = Tensor::from_vec(v, &[5, 33]);
    for descending in [false, true] {
        let (vals, idx) = y.sort(1, descending);
        let (vals64, idx64) = y.to_dtype(DType::F64).sort(1, descending);
        assert_eq!(
            idx.to_vec::<i64>(),
            idx64.to_vec::<i64>(),
            "sort(descending {descending})"
        );
        assert_eq!(
            bits(&vals),
            bits(&vals64.to_dtype(DType::F32)),
            "sort values"
        );
    }
}
