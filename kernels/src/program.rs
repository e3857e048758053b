//! Elementwise programs: what `tapir::compile` fuses a chain of elementwise
//! ops into. A program is a list of instructions in SSA form (each makes one
//! new value), run over the elements of its inputs in small tiles, so a
//! chain of k ops reads its inputs and writes its output once instead of
//! making k passes over memory. Its backward is another program, built here
//! by reverse-mode differentiation, that recomputes the forward values it
//! needs inside the tile instead of keeping them.
//!
//! Every instruction computes exactly what the eager op's kernel row
//! computes (the same `f`), so a fused forward equals the unfused one
//! bit for bit.
//!
//! ```
//! use tapir_kernels::program::{Inst, Program, Unary, Binary};
//! // exp(x) * y
//! let p = Program {
//!     n_inputs: 2,
//!     insts: vec![
//!         Inst::Input(0),
//!         Inst::Unary(Unary::Exp, 0),
//!         Inst::Input(1),
//!         Inst::Binary(Binary::Mul, 1, 2),
//!     ],
//!     outputs: vec![3],
//! };
//! let dp = p.backward(&[true, true]);
//! assert_eq!(dp.n_inputs, 3); // x, y and the output's gradient
//! assert_eq!(dp.outputs.len(), 2);
//! ```

use crate::elementwise::{self as ew, BinaryFn, UnaryFn};

/// A loop over one unary kernel row, given the row's own type by
/// [`Unary::visit`] (the CPU's per-tile loops).
pub(crate) trait UnaryVisit {
    /// Runs the loop with `row`.
    fn visit<R: UnaryFn>(self, row: R);
}

/// [`UnaryVisit`] for binary rows ([`Binary::visit`]).
pub(crate) trait BinaryVisit {
    /// Runs the loop with `row`.
    fn visit<R: BinaryFn>(self, row: R);
}

/// Declares an instruction enum from kernel rows of the same names (each
/// variant is the row struct of [`crate::elementwise`] it runs): the enum,
/// `ALL`, `eval` (the row's own `f`, so a fused op computes the eager op's
/// bits), `cuda` (the row's own CUDA expression) and `visit` (a loop over
/// the row, monomorphised per row so it vectorises with the match outside).
macro_rules! instructions {
    (
        $(#[$meta:meta])* $name:ident, $rows:ident, $visit:ident, fn($($param:tt)*) $call:tt,
        [$($(#[$doc:meta])* $v:ident),+ $(,)?]
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$doc])* $v,)+
        }

        impl $name {
            /// Every instruction of this kind.
            pub const ALL: &[$name] = &[$($name::$v),+];

            /// The function in f32, as the eager op's kernel row computes it.
            #[inline(always)]
            pub fn eval(self, $($param)*) -> f32 {
                match self {
                    $($name::$v => ew::$v.f $call,)+
                }
            }

            /// Runs `v` with this instruction's kernel row (its own type).
            #[inline(always)]
            pub(crate) fn visit<V: $visit>(self, v: V) {
                match self {
                    $($name::$v => v.visit(ew::$v),)+
                }
            }

            /// The CUDA expression (of `v`, or `u` and `v`): the row's own.
            pub fn cuda(self) -> &'static str {
                let name = match self {
                    $($name::$v => <ew::$v>::NAME,)+
                };
                ew::$rows
                    .iter()
                    .find(|r| r.name == name)
                    .map_or("v", |r| r.cuda)
            }
        }
    };
}

instructions!(
    /// A one-operand instruction: the rows of [`crate::elementwise`] a
    /// program can hold.
    Unary, UNARY_ROWS, UnaryVisit, fn(x: f32) (x),
    [
        /// `-x`.
        Neg,
        /// `|x|`.
        Abs,
        /// -1, 0 or 1.
        Sign,
        /// `e^x`.
        Exp,
        /// `ln x`.
        Log,
        /// `ln(1 + x)`.
        Log1p,
        /// `e^x - 1`.
        Expm1,
        /// `√x`.
        Sqrt,
        /// `1 / √x`.
        Rsqrt,
        /// `sin x`.
        Sin,
        /// `cos x`.
        Cos,
        /// `tanh x`.
        Tanh,
        /// `erf x`.
        Erf,
        /// `1 / (1 + e^-x)`.
        Sigmoid,
        /// `max(x, 0)`.
        Relu,
        /// `x σ(x)`.
        Silu,
        /// The derivative of SiLU.
        SiluGrad,
        /// The exact GELU.
        Gelu,
        /// The derivative of the exact GELU.
        GeluGrad,
        /// `x · min(max(x + 3, 0), 6) / 6`.
        Hardswish,
        /// The derivative of hardswish.
        HardswishGrad,
    ]
);

instructions!(
    /// A two-operand instruction.
    Binary, BINARY_ROWS, BinaryVisit, fn(a: f32, b: f32) (a, b),
    [
        /// `a + b`.
        Add,
        /// `a - b`.
        Sub,
        /// `a * b`.
        Mul,
        /// `a / b`.
        Div,
        /// ReLU's backward: `a` where `b` is above 0 or NaN, else 0.
        ReluBackward,
    ]
);

impl Unary {
    /// Whether this is another row's derivative (`SiluGrad`,
    /// `GeluGrad`, `HardswishGrad`): backward programs use them, and they
    /// have no derivative of their own here.
    ///
    /// ```
    /// use tapir_kernels::program::Unary;
    /// assert!(Unary::GeluGrad.is_derivative() && !Unary::Gelu.is_derivative());
    /// ```
    pub fn is_derivative(self) -> bool {
        matches!(
            self,
            Unary::SiluGrad | Unary::GeluGrad | Unary::HardswishGrad
        )
    }
}

/// One instruction; operands name earlier instructions by index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Inst {
    /// The program's input `i`.
    Input(usize),
    /// A constant.
    Const(f32),
    /// A unary function of an earlier value.
    Unary(Unary, usize),
    /// A binary function of two earlier values.
    Binary(Binary, usize, usize),
    /// Dropout of an earlier value: `x * mask(i)`, the mask of
    /// [`crate::cpu::philox_dropout_mask`] with keep probability `keep` and
    /// the run's seed number `seed` (its backward applies the same mask to
    /// the gradient, recomputed, never stored). CPU only.
    Dropout {
        /// The value dropped.
        x: usize,
        /// The keep probability, `1 - p`.
        keep: f64,
        /// Which of the run's seeds keys the mask.
        seed: usize,
    },
}

/// An elementwise program over `n_inputs` inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// How many inputs it reads.
    pub n_inputs: usize,
    /// Instructions in order; each makes one value.
    pub insts: Vec<Inst>,
    /// The values it writes, in order.
    pub outputs: Vec<usize>,
}

/// Builds a program instruction by instruction (what `backward` uses).
struct Emit {
    insts: Vec<Inst>,
}

impl Emit {
    fn push(&mut self, i: Inst) -> usize {
        self.insts.push(i);
        self.insts.len() - 1
    }
    fn un(&mut self, op: Unary, x: usize) -> usize {
        self.push(Inst::Unary(op, x))
    }
    fn bin(&mut self, op: Binary, a: usize, b: usize) -> usize {
        self.push(Inst::Binary(op, a, b))
    }
    fn konst(&mut self, v: f32) -> usize {
        self.push(Inst::Const(v))
    }
}

impl Program {
    /// How many seeds a run takes (one per dropout instruction).
    pub fn seeds(&self) -> usize {
        self.insts
            .iter()
            .filter_map(|i| match i {
                Inst::Dropout { seed, .. } => Some(seed + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0)
    }

    /// Whether reverse-mode differentiation knows every instruction (the
    /// derivative rows have none: [`Unary::is_derivative`] and
    /// [`Binary::ReluBackward`]).
    pub fn differentiable(&self) -> bool {
        !self.insts.iter().any(|i| match i {
            Inst::Unary(u, _) => u.is_derivative(),
            Inst::Binary(b, ..) => *b == Binary::ReluBackward,
            _ => false,
        })
    }

    /// The backward program of a one-output program: its inputs are this
    /// program's inputs then the output's gradient; it writes, for each input
    /// `i` with `needs[i]`, that input's gradient (full size, before any
    /// reduction to a broadcast input's shape). Formulas are PyTorch's.
    ///
    /// Panics if the program has more than one output or is not
    /// [`Program::differentiable`] (the compiler builds neither).
    pub fn backward(&self, needs: &[bool]) -> Program {
        assert!(
            self.outputs.len() == 1 && self.differentiable(),
            "Program::backward: a one-output program of differentiable instructions is needed"
        );
        let n = self.insts.len();
        let mut e = Emit {
            insts: self.insts.clone(),
        };
        let grad = e.push(Inst::Input(self.n_inputs));
        let mut adj: Vec<Option<usize>> = vec![None; n];
        let mut input_adj: Vec<Option<usize>> = vec![None; self.n_inputs];
        adj[self.outputs[0]] = Some(grad);
        let add_to = |e: &mut Emit, slot: &mut Option<usize>, c: usize| {
            *slot = Some(match *slot {
                None => c,
                Some(p) => e.bin(Binary::Add, p, c),
            });
        };
        for i in (0..n).rev() {
            let Some(a) = adj[i] else { continue };
            match self.insts[i] {
                Inst::Input(k) => add_to(&mut e, &mut input_adj[k], a),
                Inst::Const(_) => {}
                Inst::Unary(op, x) => {
                    if let Some(c) = unary_grad(&mut e, op, x, i, a) {
                        let mut slot = adj[x];
                        add_to(&mut e, &mut slot, c);
                        adj[x] = slot;
                    }
                }
                Inst::Dropout { x, keep, seed } => {
                    let c = e.push(Inst::Dropout { x: a, keep, seed });
                    let mut slot = adj[x];
                    add_to(&mut e, &mut slot, c);
                    adj[x] = slot;
                }
                Inst::Binary(op, x, y) => {
                    let (cx, cy) = binary_grad(&mut e, op, x, y, a);
                    for (v, c) in [(x, cx), (y, cy)] {
                        let mut slot = adj[v];
                        add_to(&mut e, &mut slot, c);
                        adj[v] = slot;
                    }
                }
            }
        }
        let zero = e.konst(0.0);
        let outputs = (0..self.n_inputs)
            .filter(|&k| needs.get(k).copied().unwrap_or(false))
            .map(|k| input_adj[k].unwrap_or(zero))
            .collect();
        Program {
            n_inputs: self.n_inputs + 1,
            insts: e.insts,
            outputs,
        }
        .pruned()
    }

    /// The same program without the instructions no output depends on.
    pub fn pruned(&self) -> Program {
        let mut live = vec![false; self.insts.len()];
        for &o in &self.outputs {
            live[o] = true;
        }
        for i in (0..self.insts.len()).rev() {
            if !live[i] {
                continue;
            }
            match self.insts[i] {
                Inst::Unary(_, x) | Inst::Dropout { x, .. } => live[x] = true,
                Inst::Binary(_, x, y) => {
                    live[x] = true;
                    live[y] = true;
                }
                _ => {}
            }
        }
        let mut new_index = vec![usize::MAX; self.insts.len()];
        let mut insts = Vec::new();
        for (i, inst) in self.insts.iter().enumerate() {
            if !live[i] {
                continue;
            }
            new_index[i] = insts.len();
            insts.push(match *inst {
                Inst::Unary(op, x) => Inst::Unary(op, new_index[x]),
                Inst::Binary(op, x, y) => Inst::Binary(op, new_index[x], new_index[y]),
                Inst::Dropout { x, keep, seed } => Inst::Dropout {
                    x: new_index[x],
                    keep,
                    seed,
                },
                other => other,
            });
        }
        Program {
            n_inputs: self.n_inputs,
            insts,
            outputs: self.outputs.iter().map(|&o| new_index[o]).collect(),
        }
    }

    /// The name of this program's CUDA kernel: `fused_<hash of its source>`,
    /// so one program compiles once per process (and once per machine,
    /// through the NVRTC disk cache).
    pub fn cuda_name(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.cuda_body().hash(&mut h);
        format!("fused_{:016x}", h.finish())
    }

    /// The CUDA source of this program's kernel `name`: `(size_t n, const
    /// float *in0, size_t len0, .., float *out0, ..)`, element `i` of input
    /// `k` read at `i % len_k` (a bias row cycles), every value a register.
    pub fn cuda_source(&self, name: &str) -> String {
        let mut params = vec!["size_t n".to_string()];
        for k in 0..self.n_inputs {
            params.push(format!("const float *__restrict__ in{k}"));
            params.push(format!("size_t len{k}"));
        }
        for k in 0..self.outputs.len() {
            params.push(format!("float *__restrict__ out{k}"));
        }
        format!(
            "{}\nextern \"C\" __global__ void {name}({}) {{\n  GRID_STRIDE(i, n) {{\n{}  }}\n}}\n",
            crate::elementwise::CUDA_HELPERS,
            params.join(", "),
            self.cuda_body()
        )
    }

    /// The statements computing every value for element `i` and storing the
    /// outputs.
    fn cuda_body(&self) -> String {
        let mut s = String::new();
        for (i, inst) in self.insts.iter().enumerate() {
            let expr = match *inst {
                Inst::Input(k) => format!("in{k}[i % len{k}]"),
                Inst::Const(c) if c.is_finite() => format!("{c:?}f"),
                Inst::Const(c) => format!("__int_as_float({:#x})", c.to_bits()),
                Inst::Unary(op, x) => format!("({})", rename(op.cuda(), &[('v', x)])),
                Inst::Binary(op, a, b) => format!("({})", rename(op.cuda(), &[('u', a), ('v', b)])),
                // Never built for a GPU (the compiler fuses dropout on the
                // CPU only); a kernel with one would not compile.
                Inst::Dropout { .. } => "dropout_runs_on_the_cpu_only".to_string(),
            };
            s.push_str(&format!("    float r{i} = {expr};\n"));
        }
        for (k, &o) in self.outputs.iter().enumerate() {
            s.push_str(&format!("    out{k}[i] = r{o};\n"));
        }
        s
    }
}

/// `expr` with each standalone one-letter operand name replaced by its
/// register (`v` in `expf(v)`, not the `f` of `expf`).
fn rename(expr: &str, names: &[(char, usize)]) -> String {
    let chars: Vec<char> = expr.chars().collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_');
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        let standalone =
            !word(i.checked_sub(1).and_then(|j| chars.get(j))) && !word(chars.get(i + 1));
        match names.iter().find(|(n, _)| n == c) {
            Some((_, r)) if standalone => out.push_str(&format!("r{r}")),
            _ => out.push(*c),
        }
    }
    out
}

/// The gradient reaching `x` from `y = op(x)` (instruction `y`) given `a`,
/// the adjoint of `y`; `None` where it is zero everywhere.
fn unary_grad(e: &mut Emit, op: Unary, x: usize, y: usize, a: usize) -> Option<usize> {
    use Binary::{Add, Div, Mul, Sub};
    Some(match op {
        Unary::Neg => e.un(Unary::Neg, a),
        Unary::Exp => e.bin(Mul, a, y),
        Unary::Expm1 => {
            let one = e.konst(1.0);
            let d = e.bin(Add, y, one);
            e.bin(Mul, a, d)
        }
        Unary::Log => e.bin(Div, a, x),
        Unary::Log1p => {
            let one = e.konst(1.0);
            let d = e.bin(Add, x, one);
            e.bin(Div, a, d)
        }
        Unary::Sqrt => {
            let two = e.konst(2.0);
            let d = e.bin(Mul, y, two);
            e.bin(Div, a, d)
        }
        Unary::Rsqrt => {
            let y2 = e.bin(Mul, y, y);
            let y3 = e.bin(Mul, y2, y);
            let g = e.bin(Mul, a, y3);
            let k = e.konst(-0.5);
            e.bin(Mul, g, k)
        }
        Unary::Tanh => {
            let one = e.konst(1.0);
            let y2 = e.bin(Mul, y, y);
            let d = e.bin(Sub, one, y2);
            e.bin(Mul, a, d)
        }
        Unary::Sigmoid => {
            let one = e.konst(1.0);
            let d = e.bin(Sub, one, y);
            let s = e.bin(Mul, y, d);
            e.bin(Mul, a, s)
        }
        // As eager ReLU's backward (PyTorch's threshold_backward): the
        // gradient passes where x > 0 or x is NaN.
        Unary::Relu => e.bin(Binary::ReluBackward, a, x),
        Unary::Silu => {
            let s = e.un(Unary::SiluGrad, x);
            e.bin(Mul, a, s)
        }
        Unary::Gelu => {
            let s = e.un(Unary::GeluGrad, x);
            e.bin(Mul, a, s)
        }
        Unary::Hardswish => {
            let s = e.un(Unary::HardswishGrad, x);
            e.bin(Mul, a, s)
        }
        Unary::Abs => {
            let s = e.un(Unary::Sign, x);
            e.bin(Mul, a, s)
        }
        Unary::Sin => {
            let c = e.un(Unary::Cos, x);
            e.bin(Mul, a, c)
        }
        Unary::Cos => {
            let s = e.un(Unary::Sin, x);
            let g = e.bin(Mul, a, s);
            e.un(Unary::Neg, g)
        }
        Unary::Erf => {
            // 2/√π e^(-x²)
            let x2 = e.bin(Mul, x, x);
            let nx2 = e.un(Unary::Neg, x2);
            let ex = e.un(Unary::Exp, nx2);
            let k = e.konst(std::f32::consts::FRAC_2_SQRT_PI);
            let d = e.bin(Mul, ex, k);
            e.bin(Mul, a, d)
        }
        Unary::Sign | Unary::SiluGrad | Unary::GeluGrad | Unary::HardswishGrad => {
            return None;
        }
    })
}

/// The gradients reaching `x` and `y` from `op(x, y)` given its adjoint `a`.
fn binary_grad(e: &mut Emit, op: Binary, x: usize, y: usize, a: usize) -> (usize, usize) {
    use Binary::{Div, Mul};
    match op {
        Binary::Add => (a, a),
        Binary::Sub => (a, e.un(Unary::Neg, a)),
        Binary::Mul => (e.bin(Mul, a, y), e.bin(Mul, a, x)),
        Binary::Div => {
            // -a x / y²
            let gx = e.bin(Div, a, y);
            let y2 = e.bin(Mul, y, y);
            let q = e.bin(Div, x, y2);
            let p = e.bin(Mul, a, q);
            (gx, e.un(Unary::Neg, p))
        }
        Binary::ReluBackward => {
            unreachable!("a derivative row has no derivative (Program::differentiable)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sigmoid(x * y) + x`, differentiated, against central differences.
    #[test]
    fn backward_matches_finite_differences() {
        let p = Program {
            n_inputs: 2,
            insts: vec![
                Inst::Input(0),
                Inst::Input(1),
                Inst::Binary(Binary::Mul, 0, 1),
                Inst::Unary(Unary::Sigmoid, 2),
                Inst::Binary(Binary::Add, 3, 0),
                Inst::Unary(Unary::Gelu, 4),
                Inst::Unary(Unary::Tanh, 5),
                Inst::Binary(Binary::Div, 6, 1),
            ],
            outputs: vec![7],
        };
        let eval = |p: &Program, ins: &[f64]| -> Vec<f64> {
            let mut v = Vec::new();
            for inst in &p.insts {
                v.push(match *inst {
                    Inst::Input(k) => ins[k] as f32,
                    Inst::Const(c) => c,
                    Inst::Unary(op, x) => op.eval(v[x]),
                    Inst::Binary(op, a, b) => op.eval(v[a], v[b]),
                    Inst::Dropout { .. } => unreachable!("no dropout here"),
                });
            }
            p.outputs.iter().map(|&o| v[o] as f64).collect()
        };
        let dp = p.backward(&[true, true]);
        for (x, y) in [(0.3, 1.7), (-1.2, 0.8), (2.0, -1.5)] {
            let g = eval(&dp, &[x, y, 1.0]);
            let h = 1e-3;
            let fd_x = (eval(&p, &[x + h, y])[0] - eval(&p, &[x - h, y])[0]) / (2.0 * h);
            let fd_y = (eval(&p, &[x, y + h])[0] - eval(&p, &[x, y - h])[0]) / (2.0 * h);
            assert!(
                (g[0] - fd_x).abs() < 2e-3,
                "d/dx at ({x}, {y}): {} vs {fd_x}",
                g[0]
            );
            assert!(
                (g[1] - fd_y).abs() < 2e-3,
                "d/dy at ({x}, {y}): {} vs {fd_y}",
                g[1]
            );
        }
    }

    #[test]
    fn pruning_drops_dead_values_and_keeps_order() {
        let p = Program {
            n_inputs: 1,
            insts: vec![
                Inst::Input(0),
                Inst::Unary(Unary::Exp, 0),
                Inst::Unary(Unary::Neg, 0),
            ],
            outputs: vec![2],
        };
        let q = p.pruned();
        assert_eq!(
            q.insts,
            vec![Inst::Input(0), Inst::Unary(Unary::Neg, 0)],
            "exp(x) feeds nothing"
        );
        assert_eq!(q.outputs, vec![1]);
    }
}
