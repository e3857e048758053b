//! `nn.RNNCell`, `nn.GRUCell` and `nn.LSTMCell`: one step of the recurrent
//! layers, for loops the caller writes (a decoder feeding back its own
//! output). Same equations, names (`weight_ih`, ..) and init as the layers.

use super::linear::linear;
use super::module::{Module, TensorKind, py_bool};
use super::recurrent::{Carry, Cell, Kind};
use crate::Tensor;

/// The cell all three share: its parameters and sizes.
struct OneStep {
    name: &'static str,
    kind: Kind,
    input_size: usize,
    hidden_size: usize,
    cell: Cell,
}

impl OneStep {
    fn new(
        name: &'static str,
        kind: Kind,
        input_size: usize,
        hidden_size: usize,
        bias: bool,
    ) -> OneStep {
        assert!(
            hidden_size > 0,
            "{name}: hidden_size ({hidden_size}) must be positive"
        );
        OneStep {
            name,
            kind,
            input_size,
            hidden_size,
            cell: Cell::new(kind, (input_size, hidden_size, 0), bias, String::new()),
        }
    }

    /// Checks the input (`[N, input_size]` or `[input_size]`) and the
    /// states given (`[N, hidden_size]` or `[hidden_size]` alike); returns
    /// them batched and whether the input was.
    #[track_caller]
    fn batched(
        &self,
        x: &Tensor,
        states: [Option<&Tensor>; 2],
    ) -> (Tensor, [Option<Tensor>; 2], bool) {
        let (name, i, h) = (self.name, self.input_size, self.hidden_size);
        let batched = x.ndim() == 2;
        assert!(
            (batched || x.ndim() == 1) && x.size(-1) == i,
            "{name}: expected input [N, {i}] or [{i}], got {:?}",
            x.shape()
        );
        let x = if batched { x.clone() } else { x.unsqueeze(0) };
        let n = x.size(0);
        let state = |t: Option<&Tensor>| {
            t.map(|t| {
                let want: &[usize] = if batched { &[n, h] } else { &[h] };
                assert!(
                    t.shape() == want,
                    "{name}: expected a hidden state of shape {want:?} for input of shape {:?}, got {:?}",
                    if batched { vec![n, i] } else { vec![i] },
                    t.shape()
                );
                if batched { t.clone() } else { t.unsqueeze(0) }
            })
        };
        let states = states.map(state);
        (x, states, batched)
    }

    #[track_caller]
    fn step(&self, x: &Tensor, h: Option<&Tensor>, c: Option<&Tensor>) -> Carry {
        let (x, [h, c], batched) = self.batched(x, [h, c]);
        let gi = linear(&x, &self.cell.weight_ih, self.cell.bias_ih.as_ref());
        // A missing state is zeros shaped from the input's gates, so an
        // exported graph keeps the batch size dynamic.
        let zeros = || Tensor::zeros_like(&gi.narrow(-1, 0, self.hidden_size));
        let h = h.unwrap_or_else(zeros);
        let c = (self.kind == Kind::Lstm).then(|| c.unwrap_or_else(zeros));
        let (h, c) = self.cell.step(self.kind, &gi, (h, c));
        match batched {
            true => (h, c),
            false => (h.squeeze_dim(0), c.map(|c| c.squeeze_dim(0))),
        }
    }

    fn repr(&self) -> String {
        let mut s = format!("{}({}, {}", self.name, self.input_size, self.hidden_size);
        if self.cell.bias_ih.is_none() {
            s.push_str(&format!(", bias={}", py_bool(false)));
        }
        if self.kind == (Kind::Rnn { relu: true }) {
            s.push_str(", nonlinearity=relu");
        }
        s + ")"
    }
}

/// `nn.RNNCell`: `h' = tanh(W_ih x + b_ih + W_hh h + b_hh)` (or ReLU with
/// [`RNNCell::relu`]).
///
/// ```
/// use tapir_runtime::{nn::RNNCell, Tensor};
/// let cell = RNNCell::new(3, 5, true);
/// let mut h = cell.forward(&Tensor::randn(&[2, 3]), None);
/// h = cell.forward(&Tensor::randn(&[2, 3]), Some(&h));
/// assert_eq!(h.shape(), &[2, 5]);
/// ```
pub struct RNNCell(OneStep);

impl RNNCell {
    /// `nn.RNNCell(input_size, hidden_size, bias)` with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> RNNCell {
        let kind = Kind::Rnn { relu: false };
        RNNCell(OneStep::new("RNNCell", kind, input_size, hidden_size, bias))
    }

    /// `nonlinearity='relu'`.
    pub fn relu(mut self) -> RNNCell {
        self.0.kind = Kind::Rnn { relu: true };
        self
    }

    /// The next hidden state from `input` (`[N, input_size]` or
    /// `[input_size]`) and `hx` (`[N, hidden_size]` or `[hidden_size]`;
    /// zeros when `None`).
    #[track_caller]
    pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Tensor {
        self.0.step(input, hx, None).0
    }
}

/// `nn.GRUCell`: one step of [`super::GRU`]'s gates r, z, n.
///
/// ```
/// use tapir_runtime::{nn::GRUCell, Tensor};
/// let cell = GRUCell::new(3, 4, true);
/// assert_eq!(cell.forward(&Tensor::randn(&[3]), None).shape(), &[4]);
/// ```
pub struct GRUCell(OneStep);

impl GRUCell {
    /// `nn.GRUCell(input_size, hidden_size, bias)` with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> GRUCell {
        GRUCell(OneStep::new(
            "GRUCell",
            Kind::Gru,
            input_size,
            hidden_size,
            bias,
        ))
    }

    /// The next hidden state, as [`RNNCell::forward`].
    #[track_caller]
    pub fn forward(&self, input: &Tensor, hx: Option<&Tensor>) -> Tensor {
        self.0.step(input, hx, None).0
    }
}

/// `nn.LSTMCell`: one step of [`super::LSTM`]'s gates i, f, g, o.
///
/// ```
/// use tapir_runtime::{nn::LSTMCell, Tensor};
/// let cell = LSTMCell::new(3, 4, true);
/// let (h, c) = cell.forward(&Tensor::randn(&[2, 3]), None);
/// let (h, c) = cell.forward(&Tensor::randn(&[2, 3]), Some((&h, &c)));
/// assert_eq!((h.shape(), c.shape()), (&[2, 4][..], &[2, 4][..]));
/// ```
pub struct LSTMCell(OneStep);

impl LSTMCell {
    /// `nn.LSTMCell(input_size, hidden_size, bias)` with PyTorch's initialisation.
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        LSTMCell(OneStep::new(
            "LSTMCell",
            Kind::Lstm,
            input_size,
            hidden_size,
            bias,
        ))
    }

    /// The next `(h, c)` from `input` and `(h, c)` (zeros when `None`),
    /// shaped as [`RNNCell::forward`]'s.
    #[track_caller]
    pub fn forward(&self, input: &Tensor, hx: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        let (h, c) = self.0.step(input, hx.map(|s| s.0), hx.map(|s| s.1));
        (h, c.expect("an LSTM step carries c"))
    }
}

macro_rules! module_for_cell {
    ($($t:ident),*) => {$(
        impl Module for $t {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
                self.0.cell.visit(f)
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
                self.0.cell.visit_mut(f)
            }
            fn repr(&self) -> String {
                self.0.repr()
            }
        }
        crate::display_as_repr!($t);
    )*};
}

module_for_cell!(RNNCell, GRUCell, LSTMCell);
