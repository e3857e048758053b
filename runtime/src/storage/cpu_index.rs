//! The CPU buffer's indexing kernels: gather and index_select, the
//! scatters (`torch.scatter`, `scatter_add`, `scatter_reduce`) and
//! index_select's adjoint.

use super::Along;
use super::cpu::{CpuBuffer, Wrap, contiguous, with_vec};
use std::borrow::Cow;
use tapir_kernels::Layout;
use tapir_kernels::cpu::{self, Indices, ScatterMode};

/// The first `n` indices of a dense i64 buffer, each checked against
/// `size` (read in place: an index as long as its tensor is not copied).
fn checked_indices<'a>(idx: &'a CpuBuffer, n: usize, size: usize, op: &str) -> &'a [i64] {
    let CpuBuffer::I64(v) = idx else {
        unreachable!("{op}: indices are int64, got {}", idx.dtype())
    };
    let ids = &v[..n];
    check_range(ids, size, op);
    ids
}

/// Panics, naming `op` and the first culprit, unless every index is in `0..size`.
fn check_range(ids: &[i64], size: usize, op: &str) {
    if !cpu::indices_below(ids, size) {
        let i = ids.iter().find(|&&i| i < 0 || i as usize >= size);
        panic!(
            "{op}: index {} is out of bounds for dim of size {size}",
            i.copied().unwrap_or_default()
        );
    }
}

/// An i64 index at `il` as the per-element kernels read it: the elements
/// it reaches, checked against `size`, and its layout over them. They are
/// read in place when they lie in one dense run once the dims the index is
/// expanded along (stride 0) are dropped; otherwise they are copied out.
fn checked_view<'a>(
    idx: &'a CpuBuffer,
    il: &Layout,
    size: usize,
    op: &str,
) -> (Cow<'a, [i64]>, Layout) {
    let CpuBuffer::I64(v) = idx else {
        unreachable!("{op}: indices are int64, got {}", idx.dtype())
    };
    let mut base = il.clone();
    for (extent, &stride) in base.shape.iter_mut().zip(&il.strides) {
        if stride == 0 {
            *extent = 1;
        }
    }
    let (ids, layout) = match base.contiguous_offset() {
        Some(o) => {
            let mut layout = il.clone();
            layout.offset -= o;
            (Cow::Borrowed(&v[o..o + base.numel()]), layout)
        }
        None => (
            Cow::Owned(cpu::copy_strided(v, il)),
            Layout::contiguous(&il.shape),
        ),
    };
    check_range(&ids, size, op);
    (ids, layout)
}

impl CpuBuffer {
    /// gather (`per_element`) or index_select through `along` (see `Storage::gather`).
    pub fn gather(
        &self,
        along: Along<'_>,
        (idx, il): (&CpuBuffer, &Layout),
        per_element: bool,
    ) -> CpuBuffer {
        let (view, d) = (along.view, along.dim);
        if per_element {
            let (ids, li) = checked_view(idx, il, along.size, along.op);
            let index = Indices {
                ids: &ids,
                layout: &li,
            };
            return with_vec!(self, v => Wrap::wrap(cpu::gather(v, view, d, index)));
        }
        let ids = checked_indices(idx, view.shape[d], along.size, along.op);
        // The whole dim is read: the tensor's own view, made dense (borrowed if it is).
        let mut input = view.clone();
        input.shape[d] = along.size;
        let outer: usize = input.shape[..d].iter().product();
        let inner: usize = input.shape[d + 1..].iter().product();
        with_vec!(self, v => Wrap::wrap(cpu::index_select(&contiguous(v, &input), outer, along.size, inner, ids)))
    }

    /// The scatter of `mode` into this buffer (see `Storage::scatter`):
    /// assignment in every dtype, the reductions in f32, f64, int64 and uint8.
    pub fn scatter(
        &mut self,
        along: Along<'_>,
        src: &CpuBuffer,
        ls: &Layout,
        (idx, il): (&CpuBuffer, &Layout),
        mode: ScatterMode,
    ) {
        use CpuBuffer::*;
        let (ids, li) = checked_view(idx, il, along.size, along.op);
        let ids = Indices {
            ids: &ids,
            layout: &li,
        };
        let (ld, d) = (along.view, along.dim);
        macro_rules! reduce {
            ($dst:expr, $src:expr) => {
                cpu::scatter_reduce($dst, ld, d, ids, $src, ls, mode)
            };
        }
        macro_rules! assign {
            ($dst:expr, $src:expr) => {
                cpu::scatter_assign($dst, ld, d, ids, $src, ls)
            };
        }
        match (self, src) {
            (F32(t), F32(s)) => reduce!(t, s),
            (F64(t), F64(s)) => reduce!(t, s),
            (I64(t), I64(s)) => reduce!(t, s),
            (U8(t), U8(s)) => reduce!(t, s),
            (F16(t), F16(s)) if mode == ScatterMode::Assign => assign!(t, s),
            (BF16(t), BF16(s)) if mode == ScatterMode::Assign => assign!(t, s),
            (Bool(t), Bool(s)) if mode == ScatterMode::Assign => assign!(t, s),
            (t, s) => unreachable!(
                "{}: scatters ({}) {} into {} (the op converts first)",
                along.op,
                mode.name(),
                s.dtype(),
                t.dtype()
            ),
        }
    }

    /// index_select's adjoint into this f32/f64 buffer (see `Storage::index_add`).
    pub fn index_add(
        &mut self,
        shape: [usize; 3],
        src: &CpuBuffer,
        idx: &CpuBuffer,
        (len, op): (usize, &str),
    ) {
        let [outer, size, inner] = shape;
        let ids = checked_indices(idx, len, size, op);
        let (nd, ns) = (outer * size * inner, outer * len * inner);
        match (self, src) {
            (CpuBuffer::F32(d), CpuBuffer::F32(s)) => {
                cpu::index_add_rows(&mut d[..nd], size, inner, &s[..ns], ids)
            }
            (CpuBuffer::F64(d), CpuBuffer::F64(s)) => {
                cpu::index_add_rows(&mut d[..nd], size, inner, &s[..ns], ids)
            }
            (d, s) => unreachable!(
                "{op}: adds {} into {} (the op adds in f32 or f64)",
                s.dtype(),
                d.dtype()
            ),
        }
    }
}
