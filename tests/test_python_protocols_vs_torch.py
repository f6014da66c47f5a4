"""Python's protocols on tensors and sizes against torch's: comparisons with objects that are
not numbers, conversions to Python scalars, and torch.Size arithmetic. Each row is one
expression on `m` (torch or flowgrad); both give the same value, or raise the same type."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest
import torch
from vs_torch import outcome

import flowgrad as flow

ROWS = [
    # `x == None` is False, `x != None` True (Python's fallback), so `x in [None, "auto"]` runs
    ("eq None", lambda m: m.tensor([1.0, 2.0]) == None),  # noqa: E711 - the point
    ("ne None", lambda m: m.tensor([1.0, 2.0]) != None),  # noqa: E711
    ("eq str", lambda m: m.tensor([1.0]) == "a"),
    ("in list", lambda m: m.tensor([1.0, 2.0]) in [None, "auto"]),
    ("list index", lambda m: [m.tensor(1.0), None].index(None)),
    ("lt None", lambda m: m.tensor([1.0]) < None),
    ("eq number", lambda m: (m.tensor([1.0, 2.0]) == 1).tolist()),
    ("torch.eq None", lambda m: m.eq(m.tensor([1.0]), None)),
    # conversions: float()/int() of several values is torch's ValueError, item() a RuntimeError
    ("float of two", lambda m: float(m.tensor([1.0, 2.0]))),
    ("int of two", lambda m: int(m.tensor([1, 2]))),
    ("complex of two", lambda m: complex(m.tensor([1.0, 2.0]))),
    ("item of two", lambda m: m.tensor([1.0, 2.0]).item()),
    ("bool of two", lambda m: bool(m.tensor([1.0, 2.0]))),
    ("float of one", lambda m: float(m.tensor([[2.5]]))),
    ("int truncates", lambda m: (int(m.tensor(2.9)), int(m.tensor(-2.9)))),
    ("round", lambda m: (round(m.tensor(2.6)), round(m.tensor(2.567), 2).item())),
    ("floor ceil", lambda m: (math.floor(m.tensor(2.5)), math.ceil(m.tensor(2.5)))),
    ("index", lambda m: ([10, 20, 30][m.tensor(2)], operator.index(m.tensor(1)))),
    ("index of float", lambda m: operator.index(m.tensor(1.0))),
    ("len of 0-d", lambda m: len(m.tensor(1.0))),
    ("format", lambda m: f"{m.tensor(3.14159):.2f}"),
    # a slice of a Size, and a Size plus or times a tuple, are Sizes (x.shape[1:].numel())
    ("size slice numel", lambda m: m.zeros(2, 3, 4).shape[1:].numel()),
    ("size slice", lambda m: repr(m.Size([2, 3, 4])[1:])),
    ("size plus tuple", lambda m: repr(m.Size([2, 3]) + (4,))),
    ("tuple plus size", lambda m: repr((1,) + m.Size([2, 3]))),
    ("size times", lambda m: repr(m.Size([2]) * 2)),
    ("size plus list", lambda m: m.Size([2]) + [3]),
    ("size item", lambda m: (m.Size([2, 3])[-1], m.Size([2, 3]) == (2, 3))),
    # new_* with size= as a keyword (new_zeros(size=(2,)) gave a 0-d tensor)
    ("new_zeros size=", lambda m: [tuple(f(size=(2, 3)).shape) for f in (
        m.ones(1).new_zeros, m.ones(1).new_ones, m.ones(1).new_empty)]),
    ("new_full size=", lambda m: m.ones(1).new_full(size=(2,), fill_value=3.0).tolist()),
    ("zeros_like unknown keyword", lambda m: m.zeros_like(m.ones(2), shape=(3,))),
    ("empty unknown keyword", lambda m: m.empty(2, fill=0)),
    ("new_ones unknown keyword", lambda m: m.ones(1).new_ones(2, shape=(3,))),
    ("like hints", lambda m: [tuple(m.ones_like(m.ones(2), memory_format=m.preserve_format,
                                                  layout=m.strided).shape),
                              tuple(m.empty(2, pin_memory=False).shape)]),
    # NumPy's spellings axis= / keepdims=, which torch's argument parser takes (TypeError here)
    ("axis keepdims", lambda m: (lambda x: [x.sum(axis=0).tolist(),
                                            x.mean(axis=1, keepdims=True).tolist(),
                                            m.max(x, axis=0).values.tolist(),
                                            x.argmax(axis=0).tolist(), x.std(axis=0).tolist(),
                                            m.sum(x, axis=1, keepdims=True).tolist()])(
        m.tensor([[1.0, 2.0, 3.0], [4.0, 0.5, 6.0]]))),
    ("axis and dim both", lambda m: m.ones(2, 2).sum(axis=0, dim=0)),
    # ... autocast's composites too (cat, stack, prod, quantile: they were left unwrapped) and
    # trapezoid; torch.norm is Python and refuses them (flowgrad took them)
    ("axis keepdims composites", lambda m: (lambda x: [
        m.cat([x, x], axis=1).tolist(), m.stack([x, x], axis=2).tolist(),
        x.prod(axis=1, keepdims=True).tolist(), m.prod(x, axis=0).tolist(),
        x.quantile(0.5, axis=1, keepdims=True).tolist(), m.nanquantile(x, 0.25, axis=0).tolist(),
        m.concat([x, x], axis=0).shape[0], m.trapezoid(x, axis=1).tolist(),
        m.cumulative_trapezoid(x, axis=1).tolist()])(
        m.tensor([[1.0, 2.0, 3.0], [4.0, 0.5, 6.0]]))),
    ("axis others", lambda m: (lambda x: [
        [t.tolist() for t in m.gradient(x, axis=1)], m.trapz(x, axis=1).tolist(),
        [t.tolist() for t in m.unsafe_chunk(x, 3, axis=1)],
        [t.tolist() for t in x.unsafe_split(1, axis=0)], m.slice_copy(x, axis=1).tolist(),
        m.squeeze_copy(x[:1], axis=0).tolist(), m.unsqueeze_copy(x, axis=1).shape,
        [t.tolist() for t in m.unbind_copy(x, axis=1)]])(
        m.tensor([[1.0, 2.0, 3.0], [4.0, 0.5, 6.0]]))),
    ("norm axis", lambda m: m.norm(m.ones(2, 2), axis=0)),
    ("norm method keepdims", lambda m: m.ones(2, 2).norm(dim=0, keepdims=True)),
    # `_base`: what a view is a view of (its root), None for other tensors (was missing)
    ("_base", lambda m: [(lambda x: (x.view(2, 2)._base is x, x[1:].view(3)[0]._base is x,
                                     x._base, (x * 2)._base, x.clone()._base))(m.ones(4)),
                         (lambda y: (y.split(2)[0]._base is y, y.unbind(0)[1]._base is y))(
                             m.ones(4, requires_grad=True) * 1)]),
    # NumPy functions on tensors: a ufunc's result is a tensor (__array_wrap__), 0-d too;
    # a tensor that requires grad is refused while grad mode is on (its result would not be
    # differentiable). flowgrad keeps a bool result bool, where torch makes it uint8.
    ("np ufuncs", lambda m: [_kind(f(m.tensor([1.0, 4.0]))) for f in (
        np.sqrt, np.abs, lambda t: np.add(t, t), lambda t: np.add(t, np.ones(2)),
        lambda t: np.maximum(t, 2.0), np.round, np.argmax, lambda t: np.modf(t)[1])]),
    ("np ufunc of ints", lambda m: _kind(np.negative(m.tensor([1, 2])))),
    ("np ufunc 0-d", lambda m: _kind(np.sqrt(m.tensor(4.0)))),
    ("np ufunc of bools", lambda m: np.isnan(m.tensor([1.0, math.nan])).tolist()),
    ("np ufunc requires grad", lambda m: np.sqrt(m.ones(2, requires_grad=True))),
    ("np asarray requires grad", lambda m: np.asarray(m.ones(2, requires_grad=True))),
    ("np asarray requires grad no_grad", lambda m: _no_grad(m, lambda: np.asarray(
        m.ones(2, requires_grad=True)).tolist())),
    ("np asarray dtype", lambda m: np.asarray(m.ones(2), dtype=np.float64).dtype.name),
]


def _kind(t):
    """A result's type (module-free), dtype name and values."""
    return type(t).__name__, str(t.dtype).split(".")[-1], t.tolist()


def _no_grad(m, call):
    with m.no_grad():
        return call()


@pytest.mark.parametrize("row", [r[1] for r in ROWS], ids=[r[0] for r in ROWS])
def test_python_protocol_as_torch(row):
    want, torch_error = outcome(lambda: row(torch))
    got, error = outcome(lambda: row(flow))
    assert type(error) is type(torch_error), (torch_error, error)
    if isinstance(want, str):
        want, got = want.replace("torch.", ""), got.replace("flowgrad.", "")
    assert got == want
