//! Layer normalisation: a fused kernel, because the composite (mean, var,
//! sub, mul, add) makes ~8 passes over the activations; its backward is the
//! closed form (one fused kernel on either device), checked against PyTorch
//! and by finite differences.

use super::dense0;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};

impl Tensor {
    /// `F.layer_norm` over the trailing `normalized` dims, with optional
    /// elementwise affine weight and bias of that shape.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 3.0, 2.0, 6.0], &[2, 2]);
    /// let y = x.layer_norm(&[2], None, None, 0.0);
    /// assert_eq!(y.to_vec::<f32>(), vec![-1.0, 1.0, -1.0, 1.0]);
    /// ```
    pub fn layer_norm(
        &self,
        normalized: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Tensor {
        trace::op(
            "layer_norm",
            [Some(self), weight, bias],
            || {
                vec![
                    ("eps", Attr::Float(eps)),
                    ("axes", Attr::Int(normalized.len() as i64)),
                ]
            },
            || {
                let mut all = vec![self];
                all.extend(weight);
                all.extend(bias);
                if let Some(v) = crate::amp::cast(crate::amp::Policy::Fp32OnCuda, &all) {
                    let (w, b) = (weight.map(|_| &v[1]), bias.map(|_| &v[v.len() - 1]));
                    return v[0].layer_norm(normalized, w, b, eps);
                }
                let nd = self.ndim();
                assert!(
                    normalized.len() <= nd && self.shape()[nd - normalized.len()..] == *normalized,
                    "layer_norm: input of shape {:?} does not end with normalized shape {normalized:?}",
                    self.shape()
                );
                for (what, t) in [("weight", weight), ("bias", bias)] {
                    if let Some(t) = t {
                        super::same_device(self, t, "layer_norm");
                        assert!(
                            t.shape() == normalized,
                            "layer_norm: {what} has shape {:?}, expected {normalized:?}",
                            t.shape()
                        );
                        let mixed = matches!(self.dtype(), DType::F16 | DType::BF16)
                            && t.dtype() == DType::F32;
                        assert!(
                            t.dtype() == self.dtype() || mixed,
                            "layer_norm: {what} is {}, input is {}",
                            t.dtype(),
                            self.dtype()
                        );
                    }
                }
                // PyTorch's mixed case (a half input, f32 affine parameters, as a
                // Linear under autocast feeds a LayerNorm): the parameters follow
                // the input's dtype, differentiably.
                let lower = |t: Option<&Tensor>| {
                    t.filter(|t| t.dtype() != self.dtype())
                        .map(|t| t.to_dtype(self.dtype()))
                };
                let (w, b) = (lower(weight), lower(bias));
                if w.is_some() || b.is_some() {
                    return self.layer_norm(
                        normalized,
                        w.as_ref().or(weight),
                        b.as_ref().or(bias),
                        eps,
                    );
                }
                assert!(
                    self.dtype().is_float(),
                    "layer_norm: expects a float input, got {}",
                    self.dtype()
                );
                let d: usize = normalized.iter().product();
                let rows = self.numel() / d.max(1);
                let x = dense0(self);
                let (w, b) = (weight.map(dense0), bias.map(dense0));
                let [y, mean, rstd] = {
                    let (ws, bs) = (w.as_ref().map(|t| t.read()), b.as_ref().map(|t| t.read()));
                    x.read()
                        .layer_norm(rows, d, ws.as_deref(), bs.as_deref(), eps)
                };
                let (mean, rstd) = (
                    Tensor::from_storage(mean, &[rows]),
                    Tensor::from_storage(rstd, &[rows]),
                );
                let saved = Saved {
                    x,
                    w,
                    mean,
                    rstd,
                    rows,
                    d,
                    eps,
                };
                record_layer_norm(self, y, saved, weight, bias, normalized)
            },
        )
    }
}

impl Tensor {
    /// `s = self + residual` and `s.layer_norm(..)`, returned as `(s, y)`:
    /// the residual step of a pre-norm transformer block (`x = x + attn;
    /// h = ln2(x)`) in one pass over each row on the CPU, the sum normalised
    /// while it is in cache. Both outputs are differentiable exactly as the
    /// composition's. Anything the fused kernel does not take (broadcasting,
    /// mixed dtypes, autocast on a GPU) runs as the composition.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0], &[1, 2]);
    /// let (s, y) = x.add_layer_norm(&Tensor::from_vec(vec![0.0f32, 1.0], &[1, 2]), &[2], None, None, 0.0);
    /// assert_eq!((s.to_vec::<f32>(), y.to_vec::<f32>()), (vec![1.0, 3.0], vec![-1.0, 1.0]));
    /// ```
    pub fn add_layer_norm(
        &self,
        residual: &Tensor,
        normalized: &[usize],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> (Tensor, Tensor) {
        trace::op(
            "add_layer_norm",
            [Some(self), Some(residual), weight, bias],
            || {
                vec![
                    ("eps", Attr::Float(eps)),
                    ("axes", Attr::Int(normalized.len() as i64)),
                ]
            },
            || {
                let nd = self.ndim();
                let mut all = vec![self, residual];
                all.extend(weight);
                all.extend(bias);
                let fusable = self.dtype().is_float()
                    && residual.shape() == self.shape()
                    && normalized.len() <= nd
                    && self.shape()[nd - normalized.len()..] == *normalized
                    && all
                        .iter()
                        .all(|t| t.device() == self.device() && t.dtype() == self.dtype())
                    && [weight, bias]
                        .iter()
                        .flatten()
                        .all(|t| t.shape() == normalized)
                    && crate::amp::cast(crate::amp::Policy::Fp32OnCuda, &all).is_none();
                if !fusable {
                    let s = self + residual;
                    let y = s.layer_norm(normalized, weight, bias, eps);
                    return (s, y);
                }
                let d: usize = normalized.iter().product();
                let rows = self.numel() / d.max(1);
                let (x, r) = (dense0(self), dense0(residual));
                let (w, b) = (weight.map(dense0), bias.map(dense0));
                let [s, y, mean, rstd] = {
                    let (ws, bs) = (w.as_ref().map(|t| t.read()), b.as_ref().map(|t| t.read()));
                    let rs = r.read();
                    x.read()
                        .add_layer_norm(&rs, rows, d, ws.as_deref(), bs.as_deref(), eps)
                };
                let sum = Tensor::from_storage(s, self.shape());
                let sum = Tensor::record(sum, "AddBackward0", &[self, residual], || {
                    |g: &Tensor, needs: &[bool]| {
                        vec![needs[0].then(|| g.clone()), needs[1].then(|| g.clone())]
                    }
                });
                let (mean, rstd) = (
                    Tensor::from_storage(mean, &[rows]),
                    Tensor::from_storage(rstd, &[rows]),
                );
                let saved = Saved {
                    x: sum.detach(),
                    w,
                    mean,
                    rstd,
                    rows,
                    d,
                    eps,
                };
                let y = record_layer_norm(&sum, y, saved, weight, bias, normalized);
                (sum, y)
            },
        )
    }
}

/// What LayerNorm's backward keeps: the dense input, the dense weight, the
/// per-row statistics, and the sizes.
struct Saved {
    x: Tensor,
    w: Option<Tensor>,
    mean: Tensor,
    rstd: Tensor,
    rows: usize,
    d: usize,
    eps: f64,
}

/// The output `y` of LayerNorm of `input`, on the tape with its closed-form
/// backward (one fused kernel on either device).
fn record_layer_norm(
    input: &Tensor,
    y: crate::storage::Storage,
    saved: Saved,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    normalized: &[usize],
) -> Tensor {
    let out = Tensor::from_storage(y, input.shape());
    let empty = Tensor::zeros(&[0]);
    let inputs = [input, weight.unwrap_or(&empty), bias.unwrap_or(&empty)];
    let shape = input.shape().to_vec();
    let norm_shape = normalized.to_vec();
    let (input, weight) = (input.clone(), weight.cloned());
    Tensor::record(out, "NativeLayerNormBackward0", &inputs, move || {
        let Saved {
            x,
            w,
            mean,
            rstd,
            rows,
            d,
            eps,
        } = saved;
        // The input and weight may share the caller's data, which an
        // in-place op could change before backward.
        let (x, w) = (x.saved(), w.map(|w| w.saved()));
        // As the user passed them, for a `create_graph` backward.
        let (input, weight) = (input.saved(), weight.map(|w| w.saved()));
        move |g: &Tensor, needs: &[bool]| {
            if crate::autograd::differentiating() {
                let g = g.to_dtype(input.dtype());
                return layer_norm_backward_recorded(
                    &input,
                    weight.as_ref(),
                    &g,
                    &norm_shape,
                    eps,
                    needs,
                );
            }
            let g = dense0(&g.to_dtype(x.dtype()));
            let [dx, dw, db] = {
                let ws = w.as_ref().map(|t| t.read());
                x.read().layer_norm_backward(
                    &g.read(),
                    &mean.read(),
                    &rstd.read(),
                    ws.as_deref(),
                    rows,
                    d,
                )
            };
            vec![
                needs[0].then(|| Tensor::from_storage(dx, &shape)),
                needs[1].then(|| Tensor::from_storage(dw, &norm_shape)),
                needs[2].then(|| Tensor::from_storage(db, &norm_shape)),
            ]
        }
    })
}

/// LayerNorm's backward from recorded ops, for a `create_graph` backward:
/// the statistics recomputed from `x`, so they carry its graph.
fn layer_norm_backward_recorded(
    x: &Tensor,
    w: Option<&Tensor>,
    g: &Tensor,
    norm_shape: &[usize],
    eps: f64,
    needs: &[bool],
) -> Vec<Option<Tensor>> {
    let lead = x.ndim() - norm_shape.len();
    let dims: Vec<isize> = (lead..x.ndim()).map(|d| d as isize).collect();
    let centered = x - &x.mean_dims(&dims, true);
    let rstd = (&(&centered * &centered).mean_dims(&dims, true) + eps).rsqrt();
    let xhat = &centered * &rstd;
    let gx = match w {
        Some(w) => g * w,
        None => g.clone(),
    };
    let d: usize = norm_shape.iter().product();
    let norm_shape: Vec<isize> = norm_shape.iter().map(|&n| n as isize).collect();
    let per_feature = |t: Tensor| {
        t.reshape(&[-1, d as isize])
            .sum_dim(0, false)
            .reshape(&norm_shape)
    };
    vec![
        needs[0].then(|| {
            let mean_gx = gx.mean_dims(&dims, true);
            let mean_gx_xhat = (&gx * &xhat).mean_dims(&dims, true);
            &(&(&gx - &mean_gx) - &(&xhat * &mean_gx_xhat)) * &rstd
        }),
        needs[1].then(|| per_feature(g * &xhat)),
        needs[2].then(|| per_feature(g.clone())),
    ]
}
