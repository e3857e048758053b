//! The seed models written by hand: the reference for what `model!` generates.
//! Parameter names match the PyTorch modules of `scripts/gen_nn_goldens.py`
//! key for key (`blocks.0.net.3.weight`).
#![allow(dead_code)] // each including example uses a different part

use tapir::Tensor;
use tapir::nn::{
    Forward, GELU, LayerNorm, Linear, Module, ModuleList, Sequential, repr_of_children,
};

/// `x + Seq(Linear(d, d), LayerNorm(d), GELU(), Linear(d, d))(x)`.
pub struct ResBlock {
    pub net: Sequential,
}

impl ResBlock {
    pub fn new(d: usize) -> ResBlock {
        let net = Sequential::new()
            .add(Linear::new(d, d, true))
            .add(LayerNorm::new(&[d], 1e-5, true))
            .add(GELU::default())
            .add(Linear::new(d, d, true));
        ResBlock { net }
    }
}

impl Forward for ResBlock {
    fn forward(&self, x: &Tensor) -> Tensor {
        x + &self.net.forward(x)
    }
}

/// A composite names its children; its tensors, `named_modules`, `apply`
/// and train/eval come from them.
impl Module for ResBlock {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        f("net", &self.net);
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        f("net", &mut self.net);
    }
    fn repr(&self) -> String {
        repr_of_children("ResBlock", self)
    }
}

/// The seed MLP: `Linear(784, 256)`, 4 residual blocks, `Linear(256, 10)`.
pub struct Mlp {
    pub stem: Linear,
    pub blocks: ModuleList<ResBlock>,
    pub head: Linear,
}

impl Mlp {
    pub fn new(input: usize, hidden: usize, classes: usize, depth: usize) -> Mlp {
        Mlp {
            stem: Linear::new(input, hidden, true),
            blocks: ModuleList::new((0..depth).map(|_| ResBlock::new(hidden)).collect()),
            head: Linear::new(hidden, classes, true),
        }
    }

    /// The seed's sizes: 784 -> 256 (x4 blocks) -> 10.
    pub fn seed() -> Mlp {
        Mlp::new(784, 256, 10, 4)
    }
}

impl Forward for Mlp {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = self.stem.forward(x);
        for b in &self.blocks {
            h = b.forward(&h);
        }
        self.head.forward(&h)
    }
}

impl Module for Mlp {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        f("stem", &self.stem);
        f("blocks", &self.blocks);
        f("head", &self.head);
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        f("stem", &mut self.stem);
        f("blocks", &mut self.blocks);
        f("head", &mut self.head);
    }
    fn repr(&self) -> String {
        repr_of_children("Mlp", self)
    }
}
