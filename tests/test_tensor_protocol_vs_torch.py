"""Python's protocols on tensors against torch: number conversions, rounding, formatting,
indexing a list with a tensor, iteration, and the transpose attributes (.T, .mT, .H, .mH) of
every rank: the same values, types and raise/no-raise."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

TENSORS = {
    "float 0-d": lambda T: T.tensor(2.7),
    "negative 0-d": lambda T: T.tensor(-2.5),
    "int 0-d": lambda T: T.tensor(3),
    "bool 0-d": lambda T: T.tensor(True),
    "half 0-d": lambda T: T.tensor(2.5).half(),
    "complex 0-d": lambda T: T.tensor(1 + 2j),
    "float 1 element": lambda T: T.tensor([2.7]),
    "int 1 element": lambda T: T.tensor([4]),
    "float 2 elements": lambda T: T.tensor([1.0, 2.0]),
    "empty": lambda T: T.tensor([]),
    "matrix": lambda T: T.arange(6.0).reshape(2, 3),
    "complex matrix": lambda T: T.tensor([[1 + 2j, 3j], [2.0, -1j]]),
    "batch": lambda T: T.arange(24.0).reshape(2, 3, 4),
}

PROTOCOLS = {
    "float": float, "int": int, "bool": bool, "complex": complex, "item": lambda t: t.item(),
    "tolist": lambda t: t.tolist(), "math.floor": math.floor, "math.ceil": math.ceil,
    "math.trunc": math.trunc, "round": round, "round 1": lambda t: round(t, 1), "abs": abs,
    "divmod": lambda t: divmod(t, 2), "list index": lambda t: [10, 20, 30, 40, 50][t],
    "range": lambda t: list(range(t)), "format .2f": lambda t: f"{t:.2f}",
    "percent .3f": lambda t: "%.3f" % t, "percent d": lambda t: "%d" % t, "len": len,
    "list": lambda t: len(list(t)), "hex": hex, "== None": lambda t: t == None,  # noqa: E711
    "in": lambda t: 2.7 in t, "sum": lambda t: sum([t, t]), "math.sqrt": math.sqrt,
    "T": lambda t: t.T, "mT": lambda t: t.mT, "H": lambda t: t.H, "mH": lambda t: t.mH,
}


def _plain(value):
    """A comparable form of a result: tensors as (dtype name, shape, values)."""
    if hasattr(value, "detach"):
        v = value.detach()
        dtype = str(v.dtype).split(".")[-1]
        values = v.float() if dtype == "bfloat16" else v
        return dtype, tuple(v.shape), np.asarray(values.tolist())
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_plain(v) for v in value]
    return type(value).__name__, value


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
@pytest.mark.parametrize("name", list(TENSORS))
def test_protocol_as_torch(name, protocol):
    expected, torch_error = outcome(lambda: PROTOCOLS[protocol](TENSORS[name](torch)))
    got, error = outcome(lambda: PROTOCOLS[protocol](TENSORS[name](flow)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        e, g = _plain(expected), _plain(got)
        if isinstance(e[-1], np.ndarray):
            assert e[:2] == g[:2]
            np.testing.assert_allclose(g[-1], e[-1], rtol=1e-6)
        elif isinstance(e[1], float):
            assert e[0] == g[0] and math.isclose(e[1], g[1], rel_tol=1e-6)
        else:
            assert e == g
