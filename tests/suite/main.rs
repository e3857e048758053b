//! Most integration tests, as modules of one test binary (one link and one
//! ~100 MB executable instead of nine). Tests that need a process of their
//! own stay apart: `memory` (resident size), `cuda` (process-wide device
//! counters), `data`, `resume` and `tensor` (they replay the global
//! generator, which tests running beside them would draw from), `examples`
//! (runs the example programs) and `ui` (trybuild).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/core_ops.rs"]
mod core_ops;
#[path = "../common/linalg_ops.rs"]
mod linalg_ops;
/// The seed MLP written by hand (the examples' copy).
#[path = "../../examples/common/seed.rs"]
mod seed;

mod amp;
mod attention;
mod autograd;
mod checkpoint;
mod ctc;
mod decoder_layers;
mod double_backward;
mod edge_values;
mod embeddings;
mod errors;
mod familiar_ops;
mod functional_api;
mod functional_grad;
mod fused;
mod golden_layers;
mod goldens;
mod init;
mod layer_grads;
mod layer_table;
mod layouts;
mod lbfgs;
mod linalg;
mod linear_cross_entropy;
mod loss_modules;
mod margin_losses;
mod model_macro;
mod model_rows;
mod module_tree;
mod nn_goldens;
mod optim_goldens;
mod packed;
mod parametrize;
mod retain_grad;
mod scatter;
mod sched_goldens;
mod structured;
mod swa;
mod training;
mod versions;
mod volumes;
