//! What analysis hands to code generation: the forward body with every
//! call resolved (which layer, which tensor method, which shapes to check).

use crate::shape::Dim;
use syn::{Expr, Ident};

/// How a layer is called.
#[derive(Clone)]
pub enum CallHow {
    /// A table layer with one input and one output (`Forward::forward`);
    /// `checkpoint` when its field is `#[checkpoint]`.
    Forward { checkpoint: bool },
    /// Another `model!` model (its unchecked forward).
    Model { checkpoint: bool },
    /// A layer whose inherent `forward(x, None)` also takes and returns a
    /// state (GRU, LSTM), started from zeros.
    WithState,
    /// `MultiheadAttention`: (query, key, value) and options.
    Attention {
        key_padding_mask: Option<Box<Ir>>,
        attn_mask: Option<Box<Ir>>,
        need_weights: bool,
        is_causal: Expr,
    },
}

/// The callee of a layer call: a field of `self` or a loop variable.
#[derive(Clone)]
pub enum Callee {
    Field(Ident),
    Var(Ident),
}

/// An argument of a tensor method.
#[derive(Clone)]
pub enum MArg {
    Tensor(Ir),
    /// A dim index or other integer, passed as `isize`.
    Int(i64),
    /// A shape for reshape/view; `None` is `-1`.
    Shape(Vec<Option<Dim>>),
    Ints(Vec<i64>),
    /// A size passed as `usize` (narrow's length).
    Size(Dim),
    Verbatim(Expr),
}

#[derive(Clone)]
pub enum Ir {
    Var(Ident),
    Scalar(Expr),
    Call {
        callee: Callee,
        how: CallHow,
        args: Vec<Ir>,
    },
    Method {
        recv: Box<Ir>,
        name: Ident,
        args: Vec<MArg>,
    },
    /// `cat`/`stack` of tensors along a dim.
    Join {
        stack: bool,
        parts: Vec<Ir>,
        dim: i64,
    },
    Binary {
        op: syn::BinOp,
        l: Box<Ir>,
        r: Box<Ir>,
        l_tensor: bool,
        r_tensor: bool,
    },
    Neg(Box<Ir>),
    Tuple(Vec<Ir>),
    If {
        cond: Expr,
        then: Box<IrBlock>,
        els: Option<Box<Ir>>,
    },
    Block(Box<IrBlock>),
    /// `unchecked!(expr => [shape])`: user code, shape checked at run time.
    Unchecked {
        code: Expr,
        check: RuntimeShape,
    },
}

/// A shape to check at run time, binding run-time dims seen for the first time.
#[derive(Clone)]
pub struct RuntimeShape {
    pub what: String,
    pub pattern: String,
    pub dims: Vec<(Dim, Option<String>)>,
}

#[derive(Clone)]
pub enum IrStmt {
    Let {
        pat: LetPat,
        init: Ir,
    },
    Assign {
        name: Ident,
        value: Ir,
    },
    For {
        var: Ident,
        field: Ident,
        body: IrBlock,
    },
    Expr(Ir),
}

/// What a `let` binds: a name (and whether it is `mut`), `_`, or a tuple.
#[derive(Clone)]
pub enum LetPat {
    Name(Ident, bool),
    Wild,
    Tuple(Vec<LetPat>),
}

#[derive(Clone, Default)]
pub struct IrBlock {
    pub stmts: Vec<IrStmt>,
    pub tail: Option<Box<Ir>>,
}
