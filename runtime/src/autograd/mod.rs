//! Define-by-run autograd. Every op that sees an input requiring grad records
//! a [`Node`] holding its backward closure and edges to its inputs' nodes; the
//! graph lives exactly as long as the tensors that reference it.

mod engine;
mod grad_mode;
mod gradcheck;
mod recompute;

pub(crate) use engine::{
    Edge, Node, queue_callback, reached_by_current_backward, run_backward, running_node,
};
pub use grad_mode::{EnableGradGuard, NoGradGuard, enable_grad, is_grad_enabled, no_grad};
pub use gradcheck::{GradcheckError, gradcheck};
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
