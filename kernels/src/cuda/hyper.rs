//! Hyper-parameter tables: fused optimizer updates inside a CUDA graph.
//!
//! An optimizer step's learning rate, bias corrections and step count are
//! host values, computed anew at every step; a kernel that took them as
//! arguments would replay the captured step's values forever. While a
//! table is set on a device, each fused update (`launch::adam`, `sgd`,
//! `rmsprop`) writes its hyper-parameters into the next row of the table's
//! host mirror and, when capturing, launches the `_at` kernel that reads
//! them from the row's device copy. Before each replay the optimizer steps
//! again with the table in `Prepare` mode: the same rows are written (the
//! host computes exactly what an eager step would), nothing is launched,
//! and one upload puts them where the graph reads them. PyTorch gets the
//! same from `capturable=True` optimizers, which compute on the device.

use super::buffer::CudaBuffer;
use super::device::{CudaDevice, CudaError, CudaResult};
use cudarc::driver::DeviceRepr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes per row: every hyper struct fits, and rows stay aligned.
pub(crate) const ROW: usize = 64;

/// What a table does with the rows launchers give it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableMode {
    /// Capturing: write the row and launch the kernel that reads it.
    Capture,
    /// Before a replay: write the row the captured kernel reads; no launch.
    Prepare,
}

/// One graph's hyper-parameter rows, on the device and mirrored on the host.
pub struct HyperTable {
    buf: CudaBuffer,
    mirror: Vec<u8>,
    /// The kernel, element count and buffer addresses of each row, as
    /// captured.
    kinds: Vec<(String, usize, Vec<u64>)>,
    cursor: usize,
    mode: TableMode,
}

impl std::fmt::Debug for HyperTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HyperTable({} of {} rows)",
            self.kinds.len(),
            self.capacity()
        )
    }
}

impl HyperTable {
    /// A table of `rows` rows on `dev`.
    pub fn new(dev: &Arc<CudaDevice>, rows: usize) -> CudaResult<HyperTable> {
        let mut buf = dev.alloc(rows.max(1) * ROW)?;
        buf.zero()?;
        Ok(HyperTable {
            buf,
            mirror: vec![0; rows.max(1) * ROW],
            kinds: Vec::new(),
            cursor: 0,
            mode: TableMode::Capture,
        })
    }

    fn capacity(&self) -> usize {
        self.mirror.len() / ROW
    }

    /// Rows written since the table was set.
    pub fn written(&self) -> usize {
        self.cursor
    }

    /// Rows the capture wrote (what every `Prepare` must write again).
    pub fn captured(&self) -> usize {
        self.kinds.len()
    }

    /// Copies the mirror to the device, queued before whatever is launched
    /// next (the replay that reads it).
    pub fn upload(&mut self) -> CudaResult<()> {
        let mirror = std::mem::take(&mut self.mirror);
        let done = self.buf.write(&mirror);
        self.mirror = mirror;
        done
    }
}

/// The bytes of a hyper struct, as a table row holds them (and as its
/// kernel takes it by value).
pub(crate) fn row_bytes<H: DeviceRepr + Copy>(h: &H) -> &[u8] {
    // SAFETY: `H` is plain `#[repr(C)]` data of 4-byte fields (a
    // `DeviceRepr` hyper struct), so its bytes are initialised and it has
    // no padding; the view covers exactly `*h` and borrows it.
    unsafe { std::slice::from_raw_parts((h as *const H).cast::<u8>(), std::mem::size_of::<H>()) }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CudaDevice {
    /// Routes the hyper-parameters of this device's fused optimizer
    /// updates through `table` in `mode` until [`take_hyper_table`](Self::take_hyper_table).
    pub fn set_hyper_table(&self, mut table: HyperTable, mode: TableMode) {
        table.cursor = 0;
        table.mode = mode;
        if mode == TableMode::Capture {
            table.kinds.clear();
        }
        *lock(&self.hyper) = Some(table);
    }

    /// The table set last, if any; updates pass their values directly again.
    pub fn take_hyper_table(&self) -> Option<HyperTable> {
        lock(&self.hyper).take()
    }

    /// For a launcher of `kernel` (its `_at` form) on `n` elements of the
    /// buffers at `addresses` with hyper-parameters `h`: `None` without a
    /// table (launch by value); else the row's device address and whether
    /// to launch now.
    pub(crate) fn hyper_row<H: DeviceRepr + Copy>(
        &self,
        kernel: &str,
        n: usize,
        addresses: &[u64],
        h: &H,
    ) -> CudaResult<Option<(u64, bool)>> {
        let mut guard = lock(&self.hyper);
        let Some(table) = guard.as_mut() else {
            return Ok(None);
        };
        let row = table.cursor;
        if row >= table.capacity() {
            return Err(CudaError::Unsupported(format!(
                "cuda:{}: more fused optimizer updates than the graph's {} hyper-parameter rows",
                self.ordinal(),
                table.capacity()
            )));
        }
        match table.mode {
            TableMode::Capture => table
                .kinds
                .push((kernel.to_string(), n, addresses.to_vec())),
            TableMode::Prepare => {
                let same = table
                    .kinds
                    .get(row)
                    .is_some_and(|(k, m, a)| k == kernel && *m == n && a.as_slice() == addresses);
                if !same {
                    return Err(CudaError::Unsupported(format!(
                        "cuda:{}: optimizer update {row} ({kernel} on {n} elements) is not the \
                         one the CUDA graph captured: the optimizer's parameters, options or \
                         state buffers changed since the capture (reset the compiled step \
                         after load_state_dict or new parameter groups)",
                        self.ordinal()
                    )));
                }
            }
        }
        let bytes = row_bytes(h);
        let size = bytes.len();
        assert!(size <= ROW, "a hyper struct of {size} bytes exceeds a row");
        table.mirror[row * ROW..row * ROW + size].copy_from_slice(bytes);
        table.cursor += 1;
        let at = table.buf.ptr(row * ROW);
        Ok(Some((at, table.mode == TableMode::Capture)))
    }
}
