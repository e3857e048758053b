//! A block of device memory from the caching allocator; it goes back to the
//! cache when dropped. Untyped: the runtime's storage knows the dtype.

use super::device::{CudaDevice, CudaResult};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtr, DeviceRepr};
use std::sync::Arc;

/// A block of device memory from the caching allocator, returned to it on drop.
pub struct CudaBuffer {
    dev: Arc<CudaDevice>,
    /// `None` only while dropping.
    slice: Option<CudaSlice<u8>>,
    /// The bytes asked for (the block may be larger).
    bytes: usize,
    /// The pool the block goes back to: the shared cache or a graph's.
    owner: u64,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({:?}, {} bytes)", self.dev, self.bytes)
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            self.dev.release(s, self.owner);
        }
    }
}

impl CudaBuffer {
    pub(crate) fn new(
        dev: Arc<CudaDevice>,
        slice: CudaSlice<u8>,
        bytes: usize,
        owner: u64,
    ) -> Self {
        CudaBuffer {
            dev,
            slice: Some(slice),
            bytes,
            owner,
        }
    }

    /// The device the block lives on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// Bytes the buffer holds (its block may be larger).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn slice(&self) -> &CudaSlice<u8> {
        self.slice
            .as_ref()
            .expect("a live CudaBuffer holds its block")
    }

    /// The whole block, writable.
    pub(crate) fn block_mut(&mut self) -> &mut CudaSlice<u8> {
        self.slice
            .as_mut()
            .expect("a live CudaBuffer holds its block")
    }

    /// The first `len` elements as `T`, for library calls (NCCL, cuDNN)
    /// that take typed views. `T` must be the dtype the buffer holds.
    pub(crate) fn typed<T: DeviceRepr>(&self, len: usize) -> CudaView<'_, T> {
        assert!(
            len * std::mem::size_of::<T>() <= self.bytes,
            "a view of {len} elements of {} bytes into a buffer of {}",
            std::mem::size_of::<T>(),
            self.bytes
        );
        // SAFETY: the view lies inside the block (checked above), and the
        // runtime passes the dtype the buffer was written as, so every
        // element read is a value of `T` (all the types are plain data).
        unsafe { self.slice().transmute::<T>(len) }.expect("the block is large enough")
    }

    /// [`typed`](Self::typed), writable; the mutable borrow makes it the only
    /// view of the block while the library call is queued.
    pub(crate) fn typed_mut<T: DeviceRepr>(&mut self, len: usize) -> CudaViewMut<'_, T> {
        assert!(
            len * std::mem::size_of::<T>() <= self.bytes,
            "a view of {len} elements of {} bytes into a buffer of {}",
            std::mem::size_of::<T>(),
            self.bytes
        );
        // SAFETY: as in `typed`.
        unsafe { self.block_mut().transmute_mut::<T>(len) }.expect("the block is large enough")
    }

    /// The device address of the block: a CUDA graph replays on the
    /// addresses it captured, so its users compare them.
    pub fn address(&self) -> u64 {
        self.ptr(0)
    }

    /// The device address of byte `offset` (for kernel arguments).
    pub(crate) fn ptr(&self, offset: usize) -> u64 {
        let (p, _sync) = self.slice().device_ptr(self.dev.stream());
        p + offset as u64
    }

    /// Copies `data` into the start of the buffer (queued on the stream; the
    /// host does not wait for the GPU, see `CudaDevice::copy_htod`).
    pub fn write<T: DeviceRepr>(&mut self, data: &[T]) -> CudaResult<()> {
        let n = std::mem::size_of_val(data);
        assert!(
            n <= self.bytes,
            "CudaBuffer::write: {n} bytes into {}",
            self.bytes
        );
        if n == 0 {
            return Ok(());
        }
        let dev = self.dev.clone();
        dev.copy_htod(data, self.slice.as_mut().expect("live buffer"))
    }

    /// The first `len` elements as `T`; waits for the queued work.
    pub fn read<T: DeviceRepr + Default + Clone>(&self, len: usize) -> CudaResult<Vec<T>> {
        assert!(
            len * std::mem::size_of::<T>() <= self.bytes,
            "CudaBuffer::read: {len} elements of {} bytes from {}",
            std::mem::size_of::<T>(),
            self.bytes
        );
        self.dev.refuse_in_capture("a device-to-host copy")?;
        let mut out = vec![T::default(); len];
        if len == 0 {
            return Ok(out);
        }
        // SAFETY: as in `write`: the view lies inside the block, and the
        // runtime only reads a buffer as the dtype it was written as.
        let view = unsafe { self.slice().transmute::<T>(len) }.expect("the block is large enough");
        self.dev
            .stream()
            .memcpy_dtoh(&view, &mut out)
            .map_err(|e| self.dev.err("device-to-host copy", e))?;
        self.dev.synchronize()?;
        Ok(out)
    }

    /// A copy of the first `bytes` bytes into a new buffer, on the device.
    pub fn duplicate(&self) -> CudaResult<CudaBuffer> {
        let mut out = self.dev.alloc(self.bytes)?;
        if self.bytes > 0 {
            let dst = out.slice.as_mut().expect("live buffer");
            let src = self.slice().slice(0..self.bytes);
            let mut dst = dst.slice_mut(0..self.bytes);
            self.dev
                .stream()
                .memcpy_dtod(&src, &mut dst)
                .map_err(|e| self.dev.err("device-to-device copy", e))?;
        }
        Ok(out)
    }

    /// Sets the first `bytes` bytes to zero.
    pub fn zero(&mut self) -> CudaResult<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        let dev = self.dev.clone();
        let slice = self.slice.as_mut().expect("live buffer");
        let mut view = slice.slice_mut(0..self.bytes);
        dev.stream()
            .memset_zeros(&mut view)
            .map_err(|e| dev.err("memset", e))
    }
}
