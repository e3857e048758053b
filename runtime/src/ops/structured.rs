//! Ops that arrange, combine or index whole tensors, composed of views,
//! joins, `gather` and `matmul` (so autograd, compile and both devices come
//! from those): `meshgrid`, `cartesian_prod`, `rot90`, `kron`, `tensordot`,
//! `take_along_dim`, `block_diag`, `diff`, `tril_indices` and
//! `triu_indices`.

use crate::{DType, Tensor};

/// How [`Tensor::meshgrid`] lays out its grids (`indexing=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Indexing {
    /// Matrix indexing: grid `i` varies along dim `i` (PyTorch's default).
    #[default]
    Ij,
    /// Cartesian indexing: the first two dims swapped (NumPy's default).
    Xy,
}

/// Row and column pairs of a `rows x cols` matrix's entries on or below
/// (`lower`) or on or above the `offset` diagonal, row-major.
fn triangle(rows: usize, cols: usize, offset: i64, lower: bool) -> Tensor {
    let mut at = (vec![], vec![]);
    for r in 0..rows as i64 {
        for c in 0..cols as i64 {
            if (lower && c - r <= offset) || (!lower && c - r >= offset) {
                at.0.push(r);
                at.1.push(c);
            }
        }
    }
    let n = at.0.len();
    Tensor::from_vec([at.0, at.1].concat(), &[2, n])
}

impl Tensor {
    /// Coordinate grids of 1-D (or 0-D) tensors (`torch.meshgrid`): with
    /// `Ij` grid `i` has `tensors[i]` along dim `i`; `Xy` swaps the first
    /// two dims. Each grid is a broadcast view, as PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::{Indexing, Tensor};
    /// let (x, y) = (Tensor::arange(3), Tensor::arange(2));
    /// let g = Tensor::meshgrid(&[&x, &y], Indexing::Ij);
    /// assert_eq!(g[0].to_vec::<i64>(), vec![0, 0, 1, 1, 2, 2]);
    /// assert_eq!(Tensor::meshgrid(&[&x, &y], Indexing::Xy)[0].shape(), &[2, 3]);
    /// ```
    #[track_caller]
    pub fn meshgrid(tensors: &[&Tensor], indexing: Indexing) -> Vec<Tensor> {
        assert!(
            !tensors.is_empty() && tensors.iter().all(|t| t.ndim() <= 1),
            "meshgrid: expects one or more 0-D or 1-D tensors, got shapes {:?}",
            tensors
                .iter()
                .map(|t| t.shape().to_vec())
                .collect::<Vec<_>>()
        );
        let swap = indexing == Indexing::Xy && tensors.len() >= 2;
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        if swap {
            order.swap(0, 1);
        }
        let shape: Vec<usize> = order.iter().map(|&i| tensors[i].numel()).collect();
        tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let at = order.iter().position(|&o| o == i).unwrap_or(i);
                let mut view = vec![1isize; shape.len()];
                view[at] = t.numel() as isize;
                t.reshape(&view).expand(&shape)
            })
            .collect()
    }

    /// Every combination of the elements of 1-D tensors, one per row
    /// (`torch.cartesian_prod`); one tensor is returned as it is.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let (a, b) = (Tensor::arange(2), Tensor::arange(3));
    /// let p = Tensor::cartesian_prod(&[&a, &b]);
    /// assert_eq!(p.shape(), &[6, 2]);
    /// assert_eq!(p.to_vec::<i64>()[..4], [0, 0, 0, 1]);
    /// ```
    #[track_caller]
    pub fn cartesian_prod(tensors: &[&Tensor]) -> Tensor {
        if let [t] = tensors {
            return (*t).clone();
        }
        let grids = Tensor::meshgrid(tensors, Indexing::Ij);
        let columns: Vec<Tensor> = grids.iter().map(|g| g.reshape(&[-1])).collect();
        Tensor::stack(&columns.iter().collect::<Vec<_>>(), 1)
    }

    /// The tensor rotated by 90° `k` times in the plane of `dims`, from
    /// the first toward the second (`torch.rot90`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(4).reshape(&[2, 2]);
    /// assert_eq!(x.rot90(1, [0, 1]).to_vec::<i64>(), vec![1, 3, 0, 2]);
    /// assert_eq!(x.rot90(-1, [0, 1]).to_vec::<i64>(), vec![2, 0, 3, 1]);
    /// ```
    #[track_caller]
    pub fn rot90(&self, k: i64, dims: [isize; 2]) -> Tensor {
        let (a, b) = (self.dim(dims[0], "rot90"), self.dim(dims[1], "rot90"));
        assert!(
            a != b && self.ndim() >= 2,
            "rot90: dims {dims:?} must be two different dims of shape {:?}",
            self.shape()
        );
        let (a, b) = (a as isize, b as isize);
        match k.rem_euclid(4) {
            1 => self.flip(&[b]).transpose(a, b),
            2 => self.flip(&[a, b]),
            3 => self.flip(&[a]).transpose(a, b),
            _ => self.clone(),
        }
    }

    /// The Kronecker product (`torch.kron`): block `(i, j, ..)` is
    /// `self[i, j, ..] * other`; the shorter shape is padded with leading 1s.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, 2.0], &[2]);
    /// let b = Tensor::from_vec(vec![1.0f32, 10.0], &[2]);
    /// assert_eq!(a.kron(&b).to_vec::<f32>(), vec![1.0, 10.0, 2.0, 20.0]);
    /// ```
    pub fn kron(&self, other: &Tensor) -> Tensor {
        let n = self.ndim().max(other.ndim());
        let padded = |t: &Tensor| -> Vec<usize> {
            let mut s = vec![1; n - t.ndim()];
            s.extend_from_slice(t.shape());
            s
        };
        let (sa, sb) = (padded(self), padded(other));
        let interleaved = |s: &[usize], first: bool| -> Vec<isize> {
            s.iter()
                .flat_map(|&d| {
                    if first {
                        [d as isize, 1]
                    } else {
                        [1, d as isize]
                    }
                })
                .collect()
        };
        let product =
            &self.reshape(&interleaved(&sa, true)) * &other.reshape(&interleaved(&sb, false));
        let out: Vec<isize> = sa.iter().zip(&sb).map(|(a, b)| (a * b) as isize).collect();
        product.reshape(&out)
    }

    /// The sum of products over `dims_self` of `self` and `dims_other` of
    /// `other`, paired in order (`torch.tensordot(a, b, dims=(..))`): the
    /// result has `self`'s other dims, then `other`'s. One matrix product.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::ones(&[2, 3, 4]);
    /// let b = Tensor::ones(&[4, 3, 5]);
    /// let c = a.tensordot(&b, &[1, 2], &[1, 0]);
    /// assert_eq!(c.shape(), &[2, 5]);
    /// assert_eq!(c.to_vec::<f32>()[0], 12.0);
    /// ```
    #[track_caller]
    pub fn tensordot(&self, other: &Tensor, dims_self: &[isize], dims_other: &[isize]) -> Tensor {
        let da: Vec<usize> = dims_self
            .iter()
            .map(|&d| self.dim(d, "tensordot"))
            .collect();
        let db: Vec<usize> = dims_other
            .iter()
            .map(|&d| other.dim(d, "tensordot"))
            .collect();
        let sizes_match = da.len() == db.len()
            && da
                .iter()
                .zip(&db)
                .all(|(&i, &j)| self.shape()[i] == other.shape()[j]);
        assert!(
            sizes_match,
            "tensordot: dims {dims_self:?} of shape {:?} and {dims_other:?} of shape {:?} must pair dims of equal sizes",
            self.shape(),
            other.shape()
        );
        let free_a: Vec<usize> = (0..self.ndim()).filter(|d| !da.contains(d)).collect();
        let free_b: Vec<usize> = (0..other.ndim()).filter(|d| !db.contains(d)).collect();
        let order = |free: &[usize], summed: &[usize], summed_first: bool| -> Vec<isize> {
            let (x, y) = if summed_first {
                (summed, free)
            } else {
                (free, summed)
            };
            x.iter().chain(y).map(|&d| d as isize).collect()
        };
        let k: usize = da.iter().map(|&d| self.shape()[d]).product();
        let a = self
            .permute(&order(&free_a, &da, false))
            .reshape(&[-1, k as isize]);
        let b = other
            .permute(&order(&free_b, &db, true))
            .reshape(&[k as isize, -1]);
        let mut shape: Vec<isize> = free_a.iter().map(|&d| self.shape()[d] as isize).collect();
        shape.extend(free_b.iter().map(|&d| other.shape()[d] as isize));
        a.matmul(&b).reshape(&shape)
    }

    /// The values at `indices` along `dim`, the other dims broadcast
    /// (`torch.take_along_dim`); with no dim, of the flattened tensor.
    /// What `argsort`, `argmax(keepdim)` and `topk` indices pick.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![3.0f32, 1.0, 2.0, 9.0, 7.0, 8.0], &[2, 3]);
    /// let (_, idx) = x.sort(1, false);
    /// assert_eq!(x.take_along_dim(&idx, Some(1)).to_vec::<f32>(), vec![1.0, 2.0, 3.0, 7.0, 8.0, 9.0]);
    /// ```
    #[track_caller]
    pub fn take_along_dim(&self, indices: &Tensor, dim: Option<isize>) -> Tensor {
        let Some(dim) = dim else {
            return self.reshape(&[-1]).gather(0, &indices.reshape(&[-1]));
        };
        let d = self.dim(dim, "take_along_dim");
        assert!(
            indices.ndim() == self.ndim(),
            "take_along_dim: indices of shape {:?} need as many dims as the input's {:?}",
            indices.shape(),
            self.shape()
        );
        let mut rest_a = self.shape().to_vec();
        let mut rest_i = indices.shape().to_vec();
        rest_a[d] = 1;
        rest_i[d] = 1;
        let rest = super::broadcast_shapes(&rest_a, &rest_i, "take_along_dim");
        let (mut sa, mut si) = (rest.clone(), rest);
        sa[d] = self.shape()[d];
        si[d] = indices.shape()[d];
        self.expand(&sa).gather(d as isize, &indices.expand(&si))
    }

    /// The 2-D tensors (0-D as `1 x 1`, 1-D as one row) on the diagonal of
    /// a zero matrix (`torch.block_diag`), in the first's dtype.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let (a, b) = (Tensor::ones(&[1, 2]), Tensor::full(&[2, 1], 2.0));
    /// let m = Tensor::block_diag(&[&a, &b]);
    /// assert_eq!(m.to_vec::<f32>(), vec![1.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn block_diag(tensors: &[&Tensor]) -> Tensor {
        assert!(
            !tensors.is_empty() && tensors.iter().all(|t| t.ndim() <= 2),
            "block_diag: expects one or more tensors of at most 2 dims, got shapes {:?}",
            tensors
                .iter()
                .map(|t| t.shape().to_vec())
                .collect::<Vec<_>>()
        );
        let (dtype, device) = (tensors[0].dtype(), tensors[0].device());
        let blocks: Vec<Tensor> = tensors
            .iter()
            .map(|t| {
                let t = t.to_dtype(dtype);
                match t.ndim() {
                    0 => t.reshape(&[1, 1]),
                    1 => t.unsqueeze(0),
                    _ => t,
                }
            })
            .collect();
        let width: usize = blocks.iter().map(|b| b.shape()[1]).sum();
        let mut left = 0;
        let rows: Vec<Tensor> = blocks
            .iter()
            .map(|b| {
                let (h, w) = (b.shape()[0], b.shape()[1]);
                let before = Tensor::zeros_on(&[h, left], dtype, device);
                let after = Tensor::zeros_on(&[h, width - left - w], dtype, device);
                left += w;
                Tensor::cat(&[&before, b, &after], 1)
            })
            .collect();
        Tensor::cat(&rows.iter().collect::<Vec<_>>(), 0)
    }

    /// The `n`-th forward difference along `dim` (`torch.diff`): `x[1:] -
    /// x[:-1]`, `n` times.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 4.0, 9.0, 16.0], &[4]);
    /// assert_eq!(x.diff(1, -1).to_vec::<f32>(), vec![3.0, 5.0, 7.0]);
    /// assert_eq!(x.diff(2, 0).to_vec::<f32>(), vec![2.0, 2.0]);
    /// ```
    #[track_caller]
    pub fn diff(&self, n: usize, dim: isize) -> Tensor {
        let d = self.dim(dim, "diff") as isize;
        let mut out = self.clone();
        for _ in 0..n {
            let len = out.shape()[d as usize];
            if len == 0 {
                break;
            }
            let (hi, lo) = (out.narrow(d, 1, len - 1), out.narrow(d, 0, len - 1));
            out = if out.dtype() == DType::Bool {
                hi.ne(&lo)
            } else {
                &hi - &lo
            };
        }
        out
    }

    /// The row and column indices `[2, n]` of the entries of a `rows x
    /// cols` matrix on or below the `offset` diagonal, row-major
    /// (`torch.tril_indices`), as int64 on the CPU.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let i = Tensor::tril_indices(3, 3, 0);
    /// assert_eq!(i.to_vec::<i64>(), vec![0, 1, 1, 2, 2, 2, 0, 0, 1, 0, 1, 2]);
    /// ```
    pub fn tril_indices(rows: usize, cols: usize, offset: i64) -> Tensor {
        triangle(rows, cols, offset, true)
    }

    /// As [`Tensor::tril_indices`], on or above the `offset` diagonal
    /// (`torch.triu_indices`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// assert_eq!(Tensor::triu_indices(2, 3, 1).to_vec::<i64>(), vec![0, 0, 1, 1, 2, 2]);
    /// ```
    pub fn triu_indices(rows: usize, cols: usize, offset: i64) -> Tensor {
        triangle(rows, cols, offset, false)
    }
}
