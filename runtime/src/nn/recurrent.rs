//! `nn.RNN`, `nn.GRU` and `nn.LSTM`: stacked, optionally bidirectional
//! recurrent layers written with plain ops (one matmul for the inputs of a whole
//! sequence, then one small matmul and the gate arithmetic per step), so
//! autograd and every device come for free.

use super::init;
use super::layers::dropout;
use super::linear::linear;
use super::module::{Module, TensorKind, TrainingFlag};
use super::packed::PackedSequence;
use crate::Tensor;

/// The options PyTorch's recurrent layers share (and its defaults:
/// one layer, biases, `[L, N, H_in]` inputs, no dropout, one direction).
///
/// ```
/// use tapir_runtime::nn::RnnOptions;
/// let o = RnnOptions { num_layers: 2, batch_first: true, ..Default::default() };
/// assert!(o.bias && !o.bidirectional && o.dropout == 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RnnOptions {
    /// Stacked layers; each after the first reads the one below's output.
    pub num_layers: usize,
    /// Whether the layers have `bias_ih` / `bias_hh`.
    pub bias: bool,
    /// Inputs and outputs are `[N, L, ..]` rather than `[L, N, ..]`.
    pub batch_first: bool,
    /// Dropout on the outputs of every layer but the last, in training.
    pub dropout: f64,
    /// A second pass over the sequence in reverse, concatenated.
    pub bidirectional: bool,
    /// LSTM only: project each step's hidden state to this width with a
    /// `weight_hr` (0: no projection), below `hidden_size`.
    pub proj_size: usize,
}

impl Default for RnnOptions {
    fn default() -> Self {
        RnnOptions {
            num_layers: 1,
            bias: true,
            batch_first: false,
            dropout: 0.0,
            bidirectional: false,
            proj_size: 0,
        }
    }
}

/// The recurrence of a layer or cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `h' = act(W_ih x + b_ih + W_hh h + b_hh)`, tanh or (`relu`) ReLU.
    Rnn { relu: bool },
    /// Gates r, z, n.
    Gru,
    /// Gates i, f, g, o, and a cell state.
    Lstm,
}

impl Kind {
    fn gates(self) -> usize {
        match self {
            Kind::Rnn { .. } => 1,
            Kind::Gru => 3,
            Kind::Lstm => 4,
        }
    }
}

/// One layer in one direction: `weight_ih[_l{k}[_reverse]]` and friends.
pub(super) struct Cell {
    suffix: String,
    pub(super) weight_ih: Tensor,
    pub(super) weight_hh: Tensor,
    pub(super) bias_ih: Option<Tensor>,
    pub(super) bias_hh: Option<Tensor>,
    /// An LSTM's projection `[proj, hidden]` of each step's hidden state.
    pub(super) weight_hr: Option<Tensor>,
}

impl Cell {
    /// PyTorch's reset_parameters: every tensor U(-1/√H, 1/√H). `suffix`
    /// names it in a stack (`l0`, `l1_reverse`); a lone cell has none.
    /// `proj` (0: none) is an LSTM's projected hidden width.
    pub(super) fn new(
        kind: Kind,
        (width, hidden, proj): (usize, usize, usize),
        bias: bool,
        suffix: String,
    ) -> Cell {
        let bound = 1.0 / (hidden as f64).sqrt();
        let param = |shape: &[usize]| {
            let t = Tensor::zeros(shape);
            init::uniform_(&t, -bound, bound);
            t.requires_grad_(true)
        };
        let rows = kind.gates() * hidden;
        Cell {
            suffix,
            weight_ih: param(&[rows, width]),
            weight_hh: param(&[rows, if proj > 0 { proj } else { hidden }]),
            bias_ih: bias.then(|| param(&[rows])),
            bias_hh: bias.then(|| param(&[rows])),
            weight_hr: (proj > 0).then(|| param(&[proj, hidden])),
        }
    }

    fn name(&self, base: &str) -> String {
        match self.suffix.is_empty() {
            true => base.to_string(),
            false => format!("{base}_{}", self.suffix),
        }
    }

    pub(super) fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        f(
            &self.name("weight_ih"),
            &self.weight_ih,
            TensorKind::Parameter,
        );
        f(
            &self.name("weight_hh"),
            &self.weight_hh,
            TensorKind::Parameter,
        );
        if let (Some(bi), Some(bh)) = (&self.bias_ih, &self.bias_hh) {
            f(&self.name("bias_ih"), bi, TensorKind::Parameter);
            f(&self.name("bias_hh"), bh, TensorKind::Parameter);
        }
        if let Some(w) = &self.weight_hr {
            f(&self.name("weight_hr"), w, TensorKind::Parameter);
        }
    }

    pub(super) fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        let names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"].map(|b| self.name(b));
        f(&names[0], &mut self.weight_ih, TensorKind::Parameter);
        f(&names[1], &mut self.weight_hh, TensorKind::Parameter);
        if let (Some(bi), Some(bh)) = (&mut self.bias_ih, &mut self.bias_hh) {
            f(&names[2], bi, TensorKind::Parameter);
            f(&names[3], bh, TensorKind::Parameter);
        }
        let hr = self.name("weight_hr");
        if let Some(w) = &mut self.weight_hr {
            f(&hr, w, TensorKind::Parameter);
        }
    }

    /// One step from the input half of the gates, `gi` (`W_ih x + b_ih`).
    pub(super) fn step(&self, kind: Kind, gi: &Tensor, carry: Carry) -> Carry {
        let gh = linear(&carry.0, &self.weight_hh, self.bias_hh.as_ref());
        let (h, c) = gate_step(kind, gi, &gh, carry);
        match &self.weight_hr {
            Some(w) => (linear(&h, w, None), c),
            None => (h, c),
        }
    }
}

/// PyTorch's gate equations (RNN: act; GRU: r, z, n; LSTM: i, f, g, o).
fn gate_step(kind: Kind, gi: &Tensor, gh: &Tensor, (h, c): Carry) -> Carry {
    match kind {
        Kind::Rnn { relu } => {
            let pre = gi + gh;
            (if relu { pre.relu() } else { pre.tanh() }, None)
        }
        Kind::Gru => {
            let (i, hh) = (gi.chunk(3, -1), gh.chunk(3, -1));
            let r = (&i[0] + &hh[0]).sigmoid();
            let z = (&i[1] + &hh[1]).sigmoid();
            let n = (&i[2] + &(&r * &hh[2])).tanh();
            // (1 - z) * n + z * h
            let h = &n + &(&z * &(&h - &n));
            (h, None)
        }
        Kind::Lstm => {
            let g = (gi + gh).chunk(4, -1);
            let (i, f, cand, o) = (g[0].sigmoid(), g[1].sigmoid(), g[2].tanh(), g[3].sigmoid());
            let c = &(&f * &c.expect("an LSTM step carries c")) + &(&i * &cand);
            let h = &o * &c.tanh();
            (h, Some(c))
        }
    }
}

/// The stack of cells the three layers share.
struct Stack {
    name: &'static str,
    kind: Kind,
    input_size: usize,
    hidden_size: usize,
    opts: RnnOptions,
    cells: Vec<Cell>,
    training: TrainingFlag,
}

/// The recurrent state one step carries: `h`, and `c` for an LSTM.
pub(super) type Carry = (Tensor, Option<Tensor>);

impl Stack {
    fn new(
        name: &'static str,
        kind: Kind,
        input_size: usize,
        hidden_size: usize,
        opts: RnnOptions,
    ) -> Stack {
        assert!(
            hidden_size > 0 && opts.num_layers > 0,
            "{name}: hidden_size ({hidden_size}) and num_layers ({}) must be positive",
            opts.num_layers
        );
        assert!(
            (0.0..=1.0).contains(&opts.dropout),
            "{name}: dropout should be a number in range [0, 1], got {}",
            opts.dropout
        );
        let proj = opts.proj_size;
        assert!(
            proj == 0 || kind == Kind::Lstm,
            "{name}: proj_size is only supported for LSTM, got {proj}"
        );
        assert!(
            proj < hidden_size,
            "{name}: proj_size ({proj}) must be smaller than hidden_size ({hidden_size})"
        );
        let out = if proj > 0 { proj } else { hidden_size };
        let dirs = if opts.bidirectional { 2 } else { 1 };
        let mut cells = vec![];
        for layer in 0..opts.num_layers {
            let width = if layer == 0 { input_size } else { out * dirs };
            for dir in 0..dirs {
                let rev = if dir == 1 { "_reverse" } else { "" };
                let suffix = format!("l{layer}{rev}");
                let sizes = (width, hidden_size, proj);
                cells.push(Cell::new(kind, sizes, opts.bias, suffix));
            }
        }
        Stack {
            name,
            kind,
            input_size,
            hidden_size,
            opts,
            cells,
            training: TrainingFlag::default(),
        }
    }

    fn dirs(&self) -> usize {
        if self.opts.bidirectional { 2 } else { 1 }
    }

    /// The width of each step's hidden state: the projection's, if any.
    fn out_size(&self) -> usize {
        match self.opts.proj_size {
            0 => self.hidden_size,
            p => p,
        }
    }

    /// Checks `x` and returns it as `[L, N, H_in]` with whether it was batched.
    #[track_caller]
    fn sequence_first(&self, x: &Tensor) -> (Tensor, bool) {
        let (name, h_in) = (self.name, self.input_size);
        assert!(
            (x.ndim() == 3 || x.ndim() == 2) && x.size(-1) == h_in,
            "{name}: expected input [{}, {h_in}] or [L, {h_in}], got {:?}",
            if self.opts.batch_first {
                "N, L"
            } else {
                "L, N"
            },
            x.shape()
        );
        match (x.ndim(), self.opts.batch_first) {
            (2, _) => (x.unsqueeze(1), false),
            (_, true) => (x.transpose(0, 1), true),
            _ => (x.clone(), true),
        }
    }

    /// Checks an initial state `[layers * dirs, N, H]` (or `[layers * dirs,
    /// H]` unbatched) and returns it batched.
    #[track_caller]
    fn initial(&self, what: &str, t: Option<&Tensor>, n: usize, batched: bool) -> Option<Tensor> {
        // The cell state keeps the hidden width; h may be projected.
        let h = if what == "c0" {
            self.hidden_size
        } else {
            self.out_size()
        };
        let name = self.name;
        let ld = self.opts.num_layers * self.dirs();
        let t = t?;
        let want: Vec<usize> = if batched { vec![ld, n, h] } else { vec![ld, h] };
        assert!(
            t.shape() == want.as_slice(),
            "{name}: expected {what} of shape {want:?}, got {:?}",
            t.shape()
        );
        Some(if batched { t.clone() } else { t.unsqueeze(1) })
    }

    /// Runs every layer (from zero states where `h0` / `c0` are `None`); returns the output `[L, N, dirs * H]` and the final
    /// states in PyTorch's order (layer-major, forward before reverse).
    /// With `masks` (one `[N, 1]` per step), a sequence's state holds where
    /// its mask is false: past its end in a packed batch.
    fn run(
        &self,
        x: &Tensor,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
        masks: Option<&[Tensor]>,
    ) -> (Tensor, Vec<Carry>) {
        let mut input = x.clone();
        let mut finals = vec![];
        let dirs = self.dirs();
        let (h0, c0) = (h0.map(|h| h.unbind(0)), c0.map(|c| c.unbind(0)));
        for layer in 0..self.opts.num_layers {
            let mut outs = vec![];
            for dir in 0..dirs {
                let i = layer * dirs + dir;
                let start = h0
                    .as_ref()
                    .map(|h| (h[i].clone(), c0.as_ref().map(|c| c[i].clone())));
                let (out, last) = self.direction(&self.cells[i], &input, start, dir == 1, masks);
                outs.push(out);
                finals.push(last);
            }
            let refs: Vec<&Tensor> = outs.iter().collect();
            input = Tensor::cat(&refs, -1);
            if layer + 1 < self.opts.num_layers {
                input = dropout(&input, self.opts.dropout, self.training.get());
            }
        }
        (input, finals)
    }

    /// One cell over the whole sequence (backwards when `reverse`), from
    /// `start` or zeros.
    fn direction(
        &self,
        cell: &Cell,
        x: &Tensor,
        start: Option<Carry>,
        reverse: bool,
        masks: Option<&[Tensor]>,
    ) -> (Tensor, Carry) {
        // The input half of every gate for every step, in one matmul, then
        // one view per step (one autograd node for all of them).
        let gi = linear(x, &cell.weight_ih, cell.bias_ih.as_ref()).unbind(0);
        // Zeros shaped from the gates, so an exported graph keeps the batch
        // size dynamic.
        let mut carry = start.unwrap_or_else(|| {
            let zeros = |width| Tensor::zeros_like(&gi[0].narrow(-1, 0, width));
            let c = (self.kind == Kind::Lstm).then(|| zeros(self.hidden_size));
            (zeros(self.out_size()), c)
        });
        let len = x.size(0);
        let mut outs = vec![None; len];
        for step in 0..len {
            let t = if reverse { len - 1 - step } else { step };
            let next = cell.step(self.kind, &gi[t], carry.clone());
            carry = match masks {
                None => next,
                Some(m) => {
                    let hold = |new: &Tensor, old: &Tensor| Tensor::where_(&m[t], new, old);
                    let c = next
                        .1
                        .as_ref()
                        .zip(carry.1.as_ref())
                        .map(|(n, o)| hold(n, o));
                    (hold(&next.0, &carry.0), c)
                }
            };
            outs[t] = Some(carry.0.clone());
        }
        let outs: Vec<Tensor> = outs.into_iter().flatten().collect();
        let refs: Vec<&Tensor> = outs.iter().collect();
        (Tensor::stack(&refs, 0), carry)
    }

    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        self.cells.iter().for_each(|c| c.visit(f));
    }

    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        self.cells.iter_mut().for_each(|c| c.visit_mut(f));
    }

    fn repr(&self) -> String {
        let o = &self.opts;
        let mut s = format!("{}({}, {}", self.name, self.input_size, self.hidden_size);
        if o.proj_size != 0 {
            s.push_str(&format!(", proj_size={}", o.proj_size));
        }
        if o.num_layers != 1 {
            s.push_str(&format!(", num_layers={}", o.num_layers));
        }
        if !o.bias {
            s.push_str(", bias=False");
        }
        if o.batch_first {
            s.push_str(", batch_first=True");
        }
        if o.dropout != 0.0 {
            s.push_str(&format!(", dropout={}", o.dropout));
        }
        if o.bidirectional {
            s.push_str(", bidirectional=True");
        }
        s + ")"
    }

    /// The forward of a layer with no cell state (RNN, GRU).
    #[track_caller]
    fn forward_h(&self, x: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
        let (seq, batched) = self.sequence_first(x);
        let h0 = self.initial("h0", h0, seq.size(1), batched);
        let (out, finals) = self.run(&seq, h0.as_ref(), None, None);
        let hs = finals.into_iter().map(|(h, _)| h).collect();
        self.finish(out, hs, batched)
    }

    /// Runs a packed batch (states `[layers * dirs, B, H]` in the caller's
    /// order): the packed output and the final states, in the caller's
    /// order, stacked (h, then c for an LSTM).
    #[track_caller]
    fn run_packed(
        &self,
        packed: &PackedSequence,
        h0: Option<&Tensor>,
        c0: Option<&Tensor>,
    ) -> (PackedSequence, Tensor, Option<Tensor>) {
        let (name, h_in) = (self.name, self.input_size);
        assert!(
            packed.data.ndim() == 2 && packed.data.size(-1) == h_in,
            "{name}: expected packed data [sum of lengths, {h_in}], got {:?}",
            packed.data.shape()
        );
        let n = packed.batch();
        let sort = |t: Option<Tensor>| t.map(|t| packed.sort_state(&t));
        let h0 = sort(self.initial("h0", h0, n, true));
        let c0 = sort(self.initial("c0", c0, n, true));
        let masks = packed.step_masks();
        let x = packed.padded_sorted(0.0);
        let (out, finals) = self.run(&x, h0.as_ref(), c0.as_ref(), Some(&masks));
        let (hs, cs): (Vec<Tensor>, Vec<Option<Tensor>>) = finals.into_iter().unzip();
        let stacked =
            |ts: &[Tensor]| packed.unsort_state(&Tensor::stack(&ts.iter().collect::<Vec<_>>(), 0));
        let cs: Option<Vec<Tensor>> = cs.into_iter().collect();
        (packed.repack(&out), stacked(&hs), cs.map(|c| stacked(&c)))
    }

    /// Back to the caller's layout: `[N, L, ..]` when batch-first, no batch
    /// dim when the input had none; states `[layers * dirs, (N,) H]`.
    fn finish(&self, out: Tensor, states: Vec<Tensor>, batched: bool) -> (Tensor, Tensor) {
        let refs: Vec<&Tensor> = states.iter().collect();
        let state = Tensor::stack(&refs, 0);
        match (batched, self.opts.batch_first) {
            (false, _) => (out.squeeze_dim(1), state.squeeze_dim(1)),
            (true, true) => (out.transpose(0, 1), state),
            (true, false) => (out, state),
        }
    }
}

macro_rules! module_for_stack {
    ($($t:ident),*) => {$(
        impl Module for $t {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
                self.0.visit(f)
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
                self.0.visit_mut(f)
            }
            fn repr(&self) -> String {
                self.0.repr()
            }
            fn set_training(&self, on: bool) {
                self.0.training.set(on)
            }
            fn is_training(&self) -> bool {
                self.0.training.get()
            }
        }
        crate::display_as_repr!($t);
    )*};
}

/// `nn.RNN`: `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (or ReLU with
/// [`RNN::relu`]), stacked and bidirectional as [`GRU`], with PyTorch's
/// parameter names (`weight_ih_l0`, ..) and init.
///
/// ```
/// use tapir_runtime::{nn::{RNN, RnnOptions}, Tensor};
/// let rnn = RNN::new(4, 6, RnnOptions { num_layers: 2, ..Default::default() }).relu();
/// let (out, h_n) = rnn.forward(&Tensor::randn(&[5, 2, 4]), None);
/// assert_eq!((out.shape(), h_n.shape()), (&[5, 2, 6][..], &[2, 2, 6][..]));
/// assert!(out.min().item::<f32>() >= 0.0);
/// ```
pub struct RNN(Stack);

impl RNN {
    /// `nn.RNN(input_size, hidden_size, ..)` (tanh) with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, opts: RnnOptions) -> RNN {
        RNN(Stack::new(
            "RNN",
            Kind::Rnn { relu: false },
            input_size,
            hidden_size,
            opts,
        ))
    }

    /// `nonlinearity='relu'`.
    pub fn relu(mut self) -> RNN {
        self.0.kind = Kind::Rnn { relu: true };
        self
    }

    /// The options it was built with.
    pub fn options(&self) -> RnnOptions {
        self.0.opts
    }

    /// As [`GRU::forward`]: every step's output of the last layer and the
    /// final hidden state of every layer and direction.
    #[track_caller]
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
        self.0.forward_h(x, h0)
    }

    /// As [`GRU::forward_packed`].
    #[track_caller]
    pub fn forward_packed(
        &self,
        x: &PackedSequence,
        h0: Option<&Tensor>,
    ) -> (PackedSequence, Tensor) {
        let (out, h, _) = self.0.run_packed(x, h0, None);
        (out, h)
    }
}

/// `nn.GRU`: `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z` likewise,
/// `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, `h' = (1 - z) ⊙ n + z ⊙ h`,
/// with PyTorch's parameter names (`weight_ih_l0`, ..) and init.
///
/// ```
/// use tapir_runtime::{nn::{GRU, RnnOptions}, Tensor};
/// let gru = GRU::new(4, 6, RnnOptions { batch_first: true, ..Default::default() });
/// let (out, h_n) = gru.forward(&Tensor::randn(&[2, 5, 4]), None);
/// assert_eq!(out.shape(), &[2, 5, 6]);
/// assert_eq!(h_n.shape(), &[1, 2, 6]);
/// ```
pub struct GRU(Stack);

impl GRU {
    /// `nn.GRU(input_size, hidden_size, ..)` with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, opts: RnnOptions) -> GRU {
        GRU(Stack::new("GRU", Kind::Gru, input_size, hidden_size, opts))
    }

    /// The options it was built with.
    pub fn options(&self) -> RnnOptions {
        self.0.opts
    }

    /// The outputs of the last layer for every step, `[L, N, D * H]`
    /// (`[N, L, D * H]` batch-first), and the final hidden state of every
    /// layer and direction, `[num_layers * D, N, H]`; `h0` (same shape)
    /// defaults to zeros.
    #[track_caller]
    pub fn forward(&self, x: &Tensor, h0: Option<&Tensor>) -> (Tensor, Tensor) {
        self.0.forward_h(x, h0)
    }

    /// Over a [`PackedSequence`] (`nn.GRU` given one): the packed output
    /// and each sequence's final hidden state, `[num_layers * D, B, H]` in
    /// the caller's order, as if it had run alone.
    ///
    /// ```
    /// use tapir_runtime::{nn::{GRU, RnnOptions, pack_sequence}, Tensor};
    /// let gru = GRU::new(4, 6, RnnOptions::default());
    /// let batch = pack_sequence(&[Tensor::randn(&[2, 4]), Tensor::randn(&[5, 4])], false);
    /// let (out, h_n) = gru.forward_packed(&batch, None);
    /// assert_eq!((out.data.shape(), h_n.shape()), (&[7, 6][..], &[1, 2, 6][..]));
    /// ```
    #[track_caller]
    pub fn forward_packed(
        &self,
        x: &PackedSequence,
        h0: Option<&Tensor>,
    ) -> (PackedSequence, Tensor) {
        let (out, h, _) = self.0.run_packed(x, h0, None);
        (out, h)
    }
}

/// `nn.LSTM`: `i, f, o = σ(..)`, `g = tanh(..)` from `W_i* x + b_i* + W_h* h + b_h*`,
/// `c' = f ⊙ c + i ⊙ g`, `h' = o ⊙ tanh(c')`, with PyTorch's parameter
/// names (`weight_ih_l0`, ..), gate order (i, f, g, o) and init.
///
/// ```
/// use tapir_runtime::{nn::{LSTM, RnnOptions}, Tensor};
/// let lstm = LSTM::new(4, 6, RnnOptions { num_layers: 2, ..Default::default() });
/// let (out, (h_n, c_n)) = lstm.forward(&Tensor::randn(&[5, 2, 4]), None);
/// assert_eq!(out.shape(), &[5, 2, 6]);
/// assert_eq!((h_n.shape(), c_n.shape()), (&[2, 2, 6][..], &[2, 2, 6][..]));
/// ```
pub struct LSTM(Stack);

impl LSTM {
    /// `nn.LSTM(input_size, hidden_size, ..)` with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, opts: RnnOptions) -> LSTM {
        LSTM(Stack::new(
            "LSTM",
            Kind::Lstm,
            input_size,
            hidden_size,
            opts,
        ))
    }

    /// The options it was built with.
    pub fn options(&self) -> RnnOptions {
        self.0.opts
    }

    /// The outputs of the last layer for every step, `[L, N, D * H]`
    /// (`[N, L, D * H]` batch-first), and the final `(h_n, c_n)`, each
    /// `[num_layers * D, N, H]`; the initial `(h0, c0)` default to zeros.
    #[track_caller]
    pub fn forward(
        &self,
        x: &Tensor,
        state: Option<(&Tensor, &Tensor)>,
    ) -> (Tensor, (Tensor, Tensor)) {
        let (seq, batched) = self.0.sequence_first(x);
        let n = seq.size(1);
        let h0 = self.0.initial("h0", state.map(|s| s.0), n, batched);
        let c0 = self.0.initial("c0", state.map(|s| s.1), n, batched);
        let (out, finals) = self.0.run(&seq, h0.as_ref(), c0.as_ref(), None);
        let (hs, cs): (Vec<Tensor>, Vec<Tensor>) = finals
            .into_iter()
            .map(|(h, c)| (h, c.expect("an LSTM step carries c")))
            .unzip();
        let (out, h) = self.0.finish(out, hs, batched);
        let refs: Vec<&Tensor> = cs.iter().collect();
        let c = Tensor::stack(&refs, 0);
        let c = if batched { c } else { c.squeeze_dim(1) };
        (out, (h, c))
    }

    /// Over a [`PackedSequence`]: the packed output and each sequence's
    /// final `(h_n, c_n)`, `[num_layers * D, B, H]` in the caller's order.
    #[track_caller]
    pub fn forward_packed(
        &self,
        x: &PackedSequence,
        state: Option<(&Tensor, &Tensor)>,
    ) -> (PackedSequence, (Tensor, Tensor)) {
        let (out, h, c) = self.0.run_packed(x, state.map(|s| s.0), state.map(|s| s.1));
        (out, (h, c.expect("an LSTM step carries c")))
    }
}

module_for_stack!(RNN, GRU, LSTM);
