"""Tensor factories: tensor, zeros, ones, full, eye (the ranges, arange, linspace and logspace,
are in ranges.py, and the random ones, rand, randn, ..., in random_factories.py; both are
named here too).

Factories set requires_grad last, so making a tensor records nothing.

>>> import flowgrad as flow
>>> flow.zeros(2, 3).shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import builtins
import math
import numbers
import operator

import numpy as np

from .. import dtypes as _dt
from .._warn import called_by_user, warn
from ..autograd import inference
from ..autograd import interpreter as _interpreter
from ..device import (
    ARRAY_MODULES,
    CPU,
    DEFAULT_DEVICE,
    array_module,
    device_of,
    resolve_device,
    to_device,
)
from ..errors import check_number, fill_checks_overflow, fill_scalar
from ..tensor import Size, Tensor
from ..typed_tensors import format_rank, preserve_format
from .layout import empty_preserving, fresh_in_format, row_major
from .tensor_data import _infer_dtype, as_array

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like",
    "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "bernoulli", "multinomial", "scalar_tensor",
]


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`, with torch's dtype inference.

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).dtype, flow.tensor([1.0, 2]).dtype
    (flowgrad.int64, flowgrad.float32)
    """
    if pin_memory:
        check_hints("tensor", {"pin_memory": pin_memory}, FACTORY_HINTS)
    if isinstance(data, Tensor) and called_by_user():
        warn("To copy construct from a tensor, it is recommended to use "
             "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
             "rather than torch.tensor(sourceTensor).")
    if device is not None or (DEFAULT_DEVICE[0] is not None and not isinstance(data, Tensor)):
        dev = resolve_device(device, "tensor")  # (host data: the default device's)
    else:
        dev = None  # the data's own
    return _finish(as_array(data, _dt.as_dtype(dtype) if dtype is not None else None),
                   requires_grad, dev)


def as_tensor(data, dtype=None, device=None):
    """Like `tensor`, but shares memory with a tensor or array of the same dtype.

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0])
    >>> flow.as_tensor(x) is x, flow.as_tensor([1, 2]).dtype
    (True, flowgrad.int64)
    """
    dev = resolve_device(device, "as_tensor")
    if isinstance(data, Tensor):  # itself, or a conversion that stays in the graph (as torch)
        if (dtype is None or _dt.as_dtype(dtype) is data.dtype) and \
                (device is None or data.device == dev):
            return data
        return data.to(dtype=data.dtype if dtype is None else _dt.as_dtype(dtype),
                       device=data.device if device is None else dev)
    if (isinstance(data, np.ndarray) or type(data) in ARRAY_MODULES) and \
            (dtype is None or _dt.as_dtype(dtype).np == data.dtype) and \
            (device is None or device_of(data) == dev):
        _dt.from_numpy_dtype(data.dtype)
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array):
    """A tensor sharing memory with a NumPy array.

    >>> import flowgrad as flow
    >>> import numpy as np
    >>> a = np.array([1.0, 2.0])
    >>> t = flow.from_numpy(a)
    >>> a[0] = 5.0
    >>> t
    tensor([5., 2.], dtype=flowgrad.float64)
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    _dt.from_numpy_dtype(array.dtype)
    return Tensor._wrap(array)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False, **options):
    """A 0-dim tensor holding `s` (default float dtype), as torch.scalar_tensor.

    >>> import flowgrad as flow
    >>> flow.scalar_tensor(3)
    tensor(3.)
    """
    check_hints("scalar_tensor", options, FACTORY_HINTS)
    if isinstance(s, Tensor):
        s = s.item()
    if not isinstance(s, (numbers.Number, np.generic)) or isinstance(s, np.str_):
        raise TypeError(f"scalar_tensor(): argument 's' must be a number, not "
                        f"{type(s).__name__} ({s!r})")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if d.category == 2 and isinstance(s, int) and not isinstance(s, bool):
        s = float(s)  # a Python int beyond int64 goes through a float, as torch's Scalar
    return tensor(s, dtype=d, device=device, requires_grad=requires_grad)


def _as_int(value, op_name, arg):
    """`value` as a Python int; TypeError naming the op and argument for floats, strings,
    bools and anything else without __index__ (torch refuses them too)."""
    if value.__class__ is builtins.int:
        return value
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op_name}(): argument '{arg}' must be an int, not "
                        f"{type(value).__name__} ({value!r}); pass a whole number") from None


def _size(size, op_name):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    try:
        size = tuple(s if s.__class__ is builtins.int else _as_int(s, op_name, "size")
                     for s in size)
    except TypeError:
        raise TypeError(f"{op_name}(): argument 'size' must be ints or one tuple of ints, got "
                        f"{size!r}; pass whole numbers such as (2, 3)") from None
    if any(s < 0 for s in size):
        raise RuntimeError(f"{op_name}(): Trying to create tensor with negative dimension "
                           f"in size {size}; sizes must be >= 0")
    return size


def _size_arg(size_args, size, op_name):
    """The sizes given positionally (`zeros(2, 3)`) or as torch's `size=(2, 3)` keyword."""
    if size is None:
        return size_args
    if size_args:
        raise TypeError(f"{op_name}(): got 'size' both positionally and as a keyword")
    return (size,)


def _alloc(op_name, shape, dtype, make):
    """`make()`, with NumPy's size and memory failures turned into torch's RuntimeError."""
    try:
        return make()
    except (ValueError, MemoryError, OverflowError) as error:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if nbytes < 2 ** 63 and not isinstance(error, MemoryError):
            raise
        what = ("Storage size calculation overflowed" if nbytes >= 2 ** 63 else
                "not enough memory")
        raise RuntimeError(f"{op_name}(): {what} with sizes={list(shape)} and dtype "
                           f"{np.dtype(dtype)} ({nbytes} bytes); ask for a smaller "
                           f"tensor") from None


def _finish(array, requires_grad, dev=None):
    """`array` as a new tensor, on device `dev` (None: where it is)."""
    t = Tensor._wrap(array if dev is None or dev is CPU and type(array) is np.ndarray else
                     to_device(array, dev))
    if _interpreter.current is not _interpreter.AutogradInterpreter:
        made_here = getattr(_interpreter.current, "made_here", None)
        if made_here is not None:  # made while nn.Graph traces build: a constant it may fold
            made_here.append(t)
        if inference.state.enabled:  # a factory in inference mode makes an inference tensor
            t._counter = inference.INFERENCE_COUNTER
    if requires_grad:
        t._set_requires_grad(True)
    return t


def _float_dtype(dtype):
    return _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()


def zeros(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """A tensor of zeros (default float dtype).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> flow.zeros(2, dtype=flow.int64)
    tensor([0, 0])
    """
    check_hints("zeros", options, FACTORY_HINTS)
    dev = resolve_device(device, "zeros")
    shape, d = _size(_size_arg(size_args, size, "zeros"), "zeros"), _float_dtype(dtype).np
    return _finish(_alloc("zeros", shape, d, lambda: dev.xp.zeros(shape, d)), requires_grad, dev)


def ones(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """A tensor of ones (default float dtype).

    >>> import flowgrad as flow
    >>> flow.ones(2, 2)
    tensor([[1., 1.],
            [1., 1.]])
    """
    check_hints("ones", options, FACTORY_HINTS)
    dev = resolve_device(device, "ones")
    shape, d = _size(_size_arg(size_args, size, "ones"), "ones"), _float_dtype(dtype).np
    return _finish(_alloc("ones", shape, d, lambda: dev.xp.ones(shape, d)), requires_grad, dev)


def empty(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """An uninitialised tensor (zeros here, so results never depend on stale memory).

    >>> import flowgrad as flow
    >>> flow.empty(2, 3).shape
    flowgrad.Size([2, 3])
    """
    check_hints("empty", options)
    if options.get("memory_format") is preserve_format:
        raise RuntimeError("empty(): unsupported memory format preserve_format (there is no "
                           "input to preserve); pass contiguous_format or channels_last")
    dev = resolve_device(device, "empty")
    shape, d = _size(_size_arg(size_args, size, "empty"), "empty"), _float_dtype(dtype).np
    return _laid_out(_finish(_alloc("empty", shape, d, lambda: dev.xp.zeros(shape, d)),
                             requires_grad, dev), None, options)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, **options):
    """A tensor filled with `fill_value`; dtype inferred from it as torch does.

    >>> import flowgrad as flow
    >>> flow.full((2, 2), 7)
    tensor([[7, 7],
            [7, 7]])
    >>> flow.full((2,), 0.5)
    tensor([0.5000, 0.5000])
    """
    check_hints("full", options, FACTORY_HINTS)
    dev = resolve_device(device, "full")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    elif not isinstance(fill_value, (numbers.Number, np.generic)):
        raise TypeError(f"full(): argument 'fill_value' must be a number, not "
                        f"{type(fill_value).__name__} ({fill_value!r})")
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    if not isinstance(size, (tuple, list)):  # (torch.Size is a tuple)
        raise TypeError(f"full(): argument 'size' must be a tuple of ints, not "
                        f"{type(size).__name__} ({size!r}); pass ({size!r},) for a 1-D tensor")
    shape, d = _size((size,), "full"), _dt.as_dtype(dtype).np
    fill_value = _bool_fill(fill_scalar("full", fill_value, d, fill_checks_overflow(
        d, math.prod(shape))), d)
    return _finish(_alloc("full", shape, d, lambda: dev.xp.full(shape, fill_value, d)),
                   requires_grad, dev)


def _laid_out(out, source, options):
    """`out`, a fresh tensor, in the memory format `options` ask for (channels_last: NHWC;
    ops/layout.py); preserve_format, the default, leaves `source`'s layout (made by the
    caller). A format for the wrong rank raises, as torch."""
    rank = format_rank(options.get("memory_format"), out.ndim, "empty")
    if rank:
        out._data = fresh_in_format(array_module(out._data), out._data, rank)
    return out


def _bool_fill(value, np_dtype):
    """A fill for a bool dtype as its truth value (NumPy refuses ints beyond int64 there)."""
    return bool(value) if np_dtype.kind == "b" else value


def _keeps_layout(source, options):
    """Whether a tensor made like `source` (`*_like`) takes a layout other than row-major:
    preserve_format (the default) asked for, and source's array not row-major
    (ops/layout.py); a format asked for is given by _laid_out."""
    fmt, data = options.get("memory_format"), source._data
    return (fmt is None or fmt is preserve_format) and not row_major(data)


def _filled_like(dev, x, np_dtype, fill, options):
    """An array of x's shape filled with `fill`, laid out as torch's `*_like` lay it out: as
    x (preserve_format, the default), else row-major (a format asked for: _laid_out)."""
    data = x._data
    if _keeps_layout(x, options):
        out = empty_preserving(dev.xp, data, np_dtype)
        out[...] = fill
        return out
    if type(fill) is int and fill == 0:  # (allocated zeroed)
        return dev.xp.zeros(data.shape, np_dtype)
    return dev.xp.full(data.shape, fill, np_dtype)


def _like(x, dtype):
    return _dt.as_dtype(dtype) if dtype is not None else x.dtype


def _device_like(x, device, op_name):
    """torch's `*_like`: x's device unless `device` names another."""
    return x.device if device is None else resolve_device(device, op_name)


def zeros_like(input, dtype=None, device=None, requires_grad=False, **options):
    """Zeros with the shape of `input` and its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.zeros_like(flow.tensor([[1, 2], [3, 4]]))
    tensor([[0, 0],
            [0, 0]])
    """
    check_hints("zeros_like", options)
    dev = _device_like(input, device, "zeros_like")
    return _laid_out(_finish(_filled_like(dev, input, _like(input, dtype).np, 0, options),
                             requires_grad, dev), input, options)


def ones_like(input, dtype=None, device=None, requires_grad=False, **options):
    """Ones with the shape of `input` and its dtype unless `dtype` is given."""
    check_hints("ones_like", options)
    dev = _device_like(input, device, "ones_like")
    return _laid_out(_finish(_filled_like(dev, input, _like(input, dtype).np, 1, options),
                             requires_grad, dev), input, options)


def empty_like(input, dtype=None, device=None, requires_grad=False, **options):
    """An uninitialised tensor shaped like `input`; flowgrad fills it with zeros."""
    check_hints("empty_like", options)
    return zeros_like(input, dtype, device, requires_grad=requires_grad, **options)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False, **options):
    """A tensor shaped like `input` filled with `fill_value`, in its dtype unless `dtype` is
    given.

    >>> import flowgrad as flow
    >>> flow.full_like(flow.ones(3), 2.5)
    tensor([2.5000, 2.5000, 2.5000])
    """
    check_hints("full_like", options)
    dev = _device_like(input, device, "full_like")
    check_number("full_like", fill_value, "fill_value")
    if isinstance(fill_value, Tensor):  # torch's Scalar: a one-element tensor's value
        fill_value = fill_value.item()
    d = _like(input, dtype).np
    fill_value = _bool_fill(fill_scalar("full_like", fill_value, d, fill_checks_overflow(
        d, input._data.size)), d)
    return _laid_out(_finish(_filled_like(dev, input, d, fill_value, options), requires_grad, dev),
                     input, options)


def eye(n, m=None, dtype=None, device=None, requires_grad=False, **options):
    """An n x m identity matrix.

    >>> import flowgrad as flow
    >>> flow.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    check_hints("eye", options, FACTORY_HINTS)
    dev = resolve_device(device, "eye")
    n = _as_int(n, "eye", "n")
    m = n if m is None else _as_int(m, "eye", "m")
    for arg, v in (("n", n), ("m", m)):
        if v < 0:
            raise RuntimeError(f"eye(): {arg} must be greater or equal to 0, got {v}")
    d = _float_dtype(dtype).np
    return _finish(_alloc("eye", (n, m), d, lambda: dev.xp.eye(n, m, dtype=d)), requires_grad,
                   dev)


_HINTS = frozenset(("layout", "pin_memory", "memory_format"))
FACTORY_HINTS = frozenset(("layout", "pin_memory"))  # (torch.zeros takes no memory_format)


def check_hints(op_name, options, allowed=_HINTS):
    """Raise torch's TypeError for a keyword that is none of the `allowed` layout hints (a
    catch-all would drop a misspelt or unsupported argument silently), and refuse the values
    flowgrad cannot honour: a layout other than strided, pinned memory (no accelerator)."""
    if not options:
        return
    if not allowed.issuperset(options):
        unknown = sorted(set(options) - allowed)[0]
        raise TypeError(f"{op_name}() got an unexpected keyword argument {unknown!r}")
    layout = options.get("layout")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise NotImplementedError(f"{op_name}(): flowgrad's factories make strided tensors "
                                  f"only, not layout={layout}; call .to_sparse() on the result")
    if options.get("pin_memory"):
        raise RuntimeError(f"{op_name}(): pin_memory=True requires a CUDA or other accelerator "
                           f"backend; no pinned memory allocator is available here (pass "
                           f"pin_memory=False)")


def _new(name, factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **options):
        if "size" in options:  # x.new_zeros(size=(2, 3)): torch's keyword (it was dropped)
            if size:
                raise TypeError(f"{name}() got 'size' both positionally and as a keyword")
            size = (options.pop("size"),)
        if not size:  # (as torch: no size is a mistake, not a 0-d tensor; () asks for one)
            raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
        check_hints(name, options)
        return factory(*size, dtype=dtype or self.dtype,
                       device=self.device if device is None else device,
                       requires_grad=requires_grad)
    method.__name__ = name
    setattr(Tensor, name, method)


_new("new_zeros", zeros)
_new("new_ones", ones)
_new("new_empty", empty)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        warn("To copy construct from a tensor, it is recommended to use "
             "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
             "rather than tensor.new_tensor(sourceTensor).")
    return tensor(data, dtype=dtype or self.dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)


Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor


# the random factories live beside (random_factories.py); named here too, where they were
from .random_factories import (  # noqa: E402
    _bernoulli,  # noqa: F401
    _normal,  # noqa: F401
    _uniform,  # noqa: F401
    bernoulli,
    multinomial,
    normal,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
)
from .ranges import arange, linspace, logspace  # noqa: E402  (ranges.py's, named here too)
