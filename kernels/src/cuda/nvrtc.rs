//! One NVRTC compilation: PTX, and the GPU's own machine code (a CUBIN).
//!
//! The driver can only JIT PTX of an ISA version it knows, so PTX from a
//! newer NVRTC than the driver (the pip wheels run ahead of installed
//! drivers: NVRTC 13.5 against a CUDA 13.0 driver) fails to load with
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`. Machine code for a real
//! architecture has no such limit within a CUDA major version, so devices
//! load the CUBIN, as PyTorch's NVRTC-compiled kernels do, and the PTX
//! serves to read kernel parameters and as a fallback.

use cudarc::nvrtc::{result, sys};
use std::ffi::{CStr, CString, c_char};

/// What NVRTC made of one source for one architecture.
#[derive(Debug)]
pub struct Compiled {
    /// The PTX text (the fallback a newer driver compiles itself).
    pub ptx: String,
    /// Machine code for a real architecture (`sm_XY`); `None` for a virtual one.
    pub cubin: Option<Vec<u8>>,
}

/// Compiles `source` (named `name` in messages) for `arch` with `options`;
/// `Err` carries NVRTC's log. The caller checks that NVRTC is present.
pub fn compile(source: &str, name: &str, arch: &str, options: &[&str]) -> Result<Compiled, String> {
    let fail = |what: &str, e: result::NvrtcError| format!("NVRTC {what} {name} for {arch}: {e:?}");
    let src = CString::new(source).map_err(|_| format!("{name}: source contains a NUL byte"))?;
    let cname = CString::new(name).map_err(|_| format!("{name}: name contains a NUL byte"))?;
    let prog = result::create_program(&src, Some(&cname)).map_err(|e| fail("creating", e))?;
    let mut opts: Vec<String> = vec![format!("--gpu-architecture={arch}")];
    opts.extend(options.iter().map(|o| o.to_string()));
    // SAFETY: `prog` was created above and is destroyed only at the end of
    // this block; every buffer handed to NVRTC has the size NVRTC reported.
    let out = unsafe {
        let compiled = match result::compile_program(prog, &opts) {
            Ok(()) => {
                let ptx = result::get_ptx(prog).map_err(|e| fail("reading PTX of", e));
                ptx.and_then(|ptx| {
                    Ok((
                        text(&ptx),
                        cubin(prog).map_err(|e| fail("reading CUBIN of", e))?,
                    ))
                })
            }
            Err(e) => {
                let log = result::get_program_log(prog)
                    .map(|l| text(&l))
                    .unwrap_or_default();
                Err(format!(
                    "NVRTC could not compile {name} for {arch}:\n{log}\n({e:?})"
                ))
            }
        };
        let _ = result::destroy_program(prog);
        compiled
    };
    let (ptx, cubin) = out?;
    Ok(Compiled { ptx, cubin })
}

/// The CUBIN of a compiled program, if it targeted a real architecture.
///
/// # Safety
/// `prog` must be a live program that compiled successfully.
unsafe fn cubin(prog: sys::nvrtcProgram) -> Result<Option<Vec<u8>>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: per this function's contract; `size` is a valid out-pointer.
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    if size == 0 {
        return Ok(None);
    }
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` holds the `size` bytes NVRTC asked for.
    unsafe { sys::nvrtcGetCUBIN(prog, bytes.as_mut_ptr().cast::<c_char>()) }.result()?;
    Ok(Some(bytes))
}

/// A NUL-terminated buffer from NVRTC as text.
fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned())
}

/// NVRTC's version as `major.minor` (part of the disk cache's key).
pub fn version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-pointers; the caller checked NVRTC is present.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    match r.result() {
        Ok(()) => format!("{major}.{minor}"),
        Err(_) => "unknown".into(),
    }
}
