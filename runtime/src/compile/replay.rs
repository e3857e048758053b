//! How a recorded op runs again: its name and attributes back to the tensor
//! call that made it. Replays call the same public ops as eager code, so a
//! replayed graph records the same autograd nodes and computes the same bits.
//! Shape-taking ops take the shape the capture saw (a compiled graph is
//! specialised to its input signature). An op missing here is a graph break,
//! named in [`super::Compiled::explain`]. In-place ops replay too, in
//! order; a graph holding one is not fused (a fused kernel runs at its last
//! op's place, and could read a value an in-place op changed in between).

use crate::nn::{linear, scaled_dot_product_attention};
use crate::ops::creation::{device_of_attr, filled_on, range_of_len};
use crate::storage::Arange;
use crate::trace::{AttrLookup, Attrs};
use crate::{Conv2dOptions, DType, Device, Tensor};

/// What one replay gets: the op's inputs (absent optional ones `None`), its
/// attributes, the shapes of the outputs the capture saw (a dim may be a
/// multiple of the batch, `batch` in this run) and their dtypes.
pub(crate) struct Args<'a> {
    pub inputs: &'a [Option<Tensor>],
    pub attrs: &'a Attrs,
    pub out_shapes: &'a [Vec<Dim>],
    pub out_dtypes: &'a [DType],
    pub batch: usize,
}

/// One dim of a recorded shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    /// The same in every run.
    Fixed(usize),
    /// This many times the batch size (a graph generalised over batches).
    Batch(usize),
}

/// A recorded shape in a run with batch size `batch`.
pub(crate) fn concrete(shape: &[Dim], batch: usize) -> Vec<usize> {
    shape
        .iter()
        .map(|d| match *d {
            Dim::Fixed(n) => n,
            Dim::Batch(k) => k * batch,
        })
        .collect()
}

/// A shape the capture saw, every dim fixed.
pub(crate) fn fixed(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d)).collect()
}

impl Args<'_> {
    fn x(&self, i: usize) -> &Tensor {
        self.inputs[i]
            .as_ref()
            .expect("compile: a recorded op lost a required input")
    }
    fn opt(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i).and_then(|t| t.as_ref())
    }
    fn all(&self) -> Vec<&Tensor> {
        self.inputs.iter().flatten().collect()
    }
    fn int(&self, k: &str) -> i64 {
        self.attrs.int(k)
    }
    fn float(&self, k: &str) -> f64 {
        self.attrs.float(k)
    }
    fn pair(&self, k: &str) -> (usize, usize) {
        match self.attrs.ints(k)[..] {
            [a, b] => (a as usize, b as usize),
            _ => (0, 0),
        }
    }
    /// A convolution's options, as `ops::conv::conv_attrs` recorded them.
    fn conv_opts(&self) -> Conv2dOptions {
        Conv2dOptions {
            stride: self.pair("stride"),
            padding: self.pair("padding"),
            dilation: self.pair("dilation"),
            groups: self.int("groups") as usize,
        }
    }
    fn isizes(&self, k: &str) -> Vec<isize> {
        self.attrs.ints(k).iter().map(|&d| d as isize).collect()
    }
    fn shape(&self, i: usize) -> Vec<usize> {
        concrete(&self.out_shapes[i], self.batch)
    }
    /// A creation op's output made again: its shape, dtype and device
    /// (the `device` attribute) filled with `value`.
    fn filled(&self, value: f64) -> Tensor {
        filled_on(&self.shape(0), value, self.out_dtypes[0], self.device())
    }
    /// An arange's output made again: the recorded start and step, the
    /// output's length (a batch-sized range follows the batch), dtype and
    /// the recorded device.
    fn range(&self) -> Tensor {
        let range = match self.out_dtypes[0] {
            DType::I64 => Arange::I64 {
                start: self.int("start"),
                step: self.int("step"),
            },
            _ => Arange::F32 {
                start: self.float("start"),
                step: self.float("step"),
            },
        };
        range_of_len(self.shape(0)[0], range, self.device())
    }
    /// A creation op's `device` attribute.
    fn device(&self) -> Device {
        device_of_attr(self.int("device"))
    }
    fn out_shape(&self) -> Vec<isize> {
        self.shape(0).iter().map(|&d| d as isize).collect()
    }
}

/// A replay: the recorded op's outputs, computed anew.
pub(crate) type Replay = fn(&Args) -> Vec<Tensor>;

/// The replay of op `name`, or `None` when compile cannot repeat it yet.
pub(crate) fn lookup(name: &str) -> Option<Replay> {
    if let Some(f) = elementwise(name) {
        return Some(f);
    }
    Some(match name {
        "reshape" | "view" | "flatten" | "flatten_all" | "unflatten" | "squeeze"
        | "squeeze_dim" | "unsqueeze" => |a| vec![a.x(0).reshape(&a.out_shape())],
        "expand" | "broadcast_to" => |a| vec![a.x(0).expand(&a.shape(0))],
        "transpose" => |a| {
            let d = a.isizes("dims");
            vec![a.x(0).transpose(d[0], d[1])]
        },
        "t" => |a| vec![a.x(0).t()],
        "permute" => |a| vec![a.x(0).permute(&a.isizes("perm"))],
        "slice" => |a| {
            let (start, end) = (a.int("start") as isize, a.int("end") as isize);
            vec![
                a.x(0)
                    .slice(a.int("dim") as isize, start, end, a.int("step") as usize),
            ]
        },
        "copysign" => |a| vec![a.x(0).copysign(a.x(1))],
        "bitwise_and" => |a| vec![a.x(0).bitwise_and(a.x(1))],
        "bitwise_or" => |a| vec![a.x(0).bitwise_or(a.x(1))],
        "bitwise_xor" => |a| vec![a.x(0).bitwise_xor(a.x(1))],
        "bitwise_not" => |a| vec![a.x(0).bitwise_not()],
        "bitwise_left_shift" => |a| vec![a.x(0).bitwise_left_shift(a.x(1))],
        "bitwise_right_shift" => |a| vec![a.x(0).bitwise_right_shift(a.x(1))],
        "gcd" => |a| vec![a.x(0).gcd(a.x(1))],
        "lcm" => |a| vec![a.x(0).lcm(a.x(1))],
        "unfold" => |a| {
            let (size, step) = (a.int("size") as usize, a.int("step") as usize);
            vec![a.x(0).unfold(a.int("dim") as isize, size, step)]
        },
        "narrow" => |a| {
            let (start, end) = (a.int("start") as usize, a.int("end") as usize);
            vec![a.x(0).narrow(a.int("dim") as isize, start, end - start)]
        },
        "select" => |a| {
            vec![
                a.x(0)
                    .select(a.int("dim") as isize, a.int("index") as isize),
            ]
        },
        "chunk" | "split" | "tensor_split" => |a| {
            // The pieces the capture saw, as narrow views along `dim`.
            let x = a.x(0);
            let d = a.int("dim");
            let d = if d < 0 { d + x.ndim() as i64 } else { d } as usize;
            let mut at = 0;
            (0..a.out_shapes.len())
                .map(|i| {
                    let len = a.shape(i)[d];
                    let piece = x.narrow(d as isize, at, len);
                    at += len;
                    piece
                })
                .collect()
        },
        "unbind" => |a| a.x(0).unbind(a.int("dim") as isize),
        "cat" => |a| vec![Tensor::cat(&a.all(), a.int("dim") as isize)],
        "pad" => |a| {
            let mode = crate::nn::PadMode::from_code(a.int("mode"), a.float("value"));
            vec![crate::nn::pad_with(a.x(0), &a.attrs.ints("pads"), mode)]
        },
        "cumsum" => |a| vec![a.x(0).cumsum(a.int("dim") as isize)],
        "sort" => |a| {
            let (v, i) = a.x(0).sort(a.int("dim") as isize, a.int("descending") != 0);
            vec![v, i]
        },
        "topk" => |a| {
            let dim = a.int("dim") as isize;
            let (v, i) = a.x(0).topk(a.int("k") as usize, dim, a.int("largest") != 0);
            vec![v, i]
        },
        "flip" => |a| vec![a.x(0).flip(&a.isizes("dims"))],
        "roll" => |a| vec![a.x(0).roll(&a.attrs.ints("shifts"), &a.isizes("dims"))],
        "repeat" => |a| {
            let reps: Vec<usize> = a
                .attrs
                .ints("repeats")
                .iter()
                .map(|&r| r as usize)
                .collect();
            vec![a.x(0).repeat(&reps)]
        },
        "stack" => |a| vec![Tensor::stack(&a.all(), a.int("dim") as isize)],
        "contiguous" => |a| vec![a.x(0).contiguous()],
        "detach" => |a| vec![a.x(0).detach()],
        "to_dtype" | "half" | "float" | "bfloat16" => |a| vec![a.x(0).to_dtype(a.out_dtypes[0])],
        "linear" => |a| vec![linear(a.x(0), a.x(1), a.opt(2))],
        "matmul" => |a| vec![a.x(0).matmul(a.x(1))],
        "mm" => |a| vec![a.x(0).mm(a.x(1))],
        "bmm" => |a| vec![a.x(0).bmm(a.x(1))],
        "layer_norm" => |a| {
            let x = a.x(0);
            let axes = a.int("axes") as usize;
            let normalized = &x.shape()[x.ndim() - axes..];
            vec![x.layer_norm(normalized, a.opt(1), a.opt(2), a.float("eps"))]
        },
        "add_layer_norm" => |a| {
            let x = a.x(0);
            let axes = a.int("axes") as usize;
            let normalized = x.shape()[x.ndim() - axes..].to_vec();
            let (s, y) = x.add_layer_norm(a.x(1), &normalized, a.opt(2), a.opt(3), a.float("eps"));
            vec![s, y]
        },
        "softmax" => |a| vec![a.x(0).softmax(a.int("dim") as isize)],
        "scaled_softmax" => |a| {
            vec![
                a.x(0)
                    .scaled_softmax(a.float("scale"), a.int("is_causal") != 0),
            ]
        },
        "log_softmax" => |a| vec![a.x(0).log_softmax(a.int("dim") as isize)],
        "cross_entropy" => |a| {
            let o = crate::nn::CrossEntropyOptions {
                weight: a.opt(2).cloned(),
                ignore_index: a.int("ignore_index"),
                reduction: crate::nn::Reduction::from_code(a.int("reduction")),
                label_smoothing: a.float("label_smoothing"),
            };
            vec![crate::nn::cross_entropy_with(a.x(0), a.x(1), &o)]
        },
        "linear_cross_entropy_chunked" => |a| {
            let loss = crate::nn::ChunkedLoss {
                x: a.x(0),
                w: a.x(1),
                target: a.x(2),
                bias: a.opt(3),
                class_weight: a.opt(4),
                reduction: crate::nn::Reduction::from_code(a.int("reduction")),
                ignore_index: a.int("ignore_index"),
                chunk: a.int("chunk") as usize,
                allow_retain_graph: a.int("allow_retain_graph") != 0,
            };
            vec![loss.run()]
        },
        "embedding" => |a| vec![a.x(0).embedding(a.x(1))],
        "index_select" => |a| vec![a.x(0).index_select(a.int("dim") as isize, a.x(1))],
        "scaled_dot_product_attention" => |a| {
            let causal = a.int("is_causal") != 0;
            let scale = Some(a.float("scale"));
            vec![scaled_dot_product_attention(
                a.x(0),
                a.x(1),
                a.x(2),
                None,
                0.0,
                causal,
                scale,
            )]
        },
        "causal_mask" => |a| vec![crate::nn::attention_mask_future(a.x(0))],
        "dropout" => |a| {
            vec![crate::nn::dropout(
                a.x(0),
                a.float("p"),
                a.int("training") != 0,
            )]
        },
        "conv2d" => |a| vec![a.x(0).conv2d(a.x(1), a.opt(2), a.conv_opts())],
        "conv_transpose2d" => |a| {
            let opts = a.conv_opts();
            vec![
                a.x(0)
                    .conv_transpose2d(a.x(1), a.opt(2), opts, a.pair("output_padding")),
            ]
        },
        "conv3d" => |a| {
            let o = crate::nn::Conv3dOptions::from_attrs(|k| a.attrs.ints(k), a.int("groups"));
            vec![crate::nn::conv3d(a.x(0), a.x(1), a.opt(2), o)]
        },
        "conv_transpose3d" => |a| {
            let o = crate::nn::Conv3dOptions::from_attrs(|k| a.attrs.ints(k), a.int("groups"));
            let op = match a.attrs.ints("output_padding")[..] {
                [d, h, w] => (d as usize, h as usize, w as usize),
                _ => (0, 0, 0),
            };
            vec![crate::nn::conv_transpose3d(a.x(0), a.x(1), a.opt(2), o, op)]
        },
        "interpolate" => |a| {
            let size: Vec<usize> = a.attrs.ints("size").iter().map(|&d| d as usize).collect();
            let scales: Vec<f64> = ["scale0", "scale1", "scale2"]
                .iter()
                .map(|k| a.float(k))
                .take_while(|&f| f > 0.0)
                .collect();
            let corners = match a.int("align_corners") {
                -1 => None,
                c => Some(c != 0),
            };
            vec![crate::nn::interpolate(
                a.x(0),
                (!size.is_empty()).then_some(&size[..]),
                (!scales.is_empty()).then_some(&scales[..]),
                crate::nn::InterpolateMode::from_code(a.int("mode")),
                corners,
            )]
        },
        "unfold2d" => |a| vec![a.x(0).unfold2d(a.pair("kernel"), a.conv_opts())],
        "fold2d" => |a| {
            let (size, kernel) = (a.pair("output_size"), a.pair("kernel"));
            vec![a.x(0).fold2d(size, kernel, a.conv_opts())]
        },
        "max_pool2d" => |a| {
            let (k, s, p) = (a.pair("kernel"), a.pair("stride"), a.pair("padding"));
            let ceil = a.int("ceil_mode") != 0;
            vec![a.x(0).max_pool2d_ceil(k, s, p, a.pair("dilation"), ceil)]
        },
        "avg_pool2d" => |a| {
            let count = crate::ops::pool::AvgPoolCount {
                ceil_mode: a.int("ceil_mode") != 0,
                include_pad: a.int("count_include_pad") != 0,
                divisor_override: (a.int("divisor_override") > 0)
                    .then(|| a.int("divisor_override") as usize),
            };
            let (k, s, p) = (a.pair("kernel"), a.pair("stride"), a.pair("padding"));
            vec![a.x(0).avg_pool2d_full(k, s, p, count)]
        },
        "max_pool3d" => |a| {
            let t = |k: &str| match a.attrs.ints(k)[..] {
                [d, h, w] => (d as usize, h as usize, w as usize),
                _ => (1, 1, 1),
            };
            let ceil = a.int("ceil_mode") != 0;
            let (k, s, p, d) = (t("kernel"), t("stride"), t("padding"), t("dilation"));
            vec![crate::nn::max_pool3d(a.x(0), k, s, p, d, ceil)]
        },
        "avg_pool3d" => |a| {
            let t = |k: &str| match a.attrs.ints(k)[..] {
                [d, h, w] => (d as usize, h as usize, w as usize),
                _ => (1, 1, 1),
            };
            let (ceil, include) = (a.int("ceil_mode") != 0, a.int("count_include_pad") != 0);
            let divisor =
                (a.int("divisor_override") > 0).then(|| a.int("divisor_override") as usize);
            let (k, s, p) = (t("kernel"), t("stride"), t("padding"));
            vec![crate::nn::avg_pool3d(
                a.x(0),
                k,
                s,
                p,
                ceil,
                include,
                divisor,
            )]
        },
        "batch_norm" => |a| {
            let state = a.opt(1).map(|running_mean| crate::nn::BatchNormState {
                running_mean,
                running_var: a.x(2),
                num_batches_tracked: a.opt(5),
            });
            let cumulative = a.int("cumulative") != 0;
            vec![crate::nn::batch_norm_op(
                a.x(0),
                state,
                a.opt(3),
                a.opt(4),
                a.int("training") != 0,
                (!cumulative).then(|| a.float("momentum")),
                a.float("eps"),
                a.int("sync") != 0,
            )]
        },
        "global_avg_pool2d" => |a| vec![a.x(0).mean_dims(&[2, 3], true)],
        "sum_dims" => |a| vec![a.x(0).sum_dims(&a.isizes("dims"), a.int("keepdim") != 0)],
        "mean_dims" => |a| vec![a.x(0).mean_dims(&a.isizes("dims"), a.int("keepdim") != 0)],
        "var_dims" => |a| {
            let c = a.int("correction") as usize;
            vec![a.x(0).var_dims(&a.isizes("dims"), c, a.int("keepdim") != 0)]
        },
        "std_dims" => |a| {
            let c = a.int("correction") as usize;
            vec![a.x(0).std_dims(&a.isizes("dims"), c, a.int("keepdim") != 0)]
        },
        "var" => |a| vec![a.x(0).var()],
        "std" => |a| vec![a.x(0).std()],
        "logsumexp" => |a| vec![a.x(0).logsumexp(&a.isizes("dims"), a.int("keepdim") != 0)],
        "norm" => |a| vec![a.x(0).norm(a.float("p"))],
        "norm_dims" => |a| {
            vec![
                a.x(0)
                    .norm_dims(a.float("p"), &a.isizes("dims"), a.int("keepdim") != 0),
            ]
        },
        "max_dim" => |a| {
            let (v, i) = a.x(0).max_dim(a.int("dim") as isize, a.int("keepdim") != 0);
            vec![v, i]
        },
        "min_dim" => |a| {
            let (v, i) = a.x(0).min_dim(a.int("dim") as isize, a.int("keepdim") != 0);
            vec![v, i]
        },
        "argmax" => |a| vec![a.x(0).argmax(a.int("dim") as isize, a.int("keepdim") != 0)],
        "argmin" => |a| vec![a.x(0).argmin(a.int("dim") as isize, a.int("keepdim") != 0)],
        "argmax_all" => |a| vec![a.x(0).argmax_all()],
        "mse_loss" => |a| {
            let r = crate::nn::Reduction::from_code(a.int("reduction"));
            vec![crate::nn::mse_loss(a.x(0), a.x(1), r)]
        },
        "scatter_add" => |a| vec![a.x(0).scatter_add(a.int("dim") as isize, a.x(1), a.x(2))],
        "scatter" => |a| vec![a.x(0).scatter(a.int("dim") as isize, a.x(1), a.x(2))],
        "scatter_scalar" => |a| {
            let dim = a.int("dim") as isize;
            vec![a.x(0).scatter_scalar(dim, a.x(1), a.float("value"))]
        },
        "scatter_reduce" => |a| {
            let reduce = crate::ScatterReduce::ALL[a.int("reduce") as usize];
            let (dim, include_self) = (a.int("dim") as isize, a.int("include_self") != 0);
            vec![
                a.x(0)
                    .scatter_reduce(dim, a.x(1), a.x(2), reduce, include_self),
            ]
        },
        "index_add" => |a| {
            let dim = a.int("dim") as isize;
            vec![a.x(0).index_add(dim, a.x(1), a.x(2), a.float("alpha"))]
        },
        "index_copy" => |a| vec![a.x(0).index_copy(a.int("dim") as isize, a.x(1), a.x(2))],
        "take" => |a| vec![a.x(0).take(a.x(1))],
        "put" => |a| vec![a.x(0).put(a.x(1), a.x(2), a.int("accumulate") != 0)],
        "index_put" => |a| {
            let all = a.all();
            vec![all[0].index_put(&all[2..], all[1], a.int("accumulate") != 0)]
        },
        "masked_scatter" => |a| vec![a.x(0).masked_scatter(a.x(1), a.x(2))],
        "index_fill" => |a| {
            let dim = a.int("dim") as isize;
            vec![a.x(0).index_fill(dim, a.x(1), a.float("value"))]
        },
        "sum_dim" => |a| vec![a.x(0).sum_dim(a.isizes("dims")[0], a.int("keepdim") != 0)],
        "mean_dim" => |a| vec![a.x(0).mean_dim(a.isizes("dims")[0], a.int("keepdim") != 0)],
        "gather" => |a| vec![a.x(0).gather(a.int("dim") as isize, a.x(1))],
        "amax_dim" => |a| {
            vec![
                a.x(0)
                    .amax_dim(a.int("dim") as isize, a.int("keepdim") != 0),
            ]
        },
        "amin_dim" => |a| {
            vec![
                a.x(0)
                    .amin_dim(a.int("dim") as isize, a.int("keepdim") != 0),
            ]
        },
        "prod" => |a| vec![a.x(0).prod()],
        "prod_dim" => |a| {
            vec![
                a.x(0)
                    .prod_dim(a.int("dim") as isize, a.int("keepdim") != 0),
            ]
        },
        "sum" => |a| vec![a.x(0).sum()],
        "mean" => |a| vec![a.x(0).mean()],
        "triu" => |a| vec![a.x(0).triu(a.int("k") as isize)],
        "tril" => |a| vec![a.x(0).tril(a.int("k") as isize)],
        "zeros" => |a| vec![filled_on(&a.shape(0), 0.0, a.out_dtypes[0], Device::Cpu)],
        "ones" => |a| vec![filled_on(&a.shape(0), 1.0, a.out_dtypes[0], Device::Cpu)],
        "full" | "full_dtype" => |a| {
            vec![filled_on(
                &a.shape(0),
                a.float("value"),
                a.out_dtypes[0],
                Device::Cpu,
            )]
        },
        "zeros_on" => |a| vec![a.filled(0.0)],
        "ones_on" => |a| vec![a.filled(1.0)],
        "full_on" => |a| vec![a.filled(a.float("value"))],
        "arange" | "arange_step" | "arange_on" | "arange_f" | "arange_f_on" => |a| vec![a.range()],
        "linspace" => |a| {
            vec![Tensor::linspace(
                a.float("start"),
                a.float("end"),
                a.shape(0)[0],
            )]
        },
        "eye" => |a| vec![Tensor::eye(a.shape(0)[0])],
        // Draws from the same generator in the same order as eager code.
        "rand" => |a| vec![Tensor::rand(&a.shape(0))],
        "randn" => |a| vec![Tensor::randn(&a.shape(0))],
        "randint" => |a| vec![Tensor::randint(a.int("low"), a.int("high"), &a.shape(0))],
        "rand_on" => |a| vec![Tensor::rand_on(&a.shape(0), a.device())],
        "randn_on" => |a| vec![Tensor::randn_on(&a.shape(0), a.device())],
        "zeros_like" => |a| vec![Tensor::zeros_like(a.x(0))],
        "ones_like" => |a| vec![Tensor::ones_like(a.x(0))],
        "full_like" => |a| vec![Tensor::full_like(a.x(0), a.float("value"))],
        "rand_like" => |a| vec![Tensor::rand_like(a.x(0))],
        "randn_like" => |a| vec![Tensor::randn_like(a.x(0))],
        "bernoulli" => |a| vec![a.x(0).bernoulli()],
        // In place: the same call on the same value, in the same order as
        // eager code (the graph's later readers read that value).
        "add_" => |a| vec![a.x(0).add_(a.x(1)).clone()],
        "sub_" => |a| vec![a.x(0).sub_(a.x(1)).clone()],
        "mul_" => |a| vec![a.x(0).mul_(a.x(1)).clone()],
        "div_" => |a| vec![a.x(0).div_(a.x(1)).clone()],
        "addmm_" => |a| {
            let (beta, alpha) = (a.float("beta"), a.float("alpha"));
            vec![a.x(0).addmm_(a.x(1), a.x(2), beta, alpha).clone()]
        },
        "add_scaled_" => |a| vec![a.x(0).add_scaled_(a.x(1), a.float("alpha")).clone()],
        "mul_scalar_" => |a| vec![a.x(0).mul_scalar_(a.float("value")).clone()],
        "add_scalar_" => |a| vec![a.x(0).add_scalar_(a.float("value")).clone()],
        "copy_" => |a| vec![a.x(0).copy_(a.x(1)).clone()],
        "fill_" => |a| vec![a.x(0).fill_(a.float("value")).clone()],
        "zero_" => |a| vec![a.x(0).zero_().clone()],
        "clamp_" => |a| vec![a.x(0).clamp_(a.float("min"), a.float("max")).clone()],
        "uniform_" => |a| vec![a.x(0).uniform_(a.float("low"), a.float("high")).clone()],
        "normal_" => |a| vec![a.x(0).normal_(a.float("mean"), a.float("std")).clone()],
        _ => return linalg(name),
    })
}

/// The `torch.linalg` ops (`crate::linalg`), by their recorded names.
fn linalg(name: &str) -> Option<Replay> {
    use crate::linalg as la;
    Some(match name {
        "linalg_cholesky" => |a| vec![la::cholesky(a.x(0), a.int("upper") != 0)],
        "linalg_cholesky_ex" => |a| {
            let (l, info) = la::cholesky_ex(a.x(0), a.int("upper") != 0);
            vec![l, info]
        },
        "linalg_solve" => |a| vec![la::solve(a.x(0), a.x(1))],
        "linalg_solve_triangular" => |a| {
            let flag = |k| a.int(k) != 0;
            let (upper, left, unit) = (flag("upper"), flag("left"), flag("unitriangular"));
            vec![la::solve_triangular(a.x(0), a.x(1), upper, left, unit)]
        },
        "linalg_inv" => |a| vec![la::inv(a.x(0))],
        "linalg_det" => |a| vec![la::det(a.x(0))],
        "logdet" => |a| vec![la::logdet(a.x(0))],
        "linalg_slogdet" => |a| {
            let (sign, logabs) = la::slogdet(a.x(0));
            vec![sign, logabs]
        },
        "linalg_qr" => |a| {
            let (q, r) = la::qr(a.x(0), la::QrMode::from_code(a.int("mode")));
            vec![q, r]
        },
        "linalg_eigh" => |a| {
            let (l, v) = la::eigh(a.x(0));
            vec![l, v]
        },
        "linalg_eigvalsh" => |a| vec![la::eigvalsh(a.x(0))],
        "linalg_svd" => |a| {
            let (u, s, vh) = la::svd(a.x(0), a.int("full_matrices") != 0);
            vec![u, s, vh]
        },
        "linalg_svdvals" => |a| vec![la::svdvals(a.x(0))],
        "linalg_pinv" => |a| vec![la::pinv(a.x(0))],
        "linalg_matrix_rank" => |a| vec![la::matrix_rank(a.x(0))],
        "linalg_lstsq" => |a| vec![la::lstsq(a.x(0), a.x(1))],
        "linalg_lu" => |a| {
            let (p, l, u) = la::lu(a.x(0));
            vec![p, l, u]
        },
        "linalg_lu_factor" => |a| {
            let (lu, pivots) = la::lu_factor(a.x(0));
            vec![lu, pivots]
        },
        "linalg_lu_solve" => |a| vec![la::lu_solve(a.x(0), a.x(1), a.x(2))],
        "cholesky_solve" => |a| vec![la::cholesky_solve(a.x(0), a.x(1), a.int("upper") != 0)],
        "cholesky_inverse" => |a| vec![la::cholesky_inverse(a.x(0), a.int("upper") != 0)],
        "linalg_matrix_power" => |a| vec![la::matrix_power(a.x(0), a.int("n"))],
        "linalg_matrix_exp" => |a| vec![la::matrix_exp(a.x(0))],
        "linalg_matrix_norm" => |a| {
            vec![la::matrix_norm(
                a.x(0),
                la::MatrixNorm::from_code(a.int("ord")),
            )]
        },
        _ => return None,
    })
}

/// The elementwise ops (also what the fusion pass knows by name).
fn elementwise(name: &str) -> Option<Replay> {
    Some(match name {
        "neg" => |a| vec![a.x(0).neg()],
        "exp" => |a| vec![a.x(0).exp()],
        "log" => |a| vec![a.x(0).log()],
        "log1p" => |a| vec![a.x(0).log1p()],
        "sqrt" => |a| vec![a.x(0).sqrt()],
        "rsqrt" => |a| vec![a.x(0).rsqrt()],
        "abs" => |a| vec![a.x(0).abs()],
        "sign" => |a| vec![a.x(0).sign()],
        "floor" => |a| vec![a.x(0).floor()],
        "ceil" => |a| vec![a.x(0).ceil()],
        "round" => |a| vec![a.x(0).round()],
        "trunc" => |a| vec![a.x(0).trunc()],
        "sin" => |a| vec![a.x(0).sin()],
        "cos" => |a| vec![a.x(0).cos()],
        "tanh" => |a| vec![a.x(0).tanh()],
        "erf" => |a| vec![a.x(0).erf()],
        "tan" => |a| vec![a.x(0).tan()],
        "asin" => |a| vec![a.x(0).asin()],
        "acos" => |a| vec![a.x(0).acos()],
        "atan" => |a| vec![a.x(0).atan()],
        "sinh" => |a| vec![a.x(0).sinh()],
        "cosh" => |a| vec![a.x(0).cosh()],
        "asinh" => |a| vec![a.x(0).asinh()],
        "acosh" => |a| vec![a.x(0).acosh()],
        "atanh" => |a| vec![a.x(0).atanh()],
        "expm1" => |a| vec![a.x(0).expm1()],
        "lgamma" => |a| vec![a.x(0).lgamma()],
        "digamma" => |a| vec![a.x(0).digamma()],
        "polygamma" => |a| vec![a.x(0).polygamma(a.int("n") as u32)],
        "erfc" => |a| vec![a.x(0).erfc()],
        "erfinv" => |a| vec![a.x(0).erfinv()],
        "erfcx" => |a| vec![a.x(0).erfcx()],
        "ndtr" => |a| vec![a.x(0).ndtr()],
        "log_ndtr" => |a| vec![a.x(0).log_ndtr()],
        "ndtri" => |a| vec![a.x(0).ndtri()],
        "i0" => |a| vec![a.x(0).i0()],
        "i0e" => |a| vec![a.x(0).i0e()],
        "i1" => |a| vec![a.x(0).i1()],
        "i1e" => |a| vec![a.x(0).i1e()],
        "mvlgamma" => |a| vec![a.x(0).mvlgamma(a.int("p") as usize)],
        "entr" => |a| vec![a.x(0).entr()],
        "zeta" => |a| vec![a.x(0).zeta(a.x(1))],
        "xlogy" => |a| vec![a.x(0).xlogy(a.x(1))],
        "xlog1py" => |a| vec![a.x(0).xlog1py(a.x(1))],
        "log2" => |a| vec![a.x(0).log2()],
        "log10" => |a| vec![a.x(0).log10()],
        "exp2" => |a| vec![a.x(0).exp2()],
        "logit" => |a| {
            let eps = a.float("eps");
            vec![a.x(0).logit((eps >= 0.0).then_some(eps))]
        },
        "atan2" => |a| vec![a.x(0).atan2(a.x(1))],
        "hypot" => |a| vec![a.x(0).hypot(a.x(1))],
        "sinc" => |a| vec![a.x(0).sinc()],
        "fmod" => |a| vec![a.x(0).fmod(a.x(1))],
        "remainder" => |a| vec![a.x(0).remainder(a.x(1))],
        "sigmoid" => |a| vec![a.x(0).sigmoid()],
        "relu" => |a| vec![a.x(0).relu()],
        "silu" => |a| vec![a.x(0).silu()],
        "gelu" => |a| vec![a.x(0).gelu()],
        "gelu_tanh" => |a| vec![a.x(0).gelu_tanh()],
        "hardswish" => |a| vec![a.x(0).hardswish()],
        "softplus" => |a| vec![a.x(0).softplus()],
        "square" => |a| vec![a.x(0).square()],
        "reciprocal" => |a| vec![a.x(0).reciprocal()],
        "leaky_relu" => |a| vec![a.x(0).leaky_relu(a.float("slope"))],
        "powf" => |a| vec![a.x(0).powf(a.float("exponent"))],
        "clamp" => |a| vec![a.x(0).clamp(a.float("min"), a.float("max"))],
        "clamp_min" => |a| vec![a.x(0).clamp_min(a.float("min"))],
        "clamp_max" => |a| vec![a.x(0).clamp_max(a.float("max"))],
        "logical_not" => |a| vec![a.x(0).logical_not()],
        "add" => |a| vec![a.x(0).add(a.x(1))],
        "sub" => |a| vec![a.x(0).sub(a.x(1))],
        "mul" => |a| vec![a.x(0).mul(a.x(1))],
        "div" => |a| vec![a.x(0).div(a.x(1))],
        "pow" => |a| vec![a.x(0).pow(a.x(1))],
        "maximum" => |a| vec![a.x(0).maximum(a.x(1))],
        "minimum" => |a| vec![a.x(0).minimum(a.x(1))],
        "eq" => |a| vec![a.x(0).eq(a.x(1))],
        "ne" => |a| vec![a.x(0).ne(a.x(1))],
        "lt" => |a| vec![a.x(0).lt(a.x(1))],
        "le" => |a| vec![a.x(0).le(a.x(1))],
        "gt" => |a| vec![a.x(0).gt(a.x(1))],
        "ge" => |a| vec![a.x(0).ge(a.x(1))],
        "logical_and" => |a| vec![a.x(0).logical_and(a.x(1))],
        "logical_or" => |a| vec![a.x(0).logical_or(a.x(1))],
        "where_" => |a| vec![Tensor::where_(a.x(0), a.x(1), a.x(2))],
        "masked_fill" => |a| vec![a.x(0).masked_fill(a.x(1), a.float("value"))],
        _ => return None,
    })
}
