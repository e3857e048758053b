//! The tensor: shared storage, a layout into it, and its place in the graph.

use crate::autograd::{self, Edge, GradHook, Node, PostAccumulateHook, SavedOrigin};
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::Result;
use crate::storage::Storage;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tapir_kernels::Layout;

/// An n-dimensional array on a device that can record the ops applied to it.
/// Cloning is cheap (the data is shared); views share storage too.
///
/// ```
/// use tapir_runtime::Tensor;
/// let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).requires_grad_(true);
/// let loss = (&a * &a).sum();
/// loss.backward();
/// assert_eq!(a.grad().unwrap().to_vec::<f32>(), vec![2.0, 4.0, 6.0, 8.0]);
/// ```
#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub storage: Arc<SharedStorage>,
    pub layout: Layout,
    pub dtype: DType,
    pub device: Device,
    pub requires_grad: AtomicBool,
    pub grad: Mutex<Option<Tensor>>,
    pub grad_fn: Option<Arc<Node>>,
    /// Which of `grad_fn`'s outputs this tensor is (0 but for `split`'s).
    pub output_nr: usize,
    pub hooks: Mutex<Vec<GradHook>>,
    /// Leaves only: called once a backward has accumulated everything it
    /// will into `.grad` (data parallel's bucket trigger).
    pub post_accumulate_hooks: Mutex<Vec<PostAccumulateHook>>,
    /// Handles a backward closure keeps (see [`Tensor::saved`]): the
    /// storage's version when the forward saved it. Reading through the
    /// handle checks that nothing has written to the storage since.
    pub saved_version: Option<u64>,
    /// Saved handles only: the tensor this one stands for while a
    /// `create_graph` backward records (see `autograd::double`).
    pub saved_origin: Option<SavedOrigin>,
}

/// A buffer shared by a tensor, its views and its detached handles, with
/// PyTorch's version counter: every write bumps it, so a backward can tell
/// that a tensor it saved was modified in place after the forward.
pub(crate) struct SharedStorage {
    data: RwLock<Storage>,
    version: AtomicU64,
}

impl SharedStorage {
    fn new(storage: Storage) -> Arc<SharedStorage> {
        Arc::new(SharedStorage {
            data: RwLock::new(storage),
            version: AtomicU64::new(0),
        })
    }
}

impl Tensor {
    pub(crate) fn from_storage(storage: Storage, shape: &[usize]) -> Tensor {
        let dtype = storage.dtype();
        let device = storage.device();
        Tensor::from_parts(
            SharedStorage::new(storage),
            Layout::contiguous(shape),
            dtype,
            device,
        )
    }

    /// A tensor over all of a new, dense `storage` in `layout` (offset 0,
    /// strides some order of `layout.shape`'s dims).
    pub(crate) fn from_storage_laid_out(storage: Storage, layout: Layout) -> Tensor {
        let dtype = storage.dtype();
        let device = storage.device();
        Tensor::from_parts(SharedStorage::new(storage), layout, dtype, device)
    }

    /// A tensor of `shape` over all of `storage`, held in an attention
    /// result's `order` (dense, or heads inside rows).
    pub(crate) fn from_storage_in(
        storage: Storage,
        shape: &[usize],
        order: tapir_kernels::cpu::AttentionOrder,
    ) -> Tensor {
        let dtype = storage.dtype();
        let device = storage.device();
        let layout = Layout {
            strides: order.strides(shape),
            shape: shape.to_vec(),
            offset: 0,
        };
        Tensor::from_parts(SharedStorage::new(storage), layout, dtype, device)
    }

    pub(crate) fn from_parts(
        storage: Arc<SharedStorage>,
        layout: Layout,
        dtype: DType,
        device: Device,
    ) -> Tensor {
        if crate::trace::active() {
            crate::trace::made_outside_ops(layout.numel());
        }
        Tensor::handle(storage, layout, dtype, device, None)
    }

    /// A new detached handle on `storage`, unseen by a recording.
    fn handle(
        storage: Arc<SharedStorage>,
        layout: Layout,
        dtype: DType,
        device: Device,
        saved_version: Option<u64>,
    ) -> Tensor {
        Tensor(Arc::new(Inner {
            storage,
            layout,
            dtype,
            device,
            requires_grad: AtomicBool::new(false),
            grad: Mutex::new(None),
            grad_fn: None,
            output_nr: 0,
            hooks: Mutex::new(Vec::new()),
            post_accumulate_hooks: Mutex::new(Vec::new()),
            saved_version,
            saved_origin: None,
        }))
    }

    /// A view of this tensor's storage with another layout (no autograd).
    /// A view of a [saved](Tensor::saved) handle checks its reads as the
    /// handle does.
    pub(crate) fn view_with(&self, layout: Layout) -> Tensor {
        let (storage, dtype, device) = (self.0.storage.clone(), self.0.dtype, self.0.device);
        match self.0.saved_version {
            None => Tensor::from_parts(storage, layout, dtype, device),
            saved => Tensor::handle(storage, layout, dtype, device, saved),
        }
    }

    /// PyTorch's `preserve_format` for a new buffer like `self`: when
    /// `self` is dense but not row-major, its dims from outermost to
    /// innermost, and a function that views a row-major tensor of those
    /// dims with `self`'s strides; `None` when a row-major buffer is what
    /// PyTorch makes (`self` row-major, or with gaps or overlaps).
    pub(crate) fn preserved_format(&self) -> Option<(Vec<usize>, impl Fn(Tensor) -> Tensor + '_)> {
        let order = self
            .layout()
            .dense_order()
            .filter(|_| !self.is_contiguous())?;
        let view = move |dense: Tensor| {
            let mut layout = self.layout().clone();
            layout.offset = 0;
            dense.view_with(layout)
        };
        Some((order, view))
    }

    /// A handle for a backward closure to keep: detached, and checked at
    /// every read that no in-place op has written to the data since it was
    /// saved (PyTorch's `save_for_backward` and its version check). Without
    /// the check a backward would silently use the modified values.
    pub(crate) fn saved(&self) -> Tensor {
        // Not through `from_parts`: a new handle on existing data is no new
        // tensor to a recording (a checkpoint saves its inputs outside any
        // op).
        let (storage, layout) = (self.0.storage.clone(), self.0.layout.clone());
        let mut handle = Tensor::handle(
            storage,
            layout,
            self.0.dtype,
            self.0.device,
            Some(self.version()),
        );
        if let Some(origin) = autograd::origin_of(self) {
            Arc::get_mut(&mut handle.0)
                .expect("a handle made just now has no other holder")
                .saved_origin = Some(origin);
        }
        handle
    }

    /// How many times the data has been written in place
    /// (PyTorch's `Tensor._version`): shared by views and detached handles,
    /// since they share the data. A backward that needs a tensor checks
    /// that it is still at the version the forward saved.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::zeros(&[3]);
    /// let row = x.narrow(0, 1, 2);
    /// row.add_scalar_(1.0);
    /// assert_eq!((x.version(), row.version()), (1, 1));
    /// assert_eq!((&x + 1.0).version(), 0);
    /// ```
    pub fn version(&self) -> u64 {
        self.0.storage.version.load(Ordering::Acquire)
    }

    /// Attaches a backward node to a freshly computed `out` when grad mode is
    /// on and an input requires grad. `make` builds the backward closure only
    /// then, so inference pays nothing for it.
    pub(crate) fn record<F>(
        out: Tensor,
        name: &'static str,
        inputs: &[&Tensor],
        make: impl FnOnce() -> F,
    ) -> Tensor
    where
        F: FnMut(&Tensor, &[bool]) -> Vec<Option<Tensor>> + Send + 'static,
    {
        if !Tensor::records(name, inputs) {
            return out;
        }
        // The closure is made knowing its node, so an output it saves
        // remembers (weakly) that it is that node's (`create_graph`).
        let storage = [Arc::as_ptr(&out.0.storage)];
        let node = Arc::new_cyclic(|node| {
            let backward = autograd::saving_outputs_of(node, &storage, make);
            Node::new(name, Tensor::edges(inputs), backward)
        });
        Tensor::with_node(out, &node, 0)
    }

    /// [`Tensor::record`] for an op with several outputs (`split`): one node
    /// for all of them, whose backward gets every output's gradient at once
    /// (`None` for an output nothing flowed into).
    pub(crate) fn record_many<F>(
        outs: Vec<Tensor>,
        name: &'static str,
        inputs: &[&Tensor],
        make: impl FnOnce() -> F,
    ) -> Vec<Tensor>
    where
        F: FnMut(&[Option<Tensor>], &[bool]) -> Vec<Option<Tensor>> + Send + 'static,
    {
        if !Tensor::records(name, inputs) {
            return outs;
        }
        let edges = Tensor::edges(inputs);
        let storage: Vec<_> = outs.iter().map(|o| Arc::as_ptr(&o.0.storage)).collect();
        let node = Arc::new_cyclic(|node| {
            let backward = autograd::saving_outputs_of(node, &storage, make);
            Node::new_many(name, edges, outs.len(), Box::new(backward))
        });
        outs.into_iter()
            .enumerate()
            .map(|(i, out)| Tensor::with_node(out, &node, i))
            .collect()
    }

    /// Whether an op over `inputs` records a node now (grad mode on and an
    /// input requiring grad).
    fn records(name: &'static str, inputs: &[&Tensor]) -> bool {
        if !Tensor::any_needs_grad(inputs) {
            return false;
        }
        if crate::trace::active() {
            crate::trace::node_outside_ops(name);
        }
        true
    }

    /// Whether an op over `inputs` would record a node: grad mode is on and
    /// an input requires grad (ops with a faster inference-only kernel ask).
    pub(crate) fn any_needs_grad(inputs: &[&Tensor]) -> bool {
        autograd::is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
    }

    pub(crate) fn edges(inputs: &[&Tensor]) -> Vec<Edge> {
        inputs
            .iter()
            .map(|t| match (&t.0.grad_fn, t.requires_grad()) {
                (Some(n), _) => Edge::Node(n.clone(), t.0.output_nr),
                (None, true) => match &t.0.saved_origin {
                    Some(origin) => autograd::origin_edge(origin),
                    None => Edge::Leaf((*t).clone()),
                },
                (None, false) => Edge::None,
            })
            .collect()
    }

    /// `out` as output `output_nr` of `node`.
    pub(crate) fn with_node(out: Tensor, node: &Arc<Node>, output_nr: usize) -> Tensor {
        let name = node.name;
        let inner = match Arc::try_unwrap(out.0) {
            Ok(inner) => inner,
            // A recording (compile, export) holds every op's output; a node
            // recorded outside an op (a checkpoint region's) may find its
            // tensor held there, and gets a new handle on the same data.
            Err(shared) if crate::trace::active() => {
                let (storage, layout) = (shared.storage.clone(), shared.layout.clone());
                let fresh = Tensor::handle(storage, layout, shared.dtype, shared.device, None);
                Arc::into_inner(fresh.0).expect("a handle made just now has no other holder")
            }
            Err(_) => panic!("{name}: op output is shared before recording"),
        };
        Tensor(Arc::new(Inner {
            grad_fn: Some(node.clone()),
            output_nr,
            requires_grad: AtomicBool::new(true),
            ..inner
        }))
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Storage> {
        if let Some(saved) = self.0.saved_version {
            self.check_saved_version(saved);
        }
        self.0
            .storage
            .data
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Every write goes through here, and counts as one version.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Storage> {
        self.0.storage.version.fetch_add(1, Ordering::AcqRel);
        self.0
            .storage
            .data
            .write()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Panics, naming the backward node that reads, when the data of a
    /// saved handle was written after the save.
    fn check_saved_version(&self, saved: u64) {
        let now = self.version();
        assert!(
            now == saved,
            "{}: one of the tensors needed for gradient computation ({} {:?}) has been modified by an in-place \
             operation since the forward saved it: it is at version {now}, the backward expected version {saved} \
             (modify a clone() instead, or make the in-place change after backward)",
            crate::autograd::running_node().unwrap_or("backward"),
            self.dtype(),
            self.shape()
        );
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.0.layout
    }

    pub(crate) fn same_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    /// An identity of the storage, equal for tensors that share it.
    pub(crate) fn storage_id(&self) -> usize {
        Arc::as_ptr(&self.0.storage) as *const () as usize
    }

    // ---- creation from data -------------------------------------------------

    /// A tensor holding `data` with `shape` (row-major).
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let t = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[2, 3]);
    /// assert_eq!(t.shape(), &[2, 3]);
    /// ```
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        assert!(
            data.len() == n,
            "from_vec: {} elements cannot have shape {shape:?} ({n} elements)",
            data.len()
        );
        Tensor::from_storage(Storage::from_vec(data), shape)
    }

    /// As [`Tensor::from_vec`], copying a slice.
    pub fn from_slice<T: Element>(data: &[T], shape: &[usize]) -> Tensor {
        Tensor::from_vec(data.to_vec(), shape)
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_vec(vec![v], &[])
    }

    // ---- metadata -----------------------------------------------------------

    /// Size of each dim.
    pub fn shape(&self) -> &[usize] {
        &self.0.layout.shape
    }

    /// Size of dim `d` (negative counts from the end).
    pub fn size(&self, d: isize) -> usize {
        self.shape()[self.dim(d, "size")]
    }

    /// Elements to step over per index of each dim (0 where broadcast).
    pub fn strides(&self) -> &[usize] {
        &self.0.layout.strides
    }

    /// Number of dims.
    #[doc(alias = "dim")]
    #[doc(alias = "ndimension")]
    pub fn ndim(&self) -> usize {
        self.0.layout.ndim()
    }

    /// Number of elements.
    #[doc(alias = "nelement")]
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// Where the data lives.
    pub fn device(&self) -> Device {
        self.0.device
    }

    /// Whether the view is row-major and dense.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// Normalises a possibly negative dim, panicking with `op`'s name.
    pub(crate) fn dim(&self, d: isize, op: &str) -> usize {
        // A 0-d tensor takes dims 0 and -1, as PyTorch's.
        let n = self.ndim().max(1) as isize;
        let r = if d < 0 { d + n } else { d };
        assert!(
            (0..n).contains(&r),
            "{op}: dim {d} is out of range for a tensor of shape {:?} (expected in [{}, {}])",
            self.shape(),
            -n,
            n - 1
        );
        r as usize
    }

    // ---- autograd -----------------------------------------------------------

    /// Whether ops on this tensor are recorded for autograd.
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
            || (self.0.saved_origin.is_some() && autograd::differentiating())
    }

    /// Sets whether a leaf records ops for autograd; returns the tensor so it
    /// chains (`Tensor::randn(..).requires_grad_(true)`).
    pub fn requires_grad_(self, on: bool) -> Tensor {
        assert!(
            self.is_leaf() || on,
            "requires_grad_: you can only change requires_grad flags of leaf tensors (this one comes from {}); \
             use detach() to get a tensor that does not require grad",
            self.grad_fn_name().unwrap_or("?")
        );
        assert!(
            !on || self.dtype().is_float(),
            "requires_grad_: only floating point tensors can require gradients, got {}",
            self.dtype()
        );
        self.0.requires_grad.store(on, Ordering::Relaxed);
        self
    }

    /// Like [`Tensor::requires_grad_`] but through a shared reference (module parameters).
    pub fn set_requires_grad(&self, on: bool) {
        let _ = self.clone().requires_grad_(on);
    }

    /// True for tensors created by the user rather than by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.0.grad_fn.is_none()
    }

    /// The accumulated gradient: `None` until a backward reaches this leaf
    /// (or this non-leaf, after [`Tensor::retain_grad`]).
    /// Later backwards add into this same tensor in place (as PyTorch's),
    /// so a handle taken now sees their sum.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::ones(&[2]).requires_grad_(true);
    /// (&w * 3.0).sum().backward();
    /// let g = w.grad().unwrap();
    /// (&w * 2.0).sum().backward();
    /// assert_eq!(g.to_vec::<f32>(), vec![5.0, 5.0]);
    /// ```
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().unwrap().clone()
    }

    /// Replaces the gradient (`None` frees it, as `zero_grad(set_to_none=True)`).
    pub fn set_grad(&self, grad: Option<Tensor>) {
        if let Some(g) = &grad {
            assert!(
                g.shape() == self.shape(),
                "set_grad: gradient shape {:?} differs from tensor shape {:?}",
                g.shape(),
                self.shape()
            );
        }
        *self.0.grad.lock().unwrap() = grad.map(|g| g.detach());
    }

    /// Name of the backward node that produced this tensor (`MulBackward0`).
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.0.grad_fn.as_ref().map(|n| n.name)
    }

    /// A tensor sharing this one's data, cut off from the graph.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::ones(&[2]).requires_grad_(true);
    /// let d = (&w * 2.0).detach();
    /// assert!(!d.requires_grad() && d.is_leaf());
    /// ```
    pub fn detach(&self) -> Tensor {
        crate::trace::op("detach", [self], Vec::new, || {
            self.view_with(self.0.layout.clone())
        })
    }

    /// Registers a hook called with the gradient flowing into this tensor; it
    /// may return a replacement. For leaves it runs before accumulation.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::ones(&[3]).requires_grad_(true);
    /// w.register_hook(|g| Some(g * 2.0));
    /// w.sum().backward();
    /// assert_eq!(w.grad().unwrap().to_vec::<f32>(), vec![2.0; 3]);
    /// ```
    pub fn register_hook(&self, hook: impl Fn(&Tensor) -> Option<Tensor> + Send + Sync + 'static) {
        assert!(
            self.requires_grad(),
            "register_hook: cannot register a hook on a tensor that does not require grad"
        );
        match &self.0.grad_fn {
            Some(n) => n
                .hooks
                .lock()
                .unwrap()
                .push((self.0.output_nr, Box::new(hook))),
            None => self.0.hooks.lock().unwrap().push(Box::new(hook)),
        }
    }

    /// Registers a hook on a leaf that runs after each backward has finished
    /// accumulating into its `.grad` (PyTorch's
    /// `register_post_accumulate_grad_hook`): once per backward, however many
    /// times the leaf was used. Data parallel training all-reduces gradient
    /// buckets from it while the rest of backward runs.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tapir_runtime::Tensor;
    /// let w = Tensor::ones(&[2]).requires_grad_(true);
    /// let seen = Arc::new(Mutex::new(vec![]));
    /// let log = seen.clone();
    /// w.register_post_accumulate_grad_hook(move |p| log.lock().unwrap().push(p.grad().unwrap().to_vec::<f32>()));
    /// (&w * &w + &w).sum().backward(); // w is used three times, the hook runs once
    /// assert_eq!(*seen.lock().unwrap(), vec![vec![3.0f32, 3.0]]);
    /// ```
    pub fn register_post_accumulate_grad_hook(
        &self,
        hook: impl Fn(&Tensor) + Send + Sync + 'static,
    ) {
        assert!(
            self.is_leaf() && self.requires_grad(),
            "register_post_accumulate_grad_hook: only a leaf that requires grad accumulates a gradient; this tensor \
             {}",
            if self.requires_grad() {
                "is not a leaf"
            } else {
                "does not require grad"
            }
        );
        self.0
            .post_accumulate_hooks
            .lock()
            .unwrap()
            .push(Arc::new(hook));
    }

    // ---- data out -----------------------------------------------------------

    /// The elements in row-major order, converted to `T`.
    pub fn to_vec<T: Element>(&self) -> Vec<T> {
        if crate::trace::active() {
            crate::trace::host_read("to_vec");
        }
        self.read().to_vec(self.layout())
    }

    /// The elements in row-major order, converted to `T`, into `dst` (no
    /// allocation for a dense CPU tensor of `T`): data parallel's buckets.
    pub(crate) fn read_into<T: Element>(&self, dst: &mut [T]) {
        self.read().read_into(self.layout(), dst)
    }

    /// Overwrites `self` in place with `src · scale` when it is a dense CPU
    /// tensor of `T` with `src.len()` elements; otherwise `false`, untouched.
    pub(crate) fn write_scaled<T: Element>(&self, src: &[T], scale: f64) -> bool {
        self.write().write_scaled(self.layout(), src, scale)
    }

    /// The value of a one-element tensor.
    pub fn item<T: Element>(&self) -> T {
        assert!(
            self.numel() == 1,
            "item: a tensor with {} elements cannot be converted to a scalar (shape {:?})",
            self.numel(),
            self.shape()
        );
        self.to_vec::<T>()[0]
    }

    /// A contiguous copy that shares nothing and records nothing.
    pub(crate) fn contiguous_copy(&self) -> Tensor {
        let storage = self.read().copy(self.layout());
        Tensor::from_storage(storage, self.shape())
    }

    /// This tensor on `device` (a copy when it moves; gradient flows back).
    ///
    /// A copy to a GPU never makes the host wait for queued GPU work: it is
    /// always PyTorch's `non_blocking=True`. From pageable memory the data
    /// goes through a pinned staging block (one host copy); from a
    /// [pinned](Tensor::pin_memory) contiguous tensor the GPU reads the
    /// tensor's own memory by DMA: writing to that tensor waits until the
    /// copy has read it, and its memory, once dropped, is not reused before,
    /// so the copy is never torn.
    pub fn to(&self, device: Device) -> Result<Tensor> {
        if device == self.device() {
            return Ok(self.clone());
        }
        let storage = self.read().to_device(self.layout(), device)?;
        let out = Tensor::from_storage(storage, self.shape());
        let src = self.device();
        Ok(Tensor::record(out, "ToCopyBackward0", &[self], move || {
            move |g: &Tensor, _: &[bool]| {
                vec![Some(
                    g.to(src).expect("the source device was usable in forward"),
                )]
            }
        }))
    }
}

impl Tensor {
    /// The address of the first element (`Tensor.data_ptr()`): a host
    /// address on the CPU, a device address on a GPU. Views of one tensor
    /// differ by their offsets; a CUDA graph replays on the addresses it
    /// captured.
    ///
    /// ```
    /// use tapir_runtime::Tensor;
    /// let x = Tensor::arange(6).reshape(&[2, 3]);
    /// assert_eq!(x.select(0, 1).data_ptr(), x.data_ptr() + 3 * 8);
    /// ```
    pub fn data_ptr(&self) -> usize {
        self.read().address() + self.layout().offset * self.dtype().size_in_bytes()
    }
}

// Tensors cross threads (DataLoader workers, data-parallel replicas).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Tensor>();
};
