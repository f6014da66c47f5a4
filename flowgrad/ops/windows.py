"""Window functions for spectral analysis (`flow.hann_window`, ...), torch's definitions.

A periodic window of length N is the symmetric window of length N + 1 without its last
point (the form `stft` wants); `periodic=False` gives the symmetric one. float32 and float64
windows are computed in float64 and rounded once; float16 and bfloat16 ones take torch's steps,
each rounded to the dtype, so they hold torch's values. Windows are constants: no op, no
gradient rule.

>>> import flowgrad as flow
>>> flow.hann_window(4)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""
from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as _dt
from ..device import resolve_device
from .creation import FACTORY_HINTS, _finish, check_hints

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


def _window(name, window_length, periodic, dtype, device, requires_grad, symmetric):
    """Validate like torch, then `symmetric(n_points, work, r)` trimmed for `periodic`."""
    dev = resolve_device(device, name)
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    window_length = _length(name, window_length)
    # torch makes 0 or 1 points in any floating or complex dtype, longer windows only floating
    if d.category < 2 or d.category == 3 and window_length > 1:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d.name}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    if window_length <= 1:
        values = np.ones(int(window_length))
    else:
        n = int(window_length) + (1 if periodic else 0)
        if d.itemsize < 4:  # torch's steps, each rounded to float16 / bfloat16 as torch's are
            work = np.float32
            values = symmetric(n, work, lambda x: np.asarray(x, work).astype(d.np).astype(work))
        else:
            values = symmetric(n, np.float64, lambda x: x)
        values = values[:int(window_length)]
    return _finish(values.astype(d.np), requires_grad, dev)  # computed on the host


def _length(name, window_length):
    """window_length as an int: an integer, a NumPy integer or a one-element integer tensor
    (torch takes anything with __index__); a bool or a float raises TypeError, as torch."""
    if isinstance(window_length, (bool, np.bool_)):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not bool")
    try:
        return operator.index(window_length)
    except TypeError:
        raise TypeError(f"{name}(): argument 'window_length' must be int, not "
                        f"{type(window_length).__name__} ({window_length!r})") from None


# Each window below is torch's sequence of steps on arange(n) in `work` precision, `r` rounding
# every step's result and scalar (to float16 or bfloat16; nothing in float64).
def _cosine(alpha, beta):
    """alpha - beta cos(2 pi i / (n - 1)): hann and hamming."""
    def symmetric(n, work, r):
        phase = r(np.arange(n, dtype=work) * r(work(2 * np.pi / (n - 1))))
        return r(r(r(np.cos(phase)) * r(work(-beta))) + r(work(alpha)))
    return symmetric


def _blackman(n, work, r):
    """0.08 cos(4 pi i / (n - 1)) - 0.5 cos(2 pi i / (n - 1)) + 0.42, the constant added last as
    torch: the ends are exactly 0, where 0.42 - 0.5 + 0.08 is -1.4e-17 (a negative value)."""
    phase = r(np.arange(n, dtype=work) * r(work(np.pi / (n - 1))))
    high = r(r(np.cos(r(phase * 4))) * r(work(0.08)))
    low = r(r(np.cos(r(phase * 2))) * work(0.5))
    return r(r(high - low) + r(work(0.42)))


def _bartlett(n, work, r):
    """2i / (n - 1) rising, then 2 - 2i / (n - 1) from the middle on."""
    values = r(np.arange(n, dtype=work) * r(work(2 / (n - 1))))
    half = (n - 1) // 2 + 1
    values[half:] = r(r(-values[half:]) + work(2))
    return values


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False, pin_memory=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.hann_window(3, periodic=False)
    tensor([0., 1., 0.])
    """
    check_hints("hann_window", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False, pin_memory=False):
    """alpha - beta cos(2 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    check_hints("hamming_window", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine(alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.blackman_window(3, periodic=False)[1]
    tensor(1.)
    """
    check_hints("blackman_window", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _blackman)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False, pin_memory=False):
    """The triangle 1 - |2n / (N - 1) - 1|.

    >>> import flowgrad as flow
    >>> flow.bartlett_window(5, periodic=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    check_hints("bartlett_window", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   _bartlett)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False, pin_memory=False):
    """I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta), I0 the modified Bessel function.

    >>> import flowgrad as flow
    >>> flow.kaiser_window(3, periodic=False, beta=0.0)
    tensor([1., 1., 1.])
    """
    check_hints("kaiser_window", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, work, r: np.kaiser(n, beta))
