//! Fused attention, forward and backward, against its tiled CPU twin.

use super::*;
use crate::cpu::{AttentionDims, AttentionOrder, Rows, attention_backward, attention_forward};
use crate::cuda::launch::{AttentionSpec, AttentionView};

/// Shapes that cross the kernels' edges: chunks of 32 keys and queries and
/// blocks of 8 rows cut mid-way, `l != s` with the causal mask on either
/// side, `e != ev`, a width past 32 lanes, one row, and a head as wide as
/// the kernels take.
pub(in crate::cuda) fn shapes() -> Vec<(AttentionDims, bool)> {
    let d = |batch, l, s, e, ev| AttentionDims { batch, l, s, e, ev };
    vec![
        (d(3, 37, 37, 16, 16), true),
        (d(3, 37, 37, 16, 16), false),
        (d(2, 70, 45, 40, 24), true),
        (d(2, 45, 70, 24, 40), true),
        (d(2, 33, 65, 64, 64), false),
        (d(1, 1, 1, 8, 8), true),
        (d(1, 40, 40, 128, 128), true),
        (d(2, 41, 39, 128, 96), false),
    ]
}

/// f32 values through `dtype` and back (what the GPU's inputs hold).
pub(in crate::cuda) fn rounded(x: &[f32], dtype: &str) -> Vec<f32> {
    match dtype {
        "f16" => x.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect(),
        "bf16" => x
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect(),
        _ => x.to_vec(),
    }
}

/// `x` on the GPU as `dtype`.
fn up_as(dev: &Arc<CudaDevice>, x: &[f32], dtype: &str) -> CudaBuffer {
    let b = up(dev, x);
    match dtype {
        "f32" => b,
        _ => launch::cast(&b, &Layout::contiguous(&[x.len()]), "f32", dtype).unwrap(),
    }
}

/// `n` elements of `dtype` on the GPU, as f32.
fn down_as(b: &CudaBuffer, n: usize, dtype: &str) -> Vec<f32> {
    match dtype {
        "f32" => down(b, n),
        _ => down(
            &launch::cast(b, &Layout::contiguous(&[n]), dtype, "f32").unwrap(),
            n,
        ),
    }
}

/// One case: inputs in [-1, 1] (scores stay in a range where f16 holds
/// them) rounded through `dtype` as the GPU holds them, and the tiled CPU
/// twin's output, log-sum-exp and gradients.
pub(in crate::cuda) struct AttentionCase {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub g: Vec<f32>,
    pub scale: f32,
    pub want: crate::cpu::AttentionForward<f32>,
    pub grads: (Vec<f32>, Vec<f32>, Vec<f32>),
}

/// The case of `d` (causal or not) drawn from `seed`, in `dtype`.
pub(in crate::cuda) fn attention_case(
    d: AttentionDims,
    causal: bool,
    seed: u32,
    dtype: &str,
) -> AttentionCase {
    let scale = 1.0 / (d.e as f32).sqrt();
    let draw = |len: usize, s: u32| -> Vec<f32> {
        let x: Vec<f32> = inputs(len, s).iter().map(|v| v / 2.0).collect();
        rounded(&x, dtype)
    };
    let q = draw(d.batch * d.l * d.e, seed);
    let k = draw(d.batch * d.s * d.e, seed + 1);
    let v = draw(d.batch * d.s * d.ev, seed + 2);
    let g = draw(d.batch * d.l * d.ev, seed + 3);
    let (cq, ck, cv) = (
        Rows::dense(&q, d.batch, d.l, d.e),
        Rows::dense(&k, d.batch, d.s, d.e),
        Rows::dense(&v, d.batch, d.s, d.ev),
    );
    let want = attention_forward(&cq, &ck, &cv, d, scale, causal);
    let (co, cg) = (
        Rows::dense(&want.out, d.batch, d.l, d.ev),
        Rows::dense(&g, d.batch, d.l, d.ev),
    );
    let grads = attention_backward(&cq, &ck, &cv, &co, &want.lse, &cg, d, scale, causal);
    AttentionCase {
        q,
        k,
        v,
        g,
        scale,
        want,
        grads,
    }
}

/// Where a case's tensors lie: dense with one head, or a head split's
/// memory (`[outer, rows, heads, width]` read as `[outer, heads, rows,
/// width]`) with inputs read in place, results written in that order and
/// the key `K_PAD` elements into its buffer (a view's offset).
#[derive(Clone, Copy, Debug)]
pub(in crate::cuda) struct Placement {
    pub order: AttentionOrder,
    pub heads: usize,
}

/// Elements before the key in its buffer in a heads-inside placement.
pub(in crate::cuda) const K_PAD: usize = 5;

impl Placement {
    /// Both placements of slices `batch`: dense, then heads inside with the
    /// most heads (up to 3) that divide `batch`.
    pub fn both(batch: usize) -> [Placement; 2] {
        let heads = (1..=3)
            .rev()
            .find(|h| batch.is_multiple_of(*h))
            .unwrap_or(1);
        [
            Placement {
                order: AttentionOrder::Dense,
                heads: 1,
            },
            Placement {
                order: AttentionOrder::HeadsInside,
                heads,
            },
        ]
    }

    /// The element offset of the key (`K_PAD` heads inside, else 0).
    pub fn k_pad(&self) -> usize {
        match self.order {
            AttentionOrder::Dense => 0,
            AttentionOrder::HeadsInside => K_PAD,
        }
    }

    /// The view `[outer, heads, rows, width]` of a buffer holding it in
    /// this order from element `offset`.
    pub fn layout(&self, batch: usize, rows: usize, width: usize, offset: usize) -> Layout {
        let shape = [batch / self.heads, self.heads, rows, width];
        Layout {
            strides: self.order.strides(&shape),
            shape: shape.to_vec(),
            offset,
        }
    }

    /// Dense `[batch, rows, width]` values in this order, behind `offset`
    /// zeros.
    pub fn lay(&self, x: &[f32], rows: usize, width: usize, offset: usize) -> Vec<f32> {
        let batch = x.len() / (rows * width);
        let l = self.layout(batch, rows, width, offset);
        let mut out = vec![0.0; offset + x.len()];
        let mut k = 0;
        l.for_each_offset(|at| {
            out[at] = x[k];
            k += 1;
        });
        out
    }

    /// The dense `[batch, rows, width]` values of a result in this order.
    pub fn unlay(&self, x: &[f32], rows: usize, width: usize) -> Vec<f32> {
        let batch = x.len() / (rows * width);
        let mut out = Vec::with_capacity(x.len());
        self.layout(batch, rows, width, 0)
            .for_each_offset(|at| out.push(x[at]));
        out
    }
}

#[test]
#[ignore = "needs a CUDA GPU: scripts/gpu-check.sh runs it"]
fn fused_attention_matches_its_cpu_twin_forward_and_backward() {
    let Some(dev) = gpu() else { return };
    for (dtype, tol) in [("f32", 2e-5), ("f16", 2e-2), ("bf16", 6e-2)] {
        for (n, (d, causal)) in shapes().into_iter().enumerate() {
            let what = |part: &str| format!("{dtype} {d:?} causal {causal}: {part}");
            let AttentionCase {
                q,
                k,
                v,
                g,
                scale,
                want,
                grads: (want_dq, want_dk, want_dv),
            } = attention_case(d, causal, 10 * n as u32, dtype);

            for place in Placement::both(d.batch) {
                let what = |part: &str| format!("{place:?} {}", what(part));
                let spec = AttentionSpec {
                    d,
                    heads: place.heads,
                    scale,
                    causal,
                    dtype,
                };
                let on_gpu = |x: &[f32], rows, width, offset| {
                    let laid = place.lay(x, rows, width, offset);
                    (
                        up_as(&dev, &laid, dtype),
                        place.layout(d.batch, rows, width, offset),
                    )
                };
                let (gq, lq) = on_gpu(&q, d.l, d.e, 0);
                let (gk, lk) = on_gpu(&k, d.s, d.e, place.k_pad());
                let (gv, lv) = on_gpu(&v, d.s, d.ev, 0);
                let view = |b, l| AttentionView::of(b, l).expect("a view with rows");
                let inputs = [view(&gq, &lq), view(&gk, &lk), view(&gv, &lv)];
                let (out, lse) = launch::attention_forward(spec, inputs, place.order).unwrap();
                let got = down_as(&out, d.batch * d.l * d.ev, dtype);
                close(&what("out"), &place.unlay(&got, d.l, d.ev), &want.out, tol);
                close(&what("lse"), &down(&lse, d.batch * d.l), &want.lse, tol);

                // The backward from the CPU's output (rounded as the GPU
                // holds it), so the two differ only by their own arithmetic.
                let (gout, lout) = on_gpu(&rounded(&want.out, dtype), d.l, d.ev, 0);
                let glse = up(&dev, &want.lse);
                let (gg, lg) = on_gpu(&g, d.l, d.ev, 0);
                let (dq, dk, dv) = launch::attention_backward(
                    spec,
                    inputs,
                    (view(&gout, &lout), &glse, view(&gg, &lg)),
                    [place.order; 3],
                )
                .unwrap();
                for (name, got, want, rows, width) in [
                    ("dq", &dq, &want_dq, d.l, d.e),
                    ("dk", &dk, &want_dk, d.s, d.e),
                    ("dv", &dv, &want_dv, d.s, d.ev),
                ] {
                    let got = place.unlay(&down_as(got, want.len(), dtype), rows, width);
                    close(&what(name), &got, want, tol);
                }
            }
        }
    }
}
