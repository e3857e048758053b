//! The fused `scaled_dot_product_attention` (flash attention's tiling on the
//! CPU) against its composition of plain ops, in f64 and f32, with
//! gradients, by finite differences, and through `sdpa_kernel`. PyTorch
//! goldens for both paths are in `nn_goldens` (`sdpa_*`, `mha_*`).

use crate::common::max_rel_diff;
use tapir::gradcheck;
use tapir::nn::{MultiheadAttention, SdpBackend, scaled_dot_product_attention, sdpa_kernel};
use tapir::prelude::*;

/// Output and the gradients of `sum(out * w)` for q, k, v.
fn run(qkv: &[Tensor; 3], causal: bool, scale: Option<f64>) -> Vec<Tensor> {
    let [q, k, v] = qkv.each_ref().map(|t| t.detach().requires_grad_(true));
    let out = scaled_dot_product_attention(&q, &k, &v, None, 0.0, causal, scale);
    let w = Tensor::linspace(-1.0, 1.5, out.numel())
        .reshape(&out.shape().iter().map(|&d| d as isize).collect::<Vec<_>>())
        .to_dtype(out.dtype());
    (&out * &w).sum().backward();
    vec![
        out.detach(),
        q.grad().unwrap(),
        k.grad().unwrap(),
        v.grad().unwrap(),
    ]
}

/// Largest `|a - b|` over the larger of `b`'s largest element and 1, the
/// inputs' scale. A gradient that is zero in exact arithmetic (`dq` of a
/// causal query that sees one key) is rounding noise on both paths; over
/// its own largest element that noise read as 1e-4, so the check failed or
/// passed with the draw.
fn diff_on_unit_scale(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_vec::<f64>(), b.to_vec::<f64>());
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs() / scale)
        .fold(0.0, f64::max)
}

/// Shapes that leave partial tiles, L > S, L < S, heads as leading dims.
fn cases() -> Vec<([usize; 4], usize, usize, bool)> {
    vec![
        ([2, 3, 130, 16], 70, 16, true),
        ([1, 2, 70, 8], 150, 4, true),
        ([2, 1, 65, 8], 65, 8, false),
        ([1, 1, 1, 8], 129, 8, true),
    ]
}

#[test]
fn flash_attention_matches_its_composition_in_f64_and_f32() {
    // Its own generator: other tests draw from the global one at the same
    // time, so inputs drawn there changed from run to run.
    let g = Generator::new(7);
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-6)] {
        for ([b, h, l, e], s, ev, causal) in cases() {
            let q = Tensor::randn_with(&[b, h, l, e], &g).to_dtype(dtype);
            let k = Tensor::randn_with(&[b, h, s, e], &g).to_dtype(dtype);
            let v = Tensor::randn_with(&[b, h, s, ev], &g).to_dtype(dtype);
            let qkv = [q, k, v];
            let flash = sdpa_kernel(&[SdpBackend::Flash], || run(&qkv, causal, Some(0.3)));
            let math = sdpa_kernel(&[SdpBackend::Math], || run(&qkv, causal, Some(0.3)));
            for (what, (f, m)) in ["out", "dq", "dk", "dv"]
                .iter()
                .zip(flash.iter().zip(&math))
            {
                assert_eq!(f.dtype(), dtype);
                let d = diff_on_unit_scale(f, m);
                assert!(
                    d <= tol,
                    "{dtype} q [{b}, {h}, {l}, {e}] s {s} causal {causal}: {what} differs by {d:e} (relative to its largest element, or to 1)"
                );
            }
        }
    }
}

#[test]
fn flash_attention_gradients_match_finite_differences() {
    tapir::manual_seed(8);
    for causal in [true, false] {
        // 66 queries and 67 keys: two tiles each, the second partial.
        let inputs = [
            Tensor::randn(&[1, 66, 3]).to_dtype(DType::F64),
            Tensor::randn(&[1, 67, 3]).to_dtype(DType::F64),
            Tensor::randn(&[1, 67, 2]).to_dtype(DType::F64),
        ];
        let f = |x: &[Tensor]| {
            sdpa_kernel(&[SdpBackend::Flash], || {
                scaled_dot_product_attention(&x[0], &x[1], &x[2], None, 0.0, causal, None)
            })
        };
        gradcheck(f, &inputs, 1e-6, 1e-7, 1e-5).unwrap_or_else(|e| panic!("causal {causal}: {e}"));
    }
}

#[test]
fn bf16_attention_runs_the_kernel_in_f32() {
    tapir::manual_seed(9);
    let qkv = [0, 1, 2].map(|_| Tensor::randn(&[2, 2, 70, 16]));
    let want = run(&qkv, true, None);
    let low = qkv.each_ref().map(|t| t.to_dtype(DType::BF16));
    let got = run(&low, true, None);
    for (what, (g, w)) in ["out", "dq", "dk", "dv"].iter().zip(got.iter().zip(&want)) {
        assert_eq!(g.dtype(), DType::BF16, "{what}");
        // Inputs rounded to bf16 (8 bits) and results rounded once.
        let d = max_rel_diff(&g.to_dtype(DType::F32), w);
        assert!(d < 3e-2, "bf16 {what} differs by {d:e}");
    }
}

/// The fused op is one node on the tape; what it cannot take (a mask,
/// dropout) composes from plain ops; `sdpa_kernel` decides.
#[test]
fn sdpa_chooses_the_fused_kernel_only_where_it_applies() {
    let q = Tensor::randn(&[2, 5, 4]).requires_grad_(true);
    let node = |f: &dyn Fn() -> Tensor| f().grad_fn_name().unwrap_or("none");
    const FLASH: &str = "ScaledDotProductFlashAttentionForCpuBackward0";
    let flash = node(&|| scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None));
    assert_eq!(flash, FLASH);

    let mask = Tensor::ones(&[5, 5]).gt_scalar(0.0);
    let masked = node(&|| scaled_dot_product_attention(&q, &q, &q, Some(&mask), 0.0, false, None));
    let dropped = node(&|| scaled_dot_product_attention(&q, &q, &q, None, 0.5, false, None));
    let math = node(&|| {
        sdpa_kernel(&[SdpBackend::Math], || {
            scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None)
        })
    });
    for (what, n) in [("masked", masked), ("dropout", dropped), ("math", math)] {
        assert!(n != FLASH && n != "none", "{what}: {n}");
    }

    let refused = std::panic::catch_unwind(|| {
        sdpa_kernel(&[SdpBackend::Flash], || {
            scaled_dot_product_attention(&q, &q, &q, Some(&mask), 0.0, false, None)
        })
    });
    let msg = *refused.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.starts_with("scaled_dot_product_attention: no allowed backend takes query [2, 5, 4]"),
        "{msg}"
    );
    // The previous choice is back after the closure (and after its panic).
    let again = node(&|| scaled_dot_product_attention(&q, &q, &q, None, 0.0, true, None));
    assert_eq!(again, FLASH);
}

/// MultiheadAttention without weights takes the fused path (PyTorch's fast
/// path) and gives what the plain-ops path gives.
#[test]
fn multihead_attention_fast_path_matches_the_plain_path() {
    tapir::manual_seed(10);
    let mha = MultiheadAttention::new(32, 4, true);
    let x = Tensor::randn(&[3, 70, 32]);
    let fast = mha.forward(&x, &x, &x, None, None, false, true).0;
    let plain = sdpa_kernel(&[SdpBackend::Math], || {
        mha.forward(&x, &x, &x, None, None, false, true).0
    });
    let d = max_rel_diff(&fast, &plain);
    assert!(d < 2e-6, "fast path differs by {d:e}");
}

/// q, k and v as head views of one projection buffer (GPT's
/// `qkv.split(E, -1)`), as `torch_ref`'s CharTransformer makes them: the
/// fused kernel converts the shared buffer once, and gives what it gives
/// for separate dense tensors of the same values, in bf16 and f64, with
/// gradients.
#[test]
fn sdpa_reads_q_k_v_that_share_one_buffer() {
    let (b, t, e, h) = (2, 19, 12, 3);
    for dtype in [DType::BF16, DType::F64] {
        let qkv = Tensor::randn_with(&[b, t, 3 * e], &Generator::new(5)).to_dtype(dtype);
        let heads = |x: &Tensor| {
            x.reshape(&[b as isize, t as isize, h as isize, -1])
                .transpose(1, 2)
        };
        let shared = qkv.split(e, -1);
        let shared = [heads(&shared[0]), heads(&shared[1]), heads(&shared[2])];
        let apart = shared.each_ref().map(|x| x.contiguous());
        let (a, p) = (run(&shared, true, None), run(&apart, true, None));
        // The output of head-split inputs comes with its heads inside rows
        // (PyTorch's flash layout), so merging the heads is no copy; that
        // of dense inputs is dense. (The gradients are laid out so too,
        // which the leaves' accumulation does not keep.)
        let merged = a[0].transpose(1, 2);
        assert!(
            merged.is_contiguous(),
            "{dtype}: strides {:?}",
            a[0].strides()
        );
        assert!(p[0].is_contiguous(), "{dtype}: dense output");
        for (name, (x, y)) in ["out", "dq", "dk", "dv"].iter().zip(a.iter().zip(&p)) {
            // The same kernel on the same values: bit for bit.
            assert_eq!(x.to_vec::<f64>(), y.to_vec::<f64>(), "{dtype} {name}");
        }
    }
}

/// Self-attention (`query`, `key` and `value` the same tensor, PyTorch's
/// `query is key is value`) projects q, k and v with one packed GEMM; the
/// same values as three tensors take three. Outputs and every gradient
/// agree.
#[test]
fn multihead_self_attention_packs_its_projection_as_three_inputs_would_give() {
    tapir::manual_seed(11);
    for need_weights in [false, true] {
        let mha = MultiheadAttention::new(24, 3, true);
        let x = Tensor::randn(&[2, 9, 24]);
        let mut results = vec![];
        for packed in [true, false] {
            mha.zero_grad();
            let x = x.detach().requires_grad_(true);
            // A reshape to the same shape is another tensor over the same
            // values, so the projection is not packed.
            let (k, v) = match packed {
                true => (x.clone(), x.clone()),
                false => (x.reshape(&[2, 9, 24]), x.reshape(&[2, 9, 24])),
            };
            let out = mha.forward(&x, &k, &v, None, None, need_weights, true).0;
            let w = Tensor::linspace(-1.0, 1.0, out.numel()).reshape(&[2, 9, 24]);
            (&out * &w).sum().backward();
            let p = mha.named_parameters();
            let grad = |name: &str| {
                let (_, t) = p.iter().find(|(n, _)| n == name).expect(name);
                t.grad().unwrap()
            };
            results.push([
                out.detach(),
                x.grad().unwrap(),
                grad("in_proj_weight"),
                grad("in_proj_bias"),
            ]);
        }
        for (name, (a, b)) in ["out", "dx", "d in_proj_weight", "d in_proj_bias"]
            .iter()
            .zip(results[0].iter().zip(&results[1]))
        {
            let d = max_rel_diff(a, b);
            assert!(
                d < 1e-5,
                "need_weights {need_weights}: {name} differs by {d:e}"
            );
        }
    }
}
