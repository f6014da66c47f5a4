"""Range factories: arange, linspace, logspace, with torch's exact values (its kernels'
order of operations reproduced, so a range holds the same bits as torch's).

>>> import flowgrad as flow
>>> flow.linspace(0, 1, 5)
tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
"""
from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from .. import dtypes as _dt
from ..device import resolve_device
from ..errors import check_int64, fill_checks_overflow, fill_scalar
from ..tensor import Tensor
from .creation import (
    FACTORY_HINTS,
    _alloc,
    _as_int,
    _finish,
    _infer_dtype,
    check_hints,
)


def _real_bound(v, arg):
    """A complex bound's real part when its imaginary part is 0; else torch's RuntimeError
    from its checked conversion to double (arange has no complex ranges)."""
    if isinstance(v, (numbers.Complex, np.complexfloating)) and not isinstance(v, numbers.Real):
        if v.imag != 0:
            raise RuntimeError(f"arange(): argument '{arg}' ({v!r}) cannot be converted to "
                               f"type double without overflow; arange has no complex ranges")
        return v.real
    return v


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False,
           **options):
    """Values from start (default 0) up to end, exclusive; int64 for integer arguments.

    >>> import flowgrad as flow
    >>> flow.arange(5)
    tensor([0, 1, 2, 3, 4])
    >>> flow.arange(1, 2.5, 0.5)
    tensor([1.0000, 1.5000, 2.0000])
    """
    check_hints("arange", options, FACTORY_HINTS)
    dev = resolve_device(device, "arange")
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    for arg, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, (numbers.Number, np.generic)):
            raise TypeError(f"arange(): argument '{arg}' must be a number, not "
                            f"{type(v).__name__} ({v!r})")
        check_int64("arange", v, arg)  # (torch's Scalar: before the dtype and the range)
    if dtype is not None:  # (torch refuses a bool/complex dtype before it reads the range)
        dtype = _dt.as_dtype(dtype)
        _check_range_dtype(dtype)
    start, end, step = (_real_bound(v, arg) for v, arg in ((start, "start"), (end, "end"),
                                                           (step, "step")))
    for arg, v in (("start", start), ("end", end), ("step", step)):
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
        dtype = _dt.int64 if dtype is _dt.bool else dtype  # (arange(False, True, True): int64)
    if dtype.category == 1:
        n, first, stride = _int_range(start, end, step, dtype)
        return _finish(_alloc("arange", (n,), dtype.np, lambda: (
            first + stride * np.arange(n, dtype=np.int64)).astype(dtype.np)), requires_grad, dev)
    n = builtins.max(0, math.ceil((float(end) - float(start)) / float(step)))
    return _finish(_alloc("arange", (n,), dtype.np, lambda: _float_range(start, step, n, dtype)),
                   requires_grad, dev)


def _check_range_dtype(dtype):
    if dtype.category in (0, 3):
        raise NotImplementedError(f"arange(): not implemented for dtype {dtype.name} (as torch); "
                                  f"make an integer or floating range and convert it")


# torch's arange kernel writes vectors of 32 bytes (its AVX2 build: 4 doubles, 8 floats, 16
# halves) two at a time, each as base + k * step from a base computed once per vector, and the
# elements after the last pair one by one as start + i * step; everything in the accumulate
# type (float64, or float32 for half precision) with fused multiply-adds. Reproduced here so
# that arange(0.1, 2, 0.3) holds torch's bits (a single-threaded run: past 32768 elements
# torch splits the range between threads, which moves the vectors).
_ARANGE_VECTOR_BYTES = 32


def _float_range(start, step, n, dtype):
    i = np.arange(n)
    lanes = _ARANGE_VECTOR_BYTES // dtype.itemsize
    vectorized = i < n // (2 * lanes) * 2 * lanes
    lane = i % lanes
    if dtype.itemsize >= 4:  # accumulated in float64: fma(step, i, start) exactly
        start, step = float(start), float(step)
        base = fma64(step, i - lane, start).astype(dtype.np)
        values = np.where(vectorized, fma64(step, lane, base.astype(np.float64)),
                          fma64(step, i, start))
        return values.astype(dtype.np)

    def fma32(a, k, c):  # a float32 fused multiply-add, exact in float64 but for ties
        return (np.float64(c) + np.float64(a) * k).astype(np.float32)
    start, step = np.float32(start), np.float32(step)
    base = fma32(step, i - lane, start).astype(dtype.np).astype(np.float32)
    return np.where(vectorized, fma32(step, lane, base), fma32(step, i, start)).astype(dtype.np)


def _int_range(start, end, step, dtype):
    """arange's (length, first value, step) for an integer dtype, as torch computes them: the
    bounds and the step are truncated to int64 first, so arange(0, 1, 0.25, dtype=int32) is
    four zeros. int64 counts in those truncated integers (and refuses a step that truncates to
    0); the narrower types count ceil((end - start) / step) in the unrounded values."""
    first, last, stride = (_to_int64(v, "arange") for v in (start, end, step))
    if dtype is _dt.int64:
        if stride == 0:
            raise ValueError(f"arange(): step must be nonzero, but step={step} truncates to 0 "
                             f"for an int64 range; pass an integer step or a floating dtype")
        sign = 1 if stride > 0 else -1
        span = last - first + stride - sign
        n = abs(span) // abs(stride) * (1 if (span >= 0) == (stride > 0) else -1)
    else:
        n = math.ceil((float(end) - float(start)) / float(step))
    return builtins.max(0, n), first, stride


def _to_int64(value, op_name):
    """`value` truncated toward zero to an int64, as torch's Scalar.to<int64_t>()."""
    number = int(value)
    if not -2 ** 63 <= number < 2 ** 63:
        raise RuntimeError(f"{op_name}(): value {value!r} cannot be converted to type int64 "
                           f"without overflow")
    return number


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False, **options):
    """`steps` evenly spaced values from start to end, inclusive; complex when start or end is
    complex. As torch: the first half counts up from start, the second down from end, and an
    integer dtype truncates start and end before spacing them (linspace(0.5, 2, 4, dtype=int64)
    is [0, 0, 1, 2]).

    >>> import flowgrad as flow
    >>> flow.linspace(0, 1, steps=5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    check_hints("linspace", options, FACTORY_HINTS)
    dev = resolve_device(device, "linspace")
    if _batched(start, end):
        out = _batched_range("linspace", start, end, steps, None, dtype)
        return out.requires_grad_() if requires_grad else out
    start, end, d = _range_bounds("linspace", start, end, dtype)
    n = _steps(steps, "linspace")
    return _finish(_alloc("linspace", (n,), d.np, lambda: _linspace(start, end, n, d)),
                   requires_grad, dev)


def _batched(*bounds):
    return any(getattr(b, "_phys", None) is not None for b in bounds)


def _batched_range(op_name, start, end, steps, base, dtype):
    """linspace/logspace with bounds batched by vmap (their values differ per example, so
    no .item()): the same spacing by tensor ops, from both ends, in float64."""
    for arg, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor) and v.dim():
            raise RuntimeError(f"{op_name}(): only supports 0-dimensional start and end "
                               f"tensors, but got {arg} of shape {tuple(v.shape)}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    n = _steps(steps, op_name)
    lo, hi = (v.to(_dt.float64) if isinstance(v, Tensor) else float(v) for v in (start, end))
    if d.category == 1:  # (an integer dtype truncates the bounds first, as torch)
        lo, hi = (v.trunc() if isinstance(v, Tensor) else float(math.trunc(v)) for v in (lo, hi))
    i = arange(n, dtype=_dt.float64)
    if n == 1:
        values = i * 0 + lo
    else:
        step = (hi - lo) / (n - 1)
        values = (lo + step * i).where(i < n // 2, hi - step * (n - 1 - i))
    if base is not None:
        values = float(base) ** values
    if d.category == 1:
        values = values.trunc()
    return values.to(d)


def _range_bounds(op_name, start, end, dtype):
    """linspace/logspace's bounds as numbers and their dtype: the given one, else the default
    float dtype, or the default complex one when a bound is complex (as torch, which refuses a
    complex bound with a real dtype rather than drop its imaginary part)."""
    bounds = []
    for arg, v in (("start", start), ("end", end)):
        if isinstance(v, Tensor):
            if v._data.ndim:
                raise RuntimeError(f"{op_name}(): only supports 0-dimensional start and end "
                                   f"tensors, but got {arg} of shape {tuple(v.shape)}")
            v = v.item()
        if not isinstance(v, (numbers.Number, np.generic)) or isinstance(v, np.str_):
            raise TypeError(f"{op_name}(): argument '{arg}' must be a number or a 0-dim "
                            f"tensor, not {type(v).__name__} ({v!r})")
        bounds.append(_dt.scalar_value(v) if isinstance(v, np.generic) else v)
    is_complex = any(isinstance(v, complex) for v in bounds)
    d = _dt.as_dtype(dtype) if dtype is not None else (
        _dt.default_complex() if is_complex else _dt.get_default_dtype())
    if is_complex and d.category != 3:
        raise RuntimeError(f"{op_name}(): inferred dtype {_dt.default_complex().name} can't be "
                           f"safely cast to passed dtype {d.name} (start={bounds[0]!r}, "
                           f"end={bounds[1]!r}); pass a complex dtype or real bounds")
    return bounds[0], bounds[1], d


def _refuse_bool(op_name, d):
    if d.category == 0:  # (torch makes bool results of 0 or 1 steps)
        raise NotImplementedError(f"{op_name}(): not implemented for dtype bool (as torch); "
                                  f"make an integer or floating range and convert it")


def _bound_as(op_name, value, d, checked=True):
    """A bound converted to dtype `d`'s values as torch's Scalar.to<T>(): checked as a fill
    (`fill_scalar`: a value the dtype cannot hold raises; uint8 takes the ints -255..-1
    modulo 256), then an integer dtype truncates and a floating one rounds to its precision.
    `checked=False`: a float beyond a floating dtype's range is inf (torch's one-element
    fill of float16/bfloat16)."""
    value = fill_scalar(op_name, value, d.np, checked)
    if d.category == 0:
        return bool(value)
    if d.category == 1:
        return int(value)
    return d.np.type(value).item() if d.category == 2 else complex(d.np.type(value))


def _linspace(start, end, n, d):
    """torch's linspace kernel: step = (end - start) / (n - 1) in the dtype's arithmetic (a
    double for integer dtypes), start + step * i for the first half, end - step * (n - 1 - i)
    for the second, so both ends are exact. float32/float64 evaluate each as one fused
    multiply-add (torch's vectorized kernel), float16/bfloat16 round every operation to the
    dtype, the integer i included (c10::Half's arithmetic)."""
    if n == 0:
        return np.zeros(0, d.np)
    if n == 1:  # (torch converts only start then, a half one unchecked as its full)
        return np.full(1, _bound_as("linspace", start, d, fill_checks_overflow(d.np, 1)), d.np)
    first = _bound_as("linspace", start, d)
    _refuse_bool("linspace", d)
    last = _bound_as("linspace", end, d)
    i = np.arange(n)
    head = i < n // 2
    with np.errstate(invalid="ignore", over="ignore"):
        if d.category == 1:  # integer dtypes space in float64, then truncate
            step = (float(last) - float(first)) / (n - 1)
            values = _spaced(np.float64(step), float(first), float(last), i, head, 8)
            return np.trunc(values).astype(np.int64).astype(d.np)
        if d.category == 3:  # complex: a fused multiply-add per component
            part = d.itemsize // 2
            real = np.float32 if part == 4 else np.float64
            diff = d.np.type(d.np.type(last) - d.np.type(first))
            # (divided per component by the real n - 1, as c10::complex / scalar)
            step = diff.real / real(n - 1) + 1j * (diff.imag / real(n - 1))
            return (_spaced(step.real, first.real, last.real, i, head, part) + 1j *
                    _spaced(step.imag, first.imag, last.imag, i, head, part)).astype(d.np)
        t = d.np.type
        if d.itemsize < 4:
            def rounded(x):  # one c10::Half (or BFloat16) operation: float32, then rounded
                return np.asarray(x, np.float32).astype(d.np).astype(np.float32)
            lo, hi = np.float32(t(first)), np.float32(t(last))
            step = rounded(rounded(hi - lo) / rounded(np.float32(n - 1)))
            values = np.where(head, rounded(lo + rounded(step * rounded(i))),
                              rounded(hi - rounded(step * rounded(n - 1 - i))))
            return values.astype(d.np)
        step = t(t(last) - t(first)) / t(n - 1)
        return _spaced(step, first, last, i, head, d.itemsize).astype(d.np)


def _spaced(step, first, last, i, head, itemsize):
    """first + step * i on the `head` positions, last - step * (n - 1 - i) after, each one
    fused multiply-add in a real dtype of `itemsize` bytes (4: float32's, exact in float64
    but for a double rounding's ties)."""
    back = len(i) - 1 - i
    if itemsize == 4:
        s64 = np.float64(step)
        return np.where(head, first + s64 * i, last - s64 * back).astype(np.float32)
    return np.where(head, fma64(step, i, first), fma64(-step, back, last))


def fma64(a, k, c):
    """a * k + c with one rounding (float64 a and c, integers 0 <= k < 2**26): Dekker's exact
    product and Knuth's two-sum, so the sum of the three parts rounds once (but for ties of
    a double rounding, too rare to meet)."""
    k = k.astype(np.float64)
    p = a * k
    split = 134217729.0 * a  # 2**27 + 1: a's high 26 bits; k has no low part
    high = split - (split - a)
    err = (high * k - p) + (a - high) * k  # p + err == a * k exactly
    s = p + c
    back = s - p
    tail = (p - (s - back)) + (c - back)  # s + tail == p + c exactly
    out = s + (tail + err)
    return np.where(np.isfinite(out), out, p + c)


def _steps(steps, op_name):
    n = _as_int(steps, op_name, "steps")
    if n < 0:
        raise RuntimeError(f"{op_name}(): number of steps must be non-negative, got {n}")
    return n


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False,
             **options):
    """`steps` values base ** t for t evenly spaced from start to end, inclusive; complex when
    start or end is complex. As torch, an integer dtype truncates start and end first
    (logspace(2.5, 0.5, 3, dtype=int64) is [100, 10, 1], not [316, 31, 3]).

    >>> import flowgrad as flow
    >>> flow.logspace(0, 2, steps=3)
    tensor([  1.,  10., 100.])
    """
    check_hints("logspace", options, FACTORY_HINTS)
    dev = resolve_device(device, "logspace")
    if _batched(start, end):
        out = _batched_range("logspace", start, end, steps, base, dtype)
        return out.requires_grad_() if requires_grad else out
    start, end, d = _range_bounds("logspace", start, end, dtype)
    n = _steps(steps, "logspace")
    if isinstance(base, Tensor):
        base = base.item()
    if not isinstance(base, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"logspace(): argument 'base' must be a real number, not "
                        f"{type(base).__name__} ({base!r})")
    return _finish(_alloc("logspace", (n,), d.np, lambda: _logspace(start, end, n, base, d)),
                   requires_grad, dev)


def _logspace(start, end, n, base, d):
    """torch's logspace kernel: exponents spaced from the bounds as the dtype holds them (an
    integer dtype truncates them), in float64 from the two ends, then base ** exponent in
    float64, truncated toward zero for integer dtypes."""
    if n == 0:
        return np.zeros(0, d.np)
    work = np.complex128 if d.category == 3 else np.float64
    base = float(base)
    with np.errstate(all="ignore"):
        if n == 1:  # torch raises the unconverted start and fills with the checked value
            values = np.power(work(base), np.array([start], dtype=work))
            if d.category == 1:
                fill_scalar("logspace", values.item(), d.np)
        else:
            _refuse_bool("logspace", d)
            first = work(_bound_as("logspace", start, d))
            last = work(_bound_as("logspace", end, d))
            i = np.arange(n)
            if d.category == 3:
                step = (last - first) / (n - 1)
                exponents = np.where(i < n // 2, first + step * i, last - step * (n - 1 - i))
            else:  # (end - start in the dtype's arithmetic, then fused multiply-adds in double)
                diff = float(d.np.type(d.np.type(last) - d.np.type(first))) \
                    if d.category == 2 else float(int(last) - int(first))
                exponents = _spaced(diff / (n - 1), first, last, i, i < n // 2, 8)
            values = np.power(work(base), exponents.astype(work))
        if d.category == 1:
            values = np.trunc(values)
        return values.astype(d.np)
