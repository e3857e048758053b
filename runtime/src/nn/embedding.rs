//! `Embedding` and `EmbeddingBag`: lookup tables, the second reducing each
//! bag of ids (sum, mean or max) without materialising the per-id rows as a
//! user-visible tensor.
//!
//! A bag reduction is composed from existing ops, so autograd comes for free:
//! ragged bags (1-D input with offsets) are laid out as a dense
//! `[bags, longest]` grid of positions, the ids gathered into it, and masked
//! `sum`/`amax` reduce the rows. Only the offsets are read on the host (they
//! decide the grid's shape, as in PyTorch's own CPU kernel).

use super::init;
use super::module::{Forward, Module, TensorKind, py_float};
use crate::{DType, Tensor};

/// A lookup table of `num_embeddings` vectors (`nn.Embedding`), N(0, 1)
/// initialised; the `padding_idx` row starts at zero and gets no gradient.
///
/// ```
/// use tapir_runtime::{nn::{Embedding, Forward}, Tensor};
/// let e = Embedding::new(10, 3, Some(0)).max_norm(1.0);
/// let y = e.forward(&Tensor::from_vec(vec![0i64, 4, 4], &[3]));
/// assert_eq!(y.shape(), &[3, 3]);
/// assert!(y.norm_dims(2.0, &[1], false).to_vec::<f32>().iter().all(|&n| n <= 1.0 + 1e-5));
/// assert_eq!(e.to_string(), "Embedding(10, 3, padding_idx=0, max_norm=1.0)");
/// ```
pub struct Embedding {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor,
    /// Vocabulary size.
    pub num_embeddings: usize,
    /// Vector width.
    pub embedding_dim: usize,
    /// An index whose row stays zero and gets no gradient.
    pub padding_idx: Option<usize>,
    /// Rows looked up with a larger `norm_type`-norm are rescaled in place
    /// to this norm before use (PyTorch's `max_norm`).
    pub max_norm: Option<f64>,
    /// The p of the `max_norm` norm (2).
    pub norm_type: f64,
    /// Each row's gradient divided by how often its id occurs in the batch.
    pub scale_grad_by_freq: bool,
}

impl Embedding {
    /// `nn.Embedding` with PyTorch's initialisation (`N(0, 1)`, the padding row zeroed).
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        padding_idx: Option<usize>,
    ) -> Embedding {
        let weight = initial_table("Embedding", num_embeddings, embedding_dim, padding_idx);
        Embedding::from_pretrained(&weight, false, padding_idx)
    }

    /// `nn.Embedding.from_pretrained(embeddings, freeze, padding_idx)`: the
    /// table is `embeddings` (shared, not copied; its padding row is left as
    /// given), trainable unless `freeze`.
    ///
    /// ```
    /// use tapir_runtime::{nn::{Embedding, Forward}, Tensor};
    /// let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let e = Embedding::from_pretrained(&w, true, None);
    /// assert!(!e.weight.requires_grad());
    /// assert_eq!(e.forward(&Tensor::from_vec(vec![1i64], &[1])).to_vec::<f32>(), [3.0, 4.0]);
    /// ```
    pub fn from_pretrained(
        embeddings: &Tensor,
        freeze: bool,
        padding_idx: Option<usize>,
    ) -> Embedding {
        let (num_embeddings, embedding_dim) = table_shape("Embedding.from_pretrained", embeddings);
        check_padding_idx("Embedding", padding_idx, num_embeddings);
        Embedding {
            weight: embeddings.detach().requires_grad_(!freeze),
            num_embeddings,
            embedding_dim,
            padding_idx,
            max_norm: None,
            norm_type: 2.0,
            scale_grad_by_freq: false,
        }
    }

    /// Renormalises looked-up rows whose norm exceeds `max_norm` (in place).
    pub fn max_norm(mut self, max_norm: f64) -> Embedding {
        self.max_norm = Some(max_norm);
        self
    }

    /// The p of the `max_norm` norm.
    pub fn norm_type(mut self, p: f64) -> Embedding {
        self.norm_type = p;
        self
    }

    /// Divides each row's gradient by its id's count in the batch
    /// (`scale_grad_by_freq=True`).
    pub fn scale_grad_by_freq(mut self, on: bool) -> Embedding {
        self.scale_grad_by_freq = on;
        self
    }
}

impl Forward for Embedding {
    fn forward(&self, ids: &Tensor) -> Tensor {
        check_ids("Embedding", ids);
        if let Some(max_norm) = self.max_norm {
            renorm_rows_(&self.weight, ids, max_norm, self.norm_type);
        }
        let out = lookup(&self.weight, ids, self.scale_grad_by_freq.then_some(ids));
        match self.padding_idx {
            None => out,
            Some(p) => {
                // Same values; the padding positions take theirs from a detached copy.
                let pad = ids.eq_scalar(p as f64).unsqueeze(-1);
                Tensor::where_(&pad, &self.weight.detach().embedding(ids), &out)
            }
        }
    }
}

impl Module for Embedding {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("weight", &self.weight, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("weight", &mut self.weight, TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        let mut s = format!("Embedding({}, {}", self.num_embeddings, self.embedding_dim);
        if let Some(p) = self.padding_idx {
            s += &format!(", padding_idx={p}");
        }
        s += &norm_repr(self.max_norm, self.norm_type);
        if self.scale_grad_by_freq {
            s += ", scale_grad_by_freq=True";
        }
        s + ")"
    }
}

/// How [`EmbeddingBag`] reduces a bag (`mode=` in PyTorch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BagMode {
    /// The (optionally per-sample weighted) sum of the bag's rows.
    Sum,
    /// The mean of the bag's rows (PyTorch's default).
    #[default]
    Mean,
    /// The elementwise maximum of the bag's rows.
    Max,
}

impl BagMode {
    fn name(self) -> &'static str {
        match self {
            BagMode::Sum => "sum",
            BagMode::Mean => "mean",
            BagMode::Max => "max",
        }
    }
}

/// `nn.EmbeddingBag`: each bag of ids becomes one vector, the sum, mean or
/// max of its rows. Bags are the rows of a 2-D `[bags, n]` input, or runs of
/// a 1-D input starting at `offsets`. Ids equal to `padding_idx` are left out
/// of every bag (and out of a mean's count); an empty bag gives zeros.
///
/// ```
/// use tapir_runtime::{nn::{BagMode, EmbeddingBag}, Tensor};
/// let w = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
/// let bag = EmbeddingBag::from_pretrained(&w, true, BagMode::Sum, None);
/// let ids = Tensor::from_vec(vec![0i64, 1, 2, 2], &[4]);
/// let offsets = Tensor::from_vec(vec![0i64, 3], &[2]);
/// let y = bag.forward_bags(&ids, Some(&offsets), None);
/// assert_eq!(y.to_vec::<f32>(), [6.0, 9.0, 4.0, 5.0]);
/// assert_eq!(bag.to_string(), "EmbeddingBag(3, 2, mode='sum')");
/// ```
pub struct EmbeddingBag {
    /// `[num_embeddings, embedding_dim]`.
    pub weight: Tensor,
    /// Vocabulary size.
    pub num_embeddings: usize,
    /// Vector width.
    pub embedding_dim: usize,
    /// How a bag is reduced.
    pub mode: BagMode,
    /// An id left out of every bag; its row starts at zero.
    pub padding_idx: Option<usize>,
    /// Whether `offsets` carries a final entry marking the end of the last
    /// bag (the CSR layout), rather than one start per bag.
    pub include_last_offset: bool,
    /// As [`Embedding::max_norm`].
    pub max_norm: Option<f64>,
    /// The p of the `max_norm` norm (2).
    pub norm_type: f64,
    /// As [`Embedding::scale_grad_by_freq`] (sum and mean modes).
    pub scale_grad_by_freq: bool,
}

impl EmbeddingBag {
    /// `nn.EmbeddingBag(num_embeddings, embedding_dim, mode=, padding_idx=)`
    /// with PyTorch's initialisation (`N(0, 1)`, the padding row zeroed).
    pub fn new(
        num_embeddings: usize,
        embedding_dim: usize,
        mode: BagMode,
        padding_idx: Option<usize>,
    ) -> EmbeddingBag {
        let weight = initial_table("EmbeddingBag", num_embeddings, embedding_dim, padding_idx);
        EmbeddingBag::from_pretrained(&weight, false, mode, padding_idx)
    }

    /// `nn.EmbeddingBag.from_pretrained(embeddings, freeze, mode=, padding_idx=)`.
    pub fn from_pretrained(
        embeddings: &Tensor,
        freeze: bool,
        mode: BagMode,
        padding_idx: Option<usize>,
    ) -> EmbeddingBag {
        let (num_embeddings, embedding_dim) =
            table_shape("EmbeddingBag.from_pretrained", embeddings);
        check_padding_idx("EmbeddingBag", padding_idx, num_embeddings);
        EmbeddingBag {
            weight: embeddings.detach().requires_grad_(!freeze),
            num_embeddings,
            embedding_dim,
            mode,
            padding_idx,
            include_last_offset: false,
            max_norm: None,
            norm_type: 2.0,
            scale_grad_by_freq: false,
        }
    }

    /// Offsets end with the total length (`include_last_offset=True`).
    pub fn include_last_offset(mut self, on: bool) -> EmbeddingBag {
        self.include_last_offset = on;
        self
    }

    /// As [`Embedding::max_norm`].
    pub fn max_norm(mut self, max_norm: f64) -> EmbeddingBag {
        self.max_norm = Some(max_norm);
        self
    }

    /// The p of the `max_norm` norm.
    pub fn norm_type(mut self, p: f64) -> EmbeddingBag {
        self.norm_type = p;
        self
    }

    /// As [`Embedding::scale_grad_by_freq`].
    pub fn scale_grad_by_freq(mut self, on: bool) -> EmbeddingBag {
        self.scale_grad_by_freq = on;
        self
    }

    /// `bag(input, offsets, per_sample_weights)`: `[bags, embedding_dim]`.
    /// `input` is int64, 2-D without offsets or 1-D with them;
    /// `per_sample_weights` (mode `Sum` only) has `input`'s shape.
    #[track_caller]
    pub fn forward_bags(
        &self,
        input: &Tensor,
        offsets: Option<&Tensor>,
        per_sample_weights: Option<&Tensor>,
    ) -> Tensor {
        if let Some(max_norm) = self.max_norm {
            check_ids("EmbeddingBag", input);
            renorm_rows_(&self.weight, input, max_norm, self.norm_type);
        }
        embedding_bag(
            input,
            &self.weight,
            &BagOptions {
                offsets,
                mode: self.mode,
                per_sample_weights,
                padding_idx: self.padding_idx,
                include_last_offset: self.include_last_offset,
                scale_grad_by_freq: self.scale_grad_by_freq,
            },
        )
    }
}

impl Forward for EmbeddingBag {
    /// A 2-D `[bags, n]` input, one bag per row.
    fn forward(&self, input: &Tensor) -> Tensor {
        self.forward_bags(input, None, None)
    }
}

impl Module for EmbeddingBag {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f("weight", &self.weight, TensorKind::Parameter);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        f("weight", &mut self.weight, TensorKind::Parameter);
    }
    fn repr(&self) -> String {
        let mut s = format!(
            "EmbeddingBag({}, {}",
            self.num_embeddings, self.embedding_dim
        );
        s += &norm_repr(self.max_norm, self.norm_type);
        if self.scale_grad_by_freq {
            s += ", scale_grad_by_freq=True";
        }
        s += &format!(", mode='{}'", self.mode.name());
        if let Some(p) = self.padding_idx {
            s += &format!(", padding_idx={p}");
        }
        s + ")"
    }
}

crate::display_as_repr!(Embedding, EmbeddingBag);

/// The options of [`embedding_bag`] beyond input and weight, as
/// `F.embedding_bag`'s keywords.
#[derive(Clone, Copy, Default)]
pub struct BagOptions<'a> {
    /// Start of each bag in a 1-D input (None for a 2-D input).
    pub offsets: Option<&'a Tensor>,
    /// How a bag is reduced.
    pub mode: BagMode,
    /// A weight per id (mode `Sum` only), `input`'s shape.
    pub per_sample_weights: Option<&'a Tensor>,
    /// An id left out of every bag.
    pub padding_idx: Option<usize>,
    /// Whether `offsets` ends with the total length.
    pub include_last_offset: bool,
    /// Each row's gradient divided by its id's count in `input` (sum, mean).
    pub scale_grad_by_freq: bool,
}

/// `F.embedding_bag(input, weight, offsets, mode=, per_sample_weights=,
/// include_last_offset=, padding_idx=)`: `[bags, embedding_dim]`.
///
/// ```
/// use tapir_runtime::{nn::{BagMode, BagOptions, embedding_bag}, Tensor};
/// let w = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
/// let ids = Tensor::from_vec(vec![0i64, 2, 1, 1], &[2, 2]);
/// let y = embedding_bag(&ids, &w, &BagOptions { mode: BagMode::Max, ..Default::default() });
/// assert_eq!(y.to_vec::<f32>(), [4.0, 5.0, 2.0, 3.0]);
/// ```
#[track_caller]
pub fn embedding_bag(input: &Tensor, weight: &Tensor, opts: &BagOptions) -> Tensor {
    check_ids("embedding_bag", input);
    let (num, dim) = table_shape("embedding_bag", weight);
    check_padding_idx("embedding_bag", opts.padding_idx, num);
    assert!(
        !(opts.scale_grad_by_freq && opts.mode == BagMode::Max),
        "embedding_bag: mode 'max' does not support scale_grad_by_freq"
    );
    if let Some(w) = opts.per_sample_weights {
        assert!(
            opts.mode == BagMode::Sum,
            "embedding_bag: per_sample_weights is only supported for mode 'sum', got mode '{}'",
            opts.mode.name()
        );
        assert!(
            w.shape() == input.shape() && w.dtype().is_float(),
            "embedding_bag: per_sample_weights must be floating point with input's shape {:?}, got {} {:?}",
            input.shape(),
            w.dtype(),
            w.shape()
        );
    }
    let (ids, weights, filled) = match (input.ndim(), opts.offsets) {
        (2, None) => (input.clone(), opts.per_sample_weights.cloned(), None),
        (1, Some(offsets)) => {
            let grid = BagGrid::new(input.numel(), offsets, opts.include_last_offset);
            let shape = [grid.bags, grid.longest];
            let on = |t: Tensor| {
                t.to(input.device())
                    .unwrap_or_else(|e| panic!("embedding_bag: {e}"))
            };
            let positions = on(Tensor::from_vec(grid.positions, &shape));
            let gather = |t: &Tensor| {
                t.index_select(0, &positions.flatten_all())
                    .reshape(&[shape[0] as isize, shape[1] as isize])
            };
            let filled = on(Tensor::from_vec(grid.filled, &shape));
            (
                gather(input),
                opts.per_sample_weights.map(gather),
                Some(filled),
            )
        }
        (2, Some(_)) => panic!(
            "embedding_bag: offsets must be None for a 2-D input (each row is a bag), got input {:?}",
            input.shape()
        ),
        _ => panic!(
            "embedding_bag: input must be 2-D, or 1-D with offsets, got {:?} (offsets {})",
            input.shape(),
            if opts.offsets.is_some() {
                "given"
            } else {
                "None"
            }
        ),
    };
    if ids.size(1) == 0 {
        return Tensor::zeros_on(&[ids.size(0), dim], weight.dtype(), weight.device());
    }
    let padding = opts.padding_idx.map(|p| ids.ne_scalar(p as f64));
    let keep = match (filled, padding) {
        (Some(f), Some(p)) => Some(f.logical_and(&p)),
        (f, p) => f.or(p),
    };
    let rows = lookup(weight, &ids, opts.scale_grad_by_freq.then_some(input));
    match keep {
        Some(keep) => reduce_bags(&rows, &keep.unsqueeze(-1), weights, opts.mode),
        None => reduce_full_bags(&rows, weights, opts.mode),
    }
}

/// Reduces `rows` `[bags, n, dim]` over `n` when every id counts.
fn reduce_full_bags(rows: &Tensor, weights: Option<Tensor>, mode: BagMode) -> Tensor {
    match (mode, weights) {
        (BagMode::Sum, Some(w)) => (rows * &w.unsqueeze(-1)).sum_dim(1, false),
        (BagMode::Sum, None) => rows.sum_dim(1, false),
        (BagMode::Mean, _) => rows.mean_dim(1, false),
        (BagMode::Max, _) => rows.amax_dim(1, false),
    }
}

/// Reduces `rows` `[bags, n, dim]` over `n`, counting only `keep` `[bags, n, 1]`.
fn reduce_bags(rows: &Tensor, keep: &Tensor, weights: Option<Tensor>, mode: BagMode) -> Tensor {
    let keep_f = keep.to_dtype(rows.dtype());
    match mode {
        BagMode::Sum => {
            let w = match weights {
                Some(w) => &keep_f * &w.unsqueeze(-1),
                None => keep_f,
            };
            (rows * &w).sum_dim(1, false)
        }
        BagMode::Mean => {
            let count = keep_f.sum_dim(1, false).clamp_min(1.0);
            &(rows * &keep_f).sum_dim(1, false) / &count
        }
        BagMode::Max => {
            let best = rows
                .masked_fill(&keep.logical_not(), f64::NEG_INFINITY)
                .amax_dim(1, false);
            // An empty bag's max is -inf; PyTorch gives it zeros.
            best.masked_fill(&keep.any_dim(1, false).logical_not(), 0.0)
        }
    }
}

/// Ragged bags laid out as a `[bags, longest]` grid of input positions.
struct BagGrid {
    bags: usize,
    longest: usize,
    /// Input position per cell (0 in unfilled cells, masked by `filled`).
    positions: Vec<i64>,
    filled: Vec<bool>,
}

impl BagGrid {
    #[track_caller]
    fn new(len: usize, offsets: &Tensor, include_last_offset: bool) -> BagGrid {
        assert!(
            offsets.ndim() == 1 && offsets.dtype() == DType::I64,
            "embedding_bag: offsets must be a 1-D int64 tensor, got {} {:?}",
            offsets.dtype(),
            offsets.shape()
        );
        let starts = offsets.to_vec::<i64>();
        if let Some(&first) = starts.first() {
            assert!(
                first == 0,
                "embedding_bag: offsets[0] must be 0 (the first bag starts the input), got {first}"
            );
        }
        for w in starts.windows(2) {
            assert!(
                w[0] <= w[1],
                "embedding_bag: offsets must be non-decreasing, got {} before {}",
                w[0],
                w[1]
            );
        }
        if let Some(&last) = starts.last() {
            assert!(
                last as usize <= len,
                "embedding_bag: offsets[-1] = {last} is past the input's length {len}"
            );
        }
        let bounds: Vec<(usize, usize)> = if include_last_offset {
            starts
                .windows(2)
                .map(|w| (w[0] as usize, w[1] as usize))
                .collect()
        } else {
            let ends = starts.iter().skip(1).map(|&e| e as usize).chain([len]);
            starts.iter().map(|&s| s as usize).zip(ends).collect()
        };
        let longest = bounds.iter().map(|(s, e)| e - s).max().unwrap_or(0);
        let mut positions = Vec::with_capacity(bounds.len() * longest);
        let mut filled = Vec::with_capacity(bounds.len() * longest);
        for &(s, e) in &bounds {
            for i in 0..longest {
                filled.push(s + i < e);
                positions.push(if s + i < e { (s + i) as i64 } else { 0 });
            }
        }
        BagGrid {
            bags: bounds.len(),
            longest,
            positions,
            filled,
        }
    }
}

/// `weight`'s rows for `ids`. With `freq_of`, each row's gradient is
/// divided by how often its id occurs there (the values are unchanged:
/// the scaled rows join as a zero-valued term that carries the gradient).
fn lookup(weight: &Tensor, ids: &Tensor, freq_of: Option<&Tensor>) -> Tensor {
    let rows = weight.embedding(ids);
    let Some(counted) = freq_of else {
        return rows;
    };
    let (dtype, device) = (weight.dtype(), weight.device());
    let counted = counted.flatten_all();
    let counts = Tensor::zeros_on(&[weight.size(0)], dtype, device).scatter_add(
        0,
        &counted,
        &Tensor::ones_on(counted.shape(), dtype, device),
    );
    let mut shape: Vec<isize> = ids.shape().iter().map(|&d| d as isize).collect();
    shape.push(1);
    let scale = counts
        .index_select(0, &ids.flatten_all())
        .powf(-1.0)
        .reshape(&shape);
    let scaled = &rows * &scale;
    &rows.detach() + &(&scaled - &scaled.detach())
}

/// Rescales, in place and outside autograd, every row of `weight` that `ids`
/// looks up whose `p`-norm exceeds `max_norm`, to `max_norm / (norm + 1e-7)`
/// times itself (PyTorch's `embedding_renorm_`).
fn renorm_rows_(weight: &Tensor, ids: &Tensor, max_norm: f64, p: f64) {
    crate::no_grad(|| {
        let num = weight.size(0);
        let ids = ids.flatten_all();
        let looked_up = Tensor::zeros_on(&[num], weight.dtype(), weight.device())
            .scatter_add(
                0,
                &ids,
                &Tensor::ones_on(ids.shape(), weight.dtype(), ids.device()),
            )
            .gt_scalar(0.0);
        let norms = weight.norm_dims(p, &[1], false);
        let over = looked_up.logical_and(&norms.gt_scalar(max_norm));
        let scale = Tensor::where_(
            &over,
            &(&Tensor::full_like(&norms, max_norm) / &(&norms + 1e-7)),
            &Tensor::ones_like(&norms),
        );
        weight.mul_(&scale.unsqueeze(1));
    });
}

/// A fresh `N(0, 1)` table with the padding row zeroed (`reset_parameters`).
#[track_caller]
fn initial_table(op: &str, num: usize, dim: usize, padding_idx: Option<usize>) -> Tensor {
    check_padding_idx(op, padding_idx, num);
    let weight = Tensor::zeros(&[num, dim]);
    init::normal_(&weight, 0.0, 1.0);
    if let Some(p) = padding_idx {
        crate::no_grad(|| {
            weight.select(0, p as isize).zero_();
        });
    }
    weight
}

#[track_caller]
fn check_ids(op: &str, ids: &Tensor) {
    assert!(
        ids.dtype() == DType::I64,
        "{op}: ids must be int64, got {} {:?}",
        ids.dtype(),
        ids.shape()
    );
}

#[track_caller]
fn check_padding_idx(op: &str, padding_idx: Option<usize>, num_embeddings: usize) {
    if let Some(p) = padding_idx {
        assert!(
            p < num_embeddings,
            "{op}: padding_idx {p} must be below num_embeddings {num_embeddings}"
        );
    }
}

#[track_caller]
fn table_shape(op: &str, weight: &Tensor) -> (usize, usize) {
    assert!(
        weight.ndim() == 2 && weight.dtype().is_float(),
        "{op}: the table must be a 2-D floating-point tensor, got {} {:?}",
        weight.dtype(),
        weight.shape()
    );
    (weight.size(0), weight.size(1))
}

fn norm_repr(max_norm: Option<f64>, norm_type: f64) -> String {
    let mut s = String::new();
    if let Some(m) = max_norm {
        s += &format!(", max_norm={}", py_float(m));
    }
    if norm_type != 2.0 {
        s += &format!(", norm_type={}", py_float(norm_type));
    }
    s
}
