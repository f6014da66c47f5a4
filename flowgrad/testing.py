"""flowgrad.testing: `assert_close`, torch.testing's comparison of tensors, numbers and
containers of them, with torch's default tolerances per dtype and its messages.

>>> import flowgrad as flow
>>> flow.testing.assert_close(flow.tensor([1.0, 2.0]), flow.tensor([1.0, 2.0 + 1e-7]))
"""
from __future__ import annotations

import collections.abc

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor

__all__ = ["assert_close"]

# (rtol, atol) by dtype, torch.testing's defaults; other dtypes compare exactly
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless `actual` and `expected` are close: tensors (same shape,
    and dtype unless check_dtype=False) elementwise |a - e| <= atol + rtol * |e|, with
    torch's defaults for the dtype when rtol and atol are None (both or neither given);
    numbers likewise; sequences and mappings item by item. NaNs are equal with equal_nan.

    >>> import flowgrad as flow
    >>> flow.testing.assert_close(flow.tensor([1.0]), flow.tensor([1.1]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 1 (100.0%)
    Greatest absolute difference: 0.10000002384185791 at index (0,) (up to 1e-05 allowed)
    Greatest relative difference: 0.09090911061310529 at index (0,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but "
                         f"got no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, (), rtol, atol, equal_nan, check_dtype, msg)


def _compare(actual, expected, path, rtol, atol, equal_nan, check_dtype, msg):
    if isinstance(expected, Tensor) or isinstance(actual, Tensor):
        _compare_tensors(actual, expected, path, rtol, atol, equal_nan, check_dtype, msg)
    elif isinstance(expected, collections.abc.Mapping) and \
            isinstance(actual, collections.abc.Mapping):
        if set(actual) != set(expected):
            _fail(msg, f"The keys of the mappings do not match:\n{sorted(map(str, actual))} "
                       f"!= {sorted(map(str, expected))}", path)
        for key in expected:
            _compare(actual[key], expected[key], path + (key,), rtol, atol, equal_nan,
                     check_dtype, msg)
    elif isinstance(expected, collections.abc.Sequence) and \
            not isinstance(expected, str) and isinstance(actual, collections.abc.Sequence) \
            and not isinstance(actual, str):
        if len(actual) != len(expected):
            _fail(msg, f"The length of the sequences mismatch: {len(actual)} != "
                       f"{len(expected)}", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + (i,), rtol, atol, equal_nan, check_dtype, msg)
    elif isinstance(expected, (bool, int, float, complex)) and \
            isinstance(actual, (bool, int, float, complex)):
        if check_dtype and type(actual) is not type(expected):
            _fail(msg, f"The (d)types do not match: {type(actual)} != {type(expected)}.",
                  path)
        a, e = np.asarray(actual), np.asarray(expected)
        r, t = (rtol, atol) if rtol is not None else \
            _TOLERANCES.get("complex128" if isinstance(expected, complex) else
                            "float64" if isinstance(expected, float) else "", (0.0, 0.0))
        _compare_arrays(a, e, r, t, equal_nan, path, msg, "Scalars")
    elif actual != expected:
        raise TypeError(f"assert_close: no comparison for {type(actual).__name__} and "
                        f"{type(expected).__name__}; pass tensors, numbers, or sequences and "
                        f"mappings of them")


def _compare_tensors(actual, expected, path, rtol, atol, equal_nan, check_dtype, msg):
    for value in (actual, expected):
        if not isinstance(value, Tensor):
            raise TypeError(f"assert_close: comparing a tensor with a {type(value).__name__} "
                            f"is not supported; pass two tensors")
    if actual.shape != expected.shape:
        _fail(msg, f"The values for attribute 'shape' do not match: {actual.shape} != "
                   f"{expected.shape}.", path)
    if check_dtype and actual.dtype != expected.dtype:
        _fail(msg, f"The values for attribute 'dtype' do not match: {actual.dtype} != "
                   f"{expected.dtype}.", path)
    if rtol is None:
        rtol, atol = (max(a, b) for a, b in zip(*(
            _TOLERANCES.get(str(t.dtype).split(".")[-1], (0.0, 0.0)) for t in (actual, expected))))
    a, e = _host(actual), _host(expected)
    if a.dtype != e.dtype:  # (check_dtype=False: compared in their common dtype)
        common = np.promote_types(a.dtype, e.dtype)
        a, e = a.astype(common), e.astype(common)
    _compare_arrays(a, e, rtol, atol, equal_nan, path, msg, "Tensor-likes")


def _host(t):
    data = t.detach()
    if str(data.dtype).endswith("bfloat16"):
        data = data.to(_dt.float32)
    return np.asarray(data.numpy())


def _compare_arrays(a, e, rtol, atol, equal_nan, path, msg, what):
    if a.dtype.kind == "b" or e.dtype.kind == "b":
        close = a == e
        diff = np.zeros(a.shape)
    else:
        wide = np.complex128 if "c" in (a.dtype.kind, e.dtype.kind) else np.float64
        aw, ew = a.astype(wide), e.astype(wide)
        diff = np.abs(aw - ew)
        close = (aw == ew) | (diff <= atol + rtol * np.abs(ew))
        if equal_nan:
            close |= np.isnan(aw) & np.isnan(ew)
    if close.all():
        return
    bad = int((~close).sum())
    total = close.size
    lines = [f"{what} are not {'equal' if rtol == atol == 0 else 'close'}!", "",
             f"Mismatched elements: {bad} / {total} ({100 * bad / total:.1f}%)"]
    if diff.size and a.dtype.kind != "b":
        abs_diff = np.where(np.isnan(diff), np.inf, diff)
        i = np.unravel_index(int(np.argmax(abs_diff)), diff.shape)
        rel = diff / np.abs(ew)
        j = np.unravel_index(int(np.argmax(np.where(np.isnan(rel), np.inf, rel))), diff.shape)
        lines.append(f"Greatest absolute difference: {float(diff[i])} at index "
                     f"{tuple(int(k) for k in i)} (up to {atol} allowed)")
        lines.append(f"Greatest relative difference: {float(rel[j])} at index "
                     f"{tuple(int(k) for k in j)} (up to {rtol} allowed)")
    _fail(msg, "\n".join(lines), path)


def _fail(msg, text, path):
    if path:
        text += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    raise AssertionError(msg if isinstance(msg, str) else msg(text) if callable(msg) else text)

