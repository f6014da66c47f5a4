"""The forward-mode and vmap columns of the op tables: every row of a table (the same
`(name, fn, *specs)` rows `helpers.check` runs) is also run through `flowgrad.func.jvp`
against `torch.func.jvp`, and through `flowgrad.func.vmap` against `torch.func.vmap`
(floating inputs batched along a new dim 0, integer inputs shared). A row torch itself
cannot transform (no forward rule, data-dependent shapes, random ops) is skipped, saying why.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from helpers import _np, _outputs, _to, make_arrays

import flowgrad as flow

BATCH = 3


def table_rows(*modules, attr="CASES"):
    """(id, fn, specs) for every row of the named test modules' tables, in both row styles
    (tuples `(name, fn, *specs)` and `pytest.param(fn, specs, ...)`)."""
    rows = []
    for name in modules:
        mod = importlib.import_module(name)
        for case in getattr(mod, attr):
            if hasattr(case, "values"):  # pytest.param(fn, specs, ...)
                fn, specs = case.values[0], case.values[1]
                rows.append((f"{name[9:]}-{case.id}", fn, tuple(specs)))
            else:
                rows.append((f"{name[9:]}-{case[0]}", case[1], tuple(case[2:])))
    return rows


def _floating(a):
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _split(arrays):
    idx = [i for i, a in enumerate(arrays) if _floating(a)]
    return idx


def _call(module, fn, arrays, idx, diff):
    args = [_to(module, a, False) for a in arrays]
    for i, d in zip(idx, diff):
        args[i] = d
    return fn(module, *args)


def _float_outputs(y):
    return [o for o in _outputs(y) if o.is_floating_point() or o.is_complex()]


def _torch_or_skip(run, what):
    try:
        return run()
    except Exception as error:  # torch cannot transform this row: nothing to compare
        pytest.skip(f"torch.func.{what} refuses this row: {type(error).__name__}: "
                    f"{str(error)[:80]}")


def _close(ours, theirs, what, atol, rtol):
    assert len(ours) == len(theirs), f"{what}: {len(ours)} outputs vs torch's {len(theirs)}"
    for a, b in zip(ours, theirs):
        assert tuple(a.shape) == tuple(b.shape), f"{what}: shape {tuple(a.shape)} vs {b.shape}"
        a, b = _np(a), _np(b)  # float64, or complex128 for complex outputs
        np.testing.assert_allclose(a.astype(np.result_type(a, np.float64)),
                                   b.astype(np.result_type(b, np.float64)),
                                   atol=atol, rtol=rtol, err_msg=f"{what} differs from torch")


def _reverse_jvp(f, primals, tangents):
    """(f(*primals), J tangents) with J from torch's reverse mode (a vjp per output element)."""
    outs = f(*primals)
    jac = torch.autograd.functional.jacobian(f, primals)
    return outs, tuple(sum(torch.tensordot(block, t, dims=t.ndim)
                           for block, t in zip(row, tangents)) for row in jac)


def check_jvp(fn, specs, atol=1e-4, rtol=1e-3, seed=0, reverse=False):
    """func.jvp of the row against torch.func.jvp, random tangents, float64; `reverse`: against
    J t from torch's reverse-mode Jacobian instead, for the rows where torch's forward-mode
    rule is wrong."""
    arrays = make_arrays(specs, np.float64, seed)
    idx = _split(arrays)
    if not idx:
        pytest.skip("no floating input")
    if not all(np.isfinite(arrays[i]).all() for i in idx):
        pytest.skip("inf/nan inputs: the tangents are nan-laden either way")
    rng = np.random.default_rng(seed + 3)
    tans = [rng.standard_normal(arrays[i].shape) for i in idx]

    def in_torch():
        jvp = _reverse_jvp if reverse else torch.func.jvp
        return jvp(lambda *d: tuple(_float_outputs(_call(torch, fn, arrays, idx, d))),
                   tuple(torch.tensor(arrays[i]) for i in idx),
                   tuple(torch.tensor(t) for t in tans))
    theirs = _torch_or_skip(in_torch, "jvp")
    ours = flow.func.jvp(lambda *d: tuple(_float_outputs(_call(flow, fn, arrays, idx, d))),
                         tuple(flow.tensor(arrays[i]) for i in idx),
                         tuple(flow.tensor(t) for t in tans))
    _close(ours[0], theirs[0], "jvp primal", atol, rtol)
    _close(ours[1], theirs[1], "jvp tangent", atol, rtol)


def check_vmap(fn, specs, atol=1e-5, rtol=1e-4, seed=0):
    """func.vmap of the row over BATCH examples (floating inputs batched) against torch."""
    per = [make_arrays(specs, np.float64, seed + b) for b in range(BATCH)]
    arrays = per[0]
    idx = _split(arrays)
    if not idx:
        pytest.skip("no floating input")
    stacked = [np.stack([p[i] for p in per]) for i in idx]

    def run(module, vmap):
        def f(*d):
            return tuple(_outputs(_call(module, fn, arrays, idx, d)))
        return vmap(f)(*[_to(module, s, False) for s in stacked])
    theirs = _torch_or_skip(lambda: run(torch, torch.func.vmap), "vmap")
    ours = run(flow, flow.func.vmap)
    _close(list(ours), list(theirs), "vmap", atol, rtol)


def func_table_tests(rows, reverse_oracle=()):
    """The jvp and vmap columns over `rows` ((id, fn, specs)), as two pytest tests; the jvp
    of the rows whose ids are in `reverse_oracle` is checked against torch's reverse mode."""
    by_id = pytest.mark.parametrize(
        "row", [r if hasattr(r, "values") else pytest.param(r, id=r[0]) for r in rows])

    @by_id
    def test_jvp_against_torch(row):
        check_jvp(row[1], row[2], reverse=row[0] in reverse_oracle)

    @by_id
    def test_vmap_against_torch(row):
        check_vmap(row[1], row[2])

    return test_jvp_against_torch, test_vmap_against_torch
