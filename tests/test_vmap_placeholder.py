"""Under vmap a batched tensor's `_data` is a placeholder of the per-example shape; a function
that computes on it with NumPy instead of calling ops must raise, never return a value
computed from the placeholder (a silent wrong result). Where torch's vmap computes, flowgrad
gives the same values or raises; where torch raises, flowgrad raises too."""
import numpy as np
import pytest
import torch

import flowgrad as flow

X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5

CASES = [
    ("unique", lambda m: lambda t: m.unique(t)),
    ("histc", lambda m: lambda t: m.histc(t, bins=4)),
    ("searchsorted", lambda m: lambda t: m.searchsorted(m.tensor([0.0, 1.0, 2.0]), t)),
    ("allclose", lambda m: lambda t: t * float(m.allclose(t, t + 1))),
    ("equal", lambda m: lambda t: t * float(m.equal(t, t + 1))),
    ("isclose", lambda m: lambda t: m.isclose(t, t * 2)),
    ("sort", lambda m: lambda t: m.sort(t, descending=True).values),
    ("cumsum", lambda m: lambda t: m.cumsum(t, 0)),
    ("item", lambda m: lambda t: t * t.sum().item()),
]


def _run(m, make):
    try:
        return m.func.vmap(make(m))(m.tensor(X)).detach().numpy()
    except RuntimeError:
        return None


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's "performance drop" fallback note
@pytest.mark.parametrize("name,make", CASES, ids=[c[0] for c in CASES])
def test_no_value_from_a_placeholder(name, make):
    ours, theirs = _run(flow, make), _run(torch, make)
    if theirs is None:
        assert ours is None, f"{name}: torch's vmap raises; flowgrad returned {ours}"
    elif ours is not None:  # flowgrad may refuse what torch batches, never differ from it
        np.testing.assert_allclose(ours, theirs)
