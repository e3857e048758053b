//! Neural-network building blocks (`torch.nn`): the `Module` trait, layers,
//! containers, initialisers and losses.

mod activation;
mod attention;
mod batch_norm;
mod chunked_cross_entropy;
mod container;
mod conv;
mod conv3d;
mod ctc;
mod embedding;
mod fold;
mod fractional_pool;
mod functional;
mod functional_call;
mod fusion;
mod grid_sample;
mod group_norm;
pub mod init;
mod interpolate;
mod layers;
mod linear;
mod linear_cross_entropy;
mod loss;
mod loss_modules;
mod margin_loss;
mod module;
mod module_tree;
mod norm;
mod packed;
mod padding;
mod parametrize;
mod pixel_shuffle;
mod pool;
mod pool1d;
mod pool3d;
mod recurrent;
mod recurrent_cell;
mod sdpa;
mod transformer;
mod transformer_decoder;
mod transformer_stack;
mod unpool;

pub use activation::{
    CELU, ELU, GLU, Hardshrink, Hardtanh, LogSoftmax, PReLU, RReLU, Softmax2d, Softmin, Softshrink,
    Threshold, prelu, rrelu, softmin,
};
pub use attention::MultiheadAttention;
pub(crate) use attention::mask_future as attention_mask_future;
pub use batch_norm::{BatchNorm, batch_norm, convert_sync_batchnorm};
pub(crate) use batch_norm::{BatchNormState, batch_norm_op, cumulative_running_stats};
pub(crate) use chunked_cross_entropy::ChunkedLoss;
pub use container::{ModuleDict, ModuleList, Sequential};
pub use conv::{Conv1d, Conv1dOptions, Conv2d, ConvTranspose1d, ConvTranspose2d, conv1d};
pub use conv3d::{Conv3d, Conv3dOptions, ConvTranspose3d, conv_transpose3d, conv3d};
pub use ctc::{CtcOptions, ctc_loss};
pub use embedding::{BagMode, BagOptions, Embedding, EmbeddingBag, embedding_bag};
pub use fold::{Fold, Unfold};
pub use fractional_pool::{FractionalMaxPool2d, FractionalOutput, fractional_max_pool2d};
pub use functional::{
    CosineSimilarity, PairwiseDistance, cosine_similarity, gumbel_softmax, gumbel_softmax_with,
    normalize, one_hot, pairwise_distance,
};
pub use functional_call::functional_call;
pub use fusion::{fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval};
pub use grid_sample::{GridMode, GridPadding, affine_grid, grid_sample};
pub use group_norm::{GroupNorm, InstanceNorm, group_norm, instance_norm};
pub use interpolate::{InterpolateMode, Upsample, interpolate};
pub use layers::{
    AlphaDropout, Dropout, Dropout1d, Dropout2d, Flatten, GELU, Hardsigmoid, Hardswish, Identity,
    LeakyReLU, LogSigmoid, Mish, ReLU, ReLU6, SELU, SiLU, Sigmoid, Softmax, Softplus, Softsign,
    Tanh, Tanhshrink, Unflatten, dropout, dropout1d, dropout2d,
};
pub use linear::{Bilinear, Linear, linear};
pub use linear_cross_entropy::{
    ChunkingMethod, LinearCrossEntropyArgs, LinearCrossEntropyLoss, LinearCrossEntropyOptions,
    linear_cross_entropy, linear_cross_entropy_with,
};
pub use loss::{
    CrossEntropyOptions, Reduction, binary_cross_entropy, binary_cross_entropy_with_logits,
    cross_entropy, cross_entropy_with, huber_loss, kl_div, l1_loss, mse_loss, nll_loss,
    nll_loss_with, smooth_l1_loss,
};
pub use loss_modules::DistanceFn;
pub use loss_modules::{
    BCELoss, BCEWithLogitsLoss, CTCLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
    HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
    SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
};
pub use margin_loss::{
    Distance, TripletMarginOptions, cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss,
    margin_ranking_loss, multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss,
    poisson_nll_loss, soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
};
pub use module::{
    Forward, LoadReport, Module, StateDict, TensorKind, TrainingFlag, repr_children,
    repr_of_children, visit_child, visit_child_mut,
};
pub use module_tree::AsModule;
pub use norm::{LayerNorm, LocalResponseNorm, RMSNorm, local_response_norm, rms_norm};
pub use packed::{
    PackedSequence, pack_padded_sequence, pack_sequence, pad_packed_sequence, pad_sequence,
    unpack_sequence, unpad_sequence,
};
pub use padding::{
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad, PadMode, ReflectionPad1d,
    ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
    ZeroPad1d, ZeroPad2d, ZeroPad3d, pad, pad_with,
};
pub use parametrize::{
    Parametrization, Parametrized, SpectralNorm, WeightNorm, spectral_norm, weight_norm,
};
pub use pixel_shuffle::{
    ChannelShuffle, PixelShuffle, PixelUnshuffle, channel_shuffle, pixel_shuffle, pixel_unshuffle,
};
pub use pool::{
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, LPPool1d, LPPool2d, MaxPool1d, MaxPool2d, adaptive_avg_pool2d, adaptive_max_pool2d,
    avg_pool2d, lp_pool1d, lp_pool2d, max_pool2d, max_pool2d_with_indices,
};
pub use pool1d::{adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, max_pool1d};
pub use pool3d::{
    AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, LPPool3d, MaxPool3d, Triple,
    adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, lp_pool3d, max_pool3d,
    max_pool3d_with_indices,
};
pub use recurrent::{GRU, LSTM, RNN, RnnOptions};
pub use recurrent_cell::{GRUCell, LSTMCell, RNNCell};
pub(crate) use sdpa::allowed_backends;
pub use sdpa::{
    SdpBackend, scaled_dot_product_attention, scaled_dot_product_attention_gqa, sdpa_kernel,
};
pub use transformer::{Activation, TransformerEncoderLayer, TransformerEncoderLayerOptions};
pub use transformer_decoder::{
    DecoderMasks, TransformerDecoderLayer, TransformerDecoderLayerOptions,
};
pub use transformer_stack::{
    Transformer, TransformerDecoder, TransformerEncoder, TransformerMasks,
};
pub use unpool::{MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, max_unpool1d, max_unpool2d, max_unpool3d};
