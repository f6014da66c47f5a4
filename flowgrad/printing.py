"""torch-style tensor repr: `tensor([0., 1.], requires_grad=True)`."""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt

_DEFAULT_SUFFIXLESS = ("int64", "bool")


def _format_array(a):
    if a.dtype.kind in "fV":
        a = a.astype(np.float64)
        finite = a[np.isfinite(a)]
        if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
            fmt = {"float": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
        elif finite.size and (np.abs(finite).max() >= 1e8 or
                              np.abs(finite[finite != 0]).min(initial=1) < 1e-4):
            fmt = {"float": lambda v: f"{v:.4e}"}
        else:
            fmt = {"float": lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)}
        return np.array2string(a, separator=", ", formatter=fmt, prefix="tensor(",
                               threshold=1000, edgeitems=3)
    if a.dtype.kind == "b":
        return np.array2string(a, separator=", ", prefix="tensor(",
                               formatter={"bool": lambda v: "True" if v else "False"})
    return np.array2string(a, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)


def tensor_repr(t) -> str:
    a = t._data
    body = _format_array(a)
    extras = []
    name = a.dtype.name if a.dtype.kind != "V" else "bfloat16"
    default = _dt.get_default_dtype().name
    if name not in _DEFAULT_SUFFIXLESS and name != default:
        extras.append(f"dtype=flowgrad.{name}")
    if a.size == 0 and a.ndim != 1:
        extras.append(f"size={tuple(a.shape)}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
