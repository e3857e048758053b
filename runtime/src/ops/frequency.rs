//! Runs of equal values: `mode` (the most frequent value along a dim, from
//! a stable sort's runs) and `unique_consecutive` (runs in place). Both
//! are compositions of sort, comparisons, cumsum, scatter-add and gather,
//! so they run on either device; `mode`'s gradient is gather's.

use crate::{DType, Tensor};

impl Tensor {
    /// The most frequent value along `dim` and the index of its last
    /// occurrence (`torch.mode(x, dim, keepdim)`): ties go to the smallest
    /// value, and NaN, unequal to itself, never repeats, as PyTorch's. The
    /// gradient flows to that index.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 2.0, 1.0, 3.0], &[1, 5]);
    /// let (value, index) = x.mode(1, false);
    /// assert_eq!((value.to_vec::<f32>(), index.to_vec::<i64>()), (vec![1.0], vec![3]));
    /// ```
    #[track_caller]
    pub fn mode(&self, dim: isize, keepdim: bool) -> (Tensor, Tensor) {
        self.nonempty_dim(dim, "mode");
        let d = self.dim(dim, "mode") as isize;
        if self.ndim() == 0 {
            let index = Tensor::zeros_on(&[], DType::I64, self.device());
            return (self.clone(), index);
        }
        let (sorted, order) = self.detach().sort(d, false);
        let n = self.shape()[d as usize];
        // Each sorted position's run: a new one starts where the value changes.
        let changed = sorted.narrow(d, 1, n - 1).ne(&sorted.narrow(d, 0, n - 1));
        let first = Tensor::ones_on(&[1], DType::Bool, self.device()).expand(
            &(0..self.ndim())
                .map(|k| if k as isize == d { 1 } else { self.shape()[k] })
                .collect::<Vec<_>>(),
        );
        let starts = Tensor::cat(&[&first, &changed], d).to_dtype(DType::I64);
        let run = &starts.cumsum(d) - 1.0;
        let ones = Tensor::ones_like(&run);
        let lengths = Tensor::zeros_like(&run).scatter_add(d, &run, &ones);
        let length_here = lengths.gather(d, &run);
        // The first longest run is the smallest value among the most
        // frequent; the stable sort puts its last occurrence at its end.
        let start = length_here.argmax(d, true);
        let end = &(&start + &length_here.gather(d, &start)) - 1.0;
        let index = order.gather(d, &end);
        let value = self.gather(d, &index);
        if keepdim {
            (value, index)
        } else {
            (value.squeeze_dim(d), index.squeeze_dim(d))
        }
    }

    /// The flattened tensor with each run of equal neighbours kept once,
    /// the run each element is in (the input's shape) and each run's
    /// length (`torch.unique_consecutive(x, return_inverse=True,
    /// return_counts=True)`); NaN never equals its neighbour.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1i64, 1, 2, 2, 3, 1, 1, 2], &[8]);
    /// let (values, inverse, counts) = x.unique_consecutive();
    /// assert_eq!(values.to_vec::<i64>(), vec![1, 2, 3, 1, 2]);
    /// assert_eq!(inverse.to_vec::<i64>(), vec![0, 0, 1, 1, 2, 3, 3, 4]);
    /// assert_eq!(counts.to_vec::<i64>(), vec![2, 2, 1, 2, 1]);
    /// ```
    pub fn unique_consecutive(&self) -> (Tensor, Tensor, Tensor) {
        let flat = self.detach().reshape(&[-1]);
        let n = flat.numel();
        if n == 0 {
            let inverse = Tensor::zeros_on(self.shape(), DType::I64, self.device());
            let counts = Tensor::zeros_on(&[0], DType::I64, self.device());
            return (flat, inverse, counts);
        }
        let changed = flat.narrow(0, 1, n - 1).ne(&flat.narrow(0, 0, n - 1));
        let first = Tensor::ones_on(&[1], DType::Bool, self.device());
        let starts = Tensor::cat(&[&first, &changed], 0);
        let values = flat.masked_select(&starts);
        let run = &starts.to_dtype(DType::I64).cumsum(0) - 1.0;
        let counts = run.bincount(None, values.numel());
        let shape: Vec<isize> = self.shape().iter().map(|&d| d as isize).collect();
        (values, run.reshape(&shape), counts)
    }
}
