//! `Linear` and `Bilinear`.

use super::init;
use super::module::{Forward, Module, TensorKind};
use crate::Tensor;

/// `y = x Wᵀ + b` (PyTorch's `nn.Linear`), initialised as PyTorch does:
/// kaiming-uniform with a = √5 for the weight, U(±1/√fan_in) for the bias.
///
/// ```
/// use tapir_runtime::{nn::{Forward, Linear}, Tensor};
/// let l = Linear::new(784, 256, true);
/// assert_eq!(l.forward(&Tensor::zeros(&[32, 784])).shape(), &[32, 256]);
/// ```
pub struct Linear {
    /// `[out_features, in_features]`.
    pub weight: Tensor,
    /// `[out_features]`, if any.
    pub bias: Option<Tensor>,
    /// Input width.
    pub in_features: usize,
    /// Output width.
    pub out_features: usize,
}

impl Linear {
    /// `nn.Linear(in_features, out_features, bias)` with PyTorch's initialisation.
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let weight = Tensor::zeros(&[out_features, in_features]);
        init::kaiming_uniform_(&weight, 5f64.sqrt(), init::FanMode::FanIn, "leaky_relu");
        let bias = bias.then(|| {
            let b = Tensor::zeros(&[out_features]);
            let bound = if in_features > 0 {
                1.0 / (in_features as f64).sqrt()
            } else {
                0.0
            };
            init::uniform_(&b, -bound, bound);
            b.requires_grad_(true)
        });
        Linear {
            weight: weight.requires_grad_(true),
            bias,
            in_features,
            out_features,
        }
    }
}

impl Forward for Linear {
    fn forward(&self, x: &Tensor) -> Tensor {
        assert!(
            x.ndim() >= 1 && x.size(-1) == self.in_features,
            "Linear(in_features={}, out_features={}): input of shape {:?} — last dim must be {}",
            self.in_features,
            self.out_features,
            x.shape(),
            self.in_features
        );
        linear(x, &self.weight, self.bias.as_ref())
    }
}

/// `F.linear(x, weight, bias)`: `x Wᵀ + b`. Inside an autocast region all
/// three are cast to its dtype, so the output is in it too (as PyTorch's
/// `linear` is on its lower-precision list).
///
/// ```
/// use tapir_runtime::{nn::linear, Tensor};
/// let y = linear(&Tensor::ones(&[2, 3]), &Tensor::ones(&[4, 3]), Some(&Tensor::ones(&[4])));
/// assert_eq!(y.to_vec::<f32>(), vec![4.0; 8]);
/// ```
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    crate::trace::op("linear", [Some(x), Some(weight), bias], Vec::new, || {
        linear_untraced(x, weight, bias)
    })
}

fn linear_untraced(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
    if let Some((x, w, b)) = crate::amp::cast_affine(x, weight, bias) {
        return linear(&x, &w, b.as_ref());
    }
    match bias {
        // The bias joins the GEMM (one pass, one rounding): rows folded to 2-D.
        Some(b)
            if x.ndim() >= 2
                && weight.ndim() == 2
                && b.ndim() == 1
                && x.shape()[x.ndim() - 1] == weight.shape()[1] =>
        {
            if x.ndim() == 2 {
                return x.addmm_bias(&weight.t(), b);
            }
            let k = weight.shape()[1] as isize;
            let mut shape: Vec<isize> = x.shape().iter().map(|&s| s as isize).collect();
            *shape.last_mut().expect("ndim >= 2") = weight.shape()[0] as isize;
            x.reshape(&[-1, k])
                .addmm_bias(&weight.t(), b)
                .reshape(&shape)
        }
        Some(b) => &x.matmul(&weight.t()) + b,
        None => x.matmul(&weight.t()),
    }
}

/// Visits a `weight` and an optional `bias` (Linear, Conv2d).
pub(crate) fn visit_weight_bias(
    w: &Tensor,
    b: &Option<Tensor>,
    f: &mut dyn FnMut(&str, &Tensor, TensorKind),
) {
    f("weight", w, TensorKind::Parameter);
    if let Some(b) = b {
        f("bias", b, TensorKind::Parameter);
    }
}

/// As [`visit_weight_bias`], mutably.
pub(crate) fn visit_weight_bias_mut(
    w: &mut Tensor,
    b: &mut Option<Tensor>,
    f: &mut dyn FnMut(&str, &mut Tensor, TensorKind),
) {
    f("weight", w, TensorKind::Parameter);
    if let Some(b) = b {
        f("bias", b, TensorKind::Parameter);
    }
}

/// Implements [`Module`] for a layer with a `weight` and an optional
/// `bias` (the convolutions), with the repr each gives and `Display` as it.
macro_rules! weight_bias_module {
    ($($name:ident => |$l:ident| $repr:expr;)*) => {$(
        impl $crate::nn::Module for $name {
            fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, $crate::nn::TensorKind)) {
                $crate::nn::linear::visit_weight_bias(&self.weight, &self.bias, f);
            }
            fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, $crate::nn::TensorKind)) {
                $crate::nn::linear::visit_weight_bias_mut(&mut self.weight, &mut self.bias, f);
            }
            fn repr(&self) -> String {
                let $l = self;
                $repr
            }
        }
        crate::display_as_repr!($name);
    )*};
}
pub(crate) use weight_bias_module;

impl Module for Linear {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_weight_bias(&self.weight, &self.bias, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_weight_bias_mut(&mut self.weight, &mut self.bias, f);
    }
    fn repr(&self) -> String {
        let b = if self.bias.is_some() { "True" } else { "False" };
        format!(
            "Linear(in_features={}, out_features={}, bias={b})",
            self.in_features, self.out_features
        )
    }
}

crate::display_as_repr!(Linear);

/// `nn.Bilinear`: `y = x1ᵀ A x2 + b` per output feature, weight
/// `[out, in1, in2]` and bias `[out]` initialised U(±1/√in1) as PyTorch's;
/// inputs `[*, in1]` and `[*, in2]` give `[*, out]` (one `einsum`).
///
/// ```
/// use tapir_runtime::{nn::{Bilinear, Module}, Tensor};
/// let b = Bilinear::new(3, 4, 5, true);
/// assert_eq!(b.forward(&Tensor::zeros(&[2, 7, 3]), &Tensor::zeros(&[2, 7, 4])).shape(), &[2, 7, 5]);
/// assert_eq!(b.repr(), "Bilinear(in1_features=3, in2_features=4, out_features=5, bias=True)");
/// ```
pub struct Bilinear {
    /// `[out_features, in1_features, in2_features]`.
    pub weight: Tensor,
    /// `[out_features]`, if any.
    pub bias: Option<Tensor>,
}

impl Bilinear {
    /// `nn.Bilinear(in1_features, in2_features, out_features, bias)`.
    pub fn new(in1: usize, in2: usize, out: usize, bias: bool) -> Bilinear {
        let bound = 1.0 / (in1.max(1) as f64).sqrt();
        let uniform = |shape: &[usize]| {
            let t = Tensor::zeros(shape);
            super::init::uniform_(&t, -bound, bound);
            t.requires_grad_(true)
        };
        Bilinear {
            weight: uniform(&[out, in1, in2]),
            bias: bias.then(|| uniform(&[out])),
        }
    }

    /// `x1ᵀ A x2 + b` over the last dims of `input1` and `input2`.
    #[track_caller]
    pub fn forward(&self, input1: &Tensor, input2: &Tensor) -> Tensor {
        let s = self.weight.shape();
        let (out, in1, in2) = (s[0], s[1], s[2]);
        let lead = &input1.shape()[..input1.ndim().saturating_sub(1)];
        assert!(
            input1.ndim() >= 1
                && input1.size(-1) == in1
                && input2.ndim() == input1.ndim()
                && input2.size(-1) == in2
                && input2.shape()[..input2.ndim() - 1] == *lead,
            "Bilinear: expected inputs [*, {in1}] and [*, {in2}] with the same leading dims, got {:?} and {:?}",
            input1.shape(),
            input2.shape()
        );
        let a = input1.reshape(&[-1, in1 as isize]);
        let b = input2.reshape(&[-1, in2 as isize]);
        let mut y = Tensor::einsum("bi,oij,bj->bo", &[&a, &self.weight, &b]);
        if let Some(bias) = &self.bias {
            y = &y + bias;
        }
        let mut shape: Vec<isize> = lead.iter().map(|&d| d as isize).collect();
        shape.push(out as isize);
        y.reshape(&shape)
    }
}

impl Module for Bilinear {
    fn visit(&self, f: &mut dyn FnMut(&str, &Tensor, TensorKind)) {
        visit_weight_bias(&self.weight, &self.bias, f);
    }
    fn visit_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor, TensorKind)) {
        visit_weight_bias_mut(&mut self.weight, &mut self.bias, f);
    }
    fn repr(&self) -> String {
        let s = self.weight.shape();
        format!(
            "Bilinear(in1_features={}, in2_features={}, out_features={}, bias={})",
            s[1],
            s[2],
            s[0],
            if self.bias.is_some() { "True" } else { "False" }
        )
    }
}

crate::display_as_repr!(Bilinear);
