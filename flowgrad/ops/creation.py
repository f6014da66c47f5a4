"""Tensor factories: tensor, zeros, ones, full, arange, linspace, eye, random sampling.

Factories set requires_grad last, so making a tensor records nothing. The samplers are ops
(not differentiable) whose kernels draw from the Generator passed as their `generator`
attribute (the global one by default), so a recorded call replays with fresh numbers.

>>> import flowgrad as flow
>>> flow.zeros(2, 3).shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import builtins
import itertools
import math
import numbers
import operator

import numpy as np

from .. import dtypes as _dt
from ..autograd import inference
from ..autograd import interpreter as _interpreter
from ..device import ARRAY_MODULES, CPU, device_of, resolve_device, to_device
from ..errors import check_number, check_probabilities, check_std, fill_scalar
from ..random import numpy_generator, resolve
from ..tensor import Size, Tensor, bind_late
from .registry import op

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like",
    "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "bernoulli", "multinomial", "scalar_tensor",
]


_MAX_DIMS = 64  # NumPy's limit on an array's dims
_SEQ = (list, tuple, range)  # torch.tensor(range(n)) is a list of ints, as torch
_SEQ_TYPES = frozenset(_SEQ)


def _contains_itself(data):
    """Whether a list/tuple in `data` is nested inside itself (depth-first, explicit stack;
    each sublist is entered once)."""
    done, path = set(), set()
    stack = [(data, iter(data))]
    path.add(id(data))
    while stack:
        seq, items = stack[-1]
        for x in items:
            if isinstance(x, _SEQ) and id(x) not in done:
                if id(x) in path:
                    return True
                path.add(id(x))
                stack.append((x, iter(x)))
                break
        else:
            stack.pop()
            path.discard(id(seq))
            done.add(id(seq))
    return False


def _nesting_error(data):
    if _contains_itself(data):
        return ValueError("flow.tensor(): the data contains itself (a list or tuple nested "
                          "inside itself), so it has no finite shape; pass nested lists of "
                          "numbers")
    return ValueError(f"flow.tensor(): the data is nested more than {_MAX_DIMS} lists/tuples "
                      f"deep, but a tensor has at most {_MAX_DIMS} dims")


def _scan(data):
    """Walk nested lists/tuples level by level, with no recursion: ({leaf type: one leaf of
    that type}, the Tensor and ndarray leaves). A sublist repeated at one level is visited
    once, so `[[1.0] * 100] * 100` visits one inner list. Data that contains itself or nests
    more than 64 deep raises a ValueError saying so."""
    examples, arrays = {}, []
    level = [data]
    depth = 0
    while level:
        types = set(map(type, level))
        if not types <= _SEQ_TYPES:
            leaf = {t for t in types if not issubclass(t, _SEQ)}
            for t in leaf - examples.keys():
                examples[t] = next(x for x in level if type(x) is t)
            if any(issubclass(t, (Tensor, np.ndarray)) for t in leaf):
                arrays.extend(x for x in level if isinstance(x, (Tensor, np.ndarray)))
            if len(leaf) == len(types):
                break
            level = [x for x in level if type(x) not in leaf]
        depth += 1
        if depth > _MAX_DIMS:
            raise _nesting_error(data)
        level = list(itertools.chain.from_iterable(dict(zip(map(id, level), level)).values()))
    return examples, arrays


def _dtype_of(examples, arrays, typed_numpy_scalars=True):
    """torch.tensor's dtype inference from _scan's leaves: a Python bool, int, float or complex
    counts as bool, int64, the default float or complex; a NumPy scalar, array or tensor with
    its own dtype (`[np.float64(1.0), 2]` is float64, `[np.int32(1)]` int32; an integer
    scalar of a dtype flowgrad lacks, uint16 to uint64, as int64); then promoted. Without
    `typed_numpy_scalars` a NumPy scalar counts as the Python number it is (torch.full's and
    arange's inference)."""
    kinds = {x.dtype if isinstance(x, Tensor) else _dt.from_numpy_dtype(x.dtype)
             for x in arrays}
    for t, x in examples.items():
        if issubclass(t, (Tensor, np.ndarray)):
            continue
        if typed_numpy_scalars and issubclass(t, np.generic) and t is not np.object_:
            if issubclass(t, np.unsignedinteger) and np.dtype(t).itemsize > 1:
                kinds.add(_dt.int64)
            else:
                kinds.add(_dt.from_numpy_dtype(np.dtype(t)))
        elif issubclass(t, (bool, np.bool_)):
            kinds.add(_dt.bool)
        elif issubclass(t, (int, np.integer)):
            kinds.add(_dt.int64)
        elif issubclass(t, (float, np.floating)):
            kinds.add(_dt.get_default_dtype())
        elif issubclass(t, (complex, np.complexfloating)):
            kinds.add(_dt.as_dtype(complex))
        else:
            raise TypeError(f"tensor(): could not infer a dtype for element {x!r} of type "
                            f"{t.__name__}; pass numbers, lists, arrays or tensors")
    result = None
    for d in kinds:
        result = d if result is None else _dt.promote_types(result, d)
    return result or _dt.get_default_dtype()


def _infer_dtype(data):
    """torch's dtype inference for a fill value or range bounds (full, arange): Python
    numbers, NumPy scalars among them, bool < int64 < default float < complex."""
    return _dtype_of(*_scan(data), typed_numpy_scalars=False)


def _unwrap(data):
    """`data` (acyclic: _scan checked) with each Tensor leaf replaced by its one value, as
    torch reads a tensor inside a list (`[t([1.0]), t([2.0])]` has shape (2,); a tensor of
    several values raises); the lists/tuples are copied as lists, iteratively (each shared
    sublist once)."""
    copies = {}
    root = [data]
    stack = [root]
    while stack:
        seq = stack.pop()
        for i, x in enumerate(seq):
            if isinstance(x, Tensor):
                if x._data.size != 1:
                    raise ValueError(
                        f"tensor(): a tensor of shape {tuple(x.shape)} inside a list: only "
                        f"one element tensors can be converted to Python scalars (as torch); "
                        f"use flow.stack to stack tensors")
                seq[i] = x._data.reshape(())
            elif isinstance(x, _SEQ):
                copy = copies.get(id(x))
                if copy is None:
                    copy = copies[id(x)] = list(x)
                    stack.append(copy)
                seq[i] = copy
    return root[0]


def as_array(data, dtype=None):
    """A fresh NumPy array from Python data, an array or a tensor, as torch would type it."""
    if isinstance(data, Tensor):
        _interpreter.check_read(data, "tensor(a tensor)")  # a copy of its values: a graph refuses
        arr = data._data
        return arr.astype(dtype.np) if dtype is not None else arr.copy()
    if isinstance(data, np.ndarray) or type(data) in ARRAY_MODULES:  # any device's array
        if dtype is None:
            _dt.from_numpy_dtype(data.dtype)  # raises for unsupported dtypes
            return data.copy()
        return data.astype(dtype.np)
    if np.isscalar(data) and isinstance(data, np.generic):
        d = dtype or _dt.from_numpy_dtype(data.dtype)
        return np.asarray(data, d.np)
    examples, arrays = _scan(data)
    if dtype is None:
        dtype = _dtype_of(examples, arrays)
    if hasattr(data, "__array__") and not isinstance(data, _SEQ):
        return np.array(data, dtype=dtype.np)
    has_tensors = False
    for a in arrays:
        if isinstance(a, Tensor):
            _interpreter.check_read(a, "tensor(a list of tensors)")
            has_tensors = True
    data = _unwrap(data) if has_tensors else data
    try:
        return np.array(data, dtype=dtype.np)
    except OverflowError as error:  # torch's uint8 takes -255..-1 modulo 256; the rest raise
        if dtype.np == np.uint8:
            wide = np.array(data, dtype=np.int64)
            if wide.min() >= -255 and wide.max() <= 255:
                return (wide % 256).astype(np.uint8)
        raise RuntimeError(f"tensor(): a value cannot be converted to type {dtype.name} without "
                           f"overflow ({error}); pass a dtype that holds it (float64 beyond "
                           f"int64)") from None


bind_late(as_array=as_array)  # Tensor(data), the legacy constructor, calls it


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data`, with torch's dtype inference.

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).dtype, flow.tensor([1.0, 2]).dtype
    (flowgrad.int64, flowgrad.float32)
    """
    dev = None if device is None else resolve_device(device, "tensor")  # None: data's own
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
    if isinstance(data, Tensor) and (dtype is None or _dt.as_dtype(dtype) is data.dtype) and \
            (device is None or data.device == dev):
        return data
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


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    """A 0-dim tensor holding `s` (default float dtype), as torch.scalar_tensor.

    >>> import flowgrad as flow
    >>> flow.scalar_tensor(3)
    tensor(3.)
    """
    return tensor(s, dtype=dtype or _dt.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


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
            t._version = inference.INFERENCE_COUNTER
    if requires_grad:
        t.requires_grad_(True)
    return t


def _float_dtype(dtype):
    return _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()


def zeros(*size_args, size=None, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros (default float dtype).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> flow.zeros(2, dtype=flow.int64)
    tensor([0, 0])
    """
    dev = resolve_device(device, "zeros")
    shape, d = _size(_size_arg(size_args, size, "zeros"), "zeros"), _float_dtype(dtype).np
    return _finish(_alloc("zeros", shape, d, lambda: dev.xp.zeros(shape, d)), requires_grad, dev)


def ones(*size_args, size=None, dtype=None, device=None, requires_grad=False):
    """A tensor of ones (default float dtype).

    >>> import flowgrad as flow
    >>> flow.ones(2, 2)
    tensor([[1., 1.],
            [1., 1.]])
    """
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
    dev = resolve_device(device, "empty")
    shape, d = _size(_size_arg(size_args, size, "empty"), "empty"), _float_dtype(dtype).np
    return _finish(_alloc("empty", shape, d, lambda: dev.xp.zeros(shape, d)), requires_grad, dev)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`; dtype inferred from it as torch does.

    >>> import flowgrad as flow
    >>> flow.full((2, 2), 7)
    tensor([[7, 7],
            [7, 7]])
    >>> flow.full((2,), 0.5)
    tensor([0.5000, 0.5000])
    """
    dev = resolve_device(device, "full")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    elif not isinstance(fill_value, (numbers.Number, np.generic)):
        raise TypeError(f"full(): argument 'fill_value' must be a number, not "
                        f"{type(fill_value).__name__} ({fill_value!r})")
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    shape, d = _size((size,), "full"), _dt.as_dtype(dtype).np
    fill_value = fill_scalar("full", fill_value, d)
    return _finish(_alloc("full", shape, d, lambda: dev.xp.full(shape, fill_value, d)),
                   requires_grad, dev)


def _like(x, dtype):
    return _dt.as_dtype(dtype) if dtype is not None else x.dtype


def _device_like(x, device, op_name):
    """torch's `*_like`: x's device unless `device` names another."""
    return x.device if device is None else resolve_device(device, op_name)


def zeros_like(x, dtype=None, device=None, requires_grad=False, **options):
    """Zeros with the shape of `x` and its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.zeros_like(flow.tensor([[1, 2], [3, 4]]))
    tensor([[0, 0],
            [0, 0]])
    """
    check_hints("zeros_like", options)
    dev = _device_like(x, device, "zeros_like")
    return _finish(dev.xp.zeros(x._data.shape, _like(x, dtype).np), requires_grad, dev)


def ones_like(x, dtype=None, device=None, requires_grad=False, **options):
    """Ones with the shape of `x` and its dtype unless `dtype` is given."""
    check_hints("ones_like", options)
    dev = _device_like(x, device, "ones_like")
    return _finish(dev.xp.ones(x._data.shape, _like(x, dtype).np), requires_grad, dev)


def empty_like(x, dtype=None, device=None, requires_grad=False, **options):
    """An uninitialised tensor shaped like `x`; flowgrad fills it with zeros."""
    check_hints("empty_like", options)
    return zeros_like(x, dtype, device, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False, **options):
    """A tensor shaped like `x` filled with `fill_value`, in x's dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.full_like(flow.ones(3), 2.5)
    tensor([2.5000, 2.5000, 2.5000])
    """
    check_hints("full_like", options)
    dev = _device_like(x, device, "full_like")
    check_number("full_like", fill_value, "fill_value")
    if isinstance(fill_value, Tensor):  # torch's Scalar: a one-element tensor's value
        fill_value = fill_value.item()
    d = _like(x, dtype).np
    return _finish(dev.xp.full(x._data.shape, fill_scalar("full_like", fill_value, d), d),
                   requires_grad, dev)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start (default 0) up to end, exclusive; int64 for integer arguments.

    >>> import flowgrad as flow
    >>> flow.arange(5)
    tensor([0, 1, 2, 3, 4])
    >>> flow.arange(1, 2.5, 0.5)
    tensor([1.0000, 1.5000, 2.0000])
    """
    dev = resolve_device(device, "arange")
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    for arg, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, (numbers.Real, np.generic)):
            raise TypeError(f"arange(): argument '{arg}' must be a number, not "
                            f"{type(v).__name__} ({v!r})")
        if not math.isfinite(v):
            raise RuntimeError(f"arange(): unsupported range: {start} -> {end} (step {step}); "
                               f"'{arg}' must be finite")
    if step == 0:
        raise RuntimeError("arange(): step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange(): upper bound and larger bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = _infer_dtype([start, end, step])
    dtype = _dt.as_dtype(dtype)
    n = builtins.max(0, int(np.ceil((end - start) / step)))
    return _finish(_alloc("arange", (n,), dtype.np, lambda: (
        (start + step * np.arange(n, dtype=np.float64)).astype(dtype.np)
        if dtype.is_floating_point else np.arange(start, end, step, dtype=dtype.np)[:n])),
        requires_grad, dev)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """`steps` evenly spaced values from start to end, inclusive.

    >>> import flowgrad as flow
    >>> flow.linspace(0, 1, steps=5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    dev = resolve_device(device, "linspace")
    n, d = _steps(steps, "linspace"), _float_dtype(dtype).np
    return _finish(_alloc("linspace", (n,), d, lambda: np.linspace(start, end, n).astype(d)),
                   requires_grad, dev)


def _steps(steps, op_name):
    n = _as_int(steps, op_name, "steps")
    if n < 0:
        raise RuntimeError(f"{op_name}(): number of steps must be non-negative, got {n}")
    return n


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """`steps` values base ** t for t evenly spaced from start to end, inclusive."""
    dev = resolve_device(device, "logspace")
    n, d = _steps(steps, "logspace"), _float_dtype(dtype).np
    return _finish(_alloc("logspace", (n,), d,
                          lambda: np.logspace(start, end, n, base=base).astype(d)),
                   requires_grad, dev)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """An n x m identity matrix.

    >>> import flowgrad as flow
    >>> flow.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    dev = resolve_device(device, "eye")
    n = _as_int(n, "eye", "n")
    m = n if m is None else _as_int(m, "eye", "m")
    for arg, v in (("n", n), ("m", m)):
        if v < 0:
            raise RuntimeError(f"eye(): {arg} must be greater or equal to 0, got {v}")
    d = _float_dtype(dtype).np
    return _finish(_alloc("eye", (n, m), d, lambda: dev.xp.eye(n, m, dtype=d)), requires_grad,
                   dev)


def rand(*size_args, size=None, generator=None, dtype=None, device=None,
         requires_grad=False):
    """Uniform samples in [0, 1).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)  # flowgrad's stream (NumPy's PCG64), not torch's values
    >>> flow.rand(3)
    tensor([0.6370, 0.2698, 0.0410])
    """
    dev = resolve_device(device, "rand")
    d, shape = _float_dtype(dtype).np, _size(_size_arg(size_args, size, "rand"), "rand")
    gen = resolve(generator)
    out = _alloc("rand", shape, d, lambda: _rand(shape=shape, dtype=d, generator=gen))
    return _finish_op(out, requires_grad, dev)


# ---- random sampling: kernels draw from the Generator attribute ---------------------------
@op("rand", differentiable=False)
def _rand(xp, *, shape, dtype, generator):
    return numpy_generator(generator).random(shape, xp.float64).astype(dtype)


@op("uniform", differentiable=False)
def _uniform(xp, *, low, high, shape, dtype, generator):
    """low + (high - low) * U[0, 1): NumPy's Generator.uniform's own formula, so its values."""
    return (low + (high - low) * numpy_generator(generator).random(shape)).astype(dtype)


@op("randn", differentiable=False)
def _randn(xp, *, shape, dtype, generator):
    return numpy_generator(generator).standard_normal(shape).astype(dtype)


@op("randint", differentiable=False)
def _randint(xp, *, low, high, shape, dtype, generator):
    return numpy_generator(generator).integers(low, high, shape).astype(dtype)


@op("randperm", differentiable=False)
def _randperm(xp, *, n, dtype, generator):
    return numpy_generator(generator).permutation(n).astype(dtype)


@op("normal", differentiable=False)
def _normal(xp, *tensors, mean, std, shape, dtype, generator):
    """mean + std * N(0, 1); `mean` / `std` are numbers, or None where they are the inputs
    (in that order)."""
    given = iter(tensors)
    m = next(given) if mean is None else mean
    s = next(given) if std is None else std
    return (m + s * xp.asarray(numpy_generator(generator).standard_normal(shape))).astype(dtype)


@op("bernoulli", differentiable=False)
def _bernoulli(xp, x, *, p, generator):
    probs = x if p is None else xp.full(x.shape, p, x.dtype)
    draws = xp.asarray(numpy_generator(generator).random(probs.shape))  # the host's stream
    return (draws < probs).astype(probs.dtype)


@op("multinomial", differentiable=False)
def _multinomial(xp, x, *, num_samples, replacement, generator):
    gen = numpy_generator(generator)
    p = x.astype(xp.float64)
    rows = p.reshape(-1, p.shape[-1])
    if replacement:
        cdf = xp.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = xp.asarray(gen.random((rows.shape[0], num_samples)))
        out = xp.minimum((u[:, :, None] > cdf[:, None, :]).sum(-1), rows.shape[1] - 1)
    else:  # Gumbel top-k gives sampling without replacement in one vectorised step
        g = xp.log(xp.maximum(rows, 1e-300)) - xp.log(-xp.log(xp.asarray(gen.random(rows.shape))))
        g[rows <= 0] = -xp.inf
        out = xp.argsort(-g, axis=1)[:, :num_samples]
    return out.reshape(p.shape[:-1] + (num_samples,)).astype(xp.int64)


def _finish_op(out, requires_grad, dev=CPU):
    if dev is not CPU:  # drawn on the host (one stream for every device), then moved
        out._data = to_device(out._data, dev)
    if requires_grad:
        out.requires_grad_(True)
    return out


def randn(*size_args, size=None, generator=None, dtype=None, device=None,
          requires_grad=False):
    """Standard normal samples.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.randn(2, 2)
    tensor([[ 0.1257, -0.1321],
            [ 0.6404,  0.1049]])
    """
    dev = resolve_device(device, "randn")
    d, shape = _float_dtype(dtype).np, _size(_size_arg(size_args, size, "randn"), "randn")
    gen = resolve(generator)
    out = _alloc("randn", shape, d, lambda: _randn(shape=shape, dtype=d, generator=gen))
    return _finish_op(out, requires_grad, dev)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers uniform in [low, high); int64 by default.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> x = flow.randint(0, 10, (2, 3))
    >>> x.dtype, bool(((x >= 0) & (x < 10)).all())
    (flowgrad.int64, True)
    """
    dev = resolve_device(device, "randint")
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint(): argument 'size' is missing; pass a tuple of ints, e.g. "
                        "randint(0, 10, (2, 3))")
    low, high = _as_int(low, "randint", "low"), _as_int(high, "randint", "high")
    if low >= high:
        raise RuntimeError(f"randint(): expects low < high, got low={low}, high={high}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    shape, gen = _size((size,), "randint"), resolve(generator)
    out = _alloc("randint", shape, np.int64, lambda: _randint(
        low=low, high=high, shape=shape, dtype=d.np, generator=gen))
    return _finish_op(out, requires_grad, dev)


def rand_like(input, dtype=None, generator=None, device=None, requires_grad=False, **options):
    """Uniform [0, 1) samples shaped like `input`, in its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.rand_like(flow.zeros(2, 3)).shape
    flowgrad.Size([2, 3])
    """
    check_hints("rand_like", options)
    dev = _device_like(input, device, "rand_like")
    d = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    if not d.is_floating_point:
        raise RuntimeError(f"rand_like: uniform sampling needs a floating dtype, got {d.name}; "
                           f"pass dtype=flowgrad.float32")
    return rand(*input.shape, dtype=d, generator=generator, device=dev,
                requires_grad=requires_grad)


def randn_like(input, dtype=None, generator=None, device=None, requires_grad=False, **options):
    """Standard normal samples shaped like `input`.

    >>> import flowgrad as flow
    >>> flow.randn_like(flow.zeros(2)).dtype
    flowgrad.float32
    """
    check_hints("randn_like", options)
    dev = _device_like(input, device, "randn_like")
    d = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    if not d.is_floating_point:
        raise RuntimeError(f"randn_like: normal sampling needs a floating dtype, got {d.name}; "
                           f"pass dtype=flowgrad.float32")
    return randn(*input.shape, dtype=d, generator=generator, device=dev,
                 requires_grad=requires_grad)


def randint_like(input, low=0, high=None, dtype=None, generator=None, device=None,
                 requires_grad=False, **_):
    """Integers uniform in [low, high) shaped like `input`; randint_like(x, high) starts at 0.

    >>> import flowgrad as flow
    >>> flow.randint_like(flow.zeros(3, dtype=flow.int64), 1).tolist()
    [0, 0, 0]
    """
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype,
                   generator=generator, device=_device_like(input, device, "randint_like"),
                   requires_grad=requires_grad)


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (int64).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> sorted(flow.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    dev = resolve_device(device, "randperm")
    n = _as_int(n, "randperm", "n")
    if n < 0:
        raise RuntimeError(f"randperm(): Trying to create tensor with negative dimension {n}: "
                           f"[{n}]; n must be >= 0")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    gen = resolve(generator)
    return _finish_op(_alloc("randperm", (n,), np.int64, lambda: _randperm(
        n=n, dtype=d.np, generator=gen)), requires_grad, dev)


def normal(mean=0.0, std=1.0, size=None, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal samples with the given mean and std (tensors or numbers).

    >>> import flowgrad as flow
    >>> flow.normal(2.0, 0.0, size=(2,))
    tensor([2., 2.])
    """
    dev = resolve_device(device, "normal")
    m = mean._data if isinstance(mean, Tensor) else mean
    s = std._data if isinstance(std, Tensor) else std
    check_std(s, "normal")
    shape = size if size is not None else np.broadcast_shapes(np.shape(m), np.shape(s))
    d = _float_dtype(dtype if dtype is not None else
                     (mean.dtype if isinstance(mean, Tensor) else None))
    if not d.is_floating_point:  # torch has no normal kernel for integers
        raise NotImplementedError(f"normal(): not implemented for dtype {d.name}; normal "
                                  "samples need a floating dtype (e.g. dtype=flowgrad.float32)")
    tensors = tuple(t for t in (mean, std) if isinstance(t, Tensor))
    out = _normal(*tensors, mean=None if isinstance(mean, Tensor) else mean,
                  std=None if isinstance(std, Tensor) else std, shape=tuple(shape),
                  dtype=d.np, generator=resolve(generator))
    return _finish_op(out, requires_grad, dev)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability input (elementwise), else 0, in input's dtype; with `p`, every
    element is 1 with probability p.

    >>> import flowgrad as flow
    >>> flow.bernoulli(flow.tensor([0.0, 1.0, 1.0]))
    tensor([0., 1., 1.])
    >>> flow.bernoulli(flow.zeros(2), p=1.0)
    tensor([1., 1.])
    """
    if p is None:
        check_probabilities(input, "bernoulli")
    return _bernoulli(input, p=p, generator=resolve(generator))


def _check_probs(input, num_samples):
    """multinomial's checks, as torch's: a float 1-D or 2-D tensor of finite, non-negative
    weights with a positive sum per row; returns them as float64."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"multinomial(): only supports floating-point dtypes for input, "
                           f"got {input.dtype}; convert with .float()")
    if input._data.ndim not in (1, 2):
        raise RuntimeError(f"multinomial(): prob_dist must be 1 or 2 dim, got shape "
                           f"{tuple(input.shape)}")
    n = _as_int(num_samples, "multinomial", "num_samples")
    if n <= 0:
        raise RuntimeError(f"multinomial(): cannot sample n_sample <= 0 samples (num_samples="
                           f"{n})")
    p = input._data.astype(np.float64)
    if p.size and not (p.min() >= 0 and np.isfinite(p.max())):  # NaN fails both
        raise RuntimeError(f"multinomial(): probability tensor contains either `inf`, `nan` "
                           f"or element < 0 (input of shape {tuple(p.shape)}); pass finite, "
                           f"non-negative weights")
    if p.shape[-1] == 0 or (p.sum(-1) <= 0).any():
        raise RuntimeError(f"multinomial(): invalid multinomial distribution (sum of "
                           f"probabilities <= 0) in input of shape {tuple(p.shape)}; every "
                           f"row needs a positive weight")
    return p


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Draw category indices from each row of (unnormalised) probabilities.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.multinomial(flow.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    p = _check_probs(input, num_samples)
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError(f"multinomial(): cannot sample n_sample={num_samples} > "
                           f"prob_dist.size(-1)={p.shape[-1]} samples without replacement")
    return _multinomial(input, num_samples=int(num_samples), replacement=bool(replacement),
                        generator=resolve(generator))


_HINTS = frozenset(("layout", "pin_memory", "memory_format"))  # accepted, nothing to do


def check_hints(op_name, options):
    """Raise torch's TypeError for a keyword that is none of the accepted layout hints (a
    catch-all would drop a misspelt or unsupported argument silently)."""
    if options and not _HINTS.issuperset(options):
        unknown = sorted(set(options) - _HINTS)[0]
        raise TypeError(f"{op_name}() got an unexpected keyword argument {unknown!r}")


def _new(name, factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **options):
        if "size" in options:  # x.new_zeros(size=(2, 3)): torch's keyword (it was dropped)
            if size:
                raise TypeError(f"{name}() got 'size' both positionally and as a keyword")
            size = (options.pop("size"),)
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
    return tensor(data, dtype=dtype or self.dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)


Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor
