//! Softmax and log-softmax: fused, numerically stable kernels with their
//! closed-form backward.

use crate::Tensor;
use crate::trace::{self, Attr};

impl Tensor {
    /// Softmax (`log`: log-softmax) along `dim`, through the last dim.
    fn rowwise(&self, dim: isize, op: &str, log: bool) -> (Tensor, usize) {
        assert!(
            self.dtype().is_float(),
            "{op}: expects a float tensor, got {}",
            self.dtype()
        );
        let d = self.dim(dim, op);
        if self.ndim() == 0 {
            return (self.rowwise(0, op, log).0.reshape(&[]), 0);
        }
        let last = self.ndim() - 1;
        if d != last
            && let Some(s) = self.read().softmax_columns(self.layout(), d, log)
        {
            return (Tensor::from_storage(s, self.shape()), d);
        }
        let moved = if d == last {
            self.detach()
        } else {
            self.detach().transpose(d as isize, last as isize)
        };
        let storage = moved.read().softmax(moved.layout(), log);
        let out = Tensor::from_storage(storage, moved.shape());
        let out = if d == last {
            out
        } else {
            out.transpose(d as isize, last as isize).contiguous()
        };
        (out, d)
    }

    /// `exp(x) / sum(exp(x))` along `dim`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let p = Tensor::from_vec(vec![1.0f32, 1.0, 1.0, 1.0], &[2, 2]).softmax(-1);
    /// assert_eq!(p.to_vec::<f32>(), vec![0.5; 4]);
    /// ```
    pub fn softmax(&self, dim: isize) -> Tensor {
        trace::op(
            "softmax",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                    return x.softmax(dim);
                }
                let (out, d) = self.rowwise(dim, "softmax", false);
                let last = self.ndim().saturating_sub(1);
                Tensor::record(out.detach(), "SoftmaxBackward0", &[self], || {
                    let y = out.saved();
                    move |g: &Tensor, _: &[bool]| {
                        // Along the last dim where the fused row kernel runs
                        // (the CPU): `y * (g - sum(g * y))` in one pass per
                        // row, in f32 for the half types. As four ops it
                        // was four passes over attention's 2 M scores.
                        let storage = y.read();
                        // (`create_graph` needs the four ops, which record.)
                        if d == last
                            && y.ndim() > 0
                            && storage.fuses_scaled_softmax()
                            && !crate::autograd::differentiating()
                        {
                            let dx = storage.scaled_softmax_backward(&g.read(), g.layout(), 1.0);
                            return vec![Some(Tensor::from_storage(dx, y.shape()))];
                        }
                        drop(storage);
                        let dot = (g * &y).sum_dim(d as isize, true);
                        vec![Some(&y * &(g - &dot))]
                    }
                })
            },
        )
    }

    /// `x - logsumexp(x)` along `dim`.
    pub fn log_softmax(&self, dim: isize) -> Tensor {
        trace::op(
            "log_softmax",
            [self],
            || vec![("dim", Attr::Int(dim as i64))],
            || {
                if let Some(x) = crate::amp::cast1(crate::amp::Policy::Fp32OnCuda, self) {
                    return x.log_softmax(dim);
                }
                let (out, d) = self.rowwise(dim, "log_softmax", true);
                let last = self.ndim().saturating_sub(1);
                Tensor::record(out.detach(), "LogSoftmaxBackward0", &[self], || {
                    let y = out.saved();
                    move |g: &Tensor, _: &[bool]| {
                        // Along the last dim on the CPU: `g - exp(y) *
                        // sum(g)` in one pass per row (as three ops, three
                        // passes and three logits-sized buffers).
                        let storage = y.read();
                        if d == last
                            && y.ndim() > 0
                            && storage.fuses_scaled_softmax()
                            && !crate::autograd::differentiating()
                        {
                            let dx = storage.log_softmax_backward(&g.read(), g.layout());
                            return vec![Some(Tensor::from_storage(dx, y.shape()))];
                        }
                        drop(storage);
                        vec![Some(g - &(&y.exp() * &g.sum_dim(d as isize, true)))]
                    }
                })
            },
        )
    }

    /// `softmax(scale * self, -1)` with, when `causal`, the keys after each
    /// query (dim -2) masked: what `compile` runs for `x * scale`,
    /// `causal_mask` and `softmax(-1)` on a device with the fused kernel
    /// (one pass forward, one backward; the forward is the eager chain's
    /// bits).
    pub(crate) fn scaled_softmax(&self, scale: f64, causal: bool) -> Tensor {
        let attrs = || {
            vec![
                ("scale", Attr::Float(scale)),
                ("is_causal", Attr::Int(causal as i64)),
            ]
        };
        trace::op("scaled_softmax", [self], attrs, || {
            let queries = if self.ndim() >= 2 { self.size(-2) } else { 1 };
            let out = self
                .read()
                .scaled_softmax(self.layout(), queries, scale, causal);
            let out = Tensor::from_storage(out, self.shape());
            Tensor::record(out.detach(), "ScaledSoftmaxBackward0", &[self], || {
                let y = out.saved();
                move |g: &Tensor, _: &[bool]| {
                    let dx = y
                        .read()
                        .scaled_softmax_backward(&g.read(), g.layout(), scale);
                    vec![Some(Tensor::from_storage(dx, y.shape()))]
                }
            })
        })
    }
}
