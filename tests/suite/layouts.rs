//! Elementwise results laid out as PyTorch lays them out: in the order of
//! the operands' memory (`tests/goldens/elementwise_layouts.json`, from
//! `scripts/gen_layout_goldens.py`; unary, binary, comparison and
//! `where`), with the values of the same op on
//! row-major copies, and gradients that flow back unchanged.

use serde_json::Value;
use tapir::Tensor;

/// Replays a view recipe of the goldens' script on a row-major base
/// holding 0, 1, 2, ... (shifted so no value is 0 and comparisons mix).
fn build(recipe: &Value) -> Tensor {
    build_over(recipe, |i| (i as f32 * 0.37).sin() + 0.1).1
}

/// The recipe's base holding `value(i)` at position `i`, and the view.
fn build_over(recipe: &Value, value: impl Fn(usize) -> f32) -> (Tensor, Tensor) {
    let base: Vec<usize> = serde_json::from_value(recipe["base"].clone()).unwrap();
    let n: usize = base.iter().product();
    let base = Tensor::from_vec((0..n).map(value).collect(), &base);
    let mut t = base.clone();
    for step in recipe["steps"].as_array().unwrap() {
        let arg = |i: usize| step[i].as_i64().unwrap();
        let dims = |i: usize| -> Vec<i64> { serde_json::from_value(step[i].clone()).unwrap() };
        t = match step[0].as_str().unwrap() {
            "permute" => t.permute(&dims(1).iter().map(|&d| d as isize).collect::<Vec<_>>()),
            "narrow" => t.narrow(arg(1) as isize, arg(2) as usize, arg(3) as usize),
            "unsqueeze" => t.unsqueeze(arg(1) as isize),
            "expand" => t.expand(&dims(1).iter().map(|&d| d as usize).collect::<Vec<_>>()),
            "select" => t.select(arg(1) as isize, arg(2) as isize),
            other => panic!("unknown view step {other}"),
        };
    }
    (base, t)
}

/// Strides of the dims that are stepped: a size-1 dim's stride is never
/// used, and PyTorch's views pick it by rules of their own.
fn stepped(shape: &[usize], strides: &[usize]) -> Vec<usize> {
    (shape.iter().zip(strides))
        .map(|(&n, &s)| if n == 1 { 0 } else { s })
        .collect()
}

/// Whether the elements fill one run of memory in some order of the dims.
fn dense(shape: &[usize], strides: &[usize]) -> bool {
    let mut dims: Vec<(usize, usize)> = (shape.iter().copied().zip(strides.iter().copied()))
        .filter(|&(n, _)| n != 1)
        .collect();
    dims.sort_by_key(|&(_, s)| s);
    let mut expected = 1;
    for (n, s) in dims {
        if s != expected {
            return false;
        }
        expected *= n;
    }
    true
}

fn row_major(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

fn golden_strides(case: &Value, key: &str) -> Vec<usize> {
    serde_json::from_value(case[key].clone()).unwrap()
}

#[test]
fn elementwise_results_take_pytorchs_strides_and_the_row_major_values() {
    let path = format!("{}/elementwise_layouts.json", crate::common::goldens_dir());
    let text = std::fs::read_to_string(&path).expect("the goldens are checked in");
    let all: Value = serde_json::from_str(&text).unwrap();
    let cases = all["cases"].as_array().unwrap();
    assert!(cases.len() > 200);
    let mut reordered = 0;
    for (i, case) in cases.iter().enumerate() {
        let (a, b) = (build(&case["a"]), build(&case["b"]));
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        // The recipes rebuild PyTorch's operands exactly.
        let a_strides = golden_strides(case, "a_strides");
        assert_eq!(
            stepped(a.shape(), a.strides()),
            stepped(a.shape(), &a_strides)
        );
        let (ac, bc) = (a.contiguous(), b.contiguous());
        let results = [
            ("exp", a.exp(), ac.exp()),
            ("add", &a + &b, &ac + &bc),
            ("mul_ba", &b * &a, &bc * &ac),
            ("gt", a.gt(&b), ac.gt(&bc)),
            (
                "where",
                Tensor::where_(&a.gt(&b), &a, &b),
                Tensor::where_(&ac.gt(&bc), &ac, &bc),
            ),
        ];
        for (key, got, want) in results {
            let wanted = golden_strides(case, key);
            assert_eq!(
                stepped(got.shape(), got.strides()),
                stepped(got.shape(), &wanted),
                "case {i} ({key}): shape {:?}, operands' strides {:?} and {:?}",
                got.shape(),
                a.strides(),
                b.strides()
            );
            if key != "exp" {
                assert_eq!(got.shape(), &shape[..], "case {i} ({key})");
            }
            // The same kernel on row-major copies: equal bit for bit.
            assert_eq!(
                got.to_vec::<f64>(),
                want.to_vec::<f64>(),
                "case {i} ({key})"
            );
        }
        // A cast keeps a dense view's strides (`preserve_format`), as the
        // unary op does; other views come out row-major.
        let cast = a.to_dtype(tapir::DType::F64);
        let expected = if dense(a.shape(), a.strides()) {
            stepped(a.shape(), a.strides())
        } else {
            stepped(a.shape(), &row_major(a.shape()))
        };
        assert_eq!(
            stepped(cast.shape(), cast.strides()),
            expected,
            "case {i} (cast)"
        );
        assert_eq!(cast.to_vec::<f64>(), ac.to_vec::<f64>(), "case {i} (cast)");
        reordered += usize::from(!(&a + &b).is_contiguous());
    }
    // Enough cases where the result is not row-major to mean something.
    assert!(reordered > 50, "only {reordered} reordered results");
}

#[test]
fn a_transposed_result_flows_gradients_back_as_a_row_major_one() {
    let x = Tensor::from_vec((0..12).map(|i| i as f64 * 0.1 - 0.5).collect(), &[4, 3]);
    let w = Tensor::from_vec((0..12).map(|i| (i as f64).cos()).collect(), &[3, 4]);
    let grads = |transposed: bool| {
        let leaf = x.detach().requires_grad_(true);
        let view = if transposed {
            leaf.t()
        } else {
            leaf.t().contiguous()
        };
        let y = (&view.exp() * 2.0).sigmoid() * &w;
        assert_eq!(y.is_contiguous(), !transposed);
        y.sum().backward();
        leaf.grad().unwrap().to_vec::<f64>()
    };
    let (got, want) = (grads(true), grads(false));
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-15 * w.abs().max(1.0), "{g} vs {w}");
    }
}

/// The layout rule itself, from PyTorch's exact operand strides (size-1
/// dims included, which the views above may set otherwise): every
/// result's strides, size-1 dims' too, are PyTorch's.
#[test]
fn the_elementwise_layout_rule_gives_pytorchs_strides_exactly() {
    use tapir_kernels::Layout;
    let path = format!("{}/elementwise_layouts.json", crate::common::goldens_dir());
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (i, case) in all["cases"].as_array().unwrap().iter().enumerate() {
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        let operand = |side: &str| Layout {
            shape: build(&case[side]).shape().to_vec(),
            strides: golden_strides(case, &format!("{side}_strides")),
            offset: 0,
        };
        let (a, b) = (operand("a"), operand("b"));
        let condition = Layout::elementwise_result(&[&a, &b], &shape);
        for (key, operands, shape) in [
            ("exp", vec![&a], &a.shape),
            ("add", vec![&a, &b], &shape),
            ("mul_ba", vec![&b, &a], &shape),
            ("gt", vec![&a, &b], &shape),
            ("where", vec![&condition, &a, &b], &shape),
        ] {
            let result = Layout::elementwise_result(&operands, shape);
            assert_eq!(
                result.strides,
                golden_strides(case, key),
                "case {i} ({key})"
            );
        }
    }
}

/// In-place ops write through any view in the order of its memory (a
/// transposed target as one run, a source read across its memory copied
/// first): every element of the view gets the op's value and nothing else
/// in its buffer changes.
#[test]
fn in_place_ops_write_each_element_of_the_view_and_nothing_else() {
    let path = format!("{}/elementwise_layouts.json", crate::common::goldens_dir());
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut written = 0;
    for (i, case) in all["cases"].as_array().unwrap().iter().enumerate() {
        let value = |i: usize| (i as f32 * 0.37).sin() + 0.1;
        let (base, a) = build_over(&case["a"], value);
        // Where each element of the view lives in its base.
        let (_, position) = build_over(&case["a"], |i| i as f32);
        let b = build(&case["b"]);
        let shape: Vec<usize> = serde_json::from_value(case["shape"].clone()).unwrap();
        let expanded = a
            .strides()
            .iter()
            .zip(a.shape())
            .any(|(&s, &n)| s == 0 && n > 1);
        if expanded || shape != a.shape() {
            continue;
        }
        for op in ["add_", "mul_scalar_", "copy_"] {
            let before = base.to_vec::<f32>();
            let want = match op {
                "add_" => &a.contiguous() + &b,
                "copy_" => b.expand(&shape).contiguous(),
                _ => a.contiguous() * 3.0,
            };
            match op {
                "add_" => a.add_(&b),
                "copy_" => a.copy_(&b),
                _ => a.mul_scalar_(3.0),
            };
            let mut expected = before;
            for (p, v) in position.to_vec::<f32>().iter().zip(want.to_vec::<f32>()) {
                expected[*p as usize] = v;
            }
            assert_eq!(base.to_vec::<f32>(), expected, "case {i} ({op})");
            written += 1;
        }
    }
    assert!(written > 450, "only {written} in-place ops checked");
}

/// Whether a view's dims of size > 1 step through memory outermost first
/// (what a reduction walks without reordering them).
fn in_memory_order(shape: &[usize], strides: &[usize]) -> bool {
    let live: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
    live.windows(2).all(|w| strides[w[0]] >= strides[w[1]])
}

/// Reductions over the recipes' views (transposed, permuted, sliced,
/// broadcast) walk them in memory order where that differs from their
/// dims' order, and give the results of the same reduction over row-major
/// copies, row-major and in the dims' order. The values are small
/// integers, so every order of summation gives the same sums and they
/// are compared bit for bit; ties make `max_dim` pick the first index.
#[test]
fn reductions_over_views_give_the_row_major_results() {
    let path = format!("{}/elementwise_layouts.json", crate::common::goldens_dir());
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let (mut walked, mut kept_reordered) = (0, 0);
    for (i, case) in all["cases"].as_array().unwrap().iter().enumerate() {
        for side in ["a", "b"] {
            let (_, v) = build_over(&case[side], |i| ((i * 7) % 11) as f32 - 5.0);
            let c = v.contiguous();
            let (shape, strides) = (v.shape().to_vec(), v.strides().to_vec());
            let nd = v.ndim();
            let mut dim_sets: Vec<Vec<usize>> = (0..nd).map(|d| vec![d]).collect();
            for a in 0..nd {
                dim_sets.extend((a + 1..nd).map(|b| vec![a, b]));
            }
            dim_sets.push(vec![]);
            walked += usize::from(!in_memory_order(&shape, &strides));
            for dims in &dim_sets {
                let ctx =
                    format!("case {i}{side}: shape {shape:?}, strides {strides:?}, dims {dims:?}");
                let kept: Vec<usize> = (0..nd)
                    .filter(|d| !dims.contains(d) && !dims.is_empty())
                    .collect();
                let pick = |of: &[usize]| kept.iter().map(|&d| of[d]).collect::<Vec<_>>();
                kept_reordered += usize::from(!in_memory_order(&pick(&shape), &pick(&strides)));
                let dims: Vec<isize> = dims.iter().map(|&d| d as isize).collect();
                let same = |got: Tensor, want: Tensor, op: &str| {
                    assert!(got.is_contiguous(), "{ctx}: {op} came out strided");
                    assert_eq!(got.shape(), want.shape(), "{ctx}: {op}");
                    assert_eq!(got.to_vec::<f64>(), want.to_vec::<f64>(), "{ctx}: {op}");
                };
                same(v.sum_dims(&dims, false), c.sum_dims(&dims, false), "sum");
                same(v.mean_dims(&dims, true), c.mean_dims(&dims, true), "mean");
                same(
                    v.norm_dims(2.0, &dims, false),
                    c.norm_dims(2.0, &dims, false),
                    "norm",
                );
                let ints = v.to_dtype(tapir::DType::I64);
                same(
                    ints.sum_dims(&dims, false),
                    c.to_dtype(tapir::DType::I64).sum_dims(&dims, false),
                    "int sum",
                );
            }
            for d in 0..nd as isize {
                let ctx = format!("case {i}{side}: shape {shape:?}, strides {strides:?}, dim {d}");
                let (got, want) = (v.max_dim(d, false), c.max_dim(d, false));
                assert_eq!(got.0.to_vec::<f32>(), want.0.to_vec::<f32>(), "{ctx}: max");
                assert_eq!(
                    got.1.to_vec::<i64>(),
                    want.1.to_vec::<i64>(),
                    "{ctx}: max's indices"
                );
                let (got, want) = (v.min_dim(d, true), c.min_dim(d, true));
                assert_eq!(
                    got.1.to_vec::<i64>(),
                    want.1.to_vec::<i64>(),
                    "{ctx}: min's indices"
                );
                assert_eq!(
                    v.amax_dim(d, false).to_vec::<f32>(),
                    c.amax_dim(d, false).to_vec::<f32>(),
                    "{ctx}: amax"
                );
            }
        }
    }
    // Enough views and kept dims out of memory order to mean something.
    assert!(
        walked > 100 && kept_reordered > 100,
        "only {walked} views and {kept_reordered} kept dims walked out of order"
    );
}

/// `copy_` of a source read across its memory into a target whose rows
/// are runs (the copy kernel's tiled transpose), and the other way round,
/// from views at an offset and into other dtypes: every element lands
/// where the index arithmetic says.
#[test]
fn copy_of_a_transposed_source_lands_every_element() {
    let (b, r, c) = (3, 20, 17);
    // A [3, 20, 17] view at an offset into a [3, 24, 17] buffer.
    let big = Tensor::from_vec((0..b * 24 * c).map(|i| i as f32).collect(), &[b, 24, c]);
    let x = big.narrow(1, 2, r);
    let at = |bi: usize, i: usize, j: usize| ((bi * 24 + i + 2) * c + j) as f32;
    // x transposed, [3, 17, 20], by index arithmetic.
    let transposed: Vec<f32> = (0..b)
        .flat_map(|bi| (0..c).flat_map(move |j| (0..r).map(move |i| at(bi, i, j))))
        .collect();
    let y = Tensor::zeros(&[b, c, r]);
    y.copy_(&x.transpose(1, 2));
    assert_eq!(
        y.to_vec::<f32>(),
        transposed,
        "row-major target, transposed source"
    );
    let y64 = Tensor::zeros_on(&[b, c, r], tapir::DType::F64, tapir::Device::Cpu);
    y64.copy_(&x.transpose(1, 2));
    assert_eq!(y64.to_vec::<f32>(), transposed, "into f64");
    // The other way: a transposed target from a row-major source.
    let z = Tensor::zeros(&[b, r, c]);
    z.transpose(1, 2)
        .copy_(&Tensor::from_vec(transposed.clone(), &[b, c, r]));
    assert_eq!(
        z.to_vec::<f32>(),
        x.contiguous().to_vec::<f32>(),
        "transposed target"
    );
}
