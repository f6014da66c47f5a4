"""torch.signal.windows: windows written with flowgrad ops in torch's own steps (a linspace
over the window's points, then elementwise ops), so each holds torch's values.

`sym=True` gives the symmetric window (filter design), `sym=False` the periodic one (spectral
analysis). float32 and float64 only, as torch.

>>> import flowgrad as flow
>>> flow.signal.windows.bartlett(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
"""
from __future__ import annotations

import math
from collections.abc import Iterable

from .. import dtypes as _dt
from ..ops import creation as _creation
from ..ops import elementwise as _math
from ..ops.special_fns import i0 as _i0

__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def _checks(name, M, dtype, layout):
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (_dt.float32, _dt.float64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype}")


def _prelude(name, M, dtype, layout, device, requires_grad, one_point=True):
    """(dtype, the whole window when M is 0 (or 1 with `one_point`), else None)."""
    dtype = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    _checks(name, M, dtype, layout)
    if M == 0:
        return dtype, _creation.empty((0,), dtype=dtype, device=device,
                                      requires_grad=requires_grad)
    if M == 1 and one_point:
        return dtype, _creation.ones((1,), dtype=dtype, device=device,
                                     requires_grad=requires_grad)
    return dtype, None


def _points(start, end, M, dtype, device, requires_grad):
    return _creation.linspace(start, end, M, dtype=dtype, device=device,
                              requires_grad=requires_grad)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):
    """exp(-|n - center| / tau) (the Poisson window).

    >>> import flowgrad as flow
    >>> flow.signal.windows.exponential(3, tau=1.0)
    tensor([0.3679, 1.0000, 0.3679])
    """
    dtype, done = _prelude("exponential", M, dtype, layout, device, requires_grad, False)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if done is not None:
        return done
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / tau
    k = _points(-center * constant, (-center + (M - 1)) * constant, M, dtype, device,
                requires_grad)
    return _math.exp(-_math.abs(k))


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 0.5) / M) (the sine window)."""
    dtype, done = _prelude("cosine", M, dtype, layout, device, requires_grad, False)
    if done is not None:
        return done
    constant = math.pi / (M + 1 if not sym and M > 1 else M)
    k = _points(0.5 * constant, (0.5 + (M - 1)) * constant, M, dtype, device, requires_grad)
    return _math.sin(k)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None,
             requires_grad=False):
    """exp(-(n - (M - 1) / 2)^2 / (2 std^2))."""
    dtype, done = _prelude("gaussian", M, dtype, layout, device, requires_grad, False)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if done is not None:
        return done
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    constant = 1 / (std * math.sqrt(2))
    k = _points(start * constant, (start + (M - 1)) * constant, M, dtype, device,
                requires_grad)
    return _math.exp(-(k ** 2))


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None,
           requires_grad=False):
    """I0(beta sqrt(1 - ((n - N/2) / (N/2))^2)) / I0(beta)."""
    dtype, done = _prelude("kaiser", M, dtype, layout, device, requires_grad)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if done is not None:
        return done
    beta = _creation.tensor(beta, dtype=dtype, device=device)
    start = -beta
    constant = 2.0 * beta / (M if not sym else M - 1)
    end = _math.minimum(beta, start + (M - 1) * constant)
    k = _points(start, end, M, dtype, device, requires_grad)
    return _i0(_math.sqrt(beta * beta - k ** 2)) / _i0(beta)


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """1 - |2n / (M - 1) - 1| (the triangular window with zero ends)."""
    dtype, done = _prelude("bartlett", M, dtype, layout, device, requires_grad)
    if done is not None:
        return done
    constant = 2 / (M if not sym else M - 1)
    k = _points(-1, -1 + (M - 1) * constant, M, dtype, device, requires_grad)
    return 1 - _math.abs(k)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1)).

    >>> import flowgrad as flow
    >>> flow.signal.windows.general_cosine(4, a=[0.5, 0.5], sym=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    dtype, done = _prelude("general_cosine", M, dtype, layout, device, requires_grad)
    if done is not None:
        return done
    if not isinstance(a, Iterable):
        raise TypeError("Coefficients must be a list/tuple")
    if not a:
        raise ValueError("Coefficients cannot be empty")
    constant = 2 * math.pi / (M if not sym else M - 1)
    k = _points(0, (M - 1) * constant, M, dtype, device, requires_grad)
    a_i = _creation.tensor([(-1) ** i * w for i, w in enumerate(a)], dtype=dtype,
                           device=device, requires_grad=requires_grad)
    i = _creation.arange(a_i.shape[0], dtype=dtype, device=device,
                         requires_grad=requires_grad)
    return (a_i.unsqueeze(-1) * _math.cos(i.unsqueeze(-1) * k)).sum(0)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha = 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha = 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout, device=device,
                           requires_grad=requires_grad)


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1))."""
    dtype = _dt.get_default_dtype() if dtype is None else _dt.as_dtype(dtype)
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          device=device, requires_grad=requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The minimum 4-term Blackman-Harris window of Nuttall."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, device=device,
                          requires_grad=requires_grad)
