//! Define-by-run autograd. Every op that sees an input requiring grad records
//! a node holding its backward closure and edges to its inputs' nodes; the
//! graph lives exactly as long as the tensors that reference it.
//!
//! [`grad`] and [`grad_with`] are PyTorch's `torch.autograd.grad`: the
//! gradients with respect to chosen inputs, returned; with `create_graph`
//! they can be differentiated again.

mod double;
mod engine;
pub mod functional;
mod grad;
mod grad_mode;
mod gradcheck;
mod recompute;

pub use double::TWICE_DIFFERENTIABLE;
pub(crate) use double::{SavedOrigin, differentiating, origin_edge, origin_of, saving_outputs_of};
pub use grad::{BackwardOptions, GradOptions, backward, grad, grad_with};

pub(crate) use engine::{Edge, Node, queue_callback, reached_by_current_backward, running_node};
pub use grad_mode::{EnableGradGuard, NoGradGuard, enable_grad, is_grad_enabled, no_grad};
pub use gradcheck::{GradcheckError, gradcheck, gradgradcheck};
pub use recompute::{Region, checkpoint, checkpoint_sequential, checkpoint_with};

use crate::Tensor;

/// What a node's backward closure gets: each output's gradient (`None`
/// where nothing flowed into it; a single-output node always gets one), and
/// which inputs need a gradient (others may be returned as `None`, and
/// their work skipped — frozen parameters cost nothing).
pub(crate) type MultiBackwardFn =
    Box<dyn FnMut(&[Option<Tensor>], &[bool]) -> Vec<Option<Tensor>> + Send>;

/// A gradient hook: sees the gradient flowing into a tensor and may replace it.
pub type GradHook = Box<dyn Fn(&Tensor) -> Option<Tensor> + Send + Sync>;

/// A hook run after a backward has accumulated into a leaf's `.grad`.
pub type PostAccumulateHook = std::sync::Arc<dyn Fn(&Tensor) + Send + Sync>;
