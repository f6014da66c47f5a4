"""Random factories: rand, randn, randint, randperm, normal, bernoulli, multinomial (and the
_like forms). Each is an op (not differentiable) whose kernel draws from the Generator passed
as its `generator` attribute (the global one by default), so a recorded call (nn.Graph's
plan) draws fresh numbers each run and `manual_seed` reproduces eager's draws.

>>> import flowgrad as flow
>>> _ = flow.manual_seed(0)
>>> flow.rand(2, 3).shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..device import CPU, HOST_XP, resolve_device, to_device
from ..errors import check_probability_values, check_std, expect_tensor
from ..meta import meta_array
from ..random import (
    numpy_generator,
    resolve,
    torch_multinomial_by_exponentials,
    torch_multinomial_with_replacement,
    torch_randperm,
)
from ..tensor import Tensor
from .creation import (
    FACTORY_HINTS,
    _alloc,
    _as_int,
    _device_like,
    _float_dtype,
    _keeps_layout,
    _laid_out,
    _size,
    _size_arg,
    check_hints,
    empty_like,
    zeros_like,
)
from .out_arg import with_out
from .registry import op

__all__ = ["rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
           "normal", "bernoulli", "multinomial"]

def rand(*size_args, size=None, generator=None, dtype=None, device=None,
         requires_grad=False, **options):
    """Uniform samples in [0, 1).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)  # flowgrad's stream (NumPy's PCG64), not torch's values
    >>> flow.rand(3)
    tensor([0.6370, 0.2698, 0.0410])
    """
    check_hints("rand", options, FACTORY_HINTS)
    return _sample("rand", _rand, "uniform", size_args, size, generator, dtype, device,
                   requires_grad)


# ---- random sampling: kernels draw from the Generator attribute ---------------------------
# torch's U[0, 1) for a half dtype is k / 2**digits (k < 2**digits, digits: the
# significand's bits): each value exact. A float64 draw cast to float16 rounds to 1.0 once in
# ~4000 draws (bfloat16: once in ~500); float32's and float64's keep NumPy's values (seeded
# draws stay as they were), a float32 one rounded up to the bound stepping down below it
_DIGITS = {"float16": 11, "bfloat16": 8}


def _unit_draws(xp, generator, shape, dtype):
    """float64 draws on [0, 1); on the grid `dtype` holds exactly where it is a half one."""
    u = xp.asarray(numpy_generator(generator).random(shape))
    digits = _DIGITS.get(xp.dtype(dtype).name)
    return u if digits is None else xp.floor(u * 2.0 ** digits) * 2.0 ** -digits


def _below(xp, out, low, high):
    """`out` (draws cast to their dtype) with a value rounded up to `high` or past it moved to
    the one below: every draw in [low, high), as torch's contract."""
    if high > low:
        wide = out if out.dtype == xp.float64 else out.astype(xp.float64)  # (exact compare)
        past = wide >= high
        if past.any():
            out[past] = xp.nextafter(out[past], xp.asarray(-xp.inf, dtype=out.dtype))
    return out


@op("rand", differentiable=False)
def _rand(xp, *, shape, dtype, generator):
    if xp.dtype(dtype).kind == "c":  # real and imaginary parts each uniform, as torch's
        part = xp.float32 if xp.dtype(dtype).itemsize == 8 else xp.float64
        parts = _below(xp, _unit_draws(xp, generator, tuple(shape) + (2,), part).astype(part),
                       0.0, 1.0)
        return (parts[..., 0] + 1j * parts[..., 1]).astype(dtype)
    return _below(xp, _unit_draws(xp, generator, shape, dtype).astype(dtype), 0.0, 1.0)


@op("uniform", differentiable=False)
def _uniform(xp, *, low, high, shape, dtype, generator):
    """low + (high - low) * U[0, 1), in [low, high) (see _below)."""
    u = _unit_draws(xp, generator, shape, dtype)
    return _below(xp, (low + (high - low) * u).astype(dtype), low, high)


@op("randn", differentiable=False)
def _randn(xp, *, shape, dtype, generator):
    if dtype.kind == "c":  # torch's complex normal: each part N(0, 1/2), |z|^2 ~ 1
        parts = numpy_generator(generator).standard_normal(tuple(shape) + (2,)) * math.sqrt(0.5)
        return (parts[..., 0] + 1j * parts[..., 1]).astype(dtype)
    return numpy_generator(generator).standard_normal(shape).astype(dtype)


@op("randint", differentiable=False)
def _randint(xp, *, low, high, shape, dtype, generator):
    out = numpy_generator(generator).integers(low, high, shape).astype(dtype)
    # (a half dtype holds integers exactly only to 2**digits: past that torch warns, and a
    # draw the cast rounds up to high stays below it)
    return _below(xp, out, low, high) if xp.dtype(dtype).kind in "fV" else out


@op("randperm", differentiable=False)
def _randperm(xp, *, n, dtype, generator):
    return xp.asarray(torch_randperm(n, generator), dtype=dtype)


@op("normal")
def _normal(xp, *tensors, mean, std, shape, dtype, generator):
    """mean + std * N(0, 1); `mean` / `std` are numbers, or None where they are the inputs
    (in that order)."""
    given = iter(tensors)
    m = next(given) if mean is None else mean
    s = next(given) if std is None else std
    if std is None:  # (a tensor's: checked in the kernel, so a plan checks each call's)
        check_std(s, "normal")
    return (m + s * xp.asarray(numpy_generator(generator).standard_normal(shape))).astype(dtype)


@op("bernoulli")
def _bernoulli(xp, x, *, p, generator):
    if p is None:  # (in the kernel: a compiled plan checks each call's probabilities)
        check_probability_values(x, "bernoulli")
    probs = x if p is None else xp.full(x.shape, p, x.dtype)
    draws = xp.asarray(numpy_generator(generator).random(probs.shape))  # the host's stream
    return (draws < probs).astype(probs.dtype)


@_normal.grad
@_bernoulli.grad
def zero_gradients(ctx, dy):
    """torch's rule for its samplers' parameters (normal's mean and std, bernoulli's and
    poisson's input): the result requires grad, and each gradient is zeros."""
    if getattr(ctx, "p", None) is not None:  # (torch's bernoulli(input, p) has none)
        raise RuntimeError("derivative for bernoulli(input, p) is not implemented (torch's "
                           "neither); detach the input, or use bernoulli(probabilities)")
    return tuple(zeros_like(dy) if need else None for need in ctx.needs_input_grad)


@op("multinomial", differentiable=False)
def _multinomial(xp, x, *, num_samples, replacement, generator):
    p = x.astype(xp.float64)
    _check_prob_values(xp, p, num_samples, replacement)
    gen = numpy_generator(generator)
    rows = p.reshape(-1, p.shape[-1])
    torch_stream = x.dtype.name in ("float32", "float64") and xp is HOST_XP
    if replacement and num_samples > 1 and torch_stream:  # torch's draws, row after row
        out = xp.asarray([torch_multinomial_with_replacement(r, num_samples, generator)
                          for r in x.reshape(-1, x.shape[-1])], dtype=xp.int64)
    elif torch_stream:  # without replacement, or one draw: torch's exponentials from its stream
        out = xp.asarray(torch_multinomial_by_exponentials(x, num_samples, generator),
                         dtype=xp.int64)
    elif replacement:
        cdf = xp.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = xp.asarray(gen.random((rows.shape[0], num_samples)))
        out = xp.minimum((u[:, :, None] > cdf[:, None, :]).sum(-1), rows.shape[1] - 1)
    else:  # Gumbel top-k gives sampling without replacement in one vectorised step
        g = xp.log(xp.maximum(rows, 1e-300)) - xp.log(-xp.log(xp.asarray(gen.random(rows.shape))))
        g[rows <= 0] = -xp.inf
        out = xp.argsort(-g, axis=1)[:, :num_samples]
    return out.reshape(p.shape[:-1] + (num_samples,)).astype(xp.int64)


def _sampled_dtype(op_name, dtype, kind):
    """rand's and randn's dtype: floating or complex (torch has no kernel for the others; a
    cast would give zeros or truncated samples)."""
    d = _float_dtype(dtype)
    if d.category < 2:
        raise NotImplementedError(f"{op_name}(): {kind} sampling needs a floating dtype or a "
                                  f"complex one, got {d.name}; pass dtype=flowgrad.float32 and "
                                  f"convert the samples")
    return d


def _finish_op(out, requires_grad, dev=CPU):
    if dev is not CPU:  # drawn on the host (one stream for every device), then moved
        out._data = to_device(out._data, dev)
    if requires_grad:
        out._set_requires_grad(True)
    return out


def randn(*size_args, size=None, generator=None, dtype=None, device=None,
          requires_grad=False, **options):
    """Standard normal samples.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.randn(2, 2)
    tensor([[ 0.1257, -0.1321],
            [ 0.6404,  0.1049]])
    """
    check_hints("randn", options, FACTORY_HINTS)
    return _sample("randn", _randn, "normal", size_args, size, generator, dtype, device,
                   requires_grad)


def _sample(name, kernel, kind, size_args, size, generator, dtype, device, requires_grad):
    """rand's and randn's body: `kernel` (a random op) drawn in a floating or complex dtype."""
    if not size_args and size is None:  # (torch's rand() has no default size; rand(()) is 0-d)
        raise TypeError(f"{name}() missing 1 required positional argument: 'size'; pass the "
                        f"sizes, e.g. {name}(2, 3), or () for a 0-d tensor")
    dev = resolve_device(device, name)
    shape = _size(_size_arg(size_args, size, name), name)
    if kind == "normal" and math.prod(shape) == 0:  # (torch's randn runs no kernel, so no
        d = _float_dtype(dtype).np  # dtype check, for an empty result; its rand checks)
    else:
        d = _sampled_dtype(name, dtype, kind).np
    if dev.type == "meta":
        return _undrawn(shape, d, requires_grad)
    gen = resolve(generator)
    out = _alloc(name, shape, d, lambda: kernel(shape=shape, dtype=d, generator=gen))
    return _finish_op(out, requires_grad, dev)


def _undrawn(shape, dtype, requires_grad):
    """A draw on the 'meta' device: a meta tensor, nothing drawn (the generator's state
    stays, as torch's)."""
    return _finish_op(Tensor._wrap(meta_array(shape, dtype)), requires_grad)


def randint(low=None, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False, **options):
    """Integers uniform in [low, high); int64 by default.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> x = flow.randint(0, 10, (2, 3))
    >>> x.dtype, bool(((x >= 0) & (x < 10)).all())
    (flowgrad.int64, True)
    """
    check_hints("randint", options, FACTORY_HINTS)
    dev = resolve_device(device, "randint")
    if size is None and low is not None:  # randint(high, size)
        low, high, size = 0, low, high
    if high is None and low is not None:  # randint(high, size=...)
        low, high = 0, low
    if size is None or high is None:
        raise TypeError(f"randint(): argument '{'high' if high is None else 'size'}' is "
                        f"missing; pass a tuple of ints, e.g. randint(0, 10, (2, 3))")
    if not isinstance(size, (tuple, list)):  # (torch's randint takes no bare int)
        raise TypeError(f"randint(): argument 'size' must be a tuple of ints, not "
                        f"{type(size).__name__}; pass e.g. (3,)")
    low = _as_int(0 if low is None else low, "randint", "low")
    high = _as_int(high, "randint", "high")
    if low >= high:
        raise RuntimeError(f"randint(): expects low < high, got low={low}, high={high}")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    _check_random_bounds("randint", low, high, d)
    shape, gen = _size((size,), "randint"), resolve(generator)
    if dev.type == "meta":
        return _undrawn(shape, d.np, requires_grad)
    out = _alloc("randint", shape, np.int64, lambda: _randint(
        low=low, high=high, shape=shape, dtype=d.np, generator=gen))
    return _finish_op(out, requires_grad, dev)


def _check_random_bounds(op_name, low, high, d):
    """torch's check that [low, high - 1] fits the dtype (NumPy's cast would wrap uint8's 300
    to 44 or turn every bool draw above 1 into True)."""
    if d.category == 3:
        raise RuntimeError(f"{op_name}(): random integers are not implemented for dtype "
                           f"{d.name}; draw an integer or floating dtype and convert")
    if d.category == 2:
        hi = builtins.float(_dt.finfo(d).max)
        lo = -hi
    elif d.category == 0:
        lo, hi = 0, 1
    else:
        lo, hi = builtins.int(np.iinfo(d.np).min), builtins.int(np.iinfo(d.np).max)
    for name, v in (("from", low), ("to - 1", high - 1)):
        if not lo <= v <= hi:
            raise RuntimeError(f"{op_name}(): {name} = {v} is out of bounds for {d.name} "
                               f"[{lo}, {hi}]; pass bounds the dtype holds")


def rand_like(input, dtype=None, generator=None, device=None, requires_grad=False, **options):
    """Uniform [0, 1) samples shaped like `input`, in its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.rand_like(flow.zeros(2, 3)).shape
    flowgrad.Size([2, 3])
    """
    return _sample_like("rand_like", rand, input, dtype, generator, device, requires_grad,
                        options)


def randn_like(input, dtype=None, generator=None, device=None, requires_grad=False, **options):
    """Standard normal samples shaped like `input`.

    >>> import flowgrad as flow
    >>> flow.randn_like(flow.zeros(2)).dtype
    flowgrad.float32
    """
    return _sample_like("randn_like", randn, input, dtype, generator, device, requires_grad,
                        options)


def _sample_like(name, factory, input, dtype, generator, device, requires_grad, options):
    """rand_like's and randn_like's body: `factory` shaped like `input`, in its dtype, on its
    device and in its memory layout unless given."""
    check_hints(name, options)
    expect_tensor(name, input)
    dev = _device_like(input, device, name)
    d = _dt.as_dtype(dtype) if dtype is not None else input.dtype
    return _preserving(factory(size=tuple(input.shape), dtype=d, generator=generator, device=dev,
                               requires_grad=requires_grad), input, options)


def randint_like(input, low=0, high=None, dtype=None, generator=None, device=None,
                 requires_grad=False, **options):
    """Integers uniform in [low, high) shaped like `input`; randint_like(x, high) starts at 0.

    >>> import flowgrad as flow
    >>> flow.randint_like(flow.zeros(3, dtype=flow.int64), 1).tolist()
    [0, 0, 0]
    """
    check_hints("randint_like", options)
    if high is None:
        low, high = 0, low
    return _preserving(randint(low, high, tuple(input.shape), dtype=dtype or input.dtype,
                               generator=generator,
                               device=_device_like(input, device, "randint_like"),
                               requires_grad=requires_grad), input, options)


def _preserving(sample, input, options):
    """A fresh `sample` laid out as torch's `*_like` lay it out: as `input` (preserve_format,
    the default; ops/layout.py), else in the format asked for (channels_last: NHWC). The numbers are
    the sample's, element for element; only their places in memory change."""
    if _keeps_layout(input, options):
        out = empty_like(input, dtype=sample.dtype, device=sample.device)
        with grad_mode.no_grad():
            out.copy_(sample)
        sample = out._set_requires_grad(sample.requires_grad)
    return _laid_out(sample, input, options)


def randperm(n, generator=None, dtype=None, device=None, requires_grad=False, **options):
    """A random permutation of 0..n-1 (int64).

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> sorted(flow.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    check_hints("randperm", options, FACTORY_HINTS)
    dev = resolve_device(device, "randperm")
    n = _as_int(n, "randperm", "n")
    if n < 0:
        raise RuntimeError(f"randperm(): Trying to create tensor with negative dimension {n}: "
                           f"[{n}]; n must be >= 0")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.int64
    if d.category in (0, 3):
        raise NotImplementedError(f"randperm(): not implemented for dtype {d.name}; pass an "
                                  f"integer or floating dtype")
    largest = {"float16": 2 ** 11 + 1, "float32": 2 ** 24 + 1, "float64": 2 ** 53 + 1}.get(
        d.name, np.iinfo(d.np).max + 1 if d.category == 1 else None)
    if largest is not None and n > largest:  # a cast would repeat values: no permutation
        raise RuntimeError(f"randperm(): n = {n} does not fit dtype {d.name}: its values "
                           f"0..n-1 must be exact, so n can be at most {largest}")
    if dev.type == "meta":
        return _undrawn((n,), d.np, requires_grad)
    gen = resolve(generator)
    return _finish_op(_alloc("randperm", (n,), np.int64, lambda: _randperm(
        n=n, dtype=d.np, generator=gen)), requires_grad, dev)


def normal(mean=0.0, std=1.0, size=None, generator=None, dtype=None, device=None,
           requires_grad=False, out=None, **options):
    """Normal samples with the given mean and std (tensors or numbers); torch's layout and
    pin_memory keywords are accepted (strided, the only layout). A tensor mean or std gives
    a result that requires grad as they do, with zero gradients (torch's rule).

    >>> import flowgrad as flow
    >>> flow.normal(2.0, 0.0, size=(2,))
    tensor([2., 2.])
    """
    check_hints("normal", options, FACTORY_HINTS)
    for arg, value in (("mean", mean), ("std", std)):
        if not isinstance(value, (Tensor, int, float, np.integer, np.floating)):
            expect_tensor("normal", value, arg, 1 if arg == "mean" else 2)
    if size is not None:  # (torch's parser reads a 0-d tensor as a number where size= is)
        mean, std = (float(t) if isinstance(t, Tensor) and t.dim() == 0 and
                     not t.requires_grad else t for t in (mean, std))
    tensors = tuple(t for t in (mean, std) if isinstance(t, Tensor))
    if size is None and not tensors:
        raise TypeError("normal(): with a Python number for both mean and std, torch needs the "
                        "size; pass size=(...) or a tensor mean or std")
    if size is not None and tensors:  # (torch has no overload taking both)
        raise TypeError("normal(): size= goes with a Python number for both mean and std; "
                        "with a tensor mean or std the result takes their broadcast shape")
    dev = resolve_device(device, "normal")
    m = mean._data if isinstance(mean, Tensor) else mean
    s = std._data if isinstance(std, Tensor) else std
    check_std(s, "normal")  # (first, as torch's; a tensor's again in the kernel, for a plan)
    shapes = [np.shape(m), np.shape(s)]
    if out is not None and isinstance(mean, Tensor) and not isinstance(std, Tensor):
        shapes[1] = tuple(out.shape)  # (torch's out= form broadcasts the mean to out)
    shape = tuple(size) if size is not None else _broadcast(*shapes)
    if out is not None:
        result = _normal_out(tensors, mean, std, shape, generator, dtype, out)
        return result.requires_grad_() if requires_grad else result
    like = tensors[0] if tensors else None
    d = _float_dtype(dtype if dtype is not None else like.dtype if like is not None else None)
    if not d.is_floating_point:  # torch has no normal kernel for integers (an empty result
        if math.prod(shape) == 0:  # runs none, but its in-place mul_(std) casts)
            if isinstance(std, Tensor) and std.is_floating_point():
                raise RuntimeError(f"normal(): result type {std.dtype.name} can't be cast to "
                                   f"the desired output type {d.name}; pass a floating mean")
            return _finish_op(Tensor._wrap(np.empty(shape, d.np)), requires_grad, dev)
        raise NotImplementedError(f"normal(): not implemented for dtype {d.name}; normal "
                                  "samples need a floating dtype (e.g. dtype=flowgrad.float32)")
    result = _normal(*tensors, mean=None if isinstance(mean, Tensor) else mean,
                     std=None if isinstance(std, Tensor) else std, shape=shape,
                     dtype=d.np, generator=resolve(generator))
    return _finish_op(result, requires_grad, dev)


def _broadcast(*shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"normal(): the shapes of mean and std (or out) {list(shapes)} do "
                           f"not broadcast; pass tensors of matching sizes") from None


def _normal_out(tensors, mean, std, shape, generator, dtype, out):
    """normal(..., out=): drawn in out's dtype and written into it (resized to `shape`), as
    torch's normal_out, which fills out in place (a complex out with a complex normal)."""
    expect_tensor("normal", out, "out")
    if dtype is not None and _dt.as_dtype(dtype) != out.dtype:
        raise RuntimeError(f"normal(): dtype {_dt.as_dtype(dtype).name} does not match the "
                           f"dtype of out ({out.dtype.name}); drop dtype= or pass a matching "
                           f"out")
    sampled = out.dtype.is_floating_point or out.dtype.is_complex
    if not sampled and math.prod(shape):
        raise NotImplementedError(f"normal(): not implemented for dtype {out.dtype.name}; "
                                  f"pass a floating out")
    detached = tuple(t.detach() for t in tensors)

    def draw(*_):
        if not sampled:
            return Tensor._wrap(np.empty(shape, out._data.dtype))
        if out.dtype.is_complex and not tensors:  # (torch's out.normal_(mean, std): the
            return Tensor._wrap(np.empty(shape, out._data.dtype)).normal_(  # mean in both
                mean, std, generator=generator)  # parts)
        if out.dtype.is_complex:
            z = _randn(shape=shape, dtype=out._data.dtype, generator=resolve(generator))
            m, s = (detached[0] if isinstance(mean, Tensor) else mean,
                    detached[-1] if isinstance(std, Tensor) else std)
            return (z * s + m).to(out.dtype)
        return _normal(*detached, mean=None if isinstance(mean, Tensor) else mean,
                       std=None if isinstance(std, Tensor) else std, shape=shape,
                       dtype=out._data.dtype, generator=resolve(generator))
    # (torch's factory form, with size=, resizes out silently; its tensor forms warn)
    return with_out(draw, out, tensors, "normal", warn_resize=bool(tensors))


def bernoulli(input, p=None, *, generator=None, out=None):
    """1 with probability input (elementwise), else 0, in input's dtype; with `p`, every
    element is 1 with probability p. `out=`: the draws in out's dtype, whatever it is (torch's
    out.bernoulli_(input)), out resized silently.

    >>> import flowgrad as flow
    >>> flow.bernoulli(flow.tensor([0.0, 1.0, 1.0]))
    tensor([0., 1., 1.])
    >>> flow.bernoulli(flow.zeros(2), p=1.0)
    tensor([1., 1.])
    """
    if out is not None:
        if p is not None:  # (torch's bernoulli(input, p) overload has no out=)
            raise TypeError("bernoulli(): out= goes with bernoulli(input) only, not with p; "
                            "use flowgrad.full_like(out, p).bernoulli_() or drop out=")
        if isinstance(out, Tensor) and out.is_complex() and input.numel():
            raise NotImplementedError(f"bernoulli(): no draws into a complex out (torch's "
                                      f"kernel has none), got {out.dtype}")
        return with_out(lambda x: bernoulli(x, p, generator=generator).to(out.dtype), out,
                        (input,), "bernoulli", warn_resize=False)
    if p is None:
        check_probability_dtype(input, "bernoulli")
        return _bernoulli(input, p=None, generator=resolve(generator))
    if input.is_complex():
        raise NotImplementedError(f"bernoulli(): no draws into a complex tensor (torch's "
                                  f"kernel has none), got {input.dtype}")
    check_probability(p, "bernoulli")
    return _bernoulli(input, p=p, generator=resolve(generator))


def check_probability_dtype(probs, name):
    """torch's bernoulli kernels read the probabilities as floats: an integer or bool tensor
    of them is refused (a non-empty one: an empty one runs no kernel)."""
    if probs._data.dtype.kind not in "fV" and probs.numel():
        raise NotImplementedError(f"{name}: the probabilities must be a floating point tensor, "
                                  f"got {probs.dtype.name}; convert them with .float()")


def check_probability(p, name):
    """A probability given as a number lies in [0, 1] (nan does not)."""
    if not 0 <= p <= 1:
        raise RuntimeError(f"{name} expects p to be in [0, 1], but got p={p}")


def _check_probs(input, num_samples):
    """multinomial's checks, as torch's: a float 1-D or 2-D tensor of finite, non-negative
    weights with a positive sum per row; returns them as float64."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input._data.dtype.kind not in "fV":  # (V: bfloat16)
        raise RuntimeError(f"multinomial(): only supports floating-point dtypes for input, "
                           f"got {input.dtype}; convert with .float()")
    if input._data.ndim not in (1, 2):
        raise RuntimeError(f"multinomial(): prob_dist must be 1 or 2 dim, got shape "
                           f"{tuple(input.shape)}")
    n = _as_int(num_samples, "multinomial", "num_samples")
    if n <= 0:
        raise RuntimeError(f"multinomial(): cannot sample n_sample <= 0 samples (num_samples="
                           f"{n})")
    return n


def _check_prob_values(xp, p, num_samples, replacement):
    """multinomial's checks of the values (in the kernel: a compiled plan checks each call's)
    and, after them as torch's, of the count drawn without replacement."""
    if p.size and not (p.min() >= 0 and xp.isfinite(p.max())):  # NaN fails both
        raise RuntimeError(f"multinomial(): probability tensor contains either `inf`, `nan` "
                           f"or element < 0 (input of shape {tuple(p.shape)}); pass finite, "
                           f"non-negative weights")
    if p.shape[-1] == 0 or (p.sum(-1) <= 0).any():
        raise RuntimeError(f"multinomial(): invalid multinomial distribution (sum of "
                           f"probabilities <= 0) in input of shape {tuple(p.shape)}; every "
                           f"row needs a positive weight")
    if not replacement and num_samples > p.shape[-1]:
        raise RuntimeError(f"multinomial(): cannot sample n_sample={num_samples} > "
                           f"prob_dist.size(-1)={p.shape[-1]} samples without replacement")


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Draw category indices from each row of (unnormalised) probabilities.

    >>> import flowgrad as flow
    >>> g = flow.manual_seed(0)
    >>> flow.multinomial(flow.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    n = _check_probs(input, num_samples)
    return _multinomial(input, num_samples=n, replacement=bool(replacement),
                        generator=resolve(generator))
