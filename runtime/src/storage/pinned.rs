//! Pinned host memory (`Tensor::pin_memory`) and its cache, PyTorch's
//! `CachingHostAllocator`: page-locking costs a driver call that touches
//! every page, so a pinned buffer that drops keeps its registration and
//! waits here for the next pinned copy of the same dtype and length (a
//! loader pins the same batch shape every step). A buffer taken from the
//! cache first waits for the last copy that read it.

use super::cpu::{CpuBuffer, with_vec};
use super::host::Tracked;
use crate::dtype::DType;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};
use tapir_kernels::Layout;
use tapir_kernels::alloc;
use tapir_kernels::cuda::{CudaResult, HostPin};

/// Bytes of free pinned buffers the cache keeps; beyond it a dropped pinned
/// buffer is unregistered and returned to the ordinary allocator.
const CACHE_MAX_BYTES: usize = 1 << 30;

#[derive(Default)]
struct Cache {
    free: HashMap<(DType, usize), Vec<(CpuBuffer, HostPin)>>,
    bytes: usize,
}

fn cache() -> MutexGuard<'static, Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// A contiguous copy of the view `l` of `src` in pinned memory, registered
/// through device `ordinal`'s context (usable from every device's).
pub(super) fn pinned_copy(src: &CpuBuffer, l: &Layout, ordinal: usize) -> CudaResult<Tracked> {
    let key = (src.dtype(), l.numel());
    let cached = {
        let mut c = cache();
        let hit = c.free.get_mut(&key).and_then(Vec::pop);
        if let Some((buf, _)) = &hit {
            c.bytes -= buf.nbytes();
        }
        hit
    };
    if let Some((mut buf, pin)) = cached {
        pin.wait()?;
        buf.assign(&Layout::contiguous(&l.shape), src, l);
        return Ok(Tracked::pinned(buf, pin));
    }
    let dev = tapir_kernels::cuda::device(ordinal)?;
    let mut buf = padded(src.dtype(), l.numel());
    buf.assign(&Layout::contiguous(&l.shape), src, l);
    let pin = with_vec!(&buf, v => HostPin::register(&dev, v))?;
    Ok(Tracked::pinned(buf, pin))
}

/// Bytes of unregistered room after each pinned buffer's elements.
const PAGE: usize = 4096;

/// `n` zeros of `dtype` in a fresh allocation with at least a page of
/// spare capacity after them. The driver refuses to register a page twice,
/// and two heap allocations can share a page; with this room, the page
/// holding a pinned buffer's last element is never the first page of the
/// next allocation, so no two pinned ranges share a page.
fn padded(dtype: DType, n: usize) -> CpuBuffer {
    fn zeros<T: Copy + Default>(n: usize) -> Vec<T> {
        let room = PAGE.div_ceil(std::mem::size_of::<T>().max(1));
        let mut v = Vec::with_capacity(n + room);
        v.resize(n, T::default());
        v
    }
    match dtype {
        DType::F32 => CpuBuffer::F32(zeros(n)),
        DType::F64 => CpuBuffer::F64(zeros(n)),
        DType::F16 => CpuBuffer::F16(zeros(n)),
        DType::BF16 => CpuBuffer::BF16(zeros(n)),
        DType::I64 => CpuBuffer::I64(zeros(n)),
        DType::U8 => CpuBuffer::U8(zeros(n)),
        DType::Bool => CpuBuffer::Bool(zeros(n)),
    }
}

/// Takes back a dropped pinned buffer: cached while there is room, else
/// unregistered (after its last copy) and recycled.
pub(super) fn release(buf: CpuBuffer, pin: HostPin) {
    let covers = with_vec!(&buf, v => pin.covers(v));
    if covers {
        let mut c = cache();
        if c.bytes + buf.nbytes() <= CACHE_MAX_BYTES {
            c.bytes += buf.nbytes();
            let key = (buf.dtype(), buf.len());
            c.free.entry(key).or_default().push((buf, pin));
            return;
        }
    }
    drop(pin);
    with_vec!(buf, v => {
        alloc::recycle(v);
    });
}

/// Unregisters and frees every cached pinned buffer
/// (`torch._C._host_emptyCache`); returns the bytes released.
pub(crate) fn empty_cache() -> usize {
    let free = {
        let mut c = cache();
        c.bytes = 0;
        std::mem::take(&mut c.free)
    };
    let mut bytes = 0;
    for (buf, pin) in free.into_values().flatten() {
        bytes += buf.nbytes();
        drop(pin);
        with_vec!(buf, v => {
            alloc::recycle(v);
        });
    }
    bytes
}
