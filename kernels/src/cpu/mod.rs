//! CPU kernels. Contiguous fast paths, rayon above [`crate::threads::PARALLEL_GRAIN`].

mod attention;
mod columns;
mod conv;
mod conv_forward;
mod convert;
mod copy;
mod draws;
mod elementwise;
mod extreme;
mod f16_blocks;
mod foreach;
mod index;
pub mod linalg;
mod map_split;
mod matmul;
mod matmul_bf16;
mod norm;
mod optim;
mod order;
mod philox;
mod pool;
mod product;
mod program;
mod range;
mod reduce;
mod select;
mod softmax;
mod softmax_columns;
mod strided;
mod sum;
mod sum_columns;
mod transpose;

pub use attention::{
    AttentionDims, AttentionForward, AttentionOrder, Rows, TILE as ATTENTION_TILE,
    attention_backward, attention_forward,
};
pub use conv::{col2im, im2col};
pub use conv_forward::conv2d_forward;
pub use convert::{
    Bf16ToF32, bf16_from_f32, bf16_to_f32, f16_from_f32, f16_to_f32, f32_from_bf16, f32_from_f16,
    f32_to_bf16, f32_to_f16,
};
pub use copy::{copy_into, copy_strided};
pub use draws::{NORMAL_BLOCK_WORDS, normal_from_bits, uniform_from_bits};
pub use elementwise::{map, map_inplace, map_with, select, zip_inplace, zip_map};
pub use extreme::{extreme_columns, extreme_rows, extreme_values};
pub use f16_blocks::{
    F16ToF32, map_f16_split_with, map_inplace_f16_with, zip_inplace_f16, zip_map_f16,
};
pub use foreach::{scale_many, sum_squares_many};
pub use index::{
    IndexValue, Indices, ScatterMode, ScatterValue, gather, index_add_rows, index_select,
    indices_below, scatter_add, scatter_assign, scatter_reduce,
};
pub use map_split::map_split_with;
pub use matmul::{matmul, matmul_accumulate, matmul_bias};
pub use matmul_bf16::{bf16_matmul_available, matmul_bf16};
pub use norm::{LayerNormForward, add_layer_norm_rows, layer_norm_backward_rows, layer_norm_rows};
pub use optim::{
    adadelta_update, adagrad_update, adam_update, adamax_update, asgd_update, nadam_update,
    radam_update, rmsprop_update, rprop_update, sgd_update,
};
pub use order::{cumsum_columns, cumsum_rows, sort_rows, sort_rows_f32, topk_rows};
pub use philox::{philox_dropout_mask, philox_normal, philox_uniform, philox4x32_10};
pub use pool::{max_pool2d, max_pool2d_backward};
pub use product::product;
pub use program::{Operand, run_program};
pub use range::{arange_f32, arange_i64};
pub use reduce::reduce;
pub use select::nonzero_coords;
pub use softmax::{
    log_softmax_backward_rows, log_softmax_rows, logsumexp_rows, scaled_softmax_backward_rows,
    scaled_softmax_backward_rows_bf16, scaled_softmax_rows, softmax_rows, softmax_rows_bf16,
};
pub use softmax_columns::softmax_columns;
pub use strided::coalesce;
pub(crate) use strided::for_rows;
pub use sum::{Widen, sum};
pub use transpose::transpose_into;
