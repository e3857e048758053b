//! The `torch.Tensor` methods that call `torch.linalg` (`x.det()`,
//! `x.inverse()`, `x.matrix_power(n)`, ...): each is the function named in
//! its doc, so errors read as PyTorch's (`linalg.inv: ...`, as
//! `torch.inverse` reports them).

use crate::Tensor;

impl Tensor {
    /// The determinant of each matrix (`x.det()`): [`super::det`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![2.0f64, 1.0, 1.0, 3.0], &[2, 2]);
    /// assert!((a.det().item::<f64>() - 5.0).abs() < 1e-12);
    /// ```
    pub fn det(&self) -> Tensor {
        super::det(self)
    }

    /// The log-determinant (`x.logdet()`: NaN for a negative
    /// determinant): [`super::logdet`].
    pub fn logdet(&self) -> Tensor {
        super::logdet(self)
    }

    /// The sign and log of the absolute determinant (`x.slogdet()`):
    /// [`super::slogdet`].
    pub fn slogdet(&self) -> (Tensor, Tensor) {
        super::slogdet(self)
    }

    /// The inverse of each matrix (`x.inverse()`): [`super::inv`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![2.0f64, 0.0, 0.0, 4.0], &[2, 2]);
    /// assert_eq!(a.inverse().to_vec::<f64>(), vec![0.5, 0.0, 0.0, 0.25]);
    /// ```
    #[doc(alias = "inv")]
    pub fn inverse(&self) -> Tensor {
        super::inv(self)
    }

    /// The Moore-Penrose pseudo-inverse (`x.pinverse()`): [`super::pinv`].
    pub fn pinverse(&self) -> Tensor {
        super::pinv(self)
    }

    /// The matrix to the integer power `n`, negative powers through the
    /// inverse (`x.matrix_power(n)`): [`super::matrix_power`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 1.0, 0.0, 1.0], &[2, 2]);
    /// assert_eq!(a.matrix_power(3).to_vec::<f32>(), vec![1.0, 3.0, 0.0, 1.0]);
    /// ```
    pub fn matrix_power(&self, n: i64) -> Tensor {
        super::matrix_power(self, n)
    }

    /// The matrix exponential (`x.matrix_exp()`): [`super::matrix_exp`].
    pub fn matrix_exp(&self) -> Tensor {
        super::matrix_exp(self)
    }

    /// The Cholesky factor, lower (or upper) triangular
    /// (`x.cholesky(upper)`): [`super::cholesky`].
    pub fn cholesky(&self, upper: bool) -> Tensor {
        super::cholesky(self, upper)
    }

    /// The inverse from a Cholesky factor `self`
    /// (`x.cholesky_inverse(upper)`): [`super::cholesky_inverse`].
    pub fn cholesky_inverse(&self, upper: bool) -> Tensor {
        super::cholesky_inverse(self, upper)
    }

    /// Solves `A X = self` given `A`'s Cholesky factor
    /// (`b.cholesky_solve(l, upper)`): [`super::cholesky_solve`].
    pub fn cholesky_solve(&self, factor: &Tensor, upper: bool) -> Tensor {
        super::cholesky_solve(self, factor, upper)
    }

    /// The reduced QR decomposition (`x.qr()`): [`super::qr`] with
    /// [`super::QrMode::Reduced`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![3.0f64, 1.0, 4.0, 2.0], &[2, 2]);
    /// let (q, r) = a.qr();
    /// assert!(q.matmul(&r).allclose(&a, 1e-12, 1e-12));
    /// ```
    pub fn qr(&self) -> (Tensor, Tensor) {
        super::qr(self, super::QrMode::Reduced)
    }
}
