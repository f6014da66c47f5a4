"""nn.init: fill tensors in place with torch's initialisation distributions.

Every function writes into the tensor's storage without recording autograd (as torch's
do under no_grad) and returns the tensor.

>>> import flowgrad as flow
>>> w = flow.empty(3, 5)
>>> flow.nn.init.xavier_uniform_(w) is w
True
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .._warn import warn
from ..autograd.inplace import bump_version, check_capture
from ..autograd.interpreter import check_host_draw
from ..errors import check_std, check_uniform_bounds, fill_checks_overflow, fill_scalar
from ..meta import MetaArray
from ..random import numpy_generator as _numpy_generator
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
    "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
    "kaiming_normal_", "orthogonal_", "sparse_",
]

_SQRT_HALF = math.sqrt(0.5)


def _write(tensor, values, name):
    """Write `values` into tensor's storage (views see it) and bump its version: the in-place
    op `name` (refused inside func transforms for a tensor captured from outside them)."""
    check_capture(name, tensor)
    tensor._data[...] = np.asarray(values).astype(tensor._data.dtype, copy=False)
    bump_version(tensor)
    return tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch's table).

    >>> round(calculate_gain("relu"), 4)
    1.4142
    """
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _host_generator(generator=None):
    """The NumPy generator an init draws from on the host; refused while nn.Graph traces
    build (the plan would reuse the numbers drawn once)."""
    check_host_draw("nn.init")
    return _numpy_generator(generator)


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    receptive = int(np.prod(tensor.shape[2:])) if tensor.dim() > 2 else 1
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _check_sampled_dtype(tensor, name, complex_ok=True):
    """Random fills need a floating tensor (or a complex one, where torch samples those):
    cast into an integer or bool tensor the draws would become a few small integers, with
    no error (torch raises NotImplementedError, a RuntimeError, there)."""
    dt = tensor.dtype
    if tensor.numel() == 0 or dt.is_floating_point or (complex_ok and dt.is_complex):
        return
    kinds = "a floating point" + (" or complex" if complex_ok else "")
    raise NotImplementedError(f"nn.init.{name}: expects {kinds} tensor, got {dt.name} "
                              f"(shape {tuple(tensor.shape)}); make it with a floating dtype, "
                              f"or fill a float copy and cast it")


def _check_uniform_bounds(tensor, a, b, name):
    """torch's uniform_ checks, which an empty tensor passes through too: a floating (or
    complex) dtype, finite bounds inside its range, a <= b."""
    dt = tensor.dtype
    if dt.is_complex and not tensor.numel():
        return  # (torch's complex uniform_ fills the real view: an empty one is not checked)
    if not (dt.is_floating_point or dt.is_complex):
        raise NotImplementedError(f"nn.init.{name}: draws U(a, b) into a floating point or "
                                  f"complex tensor, got {dt.name} (shape "
                                  f"{tuple(tensor.shape)}); make it with a floating dtype")
    check_uniform_bounds(f"nn.init.{name}", dt, a, b)


def _draw_uniform(tensor, a, b, generator, name):
    """U(a, b) into tensor; complex tensors get each part U(a, b), as torch."""
    _check_sampled_dtype(tensor, name)
    _check_uniform_bounds(tensor, a, b, name)
    shape = tuple(tensor.shape)
    rng = _host_generator(generator)
    if not tensor.numel():  # (nothing drawn: NumPy would check the bounds itself)
        return _write(tensor, np.empty(shape), name)
    if tensor.dtype.is_complex:
        return _write(tensor, rng.uniform(a, b, shape) + 1j * rng.uniform(a, b, shape), name)
    return _write(tensor, rng.uniform(a, b, shape), name)


def _normal_sample(tensor, mean, std, rng, name):
    """An array of N(mean, std^2) draws of tensor's shape; for a complex tensor torch's
    complex normal: each part N(mean, std^2 / 2), so that E|z - mean|^2 = std^2."""
    check_std(std, f"nn.init.{name}")  # (first, as torch's normal_)
    _check_sampled_dtype(tensor, name)
    shape = tuple(tensor.shape)
    if tensor.dtype.is_complex:
        part = std * _SQRT_HALF
        return rng.normal(mean, part, shape) + 1j * rng.normal(mean, part, shape)
    return rng.normal(mean, std, shape)


def _draw_normal(tensor, mean, std, generator, name):
    return _write(tensor, _normal_sample(tensor, mean, std, _host_generator(generator), name),
                  name)


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    return _draw_uniform(tensor, a, b, generator, "uniform_")


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    return _draw_normal(tensor, mean, std, generator, "normal_")


def _norm_cdf(x):
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


def _refuse_complex(tensor):
    """trunc_normal_ compares the draws with [a, b]: torch refuses a complex tensor, empty too."""
    if tensor.dtype.is_complex:
        raise NotImplementedError(f"nn.init.trunc_normal_: truncates to a real interval, got "
                                  f"a {tensor.dtype.name} tensor (shape {tuple(tensor.shape)}); "
                                  f"fill the real and imaginary parts separately")


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b], by torch's method: resampling the
    normal while [a, b] holds over 30% of its mass, else rejection sampling from U(a, b)
    (which ends quickly even for a window far out in the tail)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
             "The distribution of values may be incorrect.", stacklevel=2)
    if std == 0:
        raise ZeroDivisionError(f"nn.init.trunc_normal_: std=0 (mean={mean}, [a, b]=[{a}, "
                                f"{b}]) leaves nothing to truncate; pass std > 0, or use "
                                f"constant_")
    _check_sampled_dtype(tensor, "trunc_normal_")  # (complex: refused below, where torch's is)
    mass = _norm_cdf((b - mean) / std) - _norm_cdf((a - mean) / std)
    rng = _host_generator(generator)
    np_dtype = tensor._data.dtype
    n = tensor.numel()
    if mass > 0.3:
        _refuse_complex(tensor)
        # compared in the tensor's dtype, as torch: a draw that rounds onto a bound is kept
        lo, hi = np.asarray(a).astype(np_dtype), np.asarray(b).astype(np_dtype)
        out = rng.normal(mean, std, n).astype(np_dtype)
        bad = np.flatnonzero((out < lo) | (out > hi))
        while bad.size:
            out[bad] = rng.normal(mean, std, bad.size).astype(np_dtype)
            bad = bad[(out[bad] < lo) | (out[bad] > hi)]
        return _write(tensor, out.reshape(tuple(tensor.shape)), "trunc_normal_")
    _check_uniform_bounds(tensor, a, b, "trunc_normal_")
    _refuse_complex(tensor)
    log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2  # the density's top in [a, b]

    def rejected(x):
        # torch's test, log(u) > log density: a nan density accepts rather than looping
        with np.errstate(divide="ignore"):
            return np.log(rng.random(x.size)) > -0.5 * ((x - mean) / std) ** 2 - log_peak

    out = rng.uniform(a, b, n)
    todo = np.flatnonzero(rejected(out))
    while todo.size:
        out[todo] = rng.uniform(a, b, todo.size)
        todo = todo[rejected(out[todo])]
    return _write(tensor, out.reshape(tuple(tensor.shape)), "trunc_normal_")


def constant_(tensor, val):
    """Fill with the value `val` (checked as fill_ checks it: nan, inf or a number out of an
    integer dtype's range raise rather than wrap around)."""
    if not isinstance(val, Tensor):
        val = fill_scalar("nn.init.constant_", val, tensor._data.dtype,
                          fill_checks_overflow(tensor._data.dtype, tensor._data.size))
    return _write(tensor, val, "constant_")


def ones_(tensor):
    """Fill `tensor` with ones in place, unrecorded by autograd; returns it (nn.init.ones_)."""
    return _write(tensor, 1, "ones_")


def zeros_(tensor):
    """Fill `tensor` with zeros in place, unrecorded by autograd; returns it (nn.init.zeros_)."""
    return _write(tensor, 0, "zeros_")


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*tensor.shape), "eye_")


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D conv weight with the Dirac delta (identity convolution)."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    min_dim = min(out_per_group, sizes[1])
    w = np.zeros(tuple(sizes))
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            w[(g * out_per_group + d, d) + centre] = 1
    return _write(tensor, w, "dirac_")


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return _draw_uniform(tensor, -a, a, generator, "xavier_uniform_")


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _draw_normal(tensor, 0.0, std, generator, "xavier_normal_")


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan)."""
    if 0 in tuple(tensor.shape):
        warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return _draw_uniform(tensor, -bound, bound, generator, "kaiming_uniform_")


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std^2) with std = gain / sqrt(fan)."""
    if 0 in tuple(tensor.shape):
        warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    return _draw_normal(tensor, 0.0, std, generator, "kaiming_normal_")


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal sample, scaled by
    gain; dimensions after the first are flattened."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    _check_sampled_dtype(tensor, "orthogonal_", complex_ok=False)
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = _host_generator(generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))  # makes the decomposition unique (uniform over O(n))
    if rows < cols:
        q = q.T
    return _write(tensor, gain * q.reshape(tuple(tensor.shape)), "orthogonal_")


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor with N(0, std^2) entries and a fraction `sparsity` of each column zero."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rng = _host_generator(generator)
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    w = _normal_sample(tensor, 0.0, std, rng, "sparse_")
    for c in range(cols):
        w[rng.permutation(rows)[:num_zeros], c] = 0
    return _write(tensor, w, "sparse_")


def _nothing_to_fill_on_meta(fn):
    """fn, giving a meta tensor back as it is: it has no values to fill, and, as torch's meta
    kernels, nothing is drawn for it (a big model built on meta costs neither the memory nor
    the random numbers)."""
    @functools.wraps(fn)
    def init(tensor, *args, **kwargs):
        if tensor._data.__class__ is MetaArray:
            return tensor
        return fn(tensor, *args, **kwargs)
    return init


for _name in __all__[1:]:  # (every init_ but calculate_gain)
    globals()[_name] = _nothing_to_fill_on_meta(globals()[_name])


def _deprecated(fn):
    """torch's old names without the trailing underscore: they warn, then run `fn`."""
    old_name = fn.__name__[:-1]

    def deprecated_init(*args, **kwargs):
        warn(f"`nn.init.{old_name}` is now deprecated in favor of "
             f"`nn.init.{fn.__name__}`.", FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    deprecated_init.__name__ = deprecated_init.__qualname__ = old_name
    deprecated_init.__doc__ = f"{old_name}(...): deprecated, use nn.init.{fn.__name__}."
    return deprecated_init


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
