//! Containers: `Sequential`, `ModuleList` and `ModuleDict`.

use super::module::{Forward, Module, repr_children};
use crate::Tensor;

/// Applies its modules in order (`nn.Sequential`); children are named
/// `0`, `1`, ... so state-dict keys match PyTorch's (`net.3.weight`).
///
/// ```
/// use tapir_runtime::nn::{Forward, Linear, Module, ReLU, Sequential};
/// use tapir_runtime::Tensor;
/// let net = Sequential::new().add(Linear::new(4, 8, true)).add(ReLU).add(Linear::new(8, 2, true));
/// assert_eq!(net.forward(&Tensor::zeros(&[3, 4])).shape(), &[3, 2]);
/// assert_eq!(net.named_parameters()[2].0, "2.weight");
/// ```
#[derive(Default)]
pub struct Sequential {
    /// The layers, applied in order.
    pub layers: Vec<Box<dyn Forward>>,
}

impl Sequential {
    /// An empty sequence (add layers with `add`).
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a module (builder style).
    #[allow(clippy::should_implement_trait)]
    pub fn add(mut self, m: impl Forward + 'static) -> Sequential {
        self.layers.push(Box::new(m));
        self
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Tensor {
        let mut h = x.clone();
        for (i, l) in self.layers.iter().enumerate() {
            // Named `0`, `1`, .. for the profiler and export errors, as in PyTorch.
            h = match crate::trace::active() {
                true => crate::trace::module(&i.to_string(), || l.forward(&h)),
                false => l.forward(&h),
            };
        }
        h
    }
}

impl Module for Sequential {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        for (i, l) in self.layers.iter().enumerate() {
            f(&i.to_string(), l.as_ref());
        }
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        for (i, l) in self.layers.iter_mut().enumerate() {
            f(&i.to_string(), l.as_mut());
        }
    }
    fn repr(&self) -> String {
        let names: Vec<String> = (0..self.layers.len()).map(|i| i.to_string()).collect();
        let kids: Vec<(&str, &dyn Module)> = names
            .iter()
            .zip(&self.layers)
            .map(|(n, l)| (n.as_str(), l.as_ref() as &dyn Module))
            .collect();
        repr_children("Sequential", &kids)
    }
    fn is_training(&self) -> bool {
        self.layers.first().is_none_or(|l| l.is_training())
    }
}

/// A list of modules of one type, indexed `0, 1, ...` (`nn.ModuleList`).
pub struct ModuleList<M: Module> {
    /// The modules.
    pub items: Vec<M>,
}

impl<M: Module> ModuleList<M> {
    /// A list of `items`, named `0`, `1`, ... in state dicts.
    pub fn new(items: Vec<M>) -> Self {
        ModuleList { items }
    }

    /// The modules in order.
    pub fn iter(&self) -> std::slice::Iter<'_, M> {
        self.items.iter()
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are no modules.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

impl<M: Module> std::ops::Index<usize> for ModuleList<M> {
    type Output = M;
    fn index(&self, i: usize) -> &M {
        &self.items[i]
    }
}

impl<'a, M: Module> IntoIterator for &'a ModuleList<M> {
    type Item = &'a M;
    type IntoIter = std::slice::Iter<'a, M>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl<M: Module> Module for ModuleList<M> {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        for (i, l) in self.items.iter().enumerate() {
            f(&i.to_string(), l);
        }
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        for (i, l) in self.items.iter_mut().enumerate() {
            f(&i.to_string(), l);
        }
    }
    fn repr(&self) -> String {
        let names: Vec<String> = (0..self.items.len()).map(|i| i.to_string()).collect();
        let kids: Vec<(&str, &dyn Module)> = names
            .iter()
            .zip(&self.items)
            .map(|(n, l)| (n.as_str(), l as &dyn Module))
            .collect();
        repr_children("ModuleList", &kids)
    }
    fn is_training(&self) -> bool {
        self.items.first().is_none_or(|l| l.is_training())
    }
}

/// Modules of one type by name, in insertion order (`nn.ModuleDict`): a
/// child's tensors are named `<key>.<name>` in state dicts, as PyTorch's.
///
/// ```
/// use tapir_runtime::nn::{Linear, Module, ModuleDict};
/// let mut heads = ModuleDict::new();
/// heads.insert("cls", Linear::new(4, 3, true));
/// heads.insert("box", Linear::new(4, 2, false));
/// let names: Vec<String> = heads.named_parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["cls.weight", "cls.bias", "box.weight"]);
/// assert_eq!(heads["box"].out_features, 2);
/// ```
pub struct ModuleDict<M: Module> {
    entries: Vec<(String, M)>,
}

impl<M: Module> Default for ModuleDict<M> {
    fn default() -> Self {
        ModuleDict { entries: vec![] }
    }
}

impl<M: Module> ModuleDict<M> {
    /// An empty dict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `module` under `key`, replacing (in its place) and returning
    /// any module there before, as assigning to a PyTorch `ModuleDict` key.
    /// A key with a `.` is refused: it would be read as a child's path.
    #[track_caller]
    pub fn insert(&mut self, key: &str, module: M) -> Option<M> {
        assert!(
            !key.is_empty() && !key.contains('.'),
            "ModuleDict: key {key:?} must be non-empty and contain no \".\""
        );
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) => Some(std::mem::replace(old, module)),
            None => {
                self.entries.push((key.to_string(), module));
                None
            }
        }
    }

    /// The module under `key`.
    pub fn get(&self, key: &str) -> Option<&M> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, m)| m)
    }

    /// The module under `key`, mutable.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut M> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, m)| m)
    }

    /// Takes the module under `key` out (`pop`).
    pub fn remove(&mut self, key: &str) -> Option<M> {
        let at = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(at).1)
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// The keys in insertion order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    /// The `(key, module)` pairs in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &M)> {
        self.entries.iter().map(|(k, m)| (k.as_str(), m))
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no modules.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<M: Module> std::ops::Index<&str> for ModuleDict<M> {
    type Output = M;
    #[track_caller]
    fn index(&self, key: &str) -> &M {
        self.get(key).unwrap_or_else(|| {
            let keys: Vec<&str> = self.keys().collect();
            panic!("ModuleDict: no key {key:?} (keys: {keys:?})")
        })
    }
}

impl<M: Module> Module for ModuleDict<M> {
    fn visit_children<'a>(&'a self, f: &mut dyn FnMut(&str, &'a dyn Module)) {
        for (k, m) in &self.entries {
            f(k, m);
        }
    }
    fn visit_children_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn Module)) {
        for (k, m) in &mut self.entries {
            f(k, m);
        }
    }
    fn repr(&self) -> String {
        let kids: Vec<(&str, &dyn Module)> = self
            .entries
            .iter()
            .map(|(k, m)| (k.as_str(), m as &dyn Module))
            .collect();
        repr_children("ModuleDict", &kids)
    }
    fn is_training(&self) -> bool {
        self.entries.first().is_none_or(|(_, m)| m.is_training())
    }
}

crate::display_as_repr!(Sequential);
