//! In-place ops for optimizers and initialisers. They record nothing, so
//! using one on a tensor that requires grad while grad mode is on is an error
//! (as PyTorch's "a leaf Variable that requires grad is being used in an
//! in-place operation").

use crate::Tensor;
use crate::random::{Generator, default_generator};

impl Tensor {
    fn check_inplace(&self, op: &str) {
        assert!(
            !(crate::is_grad_enabled() && self.requires_grad()),
            "{op}: a tensor that requires grad ({}) is being used in an in-place operation; wrap the update in \
             no_grad, or use the out-of-place op",
            if self.is_leaf() {
                "a leaf"
            } else {
                "part of a graph"
            }
        );
    }

    /// On a GPU an in-place op is its out-of-place twin `gpu(self)` plus a
    /// copy into this view (the CPU path applies `f` in place instead).
    fn assign_result_(&self, op: &str, gpu: impl FnOnce(&Tensor) -> Tensor) {
        self.check_inplace(op);
        let r = crate::no_grad(|| gpu(&self.detach()));
        let r = if r.same_storage(self) {
            r.contiguous_copy()
        } else {
            r
        };
        let lr = r.layout().broadcast_to(self.shape());
        self.write().assign(self.layout(), &r.read(), &lr);
    }

    fn zip_assign_(
        &self,
        src: &Tensor,
        op: &str,
        f: impl Fn(f64, f64) -> f64 + Sync,
        gpu: impl FnOnce(&Tensor, &Tensor) -> Tensor,
    ) {
        self.check_inplace(op);
        super::same_device(self, src, op);
        let shape = super::broadcast_shapes(self.shape(), src.shape(), op);
        assert_eq!(
            shape,
            self.shape(),
            "{op}: source of shape {:?} does not broadcast to {:?}",
            src.shape(),
            self.shape()
        );
        if self.device().is_cuda() {
            return self.assign_result_(op, |s| gpu(s, &src.detach()));
        }
        // Reading and writing one buffer would deadlock: copy the source first.
        let src = if src.same_storage(self) {
            src.contiguous_copy()
        } else {
            src.detach()
        };
        let ls = src.layout().broadcast_to(self.shape());
        let s = src.read();
        self.write()
            .host_mut()
            .zip_assign(self.layout(), &s.host(), &ls, f);
    }

    fn map_assign_(
        &self,
        op: &str,
        f: impl Fn(f64) -> f64 + Sync,
        gpu: impl FnOnce(&Tensor) -> Tensor,
    ) {
        if self.device().is_cuda() {
            return self.assign_result_(op, gpu);
        }
        self.check_inplace(op);
        self.write().host_mut().map_assign(self.layout(), f);
    }

    /// `self += other` (broadcast to self's shape).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let p = Tensor::zeros(&[2]);
    /// p.add_(&Tensor::ones(&[2]));
    /// p.add_scaled_(&Tensor::ones(&[2]), -0.5);
    /// assert_eq!(p.to_vec::<f32>(), vec![0.5, 0.5]);
    /// ```
    pub fn add_(&self, other: &Tensor) -> &Tensor {
        self.zip_assign_(other, "add_", |a, b| a + b, |s, o| s + o);
        self
    }

    /// `self += alpha * other` (PyTorch's `add_(other, alpha=...)`).
    pub fn add_scaled_(&self, other: &Tensor, alpha: f64) -> &Tensor {
        self.zip_assign_(
            other,
            "add_",
            move |a, b| a + alpha * b,
            move |s, o| s + &(o * alpha),
        );
        self
    }

    pub fn sub_(&self, other: &Tensor) -> &Tensor {
        self.zip_assign_(other, "sub_", |a, b| a - b, |s, o| s - o);
        self
    }

    pub fn mul_(&self, other: &Tensor) -> &Tensor {
        self.zip_assign_(other, "mul_", |a, b| a * b, |s, o| s * o);
        self
    }

    pub fn div_(&self, other: &Tensor) -> &Tensor {
        self.zip_assign_(other, "div_", |a, b| a / b, |s, o| s / o);
        self
    }

    pub fn mul_scalar_(&self, v: f64) -> &Tensor {
        self.map_assign_("mul_", move |a| a * v, move |s| s * v);
        self
    }

    pub fn add_scalar_(&self, v: f64) -> &Tensor {
        self.map_assign_("add_", move |a| a + v, move |s| s + v);
        self
    }

    /// Copies `src` (broadcast, converted to this dtype) into `self`; as in
    /// PyTorch, `src` may live on another device (this is how a CPU
    /// checkpoint loads into a model on a GPU).
    pub fn copy_(&self, src: &Tensor) -> &Tensor {
        let moved;
        let src = if src.device() == self.device() {
            src
        } else {
            moved = src
                .detach()
                .to(self.device())
                .unwrap_or_else(|e| panic!("copy_: {e}"));
            &moved
        };
        self.zip_assign_(src, "copy_", |_, b| b, |_, o| o.clone());
        self
    }

    pub fn fill_(&self, v: f64) -> &Tensor {
        self.map_assign_("fill_", move |_| v, move |s| Tensor::full_like(s, v));
        self
    }

    pub fn zero_(&self) -> &Tensor {
        self.fill_(0.0)
    }

    pub fn clamp_(&self, min: f64, max: f64) -> &Tensor {
        self.map_assign_(
            "clamp_",
            move |a| if a.is_nan() { a } else { a.max(min).min(max) },
            move |s| s.clamp(min, max),
        );
        self
    }

    /// Fills with uniform draws from `[low, high)` (global generator).
    pub fn uniform_(&self, low: f64, high: f64) -> &Tensor {
        self.uniform_with_(low, high, default_generator())
    }

    pub fn uniform_with_(&self, low: f64, high: f64, g: &Generator) -> &Tensor {
        let u = Tensor::from_vec(g.uniform(self.numel()), self.shape())
            .to(self.device())
            .expect("the tensor's device is in use");
        self.check_inplace("uniform_");
        crate::no_grad(|| self.copy_(&(&(&u * (high - low)) + low)));
        self
    }

    /// Fills with normal draws of `mean` and `std` (global generator).
    pub fn normal_(&self, mean: f64, std: f64) -> &Tensor {
        self.normal_with_(mean, std, default_generator())
    }

    pub fn normal_with_(&self, mean: f64, std: f64, g: &Generator) -> &Tensor {
        let z = Tensor::from_vec(g.normal(self.numel()), self.shape())
            .to(self.device())
            .expect("the tensor's device is in use");
        self.check_inplace("normal_");
        crate::no_grad(|| self.copy_(&(&(&z * std) + mean)));
        self
    }
}
