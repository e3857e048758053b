//! Fused attention on the GPU (`cu/attention.cu`): blocks of rows of one
//! slice, a warp per row, chunks of 32 keys (or queries) staged in shared
//! memory, an online softmax, no `[l, s]` scores in memory. CPU twins:
//! `cpu::attention_forward` and `cpu::attention_backward`.

use super::*;
use crate::cpu::{AttentionDims, AttentionOrder};

/// Rows (warps) per block, as `TAPIR_ATTN_WARPS` in the source.
const WARPS: usize = 8;

/// Keys (or queries) staged per step, as `TAPIR_ATTN_CHUNK`.
const CHUNK: usize = 32;

/// The widest `e` and `ev` the kernels take (`TAPIR_ATTN_MAX_WIDTH`: what
/// they hold in registers, and what keeps their staged rows within 48 KiB
/// of shared memory); wider heads run as separate ops.
pub const ATTENTION_MAX_WIDTH: usize = 128;

/// The most query or key rows per slice: blocks of rows are the grid's y
/// dimension, which CUDA bounds at 65,535.
pub const ATTENTION_MAX_ROWS: usize = 65_535 * WARPS;

/// A block per `WARPS` of a slice's `rows` (grid y), a slice per grid x, with
/// `row_floats` shared floats per warp's row and two staged chunks of
/// `CHUNK` padded rows of `e` and `ev` floats.
pub(in crate::cuda) fn blocks(d: AttentionDims, rows: usize, row_floats: usize) -> LaunchConfig {
    let staged = CHUNK * (d.e + 1) + CHUNK * (d.ev + 1);
    LaunchConfig {
        grid_dim: (d.batch as u32, rows.div_ceil(WARPS) as u32, 1),
        block_dim: (32 * WARPS as u32, 1, 1),
        shared_mem_bytes: ((WARPS * row_floats + staged) * 4) as u32,
    }
}

/// Where a view's rows lie (`AttnRows` in `cu/attention.cu`), in
/// elements: slice `b` of a `heads`-way split starts at `(b / heads) *
/// outer + (b % heads) * head`, its row `i` `i * row` further on, and a
/// row's elements are consecutive.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AttentionRows {
    /// Stride of the slice index's outer part (`b / heads`).
    pub outer: u64,
    /// Stride of the slice index's head part (`b % heads`).
    pub head: u64,
    /// Stride of a row.
    pub row: u64,
}

impl AttentionRows {
    /// The rows of `layout`, `[lead.., rows, width]`, split at its last
    /// leading dim (the heads): `None` when a row's elements are not
    /// consecutive or the other leading dims do not merge into one stride
    /// (then the caller reads a dense copy).
    pub fn of(layout: &Layout) -> Option<Self> {
        let (shape, strides) = (&layout.shape, &layout.strides);
        let n = shape.len();
        if n < 2 || (shape[n - 1] > 1 && strides[n - 1] != 1) {
            return None;
        }
        let head = if n > 2 { strides[n - 3] } else { 0 };
        // The outer dims (all leading dims but the heads) as one stride.
        let mut outer: Option<(usize, usize)> = None; // (size, stride) so far
        for d in (0..n.saturating_sub(3)).rev() {
            if shape[d] == 1 {
                continue;
            }
            outer = match outer {
                None => Some((shape[d], strides[d])),
                Some((size, stride)) if strides[d] == size * stride => {
                    Some((size * shape[d], stride))
                }
                Some(_) => return None,
            };
        }
        Some(AttentionRows {
            outer: outer.map_or(0, |(_, stride)| stride) as u64,
            head: head as u64,
            row: strides[n - 2] as u64,
        })
    }

    /// The rows of a tensor `[outer, heads, rows, width]` held in `order`.
    pub fn in_order(order: AttentionOrder, heads: usize, rows: usize, width: usize) -> Self {
        let (heads, rows, width) = (heads as u64, rows as u64, width as u64);
        match order {
            AttentionOrder::Dense => AttentionRows {
                outer: heads * rows * width,
                head: rows * width,
                row: width,
            },
            AttentionOrder::HeadsInside => AttentionRows {
                outer: rows * heads * width,
                head: width,
                row: heads * width,
            },
        }
    }
}

/// A tensor the attention kernels read in place: its buffer, the element
/// offset of its first row, and where its rows lie.
#[derive(Clone, Copy, Debug)]
pub struct AttentionView<'a> {
    /// The buffer.
    pub buf: &'a CudaBuffer,
    /// Elements before the view's first element.
    pub offset: usize,
    /// Where its rows lie.
    pub rows: AttentionRows,
}

impl<'a> AttentionView<'a> {
    /// The view `layout` of `buf`, or `None` where [`AttentionRows::of`]
    /// is.
    pub fn of(buf: &'a CudaBuffer, layout: &Layout) -> Option<Self> {
        AttentionRows::of(layout).map(|rows| AttentionView {
            buf,
            offset: layout.offset,
            rows,
        })
    }

    /// A buffer holding `[outer, heads, rows, width]` in `order`.
    pub fn whole(
        buf: &'a CudaBuffer,
        order: AttentionOrder,
        heads: usize,
        rows: usize,
        width: usize,
    ) -> Self {
        AttentionView {
            buf,
            offset: 0,
            rows: AttentionRows::in_order(order, heads, rows, width),
        }
    }

    /// Its first element's device address, for elements of `dtype`.
    fn ptr(&self, dtype: &str) -> u64 {
        self.buf.ptr(self.offset * width(dtype))
    }
}

/// `AttnViews` in `cu/attention.cu`: the heads splitting a slice index,
/// and the rows of every tensor (each kernel reads some; the rest are 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::cuda) struct AttentionViews {
    pub heads: u64,
    /// q, k, v, out, g (the upstream gradient), dq, dk, dv.
    pub rows: [AttentionRows; 8],
}

// SAFETY: plain `#[repr(C)]` u64 fields matching the C struct, by value.
unsafe impl DeviceRepr for AttentionViews {}

impl AttentionViews {
    /// The backward kernels' views: the rows they read (q, k, v, out, g)
    /// and the gradients' rows in `orders`.
    pub(in crate::cuda) fn backward(
        spec: &AttentionSpec,
        read: [AttentionRows; 5],
        orders: [AttentionOrder; 3],
    ) -> Self {
        let (d, h) = (spec.d, spec.heads);
        let [q, k, v, out, g] = read;
        AttentionViews {
            heads: h as u64,
            rows: [
                q,
                k,
                v,
                out,
                g,
                AttentionRows::in_order(orders[0], h, d.l, d.e),
                AttentionRows::in_order(orders[1], h, d.s, d.e),
                AttentionRows::in_order(orders[2], h, d.s, d.ev),
            ],
        }
    }
}

#[cfg(test)]
impl AttentionViews {
    /// The struct's bytes as the kernels take it (for the emulator).
    pub(in crate::cuda) fn bytes(&self) -> Vec<u8> {
        let rows = self.rows.iter().flat_map(|r| [r.outer, r.head, r.row]);
        std::iter::once(self.heads)
            .chain(rows)
            .flat_map(|x| x.to_le_bytes())
            .collect()
    }
}

/// How a call runs: its sizes, the heads that split its slices (a divisor
/// of `d.batch`), the score scale, the causal mask and the dtype name.
#[derive(Clone, Copy, Debug)]
pub struct AttentionSpec<'a> {
    /// Slices, rows and widths.
    pub d: AttentionDims,
    /// The slice index's inner part (the last leading dim of the tensors).
    pub heads: usize,
    /// Multiplies `q kᵀ`.
    pub scale: f32,
    /// PyTorch's `is_causal` (query `i` sees keys `0..=i`).
    pub causal: bool,
    /// `f32`, `f16` or `bf16`.
    pub dtype: &'a str,
}

impl AttentionSpec<'_> {
    fn check(&self, op: &str) {
        let d = self.d;
        assert!(
            d.e.max(d.ev) <= ATTENTION_MAX_WIDTH && d.l.max(d.s) <= ATTENTION_MAX_ROWS,
            "{op}: the CUDA kernel takes head widths up to {ATTENTION_MAX_WIDTH} and up to \
             {ATTENTION_MAX_ROWS} rows, got e {}, ev {}, l {} and s {}",
            d.e,
            d.ev,
            d.l,
            d.s
        );
        assert!(
            self.heads > 0 && d.batch.is_multiple_of(self.heads),
            "{op}: {} heads do not split {} slices",
            self.heads,
            d.batch
        );
    }

    /// The kernels' leading arguments: sizes, scale, causal flag.
    fn sizes(&self) -> ([usize; 4], f32, i32) {
        let d = self.d;
        ([d.l, d.s, d.e, d.ev], self.scale, self.causal as i32)
    }
}

/// `softmax(q kᵀ · scale [+ causal mask]) v` for views `q` `[batch, l,
/// e]`, `k` `[batch, s, e]`, `v` `[batch, s, ev]` of `spec.dtype` (f32,
/// f16, bf16): the output `[batch, l, ev]` in `order` and each query row's
/// f32 log-sum-exp (dense).
pub fn attention_forward(
    spec: AttentionSpec,
    [q, k, v]: [AttentionView; 3],
    order: AttentionOrder,
) -> CudaResult<(CudaBuffer, CudaBuffer)> {
    spec.check("attention_forward");
    let (d, dtype) = (spec.d, spec.dtype);
    let dev = q.buf.device();
    let out = dev.alloc(d.batch * d.l * d.ev * width(dtype))?;
    let lse = dev.alloc(d.batch * d.l * 4)?;
    if d.batch * d.l > 0 {
        let out_rows = AttentionRows::in_order(order, spec.heads, d.l, d.ev);
        let none = AttentionRows::default(); // the backward's views
        let views = AttentionViews {
            heads: spec.heads as u64,
            rows: [q.rows, k.rows, v.rows, out_rows, none, none, none, none],
        };
        let ([l, s, e, ev], scale, causal) = spec.sizes();
        let (pq, pk, pv) = (q.ptr(dtype), k.ptr(dtype), v.ptr(dtype));
        let (po, pm) = (out.ptr(0), lse.ptr(0));
        launch!(
            dev,
            format!("attention_forward_{dtype}"),
            blocks(d, l, e),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &views,
            &pq,
            &pk,
            &pv,
            &po,
            &pm
        )?;
    }
    Ok((out, lse))
}

/// The gradients `(dq, dk, dv)` of [`attention_forward`], each in its
/// `orders` entry, for the upstream view `g` `[batch, l, ev]`, from the
/// same inputs, the forward's output (a view) and its log-sum-exp: one
/// kernel per query row for `dq` (which also writes each row's `g · out`),
/// then one per key row for `dk` and `dv`.
pub fn attention_backward(
    spec: AttentionSpec,
    [q, k, v]: [AttentionView; 3],
    (out, lse, g): (AttentionView, &CudaBuffer, AttentionView),
    orders: [AttentionOrder; 3],
) -> CudaResult<(CudaBuffer, CudaBuffer, CudaBuffer)> {
    spec.check("attention_backward");
    let (d, dtype) = (spec.d, spec.dtype);
    let dev = q.buf.device();
    let w = width(dtype);
    let dq = dev.alloc(d.batch * d.l * d.e * w)?;
    let dk = dev.alloc(d.batch * d.s * d.e * w)?;
    let dv = dev.alloc(d.batch * d.s * d.ev * w)?;
    let delta = dev.alloc(d.batch * d.l * 4)?;
    let read = [q.rows, k.rows, v.rows, out.rows, g.rows];
    let views = AttentionViews::backward(&spec, read, orders);
    let ([l, s, e, ev], scale, causal) = spec.sizes();
    let (pq, pk, pv) = (q.ptr(dtype), k.ptr(dtype), v.ptr(dtype));
    let (po, pm, pg, pd) = (out.ptr(dtype), lse.ptr(0), g.ptr(dtype), delta.ptr(0));
    let (pdq, pdk, pdv) = (dq.ptr(0), dk.ptr(0), dv.ptr(0));
    if d.batch * l > 0 {
        launch!(
            dev,
            format!("attention_backward_dq_{dtype}"),
            blocks(d, l, e + ev),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &views,
            &pq,
            &pk,
            &pv,
            &po,
            &pm,
            &pg,
            &pd,
            &pdq
        )?;
    }
    if d.batch * s > 0 {
        launch!(
            dev,
            format!("attention_backward_dkv_{dtype}"),
            blocks(d, s, e + ev),
            &l,
            &s,
            &e,
            &ev,
            &scale,
            &causal,
            &views,
            &pq,
            &pk,
            &pv,
            &pm,
            &pd,
            &pg,
            &pdk,
            &pdv
        )?;
    }
    Ok((dq, dk, dv))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_a_head_split_are_read_in_place_and_others_are_refused() {
        // [B, T, H, E] = [2, 5, 3, 4] memory read as [B, H, T, E].
        let split = Layout::contiguous(&[2, 5, 3, 4]).transpose(1, 2);
        let rows = AttentionRows::of(&split).unwrap();
        assert_eq!(
            rows,
            AttentionRows {
                outer: 60,
                head: 4,
                row: 12
            }
        );
        assert_eq!(AttentionOrder::of(&split), AttentionOrder::HeadsInside);
        assert_eq!(
            rows,
            AttentionRows::in_order(AttentionOrder::HeadsInside, 3, 5, 4)
        );
        assert_eq!(
            split.strides,
            AttentionOrder::HeadsInside.strides(&split.shape)
        );
        // Dense, with two outer dims that merge.
        let dense = Layout::contiguous(&[2, 2, 3, 5, 4]);
        let rows = AttentionRows::of(&dense).unwrap();
        assert_eq!(
            rows,
            AttentionRows::in_order(AttentionOrder::Dense, 3, 5, 4)
        );
        assert_eq!(rows.outer, 60);
        assert_eq!(AttentionOrder::of(&dense), AttentionOrder::Dense);
        // Copying a dense result through `arranging` lays it out in order.
        let arranged = AttentionOrder::HeadsInside.arranging(&split.shape);
        let mut at = vec![];
        arranged.for_each_offset(|o| at.push(o));
        let mut expected = vec![0; 120];
        let mut k = 0;
        split.for_each_offset(|o| {
            expected[o] = k;
            k += 1;
        });
        assert_eq!(
            at, expected,
            "element i of the arranged copy is the dense result's"
        );
        // Outer dims that do not merge, and rows whose elements are apart.
        assert_eq!(AttentionRows::of(&dense.transpose(0, 1)), None);
        assert_eq!(AttentionRows::of(&dense.transpose(3, 4)), None);
        // Without leading dims: one slice.
        let one = AttentionRows::of(&Layout::contiguous(&[5, 4])).unwrap();
        assert_eq!((one.head, one.row), (0, 4));
    }
}
