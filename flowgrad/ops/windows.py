"""Window functions for spectral analysis (`flow.hann_window`, ...), torch's definitions.

A periodic window of length N is the symmetric window of length N + 1 without its last
point (the form `stft` wants); `periodic=False` gives the symmetric one. Computed in float64
and rounded to the dtype once. Windows are constants: no op, no gradient rule.

>>> import flowgrad as flow
>>> flow.hann_window(4)
tensor([0.0000, 0.5000, 1.0000, 0.5000])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..device import resolve_device
from .creation import _finish

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


def _window(name, window_length, periodic, dtype, device, requires_grad, symmetric):
    """Validate like torch, then `symmetric(n_points)` trimmed for `periodic`."""
    dev = resolve_device(device, name)
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d.name}")
    if not isinstance(window_length, (int, np.integer)) or window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got "
                           f"window_length={window_length}")
    if window_length <= 1:
        values = np.ones(int(window_length))
    else:
        n = int(window_length) + (1 if periodic else 0)
        values = symmetric(n)[:int(window_length)]
    return _finish(values.astype(d.np), requires_grad, dev)  # computed on the host


def _cosine_sum(*coefficients):
    def symmetric(n):
        phase = 2 * np.pi * np.arange(n) / (n - 1)
        return sum(c * (-1) ** k * np.cos(k * phase) for k, c in enumerate(coefficients))
    return symmetric


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.hann_window(3, periodic=False)
    tensor([0., 1., 0.])
    """
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.5, 0.5))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None,
                   layout=None, device=None, requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(alpha, beta))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1)).

    >>> import flowgrad as flow
    >>> flow.blackman_window(3, periodic=False)[1]
    tensor(1.)
    """
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.42, 0.5, 0.08))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None,
                    requires_grad=False):
    """The triangle 1 - |2n / (N - 1) - 1|.

    >>> import flowgrad as flow
    >>> flow.bartlett_window(5, periodic=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: 1 - np.abs(2 * np.arange(n) / (n - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None,
                  device=None, requires_grad=False):
    """I0(beta sqrt(1 - (2n / (N - 1) - 1)^2)) / I0(beta), I0 the modified Bessel function.

    >>> import flowgrad as flow
    >>> flow.kaiser_window(3, periodic=False, beta=0.0)
    tensor([1., 1., 1.])
    """
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n: np.kaiser(n, beta))
