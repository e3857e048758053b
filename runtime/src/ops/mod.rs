//! Every op: forward (through the device seam) and backward side by side,
//! one file per family.

pub(crate) mod activation;
pub(crate) mod alike;
pub(crate) mod binary;
pub(crate) mod bitwise;
pub(crate) mod combine;
pub(crate) mod conv;
pub(crate) mod conv_transpose;
pub(crate) mod creation;
pub(crate) mod diagonal;
pub(crate) mod division;
pub(crate) mod einsum;
pub(crate) mod extremes;
pub(crate) mod frequency;
pub(crate) mod index;
pub(crate) mod inplace;
pub(crate) mod linalg;
pub(crate) mod logic;
pub(crate) mod math;
pub(crate) mod norm;
pub(crate) mod order;
pub(crate) mod pool;
pub(crate) mod product;
pub(crate) mod put;
pub(crate) mod reduce;
pub(crate) mod scatter;
pub(crate) mod select;
pub(crate) mod shape;
pub(crate) mod signs;
pub(crate) mod softmax;
pub(crate) mod special;
pub(crate) mod stacking;
pub(crate) mod statistics;
pub(crate) mod structured;
pub(crate) mod triangle;
pub(crate) mod unary;
pub(crate) mod view;
pub(crate) mod windows;

use crate::Tensor;
use crate::storage::Storage;
use tapir_kernels::Layout;

/// The shape two shapes broadcast to, or a panic naming the op.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize], op: &str) -> Vec<usize> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i < n - a.len() {
            1
        } else {
            a[i - (n - a.len())]
        };
        let db = if i < n - b.len() {
            1
        } else {
            b[i - (n - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => panic!(
                "{op}: shapes {a:?} and {b:?} cannot be broadcast together (dim {i}: {da} vs {db})"
            ),
        };
    }
    out
}

/// `t` as a dense buffer from offset 0, copied only when it is not one
/// already (what the GPU kernels that take plain pointers read).
pub(crate) fn dense0(t: &Tensor) -> Tensor {
    if t.is_contiguous() && t.layout().offset == 0 {
        t.detach()
    } else {
        t.contiguous_copy()
    }
}

/// An elementwise result from `kernel(operands, layouts)`, laid out as
/// PyTorch lays it out ([`Layout::elementwise_result`]: a transposed or
/// permuted view's `exp` keeps its strides). The kernel gets the
/// operands' views broadcast to `shape` with their dims in that order, so
/// it writes a row-major buffer and reads operands laid out alike as
/// runs in memory. An operand whose rows in that order are not runs in
/// memory (a transposed view beside a row-major one) is copied into the
/// order first: the tiled copy and a dense pass cost a third of a walk
/// across its memory.
pub(crate) fn elementwise<const N: usize>(
    operands: [Tensor; N],
    shape: &[usize],
    kernel: impl FnOnce(&[Tensor; N], &[Layout]) -> Storage,
) -> Tensor {
    let mut result = Layout::elementwise_result(&operands.each_ref().map(|t| t.layout()), shape);
    let order = walk_order(&result).unwrap_or_else(|| {
        result = Layout::contiguous(shape);
        (0..shape.len()).collect()
    });
    let (operands, ordered) = in_order(operands, shape, &order);
    Tensor::from_storage_laid_out(kernel(&operands, &ordered), result)
}

/// The dims of a result layout from outermost to innermost in memory
/// (`0..ndim` when row-major, without sorting); `None` if it does not read
/// as dense (an empty shape's strides may not).
fn walk_order(result: &Layout) -> Option<Vec<usize>> {
    match result.is_contiguous() {
        true => Some((0..result.ndim()).collect()),
        false => result.dense_order(),
    }
}

/// The operands' views broadcast to `shape` with their dims in `order`
/// (outermost first), each operand whose rows in that order are not runs
/// in memory replaced by a copy laid out in the order.
fn in_order<const N: usize>(
    operands: [Tensor; N],
    shape: &[usize],
    order: &[usize],
) -> ([Tensor; N], [Layout; N]) {
    let mut ordered = operands
        .each_ref()
        .map(|t| t.layout().broadcast_to(shape).permute(order));
    if !ordered.iter().any(rows_cross_memory) {
        return (operands, ordered);
    }
    let ordered_shape: Vec<usize> = order.iter().map(|&d| shape[d]).collect();
    let operands = std::array::from_fn(|i| {
        if rows_cross_memory(&ordered[i]) {
            let copy = operands[i].read().copy(&ordered[i]);
            ordered[i] = Layout::contiguous(&ordered_shape);
            Tensor::from_storage(copy, &ordered_shape)
        } else {
            operands[i].clone()
        }
    });
    (operands, ordered)
}

/// An in-place op's target and sources (broadcast to the target's shape)
/// with their dims in the order PyTorch walks them: the target's memory
/// order first, then the sources' (TensorIterator with the output
/// given). A transposed target is then written as one run, and a source
/// read across its memory is copied into the order first.
pub(crate) fn in_place_order<const N: usize>(
    target: &Tensor,
    sources: [Tensor; N],
) -> (Layout, [Tensor; N], [Layout; N]) {
    let order = in_place_walk(target, &sources);
    let (sources, ordered) = in_order(sources, target.shape(), &order);
    (target.layout().permute(&order), sources, ordered)
}

/// The order of dims [`in_place_order`] walks an in-place op's target and
/// sources in (outermost first).
pub(crate) fn in_place_walk(target: &Tensor, sources: &[Tensor]) -> Vec<usize> {
    let shape = target.shape();
    let mut all = vec![target.layout()];
    all.extend(sources.iter().map(|t| t.layout()));
    let walk = Layout::elementwise_result(&all, shape);
    walk_order(&walk).unwrap_or_else(|| (0..shape.len()).collect())
}

/// Whether a view is dense but its innermost stepped dim is not a run in
/// memory (a transposed view read in the order of a row-major one).
fn rows_cross_memory(l: &Layout) -> bool {
    let inner = (l.shape.iter().zip(&l.strides)).rfind(|&(&n, _)| n != 1);
    matches!(inner, Some((_, &stride)) if stride != 1) && l.dense_order().is_some()
}

/// Panics unless both tensors are on one device.
pub(crate) fn same_device(a: &Tensor, b: &Tensor, op: &str) {
    assert!(
        a.device() == b.device(),
        "{op}: expected all tensors on one device, got {} and {} (shapes {:?} and {:?})",
        a.device(),
        b.device(),
        a.shape(),
        b.shape()
    );
}

impl Tensor {
    /// Sums a broadcast gradient back down to `shape` (the adjoint of expand).
    pub(crate) fn sum_to(&self, shape: &[usize]) -> Tensor {
        if self.shape() == shape {
            return self.clone();
        }
        let lead = self.ndim() - shape.len();
        let mut dims: Vec<isize> = (0..lead as isize).collect();
        for (i, &s) in shape.iter().enumerate() {
            if s == 1 && self.shape()[lead + i] != 1 {
                dims.push((lead + i) as isize);
            }
        }
        let summed = if dims.is_empty() {
            self.clone()
        } else {
            self.sum_over(&dims, true)
        };
        let kept: Vec<isize> = summed.shape()[lead..].iter().map(|&d| d as isize).collect();
        summed.reshape(&kept)
    }
}
