//! Automatic mixed precision (PyTorch's `torch.amp`): `autocast` regions in
//! which ops pick their own precision, and the [`GradScaler`] that keeps
//! small f16 gradients from underflowing.
//!
//! Autocast is thread-local and nestable, like `no_grad`. Inside a region
//! enabled for a device type, each op that has a policy casts its floating
//! inputs before it runs, following PyTorch's lists:
//! - **lower precision** (the region's dtype): matmul / mm / bmm, linear,
//!   conv1d / conv2d, scaled_dot_product_attention (and so the attention,
//!   recurrent and transformer projections);
//! - **f32 everywhere**: cross_entropy, nll_loss, mse_loss, l1_loss,
//!   smooth_l1_loss, huber_loss, binary_cross_entropy_with_logits;
//! - **f32 on CUDA** (on the CPU they run in the low dtype, as PyTorch's
//!   CPU list omits them): softmax, log_softmax, layer_norm, exp, log,
//!   log1p, pow, sum, rsqrt, softplus;
//! - **widest input**: cat and stack, which promote their inputs always.
//!
//! Other ops run in their inputs' dtype (binary ops promote as always).
//! Casts are differentiable, so f32 parameters get f32 gradients; the low
//! precision casts of parameters (leaves that require grad) are cached until
//! the outermost region exits.

mod scaler;

pub use scaler::{GradScaler, GradScalerConfig};

use crate::{DType, Device, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// The device type an autocast region applies to (`"cpu"` / `"cuda"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// Tensors on the CPU.
    Cpu,
    /// Tensors on any CUDA device.
    Cuda,
}

impl DeviceType {
    /// PyTorch's default autocast dtype: f16 on CUDA, bf16 on the CPU.
    pub fn default_dtype(self) -> DType {
        match self {
            DeviceType::Cpu => DType::BF16,
            DeviceType::Cuda => DType::F16,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl From<Device> for DeviceType {
    fn from(d: Device) -> Self {
        match d {
            Device::Cpu => DeviceType::Cpu,
            Device::Cuda(_) => DeviceType::Cuda,
        }
    }
}

#[derive(Clone, Copy)]
struct Region {
    enabled: bool,
    dtype: DType,
}

thread_local! {
    static REGIONS: Cell<[Region; 2]> = const {
        Cell::new([
            Region { enabled: false, dtype: DType::BF16 },
            Region { enabled: false, dtype: DType::F16 },
        ])
    };
    /// Open guards that enable a region; the cast cache lives while > 0.
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// (source tensor, dtype) -> its cast; the source is kept so its address stays unique.
    static CACHE: RefCell<HashMap<(usize, DType), (Tensor, Tensor)>> = RefCell::new(HashMap::new());
}

/// Whether autocast is on for `device_type` on this thread.
///
/// ```
/// use tapir_runtime::amp::{autocast, is_autocast_enabled, DeviceType};
/// assert!(!is_autocast_enabled(DeviceType::Cpu));
/// autocast(DeviceType::Cpu, None, true, || assert!(is_autocast_enabled(DeviceType::Cpu)));
/// ```
pub fn is_autocast_enabled(device_type: DeviceType) -> bool {
    REGIONS.with(|r| r.get()[device_type.index()].enabled)
}

/// The dtype autocast lowers to on `device_type` (in or out of a region).
pub fn get_autocast_dtype(device_type: DeviceType) -> DType {
    REGIONS.with(|r| r.get()[device_type.index()].dtype)
}

/// An autocast region for one device type until dropped (nestable; the
/// previous state comes back on drop). `dtype` `None` is the device type's
/// default.
///
/// ```
/// use tapir_runtime::amp::{AutocastGuard, DeviceType};
/// use tapir_runtime::{DType, Tensor};
/// let w = Tensor::randn(&[4, 3]).requires_grad_(true);
/// let y = {
///     let _region = AutocastGuard::new(DeviceType::Cpu, None, true);
///     Tensor::randn(&[2, 4]).matmul(&w)
/// };
/// assert_eq!(y.dtype(), DType::BF16);
/// y.to_dtype(DType::F32).sum().backward();
/// assert_eq!(w.grad().unwrap().dtype(), DType::F32);
/// ```
pub struct AutocastGuard {
    device_type: DeviceType,
    prev: Region,
    counted: bool,
}

impl AutocastGuard {
    /// Enters the region. Panics when `dtype` is not f16 or bf16.
    pub fn new(device_type: DeviceType, dtype: Option<DType>, enabled: bool) -> AutocastGuard {
        let dtype = dtype.unwrap_or_else(|| device_type.default_dtype());
        assert!(
            matches!(dtype, DType::F16 | DType::BF16),
            "autocast: dtype must be float16 or bfloat16, got {dtype}"
        );
        let prev = REGIONS.with(|r| {
            let mut all = r.get();
            let prev = all[device_type.index()];
            all[device_type.index()] = Region { enabled, dtype };
            r.set(all);
            prev
        });
        if enabled {
            DEPTH.with(|d| d.set(d.get() + 1));
        }
        AutocastGuard {
            device_type,
            prev,
            counted: enabled,
        }
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        REGIONS.with(|r| {
            let mut all = r.get();
            all[self.device_type.index()] = self.prev;
            r.set(all);
        });
        if self.counted {
            let left = DEPTH.with(|d| {
                d.set(d.get() - 1);
                d.get()
            });
            if left == 0 {
                CACHE.with(|c| c.borrow_mut().clear());
            }
        }
    }
}

/// Runs `f` in an autocast region (PyTorch's `with torch.autocast(device_type,
/// dtype, enabled):`).
///
/// ```
/// use tapir_runtime::amp::{autocast, DeviceType};
/// use tapir_runtime::{nn, DType, Tensor};
/// let logits = Tensor::randn(&[4, 3]);
/// let loss = autocast(DeviceType::Cpu, Some(DType::BF16), true, || {
///     let h = logits.matmul(&Tensor::randn(&[3, 3])); // bf16
///     nn::cross_entropy(&h, &Tensor::from_vec(vec![0i64, 1, 2, 0], &[4])) // f32
/// });
/// assert_eq!(loss.dtype(), DType::F32);
/// ```
pub fn autocast<R>(
    device_type: DeviceType,
    dtype: Option<DType>,
    enabled: bool,
    f: impl FnOnce() -> R,
) -> R {
    let _region = AutocastGuard::new(device_type, dtype, enabled);
    f()
}

/// How an op treats its floating inputs inside a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// To the region's dtype.
    Lower,
    /// To f32 on every device type.
    Fp32,
    /// To f32 on CUDA; unchanged on the CPU.
    Fp32OnCuda,
}

/// The inputs cast as `policy` says, or `None` when autocast does not apply
/// (no region for their device type, or nothing to cast). The fast path is
/// one thread-local read.
pub(crate) fn cast(policy: Policy, xs: &[&Tensor]) -> Option<Vec<Tensor>> {
    let regions = REGIONS.with(|r| r.get());
    if !regions[0].enabled && !regions[1].enabled {
        return None;
    }
    let first = xs.iter().find(|t| t.dtype().is_float())?;
    let device_type = DeviceType::from(first.device());
    let region = regions[device_type.index()];
    if !region.enabled {
        return None;
    }
    let target = match policy {
        Policy::Lower => region.dtype,
        Policy::Fp32 => DType::F32,
        Policy::Fp32OnCuda if device_type == DeviceType::Cuda => DType::F32,
        Policy::Fp32OnCuda => return None,
    };
    // Only the floating tensors of lower precision than f64 are cast (f64
    // stays f64, as PyTorch's autocast leaves it).
    let castable =
        |t: &Tensor| t.dtype().is_float() && t.dtype() != DType::F64 && t.dtype() != target;
    if !xs.iter().any(|t| castable(t)) {
        return None;
    }
    Some(
        xs.iter()
            .map(|t| match castable(t) {
                false => (*t).clone(),
                true if policy == Policy::Lower => cached_cast(t, target),
                true => t.to_dtype(target),
            })
            .collect(),
    )
}

/// A parameter's low-precision cast, made once per outermost region.
fn cached_cast(t: &Tensor, dtype: DType) -> Tensor {
    let cacheable = t.is_leaf() && t.requires_grad() && crate::is_grad_enabled();
    if !cacheable {
        return t.to_dtype(dtype);
    }
    let key = (std::sync::Arc::as_ptr(&t.0) as usize, dtype);
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).map(|(_, cast)| cast.clone())) {
        return hit;
    }
    let cast = t.to_dtype(dtype);
    CACHE.with(|c| c.borrow_mut().insert(key, (t.clone(), cast.clone())));
    cast
}

/// The number of cached parameter casts (for tests).
#[doc(hidden)]
pub fn cached_casts() -> usize {
    CACHE.with(|c| c.borrow().len())
}

/// [`cast`] for one input.
pub(crate) fn cast1(policy: Policy, x: &Tensor) -> Option<Tensor> {
    cast(policy, &[x]).map(|mut v| v.remove(0))
}

/// [`cast`] for two inputs.
pub(crate) fn cast2(policy: Policy, a: &Tensor, b: &Tensor) -> Option<(Tensor, Tensor)> {
    cast(policy, &[a, b]).map(|v| {
        let [a, b]: [Tensor; 2] = v
            .try_into()
            .unwrap_or_else(|_| unreachable!("two in, two out"));
        (a, b)
    })
}

/// [`cast`] for an input, a weight and an optional bias (linear, conv).
pub(crate) fn cast_affine(
    x: &Tensor,
    w: &Tensor,
    b: Option<&Tensor>,
) -> Option<(Tensor, Tensor, Option<Tensor>)> {
    let mut all = vec![x, w];
    all.extend(b);
    cast(Policy::Lower, &all).map(|mut v| {
        let b = (v.len() == 3).then(|| v.remove(2));
        let w = v.remove(1);
        (v.remove(0), w, b)
    })
}
