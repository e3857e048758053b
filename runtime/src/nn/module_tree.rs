//! The module tree: what `named_children`, `named_modules`, `apply` and
//! `get_submodule` walk, and the downcasts (`isinstance`) that let a walk
//! act on one kind of layer.

use super::module::Module;
use std::any::Any;

/// Views of a module as `dyn Module` and as `dyn Any`. Every sized
/// [`Module`] has it through the blanket impl, so nobody implements it by
/// hand; it is a supertrait of [`Module`] because a provided method of a
/// trait cannot turn `self` into a trait object on its own.
pub trait AsModule: Any {
    /// This module as a `dyn Module` (what `apply` hands to its callback).
    fn as_module(&self) -> &dyn Module;
    /// As [`AsModule::as_module`], mutably.
    fn as_module_mut(&mut self) -> &mut dyn Module;
    /// This value as `dyn Any` (its own type; see [`Module::module_any`]
    /// for what a wrapper answers).
    fn as_any(&self) -> &dyn Any;
    /// As [`AsModule::as_any`], mutably.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Module> AsModule for T {
    fn as_module(&self) -> &dyn Module {
        self
    }
    fn as_module_mut(&mut self) -> &mut dyn Module {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// PyTorch's `isinstance(m, nn.Linear)` for a module met in a walk: the
/// concrete layer behind a `&dyn Module`, seen through `Box` and `Arc`.
///
/// ```
/// use tapir_runtime::nn::{Linear, Module, ReLU, Sequential};
/// let net = Sequential::new().add(Linear::new(4, 8, true)).add(ReLU);
/// let linears = net.modules().into_iter().filter(|m| m.is::<Linear>()).count();
/// assert_eq!(linears, 1);
/// let first = net.get_submodule("0").unwrap().downcast_ref::<Linear>().unwrap();
/// assert_eq!(first.weight.shape(), &[8, 4]);
/// ```
impl dyn Module + '_ {
    /// The module as a `T`, if it is one.
    pub fn downcast_ref<T: Module>(&self) -> Option<&T> {
        self.module_any().downcast_ref()
    }

    /// As [`downcast_ref`](#method.downcast_ref), mutably (to replace a
    /// layer's tensors in [`Module::apply`]).
    pub fn downcast_mut<T: Module>(&mut self) -> Option<&mut T> {
        self.module_any_mut().downcast_mut()
    }

    /// Whether the module is a `T`.
    pub fn is<T: Module>(&self) -> bool {
        self.module_any().is::<T>()
    }
}

/// Pushes every module below `m` (pre-order, each after its parent) with
/// its dotted name under `prefix`.
pub(crate) fn collect_modules<'a>(
    m: &'a dyn Module,
    prefix: &str,
    out: &mut Vec<(String, &'a dyn Module)>,
) {
    m.visit_children(&mut |name, child| {
        let full = dotted(prefix, name);
        out.push((full.clone(), child));
        collect_modules(child, &full, out);
    });
}

/// `prefix.name`, or `name` at the top.
fn dotted(prefix: &str, name: &str) -> String {
    match prefix.is_empty() {
        true => name.to_string(),
        false => format!("{prefix}.{name}"),
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;
    use crate::nn::{
        Dropout, Forward, GELU, LayerNorm, Linear, Module, ModuleList, ReLU, Sequential,
        TensorKind, TransformerEncoderLayer, TransformerEncoderLayerOptions,
    };

    /// A hand-written composite that only names its children: `visit`,
    /// `visit_mut` and `set_training` come from the tree.
    struct Block {
        proj: Linear,
        norm: LayerNorm,
        drop: Dropout,
    }

    impl Module for Block {
        fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
            f("proj", &self.proj);
            f("norm", &self.norm);
            f("drop", &self.drop);
        }
        fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
            f("proj", &mut self.proj);
            f("norm", &mut self.norm);
            f("drop", &mut self.drop);
        }
        fn repr(&self) -> String {
            "Block".into()
        }
    }

    fn names(m: &dyn Module) -> Vec<String> {
        m.named_modules().into_iter().map(|(n, _)| n).collect()
    }

    #[test]
    fn a_composite_that_names_its_children_gets_its_tensors_and_modes_from_them() {
        let mut b = Block {
            proj: Linear::new(3, 4, true),
            norm: LayerNorm::new(&[4], 1e-5, true),
            drop: Dropout::new(0.5),
        };
        let params: Vec<String> = b.named_parameters().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            params,
            ["proj.weight", "proj.bias", "norm.weight", "norm.bias"]
        );
        assert!(b.drop.is_training());
        b.eval();
        assert!(!b.drop.is_training());
        let x = Tensor::ones(&[2, 3]);
        assert_eq!(b.drop.forward(&x).to_vec::<f32>(), x.to_vec::<f32>());
        let mut seen = vec![];
        b.visit_mut(&mut |n, _, k| seen.push((n.to_string(), k)));
        assert_eq!(seen.len(), 4);
        assert!(seen.iter().all(|(_, k)| *k == TensorKind::Parameter));
        assert_eq!(names(&b), ["", "proj", "norm", "drop"]);
    }

    #[test]
    fn named_modules_walks_in_pytorch_order_through_boxes() {
        let net = Sequential::new()
            .add(Linear::new(4, 8, true))
            .add(Sequential::new().add(GELU::default()).add(ReLU))
            .add(Linear::new(8, 2, true));
        assert_eq!(names(&net), ["", "0", "1", "1.0", "1.1", "2"]);
        let children: Vec<String> = net.named_children().into_iter().map(|(n, _)| n).collect();
        assert_eq!(children, ["0", "1", "2"]);
        assert!(net.get_submodule("1.1").unwrap().is::<ReLU>());
        assert!(net.get_submodule("1.2").is_none());
        assert!(net.get_submodule("").unwrap().is::<Sequential>());
        let list = ModuleList::new(vec![Linear::new(2, 2, false), Linear::new(2, 2, false)]);
        assert_eq!(list.children().len(), 2);
    }

    #[test]
    fn apply_visits_children_before_parents_and_can_rewrite_tensors() {
        let mut net = Sequential::new()
            .add(Linear::new(4, 8, true))
            .add(ReLU)
            .add(Linear::new(8, 2, true));
        let mut order = vec![];
        net.apply(&mut |m| {
            order.push(m.repr().split('(').next().unwrap_or("").to_string());
            if let Some(l) = m.downcast_mut::<Linear>() {
                crate::nn::init::constant_(&l.weight, 0.5);
                l.bias = None;
            }
        });
        assert_eq!(order, ["Linear", "ReLU", "Linear", "Sequential"]);
        assert_eq!(net.named_parameters().len(), 2);
        let y = net.forward(&Tensor::ones(&[1, 4]));
        assert_eq!(y.to_vec::<f32>(), [8.0, 8.0]);
    }

    #[test]
    fn a_transformer_layer_lists_its_submodules() {
        let layer = TransformerEncoderLayer::new(
            8,
            2,
            TransformerEncoderLayerOptions {
                dim_feedforward: 16,
                ..Default::default()
            },
        );
        let found = names(&layer);
        for want in ["self_attn", "self_attn.out_proj", "linear1", "norm2"] {
            assert!(found.iter().any(|n| n == want), "{want} not in {found:?}");
        }
        assert!(
            layer
                .get_submodule("self_attn.out_proj")
                .unwrap()
                .is::<Linear>()
        );
    }
}
