"""Tensor methods that fill a tensor in place with random draws, as torch's: `exponential_`,
`cauchy_`, `log_normal_`, `geometric_`, `random_`, `bernoulli_` (and `Tensor.bernoulli`).

Each draw is a random op whose kernel takes its numbers from the Generator attribute (as
`uniform_` and `normal_` do), so `manual_seed` reproduces them and an nn.Graph plan draws anew
on every run. The fill itself is the one in-place write path (`_write_sample`): the tensor's
version moves, and a gradient through the tensor afterwards is zero, as torch's.

>>> import flowgrad as flow
>>> _ = flow.manual_seed(0)
>>> x = flow.empty(4).exponential_(2.0)
>>> bool((x > 0).all())
True
>>> flow.zeros(3, dtype=flow.int64).random_(5, 6).tolist()
[5, 5, 5]
"""
from __future__ import annotations

import math

import numpy as np

from ..argument_errors import float_arg
from ..autograd.inplace import check_inplace
from ..dtypes import finfo
from ..errors import check_probabilities
from ..random import numpy_generator, resolve
from ..tensor import Tensor
from .complex import complex as _complex
from .creation import _bernoulli
from .creation import bernoulli as _draw_bernoulli
from .elementwise_more import _write_sample
from .random_factories import _below, check_probability, check_probability_dtype
from .registry import op

_FLOAT, _INTEGER, _ANY = "fV", "iu", "fViub"


@op("exponential", differentiable=False)
def _exponential(xp, *, rate, shape, dtype, generator):
    return (numpy_generator(generator).standard_exponential(shape) / rate).astype(dtype)


@op("cauchy", differentiable=False)
def _cauchy(xp, *, median, sigma, shape, dtype, generator):
    return (median + sigma * numpy_generator(generator).standard_cauchy(shape)).astype(dtype)


@op("log_normal", differentiable=False)
def _log_normal(xp, *, mean, std, shape, dtype, generator):
    return numpy_generator(generator).lognormal(mean, std, shape).astype(dtype)


@op("geometric", differentiable=False)
def _geometric(xp, *, p, shape, dtype, generator):
    """Trials up to the first success (1, 2, ...), as torch's geometric_."""
    return numpy_generator(generator).geometric(p, shape).astype(dtype)


@op("random_integers", differentiable=False)
def _random_integers(xp, *, low, high, shape, dtype, generator):
    """Integers uniform in [low, high), in `dtype` (a float dtype holds them exactly)."""
    out = numpy_generator(generator).integers(low, high, shape, dtype="int64",
                                              endpoint=False).astype(dtype)
    return _below(xp, out, low, high) if xp.dtype(dtype).kind in "fV" else out  # (randint's)


def _check_float(self, name, distribution):
    if self._data.dtype.kind not in _FLOAT:
        raise RuntimeError(f"{name}: {distribution} distribution is a continuous probability "
                           f"distribution; dtype must be a floating point but the tensor is "
                           f"{self.dtype.name}; convert it with .float() first")


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with samples of the exponential distribution of rate `lambd`."""
    lambd = float_arg(lambd, "exponential_", "lambd", 1)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    if not self.numel():  # (torch's kernel, which checks the dtype, runs on no elements)
        return _write_sample(self, "exponential_", _exponential, generator, kinds=_ANY + "c",
                             rate=float(lambd))
    _check_float(self, "exponential_", "Exponential")
    return _write_sample(self, "exponential_", _exponential, generator, kinds=_FLOAT,
                         rate=float(lambd))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with samples of the Cauchy distribution (median, scale `sigma`)."""
    median = float_arg(median, "cauchy_", "median", 1)
    sigma = float_arg(sigma, "cauchy_", "sigma", 2)
    _check_float(self, "cauchy_", "Cauchy")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _write_sample(self, "cauchy_", _cauchy, generator, kinds=_FLOAT,
                         median=float(median), sigma=float(sigma))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with exp(N(mean, std**2)) samples."""
    mean, std = float_arg(mean, "log_normal_", "mean", 1), float_arg(std, "log_normal_", "std", 2)
    if not std > 0:  # (first, as torch's; its kernel checks the dtype, on elements only)
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    kinds = _FLOAT if self.numel() else _ANY + "c"
    return _write_sample(self, "log_normal_", _log_normal, generator, kinds=kinds,
                         refusal=NotImplementedError,
                         mean=float(mean), std=float(std))


def geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    p = float_arg(p, "geometric_", "p", 1)
    if not 0 < p < 1:  # (first, as torch's; its kernel checks the dtype, on elements only)
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    kinds = _FLOAT + _INTEGER if self.numel() else _ANY + "c"  # (torch's kernel checks the
    return _write_sample(self, "geometric_", _geometric, generator, kinds=kinds,  # dtype)
                         refusal=NotImplementedError, p=float(p))


def _random_bounds(self, args):
    """[low, high) of random_(), random_(to), random_(from, to) for self's dtype, as torch's:
    without `to`, up to the largest integer the dtype holds exactly (2**24 for float32)."""
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    dtype = self._data.dtype
    if len(args) == 2 and args[1] is not None:
        low, high = args
    elif len(args) == 1 and args[0] is not None:
        low, high = 0, args[0]
    else:
        low = args[0] if args else 0
        if dtype.kind == "b":
            high = 2
        elif dtype.kind in "iu":
            high = int(np.iinfo(dtype).max) + 1
        else:
            high = 2 ** _mantissa_digits(self) + 1
    low, high = int(low), int(high)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    least, most = ((0, 1) if dtype.kind == "b" else
                   (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)) if dtype.kind in "iu"
                   else (-finfo(self.dtype).max, finfo(self.dtype).max))
    for bound, value in (("from", low), ("to - 1", high - 1)):
        if not least <= value <= most:  # (the cast would wrap the draws round)
            raise RuntimeError(f"random_: {bound} is out of bounds for {self.dtype.name} "
                               f"(got {value}; it holds {least} to {most})")
    return low, high


def _mantissa_digits(self):
    """Significand bits of self's floating dtype (float16 11, bfloat16 8, float32 24, ...):
    eps is 2 ** (1 - digits)."""
    return round(1 - math.log2(finfo(self.dtype).eps))


def random_(self, *args, generator=None, **kwargs):
    """Fill with integers uniform in [from, to): `random_(to)`, `random_(from, to)`, or
    `random_()` (0 up to the largest integer the dtype holds exactly; {0, 1} for bool)."""
    if kwargs:
        unknown = set(kwargs) - {"from", "to"}
        if unknown:
            raise TypeError(f"random_() got an unexpected keyword argument "
                            f"{sorted(unknown)[0]!r}; it takes from, to and generator")
        args = (kwargs.get("from", args[0] if args else 0), kwargs.get("to"))
    if self.is_complex():  # (torch: its bounds check refuses, or with no bounds its kernel)
        bounded = any(a is not None for a in args)
        if not bounded and not self.numel():
            return self
        raise (RuntimeError if bounded else NotImplementedError)(
            f"random_: no random integers for dtype {self.dtype.name}; draw into an integer "
            f"or floating tensor")
    low, high = _random_bounds(self, args)
    high = min(high, 2 ** 63 - 1)  # NumPy's int64 draws stop there
    return _write_sample(self, "random_", _random_integers, generator, kinds=_ANY,
                         low=low, high=high)


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 1 where a draw falls below p (a number, or a tensor broadcast to self),
    else 0."""
    if self.is_complex():
        raise NotImplementedError(f"bernoulli_: no draws into a complex tensor (torch's "
                                  f"kernel has none), got {self.dtype}")
    if isinstance(p, Tensor):
        probs = p
        if not self.numel():  # (torch returns before any check)
            return self
        p.expand(self.shape)  # (torch's broadcast check comes before its dtype dispatch)
        check_probability_dtype(p, "bernoulli_")
        check_probabilities(p, "bernoulli_")
    else:
        check_probability(p, "bernoulli_")
        probs = None
    if probs is not None:  # one draw per element of self: the probabilities broadcast first
        probs = probs.double().expand(self.shape)  # (p's gradient: zeros, as torch's)
        return self.copy_(_bernoulli(probs, p=None, generator=resolve(generator)))
    return _write_sample(self, "bernoulli_", _bernoulli_number, generator, kinds=_ANY,
                         p=float(p))


@op("bernoulli_number", differentiable=False)
def _bernoulli_number(xp, *, p, shape, dtype, generator):
    return (numpy_generator(generator).random(shape) < p).astype(dtype)


def bernoulli(self, p=None, *, generator=None):
    """A new tensor of 0/1 draws: with probability self (elementwise), or `p` everywhere."""
    if p is None or not isinstance(p, Tensor):  # (torch's bernoulli(p: float): a result
        return _draw_bernoulli(self, p, generator=generator)  # with self's zero gradient)
    return bernoulli_(self.new_empty(self.shape), p, generator=generator)


# ---- uniform_ and normal_ of complex tensors ----------------------------------------------
def _complex_fill(real_fill, name, std_arg=None):
    """`real_fill` (Tensor.uniform_ or .normal_, ops/elementwise_more.py) extended to complex
    tensors as torch's: the real and the imaginary parts are drawn apart, each from the real
    distribution (normal_: each with std/sqrt(2), so the complex draw has variance std**2)."""
    def fill(self, *args, generator=None, **kwargs):
        if self._data.dtype.kind != "c":
            return real_fill(self, *args, generator=generator, **kwargs)
        if not self.numel() and std_arg is None:  # (torch's uniform_ fills the real view:
            check_inplace(name, self)  # an empty one checks nothing but autograd's leaf rule)
            return self
        if std_arg is not None:  # (mean, std): positional or keyword
            args = list(args) + [None] * (2 - len(args))
            mean = kwargs.pop("mean", 0.0 if args[0] is None else args[0])
            std = kwargs.pop("std", 1.0 if args[1] is None else args[1])
            args = (mean, std / math.sqrt(2) if std > 0 else std)
        part = self.real.dtype
        real = real_fill(self.new_empty(self.shape, dtype=part), *args, generator=generator,
                         **kwargs)
        imag = real_fill(self.new_empty(self.shape, dtype=part), *args, generator=generator,
                         **kwargs)
        return self.copy_(_complex(real, imag))
    fill.__name__ = fill.__qualname__ = name
    fill.__doc__ = real_fill.__doc__
    return fill


uniform_ = _complex_fill(Tensor.uniform_, "uniform_")
normal_ = _complex_fill(Tensor.normal_, "normal_", std_arg=True)

for _method in (exponential_, cauchy_, log_normal_, geometric_, random_, bernoulli_,
                bernoulli, uniform_, normal_):
    setattr(Tensor, _method.__name__, _method)
del _method
