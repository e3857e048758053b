//! Creating tensors: constants, ranges and random draws.

use crate::random::{Generator, default_generator};
use crate::storage::{Arange, Storage};
use crate::trace::{self, Attr};
use crate::{DType, Device, Element, Tensor};

/// A tensor of `shape` filled with `value` in `dtype`, on the CPU.
pub(crate) fn filled(shape: &[usize], value: f64, dtype: DType) -> Tensor {
    filled_on(shape, value, dtype, Device::Cpu)
}

/// A tensor of `shape` filled with `value` in `dtype` on `device`.
/// A creation op's device as an attribute (compile replays the op there):
/// 0 the CPU, `i + 1` GPU `i`.
fn device_attr(device: Device) -> (&'static str, Attr) {
    let code = match device {
        Device::Cpu => 0,
        Device::Cuda(i) => i as i64 + 1,
    };
    ("device", Attr::Int(code))
}

/// The device of [`device_attr`]'s code.
pub(crate) fn device_of_attr(code: i64) -> Device {
    match code {
        c if c > 0 => Device::Cuda(c as usize - 1),
        _ => Device::Cpu,
    }
}

pub(crate) fn filled_on(shape: &[usize], value: f64, dtype: DType, device: Device) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_storage(Storage::filled(n, value, dtype, device), shape)
}

pub(crate) fn ones_like(t: &Tensor) -> Tensor {
    filled_on(t.shape(), 1.0, t.dtype(), t.device())
}

/// `value` shaped like `t`, in `t`'s strides when `t` is dense but not
/// row-major (PyTorch's `preserve_format`: the state an optimizer makes
/// for a transposed parameter walks in the parameter's order).
fn filled_like(t: &Tensor, value: f64) -> Tensor {
    match t.preserved_format() {
        Some((order, view)) => {
            let shape: Vec<usize> = order.iter().map(|&d| t.shape()[d]).collect();
            view(filled_on(&shape, value, t.dtype(), t.device()))
        }
        None => filled_on(t.shape(), value, t.dtype(), t.device()),
    }
}

/// `t` (made on the host) moved to `like`'s device.
fn on_device_of(t: Tensor, like: &Tensor) -> Tensor {
    t.to(like.device())
        .unwrap_or_else(|e| panic!("random draws for a tensor on {}: {e}", like.device()))
}

/// f32 draws shaped like `like`, made on its device by the device
/// generator, or `None` on the CPU (see `Storage::device_draws`).
fn device_draws(like: &Tensor, normal: bool) -> Option<Tensor> {
    let s = Storage::device_draws(like.device(), like.numel(), normal)?;
    Some(Tensor::from_storage(s, like.shape()))
}

/// f32 draws (normal or uniform) of `shape` made on `device`: by the
/// device generator on a GPU, by the default generator on the CPU.
fn draws_on(shape: &[usize], device: Device, normal: bool) -> Tensor {
    let n = shape.iter().product();
    match Storage::device_draws(device, n, normal) {
        Some(s) => Tensor::from_storage(s, shape),
        None if normal => Tensor::randn(shape),
        None => Tensor::rand(shape),
    }
}

/// `start, start + step, ...` below `end`, as int64 on `device`.
fn int_range(start: i64, end: i64, step: i64, device: Device) -> Tensor {
    assert!(step != 0, "arange: step must be nonzero");
    let n = ((end - start) as f64 / step as f64).ceil().max(0.0) as usize;
    range_of_len(n, Arange::I64 { start, step }, device)
}

/// What compile needs to make an int range again: its start, step and
/// device (the length is the output's).
fn int_range_attrs(start: i64, step: i64, device: Device) -> Vec<(&'static str, Attr)> {
    vec![
        ("start", Attr::Int(start)),
        ("step", Attr::Int(step)),
        device_attr(device),
    ]
}

/// As [`int_range_attrs`] for a float range.
fn float_range_attrs(start: f64, step: f64, device: Device) -> Vec<(&'static str, Attr)> {
    vec![
        ("start", Attr::Float(start)),
        ("step", Attr::Float(step)),
        device_attr(device),
    ]
}

/// `n` values of `range` on `device` (every arange, and compile's replay
/// of one).
pub(crate) fn range_of_len(n: usize, range: Arange, device: Device) -> Tensor {
    Tensor::from_storage(Storage::arange(n, range, device), &[n])
}

/// `start + i * step` below `end` (float arguments), as f32 on `device`.
fn float_range(start: f64, end: f64, step: f64, device: Device) -> Tensor {
    assert!(step != 0.0, "arange: step must be nonzero");
    let n = ((end - start) / step).ceil().max(0.0) as usize;
    range_of_len(n, Arange::F32 { start, step }, device)
}

fn from_f64s(v: Vec<f64>, shape: &[usize], dtype: DType) -> Tensor {
    Tensor::from_vec(v, shape).to_dtype(dtype)
}

impl Tensor {
    /// Zeros of `shape` (float32, as `torch.zeros`).
    ///
    /// ```
    /// use tapir_runtime::{Tensor, DType};
    /// assert_eq!(Tensor::zeros(&[2, 3]).to_vec::<f32>(), vec![0.0; 6]);
    /// assert_eq!(Tensor::full_dtype(&[2], 7.0, DType::I64).to_vec::<i64>(), vec![7, 7]);
    /// ```
    pub fn zeros(shape: &[usize]) -> Tensor {
        trace::op("zeros", trace::NO_INPUTS, Vec::new, || {
            filled(shape, 0.0, DType::F32)
        })
    }

    /// A tensor of ones (f32).
    pub fn ones(shape: &[usize]) -> Tensor {
        trace::op("ones", trace::NO_INPUTS, Vec::new, || {
            filled(shape, 1.0, DType::F32)
        })
    }

    /// A tensor of `value` (f32).
    pub fn full(shape: &[usize], value: f64) -> Tensor {
        trace::op(
            "full",
            trace::NO_INPUTS,
            || vec![("value", Attr::Float(value))],
            || filled(shape, value, DType::F32),
        )
    }

    /// As [`Tensor::full`] with an explicit dtype.
    pub fn full_dtype(shape: &[usize], value: f64, dtype: DType) -> Tensor {
        trace::op(
            "full_dtype",
            trace::NO_INPUTS,
            || vec![("value", Attr::Float(value))],
            || filled(shape, value, dtype),
        )
    }

    /// `torch.zeros(shape, dtype=, device=)`: made on `device` itself, not
    /// on the host and copied.
    ///
    /// ```
    /// use tapir_runtime::{DType, Device, Tensor};
    /// let z = Tensor::zeros_on(&[2, 3], DType::F64, Device::Cpu);
    /// assert_eq!((z.dtype(), z.to_vec::<f64>()), (DType::F64, vec![0.0; 6]));
    /// assert_eq!(Tensor::full_on(&[2], 3.0, DType::I64, Device::Cpu).to_vec::<i64>(), [3, 3]);
    /// ```
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Tensor {
        trace::op(
            "zeros_on",
            trace::NO_INPUTS,
            || vec![device_attr(device)],
            || filled_on(shape, 0.0, dtype, device),
        )
    }

    /// `torch.ones(shape, dtype=, device=)`, made on `device`.
    pub fn ones_on(shape: &[usize], dtype: DType, device: Device) -> Tensor {
        trace::op(
            "ones_on",
            trace::NO_INPUTS,
            || vec![device_attr(device)],
            || filled_on(shape, 1.0, dtype, device),
        )
    }

    /// `torch.full(shape, value, dtype=, device=)`, made on `device`.
    pub fn full_on(shape: &[usize], value: f64, dtype: DType, device: Device) -> Tensor {
        trace::op(
            "full_on",
            trace::NO_INPUTS,
            || vec![("value", Attr::Float(value)), device_attr(device)],
            || filled_on(shape, value, dtype, device),
        )
    }

    /// `torch.rand(shape, device=)`: f32 uniform draws in `[0, 1)` made on
    /// `device`: on the CPU from the default generator, on a GPU by the
    /// device generator ([`crate::DeviceGenerator`]) with no host copy.
    ///
    /// ```
    /// use tapir_runtime::{Device, Tensor};
    /// let u = Tensor::rand_on(&[100], Device::Cpu);
    /// assert!(u.to_vec::<f32>().iter().all(|&x| (0.0..1.0).contains(&x)));
    /// ```
    pub fn rand_on(shape: &[usize], device: Device) -> Tensor {
        let attrs = || vec![device_attr(device)];
        trace::op("rand_on", trace::NO_INPUTS, attrs, || {
            draws_on(shape, device, false)
        })
    }

    /// `torch.randn(shape, device=)`: f32 standard normal draws made on
    /// `device` (generators as for [`Tensor::rand_on`]).
    pub fn randn_on(shape: &[usize], device: Device) -> Tensor {
        let attrs = || vec![device_attr(device)];
        trace::op("randn_on", trace::NO_INPUTS, attrs, || {
            draws_on(shape, device, true)
        })
    }

    /// Zeros with `t`'s shape, dtype and device, laid out as `t` when it
    /// is dense (PyTorch's default `memory_format=torch.preserve_format`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::ones(&[3, 2]).t();
    /// assert_eq!(Tensor::zeros_like(&w).strides(), w.strides());
    /// ```
    pub fn zeros_like(t: &Tensor) -> Tensor {
        trace::op("zeros_like", [t], Vec::new, || filled_like(t, 0.0))
    }

    /// Ones with `t`'s shape, dtype and device (laid out as
    /// [`Tensor::zeros_like`] lays out).
    pub fn ones_like(t: &Tensor) -> Tensor {
        trace::op("ones_like", [t], Vec::new, || filled_like(t, 1.0))
    }

    /// `value` with `t`'s shape, dtype and device (laid out as
    /// [`Tensor::zeros_like`] lays out).
    pub fn full_like(t: &Tensor, value: f64) -> Tensor {
        trace::op(
            "full_like",
            [t],
            || vec![("value", Attr::Float(value))],
            || filled_like(t, value),
        )
    }

    /// Evenly spaced int64 values, as PyTorch's `torch.arange` overloads
    /// as far as Rust allows: `arange(end)`, `arange(start..end)` and
    /// `arange((start..end, step))`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::arange(4).to_vec::<i64>(), vec![0, 1, 2, 3]);
    /// assert_eq!(Tensor::arange(2..5).to_vec::<i64>(), vec![2, 3, 4]);
    /// assert_eq!(Tensor::arange((10..0, -3)).to_vec::<i64>(), vec![10, 7, 4, 1]);
    /// assert_eq!(Tensor::arange_f(0.0, 1.0, 0.25).to_vec::<f32>(), vec![0.0, 0.25, 0.5, 0.75]);
    /// ```
    pub fn arange(range: impl ArangeArgs) -> Tensor {
        let (start, end, step) = range.start_end_step();
        trace::op(
            "arange",
            trace::NO_INPUTS,
            || int_range_attrs(start, step, Device::Cpu),
            || Tensor::arange_step(start, end, step),
        )
    }

    /// `start, start + step, ...` below `end`, as int64.
    pub fn arange_step(start: i64, end: i64, step: i64) -> Tensor {
        trace::op(
            "arange_step",
            trace::NO_INPUTS,
            || int_range_attrs(start, step, Device::Cpu),
            || int_range(start, end, step, Device::Cpu),
        )
    }

    /// [`Tensor::arange`] made on `device` (`torch.arange(..., device=)`):
    /// on a GPU by a kernel, with no host copy.
    ///
    /// ```
    /// use tapir_runtime::{Device, Tensor};
    /// assert_eq!(Tensor::arange_on(1..4, Device::Cpu).to_vec::<i64>(), vec![1, 2, 3]);
    /// ```
    pub fn arange_on(range: impl ArangeArgs, device: Device) -> Tensor {
        let (start, end, step) = range.start_end_step();
        trace::op(
            "arange_on",
            trace::NO_INPUTS,
            || int_range_attrs(start, step, device),
            || int_range(start, end, step, device),
        )
    }

    /// Float range (`torch.arange(start, end, step)` with float arguments), float32.
    pub fn arange_f(start: f64, end: f64, step: f64) -> Tensor {
        trace::op(
            "arange_f",
            trace::NO_INPUTS,
            || float_range_attrs(start, step, Device::Cpu),
            || float_range(start, end, step, Device::Cpu),
        )
    }

    /// [`Tensor::arange_f`] made on `device`: on a GPU by a kernel, with no
    /// host copy (each value computed in f64, rounded once, on either device).
    pub fn arange_f_on(start: f64, end: f64, step: f64, device: Device) -> Tensor {
        trace::op(
            "arange_f_on",
            trace::NO_INPUTS,
            || float_range_attrs(start, step, device),
            || float_range(start, end, step, device),
        )
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive, float32.
    pub fn linspace(start: f64, end: f64, steps: usize) -> Tensor {
        let ends = || vec![("start", Attr::Float(start)), ("end", Attr::Float(end))];
        trace::op("linspace", trace::NO_INPUTS, ends, || {
            let step = if steps > 1 {
                (end - start) / (steps - 1) as f64
            } else {
                0.0
            };
            // PyTorch fills the second half backwards from `end` for symmetry.
            let v = (0..steps)
                .map(|i| {
                    if i < steps / 2 {
                        start + step * i as f64
                    } else {
                        end - step * (steps - 1 - i) as f64
                    }
                })
                .collect();
            from_f64s(v, &[steps], DType::F32)
        })
    }

    /// The `n x n` identity, float32.
    pub fn eye(n: usize) -> Tensor {
        trace::op("eye", trace::NO_INPUTS, Vec::new, || {
            let mut v = vec![0.0f32; n * n];
            for i in 0..n {
                v[i * n + i] = 1.0;
            }
            Tensor::from_vec(v, &[n, n])
        })
    }

    /// Uniform [0, 1) draws from the global generator, float32.
    pub fn rand(shape: &[usize]) -> Tensor {
        trace::op("rand", trace::NO_INPUTS, Vec::new, || {
            Tensor::rand_with(shape, default_generator())
        })
    }

    /// As `rand`, drawing from `g`.
    pub fn rand_with(shape: &[usize], g: &Generator) -> Tensor {
        trace::op("rand_with", trace::NO_INPUTS, Vec::new, || {
            Tensor::from_vec(g.uniform_f32(shape.iter().product()), shape)
        })
    }

    /// Standard normal draws from the global generator, float32.
    pub fn randn(shape: &[usize]) -> Tensor {
        trace::op("randn", trace::NO_INPUTS, Vec::new, || {
            Tensor::randn_with(shape, default_generator())
        })
    }

    /// As `randn`, drawing from `g`.
    pub fn randn_with(shape: &[usize], g: &Generator) -> Tensor {
        trace::op("randn_with", trace::NO_INPUTS, Vec::new, || {
            Tensor::from_vec(g.normal_f32(shape.iter().product()), shape)
        })
    }

    /// Uniform draws in `[0, 1)` shaped like `t`, on its device: on the CPU
    /// from the default generator, on a GPU made there from the device
    /// generator (Philox, no host round trip), as PyTorch's are.
    pub fn rand_like(t: &Tensor) -> Tensor {
        trace::op("rand_like", [t], Vec::new, || {
            let float = t.dtype().to_float();
            match device_draws(t, false) {
                Some(u) => u.to_dtype(float),
                None => on_device_of(Tensor::rand(t.shape()).to_dtype(float), t),
            }
        })
    }

    /// Standard normal draws shaped like `t`, on its device (generators as
    /// for [`Tensor::rand_like`]).
    pub fn randn_like(t: &Tensor) -> Tensor {
        trace::op("randn_like", [t], Vec::new, || {
            let float = t.dtype().to_float();
            match device_draws(t, true) {
                Some(z) => z.to_dtype(float),
                None => on_device_of(Tensor::randn(t.shape()).to_dtype(float), t),
            }
        })
    }

    /// A random permutation of `0..n`, int64 (`torch.randperm`), drawn
    /// from the default generator (so `manual_seed` repeats it).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let mut p = Tensor::randperm(5).to_vec::<i64>();
    /// p.sort();
    /// assert_eq!(p, vec![0, 1, 2, 3, 4]);
    /// ```
    pub fn randperm(n: usize) -> Tensor {
        Tensor::randperm_with(n, default_generator())
    }

    /// As `randperm`, drawing from `g`.
    pub fn randperm_with(n: usize, g: &Generator) -> Tensor {
        let p = crate::data::sampler::permutation(n, g);
        Tensor::from_vec(p.into_iter().map(|i| i as i64).collect(), &[n])
    }

    /// Zeros of `shape` with `self`'s dtype and device (`x.new_zeros`).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::ones(&[2]).to_dtype(DType::F64);
    /// let z = x.new_zeros(&[3, 4]);
    /// assert_eq!((z.shape(), z.dtype()), (&[3usize, 4][..], DType::F64));
    /// ```
    pub fn new_zeros(&self, shape: &[usize]) -> Tensor {
        Tensor::zeros_on(shape, self.dtype(), self.device())
    }

    /// A tensor of `shape` with `self`'s dtype and device (`x.new_empty`);
    /// zeros here, where PyTorch leaves the memory unwritten.
    pub fn new_empty(&self, shape: &[usize]) -> Tensor {
        self.new_zeros(shape)
    }

    /// Ones of `shape` with `self`'s dtype and device (`x.new_ones`).
    pub fn new_ones(&self, shape: &[usize]) -> Tensor {
        Tensor::ones_on(shape, self.dtype(), self.device())
    }

    /// `value` everywhere in `shape`, with `self`'s dtype and device
    /// (`x.new_full`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 2], &[2]);
    /// assert_eq!(x.new_full(&[2], 7.0).to_vec::<i64>(), vec![7, 7]);
    /// ```
    pub fn new_full(&self, shape: &[usize], value: f64) -> Tensor {
        Tensor::full_on(shape, value, self.dtype(), self.device())
    }

    /// Integers uniform in `[low, high)`, int64.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let t = Tensor::randint(3, 5, &[100]);
    /// assert!(t.to_vec::<i64>().iter().all(|&v| v == 3 || v == 4));
    /// ```
    pub fn randint(low: i64, high: i64, shape: &[usize]) -> Tensor {
        let attrs = || vec![("low", Attr::Int(low)), ("high", Attr::Int(high))];
        trace::op("randint", trace::NO_INPUTS, attrs, || {
            Tensor::randint_with(low, high, shape, default_generator())
        })
    }

    /// As `randint`, drawing from `g`.
    pub fn randint_with(low: i64, high: i64, shape: &[usize], g: &Generator) -> Tensor {
        trace::op("randint_with", trace::NO_INPUTS, Vec::new, || {
            assert!(
                low < high,
                "randint: low ({low}) must be below high ({high})"
            );
            let span = (high - low) as u64;
            let v = g.fill(shape.iter().product(), |next| low + (next() % span) as i64);
            Tensor::from_vec(v, shape)
        })
    }

    /// 0/1 draws with the probabilities held in `self` (same dtype). On a
    /// GPU the draws are made there (`rand_like(p) < p`), and the
    /// probabilities are not read back to check that they lie in [0, 1].
    pub fn bernoulli(&self) -> Tensor {
        trace::op("bernoulli", [self], Vec::new, || {
            if self.dtype().is_float()
                && let Some(u) = device_draws(self, false)
            {
                return u.lt(&self.to_dtype(DType::F32)).to_dtype(self.dtype());
            }
            self.bernoulli_with(default_generator())
        })
    }

    /// As `bernoulli`, drawing from `g`.
    pub fn bernoulli_with(&self, g: &Generator) -> Tensor {
        trace::op("bernoulli_with", [self], Vec::new, || {
            let p: Vec<f64> = self.to_vec();
            assert!(
                p.iter().all(|&x| (0.0..=1.0).contains(&x)),
                "bernoulli: probabilities must lie in [0, 1]"
            );
            let u = g.uniform(p.len());
            let v = p
                .iter()
                .zip(&u)
                .map(|(&p, &u)| if u < p { 1.0 } else { 0.0 })
                .collect();
            on_device_of(from_f64s(v, self.shape(), self.dtype().to_float()), self)
        })
    }

    /// This tensor converted to `dtype` (a copy when it changes; gradients
    /// flow back between float dtypes).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let h = Tensor::from_vec(vec![1.0f32 / 3.0], &[1]).to_dtype(DType::BF16);
    /// assert_eq!(h.to_vec::<f64>(), vec![0.333984375]);
    /// ```
    pub fn to_dtype(&self, dtype: DType) -> Tensor {
        trace::op(
            "to_dtype",
            [self],
            || vec![("dtype", Attr::Int(dtype as i64))],
            || {
                if dtype == self.dtype() {
                    return self.clone();
                }
                // PyTorch's `preserve_format`: a dense view keeps its
                // strides (and is read in memory order); others come out
                // row-major.
                let out = if self.layout().dense_order().is_some() {
                    super::elementwise([self.clone()], self.shape(), |[x], l| {
                        x.read().cast(&l[0], dtype)
                    })
                } else {
                    Tensor::from_storage(self.read().cast(self.layout(), dtype), self.shape())
                };
                let src = self.dtype();
                if !dtype.is_float() {
                    return out;
                }
                Tensor::record(out, "ToCopyBackward0", &[self], move || {
                    move |g: &Tensor, _: &[bool]| vec![Some(g.to_dtype(src))]
                })
            },
        )
    }

    /// `tensor.half()`: to f16 (differentiable, like every cast).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::ones(&[2]);
    /// assert_eq!(x.half().dtype(), DType::F16);
    /// assert_eq!(x.bfloat16().float().dtype(), DType::F32);
    /// ```
    pub fn half(&self) -> Tensor {
        trace::op("half", [self], Vec::new, || self.to_dtype(DType::F16))
    }

    /// `tensor.bfloat16()`: to bf16.
    pub fn bfloat16(&self) -> Tensor {
        trace::op("bfloat16", [self], Vec::new, || self.to_dtype(DType::BF16))
    }

    /// `tensor.float()`: to f32.
    pub fn float(&self) -> Tensor {
        trace::op("float", [self], Vec::new, || self.to_dtype(DType::F32))
    }

    /// `tensor.double()`: to f64.
    pub fn double(&self) -> Tensor {
        self.to_dtype(DType::F64)
    }

    /// `tensor.long()`: to int64 (floats truncate toward zero).
    ///
    /// ```
    /// use tapir_runtime::{DType, Tensor};
    /// let x = Tensor::from_vec(vec![1.7f32, -1.7], &[2]);
    /// assert_eq!(x.long().to_vec::<i64>(), vec![1, -1]);
    /// assert_eq!(x.gt_scalar(0.0).long().dtype(), DType::I64);
    /// ```
    pub fn long(&self) -> Tensor {
        self.to_dtype(DType::I64)
    }

    /// `tensor.bool()`: nonzero to true.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![0.0f32, 0.5], &[2]);
    /// assert_eq!(x.bool().to_vec::<bool>(), vec![false, true]);
    /// ```
    pub fn bool(&self) -> Tensor {
        self.to_dtype(DType::Bool)
    }

    /// `tensor.byte()`: to uint8.
    pub fn byte(&self) -> Tensor {
        self.to_dtype(DType::U8)
    }

    /// `tensor.cpu()`: this tensor on the CPU (itself when it is there);
    /// an error if reading it back from a GPU fails.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::ones(&[2]);
    /// assert_eq!(x.cpu().unwrap().to_vec::<f32>(), vec![1.0, 1.0]);
    /// ```
    pub fn cpu(&self) -> crate::Result<Tensor> {
        self.to(Device::Cpu)
    }

    /// `tensor.cuda()`: this tensor on CUDA device 0; an error saying why
    /// where there is none (no `cuda` feature, no driver, no GPU).
    pub fn cuda(&self) -> crate::Result<Tensor> {
        self.to(Device::cuda(0)?)
    }

    /// The tensor as one `Element` type's Vec, checked to be that dtype.
    pub fn to_vec_exact<T: Element>(&self) -> Vec<T> {
        assert!(
            self.dtype() == T::DTYPE,
            "to_vec_exact: tensor is {}, asked for {}",
            self.dtype(),
            T::DTYPE
        );
        self.to_vec()
    }
}

/// What [`Tensor::arange`] takes: an end (`5`), a range (`2..5`), or a
/// range and a step (`(10..0, -3)`), in any integer type.
pub trait ArangeArgs {
    /// `(start, end, step)`.
    fn start_end_step(self) -> (i64, i64, i64);
}

macro_rules! arange_args {
    ($($t:ty),*) => {$(
        impl ArangeArgs for $t {
            fn start_end_step(self) -> (i64, i64, i64) {
                (0, self as i64, 1)
            }
        }
        impl ArangeArgs for std::ops::Range<$t> {
            fn start_end_step(self) -> (i64, i64, i64) {
                (self.start as i64, self.end as i64, 1)
            }
        }
        impl ArangeArgs for (std::ops::Range<$t>, $t) {
            fn start_end_step(self) -> (i64, i64, i64) {
                (self.0.start as i64, self.0.end as i64, self.1 as i64)
            }
        }
    )*};
}

arange_args!(i32, i64, usize);
