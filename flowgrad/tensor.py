"""The Tensor: a NumPy array plus, when it takes part in autograd, an AutogradMeta.

Most methods are attached by the op modules (`@tensor_method`), so each op lives in one
place; this file holds what is the tensor's own: storage, autograd state, conversions.

>>> import flowgrad as flow
>>> x = flow.tensor([-1.0, 2.0], requires_grad=True)
>>> y = flow.relu(x).sum()
>>> y.backward(); x.grad
tensor([0., 1.])
"""
from __future__ import annotations

import operator

import numpy as np

from . import dtypes as _dt
from ._warn import called_by_user, warn, warn_once
from .autograd import engine
from .autograd import grad_mode as _grad_mode
from .autograd import interpreter as _interpreter
from .autograd import levels as _levels
from .autograd.accumulate import check_assigned_data, check_assigned_grad
from .autograd.forward_ad import _LEVELS as _FORWARD_LEVELS
from .autograd.inference import alias_counter, check_requires_grad, data_alias, tracks_no_versions
from .autograd.meta import AutogradMeta, HooksElsewhere, VersionCounter
from .autograd.torch_nodes import named as _named
from .autograd.views import moved_from_base, shown_base, sync_view
from .device import (
    ARRAY_MODULES,
    CPU,
    STORAGES,
    device_of,
    memory_owner,
    new_zeros,
    resolve_device,
    storage_start_offset,
    to_device,
    to_host,
)
from .hook_handles import ListHandle
from .meta import MetaArray
from .printing import is_parameter, meta_repr, prefix_of, tensor_repr

# Bound at import (`bind_late`) by the modules above this one, which import it:
as_array = None  # by flowgrad.ops.creation: a fresh array from data, torch's dtype inference
is_contiguous_as = None  # by flowgrad.typed_tensors, where memory formats live


def bind_late(**functions):
    """Hand this module functions that Tensor's own methods call but that live in modules
    importing this one (which therefore cannot import them)."""
    globals().update(functions)


_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead.")


def _warn_scalar_of_grad(t):
    """torch's warning (once a process) that a tensor requiring grad became a Python number."""
    if t.requires_grad and called_by_user(3, through_tensor=True):
        warn_once("Converting a tensor with requires_grad=True to a scalar may lead to "
                  "unexpected behavior.\nConsider using tensor.detach() first.")


class Tensor:
    """An n-dimensional array with autograd. Construct with `flowgrad.tensor(data)`.

    `Tensor(data)` and `Tensor(*sizes)` behave as torch's legacy constructor: the default
    float dtype, and uninitialised storage for sizes.
    """

    # _lvl: the level token of a tensor made inside func transforms (autograd/levels.py),
    # unset elsewhere (set only while a transform is entered: no cost outside them).
    # __dict__: a user's own attributes (`t.tag = ...`, as torch's tensors take), made only
    # when one is set; deepcopy, pickling and checkpoints carry them, as torch's
    __slots__ = ("_data", "_meta", "_grad_fn", "_counter", "_view", "_lvl", "__dict__",
                 "__weakref__")
    __array_priority__ = 1000  # numpy defers `ndarray * Tensor` to Tensor.__rmul__

    def __init__(self, *args, dtype=None, requires_grad=False, device=None, **extra):
        if type(self) is not Tensor and hasattr(self, "_data"):
            return  # (a subclass's __new__ made it, by _make_subclass: its arguments are its)
        if extra:
            raise TypeError(f"Tensor.__init__() got an unexpected keyword argument "
                            f"{next(iter(extra))!r}")
        dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
        if not args:
            data = np.empty((0,), dt.np)
        elif all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            data = np.empty(tuple(int(a) for a in args), dt.np)
        else:
            data = as_array(args[0], dt)
        if device is not None:
            data = to_device(data, resolve_device(device, "Tensor"))
        self._data = data
        self._meta = None
        self._grad_fn = None
        self._counter = None
        self._view = None  # a ViewInfo when this tensor is a view (autograd/views.py)
        if _levels.TOKENS:  # (the legacy constructor: made at the innermost transform's level)
            self._lvl = _levels.TOKENS[-1]
        if requires_grad:
            self._set_requires_grad(True)

    @classmethod
    def _wrap(cls, array):
        """Wrap an array of any registered device without copying (the one path every tensor
        is made through); host data such as NumPy scalars becomes a 0-d CPU array."""
        t = object.__new__(Tensor)
        t._data = array if type(array) is np.ndarray or type(array) in ARRAY_MODULES \
            else np.asarray(array)
        t._meta = None
        t._grad_fn = None
        t._counter = None
        t._view = None
        return t

    @classmethod
    def _zeros(cls, shape, np_dtype, like=None):
        """Zeros on the device of tensor `like` (the CPU when None)."""
        return cls._wrap(np.zeros(shape, np_dtype) if like is None else
                         new_zeros(like._data, shape, np_dtype))

    # ---- storage and metadata -------------------------------------------------------
    @property
    def shape(self):
        """The tensor's size, a `flowgrad.Size` (a tuple)."""
        return Size(self._data.shape)

    def size(self, dim=None):
        """`size()` is the shape; `size(dim)` one of its entries."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self):
        return _dt._FROM_NP[self._data.dtype]

    @property
    def device(self):
        return CPU if type(self._data) is np.ndarray else device_of(self._data)

    @property
    def is_cuda(self):
        return type(self._data) is not np.ndarray and device_of(self._data).type == "cuda"

    @property
    def is_cpu(self):
        return type(self._data) is np.ndarray or device_of(self._data) is CPU

    @property
    def is_xpu(self):
        return type(self._data) is not np.ndarray and device_of(self._data).type == "xpu"

    @property
    def is_mps(self):
        return type(self._data) is not np.ndarray and device_of(self._data).type == "mps"


    @property
    def is_quantized(self):
        return False  # nor quantized ones

    @property
    def is_nested(self):
        return False  # nor nested ones

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def ndimension(self):
        return self._data.ndim

    def numel(self):
        return self._data.size

    def nelement(self):
        return self._data.size

    def element_size(self):
        return self._data.itemsize

    @property
    def itemsize(self):
        """Bytes per element (`element_size()`)."""
        return self._data.itemsize

    @property
    def nbytes(self):
        """Bytes the elements take: numel * itemsize (an expanded view counts every element)."""
        return self._data.size * self._data.itemsize

    def storage_offset(self):
        """Elements from the start of the storage to this tensor's first one: 0 unless it is a
        view into its base (a zero-size view: 0, as NumPy keeps no position for it).

        >>> import flowgrad as flow
        >>> flow.arange(6).view(2, 3)[1, 1:].storage_offset()
        4
        """
        view = self._view
        if view is None:  # (0 unless it lies in a storage array: a deep copy's, a checkpoint's)
            return storage_start_offset(self._data)
        item = self._data.itemsize
        if moved_from_base(self):
            start = memory_owner(self._data).__array_interface__["data"][0]
            return (self.data_ptr() - start) // item
        base = view.base  # (itself at an offset in its storage after set_ or resize_)
        return (base.storage_offset() * base._data.itemsize + self.data_ptr() -
                base.data_ptr()) // item

    def is_floating_point(self):
        return self._data.dtype.kind in "fV"

    def is_contiguous(self, memory_format=None):
        if memory_format is not None and getattr(memory_format, "name", None) not in (
                "contiguous_format", "channels_last", "channels_last_3d", "preserve_format"):
            raise TypeError(f"is_contiguous(): argument 'memory_format' must be "
                            f"flowgrad.memory_format, not {type(memory_format).__name__}")
        if memory_format is not None and memory_format.name.startswith("channels_last"):
            return is_contiguous_as(self, memory_format)
        return self._data.flags.c_contiguous

    def stride(self, dim=None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim, "stride")]

    def data_ptr(self):
        return self._data.__array_interface__["data"][0]

    const_data_ptr = data_ptr

    def is_set_to(self, tensor):
        """Whether both tensors are the same elements of the same memory: same first element,
        shape and strides (torch's same storage, offset, size and stride).

        >>> import flowgrad as flow
        >>> x = flow.ones(2)
        >>> x.is_set_to(x), x.is_set_to(x.clone()), x[:1].is_set_to(x)
        (True, False, False)
        """
        if not isinstance(tensor, Tensor):
            raise TypeError(f"is_set_to(): argument 'tensor' (position 1) must be Tensor, not "
                            f"{type(tensor).__name__}")
        a, b = self._data, tensor._data
        return self.data_ptr() == tensor.data_ptr() and a.shape == b.shape and \
            a.strides == b.strides and a.dtype == b.dtype

    def is_pinned(self, device=None):
        """False: flowgrad's memory is ordinary host memory (nothing to pin it for)."""
        return False

    def pin_memory(self, device=None):
        """torch's pinned copy needs an accelerator; as torch without one, this raises."""
        raise RuntimeError("pin_memory: Cannot access accelerator device when none is "
                           "available; flowgrad has no accelerator, so there is nothing to pin "
                           "host memory for (drop pin_memory / pin_memory=True)")

    def is_distributed(self):
        """False, as torch's on a tensor (it is torch's old THD flag)."""
        return False

    def __delitem__(self, index):
        raise TypeError("Tensor does not support deleting items")

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))  # as torch: the elements are views from one unbind

    def __hash__(self):
        return id(self)

    # ---- autograd state ---------------------------------------------------------------
    def _sync(self):
        """A view whose base was written in place since its grad_fn was set: regenerate it."""
        view = self._view
        if view is not None and view.version != self._counter.value:
            sync_view(self)

    @property
    def requires_grad(self):
        m = self._meta
        if m is not None and m.requires_grad:
            return True
        view = self._view  # a view requires grad when its base does (torch's rule)
        return view is not None and view.base.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):  # (allowed inside func transforms, as torch's attribute)
        if value.__class__ is not bool:
            raise RuntimeError(f"requires_grad must be a bool, got {type(value).__name__}")
        self._set_requires_grad(value, attribute=True)

    def requires_grad_(self, requires_grad=True):
        """Set requires_grad on a leaf, in place; returns self. Refused inside a function
        transformed by flowgrad.func (grad, vjp, jvp, vmap, ...), as torch's functorch does.

        >>> import flowgrad as flow
        >>> flow.zeros(2).requires_grad_().requires_grad
        True
        """
        if len(_levels.TRANSFORMS) > len(_levels.LEGACY):
            raise RuntimeError(
                "requires_grad_(): called inside a function transformed by flowgrad.func "
                "(grad, vjp, jvp, vmap, jacrev, ...), where it is unsupported, as in torch. "
                "Let the transforms differentiate (pass the tensor as an input of func.grad "
                "or func.vjp), or call requires_grad_() outside the transformed function")
        return self._set_requires_grad(requires_grad)

    def _leaf_here(self):
        """Whether this tensor is a leaf where requires_grad is set: it has no grad_fn, or it
        is a func.grad/vjp's input (a leaf at that level; the outer levels' history of it
        stays)."""
        return self._grad_fn is None or bool(_levels.TRANSFORMS) and (
            self._meta in _levels.TRANSFORM_INPUTS or _levels.level_leaf(self._meta))

    def _set_requires_grad(self, requires_grad=True, attribute=False):
        """requires_grad_() for flowgrad itself and the attribute form: no transform check
        (the `attribute` refuses a non-leaf even for True, as torch's)."""
        # leafness as torch's C++ reads it: the grad_fn the tensor has, a stale view's history
        # not regenerated (a view made a leaf, or made under no_grad, stays a leaf here)
        if not self._leaf_here():
            if not requires_grad or attribute:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables; this tensor "
                    f"was computed by {self._grad_fn.name}. Use detach() to get a tensor "
                    "that does not require grad")
            return self
        if requires_grad and self._counter is not None \
                and self._counter.__class__ is not VersionCounter:  # an inference tensor
            check_requires_grad(self)
        if requires_grad and self._data.dtype.kind not in "fVc":
            raise RuntimeError(
                f"only tensors of floating point and complex dtype can require gradients; got "
                f"{self.dtype} (shape {tuple(self._data.shape)}); convert with .float() first")
        meta = self._meta
        if meta is None:
            if not requires_grad:
                return self
            meta = self._meta = AutogradMeta(True, True)
        elif meta.requires_grad == bool(requires_grad):
            return self
        else:
            meta.requires_grad = bool(requires_grad)
        if requires_grad and _levels.TOKENS:
            _levels.made_leaf(self)
        return self

    def is_inference(self):
        """Whether this tensor was made in inference mode (see autograd/inference.py)."""
        return self._counter is not None and self._counter.__class__ is not VersionCounter

    @property
    def is_leaf(self):
        self._sync()
        return self._leaf_here()

    @property
    def grad_fn(self):
        self._sync()
        node = self._grad_fn
        if node is not None:
            if self._leaf_here():
                return None  # (func.grad's input inside another transform: a leaf at its level)
            return _named(node)  # (as torch names it: MulBackward0)
        return node

    @property
    def grad(self):
        """The accumulated gradient (`acc_grad`): set for leaves, and for non-leaves only
        after `retain_grad()` (reading a non-leaf's without it warns, as torch's)."""
        m = self._meta
        if m is None:
            return None
        g = m.acc_grad
        if g is None and self._grad_fn is not None and m.retain_grad is False and \
                called_by_user():
            warn(_NON_LEAF_GRAD)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            sparse = getattr(value, "is_sparse", False)  # (a sparse COO gradient, as
            # Embedding(sparse=True) makes)
            if not sparse and not isinstance(value, Tensor):
                raise TypeError(f"assigned grad must be a Tensor or None, got {type(value)}")
            check_assigned_grad(self, value)
        if self._meta is None:
            if value is None:
                return
            self._meta = AutogradMeta(False, True)
        self._meta.acc_grad = value

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in `.grad` after backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        # as torch's: a leaf, or a tensor already retaining, returns at once; otherwise
        # grad_fn is read, which regenerates a stale view (a multi-output one raises)
        if self._grad_fn is None or self._meta.retain_grad is not False:
            return
        self._sync()
        if self._grad_fn is not None:  # (a stale view keeps the flag for its next history)
            self._meta.retain_grad = True

    @property
    def retains_grad(self):
        m = self._meta
        return m is not None and m.retain_grad is not False

    def register_hook(self, hook):
        """Call `hook(grad)` with this tensor's summed gradient during backward; a return
        value other than None replaces the gradient. Returns a handle with `remove()`.

        >>> import flowgrad as flow
        >>> x = flow.ones(2, requires_grad=True)
        >>> h = x.register_hook(lambda g: g * 2)
        >>> x.sum().backward(); x.grad
        tensor([2., 2.])
        """
        m = self._meta
        if m is not None and m.hooks is not None and not m.requires_grad and self.requires_grad:
            return ListHandle([], hook)  # a later hook of a no_grad view (below): torch's
            # register_hook reads grad_fn only at a tensor's first, so a stale one passes
        self._sync()
        m = self._meta
        if m is None or not m.requires_grad:
            if self.requires_grad:  # a no_grad view of a tensor requiring grad: a leaf that
                if m is None:  # no gradient ever reaches, as torch's
                    m = self._meta = AutogradMeta(False, True)
                m.hooks = []  # (stays empty: marks that it had one)
                return ListHandle([], hook)
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient")
        hooks = m.hooks
        if hooks is None:
            hooks = m.hooks = []
        elif type(hooks) is HooksElsewhere:  # (after an in-place layout change)
            hooks = hooks.hooks
        return ListHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """On a leaf: call `hook(tensor)` after its `.grad` has been accumulated."""
        if self._grad_fn is not None:
            raise RuntimeError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors")
        m = self._meta
        if m is None or not m.requires_grad:
            if self.requires_grad:  # a no_grad view of a tensor requiring grad (register_hook)
                return ListHandle([], hook)
            raise RuntimeError(
                "cannot register a hook on a tensor that doesn't require gradient")
        if m.post_accumulate_hooks is None:
            m.post_accumulate_hooks = []
        return ListHandle(m.post_accumulate_hooks, hook)  # (called with the leaf)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the leaves' `.grad`.

        A scalar seeds with 1; otherwise pass `gradient` shaped like the tensor.

        >>> import flowgrad as flow
        >>> x = flow.tensor([1.0, 2.0], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward(); x.grad
        tensor([2., 4.])
        >>> (x * 3).backward(flow.tensor([1.0, 0.0])); x.grad
        tensor([5., 4.])
        """
        self._sync()
        engine.backward(self, None if gradient is None else (gradient,), retain_graph,
                        create_graph, inputs=inputs)

    def detach(self):
        """A new leaf sharing this tensor's storage (writes show in both), no grad."""
        data = self._data
        if _FORWARD_LEVELS:  # forward AD keys tangents by array: a new one has none (torch's)
            data = data.view()
        t = Tensor._wrap(data)
        t._counter = alias_counter(self)
        view = self._view
        if view is not None and type(data) is np.ndarray:
            # the detached tensor keeps the view's storage and offset (as_strided reads it)
            root = memory_owner(view.base._data)
            if type(root) is np.ndarray and root.__array_interface__["data"][0] == \
                    view.base._data.__array_interface__["data"][0]:
                STORAGES[id(root)] = root
        if _levels.TOKENS:  # made at the innermost transform's level, as torch's op (of a
            t._lvl = _levels.alias_token(self, _levels.TOKENS[-1])  # captured tensor: frozen)
        return t

    def detach_(self):
        """Detach in place: this tensor becomes a leaf that does not require grad."""
        if _levels.TOKENS:  # (a tensor captured into a func transform: refused, as torch's)
            _levels.refuse_captured_write("detach_", self)
        if self._view is not None and not (_levels.OWNED and id(self) in _levels.OWNED):
            raise RuntimeError(
                f"Can't detach views in-place (this tensor of shape {tuple(self.shape)} is a "
                f"view of another tensor). Use detach() instead")
        for level in _levels.stripped(_FORWARD_LEVELS, self):  # its tangents go too, as torch's
            level.set_tangent(self, None)
        if _levels.TRANSFORMS and _levels.detach_keeping_outer(self):
            return self  # (inside transforms: the outer levels still differentiate it)
        meta = self._meta
        if meta is not None:  # the same meta: .grad and hooks stay, and a graph recorded
            meta.requires_grad = False  # before still reaches it (retain_grad fills .grad)
            meta.is_leaf = True         # as torch's hooks on the old grad_fn do
        self._grad_fn = None
        return self

    @property
    def _base(self):
        """torch's `_base`: the tensor this one is a view of (its root base), else None.

        >>> import flowgrad as flow
        >>> x = flow.ones(4)
        >>> x.view(2, 2)._base is x, x._base
        (True, None)
        """
        return None if self._view is None else shown_base(self)

    def _is_view(self):
        """torch's `x._is_view()`: whether this tensor is a view of another (has a `_base`)."""
        return self._view is not None and shown_base(self) is not None

    @property
    def data(self):
        """The storage as a tensor outside autograd. Unlike detach(), it has a version counter
        of its own, so writes through `.data` are invisible to autograd's checks (torch's).
        Inside func transforms it strips the innermost one alone (`levels.data_of`)."""
        if _levels.TRANSFORMS:
            return _levels.data_of(self)
        if _FORWARD_LEVELS:  # forward AD keys tangents by array: a new one has none (torch's)
            return Tensor._wrap(self._data.view())
        return data_alias(self, Tensor._wrap(self._data))

    @data.setter
    def data(self, value):
        check_assigned_data(self, value, isinstance(value, Tensor))
        data = value._data
        hook = getattr(_interpreter.current, "data_set", None)  # nn.Graph's tracer keeps it
        if hook is not None:
            hook(self, data)
        self._data = data

    @property
    def _version(self):
        """torch's `x._version`: how many in-place writes this tensor's storage has had (an
        int, shared by its views). The counter object itself is `_counter`."""
        counter = self._counter
        if counter is not None and counter.__class__ is not VersionCounter and \
                tracks_no_versions(self):
            raise RuntimeError("Inference tensors do not track version counter.")
        return 0 if counter is None else counter.value

    # ---- conversion ---------------------------------------------------------------------
    def numpy(self, force=False):
        """The array itself (shared storage); refuses tensors that require grad while grad
        mode is on, and those on another device unless `force` (then a host copy), as
        torch's."""
        _interpreter.check_read(self, "numpy()")
        if self.requires_grad and not force and _grad_mode.is_grad_enabled():
            raise RuntimeError(
                "Can't call numpy() on a tensor that requires grad. Use "
                "tensor.detach().numpy() instead.")
        data = self._data
        if type(data) is not np.ndarray and device_of(data) is not CPU:
            if not force:
                raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use "
                                "Tensor.cpu() to copy the tensor to host memory first.")
            return to_host(data)
        return data

    def __array__(self, dtype=None, copy=None):
        """The values for NumPy (`np.asarray(t)`, a ufunc's operand): a read, refused where
        numpy() is (a tensor that requires grad while grad mode is on, a traced tensor)."""
        _interpreter.check_read(self, "np.asarray()")
        if self.requires_grad and _grad_mode.is_grad_enabled():
            raise RuntimeError(
                "Can't convert a tensor that requires grad to a NumPy array (np.asarray, a "
                "NumPy function or ufunc): NumPy's result would not be differentiable. Use "
                "tensor.detach() first, or the flowgrad op of the same name")
        data = self._data if type(self._data) is np.ndarray else to_host(self._data)
        return data if dtype is None else data.astype(dtype, copy=False)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A NumPy ufunc's result on tensors comes back a tensor (`np.sqrt(t)`), 0-d
        included, as torch's."""
        return Tensor._wrap(np.asarray(array))

    def item(self):
        _interpreter.check_read(self, "item()")  # (no warning for a tensor requiring grad:
        # torch warns in float()/int()/complex() only, not in loss.item())
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar; "
                f"item() needs exactly one element")
        return self._data.reshape(()).item()

    def tolist(self):
        _interpreter.check_read(self, "tolist()")
        return self._data.tolist()

    def __float__(self):
        return float(self._real_value("float()", "double"))

    def __int__(self):
        return int(self._real_value("int()", "int64_t"))

    def _real_value(self, what, ctype):
        """The value for float()/int(): a complex one only without an imaginary part (torch's
        checked conversion raises for one; Python's float() refuses any complex)."""
        value = self._one_value(what)
        if isinstance(value, complex):
            if value.imag != 0 or ctype == "int64_t" and not -2 ** 63 <= value.real < 2 ** 63:
                raise RuntimeError(f"{what}: value {value} cannot be converted to type {ctype} "
                                   f"without overflow; take .real first")
            value = value.real
        return value

    def _one_value(self, what):
        """The value of a one-element tensor for float()/int()/complex() (`what`); torch's
        ValueError for more (item() raises a RuntimeError)."""
        _interpreter.check_read(self, what)
        _warn_scalar_of_grad(self)
        if self._data.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(this one has shape {tuple(self._data.shape)})")
        return self._data.reshape(()).item()

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __bool__(self):
        _interpreter.check_read(self, "bool()")
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} elements is ambiguous")
        return bool(self._data.reshape(()))

    def __repr__(self):
        _interpreter.check_read(self, "printing")
        if self._data.__class__ is MetaArray:  # (torch's form: no values to print)
            return meta_repr(self)
        return tensor_repr(self)

    @property
    def is_meta(self):
        """Whether this tensor is on the 'meta' device: a shape and a dtype, no values."""
        return self._data.__class__ is MetaArray

    def __format__(self, spec):
        # (torch's: a 0-d plain tensor formats its number; a subclass's, a Parameter's or a
        # meta tensor's goes through object.__format__, which takes only "" and gives str())
        if self._data.ndim == 0 and self._data.__class__ is not MetaArray and \
                prefix_of(self) == "tensor(" and not is_parameter(self):
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        _interpreter.check_read(self, "pickling")
        return self._reduce()

    def __copy__(self):
        """copy.copy: a tensor sharing this one's storage (pickling's rebuild, reading no
        value: a traced tensor may be copied inside nn.Graph.build)."""
        rebuild, args = self._reduce()
        return rebuild(*args)

    def _reduce(self):
        state, data, order = attributes_of(self), self._data, None
        if type(data) is np.ndarray and data.ndim > 2 and not data.flags.c_contiguous and \
                not data.flags.f_contiguous:
            # NumPy pickles an array neither C- nor F-ordered in C order: a dense one goes
            # in its memory order, put back on load, so channels_last or a permute stays
            # laid out as torch's pickled storage and strides keep it
            order = sorted(range(data.ndim), key=lambda d: -abs(data.strides[d]))
            data = data.transpose(order)
            if not data.flags.c_contiguous:
                data, order = self._data, None
        if type(self) is Tensor and state is None and order is None:
            return _rebuild, (data, self.requires_grad)
        return _rebuild, (data, self.requires_grad, type(self), state or {}, order)


_interpreter.bind_tensor_class(Tensor)


def attributes_of(t):
    """t's own attributes (its instance __dict__) as a new dict, or None when it has none:
    what torch's pickling calls a tensor's state."""
    return dict(t.__dict__) or None


def _rebuild(data, requires_grad, cls=None, state=None, order=None):
    """A pickled tensor: a subclass's keeps its type (an alias, its __new__ not run) and a
    tensor's own attributes come back, as torch's `_rebuild_from_type_v2`; `order`: the
    dims `data` holds, outermost first (Tensor._reduce)."""
    if order is not None:
        data = data.transpose(np.argsort(order))
    t = Tensor._wrap(data)._set_requires_grad(requires_grad)
    if cls is not None and cls is not Tensor:
        t = t.as_subclass(cls)
    if state:
        t.__dict__.update(state)
    return t


class Size(tuple):
    """A tensor's shape: a tuple that prints as `flowgrad.Size([2, 3])`; a slice of it, and
    sums and repeats with tuples, are Sizes too, as torch's.

    >>> s = Size([2, 3, 4])
    >>> s[1:].numel(), s[:1] + (5,), (1,) + s
    (12, flowgrad.Size([2, 5]), flowgrad.Size([1, 2, 3, 4]))
    """

    __slots__ = ()

    def __repr__(self):
        return f"flowgrad.Size({list(self)})"

    def __getitem__(self, index):
        got = tuple.__getitem__(self, index)
        return Size(got) if isinstance(index, slice) else got

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


def _wrap_dim(dim, ndim, op_name="op"):
    """Normalise a possibly negative dim, with torch's error when out of range (and its
    TypeError for a dim that is no integer: 1.5 would have been truncated)."""
    if type(dim) is not int:
        dim = _dim_index(dim, op_name)
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(
            f"{op_name}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {dim})")
    return dim % n


def _dim_index(dim, op_name):
    if isinstance(dim, bool) or not hasattr(type(dim), "__index__"):
        raise TypeError(f"{op_name}(): argument 'dim' must be int, not {type(dim).__name__}")
    return operator.index(dim)


def tensor_method(name=None):
    """Decorator: also expose a function as a Tensor method (first argument is self)."""
    def attach(fn):
        setattr(Tensor, name or fn.__name__, fn)
        return fn
    return attach

