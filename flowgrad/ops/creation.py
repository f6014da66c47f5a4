"""Tensor factories: tensor, zeros, ones, full, arange, linspace, eye, random sampling.

Factories set requires_grad last, so making a tensor records nothing.

>>> import flowgrad as flow
>>> flow.zeros(2, 3).shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import dtypes as _dt
from ..random import numpy_generator
from ..tensor import Size, Tensor

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like",
    "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "bernoulli", "multinomial", "scalar_tensor",
]


def _infer_dtype(data):
    """torch's dtype inference for nested Python data: bool < int64 < default float."""
    kinds = set()
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, Tensor):
            kinds.add(x.dtype)
        elif isinstance(x, (bool, np.bool_)):
            kinds.add(_dt.bool)
        elif isinstance(x, (int, np.integer)):
            kinds.add(_dt.int64)
        elif isinstance(x, (float, np.floating)):
            kinds.add(_dt.get_default_dtype())
        elif isinstance(x, complex):
            raise TypeError("flowgrad does not support complex numbers")
        else:
            raise TypeError(f"tensor(): could not infer a dtype for element {x!r} of type "
                            f"{type(x).__name__}; pass numbers, lists, arrays or tensors")
    result = None
    for d in kinds:
        result = d if result is None else _dt.promote_types(result, d)
    return result or _dt.get_default_dtype()


def _unwrap(x):
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, (list, tuple)):
        return [_unwrap(v) for v in x]
    return x


def as_array(data, dtype=None):
    """A fresh NumPy array from Python data, an array or a tensor, as torch would type it."""
    if isinstance(data, Tensor):
        arr = data._data
        return arr.astype(dtype.np) if dtype is not None else arr.copy()
    if isinstance(data, np.ndarray):
        if dtype is None:
            _dt.from_numpy_dtype(data.dtype)  # raises for unsupported dtypes
            return data.copy()
        return data.astype(dtype.np)
    if np.isscalar(data) and isinstance(data, np.generic):
        d = dtype or _dt.from_numpy_dtype(data.dtype)
        return np.asarray(data, d.np)
    if dtype is None:
        dtype = _infer_dtype(data)
    if hasattr(data, "__array__") and not isinstance(data, (list, tuple)):
        return np.array(data, dtype=dtype.np)
    return np.array(_unwrap(data), dtype=dtype.np)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of `data`, with torch's dtype inference.

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).dtype, flow.tensor([1.0, 2]).dtype
    (flowgrad.int64, flowgrad.float32)
    """
    if device is not None:
        from ..device import device as _device

        _device(device)
    t = Tensor._wrap(as_array(data, _dt.as_dtype(dtype) if dtype is not None else None))
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """Like `tensor`, but shares memory with a tensor or array of the same dtype.

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0])
    >>> flow.as_tensor(x) is x, flow.as_tensor([1, 2]).dtype
    (True, flowgrad.int64)
    """
    if isinstance(data, Tensor) and (dtype is None or _dt.as_dtype(dtype) is data.dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or _dt.as_dtype(dtype).np == data.dtype):
        _dt.from_numpy_dtype(data.dtype)
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype)


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


def scalar_tensor(value, dtype=None):
    """A 0-dim tensor holding `value` (default float dtype), as torch.scalar_tensor."""
    return tensor(value, dtype=dtype or _dt.get_default_dtype())


def _size(size, op_name):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    try:
        size = tuple(builtins.int(s) for s in size)
    except TypeError:
        raise TypeError(f"{op_name}(): size must be ints or one tuple of ints, got "
                        f"{size!r}") from None
    if any(s < 0 for s in size):
        raise RuntimeError(f"{op_name}(): Trying to create tensor with negative dimension "
                           f"in size {size}; sizes must be >= 0")
    return size


def _finish(array, requires_grad):
    t = Tensor._wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _float_dtype(dtype):
    return _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of zeros (default float dtype).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> flow.zeros(2, dtype=flow.int64)
    tensor([0, 0])
    """
    return _finish(np.zeros(_size(size, "zeros"), _float_dtype(dtype).np), requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor of ones (default float dtype).

    >>> import flowgrad as flow
    >>> flow.ones(2, 2)
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _finish(np.ones(_size(size, "ones"), _float_dtype(dtype).np), requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, **_):
    """An uninitialised tensor (zeros here, so results never depend on stale memory).

    >>> import flowgrad as flow
    >>> flow.empty(2, 3).shape
    flowgrad.Size([2, 3])
    """
    return _finish(np.zeros(_size(size, "empty"), _float_dtype(dtype).np), requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with `fill_value`; dtype inferred from it as torch does.

    >>> import flowgrad as flow
    >>> flow.full((2, 2), 7)
    tensor([[7, 7],
            [7, 7]])
    >>> flow.full((2,), 0.5)
    tensor([0.5000, 0.5000])
    """
    if dtype is None:
        dtype = _infer_dtype(fill_value.item() if isinstance(fill_value, Tensor) else fill_value)
    return _finish(np.full(_size((size,), "full"), fill_value, _dt.as_dtype(dtype).np),
                   requires_grad)


def _like(x, dtype):
    return _dt.as_dtype(dtype) if dtype is not None else x.dtype


def zeros_like(x, dtype=None, device=None, requires_grad=False, **_):
    """Zeros with the shape of `x` and its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.zeros_like(flow.tensor([[1, 2], [3, 4]]))
    tensor([[0, 0],
            [0, 0]])
    """
    return _finish(np.zeros(x._data.shape, _like(x, dtype).np), requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False, **_):
    """Ones with the shape of `x` and its dtype unless `dtype` is given."""
    return _finish(np.ones(x._data.shape, _like(x, dtype).np), requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False, **_):
    """An uninitialised tensor shaped like `x`; flowgrad fills it with zeros."""
    return zeros_like(x, dtype, requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False, **_):
    """A tensor shaped like `x` filled with `fill_value`, in x's dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.full_like(flow.ones(3), 2.5)
    tensor([2.5000, 2.5000, 2.5000])
    """
    return _finish(np.full(x._data.shape, fill_value, _like(x, dtype).np), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start (default 0) up to end, exclusive; int64 for integer arguments.

    >>> import flowgrad as flow
    >>> flow.arange(5)
    tensor([0, 1, 2, 3, 4])
    >>> flow.arange(1, 2.5, 0.5)
    tensor([1.0000, 1.5000, 2.0000])
    """
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and larger bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = _infer_dtype([start, end, step])
    dtype = _dt.as_dtype(dtype)
    n = builtins.max(0, int(np.ceil((end - start) / step)))
    return _finish((start + step * np.arange(n, dtype=np.float64)).astype(dtype.np)
                   if dtype.is_floating_point else np.arange(start, end, step, dtype=dtype.np)
                   [:n], requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """`steps` evenly spaced values from start to end, inclusive.

    >>> import flowgrad as flow
    >>> flow.linspace(0, 1, steps=5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    return _finish(np.linspace(start, end, int(steps)).astype(_float_dtype(dtype).np),
                   requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """`steps` values base ** t for t evenly spaced from start to end, inclusive."""
    return _finish(np.logspace(start, end, int(steps), base=base).astype(_float_dtype(dtype).np),
                   requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """An n x m identity matrix.

    >>> import flowgrad as flow
    >>> flow.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    return _finish(np.eye(n, n if m is None else m, dtype=_float_dtype(dtype).np),
                   requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples in [0, 1).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)  # flowgrad's stream (NumPy's PCG64), not torch's values
    >>> flow.rand(3)
    tensor([0.6370, 0.2698, 0.0410])
    """
    d = _float_dtype(dtype)
    arr = numpy_generator(generator).random(_size(size, "rand"), dtype=np.float64).astype(d.np)
    return _finish(arr, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.randn(2, 2)
    tensor([[ 0.1257, -0.1321],
            [ 0.6404,  0.1049]])
    """
    d = _float_dtype(dtype)
    arr = numpy_generator(generator).standard_normal(_size(size, "randn")).astype(d.np)
    return _finish(arr, requires_grad)


def randint(low, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers uniform in [low, high); int64 by default.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> x = flow.randint(0, 10, (2, 3))
    >>> x.dtype, bool(((x >= 0) & (x < 10)).all())
    (flowgrad.int64, True)
    """
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"randint: expects low < high, got low={low}, high={high}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    arr = numpy_generator(generator).integers(low, high, _size((size,), "randint"))
    return _finish(arr.astype(d.np), requires_grad)


def rand_like(x, dtype=None, generator=None, **_):
    """Uniform [0, 1) samples shaped like `x`, in x's dtype unless `dtype` is given."""
    d = _dt.as_dtype(dtype) if dtype is not None else x.dtype
    if not d.is_floating_point:
        raise RuntimeError(f"rand_like: uniform sampling needs a floating dtype, got {d.name}; "
                           f"pass dtype=flowgrad.float32")
    return rand(*x.shape, dtype=d, generator=generator)


def randn_like(x, dtype=None, generator=None, **_):
    """Standard normal samples shaped like `x`."""
    d = _dt.as_dtype(dtype) if dtype is not None else x.dtype
    if not d.is_floating_point:
        raise RuntimeError(f"randn_like: normal sampling needs a floating dtype, got {d.name}; "
                           f"pass dtype=flowgrad.float32")
    return randn(*x.shape, dtype=d, generator=generator)


def randint_like(x, low, high=None, dtype=None, generator=None, **_):
    """Integers uniform in [low, high) shaped like `x`; randint_like(x, high) starts at 0."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(x.shape), dtype=dtype or x.dtype, generator=generator)


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1 (int64).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> sorted(flow.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    return _finish(numpy_generator(generator).permutation(int(n)).astype(d.np), requires_grad)


def normal(mean=0.0, std=1.0, size=None, generator=None, dtype=None):
    """Normal samples with the given mean and std (tensors or numbers)."""
    m = mean._data if isinstance(mean, Tensor) else mean
    s = std._data if isinstance(std, Tensor) else std
    shape = size if size is not None else np.broadcast_shapes(np.shape(m), np.shape(s))
    d = _float_dtype(dtype if dtype is not None else
                     (mean.dtype if isinstance(mean, Tensor) else None))
    arr = (m + s * numpy_generator(generator).standard_normal(shape)).astype(d.np)
    return Tensor._wrap(arr)


def bernoulli(p, generator=None):
    """1 with probability p (elementwise), else 0; the result has p's dtype.

    >>> import flowgrad as flow
    >>> flow.bernoulli(flow.tensor([0.0, 1.0, 1.0]))
    tensor([0., 1., 1.])
    """
    probs = p._data
    arr = (numpy_generator(generator).random(probs.shape) < probs).astype(probs.dtype)
    return Tensor._wrap(arr)


def multinomial(probs, num_samples, replacement=False, generator=None):
    """Draw category indices from each row of (unnormalised) probabilities.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.multinomial(flow.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    gen = numpy_generator(generator)
    p = probs._data.astype(np.float64)
    rows = p.reshape(-1, p.shape[-1])
    if not replacement and num_samples > rows.shape[1]:
        raise RuntimeError(f"multinomial: cannot sample n_sample={num_samples} > "
                           f"prob_dist.size(-1)={rows.shape[1]} samples without replacement")
    if replacement:
        cdf = np.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = gen.random((rows.shape[0], num_samples))
        out = np.minimum((u[:, :, None] > cdf[:, None, :]).sum(-1), rows.shape[1] - 1)
    else:  # Gumbel top-k gives sampling without replacement in one vectorised step
        g = np.log(np.maximum(rows, 1e-300)) - np.log(-np.log(gen.random(rows.shape)))
        g[rows <= 0] = -np.inf
        out = np.argsort(-g, axis=1)[:, :num_samples]
    return Tensor._wrap(out.reshape(p.shape[:-1] + (num_samples,)).astype(np.int64))


def _new(name, factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **_):
        return factory(*size, dtype=dtype or self.dtype, requires_grad=requires_grad)
    method.__name__ = name
    setattr(Tensor, name, method)


_new("new_zeros", zeros)
_new("new_ones", ones)
_new("new_empty", empty)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)


Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor
