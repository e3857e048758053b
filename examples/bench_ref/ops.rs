//! The `ops` workload: one tensor op over a 2048 x 2048 f32 matrix
//! (forward only), as `benches/torch_ref.py`'s `bench_ops` builds it:
//! copies of transposed and permuted views, draws, sorts and selections,
//! reductions, softmax and layer norm along the first or last dim, and
//! elementwise ops, reductions and softmax over transposed, permuted and
//! sliced views. `x` is standard
//! normal; the permute variants view it as `[128, 128, 256]` and the
//! draws make 4M values, the same element count. Samples are input
//! elements.

use crate::Args;
use crate::measure::{record, time_loop};
use crate::workloads::scaled;
use tapir::prelude::*;

/// The workload's variants: the op and the dim it runs along.
pub(crate) const OPS_VARIANTS: [&str; 66] = [
    "t_contiguous",
    "permute_201",
    "randn",
    "rand",
    "sort_dim1",
    "topk10_dim1",
    "topk100_dim1",
    "topk10_dim0",
    "nonzero",
    "masked_select",
    "amax_dim0",
    "amax_dim1",
    "max_dim1",
    "softmax_dim0",
    "softmax_dim1",
    "logsumexp_dim0",
    "norm_dim1",
    "cumsum_dim0",
    "cumsum_dim1",
    "exp_t",
    "mul_scalar_t",
    "mul_t_t",
    "add_t_x",
    "relu_permute_201",
    "add_inplace_t_t",
    "add_inplace_x_t",
    "mul_scalar_inplace_t",
    "sum_t_dim1",
    "sum_t_dim0",
    "amax_t_dim1",
    "max_t_dim1",
    "var_t_dim1",
    "sum_permute_201_dim12",
    "sum_narrow_dim0",
    "copy_inplace_t_t",
    "copy_inplace_x_t",
    "log_softmax_dim1",
    "layer_norm",
    "softmax_t_dim1",
    "log_softmax_t_dim1",
    "softmax_t_dim0",
    "cumsum_t_dim1",
    "logsumexp_t_dim1",
    "argmax_t_dim1",
    "norm_t_dim1",
    "layer_norm_t",
    "max_dim0",
    "amax_rows256_dim0",
    "sum_rows256_dim0",
    "exp_f16",
    "add_f16",
    "gelu_f16",
    "sum_f16",
    "to_f16",
    "to_f32_from_f16",
    "add_row_f16",
    "exp_bf16",
    "add_bf16",
    "gelu_bf16",
    "sum_bf16",
    "to_bf16",
    "to_f32_from_bf16",
    "gelu",
    "prod_dim1",
    "prod_dim0",
    "amin_dim1",
];

pub(crate) fn bench_ops(args: &Args, variant: &str) -> String {
    let n = 2048usize;
    let g = Generator::new(args.seed);
    let x = Tensor::randn_with(&[n, n], &g).to(args.device).unwrap();
    let cube = x.reshape(&[128, 128, 256]);
    let positive = x.gt_scalar(0.0);
    // Targets of the in-place variants (their values drift; the time
    // does not depend on them).
    let (target, addend) = (
        Tensor::randn_with(&[n, n], &g).to(args.device).unwrap(),
        Tensor::randn_with(&[n, n], &g).to(args.device).unwrap(),
    );
    // f16 copies of `x` and `addend` for the f16 variants.
    let (x16, addend16) = (x.to_dtype(DType::F16), addend.to_dtype(DType::F16));
    let row16 = addend16.select(0, 0);
    // bf16 copies, for the bf16 variants (PyTorch's CPU autocast type).
    let (xb, addendb) = (x.to_dtype(DType::BF16), addend.to_dtype(DType::BF16));
    let f = || match variant {
        "t_contiguous" => x.t().contiguous(),
        "permute_201" => cube.permute(&[2, 0, 1]).contiguous(),
        "randn" => Tensor::randn_on(&[n * n], args.device),
        "rand" => Tensor::rand_on(&[n * n], args.device),
        "sort_dim1" => x.sort(1, true).0,
        "topk10_dim1" => x.topk(10, 1, true).0,
        "topk100_dim1" => x.topk(100, 1, true).0,
        "topk10_dim0" => x.topk(10, 0, true).0,
        "nonzero" => positive.nonzero(),
        "masked_select" => x.masked_select(&positive),
        "amax_dim0" => x.amax_dim(0, false),
        "amax_dim1" => x.amax_dim(1, false),
        "max_dim1" => x.max_dim(1, false).0,
        "max_dim0" => x.max_dim(0, false).0,
        "amax_rows256_dim0" => cube.reshape(&[16384, 256]).amax_dim(0, false),
        "sum_rows256_dim0" => cube.reshape(&[16384, 256]).sum_dim(0, false),
        "exp_f16" => x16.exp(),
        "add_f16" => &x16 + &addend16,
        "gelu_f16" => x16.gelu(),
        "sum_f16" => x16.sum(),
        "to_f16" => x.to_dtype(DType::F16),
        "to_f32_from_f16" => x16.to_dtype(DType::F32),
        "add_row_f16" => &x16 + &row16,
        "exp_bf16" => xb.exp(),
        "add_bf16" => &xb + &addendb,
        "gelu_bf16" => xb.gelu(),
        "sum_bf16" => xb.sum(),
        "to_bf16" => x.to_dtype(DType::BF16),
        "to_f32_from_bf16" => xb.to_dtype(DType::F32),
        "gelu" => x.gelu(),
        "prod_dim1" => x.prod_dim(1, false),
        "prod_dim0" => x.prod_dim(0, false),
        "amin_dim1" => x.amin_dim(1, false),
        "softmax_dim0" => x.softmax(0),
        "softmax_dim1" => x.softmax(1),
        "logsumexp_dim0" => x.logsumexp(&[0], false),
        "norm_dim1" => x.norm_dims(2.0, &[1], false),
        "cumsum_dim0" => x.cumsum(0),
        "cumsum_dim1" => x.cumsum(1),
        "exp_t" => x.t().exp(),
        "mul_scalar_t" => x.t() * 2.0,
        "mul_t_t" => x.t() * x.t(),
        "add_t_x" => x.t() + &x,
        "relu_permute_201" => cube.permute(&[2, 0, 1]).relu(),
        "add_inplace_t_t" => target.t().add_(&addend.t()).clone(),
        "add_inplace_x_t" => target.add_(&addend.t()).clone(),
        "mul_scalar_inplace_t" => target.t().mul_scalar_(1.0).clone(),
        "sum_t_dim1" => x.t().sum_dim(1, false),
        "sum_t_dim0" => x.t().sum_dim(0, false),
        "amax_t_dim1" => x.t().amax_dim(1, false),
        "max_t_dim1" => x.t().max_dim(1, false).0,
        "var_t_dim1" => x.t().var_dims(&[1], 1, false),
        "sum_permute_201_dim12" => cube.permute(&[2, 0, 1]).sum_dims(&[1, 2], false),
        "sum_narrow_dim0" => x.narrow(1, 0, 1000).sum_dim(0, false),
        "copy_inplace_t_t" => target.t().copy_(&addend.t()).clone(),
        "copy_inplace_x_t" => target.copy_(&addend.t()).clone(),
        "log_softmax_dim1" => x.log_softmax(1),
        "layer_norm" => x.layer_norm(&[n], None, None, 1e-5),
        "softmax_t_dim1" => x.t().softmax(1),
        "log_softmax_t_dim1" => x.t().log_softmax(1),
        "softmax_t_dim0" => x.t().softmax(0),
        "cumsum_t_dim1" => x.t().cumsum(1),
        "logsumexp_t_dim1" => x.t().logsumexp(&[1], false),
        "argmax_t_dim1" => x.t().argmax(1, false),
        "norm_t_dim1" => x.t().norm_dims(2.0, &[1], false),
        "layer_norm_t" => x.t().layer_norm(&[n], None, None, 1e-5),
        _ => unreachable!("ops variant {variant}"),
    };
    let step = || {
        std::hint::black_box(f());
    };
    let (warm, steps) = scaled(args, "ops");
    let t = time_loop(args.device, step, warm, steps);
    record(
        "ops",
        variant,
        warm,
        &t,
        (n * n) as f64,
        &[("elements", (n * n).to_string())],
    )
}
