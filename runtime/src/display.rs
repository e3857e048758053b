//! `Display` in PyTorch's repr style; `Debug` adds shape and dtype.

use crate::{DType, Device, Tensor};
use std::fmt;

fn format_values(v: &[f64], dtype: DType) -> Vec<String> {
    if !dtype.is_float() {
        return v
            .iter()
            .map(|&x| {
                if dtype == DType::Bool {
                    if x != 0.0 {
                        "True".into()
                    } else {
                        "False".into()
                    }
                } else {
                    format!("{}", x as i64)
                }
            })
            .collect();
    }
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    let ints = finite.iter().all(|x| x.fract() == 0.0);
    let max = finite.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let min = finite
        .iter()
        .filter(|x| **x != 0.0)
        .fold(f64::INFINITY, |m, x| m.min(x.abs()));
    let sci = !finite.is_empty()
        && (max >= 1e8 || (min < 1e-4 && min.is_finite()) || (max / min > 1000.0 && !ints));
    v.iter()
        .map(|&x| {
            if x.is_nan() {
                "nan".into()
            } else if x.is_infinite() {
                if x > 0.0 { "inf".into() } else { "-inf".into() }
            } else if ints && !sci {
                format!("{x:.0}.")
            } else if sci {
                format!("{x:.4e}")
            } else {
                format!("{x:.4}")
            }
        })
        .collect()
}

fn write_nested(
    f: &mut fmt::Formatter<'_>,
    shape: &[usize],
    vals: &[String],
    width: usize,
    indent: usize,
) -> fmt::Result {
    const EDGE: usize = 3;
    let summarize = vals.len() > 1000;
    if shape.is_empty() {
        return write!(f, "{:>width$}", vals[0]);
    }
    let n = shape[0];
    let stride = vals.len() / n.max(1);
    write!(f, "[")?;
    let idx: Vec<Option<usize>> = if summarize && n > 2 * EDGE {
        (0..EDGE)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((n - EDGE..n).map(Some))
            .collect()
    } else {
        (0..n).map(Some).collect()
    };
    for (k, i) in idx.iter().enumerate() {
        if k > 0 {
            if shape.len() > 1 {
                write!(
                    f,
                    ",{}{}",
                    "\n".repeat(shape.len() - 1),
                    " ".repeat(indent + 1)
                )?;
            } else {
                write!(f, ", ")?;
            }
        }
        match i {
            None => write!(f, "...")?,
            Some(i) => write_nested(
                f,
                &shape[1..],
                &vals[i * stride..(i + 1) * stride],
                width,
                indent + 1,
            )?,
        }
    }
    write!(f, "]")
}

impl fmt::Display for Tensor {
    /// ```
    /// use tapir_runtime::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.5], &[2]);
    /// assert_eq!(t.to_string(), "tensor([1.0000, 2.5000])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<f64> = self.to_vec();
        let strs = format_values(&v, self.dtype());
        let width = strs.iter().map(|s| s.len()).max().unwrap_or(0);
        write!(f, "tensor(")?;
        if self.numel() == 0 {
            write!(f, "[]")?;
        } else {
            write_nested(f, self.shape(), &strs, width, 7)?;
        }
        if self.numel() == 0 && self.ndim() != 1 || self.numel() > 1000 {
            write!(f, ", size={:?}", self.shape())?;
        }
        if self.device() != Device::Cpu {
            write!(f, ", device='{}'", self.device())?;
        }
        if !matches!(self.dtype(), DType::F32 | DType::I64 | DType::Bool) {
            write!(f, ", dtype=torch.{}", self.dtype())?;
        }
        if let Some(name) = self.grad_fn_name() {
            write!(f, ", grad_fn=<{name}>")?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad=True")?;
        }
        write!(f, ")")
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, device={}",
            self.shape(),
            self.dtype(),
            self.device()
        )?;
        if let Some(name) = self.grad_fn_name() {
            write!(f, ", grad_fn={name}")?;
        } else if self.requires_grad() {
            write!(f, ", requires_grad=true")?;
        }
        write!(f, ")")
    }
}
