"""torch-style tensor repr: `tensor([0., 1.], requires_grad=True)`."""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .device import to_host

_DEFAULT_SUFFIXLESS = ("int64", "bool")


def _float_format(finite):
    """torch's choice from the nonzero finite values: integral ones print as '3.', 4 decimals
    otherwise; scientific when they span more than 1000x, exceed 1e8, or (non-integral) go
    below 1e-4."""
    def special(v):
        return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")

    nonzero = np.abs(finite[finite != 0])
    integral = np.all(nonzero == np.ceil(nonzero))
    if nonzero.size:
        lo, hi = nonzero.min(), nonzero.max()
        scientific = hi / lo > 1000.0 or hi > 1e8 or (not integral and lo < 1e-4)
    else:
        scientific = False
    if scientific:
        return lambda v: f"{v:.4e}" if np.isfinite(v) else special(v)
    if integral:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else special(v)
    return lambda v: f"{v:.4f}" if np.isfinite(v) else special(v)


def _format_array(a):
    options = dict(separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
    if a.dtype.kind in "fV":
        a = a.astype(np.float64)
        fmt = _float_format(a[np.isfinite(a)])
        # every element right-aligned to the widest one, as torch prints
        width = max((len(fmt(v)) for v in a.ravel()), default=0)
        return np.array2string(a, formatter={"float": lambda v: fmt(v).rjust(width)},
                               **options)
    if a.dtype.kind == "c":  # torch formats the real and the imaginary parts separately
        re, im = a.real.astype(np.float64), a.imag.astype(np.float64)
        fre, fim = _float_format(re[np.isfinite(re)]), _float_format(im[np.isfinite(im)])
        width = max((len(fre(v)) for v in re.ravel()), default=0)

        def element(v):
            imag = fim(v.imag)
            return fre(v.real).rjust(width) + ("" if imag[0] in "+-" else "+") + imag + "j"
        return np.array2string(a, formatter={"complexfloat": element}, **options)
    if a.dtype.kind == "b":
        width = 5 if (~a).any() else 4
        return np.array2string(a, formatter={"bool": lambda v: str(bool(v)).rjust(width)},
                               **options)
    return np.array2string(a, **options)


def tensor_repr(t) -> str:
    """torch's repr of a tensor: formatted values plus dtype/grad_fn/requires_grad suffixes."""
    a = to_host(t._data)  # formatted on the host, whatever device holds it
    body = _format_array(a)
    extras = []
    name = a.dtype.name if a.dtype.kind != "V" else "bfloat16"
    default = _dt.get_default_dtype().name
    if a.size == 0:  # no values to tell an int64 or bool from: only the default is implied
        if a.ndim != 1:
            extras.append(f"size={tuple(a.shape)}")
        if name != default:
            extras.append(f"dtype=flowgrad.{name}")
    elif name not in _DEFAULT_SUFFIXLESS and name != default and \
            name != _dt.to_complex(_dt.get_default_dtype()).name:
        extras.append(f"dtype=flowgrad.{name}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
