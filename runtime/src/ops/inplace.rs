//! In-place ops for optimizers and initialisers. They record nothing, so
//! using one on a tensor that requires grad while grad mode is on is an error
//! (as PyTorch's "a leaf Variable that requires grad is being used in an
//! in-place operation").

use crate::random::{Generator, default_generator};
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use tapir_kernels::elementwise::{self as ew, BinaryFn, UnaryFn};

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

    /// [`check_inplace`](Tensor::check_inplace), and that no two elements
    /// share memory (an expanded view): the op would write each address
    /// several times, from several threads (PyTorch refuses it too; `fill_`
    /// and `zero_`, which write one value, may).
    fn check_writable(&self, op: &str) {
        self.check_inplace(op);
        let overlaps = (self.shape().iter().zip(self.strides())).any(|(&n, &s)| n > 1 && s == 0);
        assert!(
            !overlaps,
            "{op}: more than one element of the written-to tensor refers to a single memory location (shape \
             {:?}, strides {:?}, as an expand makes); clone() the tensor before the in-place op",
            self.shape(),
            self.strides()
        );
    }

    /// `self = f(self, src)` with `src` broadcast to this tensor's shape.
    fn zip_assign_<F: BinaryFn>(&self, src: &Tensor, op: &str, f: F) {
        let src = self.inplace_source(src, op);
        let (target, [src], [ls]) = super::in_place_order(self, [src]);
        let s = src.read();
        self.write().zip_assign(&target, &s, &ls, &f);
    }

    /// Checks an in-place op's source and returns it (copied if it shares
    /// this buffer: reading and writing one buffer would deadlock).
    fn inplace_source(&self, src: &Tensor, op: &str) -> Tensor {
        self.check_writable(op);
        super::same_device(self, src, op);
        let shape = super::broadcast_shapes(self.shape(), src.shape(), op);
        assert!(
            shape == self.shape(),
            "{op}: source of shape {:?} does not broadcast to {:?}",
            src.shape(),
            self.shape()
        );
        if src.same_storage(self) {
            src.contiguous_copy()
        } else {
            src.detach()
        }
    }

    /// `self = f(self)`.
    fn map_assign_<F: UnaryFn>(&self, op: &str, f: F) {
        self.check_writable(op);
        let (target, [], []) = super::in_place_order(self, []);
        self.write().map_assign(&target, &f);
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
        trace::op("add_", [self, other], Vec::new, || {
            self.zip_assign_(other, "add_", ew::Add);
            self
        })
    }

    /// `self += alpha * other` (PyTorch's `add_(other, alpha=...)`).
    pub fn add_scaled_(&self, other: &Tensor, alpha: f64) -> &Tensor {
        trace::op(
            "add_scaled_",
            [self, other],
            || vec![("alpha", Attr::Float(alpha))],
            || {
                self.zip_assign_(other, "add_", ew::AddScaled { alpha });
                self
            },
        )
    }

    /// `self = beta * self + alpha * (mat1 @ mat2)` in place (PyTorch's
    /// `Tensor.addmm_`; `beta` 0 does not read `self`). With both factors
    /// 1 on the CPU the GEMM adds to `self` where it stands: no temporary,
    /// one pass.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let acc = Tensor::ones(&[2, 2]);
    /// acc.addmm_(&Tensor::ones(&[2, 3]), &Tensor::ones(&[3, 2]), 1.0, 1.0);
    /// assert_eq!(acc.to_vec::<f32>(), vec![4.0; 4]);
    /// ```
    pub fn addmm_(&self, mat1: &Tensor, mat2: &Tensor, beta: f64, alpha: f64) -> &Tensor {
        trace::op(
            "addmm_",
            [self, mat1, mat2],
            || vec![("beta", Attr::Float(beta)), ("alpha", Attr::Float(alpha))],
            || {
                self.check_writable("addmm_");
                super::same_device(self, mat1, "addmm_");
                super::same_device(self, mat2, "addmm_");
                let (m, n) = (mat1.shape().first(), mat2.shape().get(1));
                assert!(
                    mat1.ndim() == 2
                        && mat2.ndim() == 2
                        && mat1.shape()[1] == mat2.shape()[0]
                        && self.shape() == [*m.unwrap_or(&0), *n.unwrap_or(&0)],
                    "addmm_: {:?} += {:?} @ {:?} does not fit (want [m, n] += [m, k] @ [k, n])",
                    self.shape(),
                    mat1.shape(),
                    mat2.shape()
                );
                let fused = beta == 1.0
                    && alpha == 1.0
                    && mat1.dtype() == self.dtype()
                    && mat2.dtype() == self.dtype()
                    && !mat1.same_storage(self)
                    && !mat2.same_storage(self)
                    && self.is_contiguous()
                    && self.write().matmul_accumulate(
                        self.layout(),
                        &mat1.read(),
                        mat1.layout(),
                        &mat2.read(),
                        mat2.layout(),
                    );
                if !fused {
                    let product = mat1.mm(mat2);
                    match beta {
                        0.0 => self.fill_(0.0),
                        1.0 => self,
                        _ => self.mul_scalar_(beta),
                    };
                    self.add_scaled_(&product, alpha);
                }
                self
            },
        )
    }

    /// `self -= other` (broadcast to self's shape).
    pub fn sub_(&self, other: &Tensor) -> &Tensor {
        trace::op("sub_", [self, other], Vec::new, || {
            self.zip_assign_(other, "sub_", ew::Sub);
            self
        })
    }

    /// `self *= other` (broadcast to self's shape).
    pub fn mul_(&self, other: &Tensor) -> &Tensor {
        trace::op("mul_", [self, other], Vec::new, || {
            self.zip_assign_(other, "mul_", ew::Mul);
            self
        })
    }

    /// `self /= other` (broadcast to self's shape).
    pub fn div_(&self, other: &Tensor) -> &Tensor {
        trace::op("div_", [self, other], Vec::new, || {
            self.zip_assign_(other, "div_", ew::Div);
            self
        })
    }

    /// `self *= v`.
    pub fn mul_scalar_(&self, v: f64) -> &Tensor {
        trace::op(
            "mul_scalar_",
            [self],
            || vec![("value", Attr::Float(v))],
            || {
                self.map_assign_("mul_", ew::MulScalar { k: v });
                self
            },
        )
    }

    /// `self += v`.
    pub fn add_scalar_(&self, v: f64) -> &Tensor {
        trace::op(
            "add_scalar_",
            [self],
            || vec![("value", Attr::Float(v))],
            || {
                self.map_assign_("add_", ew::AddScalar { k: v });
                self
            },
        )
    }

    /// Copies `src` (broadcast, converted to this dtype) into `self`; as in
    /// PyTorch, `src` may live on another device (this is how a CPU
    /// checkpoint loads into a model on a GPU).
    pub fn copy_(&self, src: &Tensor) -> &Tensor {
        trace::op("copy_", [self, src], Vec::new, || {
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
            // Walked in the target's memory order, as the other in-place
            // ops; a source read across its memory is left to the copy
            // kernel's tiled transpose (one pass, not a copy and a copy).
            let src = self.inplace_source(src, "copy_");
            let order = super::in_place_walk(self, std::slice::from_ref(&src));
            let ls = src.layout().broadcast_to(self.shape()).permute(&order);
            let s = src.read();
            self.write().assign(&self.layout().permute(&order), &s, &ls);
            self
        })
    }

    /// Sets every element to `v`.
    pub fn fill_(&self, v: f64) -> &Tensor {
        trace::op(
            "fill_",
            [self],
            || vec![("value", Attr::Float(v))],
            || {
                self.check_inplace("fill_");
                self.write().fill(self.layout(), v);
                self
            },
        )
    }

    /// Sets every element to 0.
    pub fn zero_(&self) -> &Tensor {
        trace::op("zero_", [self], Vec::new, || self.fill_(0.0))
    }

    /// Limits every element to `[min, max]`.
    pub fn clamp_(&self, min: f64, max: f64) -> &Tensor {
        let attrs = || vec![("min", Attr::Float(min)), ("max", Attr::Float(max))];
        trace::op("clamp_", [self], attrs, || {
            assert!(
                min <= max,
                "clamp_: min ({min}) must not exceed max ({max})"
            );
            self.map_assign_("clamp_", ew::Clamp { lo: min, hi: max });
            self
        })
    }

    /// Fills with uniform draws from `[low, high)` (global generator).
    pub fn uniform_(&self, low: f64, high: f64) -> &Tensor {
        let attrs = || vec![("low", Attr::Float(low)), ("high", Attr::Float(high))];
        trace::op("uniform_", [self], attrs, || {
            self.uniform_with_(low, high, default_generator())
        })
    }

    /// As `uniform_`, drawing from `g`.
    pub fn uniform_with_(&self, low: f64, high: f64, g: &Generator) -> &Tensor {
        trace::op("uniform_with_", [self], Vec::new, || {
            self.check_writable("uniform_");
            let u = Tensor::from_vec(g.uniform(self.numel()), self.shape())
                .to(self.device())
                .expect("the tensor's device is in use");
            crate::no_grad(|| self.copy_(&(&(&u * (high - low)) + low)));
            self
        })
    }

    /// Fills with normal draws of `mean` and `std` (global generator).
    pub fn normal_(&self, mean: f64, std: f64) -> &Tensor {
        let attrs = || vec![("mean", Attr::Float(mean)), ("std", Attr::Float(std))];
        trace::op("normal_", [self], attrs, || {
            self.normal_with_(mean, std, default_generator())
        })
    }

    /// As `normal_`, drawing from `g`.
    pub fn normal_with_(&self, mean: f64, std: f64, g: &Generator) -> &Tensor {
        trace::op("normal_with_", [self], Vec::new, || {
            self.check_writable("normal_");
            // f32 draws unless the tensor holds f64 (PyTorch draws in the
            // tensor's own dtype).
            let z = match self.dtype() {
                DType::F64 => Tensor::from_vec(g.normal(self.numel()), self.shape()),
                _ => Tensor::from_vec(g.normal_f32(self.numel()), self.shape()),
            };
            let z = z.to(self.device()).expect("the tensor's device is in use");
            crate::no_grad(|| self.copy_(&(&(&z * std) + mean)));
            self
        })
    }
}
