//! The elementwise primitives, one row each. A row names the primitive,
//! gives its scalar function once in Rust (generic over the float type, and
//! over i64 where integers are allowed) and once as a CUDA expression, and
//! says which inputs its twin test draws from. From these rows come:
//! - the CPU kernels (`cpu::map` / `cpu::zip_map` over the row's function),
//! - the CUDA source of every `<name>_<dtype>` kernel ([`cuda_source`]),
//! - the twin tests that compare the two on a GPU ([`UNARY_ROWS`],
//!   [`BINARY_ROWS`] carry a reference function per row).
//!
//! Adding a primitive is adding its row here, plus the runtime method that
//! records its backward.
//!
//! ```
//! use tapir_kernels::elementwise::{Hardswish, UnaryFn};
//! assert_eq!(Hardswish.f(1.0f32), 1.0 * 4.0 / 6.0);
//! assert_eq!(Hardswish::NAME, "hardswish");
//! ```

use crate::Float;
pub use crate::integer::{BitAnd, BitNot, BitOr, BitXor, Gcd, Lcm, ShiftLeft, ShiftRight};
use crate::special;

/// A scalar function applied elementwise, generic over the float type it
/// computes in (f16/bf16 compute in f32); `INT` functions also run on i64.
pub trait UnaryFn: Sync + Send + Copy {
    /// The kernel name: `<NAME>_<dtype>` in the CUDA source.
    const NAME: &'static str;
    /// Whether [`UnaryFn::i`] is defined (integer tensors may use it).
    const INT: bool = false;
    /// The function in float type `T`.
    fn f<T: Float>(&self, x: T) -> T;
    /// The function on integers (only when `INT`).
    fn i(&self, _x: i64) -> i64 {
        unreachable!("{}: integer path of a float-only op", Self::NAME)
    }
    /// The scalar parameters the CUDA kernel takes as `p0`, `p1`.
    fn params(&self) -> [f64; 2] {
        [0.0; 2]
    }
    /// `f` in a form whose loop vectorises, equal to `f` wherever
    /// [`UnaryFn::rare`] is false: the CPU kernel over a dense slice runs it,
    /// then `f` on the rare elements, if any (sin and cos: an exact
    /// reduction of |x| >= 2^22 is a scalar call, which would keep the
    /// whole loop scalar). Default: `f`.
    #[inline(always)]
    fn fast<T: Float>(&self, x: T) -> T {
        self.f(x)
    }
    /// Whether [`UnaryFn::fast`] differs from `f` at `x`. Default: never.
    #[inline(always)]
    fn rare<T: Float>(&self, _x: T) -> bool {
        false
    }
}

/// A scalar function of two operands; see [`UnaryFn`].
pub trait BinaryFn: Sync + Send + Copy {
    /// The kernel name: `<NAME>_<dtype>` in the CUDA source.
    const NAME: &'static str;
    /// Whether [`BinaryFn::i`] is defined.
    const INT: bool = false;
    /// The function in float type `T`.
    fn f<T: Float>(&self, a: T, b: T) -> T;
    /// The function on integers (only when `INT`).
    fn i(&self, _a: i64, _b: i64) -> i64 {
        unreachable!("{}: integer path of a float-only op", Self::NAME)
    }
    /// The scalar parameter the CUDA kernel takes as `p0`.
    fn param(&self) -> f64 {
        0.0
    }
}

/// Which inputs a row's twin test draws from (outside them the function is
/// not real, or f32 rounding makes CPU and GPU disagree legitimately).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// Any value in `[-2, 2]`.
    Any,
    /// `[0.5, 2.5]`: logs, roots and powers of fractional exponents.
    Positive,
    /// `[-6, 6]`: every piece of a piecewise function with breaks at ±3.
    Wide,
    /// `[-0.9, 0.9]`: inside the unit interval (asin, atanh; tan away from
    /// its poles).
    Unit,
    /// `[1.1, 3.1]`: above one (acosh).
    AboveOne,
    /// `[0.1, 0.9]`: probabilities (ndtri).
    Probability,
}

/// One unary primitive as the CUDA side and the twin tests see it.
#[derive(Clone, Copy, Debug)]
pub struct UnaryRow {
    /// The kernel name.
    pub name: &'static str,
    /// The CUDA expression of `v` (the input, as float) and `p0`, `p1`.
    pub cuda: &'static str,
    /// Parameters the twin test uses.
    pub sample: [f64; 2],
    /// Inputs the twin test uses.
    pub domain: Domain,
    /// The CPU function in f32 at parameters `p` (the twin's oracle).
    pub reference: fn(f32, [f64; 2]) -> f32,
}

/// One binary primitive as the CUDA side and the twin tests see it.
#[derive(Clone, Copy, Debug)]
pub struct BinaryRow {
    /// The kernel name.
    pub name: &'static str,
    /// The CUDA expression of `u`, `v` (the operands, as float) and `p0`.
    pub cuda: &'static str,
    /// The parameter the twin test uses.
    pub sample: f64,
    /// Inputs the twin test uses for the first operand.
    pub domain: Domain,
    /// The CPU function in f32 at parameter `p` (the twin's oracle).
    pub reference: fn(f32, f32, f64) -> f32,
}

/// Declares one struct per unary row, its [`UnaryFn`] impl and [`UNARY_ROWS`].
macro_rules! unary_rows {
    ($(
        $(#[$doc:meta])*
        $name:ident $({ $($p:ident),+ })? = $k:literal,
            |$x:ident| $body:expr, cuda $cu:literal
            $(, int |$xi:ident| $ib:expr)?
            $(, sample [$($s:expr),+])?
            $(, domain $dom:ident)?
            $(, fast |$xf:ident| $fb:expr, rare |$xr:ident| $rb:expr)? ;
    )*) => {
        $(
            unary_rows!(@struct $(#[$doc])* $name $({ $($p),+ })?);
            unary_rows!(@impl $name [$($($p),+)?] $k, |$x| $body, [$(|$xi| $ib)?],
                [$(|$xf| $fb, |$xr| $rb)?]);
        )*
        /// Every unary primitive, in declaration order.
        pub const UNARY_ROWS: &[UnaryRow] = &[$(
            UnaryRow {
                name: $k,
                cuda: $cu,
                sample: {
                    #[allow(unused_mut)]
                    let mut s = [0.0; 2];
                    $(let v = [$($s),+]; let mut i = 0;
                    while i < v.len() { s[i] = v[i]; i += 1; })?
                    s
                },
                domain: unary_rows!(@domain $($dom)?),
                reference: |x, p| {
                    let _ = p;
                    unary_rows!(@make $name p $({ $($p),+ })?).f(x)
                },
            },
        )*];
    };
    (@struct $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
    };
    (@struct $(#[$doc:meta])* $name:ident { $($p:ident),+ }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $(#[doc = concat!("The `", stringify!($p), "` parameter.")] pub $p: f64,)+
        }
    };
    (@impl $name:ident $params:tt $k:literal, |$x:ident| $body:expr, [$(|$xi:ident| $ib:expr)?],
        [$(|$xf:ident| $fb:expr, |$xr:ident| $rb:expr)?]) => {
        impl UnaryFn for $name {
            const NAME: &'static str = $k;
            $(const INT: bool = { let _ = stringify!($xi); true };)?
            #[inline(always)]
            fn f<T: Float>(&self, $x: T) -> T {
                unary_rows!(@bind_t (*self) $name $params);
                $body
            }
            $(
            #[inline(always)]
            fn i(&self, $xi: i64) -> i64 {
                unary_rows!(@bind (*self) $name $params);
                $ib
            }
            )?
            fn params(&self) -> [f64; 2] {
                unary_rows!(@params self $params)
            }
            $(
            #[inline(always)]
            fn fast<T: Float>(&self, $xf: T) -> T {
                unary_rows!(@bind_t (*self) $name $params);
                $fb
            }
            #[inline(always)]
            fn rare<T: Float>(&self, $xr: T) -> bool {
                unary_rows!(@bind_t (*self) $name $params);
                $rb
            }
            )?
        }
    };
    (@params $s:ident []) => { [0.0; 2] };
    (@params $s:ident [$p:ident]) => { [$s.$p, 0.0] };
    (@params $s:ident [$p:ident, $q:ident]) => { [$s.$p, $s.$q] };
    (@bind ($v:expr) $name:ident []) => {};
    (@bind ($v:expr) $name:ident [$($p:ident),+]) => {
        let $name { $($p),+ } = $v;
    };
    (@bind_t ($v:expr) $name:ident []) => {};
    (@bind_t ($v:expr) $name:ident [$($p:ident),+]) => {
        let $name { $($p),+ } = $v;
        $(let $p: T = T::from_f64($p);)+
    };
    (@make $name:ident $p:ident) => { $name };
    (@make $name:ident $pv:ident { $($p:ident),+ }) => {{
        let mut it = $pv.into_iter();
        $name { $($p: { let _ = stringify!($p); it.next().unwrap_or(0.0) }),+ }
    }};
    (@domain) => { Domain::Any };
    (@domain $d:ident) => { Domain::$d };
}

/// Declares one struct per binary row, its [`BinaryFn`] impl and [`BINARY_ROWS`].
macro_rules! binary_rows {
    ($(
        $(#[$doc:meta])*
        $name:ident $({ $p:ident })? = $k:literal,
            |$a:ident, $b:ident| $body:expr, cuda $cu:literal
            $(, int |$ai:ident, $bi:ident| $ib:expr)?
            $(, sample $s:expr)?
            $(, domain $dom:ident)? ;
    )*) => {
        $(
            binary_rows!(@struct $(#[$doc])* $name $({ $p })?);
            impl BinaryFn for $name {
                const NAME: &'static str = $k;
                $(const INT: bool = { let _ = stringify!($ai); true };)?
                #[inline(always)]
                fn f<T: Float>(&self, $a: T, $b: T) -> T {
                    $(let $p: T = T::from_f64(self.$p);)?
                    $body
                }
                $(
                #[inline(always)]
                fn i(&self, $ai: i64, $bi: i64) -> i64 {
                    $ib
                }
                )?
                fn param(&self) -> f64 {
                    binary_rows!(@param self $($p)?)
                }
            }
        )*
        /// Every binary primitive, in declaration order.
        pub const BINARY_ROWS: &[BinaryRow] = &[$(
            BinaryRow {
                name: $k,
                cuda: $cu,
                sample: binary_rows!(@sample $($s)?),
                domain: unary_rows!(@domain $($dom)?),
                reference: |a, b, p| {
                    let _ = p;
                    binary_rows!(@make $name p $({ $p })?).f(a, b)
                },
            },
        )*];
    };
    (@struct $(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;
    };
    (@struct $(#[$doc:meta])* $name:ident { $p:ident }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            #[doc = concat!("The `", stringify!($p), "` parameter.")]
            pub $p: f64,
        }
    };
    (@make $name:ident $pv:ident) => { $name };
    (@make $name:ident $pv:ident { $p:ident }) => { $name { $p: $pv } };
    (@sample) => { 0.0 };
    (@sample $s:expr) => { $s };
    (@param $s:ident) => { 0.0 };
    (@param $s:ident $p:ident) => { $s.$p };
}

/// PyTorch's float `remainder`: `fmod`, moved into `b`'s sign.
#[inline(always)]
fn remainder<T: Float>(a: T, b: T) -> T {
    let m = a % b;
    if m != T::zero() && ((b < T::zero()) != (m < T::zero())) {
        m + b
    } else {
        m
    }
}

fn c<T: Float>(v: f64) -> T {
    T::from_f64(v)
}

/// PyTorch's `(0 < x) - (x < 0)`: 0 for both zeros and for NaN (so
/// `abs`'s gradient at NaN is 0, as PyTorch's; Rprop's step direction).
#[inline(always)]
pub(crate) fn sign<T: Float>(x: T) -> T {
    if x > T::zero() {
        T::one()
    } else if x < T::zero() {
        -T::one()
    } else {
        T::zero()
    }
}

/// Rounds to the nearest integer, halves to the even one (PyTorch's
/// `round`, C's `rint` in the default rounding mode), keeping `x`'s sign
/// (`round(-0.4)` is -0); infinities and NaN pass through.
fn round_half_even<T: Float>(x: T) -> T {
    let lower = x.floor();
    let diff = x - lower;
    let half = c::<T>(0.5);
    let rounded = if diff < half {
        lower
    } else if diff > half {
        lower + T::one()
    } else if (lower * half).floor() * c(2.0) == lower {
        lower
    } else {
        lower + T::one()
    };
    rounded.copysign(x)
}

/// The exponents [`PowScalar`] computes by a product, a root or a
/// reciprocal, as PyTorch's `pow_tensor_scalar_optimized_kernel` does; the
/// runtime sends every other exponent to [`PowAny`].
///
/// ```
/// use tapir_kernels::elementwise::POW_SPECIAL_EXPONENTS;
/// assert!(POW_SPECIAL_EXPONENTS.contains(&-0.5) && !POW_SPECIAL_EXPONENTS.contains(&1.5));
/// ```
pub const POW_SPECIAL_EXPONENTS: [f64; 7] = [2.0, 3.0, 1.0, 0.5, -0.5, -1.0, -2.0];

#[inline(always)]
fn pow_scalar<T: Float>(x: T, e: T) -> T {
    // `POW_SPECIAL_EXPONENTS`' forms. `e` is the same for every element,
    // so each branch becomes its own vectorised loop; `PowAny`'s one
    // vectorised form in here would make the loop too large to split so.
    let e64 = e.to_f64();
    if e64 == 2.0 {
        x * x
    } else if e64 == 3.0 {
        x * x * x
    } else if e64 == 1.0 {
        x
    } else if e64 == 0.5 {
        x.sqrt()
    } else if e64 == -0.5 {
        T::one() / x.sqrt()
    } else if e64 == -1.0 {
        T::one() / x
    } else if e64 == -2.0 {
        T::one() / (x * x)
    } else {
        x.powf(e)
    }
}

// `fast_exp`, inlined, keeps these loops vectorised: libm's `expf` is a
// scalar call per element (GELU's backward spent 2.5 ns per element in it).
#[inline(always)]
fn sigmoid<T: Float>(x: T) -> T {
    T::one() / (T::one() + (-x).fast_exp())
}

#[inline(always)]
fn gelu_grad<T: Float>(x: T) -> T {
    let cdf = c::<T>(0.5) * (T::one() + (x * c::<T>(std::f64::consts::FRAC_1_SQRT_2)).erf());
    let pdf = (c::<T>(-0.5) * x * x).fast_exp() * c::<T>(0.398_942_280_401_432_7);
    cdf + x * pdf
}

fn clamp_int(x: i64, lo: f64, hi: f64) -> i64 {
    let lo = if lo.is_finite() {
        lo.ceil() as i64
    } else {
        i64::MIN
    };
    let hi = if hi.is_finite() {
        hi.floor() as i64
    } else {
        i64::MAX
    };
    x.max(lo).min(hi)
}

unary_rows! {
    /// `-x`.
    Neg = "neg", |x| -x, cuda "-v", int |x| x.wrapping_neg();
    /// `|x|`.
    Abs = "abs", |x| x.abs(), cuda "fabsf(v)", int |x| x.wrapping_abs();
    /// -1, 0 or 1 (NaN stays NaN).
    Sign = "sign", |x| sign(x), cuda "sign_f(v)", int |x| x.signum();
    /// `e^x`.
    Exp = "exp", |x| x.vec_exp(), cuda "expf(v)", fast |x| x.exp_mid(), rare |x| x.beyond_exp_mid();
    /// The natural logarithm.
    Log = "log", |x| x.vec_ln(), cuda "logf(v)", domain Positive, fast |x| x.ln_mid(), rare |x| x.beyond_log_mid();
    /// `ln(1 + x)`.
    Log1p = "log1p", |x| x.vec_ln_1p(), cuda "log1pf(v)", domain Positive;
    /// The square root.
    Sqrt = "sqrt", |x| x.sqrt(), cuda "sqrtf(v)", domain Positive;
    /// `1 / sqrt(x)`.
    Rsqrt = "rsqrt", |x| x.sqrt().recip(), cuda "1.0f / sqrtf(v)", domain Positive;
    /// The sine.
    Sin = "sin", |x| x.vec_sin(), cuda "sinf(v)", fast |x| x.fast_sin(), rare |x| x.beyond_fast_trig();
    /// The cosine.
    Cos = "cos", |x| x.vec_cos(), cuda "cosf(v)", fast |x| x.fast_cos(), rare |x| x.beyond_fast_trig();
    /// The hyperbolic tangent.
    Tanh = "tanh", |x| x.fast_tanh(), cuda "tanhf(v)";
    /// The error function.
    Erf = "erf", |x| x.erf(), cuda "erff(v)";
    /// `1 / (1 + e^-x)`.
    Sigmoid = "sigmoid", |x| sigmoid(x), cuda "1.0f / (1.0f + expf(-v))";
    /// `max(x, 0)`, NaN kept.
    Relu = "relu", |x| if x > T::zero() || x.is_nan() { x } else { T::zero() },
        cuda "(v > 0.0f || v != v) ? v : 0.0f", int |x| x.max(0);
    /// `x * sigmoid(x)` (SiLU, swish).
    Silu = "silu", |x| x * sigmoid(x), cuda "v / (1.0f + expf(-v))";
    /// The derivative of SiLU: `s (1 + x (1 - s))` with `s = sigmoid(x)`.
    SiluGrad = "silu_grad", |x| {
        let s = sigmoid(x);
        s * (T::one() + x * (T::one() - s))
    }, cuda "silu_grad_f(v)";
    /// The exact GELU, `x * Φ(x)`.
    Gelu = "gelu", |x| c::<T>(0.5) * x * (T::one() + (x * c::<T>(std::f64::consts::FRAC_1_SQRT_2)).erf()),
        cuda "0.5f * v * (1.0f + erff(v * 0.70710678118654752f))";
    /// The derivative of the exact GELU: `Φ(x) + x φ(x)`.
    GeluGrad = "gelu_grad", |x| gelu_grad(x), cuda "gelu_grad_f(v)";
    /// `x * relu6(x + 3) / 6` (PyTorch's `hardswish`).
    Hardswish = "hardswish", |x| x * (x + c(3.0)).max(T::zero()).min(c(6.0)) / c(6.0),
        cuda "v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f", domain Wide;
    /// The derivative of hardswish as PyTorch (2.15) takes it: 0 up to -3,
    /// `x / 3 + 0.5` strictly between, 1 from 3 (at the kinks the
    /// subgradient of minimum norm).
    HardswishGrad = "hardswish_grad",
        |x| if x <= c(-3.0) { T::zero() } else if x < c(3.0) { x / c(3.0) + c(0.5) } else { T::one() },
        cuda "v <= -3.0f ? 0.0f : (v < 3.0f ? v / 3.0f + 0.5f : 1.0f)", domain Wide;
    /// `x ^ e` for a scalar exponent.
    PowScalar { e } = "pow_scalar", |x| pow_scalar(x, e), cuda "pow_scalar_f(v, p0)", sample [3.0];
    /// `x ^ e` for a scalar exponent as `e^(e ln x)` (vectorised on the
    /// CPU, within 1 ulp for f32): the exponents [`PowScalar`] has no
    /// special form for.
    PowAny { e } = "pow_any", |x| x.vec_powf(e), cuda "powf(v, p0)", sample [1.5], domain Positive,
        fast |x| x.fast_powf(e), rare |x| x.beyond_fast_powf(e);
    /// `x` above 0, `slope * x` otherwise.
    LeakyRelu { slope } = "leaky_relu", |x| if x > T::zero() { x } else { x * slope },
        cuda "v > 0.0f ? v : v * p0", sample [0.1];
    /// 1 above 0, `slope` otherwise: the derivative of leaky relu.
    LeakyStep { slope } = "leaky_step", |x| if x > T::zero() { T::one() } else { slope },
        cuda "v > 0.0f ? 1.0f : p0", sample [0.1];
    /// `x` limited to `[lo, hi]` (NaN kept).
    Clamp { lo, hi } = "clamp", |x| if x.is_nan() { x } else { x.max(lo).min(hi) },
        cuda "v != v ? v : fminf(fmaxf(v, p0), p1)", int |x| clamp_int(x, lo, hi), sample [-0.5, 0.25];
    /// 1 strictly inside `(lo, hi)` else 0: the derivative of clamp, 0 at
    /// a finite bound (PyTorch's minimum-norm subgradient, as relu's at 0;
    /// an infinite bound is no bound).
    ClampMask { lo, hi } = "clamp_mask",
        |x| if (x > lo || lo.is_infinite()) && (x < hi || hi.is_infinite()) { T::one() } else { T::zero() },
        cuda "((v > p0 || isinf(p0)) && (v < p1 || isinf(p1))) ? 1.0f : 0.0f", sample [-0.5, 0.25];
    /// The largest integer not above `x` (integers pass through).
    Floor = "floor", |x| x.floor(), cuda "floorf(v)", int |x| x, domain Wide;
    /// The smallest integer not below `x` (integers pass through).
    Ceil = "ceil", |x| x.ceil(), cuda "ceilf(v)", int |x| x, domain Wide;
    /// The nearest integer, halves to even (integers pass through).
    Round = "round", |x| round_half_even(x), cuda "rintf(v)", int |x| x, domain Wide;
    /// `x` with its fraction dropped, toward zero (integers pass through).
    Trunc = "trunc", |x| x.trunc(), cuda "truncf(v)", int |x| x, domain Wide;
    /// The tangent.
    Tan = "tan", |x| x.vec_tan(), cuda "tanf(v)", domain Unit, fast |x| x.fast_tan(), rare |x| x.beyond_fast_trig();
    /// The arcsine (NaN outside `[-1, 1]`).
    Asin = "asin", |x| x.vec_asin(), cuda "asinf(v)", domain Unit;
    /// The arccosine (NaN outside `[-1, 1]`).
    Acos = "acos", |x| x.vec_acos(), cuda "acosf(v)", domain Unit;
    /// The arctangent.
    Atan = "atan", |x| x.vec_atan(), cuda "atanf(v)";
    /// The hyperbolic sine.
    Sinh = "sinh", |x| x.vec_sinh(), cuda "sinhf(v)";
    /// The hyperbolic cosine.
    Cosh = "cosh", |x| x.vec_cosh(), cuda "coshf(v)";
    /// The inverse hyperbolic sine.
    Asinh = "asinh", |x| special::asinh(x), cuda "asinhf(v)";
    /// The inverse hyperbolic cosine (NaN below 1).
    Acosh = "acosh", |x| special::acosh(x), cuda "acoshf(v)", domain AboveOne;
    /// The inverse hyperbolic tangent (NaN outside `[-1, 1]`).
    Atanh = "atanh", |x| x.atanh(), cuda "atanhf(v)", domain Unit;
    /// `e^x - 1`, exact near zero.
    Expm1 = "expm1", |x| x.vec_expm1(), cuda "expm1f(v)";
    /// The base-2 logarithm.
    Log2 = "log2", |x| x.vec_log2(), cuda "log2f(v)", domain Positive, fast |x| x.log2_mid(), rare |x| x.beyond_log_mid();
    /// The base-10 logarithm.
    Log10 = "log10", |x| x.vec_log10(), cuda "log10f(v)", domain Positive, fast |x| x.log10_mid(), rare |x| x.beyond_log_mid();
    /// `2^x`.
    Exp2 = "exp2", |x| x.exp2(), cuda "exp2f(v)";
    /// `ln |Γ(x)|` (∞ at the non-positive integers).
    Lgamma = "lgamma", |x| x.lgamma(), cuda "lgammaf(v)", domain Positive;
    /// The digamma function ψ(x), `lgamma`'s derivative.
    Digamma = "digamma", |x| special::digamma(x), cuda "digamma_f(v)", domain Positive;
    /// The polygamma function ψ⁽ⁿ⁾(x) for a whole `n` ≥ 0.
    Polygamma { n } = "polygamma", |x| special::polygamma(n.to_f64() as u32, x), cuda "polygamma_f(p0, v)",
        sample [1.0], domain Positive;
    /// The complementary error function `1 - erf(x)`.
    Erfc = "erfc", |x| x.erfc(), cuda "erfcf(v)";
    /// The inverse error function (±∞ at ±1, NaN beyond).
    Erfinv = "erfinv", |x| special::erfinv(x), cuda "erfinv_f(v)", domain Unit;
    /// The modified Bessel function of the first kind of order 0, I₀.
    I0 = "i0", |x| T::from_f64(special::bessel_i0(x.to_f64())), cuda "bessel_f(v, 0.0, false)";
    /// `e^-|x| I₀(x)`, I₀ scaled not to overflow.
    I0e = "i0e", |x| T::from_f64(special::bessel_i0e(x.to_f64())), cuda "bessel_f(v, 0.0, true)";
    /// The modified Bessel function of the first kind of order 1, I₁.
    I1 = "i1", |x| T::from_f64(special::bessel_i1(x.to_f64())), cuda "bessel_f(v, 1.0, false)";
    /// `e^-|x| I₁(x)`.
    I1e = "i1e", |x| T::from_f64(special::bessel_i1e(x.to_f64())), cuda "bessel_f(v, 1.0, true)";
    /// The scaled complementary error function `e^(x²) erfc(x)`.
    Erfcx = "erfcx", |x| T::from_f64(special::erfcx(x.to_f64())), cuda "(float)erfcx_d((double)v)";
    /// The log of the standard normal CDF, accurate deep in the left tail.
    LogNdtr = "log_ndtr", |x| T::from_f64(special::log_ndtr(x.to_f64())),
        cuda "(float)log_ndtr_d((double)v)", domain Wide;
    /// The standard normal quantile Φ⁻¹ (±∞ at 1 and 0, NaN outside).
    Ndtri = "ndtri", |x| T::from_f64(special::ndtri(x.to_f64())), cuda "(float)ndtri_d((double)v)",
        domain Probability;
    /// `x * k` for a scalar `k` (in-place scaling).
    MulScalar { k } = "mul_scalar", |x| x * k, cuda "v * p0", int |x| x.wrapping_mul(k as i64), sample [-1.5];
    /// `x + k` for a scalar `k` (in-place shifts, counters).
    AddScalar { k } = "add_scalar", |x| x + k, cuda "v + p0", int |x| x.wrapping_add(k as i64), sample [0.75];
}

binary_rows! {
    /// `a + b`.
    Add = "add", |a, b| a + b, cuda "u + v", int |a, b| a.wrapping_add(b);
    /// `a - b`.
    Sub = "sub", |a, b| a - b, cuda "u - v", int |a, b| a.wrapping_sub(b);
    /// `a * b`.
    Mul = "mul", |a, b| a * b, cuda "u * v", int |a, b| a.wrapping_mul(b);
    /// `a / b` (true division).
    Div = "div", |a, b| a / b, cuda "u / v";
    /// `a ^ b`.
    Pow = "pow", |a, b| a.vec_powf(b), cuda "powf(u, v)", domain Positive;
    /// The larger operand, NaN propagating (`torch.maximum`).
    Maximum = "maximum", |a, b| if a.is_nan() || a > b { a } else { b },
        cuda "(u != u || u > v) ? u : v", int |a, b| a.max(b);
    /// The smaller operand, NaN propagating (`torch.minimum`).
    Minimum = "minimum", |a, b| if a.is_nan() || a < b { a } else { b },
        cuda "(u != u || u < v) ? u : v", int |a, b| a.min(b);
    /// The angle of the point `(b, a)`: `atan(a / b)` in the right
    /// quadrant (`torch.atan2(input=a, other=b)`).
    Atan2 = "atan2", |a, b| a.atan2(b), cuda "atan2f(u, v)";
    /// `sqrt(a² + b²)` without overflow or underflow on the way (libm's
    /// `hypot`; `torch.hypot`).
    Hypot = "hypot", |a, b| a.hypot(b), cuda "hypotf(u, v)";
    /// The Hurwitz zeta function ζ(a, b) = Σₖ (k + b)^-a (∞ at a = 1, NaN
    /// below; `torch.special.zeta`).
    Zeta = "zeta", |a, b| special::zeta(a, b), cuda "zeta_f(u, v)", domain AboveOne;
    /// C's `fmod`: the remainder of `a / b` truncated, with `a`'s sign.
    Fmod = "fmod", |a, b| a % b, cuda "fmodf(u, v)", int |a, b| a.wrapping_rem(b);
    /// Python's modulus: the remainder with `b`'s sign (PyTorch's
    /// `remainder`: `fmod`, plus `b` when the signs differ).
    Remainder = "remainder", |a, b| remainder(a, b),
        cuda "(fmodf(u, v) != 0.0f && ((v < 0.0f) != (fmodf(u, v) < 0.0f))) ? fmodf(u, v) + v : fmodf(u, v)",
        int |a, b| { let m = a.wrapping_rem(b); if m != 0 && ((b < 0) != (m < 0)) { m + b } else { m } };
    /// `a`'s magnitude with `b`'s sign bit (C's `copysign`, `torch.copysign`):
    /// -0.0 and a negative NaN count as negative.
    Copysign = "copysign", |a, b| a.copysign(b), cuda "copysignf(u, v)";
    /// `a + alpha * b` (PyTorch's `add(.., alpha=)`).
    AddScaled { alpha } = "add_scaled", |a, b| a + alpha * b, cuda "u + p0 * v", sample -0.5;
    /// `b`: the second operand (an assignment, as `copy_`).
    Second = "second", |a, b| { let _ = a; b }, cuda "v", int |a, b| { let _ = a; b };
    /// GELU's backward in one pass: the upstream gradient `a` times
    /// `gelu'(b)` at the input `b` (was a map, a buffer and a multiply).
    GeluBackward = "gelu_backward", |a, b| a * gelu_grad(b), cuda "u * gelu_grad_f(v)";
    /// ReLU's backward in one pass (PyTorch's `threshold_backward` at 0):
    /// the upstream gradient `a` where the output `b` is above 0 or NaN,
    /// else 0 (was a step map, a buffer and a multiply).
    ReluBackward = "relu_backward", |a, b| if b <= T::zero() { T::zero() } else { a },
        cuda "v <= 0.0f ? 0.0f : u";
}

/// An elementwise comparison, to bool (`<name>_<dtype>` kernels in `cu/copy.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

impl Compare {
    /// Every comparison.
    pub const ALL: [Compare; 6] = [
        Compare::Eq,
        Compare::Ne,
        Compare::Lt,
        Compare::Le,
        Compare::Gt,
        Compare::Ge,
    ];

    /// The kernel (and PyTorch op) name.
    pub fn name(self) -> &'static str {
        match self {
            Compare::Eq => "eq",
            Compare::Ne => "ne",
            Compare::Lt => "lt",
            Compare::Le => "le",
            Compare::Gt => "gt",
            Compare::Ge => "ge",
        }
    }

    /// The comparison of two values.
    ///
    /// ```
    /// use tapir_kernels::elementwise::Compare;
    /// assert!(Compare::Le.apply(1.0, 1.0) && !Compare::Ne.apply(2, 2));
    /// ```
    #[inline(always)]
    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Compare::Eq => a == b,
            Compare::Ne => a != b,
            Compare::Lt => a < b,
            Compare::Le => a <= b,
            Compare::Gt => a > b,
            Compare::Ge => a >= b,
        }
    }
}

/// CUDA helpers the rows' expressions call.
/// Device functions the rows' CUDA expressions call.
pub(crate) const CUDA_HELPERS: &str = r#"
__device__ __forceinline__ float sign_f(float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); }
__device__ __forceinline__ float pow_scalar_f(float v, float e) {
    if (e == 2.0f) return v * v;
    if (e == 3.0f) return v * v * v;
    if (e == 1.0f) return v;
    if (e == 0.5f) return sqrtf(v);
    if (e == -0.5f) return 1.0f / sqrtf(v);
    if (e == -1.0f) return 1.0f / v;
    if (e == -2.0f) return 1.0f / (v * v);
    return powf(v, e);
}
__device__ __forceinline__ float gelu_grad_f(float v) {
    float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752f));
    float pdf = expf(-0.5f * v * v) * 0.3989422804014327f;
    return cdf + v * pdf;
}
__device__ __forceinline__ float silu_grad_f(float v) {
    float s = 1.0f / (1.0f + expf(-v));
    return s * (1.0f + v * (1.0f - s));
}
"#;

/// The CUDA source of every elementwise kernel: the `UNARY`/`BINARY`
/// templates of `cu/elementwise.cu`, the helpers, and one instantiation
/// per row, for f32, f16 and bf16.
pub fn cuda_source(templates: &str) -> String {
    let mut s = String::from(templates);
    s.push_str(CUDA_HELPERS);
    s.push_str(special::CUDA_SPECIAL);
    s.push_str(special::CUDA_BESSEL);
    s.push_str(special::CUDA_NORMAL);
    for r in UNARY_ROWS {
        s.push_str(&format!("UNARY({}, {})\n", r.name, r.cuda));
    }
    for r in BINARY_ROWS {
        s.push_str(&format!("BINARY({}, {})\n", r.name, r.cuda));
    }
    s
}

#[cfg(test)]
#[path = "elementwise_tests.rs"]
mod tests;
