//! Shape, strides and offset of a view into a buffer.

/// How a tensor's elements sit in its buffer: element `idx` lives at
/// `offset + sum(idx[d] * strides[d])`. Strides are in elements and never
/// negative (as in PyTorch); a stride of 0 is a broadcast dimension.
///
/// ```
/// use tapir_kernels::Layout;
/// let l = Layout::contiguous(&[2, 3]);
/// assert_eq!(l.strides, vec![3, 1]);
/// assert!(l.transpose(0, 1).contiguous_offset().is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Size of each dim.
    pub shape: Vec<usize>,
    /// Elements to step over per index of each dim (0 where broadcast).
    pub strides: Vec<usize>,
    /// Position of the first element in the buffer.
    pub offset: usize,
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc *= shape[d];
    }
    strides
}

/// PyTorch's channels-last order of dims, outermost first (`NHWC`), for
/// 4-D shapes: the one memory format its elementwise ops check for
/// (5-D volumes go by their strides).
fn channels_last_order(ndim: usize) -> Option<Vec<usize>> {
    (ndim == 4).then(|| vec![0, 2, 3, 1])
}

/// Strides that lay `shape` out densely with its dims in `order`
/// (outermost first).
fn strides_in_order(shape: &[usize], order: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1;
    for &d in order.iter().rev() {
        strides[d] = acc;
        acc *= shape[d].max(1);
    }
    strides
}

/// A reduction's walk in memory order ([`Layout::reduction_order`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionOrder {
    /// The view with its dims of size > 1 in memory order.
    pub layout: Layout,
    /// The reduced dims, numbered in `layout`, increasing.
    pub dims: Vec<usize>,
    /// Dim `i` of `layout` is dim `perm[i]` of the view.
    pub perm: Vec<usize>,
    /// Where the walk's outputs (row-major over `layout`'s kept dims) sit
    /// for the caller's row-major order over its kept dims (size-1 dims
    /// left out, as they do not move an element): `None` when the two
    /// orders are one.
    pub output: Option<Layout>,
}

impl Layout {
    /// A row-major layout starting at offset 0.
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout {
            shape: shape.to_vec(),
            strides: contiguous_strides(shape),
            offset: 0,
        }
    }

    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (the product of the shape).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// `Some(offset)` when the elements are one dense row-major run.
    pub fn contiguous_offset(&self) -> Option<usize> {
        let mut expected = 1;
        for d in (0..self.shape.len()).rev() {
            if self.shape[d] != 1 && self.strides[d] != expected {
                return None;
            }
            expected *= self.shape[d];
        }
        Some(self.offset)
    }

    /// Whether the view is row-major and dense (any offset).
    pub fn is_contiguous(&self) -> bool {
        self.contiguous_offset().is_some()
    }

    /// The dims from outermost to innermost when the elements fill one
    /// dense run in some order of the dims (PyTorch's "non-overlapping and
    /// dense"): a permutation whose strides, in that order, are row-major.
    /// `None` for views with gaps, overlaps or broadcast dims.
    ///
    /// ```
    /// use tapir_kernels::Layout;
    /// let t = Layout::contiguous(&[2, 3, 4]).permute(&[2, 0, 1]);
    /// assert_eq!(t.dense_order(), Some(vec![1, 2, 0]));
    /// let mut sliced = Layout::contiguous(&[4, 3]);
    /// sliced.shape[0] = 2;
    /// sliced.strides[0] = 6;
    /// assert_eq!(sliced.dense_order(), None);
    /// ```
    pub fn dense_order(&self) -> Option<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.ndim()).collect();
        // Outermost first; a size-1 dim's stride says nothing, so it goes
        // outside, and ties keep the dims' own order.
        order.sort_by_key(|&d| std::cmp::Reverse((self.shape[d] != 1, self.strides[d])));
        let permuted = self.permute(&order);
        permuted.is_contiguous().then_some(order)
    }

    /// The walk a reduction over `dims` should take: this view's dims of
    /// size > 1 put in the order of its memory (largest stride first, ties
    /// in their own order), as PyTorch's TensorIterator reorders a
    /// reduction's dims, so a transposed or permuted view is read in runs
    /// instead of across its memory. `None` when the dims already are in
    /// that order, and for empty and broadcast views (a stride of 0 says
    /// nothing about where a dim sits).
    ///
    /// ```
    /// use tapir_kernels::Layout;
    /// // The sum over dim 1 of a transposed [3, 4] is the sum over dim 0
    /// // of the [4, 3] it views.
    /// let t = Layout::contiguous(&[4, 3]).transpose(0, 1);
    /// let walk = t.reduction_order(&[1]).unwrap();
    /// assert_eq!((walk.layout, walk.dims), (Layout::contiguous(&[4, 3]), vec![0]));
    /// assert_eq!(walk.output, None); // one kept dim: already in its order
    /// assert_eq!(Layout::contiguous(&[4, 3]).reduction_order(&[0]), None);
    /// ```
    pub fn reduction_order(&self, dims: &[usize]) -> Option<ReductionOrder> {
        let live: Vec<usize> = (0..self.ndim()).filter(|&d| self.shape[d] > 1).collect();
        if self.numel() == 0 || live.iter().any(|&d| self.strides[d] == 0) {
            return None;
        }
        let mut order = live.clone();
        order.sort_by_key(|&d| std::cmp::Reverse(self.strides[d]));
        if order == live {
            return None;
        }
        let reduced = |d: &usize| dims.contains(d);
        let kept_walked: Vec<usize> = order.iter().copied().filter(|d| !reduced(d)).collect();
        let kept: Vec<usize> = live.iter().copied().filter(|d| !reduced(d)).collect();
        // The walk writes its outputs row-major over the kept dims in its
        // order; each kept dim's stride in that buffer views it in the
        // caller's order.
        let sizes: Vec<usize> = kept_walked.iter().map(|&d| self.shape[d]).collect();
        let walked_strides = contiguous_strides(&sizes);
        let output = (kept_walked != kept).then(|| Layout {
            shape: kept.iter().map(|&d| self.shape[d]).collect(),
            strides: kept
                .iter()
                .map(|d| walked_strides[kept_walked.iter().position(|w| w == d).unwrap_or(0)])
                .collect(),
            offset: 0,
        });
        Some(ReductionOrder {
            layout: self.permute(&order),
            dims: (0..order.len()).filter(|&i| reduced(&order[i])).collect(),
            perm: order,
            output,
        })
    }

    /// How PyTorch lays out the result of an elementwise op over
    /// `operands` (each broadcastable to `shape`; TensorIterator's rules),
    /// at offset 0. When every operand has the full shape: row-major if
    /// they all are, channels-last (4-D) if they all are, and
    /// their strides if they are dense with equal strides. Otherwise the
    /// dims are sorted: two dims are ordered by the first operand whose
    /// strides for them are both non-zero and differ (the larger stride
    /// outside) or, where they are equal, by size (the larger dim inside);
    /// broadcast strides and ties defer to the next operand, and dims no
    /// operand orders keep their order. So a transposed view's `exp` keeps
    /// its strides, and `a + b` follows `a` where `a` and `b` disagree.
    ///
    /// ```
    /// use tapir_kernels::Layout;
    /// let t = Layout::contiguous(&[3, 4]).transpose(0, 1);
    /// let row = Layout::contiguous(&[4, 3]);
    /// assert_eq!(Layout::elementwise_result(&[&t, &row], &[4, 3]).strides, vec![1, 4]);
    /// assert_eq!(Layout::elementwise_result(&[&row, &t], &[4, 3]).strides, vec![3, 1]);
    /// let scalar = Layout::contiguous(&[]);
    /// assert_eq!(Layout::elementwise_result(&[&scalar, &t], &[4, 3]).strides, vec![1, 4]);
    /// ```
    pub fn elementwise_result(operands: &[&Layout], shape: &[usize]) -> Layout {
        let laid_out = |strides: Vec<usize>| Layout {
            shape: shape.to_vec(),
            strides,
            offset: 0,
        };
        if operands.iter().all(|l| l.shape == shape) {
            if operands.iter().all(|l| l.is_contiguous()) {
                return Layout::contiguous(shape);
            }
            if let Some(order) = channels_last_order(shape.len())
                && operands.iter().all(|l| l.is_dense_in(&order))
            {
                return laid_out(strides_in_order(shape, &order));
            }
            let first = &operands[0].strides;
            if operands.iter().all(|l| &l.strides == first) && operands[0].dense_order().is_some() {
                return laid_out(first.clone());
            }
        }
        let broadcast: Vec<Layout> = operands.iter().map(|l| l.broadcast_to(shape)).collect();
        laid_out(strides_in_order(
            shape,
            &Self::elementwise_order(&broadcast),
        ))
    }

    /// Whether the view is dense and row-major once its dims are put in
    /// `order` (outermost first), size-1 dims skipped (PyTorch's
    /// `is_contiguous(memory_format)`).
    fn is_dense_in(&self, order: &[usize]) -> bool {
        let mut expected = 1;
        for &d in order.iter().rev() {
            if self.shape[d] != 1 {
                if self.strides[d] != expected {
                    return false;
                }
                expected *= self.shape[d];
            }
        }
        true
    }

    /// The order of [`Layout::elementwise_result`]'s general case, over
    /// operands broadcast to one shape.
    fn elementwise_order(operands: &[Layout]) -> Vec<usize> {
        let ndim = operands.first().map_or(0, |l| l.ndim());
        // > 0: `inner` belongs outside `outer`; < 0: inside; 0: no opinion.
        let swap = |inner: usize, outer: usize| -> i32 {
            for l in operands {
                let (si, so) = (l.strides[inner], l.strides[outer]);
                if si == 0 || so == 0 {
                    continue;
                }
                if si != so {
                    return if si < so { -1 } else { 1 };
                }
                if l.shape[inner] > l.shape[outer] {
                    return 1;
                }
            }
            0
        };
        // Innermost first, as PyTorch sorts: an insertion sort that stops
        // at the first dim with an opinion against moving further.
        let mut perm: Vec<usize> = (0..ndim).rev().collect();
        for i in 1..ndim {
            let mut moving = i;
            for j in (0..i).rev() {
                match swap(perm[j], perm[moving]) {
                    c if c > 0 => {
                        perm.swap(j, moving);
                        moving = j;
                    }
                    c if c < 0 => break,
                    _ => {}
                }
            }
        }
        perm.reverse();
        perm
    }

    /// Swaps two dimensions (no data moves).
    pub fn transpose(&self, a: usize, b: usize) -> Self {
        let mut l = self.clone();
        l.shape.swap(a, b);
        l.strides.swap(a, b);
        l
    }

    /// Reorders dimensions: new dim `i` is old dim `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Self {
        Layout {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// Views this layout as `shape` (already checked broadcast-compatible):
    /// new leading dims and size-1 dims that grow get stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Self {
        let extra = shape.len() - self.ndim();
        let mut strides = vec![0; shape.len()];
        for d in 0..self.ndim() {
            strides[extra + d] = if self.shape[d] == 1 && shape[extra + d] != 1 {
                0
            } else {
                self.strides[d]
            };
        }
        Layout {
            shape: shape.to_vec(),
            strides,
            offset: self.offset,
        }
    }

    /// Strides for viewing this layout as `shape` without a copy, if possible
    /// (the algorithm of PyTorch's `computeStride`).
    pub fn reshape_strides(&self, shape: &[usize]) -> Option<Vec<usize>> {
        let numel = self.numel();
        if numel == 0 || self.shape.is_empty() {
            return Some(contiguous_strides(shape));
        }
        let mut new_strides = vec![0; shape.len()];
        let mut view_d = shape.len() as isize - 1;
        let mut chunk_base_stride = *self.strides.last().unwrap();
        let mut tensor_numel = 1;
        let mut view_numel = 1;
        for d in (0..self.ndim()).rev() {
            tensor_numel *= self.shape[d];
            if d == 0
                || (self.shape[d - 1] != 1
                    && self.strides[d - 1] != tensor_numel * chunk_base_stride)
            {
                while view_d >= 0 && (view_numel < tensor_numel || shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= shape[view_d as usize];
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if d > 0 {
                    chunk_base_stride = self.strides[d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(new_strides)
    }

    /// Calls `f` with the buffer offset of every element, in row-major order.
    #[inline]
    pub fn for_each_offset(&self, mut f: impl FnMut(usize)) {
        self.for_each_row(|base, len, stride| {
            for i in 0..len {
                f(base + i * stride);
            }
        });
    }

    /// The buffer offset of each matrix of a `[..batch, rows, cols]` view:
    /// one per index of the leading dims, in row-major order.
    ///
    /// ```
    /// let l = tapir_kernels::Layout::contiguous(&[2, 3, 4]);
    /// assert_eq!(l.batch_offsets(), vec![0, 12]);
    /// ```
    pub fn batch_offsets(&self) -> Vec<usize> {
        let lead = self.ndim().saturating_sub(2);
        let batch = Layout {
            shape: self.shape[..lead].to_vec(),
            strides: self.strides[..lead].to_vec(),
            offset: self.offset,
        };
        let mut offsets = Vec::new();
        batch.for_each_offset(|o| offsets.push(o));
        offsets
    }

    /// Calls `f(base, len, stride)` once per innermost row, in row-major
    /// order; a 0-d layout is one row of length 1.
    #[inline]
    pub fn for_each_row(&self, f: impl FnMut(usize, usize, usize)) {
        self.for_rows_in(0, self.rows(), f)
    }

    /// Number of innermost rows (numel / last dim).
    pub fn rows(&self) -> usize {
        match self.shape.last() {
            None => 1,
            Some(&0) => 0,
            Some(&n) => self.numel() / n,
        }
    }

    /// As [`Layout::for_each_row`] but only rows `start..end`, so a caller can
    /// split the work across threads.
    pub fn for_rows_in(&self, start: usize, end: usize, mut f: impl FnMut(usize, usize, usize)) {
        crate::cpu::for_rows(
            &self.shape,
            [&self.strides],
            [self.offset],
            start,
            end,
            |[b], len, [s]| f(b, len, s),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_a_transposed_slice() {
        let l = Layout {
            shape: vec![2, 3],
            strides: vec![1, 4],
            offset: 1,
        };
        let mut v = vec![];
        l.for_each_offset(|o| v.push(o));
        assert_eq!(v, vec![1, 5, 9, 2, 6, 10]);
        let mut part = vec![];
        l.for_rows_in(1, 2, |b, n, s| part.push((b, n, s)));
        assert_eq!(part, vec![(2, 3, 4)]);
    }

    #[test]
    fn reshape_strides_follow_pytorch() {
        let l = Layout::contiguous(&[4, 6]);
        assert_eq!(l.reshape_strides(&[2, 2, 6]), Some(vec![12, 6, 1]));
        let t = l.transpose(0, 1);
        assert_eq!(t.reshape_strides(&[24]), None);
        assert_eq!(t.reshape_strides(&[3, 2, 4]), Some(vec![2, 1, 6]));
    }
}
