//! Matrix products with `torch.matmul`'s semantics.

use super::{broadcast_shapes, same_device};
use crate::trace;
use crate::{DType, Tensor};

impl Tensor {
    /// `torch.matmul`: 1-D·1-D is a dot product, 2-D·2-D a matrix product,
    /// and higher ranks are batched with broadcast batch dims.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::ones(&[4, 2, 3]);
    /// let b = Tensor::ones(&[3, 5]);
    /// assert_eq!(a.matmul(&b).shape(), &[4, 2, 5]);
    /// ```
    pub fn matmul(&self, other: &Tensor) -> Tensor {
        trace::op("matmul", [self, other], Vec::new, || {
            if let Some((a, b)) = crate::amp::cast2(crate::amp::Policy::Lower, self, other) {
                return a.matmul(&b);
            }
            let (a, b) = (self, other);
            let describe = || format!("{:?} @ {:?}", a.shape(), b.shape());
            assert!(
                a.ndim() >= 1 && b.ndim() >= 1,
                "matmul: both arguments need at least 1 dim, got {}",
                describe()
            );
            same_device(a, b, "matmul");
            assert!(
                a.dtype() == b.dtype() && a.dtype().is_float(),
                "matmul: expected two float tensors of one dtype, got {} and {} ({})",
                a.dtype(),
                b.dtype(),
                describe()
            );
            let k_a = a.shape()[a.ndim() - 1];
            let k_b = if b.ndim() == 1 {
                b.shape()[0]
            } else {
                b.shape()[b.ndim() - 2]
            };
            assert!(
                k_a == k_b,
                "matmul: {} — inner dims differ ({k_a} != {k_b})",
                describe()
            );
            match (a.ndim(), b.ndim()) {
                (1, 1) => a.unsqueeze(0).mm_nd(&b.unsqueeze(1)).reshape(&[]),
                (1, _) => a.unsqueeze(0).matmul(b).squeeze_dim(-2),
                (_, 1) => a.matmul(&b.unsqueeze(1)).squeeze_dim(-1),
                (n, 2) if n > 2 => {
                    // Fold the batch into rows: one big GEMM, and a 2-D weight gradient.
                    let rows = a.reshape(&[-1, k_a as isize]).mm_nd(b);
                    let mut shape: Vec<isize> =
                        a.shape()[..n - 1].iter().map(|&s| s as isize).collect();
                    shape.push(b.shape()[1] as isize);
                    rows.reshape(&shape)
                }
                _ => a.mm_nd(b),
            }
        })
    }

    /// Matrix product of 2-D tensors (`torch.mm`).
    pub fn mm(&self, other: &Tensor) -> Tensor {
        trace::op("mm", [self, other], Vec::new, || {
            assert!(
                self.ndim() == 2 && other.ndim() == 2,
                "mm: expects 2-D tensors, got {:?} @ {:?}",
                self.shape(),
                other.shape()
            );
            self.matmul(other)
        })
    }

    /// Batched product of 3-D tensors with equal batch (`torch.bmm`).
    pub fn bmm(&self, other: &Tensor) -> Tensor {
        trace::op("bmm", [self, other], Vec::new, || {
            assert!(
                self.ndim() == 3 && other.ndim() == 3 && self.shape()[0] == other.shape()[0],
                "bmm: expects [b, n, m] @ [b, m, p], got {:?} @ {:?}",
                self.shape(),
                other.shape()
            );
            self.matmul(other)
        })
    }

    /// The inner product of two 1-D tensors of one length (`torch.dot`; for
    /// real tensors also `torch.vdot` and `torch.inner`'s 1-D case), 0-d.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// assert_eq!(a.dot(&a).item::<f32>(), 5.0);
    /// ```
    #[doc(alias = "vdot")]
    pub fn dot(&self, other: &Tensor) -> Tensor {
        assert!(
            self.ndim() == 1 && other.ndim() == 1 && self.shape() == other.shape(),
            "dot: expects two 1-D tensors of one length, got {:?} and {:?}",
            self.shape(),
            other.shape()
        );
        self.matmul(other)
    }

    /// A matrix times a vector (`torch.mv`): `[n, m]` by `[m]` gives `[n]`.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let v = Tensor::from_vec(vec![1.0f32, -1.0], &[2]);
    /// assert_eq!(a.mv(&v).to_vec::<f32>(), vec![-1.0, -1.0]);
    /// ```
    #[track_caller]
    pub fn mv(&self, vec: &Tensor) -> Tensor {
        assert!(
            self.ndim() == 2 && vec.ndim() == 1 && self.shape()[1] == vec.shape()[0],
            "mv: expects a matrix [n, m] and a vector [m], got {:?} and {:?}",
            self.shape(),
            vec.shape()
        );
        self.matmul(vec)
    }

    /// The `p`-norm of `self - other` (`torch.dist`; `p` = 2 is PyTorch's
    /// default), broadcast.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![0.0f32, 0.0], &[2]);
    /// let b = Tensor::from_vec(vec![3.0f32, 4.0], &[2]);
    /// assert_eq!(a.dist(&b, 2.0).item::<f32>(), 5.0);
    /// assert_eq!(a.dist(&b, f64::INFINITY).item::<f32>(), 4.0);
    /// ```
    pub fn dist(&self, other: &Tensor, p: f64) -> Tensor {
        (self - other).norm(p)
    }

    /// The outer product `a_i b_j` of two 1-D tensors (`torch.outer`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// assert_eq!(a.outer(&a).to_vec::<f32>(), vec![1.0, 2.0, 2.0, 4.0]);
    /// ```
    #[doc(alias = "ger")]
    pub fn outer(&self, other: &Tensor) -> Tensor {
        assert!(
            self.ndim() == 1 && other.ndim() == 1,
            "outer: expects two 1-D tensors, got {:?} and {:?}",
            self.shape(),
            other.shape()
        );
        &self.unsqueeze(1) * &other.unsqueeze(0)
    }

    /// The core: both operands at least 2-D, batch dims broadcast.
    fn mm_nd(&self, other: &Tensor) -> Tensor {
        let (a, b) = (self, other);
        let (na, nb) = (a.ndim(), b.ndim());
        let batch = broadcast_shapes(&a.shape()[..na - 2], &b.shape()[..nb - 2], "matmul");
        let (m, k, n) = (a.shape()[na - 2], a.shape()[na - 1], b.shape()[nb - 1]);
        let mut sa = batch.clone();
        sa.extend([m, k]);
        let mut sb = batch.clone();
        sb.extend([k, n]);
        let (la, lb) = (a.layout().broadcast_to(&sa), b.layout().broadcast_to(&sb));
        let storage = if a.same_storage(b) {
            let s = a.read();
            s.matmul(&la, &s, &lb)
        } else {
            a.read().matmul(&la, &b.read(), &lb)
        };
        let mut shape = batch;
        shape.extend([m, n]);
        let out = Tensor::from_storage(storage, &shape);
        debug_assert!(
            out.dtype() == a.dtype() || a.dtype() == DType::F16 || a.dtype() == DType::BF16
        );
        let (a_shape, b_shape) = (a.shape().to_vec(), b.shape().to_vec());
        Tensor::record(out, "MmBackward0", &[a, b], || {
            let (a, b) = (a.saved(), b.saved());
            move |g: &Tensor, needs: &[bool]| {
                vec![
                    needs[0].then(|| left_grad(g, &b, &a_shape)),
                    needs[1].then(|| match a.ndim() {
                        2 => weight_grad(&a, g, &b),
                        _ => a.transpose(-1, -2).mm_nd(g).sum_to(&b_shape),
                    }),
                ]
            }
        })
    }
}

impl Tensor {
    /// `self @ w + bias` for a 2-D `self` `[m, k]`, `w` `[k, n]` and `bias`
    /// `[n]` (PyTorch's `addmm`, what `F.linear` runs): on the CPU one kernel
    /// starts the GEMM from the bias, so the sum costs no pass and a half
    /// result is rounded once; elsewhere matmul then add.
    pub(crate) fn addmm_bias(&self, w: &Tensor, bias: &Tensor) -> Tensor {
        let (x, m, k, n) = (self, self.shape()[0], w.shape()[0], w.shape()[1]);
        assert!(
            x.ndim() == 2 && w.ndim() == 2 && x.shape()[1] == k && bias.shape() == [n],
            "addmm: {:?} @ {:?} + {:?}",
            x.shape(),
            w.shape(),
            bias.shape()
        );
        same_device(x, w, "linear");
        same_device(x, bias, "linear");
        let fused = (x.dtype() == w.dtype() && x.dtype() == bias.dtype() && x.dtype().is_float())
            .then(|| {
                let (xs, ws, bs) = (x.read(), w.read(), bias.read());
                xs.matmul_bias(x.layout(), &ws, w.layout(), &bs, bias.layout())
            })
            .flatten();
        let Some(storage) = fused else {
            return &x.matmul(w) + bias;
        };
        let out = Tensor::from_storage(storage, &[m, n]);
        Tensor::record(out, "AddmmBackward0", &[bias, x, w], || {
            let (x, w) = (x.saved(), w.saved());
            move |g: &Tensor, needs: &[bool]| {
                vec![
                    needs[0].then(|| g.sum_to(&[n])),
                    needs[1].then(|| g.mm_nd(&w.transpose(-1, -2))),
                    needs[2].then(|| weight_grad(&x, g, &w)),
                ]
            }
        })
    }
}

/// `g @ b^T` summed to `a_shape`: the gradient of `a` in `a @ b`. When `a`
/// was broadcast over the batch (a convolution's weight against the
/// unfolded images) and has fewer rows than columns, it is computed as
/// `(b @ g^T)^T` instead: the GEMM's column-major right operand is then
/// `g^T`, `[n, m]` per product, rather than `b^T`, `[n, k]`, which the
/// GEMM would first copy row-major (the CNN's conv2 weight gradient,
/// 128 products of `[64, 196] @ [196, 288]`: 9.9 -> 5.7 ms).
fn left_grad(g: &Tensor, b: &Tensor, a_shape: &[usize]) -> Tensor {
    let nd = a_shape.len();
    let (m, k) = (a_shape[nd - 2], a_shape[nd - 1]);
    let products: usize = g.shape()[..g.ndim() - 2].iter().product();
    let broadcast = a_shape[..nd - 2].iter().product::<usize>() < products;
    if broadcast && m < k {
        // Summed before the transpose, so the sum reads its input in order.
        let mut swapped = a_shape.to_vec();
        swapped.swap(nd - 2, nd - 1);
        let summed = b.mm_nd(&g.transpose(-1, -2)).sum_to(&swapped);
        return summed.transpose(-1, -2).contiguous();
    }
    g.mm_nd(&b.transpose(-1, -2)).sum_to(a_shape)
}

/// `x^T @ g`, the gradient of `w` in `x @ w`, laid out as `w` is: for a
/// transposed weight (`linear`'s `weight.t()`) computed as `(g^T @ x)^T`,
/// so the weight's own gradient arrives contiguous — no gather, no copy,
/// no strided cast under autocast.
fn weight_grad(x: &Tensor, g: &Tensor, w: &Tensor) -> Tensor {
    let s = w.strides();
    if w.ndim() == 2 && s[0] == 1 && s[1] == w.shape()[0] && w.shape()[0] > 1 {
        g.transpose(-1, -2).mm_nd(x).transpose(-1, -2)
    } else {
        x.transpose(-1, -2).mm_nd(g)
    }
}
