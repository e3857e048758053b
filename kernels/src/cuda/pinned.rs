//! Page-locked host memory (PyTorch's `pin_memory`): a host buffer the
//! driver has locked in RAM, so a host-to-device copy reads it directly by
//! DMA, without the staging copy that pageable memory needs, and without
//! making the host wait.
//!
//! The runtime keeps its tensors' host memory in `Vec`s; pinning registers
//! such a buffer with the driver (`cuMemHostRegister`) instead of allocating
//! it from the driver, so the buffer stays an ordinary `Vec` that every CPU
//! kernel reads and writes. A [`HostPin`] is that registration. It remembers
//! the last copy that reads the memory: [`HostPin::wait`] waits for it, and
//! dropping the pin waits for it before unregistering. The runtime keeps the
//! pin beside its buffer, waits before writing the buffer, and drops the pin
//! before the buffer, so the memory a copy reads stays as it was until the
//! copy has run.

use super::device::{CudaDevice, CudaResult};
use cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE;
use cudarc::driver::{CudaEvent, DeviceRepr};
use std::sync::{Arc, Mutex};

/// The driver's registration of one host buffer as page-locked memory.
pub struct HostPin {
    dev: Arc<CudaDevice>,
    /// The buffer's first byte and length; 0 bytes are never registered
    /// (the driver refuses them) and count as pinned.
    addr: usize,
    bytes: usize,
    /// Recorded after the last copy that reads the buffer.
    last_read: Mutex<Option<CudaEvent>>,
}

impl std::fmt::Debug for HostPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostPin({} bytes, {:?})", self.bytes, self.dev)
    }
}

impl HostPin {
    /// Registers `data`'s memory as page-locked, usable by every context
    /// (`CU_MEMHOSTREGISTER_PORTABLE`), through device `dev`'s context. The
    /// driver refuses a page that is registered already, so the caller keeps
    /// registered buffers from sharing a page (the runtime leaves a page of
    /// spare capacity after each).
    pub fn register<T: DeviceRepr>(dev: &Arc<CudaDevice>, data: &[T]) -> CudaResult<HostPin> {
        let bytes = std::mem::size_of_val(data);
        let addr = data.as_ptr() as usize;
        if bytes > 0 {
            dev.bind()?;
            // SAFETY: the range is `data`'s own memory, live for this call.
            // Registering locks its pages; it neither reads nor writes them,
            // and the registration is undone in `Drop` (the runtime drops the
            // pin before the buffer).
            unsafe {
                cudarc::driver::sys::cuMemHostRegister_v2(
                    addr as *mut std::ffi::c_void,
                    bytes,
                    CU_MEMHOSTREGISTER_PORTABLE,
                )
            }
            .result()
            .map_err(|e| dev.err(&format!("pinning {bytes} bytes of host memory"), e))?;
        }
        Ok(HostPin {
            dev: dev.clone(),
            addr,
            bytes,
            last_read: Mutex::new(None),
        })
    }

    /// Whether this is the registration of exactly `data`'s memory.
    pub fn covers<T>(&self, data: &[T]) -> bool {
        data.as_ptr() as usize == self.addr && std::mem::size_of_val(data) == self.bytes
    }

    /// Waits until no queued copy reads the buffer any more (before the host
    /// writes it or lets it go).
    pub fn wait(&self) -> CudaResult<()> {
        let pending = self
            .last_read
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match pending {
            Some(event) => event
                .synchronize()
                .map_err(|e| self.dev.err("waiting for a copy from pinned memory", e)),
            None => Ok(()),
        }
    }

    /// Notes that a copy reading the buffer was just queued on `dev`'s stream.
    fn record_read(&self, dev: &CudaDevice) -> CudaResult<()> {
        let event = dev.new_event()?;
        event
            .record(dev.stream())
            .map_err(|e| dev.err("recording an event", e))?;
        *self.last_read.lock().unwrap_or_else(|e| e.into_inner()) = Some(event);
        Ok(())
    }
}

impl Drop for HostPin {
    fn drop(&mut self) {
        // A failed wait means the context is gone, and its copies with it.
        let _ = self.wait();
        if self.bytes > 0 && self.dev.bind().is_ok() {
            // SAFETY: `addr` was registered in `register` and not since
            // unregistered; unregistering only unlocks the pages.
            let _ = unsafe { cudarc::driver::sys::cuMemHostUnregister(self.addr as *mut _) };
        }
    }
}

impl CudaDevice {
    /// A new buffer holding `data`, copied by DMA straight from `data`'s
    /// pinned memory: the host neither stages nor waits. `pin` notes the
    /// copy; the caller keeps `data` unchanged and alive until `pin.wait()`
    /// (which dropping the pin calls).
    ///
    /// Panics if `pin` is not the registration of `data` (a runtime bug).
    pub fn upload_pinned<T: DeviceRepr>(
        self: &Arc<Self>,
        data: &[T],
        pin: &HostPin,
    ) -> CudaResult<super::CudaBuffer> {
        assert!(
            pin.covers(data),
            "upload_pinned: the pin does not cover the buffer"
        );
        self.refuse_in_capture("a host-to-device copy from pinned memory")?;
        let bytes = std::mem::size_of_val(data);
        let buf = self.alloc(bytes)?;
        if bytes == 0 {
            return Ok(buf);
        }
        self.bind()?;
        // SAFETY: `buf` is a fresh block of at least `bytes` bytes on this
        // device's stream. The copy runs later, in stream order, and reads
        // `data`'s pages, which `pin` has locked; `record_read` notes it, and
        // the runtime waits on the pin before the buffer is written or freed.
        unsafe {
            cudarc::driver::result::memcpy_htod_async(
                buf.ptr(0),
                std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes),
                self.stream().cu_stream(),
            )
        }
        .map_err(|e| self.err("host-to-device copy from pinned memory", e))?;
        pin.record_read(self)?;
        Ok(buf)
    }
}
