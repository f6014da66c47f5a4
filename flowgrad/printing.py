"""torch-style tensor repr: `tensor([0., 1.], requires_grad=True)`, and `set_printoptions`.

The layout is torch's: one width for every element, chosen from the values shown (the edge
items of a summarized tensor); integral floats print as `3.`, others with `precision` decimals,
scientific when the magnitudes span more than 1000x, pass 1e8, or (non-integral) fall below
1e-4; rows wrap at `linewidth`; more than `threshold` elements print `edgeitems` at each end.

>>> import flowgrad as flow
>>> flow.set_printoptions(precision=2)
>>> flow.tensor([1.2345, 2.0])
tensor([1.23, 2.00])
>>> flow.set_printoptions(profile="default")
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as _dt
from .autograd.forward_ad import _LEVELS as _FORWARD_LEVELS
from .autograd.torch_nodes import torch_name
from .device import to_host

_DEFAULT_SUFFIXLESS = ("int64", "bool")
_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
_OPTS = dict(_PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """torch.set_printoptions: `profile` ("default", "short", "full") first, then each option
    given; `sci_mode` True or False forces scientific notation on or off, None lets the
    values decide.

    >>> import flowgrad as flow
    >>> flow.set_printoptions(sci_mode=False); flow.tensor([1e-5, 1.0])
    tensor([0.0000, 1.0000])
    >>> flow.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; use 'default', "
                             f"'short' or 'full'")
        _OPTS.update(_PROFILES[profile])
    for name, value in (("precision", precision), ("threshold", threshold),
                        ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTS[name] = value
    _OPTS["sci_mode"] = sci_mode


class _Formatter:
    """One width and one notation for all the values of a tensor, from the values shown."""

    def __init__(self, values, floating):
        self.floating, self.int_mode, self.sci_mode, self.width = floating, True, False, 1
        p = _OPTS["precision"]
        if not floating:
            self.width = max((len(str(v)) for v in values.ravel().tolist()), default=1)
            return
        shown = values[np.isfinite(values) & (values != 0)]
        if not shown.size:  # nothing to size by: integral notation, whatever sci_mode says
            return
        mags = np.abs(shown)
        lo, hi = mags.min(), mags.max()
        self.int_mode = bool(np.all(shown == np.ceil(shown)))
        forced = _OPTS["sci_mode"]
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) if forced is None \
            else forced
        if self.sci_mode:
            self.width = max(len(f"{v:.{p}e}") for v in shown.tolist())
        elif self.int_mode:
            self.width = max(len(f"{v:.0f}") + 1 for v in shown.tolist())
        else:
            self.width = max(len(f"{v:.{p}f}") for v in shown.tolist())

    def format(self, value):
        p = _OPTS["precision"]
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.width}.{p}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{p}f}"
        return text.rjust(self.width)


def _summarized(a, edge):
    """The values a summarized print shows: `edge` items at each end of every dim."""
    for axis in range(a.ndim):
        if a.shape[axis] > 2 * edge:
            a = np.concatenate([a.take(range(edge), axis),
                                a.take(range(a.shape[axis] - edge, a.shape[axis]), axis)], axis)
    return a


def _element(v, fmt):
    """One value's text: fmt is (formatter, None), or a complex value's (real, imaginary)."""
    if fmt[1] is None:
        return fmt[0].format(v)
    imag = (fmt[1].format(v.imag) + "j").lstrip()
    return fmt[0].format(v.real) + ("" if imag[0] in "+-" else "+") + imag


def _vector(a, indent, summarize, fmt):
    edge = _OPTS["edgeitems"]
    # an element and its ", " (complex: the two parts, a sign and the j)
    width = fmt[0].width + 2 if fmt[1] is None else fmt[0].width + fmt[1].width + 3
    per_line = max(1, int((_OPTS["linewidth"] - indent) // width))
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([_element(v, fmt) for v in _values(a[:edge])] + [" ..."]
                + [_element(v, fmt) for v in _values(a[-edge:])])
    else:
        data = [_element(v, fmt) for v in _values(a)]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _values(a):
    """Python numbers of a slice (bfloat16 through float64: its scalars do not format)."""
    return (a.astype(np.float64) if a.dtype.kind == "V" else a).tolist()


def _nested(a, indent, summarize, fmt):
    if a.ndim == 0:
        return _element(_values(a), fmt)
    if a.ndim == 1:
        return _vector(a, indent, summarize, fmt)
    edge = _OPTS["edgeitems"]
    if summarize and a.shape[0] > 2 * edge:
        parts = ([_nested(a[i], indent + 1, summarize, fmt) for i in range(edge)] + ["..."]
                 + [_nested(a[i], indent + 1, summarize, fmt)
                    for i in range(a.shape[0] - edge, a.shape[0])])
    else:
        parts = [_nested(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _format_array(a, indent):
    summarize = a.size > _OPTS["threshold"]
    shown = _summarized(a, _OPTS["edgeitems"]) if summarize else a
    # (only the values shown are converted: a summarized tensor may be large)
    if a.dtype.kind == "c":  # torch formats the real and the imaginary parts separately
        shown = shown.astype(np.complex128)
        fmt = (_Formatter(shown.real, True), _Formatter(shown.imag, True))
        return _nested(a, indent, summarize, fmt)
    floating = a.dtype.kind in "fV"
    shown = shown.astype(np.float64) if floating else shown
    return _nested(a, indent, summarize, (_Formatter(shown, floating), None))


def prefix_of(t) -> str:
    """`tensor(`, or a user's Tensor subclass's name as torch prints it (`MyTensor(`); the
    classes of flowgrad's own (Parameter, Buffer, ...) print as plain tensors."""
    cls = type(t)
    return "tensor(" if cls.__module__.startswith("flowgrad.") else f"{cls.__name__}("


def is_parameter(t) -> bool:
    """isinstance(t, nn.Parameter): a Parameter, or a user's subclass tensor made one."""
    from .nn.parameter import Parameter  # (nn imports this module's users)
    return isinstance(t, Parameter)


def as_parameter(t, text) -> str:
    """torch's `Parameter(MyTensor(...))` for a user's subclass tensor made a Parameter."""
    return f"Parameter({text})" if prefix_of(t) != "tensor(" and is_parameter(t) else text


def tensor_repr(t) -> str:
    """torch's repr of a tensor: formatted values plus dtype/grad_fn/requires_grad suffixes."""
    a = to_host(t._data)  # formatted on the host, whatever device holds it
    prefix = prefix_of(t)
    body = "[]" if a.size == 0 else _format_array(a, len(prefix))
    extras = []
    name = a.dtype.name if a.dtype.kind != "V" else "bfloat16"
    default = _dt.get_default_dtype().name
    if a.size == 0:  # no values to tell an int64 or bool from: only the default is implied
        if a.ndim != 1:
            extras.append(f"size={tuple(a.shape)}")
        if name != default:
            extras.append(f"dtype=flowgrad.{name}")
    else:
        if not _OPTS["edgeitems"]:  # (torch's: no values shown, so the size is)
            extras.append(f"size={tuple(a.shape)}")
        if not implied_dtype(t.dtype):
            extras.append(f"dtype=flowgrad.{name}")
    return with_suffixes(t, prefix, body, extras)


def implied_dtype(dtype) -> bool:
    """Whether the values' text implies `dtype` (torch prints no dtype= for it): the default
    dtype, its complex one, int64 and bool."""
    default = _dt.get_default_dtype()
    return dtype.name in _DEFAULT_SUFFIXLESS or dtype is default or \
        dtype is _dt.to_complex(default)


def tensor_str(t, indent) -> str:
    """The values of `t` as torch's _tensor_str: `[]` when empty."""
    a = to_host(t._data)
    return "[]" if a.size == 0 else _format_array(a, indent)


def meta_repr(t) -> str:
    """torch's print of a meta tensor: `tensor(..., device='meta', size=(2, 3))`, with the
    dtype where it is not the default one, then requires_grad or grad_fn."""
    extras = ["device='meta'", f"size={tuple(t._data.shape)}"]
    d = _dt.from_numpy_dtype(t._data.dtype)
    if d is not _dt.get_default_dtype():
        extras.append(f"dtype={d}")
    return with_suffixes(t, prefix_of(t), "...", extras)


def with_suffixes(t, prefix, body, extras, force_newline=False):
    """`prefix` + `body` + the suffixes (`extras`, then grad_fn or requires_grad, then a
    dual tensor's tangent), each on a line of its own where it would pass linewidth, as
    torch's."""
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{torch_name(t._grad_fn)}>")  # (torch's name: MulBackward0)
    elif t.requires_grad:
        extras.append("requires_grad=True")
    tangent = _FORWARD_LEVELS[-1].tangent(t) if _FORWARD_LEVELS else None
    if tangent is not None:  # a dual tensor's, at the innermost forward-AD level
        extras.append(f"tangent={tangent}")
    text = prefix + body
    last = len(text) - text.rfind("\n") + 1  # (torch's count of the last line)
    for extra in extras:  # a suffix that would pass linewidth goes on a line of its own
        if force_newline or last + len(extra) + 2 > _OPTS["linewidth"]:
            text += ",\n" + " " * len(prefix) + extra
            last = len(prefix) + len(extra)
            force_newline = False
        else:
            text += ", " + extra
            last += len(extra) + 2
    return as_parameter(t, text + ")")
