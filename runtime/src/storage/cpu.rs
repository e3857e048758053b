//! CPU buffers: one `Vec` per dtype, and the kernel calls for the
//! elementwise ops, reductions and matmul (`cpu_nn.rs` has the rest).
//! f16 and bf16 compute in f32 and round the result, as PyTorch does on CPU.

use crate::dtype::{DType, Element};
use half::{bf16, f16};
use tapir_kernels::elementwise::{BinaryFn, Compare, UnaryFn};
use tapir_kernels::{Layout, cpu};

#[derive(Clone, Debug)]
pub(crate) enum CpuBuffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
}

/// Runs `$body` with `$v` bound to the inner Vec, whatever the dtype.
macro_rules! with_vec {
    ($buf:expr, $v:ident => $body:expr) => {
        match $buf {
            CpuBuffer::F32($v) => $body,
            CpuBuffer::F64($v) => $body,
            CpuBuffer::F16($v) => $body,
            CpuBuffer::BF16($v) => $body,
            CpuBuffer::I64($v) => $body,
            CpuBuffer::U8($v) => $body,
            CpuBuffer::Bool($v) => $body,
        }
    };
}

pub(super) use with_vec;

pub(crate) trait Wrap: Element {
    fn wrap(v: Vec<Self>) -> CpuBuffer;
    /// The buffer's elements when it holds this type.
    fn peek(b: &CpuBuffer) -> Option<&[Self]>;
}
macro_rules! wrap {
    ($t:ty, $d:ident) => {
        impl Wrap for $t {
            fn wrap(v: Vec<Self>) -> CpuBuffer {
                CpuBuffer::$d(v)
            }
            fn peek(b: &CpuBuffer) -> Option<&[Self]> {
                match b {
                    CpuBuffer::$d(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
wrap!(f32, F32);
wrap!(f64, F64);
wrap!(f16, F16);
wrap!(bf16, BF16);
wrap!(i64, I64);
wrap!(u8, U8);
wrap!(bool, Bool);

fn cast_vec<S: Element, D: Element>(src: &[S], l: &Layout) -> Vec<D> {
    if D::DTYPE.is_float() || S::DTYPE.is_float() {
        cpu::map(src, l, |x| D::from_f64(x.to_f64()))
    } else {
        cpu::map(src, l, |x| D::from_i64(x.to_i64()))
    }
}

fn f32_vec<S: Element>(src: &[S], l: &Layout) -> Vec<f32> {
    cast_vec(src, l)
}

impl CpuBuffer {
    pub fn dtype(&self) -> DType {
        match self {
            CpuBuffer::F32(_) => DType::F32,
            CpuBuffer::F64(_) => DType::F64,
            CpuBuffer::F16(_) => DType::F16,
            CpuBuffer::BF16(_) => DType::BF16,
            CpuBuffer::I64(_) => DType::I64,
            CpuBuffer::U8(_) => DType::U8,
            CpuBuffer::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        with_vec!(self, v => v.len())
    }

    /// Gives a temporary buffer to the caching allocator (a tensor's
    /// storage does this when it dies; a bare buffer dropped would be lost
    /// to the cache, and the next op of its size would page in fresh memory).
    pub fn recycle(self) {
        with_vec!(self, v => {
            tapir_kernels::alloc::recycle(v);
        });
    }

    /// Bytes of the elements.
    pub fn nbytes(&self) -> usize {
        with_vec!(self, v => std::mem::size_of_val(v.as_slice()))
    }

    /// A row-major copy of the view, converted to `dtype`.
    pub fn cast(&self, l: &Layout, dtype: DType) -> CpuBuffer {
        // The f32 <-> half pairs convert densely; a strided view of them is
        // gathered in its own dtype first, not converted element by element
        // through f64 (an empty range asks whether the pair has a kernel).
        let fast = match l.contiguous_offset() {
            Some(o) => self.cast_dense(o..o + l.numel(), dtype),
            None if self.cast_dense(0..0, dtype).is_some() => {
                self.copy(l).cast_dense(0..l.numel(), dtype)
            }
            None => None,
        };
        if let Some(fast) = fast {
            return fast;
        }
        with_vec!(self, v => match dtype {
            DType::F32 => CpuBuffer::F32(cast_vec(v, l)),
            DType::F64 => CpuBuffer::F64(cast_vec(v, l)),
            DType::F16 => CpuBuffer::F16(cast_vec(v, l)),
            DType::BF16 => CpuBuffer::BF16(cast_vec(v, l)),
            DType::I64 => CpuBuffer::I64(cast_vec(v, l)),
            DType::U8 => CpuBuffer::U8(cast_vec(v, l)),
            DType::Bool => CpuBuffer::Bool(cast_vec(v, l)),
        })
    }

    /// The conversions mixed precision lives on (f32 to and from bf16/f16)
    /// over a dense range, through the vectorised kernels.
    fn cast_dense(&self, r: std::ops::Range<usize>, dtype: DType) -> Option<CpuBuffer> {
        Some(match (self, dtype) {
            (CpuBuffer::BF16(v), DType::F32) => CpuBuffer::F32(cpu::bf16_to_f32(&v[r])),
            (CpuBuffer::F16(v), DType::F32) => CpuBuffer::F32(cpu::f16_to_f32(&v[r])),
            (CpuBuffer::F32(v), DType::BF16) => CpuBuffer::BF16(cpu::f32_to_bf16(&v[r])),
            (CpuBuffer::F32(v), DType::F16) => CpuBuffer::F16(cpu::f32_to_f16(&v[r])),
            _ => return None,
        })
    }

    /// The view's elements as `T` (converting), row-major.
    pub fn to_vec<T: Element>(&self, l: &Layout) -> Vec<T> {
        // Half to f32 (the float kernels' input under autocast) through the
        // vectorised conversion: element by element through f64 it was most
        // of a bf16 softmax's 9 ms in the char transformer.
        if T::DTYPE == DType::F32
            && matches!(self, CpuBuffer::BF16(_) | CpuBuffer::F16(_))
            && let CpuBuffer::F32(v) = self.cast(l, DType::F32)
            && let Ok(v) = (Box::new(v) as Box<dyn std::any::Any>).downcast::<Vec<T>>()
        {
            return *v;
        }
        with_vec!(self, v => cast_vec(v, l))
    }

    /// Copies the view's elements into `dst` (row-major, converting): one
    /// `memcpy` when the view is dense and already `T`.
    pub fn read_into<T: Element>(&self, l: &Layout, dst: &mut [T]) {
        debug_assert_eq!(dst.len(), l.numel());
        if let Some(at) = l.contiguous_offset() {
            let dense = with_vec!(self, v => (v as &dyn std::any::Any).downcast_ref::<Vec<T>>());
            if let Some(v) = dense {
                dst.copy_from_slice(&v[at..at + dst.len()]);
                return;
            }
        }
        dst.copy_from_slice(&self.to_vec::<T>(l));
    }

    /// Writes `src · scale` over the view in place when the view is dense
    /// and of `T` (`false`, and nothing written, otherwise).
    pub fn write_scaled<T: Element>(&mut self, l: &Layout, src: &[T], scale: f64) -> bool {
        let Some(at) = l.contiguous_offset().filter(|_| l.numel() == src.len()) else {
            return false;
        };
        let dense = with_vec!(self, v => (v as &mut dyn std::any::Any).downcast_mut::<Vec<T>>());
        let Some(v) = dense else {
            return false;
        };
        let dst = &mut v[at..at + src.len()];
        match scale == 1.0 {
            true => dst.copy_from_slice(src),
            false => dst
                .iter_mut()
                .zip(src)
                .for_each(|(d, &s)| *d = T::from_f64(s.to_f64() * scale)),
        }
        true
    }

    pub fn copy(&self, l: &Layout) -> CpuBuffer {
        with_vec!(self, v => Wrap::wrap(cpu::copy_strided(v, l)))
    }

    pub fn unary<F: UnaryFn>(&self, l: &Layout, op: &F) -> CpuBuffer {
        // Through the row's fast form, then its exact form on the rare
        // elements (`UnaryFn::fast`); for most rows both are `f`.
        match self {
            CpuBuffer::F32(v) => CpuBuffer::F32(cpu::map_split_with(
                v,
                l,
                *op,
                #[inline(always)]
                |x, op| op.fast(x),
                #[inline(always)]
                |x, op| op.rare(x),
                #[inline(always)]
                |x, op| op.f(x),
            )),
            CpuBuffer::F64(v) => CpuBuffer::F64(cpu::map_split_with(
                v,
                l,
                *op,
                #[inline(always)]
                |x, op| op.fast(x),
                #[inline(always)]
                |x, op| op.rare(x),
                #[inline(always)]
                |x, op| op.f(x),
            )),
            CpuBuffer::F16(v) => CpuBuffer::F16(cpu::map_f16_split_with(
                v,
                l,
                *op,
                #[inline(always)]
                |x, op| op.fast(x),
                #[inline(always)]
                |x, op| op.rare(x),
                #[inline(always)]
                |x, op| op.f(x),
            )),
            CpuBuffer::BF16(v) => CpuBuffer::BF16(cpu::map_split_with(
                v,
                l,
                *op,
                #[inline(always)]
                |x, op| cpu::bf16_from_f32(op.fast(cpu::f32_from_bf16(x))),
                #[inline(always)]
                |x, op| op.rare(cpu::f32_from_bf16(x)),
                #[inline(always)]
                |x, op| cpu::bf16_from_f32(op.f(cpu::f32_from_bf16(x))),
            )),
            other if F::INT => {
                let r = other.cast(l, DType::I64);
                let CpuBuffer::I64(v) = r else { unreachable!() };
                let out = CpuBuffer::I64(v.iter().map(|&x| op.i(x)).collect());
                out.cast(&Layout::contiguous(&[v.len()]), self.dtype())
            }
            other => {
                let v = with_vec!(other, v => f32_vec(v, l));
                CpuBuffer::F32(v.iter().map(|&x| op.f(x)).collect())
            }
        }
    }

    /// `op(a, b)` over two same-dtype views broadcast to one shape.
    pub fn binary<F: BinaryFn>(
        &self,
        la: &Layout,
        rhs: &CpuBuffer,
        lb: &Layout,
        op: &F,
    ) -> CpuBuffer {
        use CpuBuffer::*;
        match (self, rhs) {
            (F32(a), F32(b)) => F32(cpu::zip_map(
                a,
                la,
                b,
                lb,
                #[inline(always)]
                |x, y| op.f(x, y),
            )),
            (F64(a), F64(b)) => F64(cpu::zip_map(
                a,
                la,
                b,
                lb,
                #[inline(always)]
                |x, y| op.f(x, y),
            )),
            (F16(a), F16(b)) => F16(cpu::zip_map_f16(
                a,
                la,
                b,
                lb,
                #[inline(always)]
                |x, y| op.f(x, y),
            )),
            (BF16(a), BF16(b)) => BF16(cpu::zip_map(
                a,
                la,
                b,
                lb,
                #[inline(always)]
                |x, y| cpu::bf16_from_f32(op.f(cpu::f32_from_bf16(x), cpu::f32_from_bf16(y))),
            )),
            (a, b) if F::INT => {
                let (I64(x), I64(y)) = (a.cast(la, DType::I64), b.cast(lb, DType::I64)) else {
                    unreachable!()
                };
                let out = I64(x.iter().zip(&y).map(|(&p, &q)| op.i(p, q)).collect());
                out.cast(&Layout::contiguous(&[x.len()]), self.dtype())
            }
            (a, b) => {
                let x = with_vec!(a, v => f32_vec(v, la));
                let y = with_vec!(b, v => f32_vec(v, lb));
                F32(x.iter().zip(&y).map(|(&p, &q)| op.f(p, q)).collect())
            }
        }
    }

    /// Elementwise comparison of two same-dtype views, to bool.
    pub fn compare(&self, la: &Layout, rhs: &CpuBuffer, lb: &Layout, cmp: Compare) -> CpuBuffer {
        use CpuBuffer::*;
        let out = match (self, rhs) {
            (F32(a), F32(b)) => cpu::zip_map(a, la, b, lb, |x, y| cmp.apply(x, y)),
            (F64(a), F64(b)) => cpu::zip_map(a, la, b, lb, |x, y| cmp.apply(x, y)),
            (I64(a), I64(b)) => cpu::zip_map(a, la, b, lb, |x, y| cmp.apply(x, y)),
            (a, b) => {
                let x: Vec<f64> = a.to_vec(la);
                let y: Vec<f64> = b.to_vec(lb);
                x.iter().zip(&y).map(|(&p, &q)| cmp.apply(p, q)).collect()
            }
        };
        Bool(out)
    }

    /// `cond ? a : b` over three views broadcast to one shape (`cond` bool;
    /// a, b same dtype).
    pub fn select_where(
        cond: &CpuBuffer,
        lc: &Layout,
        a: &CpuBuffer,
        la: &Layout,
        b: &CpuBuffer,
        lb: &Layout,
    ) -> CpuBuffer {
        let CpuBuffer::Bool(cond) = cond else {
            unreachable!("where: the condition is bool, got {}", cond.dtype())
        };
        with_vec!(a, av => {
            // `where_` casts both values to their promoted dtype first.
            let bv = Wrap::peek(b).expect("where kernel: both values have one dtype");
            Wrap::wrap(cpu::select(cond, lc, av, la, bv, lb))
        })
    }

    /// Sum of squares over `dims` for f32 and f64, squared as read (the
    /// same sums as squaring first); `None` for other dtypes.
    pub fn sum_squares(&self, l: &Layout, dims: &[usize]) -> Option<CpuBuffer> {
        match self {
            CpuBuffer::F32(v) => Some(CpuBuffer::F32(cpu::sum(v, l, dims, |x| x * x))),
            CpuBuffer::F64(v) => Some(CpuBuffer::F64(cpu::sum(v, l, dims, |x| x * x))),
            _ => None,
        }
    }

    /// Sum over `dims` (floats keep their dtype, integers and bool sum to i64).
    pub fn sum(&self, l: &Layout, dims: &[usize]) -> CpuBuffer {
        match self {
            CpuBuffer::F32(v) => CpuBuffer::F32(cpu::sum(v, l, dims, |x| x)),
            CpuBuffer::F64(v) => CpuBuffer::F64(cpu::sum(v, l, dims, |x| x)),
            CpuBuffer::F16(v) => CpuBuffer::F16(
                cpu::sum(v, l, dims, cpu::F16ToF32)
                    .into_iter()
                    .map(cpu::f16_from_f32)
                    .collect(),
            ),
            CpuBuffer::BF16(v) => CpuBuffer::BF16(
                cpu::sum(v, l, dims, cpu::Bf16ToF32)
                    .into_iter()
                    .map(bf16::from_f32)
                    .collect(),
            ),
            other => {
                with_vec!(other, v => CpuBuffer::I64(cpu::reduce(v, l, dims, 0i64, |a, x, _| a + x.to_i64())))
            }
        }
    }

    /// Max (or min) over one dim: values (same dtype) and the index of the
    /// first extreme element. NaN wins, as in PyTorch.
    pub fn extreme(&self, l: &Layout, dim: usize, max: bool) -> (CpuBuffer, Vec<i64>) {
        if let Some((walked, d)) = walked_in_memory_order(l, dim) {
            return self.extreme(&walked, d, max);
        }
        let len = l.shape.get(dim).copied().unwrap_or(0);
        let inner: usize = l.shape.iter().skip(dim + 1).product();
        if len > 0 && inner > 0 && len <= u32::MAX as usize && l.is_contiguous() {
            let span = l.offset..l.offset + l.numel();
            match self {
                CpuBuffer::F32(v) => {
                    let (vals, idx) = extreme_dense(&v[span], len, inner, max);
                    return (CpuBuffer::F32(vals), idx);
                }
                CpuBuffer::F64(v) => {
                    let (vals, idx) = extreme_dense(&v[span], len, inner, max);
                    return (CpuBuffer::F64(vals), idx);
                }
                _ => {}
            }
        }
        with_vec!(self, v => {
            let better = |cand: f64, cur: f64| cand.is_nan() && !cur.is_nan() || if max { cand > cur } else { cand < cur };
            let init = (None::<(f64, usize)>, v.first().copied().unwrap_or_default());
            let r = cpu::reduce(v, l, &[dim], init, |acc, x, i| match acc.0 {
                Some((cur, _)) if !better(x.to_f64(), cur) => acc,
                _ => (Some((x.to_f64(), i)), x),
            });
            let idx = r.iter().map(|(a, _)| a.map_or(0, |(_, i)| i as i64)).collect();
            (Wrap::wrap(r.into_iter().map(|(_, x)| x).collect()), idx)
        })
    }

    /// Max (or min) values over one dim of a contiguous f32 or f64 view,
    /// without indices (`amax`); `None` for other views and dtypes.
    pub fn extreme_values(&self, l: &Layout, dim: usize, max: bool) -> Option<CpuBuffer> {
        if let Some((walked, d)) = walked_in_memory_order(l, dim) {
            return self.extreme_values(&walked, d, max);
        }
        let (_, len, inner) = planes(l, dim)?;
        matches!(self, CpuBuffer::F32(_) | CpuBuffer::F64(_)).then(|| {
            self.float_kernel(
                l,
                |x| cpu::extreme_values(x, len, inner, max),
                |x| cpu::extreme_values(x, len, inner, max),
            )
        })
    }

    /// The product over `dim` (f32 and f64, views in or walked in memory
    /// order); `None` for other dtypes and layouts.
    pub fn product(&self, l: &Layout, dim: usize) -> Option<CpuBuffer> {
        if let Some((walked, d)) = walked_in_memory_order(l, dim) {
            return self.product(&walked, d);
        }
        let (_, len, inner) = planes(l, dim)?;
        matches!(self, CpuBuffer::F32(_) | CpuBuffer::F64(_)).then(|| {
            self.float_kernel(
                l,
                |x| cpu::product(x, len, inner),
                |x| cpu::product(x, len, inner),
            )
        })
    }

    /// A GEMM operand in f32 with the layout to read it by: a view that
    /// covers its whole buffer (a transposed weight) is converted densely
    /// and keeps its strides; a smaller view is gathered.
    fn as_f32_operand(&self, l: &Layout) -> (Vec<f32>, Layout) {
        if l.numel() == self.len()
            && let Some(CpuBuffer::F32(v)) = self.cast_dense(0..self.len(), DType::F32)
        {
            return (v, l.clone());
        }
        let CpuBuffer::F32(v) = self.cast(l, DType::F32) else {
            unreachable!("cast to f32 gives f32")
        };
        (v, Layout::contiguous(&l.shape))
    }

    pub fn matmul(&self, la: &Layout, rhs: &CpuBuffer, lb: &Layout) -> CpuBuffer {
        self.gemm(la, rhs, lb, None)
    }

    /// `self[l] += a @ b` for 2-D views where `l` is dense row-major and all
    /// three share a float dtype the GEMM takes (f32, f64); `false` (nothing
    /// written) otherwise, and the caller composes matmul and add.
    pub fn matmul_accumulate(
        &mut self,
        l: &Layout,
        a: &CpuBuffer,
        la: &Layout,
        b: &CpuBuffer,
        lb: &Layout,
    ) -> bool {
        use CpuBuffer::*;
        let n = l.shape.iter().product::<usize>();
        if !l.is_contiguous() {
            return false;
        }
        let span = l.offset..l.offset + n;
        match (self, a, b) {
            (F32(d), F32(x), F32(y)) => cpu::matmul_accumulate(x, la, y, lb, &mut d[span]),
            (F64(d), F64(x), F64(y)) => cpu::matmul_accumulate(x, la, y, lb, &mut d[span]),
            _ => return false,
        }
        true
    }

    /// `a @ b + bias` for 2-D views and a 1-D bias in one kernel (PyTorch's
    /// addmm).
    pub fn matmul_bias(
        &self,
        la: &Layout,
        rhs: &CpuBuffer,
        lb: &Layout,
        bias: &CpuBuffer,
        lbias: &Layout,
    ) -> CpuBuffer {
        self.gemm(la, rhs, lb, Some((bias, lbias)))
    }

    /// `a @ b`, plus `bias` when given. f16/bf16 multiply (and add the bias)
    /// in f32 and round once, as PyTorch's CPU path: bf16 on the AVX-512
    /// BF16 kernel where the CPU has one, else by converting to f32.
    fn gemm(
        &self,
        la: &Layout,
        rhs: &CpuBuffer,
        lb: &Layout,
        bias: Option<(&CpuBuffer, &Layout)>,
    ) -> CpuBuffer {
        use CpuBuffer::*;
        use std::borrow::Cow;
        fn run<T: tapir_kernels::Float>(
            a: &[T],
            la: &Layout,
            b: &[T],
            lb: &Layout,
            bias: Option<Cow<'_, [T]>>,
        ) -> Vec<T> {
            match bias {
                None => cpu::matmul(a, la, b, lb),
                Some(c) => cpu::matmul_bias(a, la, b, lb, &c),
            }
        }
        match (self, rhs, bias) {
            (F32(a), F32(b), None) => F32(run(a, la, b, lb, None)),
            (F32(a), F32(b), Some((F32(c), lc))) => F32(run(a, la, b, lb, Some(contiguous(c, lc)))),
            (F64(a), F64(b), None) => F64(run(a, la, b, lb, None)),
            (F64(a), F64(b), Some((F64(c), lc))) => F64(run(a, la, b, lb, Some(contiguous(c, lc)))),
            (BF16(a), BF16(b), None) if cpu::bf16_matmul_available() => {
                BF16(cpu::matmul_bf16(a, la, b, lb, None))
            }
            (BF16(a), BF16(b), Some((BF16(c), lc))) if cpu::bf16_matmul_available() => {
                BF16(cpu::matmul_bf16(a, la, b, lb, Some(&contiguous(c, lc))))
            }
            (a, b, bias) => {
                let (x, lx) = a.as_f32_operand(la);
                let (y, ly) = b.as_f32_operand(lb);
                let z = bias.map(|(c, lc)| match c.cast(lc, DType::F32) {
                    F32(z) => Cow::Owned(z),
                    _ => unreachable!("cast to f32 gives f32"),
                });
                let r = run(&x, &lx, &y, &ly, z);
                let n = r.len();
                F32(r).cast(&Layout::contiguous(&[n]), a.dtype())
            }
        }
    }
}

/// Max (or min) over the middle dim of a dense `[outer, len, inner]`
/// buffer with first indices: the rows kernel when the dim is the last, the
/// columns kernel otherwise.
fn extreme_dense<T: tapir_kernels::Float>(
    v: &[T],
    len: usize,
    inner: usize,
    max: bool,
) -> (Vec<T>, Vec<i64>) {
    if inner == 1 {
        cpu::extreme_rows(v, len, max)
    } else {
        cpu::extreme_columns(v, len, inner, max)
    }
}

/// A dense view as planes around `dim`: `(span, len, inner)` for a walk
/// of `span` in the buffer as `[outer, len, inner]`; `None` for a view that
/// is not dense or has no elements along `dim` or after it.
pub(crate) fn planes(l: &Layout, dim: usize) -> Option<(std::ops::Range<usize>, usize, usize)> {
    let len = l.shape.get(dim).copied().unwrap_or(0);
    let inner: usize = l.shape.iter().skip(dim + 1).product();
    let o = l.contiguous_offset()?;
    (len > 0 && inner > 0).then(|| (o..o + l.numel(), len, inner))
}

pub(crate) fn contiguous<'a, T: Copy + Send + Sync + Default + 'static>(
    v: &'a [T],
    l: &Layout,
) -> std::borrow::Cow<'a, [T]> {
    match l.contiguous_offset() {
        Some(o) => std::borrow::Cow::Borrowed(&v[o..o + l.numel()]),
        None => std::borrow::Cow::Owned(cpu::copy_strided(v, l)),
    }
}

/// A transposed or permuted dense view reduced over one `dim` as the
/// view of its memory in order (`x.t().amax(1)` is `x.amax(0)`): the
/// walked layout and the dim in it; `None` where the view already is in
/// order, is not dense, or its outputs would come out in another order.
fn walked_in_memory_order(l: &Layout, dim: usize) -> Option<(Layout, usize)> {
    let walk = l.reduction_order(&[dim])?;
    match walk.dims[..] {
        [d] if walk.output.is_none() && walk.layout.is_contiguous() => Some((walk.layout, d)),
        _ => None,
    }
}
