//! The scatter family beyond its PyTorch goldens (`scatter*` and `index_*`
//! cases in `tests/goldens/core.json`): gradients PyTorch cannot give (a
//! source larger than the index), the tie rules of `amax`/`amin`, other
//! dtypes, and the errors.

use crate::common::panic_message;
use tapir::prelude::*;
use tapir::{ScatterReduce, gradcheck};

fn f64s(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

fn ids(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), shape)
}

/// A function of the inputs that gradcheck differentiates.
type Op<'a> = dyn Fn(&[Tensor]) -> Tensor + 'a;

fn rnd(shape: &[usize], seed: u64) -> Tensor {
    let g = Generator::new(seed);
    Tensor::randn_with(shape, &g).to_dtype(DType::F64)
}

#[test]
fn a_source_larger_than_the_index_gets_a_zero_padded_gradient() {
    // Only the index's [2, 2] corner of the [3, 4] source is read.
    let index = ids(&[0, 2, 1, 0], &[2, 2]);
    let (x, src) = (rnd(&[3, 3], 1), rnd(&[3, 4], 2));
    let reduce = |t: &[Tensor], r| t[0].scatter_reduce(1, &index, &t[1], r, true);
    let ops: [(&str, &Op); 4] = [
        ("scatter", &|t| t[0].scatter(1, &index, &t[1])),
        ("scatter_add", &|t| t[0].scatter_add(1, &index, &t[1])),
        ("amax", &|t| reduce(t, ScatterReduce::Amax)),
        ("prod", &|t| reduce(t, ScatterReduce::Prod)),
    ];
    for (name, f) in ops {
        gradcheck(f, &[x.clone(), src.clone()], 1e-6, 1e-6, 1e-5)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = src.clone().requires_grad_(true);
        f(&[x.clone(), s.clone()]).sum().backward();
        let g = s.grad().unwrap();
        assert_eq!(g.shape(), &[3, 4], "{name}");
        let outside = g.narrow(1, 2, 2).abs().sum().item::<f64>()
            + g.narrow(0, 2, 1).abs().sum().item::<f64>();
        assert_eq!(outside, 0.0, "{name}: gradient outside the index's extent");
    }
}

#[test]
fn an_excluded_self_equal_to_the_max_takes_no_share_of_its_gradient() {
    // PyTorch 2.15 gives src [0.5, 0]: it counts the excluded self[0] (3.0,
    // equal to the result) as a tie, then zeroes its share. The max here
    // is src[0] alone, so its derivative is 1 (central differences agree).
    for reduce in [ScatterReduce::Amax, ScatterReduce::Amin] {
        let x = f64s(&[3.0, 5.0], &[2]).requires_grad_(true);
        let src_vals = if reduce == ScatterReduce::Amax {
            [3.0, 1.0]
        } else {
            [3.0, 4.0]
        };
        let src = f64s(&src_vals, &[2]).requires_grad_(true);
        let index = ids(&[0, 0], &[2]);
        let out = x.scatter_reduce(0, &index, &src, reduce, false);
        assert_eq!(out.to_vec::<f64>(), vec![3.0, 5.0]);
        out.sum().backward();
        assert_eq!(
            src.grad().unwrap().to_vec::<f64>(),
            vec![1.0, 0.0],
            "{reduce:?}"
        );
        assert_eq!(
            x.grad().unwrap().to_vec::<f64>(),
            vec![0.0, 1.0],
            "{reduce:?}"
        );
    }
}

#[test]
fn ties_share_the_gradient_of_a_max_evenly() {
    let x = f64s(&[2.0, 0.0], &[2]).requires_grad_(true);
    let src = f64s(&[2.0, 2.0, 1.0], &[3]).requires_grad_(true);
    let index = ids(&[0, 0, 0], &[3]);
    let out = x.scatter_reduce(0, &index, &src, ScatterReduce::Amax, true);
    (&out * &f64s(&[3.0, 1.0], &[2])).sum().backward();
    assert_eq!(x.grad().unwrap().to_vec::<f64>(), vec![1.0, 1.0]);
    assert_eq!(src.grad().unwrap().to_vec::<f64>(), vec![1.0, 1.0, 0.0]);
}

#[test]
fn scatters_work_in_integer_bool_and_half_dtypes() {
    let labels = ids(&[2, 0, 1], &[3, 1]);
    let hot = Tensor::zeros_on(&[3, 3], DType::Bool, Device::Cpu).scatter_scalar(1, &labels, 1.0);
    let want = [false, false, true, true, false, false, false, true, false];
    assert_eq!(hot.to_vec::<bool>(), want);
    let counts = Tensor::zeros_on(&[3], DType::I64, Device::Cpu).scatter_add(
        0,
        &ids(&[2, 2, 0], &[3]),
        &ids(&[1, 1, 1], &[3]),
    );
    assert_eq!(counts.to_vec::<i64>(), vec![1, 0, 2]);
    let rows =
        counts
            .reshape(&[3, 1])
            .index_add(0, &ids(&[2, 2], &[2]), &ids(&[5, 6], &[2, 1]), 2.0);
    assert_eq!(rows.to_vec::<i64>(), vec![1, 0, 24]);
    let x = Tensor::from_vec(vec![1.0f32, -4.0, 2.5], &[3]);
    let src = Tensor::from_vec(vec![0.5f32, 8.0, -1.0, 3.0], &[4]);
    let index = ids(&[0, 1, 1, 2], &[4]);
    for dtype in [DType::F16, DType::BF16] {
        let (xh, sh) = (x.to_dtype(dtype), src.to_dtype(dtype));
        let out = xh.scatter_reduce(0, &index, &sh, ScatterReduce::Amax, true);
        assert_eq!(out.dtype(), dtype);
        assert_eq!(
            out.to_dtype(DType::F32).to_vec::<f32>(),
            vec![1.0, 8.0, 3.0]
        );
        let copied = xh.index_copy(0, &ids(&[2], &[1]), &sh.narrow(0, 1, 1));
        assert_eq!(
            copied.to_dtype(DType::F32).to_vec::<f32>(),
            vec![1.0, -4.0, 8.0]
        );
    }
}

#[test]
fn scatter_errors_name_the_op_and_the_shapes() {
    let x = Tensor::zeros(&[2, 5]);
    let m = panic_message(|| {
        x.scatter(1, &ids(&[0, 7], &[2, 1]), &Tensor::ones(&[2, 1]));
    });
    assert_eq!(m, "scatter: index 7 is out of bounds for dim of size 5");
    let m = panic_message(|| {
        x.scatter_add(1, &ids(&[0, 1, 2], &[1, 3]), &Tensor::ones(&[1, 2]));
    });
    assert_eq!(
        m,
        "scatter_add: index shape [1, 3] exceeds src [1, 2] or self [2, 5] at dim 1"
    );
    let m = panic_message(|| {
        x.index_add(1, &ids(&[0, 4], &[2]), &Tensor::ones(&[2, 3]), 1.0);
    });
    assert_eq!(
        m,
        "index_add: source of shape [2, 3] does not fit self [2, 5] with 2 indices along dim 1 (expected [2, 2])"
    );
    for dtype in [DType::F32, DType::I64] {
        let m = panic_message(|| {
            let x = x.to_dtype(dtype);
            x.index_add(1, &ids(&[9], &[1]), &x.narrow(1, 0, 1), 1.0);
        });
        assert_eq!(
            m, "index_add: index 9 is out of bounds for dim of size 5",
            "{dtype}"
        );
    }
    let m = panic_message(|| {
        x.index_fill(0, &Tensor::zeros(&[1]), 1.0);
    });
    assert!(
        m.starts_with("index_fill: index must be int64, got float32"),
        "{m}"
    );
    let m = panic_message(|| {
        let b = Tensor::zeros_on(&[2], DType::Bool, Device::Cpu);
        b.scatter_reduce(0, &ids(&[0], &[1]), &b, ScatterReduce::Sum, true);
    });
    assert_eq!(
        m,
        "scatter_reduce: bool tensors cannot be reduced; convert to an integer or float dtype first"
    );
}

#[test]
fn row_forms_equal_their_scatter_compositions() {
    // index_add and index_copy are scatters along a broadcast index; their
    // gradients are index_select's.
    let (x, src) = (rnd(&[4, 3], 3), rnd(&[4, 2], 4));
    let index = ids(&[2, 0], &[2]);
    let at = index.reshape(&[1, 2]).expand(&[4, 2]);
    let added = x.index_add(1, &index, &src, -0.5);
    let want = x.scatter_add(1, &at, &(&src * -0.5));
    assert_eq!(added.to_vec::<f64>(), want.to_vec::<f64>());
    let f = |t: &[Tensor]| t[0].index_add(1, &index, &t[1], -0.5);
    gradcheck(f, &[x.clone(), src.clone()], 1e-6, 1e-6, 1e-5).unwrap();
    let f = |t: &[Tensor]| t[0].index_copy(1, &index, &t[1]);
    gradcheck(f, &[x.clone(), src.clone()], 1e-6, 1e-6, 1e-5).unwrap();
    assert_eq!(
        x.index_copy(1, &index, &src).to_vec::<f64>(),
        x.scatter(1, &at, &src).to_vec::<f64>()
    );
}

#[test]
fn take_put_index_put_and_masked_scatter_errors_name_themselves() {
    let x = Tensor::zeros(&[2, 3]);
    let m = panic_message(|| {
        x.take(&ids(&[6], &[1]));
    });
    assert_eq!(m, "take: index 6 is out of bounds for dim of size 6");
    let m = panic_message(|| {
        x.put(&ids(&[0, 1], &[2]), &Tensor::ones(&[3]), false);
    });
    assert_eq!(m, "put: index has 2 elements, source of shape [3] has 3");
    let m = panic_message(|| {
        x.index_put(
            &[&ids(&[0], &[1]), &ids(&[3], &[1])],
            &Tensor::ones(&[1]),
            false,
        );
    });
    assert_eq!(m, "index_put: index 3 is out of bounds for dim of size 3");
    let m = panic_message(|| {
        let mask = Tensor::ones(&[2, 3]).gt_scalar(0.0);
        x.masked_scatter(&mask, &Tensor::ones(&[4]));
    });
    assert_eq!(
        m,
        "masked_scatter: the mask selects 6 elements, source of shape [4] has only 4"
    );
}

/// gather and the scatters read an index at its own strides: expanded
/// along a dim (read in place, never copied out), transposed or cut with
/// a step (copied out dense first) — each as its contiguous copy gives,
/// and an out-of-range entry is still caught through the view.
#[test]
fn strided_and_expanded_indices_act_as_their_contiguous_copies() {
    let (x, src) = (rnd(&[6, 5], 3), rnd(&[6, 5], 4));
    // At an offset in its storage (the 9 is cut off: it is out of range).
    let rows = ids(&[9, 4, 0, 4, 2, 5, 1], &[7, 1]).narrow(0, 1, 6);
    let base = ids(&[0, 3, 1, 4, 2, 0, 1, 2, 3, 4, 4, 0], &[2, 6]);
    let indices = [
        ("expanded", rows.expand(&[6, 5])),
        ("transposed", base.transpose(0, 1).narrow(1, 0, 2)),
        ("stepped", base.slice(1, 0, 6, 2)),
    ];
    for (name, index) in indices {
        let dense = index.contiguous();
        let same = |a: Tensor, b: Tensor, op: &str| {
            assert_eq!(
                a.to_vec::<f64>(),
                b.to_vec::<f64>(),
                "{op} with a {name} index"
            );
        };
        let dim = if name == "expanded" { 0 } else { 1 };
        same(x.gather(dim, &index), x.gather(dim, &dense), "gather");
        same(
            x.scatter_add(dim, &index, &src),
            x.scatter_add(dim, &dense, &src),
            "scatter_add",
        );
        same(
            x.scatter_reduce(dim, &index, &src, ScatterReduce::Amax, false),
            x.scatter_reduce(dim, &dense, &src, ScatterReduce::Amax, false),
            "scatter_reduce amax",
        );
        same(
            x.scatter(dim, &index, &src),
            x.scatter(dim, &dense, &src),
            "scatter",
        );
    }
    let bad = ids(&[4, 0, 6, 2, 5, 1], &[6, 1]).expand(&[6, 5]);
    let msg = panic_message(|| {
        x.gather(0, &bad);
    });
    assert!(
        msg.starts_with("gather: index 6 is out of bounds for dim of size 6"),
        "{msg}"
    );
}
