//! Elementwise binary ops with PyTorch's broadcasting and type promotion,
//! comparisons, logical ops, `where`, and the operator overloads.

use super::{broadcast_shapes, same_device};
use crate::storage::Storage;
use crate::trace::{self, Attr};
use crate::{DType, Tensor};
use tapir_kernels::elementwise::{self as ew, BinaryFn, Compare};

/// Broadcasts and promotes two operands to a common shape and dtype.
fn prepare(a: &Tensor, b: &Tensor, op: &str, float_only: bool) -> (Tensor, Tensor, Vec<usize>) {
    same_device(a, b, op);
    let shape = broadcast_shapes(a.shape(), b.shape(), op);
    let mut dtype = DType::result_type(a, b);
    if float_only {
        dtype = dtype.to_float();
    }
    let cast = |t: &Tensor| {
        if t.dtype() == dtype {
            t.detach()
        } else {
            crate::no_grad(|| t.to_dtype(dtype))
        }
    };
    (cast(a), cast(b), shape)
}

/// `op(a, b)` with broadcasting, recording nothing.
pub(crate) fn apply<F: BinaryFn>(
    a: &Tensor,
    b: &Tensor,
    op: &F,
    name: &str,
    float_only: bool,
) -> Tensor {
    let (a, b, shape) = prepare(a, b, name, float_only);
    super::elementwise([a, b], &shape, |[a, b], l| {
        if a.same_storage(b) {
            let s = a.read();
            s.binary(&l[0], &s, &l[1], op)
        } else {
            a.read().binary(&l[0], &b.read(), &l[1], op)
        }
    })
}

/// Reduces a gradient to an input's shape and dtype.
fn fit(g: Tensor, like: &(Vec<usize>, DType)) -> Tensor {
    let g = g.sum_to(&like.0);
    if g.dtype() == like.1 {
        g
    } else {
        g.to_dtype(like.1)
    }
}

/// A recorded binary op; `bw(a, b, g, needs)` returns both input gradients
/// at the broadcast shape (`fit` reduces them).
pub(super) fn binary<F: BinaryFn>(
    a: &Tensor,
    b: &Tensor,
    op: F,
    name: &'static str,
    float_only: bool,
    save: bool,
    bw: impl Fn(Option<&(Tensor, Tensor)>, &Tensor, &[bool]) -> [Option<Tensor>; 2] + Send + 'static,
) -> Tensor {
    // "MaximumBackward0" -> "maximum": errors name the op as the user wrote it.
    let user_name = name.split("Backward").next().unwrap_or(name).to_lowercase();
    let out = apply(a, b, &op, &user_name, float_only);
    let metas = [
        (a.shape().to_vec(), a.dtype()),
        (b.shape().to_vec(), b.dtype()),
    ];
    Tensor::record(out, name, &[a, b], || {
        let saved = save.then(|| (a.saved(), b.saved()));
        move |g: &Tensor, needs: &[bool]| {
            let [ga, gb] = bw(saved.as_ref(), g, needs);
            vec![ga.map(|t| fit(t, &metas[0])), gb.map(|t| fit(t, &metas[1]))]
        }
    })
}

/// A scalar as a 0-d tensor of the dtype `x op value` should have.
pub(crate) fn scalar_for(x: &Tensor, value: f64) -> Tensor {
    let dtype = if x.dtype().is_float() || value.fract() == 0.0 && x.dtype() != DType::Bool {
        x.dtype()
    } else {
        DType::F32
    };
    super::creation::filled_on(&[], value, dtype, x.device())
}

impl Tensor {
    /// `self + other` with broadcasting and type promotion.
    pub fn add(&self, other: &Tensor) -> Tensor {
        trace::op("add", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Add,
                "AddBackward0",
                false,
                false,
                |_, g, n| [n[0].then(|| g.clone()), n[1].then(|| g.clone())],
            )
        })
    }

    /// `self - other` with broadcasting and type promotion.
    #[doc(alias = "subtract")]
    pub fn sub(&self, other: &Tensor) -> Tensor {
        trace::op("sub", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Sub,
                "SubBackward0",
                false,
                false,
                |_, g, n| [n[0].then(|| g.clone()), n[1].then(|| g.neg())],
            )
        })
    }

    /// `self * other` with broadcasting and type promotion.
    #[doc(alias = "multiply")]
    pub fn mul(&self, other: &Tensor) -> Tensor {
        trace::op("mul", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Mul,
                "MulBackward0",
                false,
                true,
                |s, g, n| {
                    let (a, b) = s.unwrap();
                    [n[0].then(|| g * b), n[1].then(|| g * a)]
                },
            )
        })
    }

    /// True division (integers divide as floats, as in PyTorch).
    #[doc(alias = "divide")]
    #[doc(alias = "true_divide")]
    pub fn div(&self, other: &Tensor) -> Tensor {
        trace::op("div", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Div,
                "DivBackward0",
                true,
                true,
                |s, g, n| {
                    let (a, b) = s.unwrap();
                    [
                        n[0].then(|| g / b),
                        n[1].then(|| &(&(g * a) / &(b * b)) * -1.0),
                    ]
                },
            )
        })
    }

    /// `self ^ other` elementwise.
    pub fn pow(&self, other: &Tensor) -> Tensor {
        trace::op("pow", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Pow,
                "PowBackward1",
                true,
                true,
                |s, g, n| {
                    let (a, b) = s.unwrap();
                    let ga = n[0].then(|| g * &(b * &a.pow(&(b - 1.0))));
                    // d/db a^b = a^b ln a, taken as 0 where a == 0 (PyTorch's convention).
                    let gb = n[1].then(|| {
                        let y = a.pow(b);
                        let term = &y * &a.log();
                        g * &Tensor::where_(&a.eq_scalar(0.0), &Tensor::zeros_like(&term), &term)
                    });
                    [ga, gb]
                },
            )
        })
    }

    /// Elementwise maximum; the gradient goes to the larger input (split on ties).
    pub fn maximum(&self, other: &Tensor) -> Tensor {
        trace::op("maximum", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Maximum,
                "MaximumBackward0",
                false,
                true,
                |s, g, n| extreme_grads(s.unwrap(), g, n, true),
            )
        })
    }

    /// Elementwise minimum; the gradient goes to the smaller input (split on ties).
    pub fn minimum(&self, other: &Tensor) -> Tensor {
        trace::op("minimum", [self, other], Vec::new, || {
            binary(
                self,
                other,
                ew::Minimum,
                "MinimumBackward0",
                false,
                true,
                |s, g, n| extreme_grads(s.unwrap(), g, n, false),
            )
        })
    }

    /// Elementwise maximum ignoring NaN (`torch.fmax`, C's `fmax`): where
    /// one input is NaN the other is taken, NaN only where both are.
    /// Elsewhere it is [`Tensor::maximum`], gradient split on ties, as
    /// PyTorch's.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0], &[3]);
    /// let b = Tensor::from_vec(vec![2.0f32, 5.0, f32::NAN], &[3]);
    /// assert_eq!(a.fmax(&b).to_vec::<f32>(), vec![2.0, 5.0, 3.0]);
    /// ```
    pub fn fmax(&self, other: &Tensor) -> Tensor {
        ignoring_nan(self, other, self.maximum(other))
    }

    /// Elementwise minimum ignoring NaN (`torch.fmin`), as
    /// [`Tensor::fmax`] with [`Tensor::minimum`].
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let a = Tensor::from_vec(vec![1.0f32, f32::NAN, 3.0], &[3]);
    /// let b = Tensor::from_vec(vec![2.0f32, 5.0, f32::NAN], &[3]);
    /// assert_eq!(a.fmin(&b).to_vec::<f32>(), vec![1.0, 5.0, 3.0]);
    /// ```
    pub fn fmin(&self, other: &Tensor) -> Tensor {
        ignoring_nan(self, other, self.minimum(other))
    }

    /// `cond ? x : y` with broadcasting (`torch.where`).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3]);
    /// let y = Tensor::where_(&x.gt_scalar(0.0), &x, &Tensor::zeros(&[1]));
    /// assert_eq!(y.to_vec::<f32>(), vec![1.0, 0.0, 3.0]);
    /// ```
    pub fn where_(cond: &Tensor, x: &Tensor, y: &Tensor) -> Tensor {
        trace::op("where_", [cond, x, y], Vec::new, || {
            same_device(x, y, "where");
            same_device(cond, x, "where");
            let cond_b = if cond.dtype() == DType::Bool {
                cond.clone()
            } else {
                cond.ne_scalar(0.0)
            };
            let xy = broadcast_shapes(x.shape(), y.shape(), "where");
            let shape = broadcast_shapes(cond.shape(), &xy, "where");
            let dtype = DType::result_type(x, y);
            let (xc, yc) = (x.to_dtype(dtype).detach(), y.to_dtype(dtype).detach());
            // Laid out as PyTorch's, the condition first.
            let operands = [cond_b.clone(), xc, yc];
            let out = super::elementwise(operands, &shape, |[c, x, y], l| {
                // x and y may share a buffer (where_(c, t, t)): take its lock once.
                let (cs, xs) = (c.read(), x.read());
                let ys = (!y.same_storage(x)).then(|| y.read());
                Storage::select_where(&cs, &l[0], &xs, &l[1], ys.as_deref().unwrap_or(&xs), &l[2])
            });
            let metas = [
                (x.shape().to_vec(), x.dtype()),
                (y.shape().to_vec(), y.dtype()),
            ];
            Tensor::record(out, "WhereBackward0", &[x, y], || {
                let cond = cond_b.saved();
                move |g: &Tensor, n: &[bool]| {
                    let z = Tensor::zeros_like(g);
                    vec![
                        n[0].then(|| fit(Tensor::where_(&cond, g, &z), &metas[0])),
                        n[1].then(|| fit(Tensor::where_(&cond, &z, g), &metas[1])),
                    ]
                }
            })
        })
    }

    /// Fills positions where `mask` is true with `value`.
    pub fn masked_fill(&self, mask: &Tensor, value: f64) -> Tensor {
        trace::op(
            "masked_fill",
            [self, mask],
            || vec![("value", Attr::Float(value))],
            || {
                assert!(
                    mask.dtype() == DType::Bool,
                    "masked_fill: mask must be bool, got {}",
                    mask.dtype()
                );
                let shape = broadcast_shapes(self.shape(), mask.shape(), "masked_fill");
                assert!(
                    shape == self.shape(),
                    "masked_fill: mask of shape {:?} does not broadcast to {:?}",
                    mask.shape(),
                    self.shape()
                );
                Tensor::where_(mask, &scalar_for(self, value), self)
            },
        )
    }
}

fn extreme_grads(
    (a, b): &(Tensor, Tensor),
    g: &Tensor,
    n: &[bool],
    max: bool,
) -> [Option<Tensor>; 2] {
    let (wins_a, wins_b) = if max {
        (a.gt(b), b.gt(a))
    } else {
        (a.lt(b), b.lt(a))
    };
    let tie = a.eq(b);
    let half = &tie.to_dtype(g.dtype()) * 0.5;
    let ka = &wins_a.to_dtype(g.dtype()) + &half;
    let kb = &wins_b.to_dtype(g.dtype()) + &half;
    [n[0].then(|| g * &ka), n[1].then(|| g * &kb)]
}

/// `extreme` (of `a` and `b`) where neither is NaN, else the one that is
/// not (`b`, NaN, where both are): fmax's and fmin's rule.
fn ignoring_nan(a: &Tensor, b: &Tensor, extreme: Tensor) -> Tensor {
    let not_a = Tensor::where_(&a.isnan(), b, &extreme);
    Tensor::where_(&b.isnan(), a, &not_a)
}

macro_rules! comparisons {
    ($($name:ident, $sname:ident, $cmp:ident, $doc:literal $(, alias $alias:literal)?;)*) => {
        impl Tensor {
            $(
                #[doc = $doc]
                $(#[doc(alias = $alias)])?
                pub fn $name(&self, other: &Tensor) -> Tensor {
                    trace::op(stringify!($name), [self, other], Vec::new, || {
                        let (a, b, shape) = prepare(self, other, stringify!($name), false);
                        super::elementwise([a, b], &shape, |[a, b], l| {
                            if a.same_storage(b) {
                                let s = a.read();
                                s.compare(&l[0], &s, &l[1], Compare::$cmp)
                            } else {
                                a.read().compare(&l[0], &b.read(), &l[1], Compare::$cmp)
                            }
                        })
                    })
                }

                #[doc = $doc]
                pub fn $sname(&self, value: f64) -> Tensor {
                    self.$name(&scalar_for(self, value))
                }
            )*
        }
    };
}

comparisons! {
    eq, eq_scalar, Eq, "Elementwise `==`, to bool.";
    ne, ne_scalar, Ne, "Elementwise `!=`, to bool.", alias "not_equal";
    lt, lt_scalar, Lt, "Elementwise `<`, to bool.", alias "less";
    le, le_scalar, Le, "Elementwise `<=`, to bool.", alias "less_equal";
    gt, gt_scalar, Gt, "Elementwise `>`, to bool.", alias "greater";
    ge, ge_scalar, Ge, "Elementwise `>=`, to bool.", alias "greater_equal";
}

impl Tensor {
    fn as_bool(&self) -> Tensor {
        if self.dtype() == DType::Bool {
            self.clone()
        } else {
            self.ne_scalar(0.0)
        }
    }

    /// Elementwise logical and (nonzero is true), to bool.
    pub fn logical_and(&self, other: &Tensor) -> Tensor {
        trace::op("logical_and", [self, other], Vec::new, || {
            let b = apply(
                &self.as_bool().to_dtype(DType::U8),
                &other.as_bool().to_dtype(DType::U8),
                &ew::Minimum,
                "logical_and",
                false,
            );
            b.to_dtype(DType::Bool)
        })
    }

    /// Elementwise logical or (nonzero is true), to bool.
    pub fn logical_or(&self, other: &Tensor) -> Tensor {
        trace::op("logical_or", [self, other], Vec::new, || {
            let b = apply(
                &self.as_bool().to_dtype(DType::U8),
                &other.as_bool().to_dtype(DType::U8),
                &ew::Maximum,
                "logical_or",
                false,
            );
            b.to_dtype(DType::Bool)
        })
    }

    /// Elementwise logical not (zero is true), to bool.
    pub fn logical_not(&self) -> Tensor {
        trace::op("logical_not", [self], Vec::new, || {
            self.as_bool().eq_scalar(0.0)
        })
    }
}

macro_rules! operator {
    ($Trait:ident, $method:ident, $f:ident) => {
        impl std::ops::$Trait<&Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$f(self, rhs)
            }
        }
        impl std::ops::$Trait<Tensor> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$f(self, &rhs)
            }
        }
        impl std::ops::$Trait<&Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$f(&self, rhs)
            }
        }
        impl std::ops::$Trait<Tensor> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$f(&self, &rhs)
            }
        }
        impl std::ops::$Trait<f64> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                Tensor::$f(self, &scalar_for(self, rhs))
            }
        }
        impl std::ops::$Trait<f64> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: f64) -> Tensor {
                Tensor::$f(&self, &scalar_for(&self, rhs))
            }
        }
        impl std::ops::$Trait<&Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$f(&scalar_for(rhs, self), rhs)
            }
        }
        impl std::ops::$Trait<Tensor> for f64 {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$f(&scalar_for(&rhs, self), &rhs)
            }
        }
    };
}

operator!(Add, add, add);
operator!(Sub, sub, sub);
operator!(Mul, mul, mul);
operator!(Div, div, div);

impl std::ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}

impl std::ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
