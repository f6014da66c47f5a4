"""The shared op-test helpers: run one lambda on flowgrad and on torch from the same NumPy
inputs and compare the forward and every input gradient; check first and second derivatives
by float64 finite differences.

A table entry is one line:  check(lambda m, x, y: m.mul(x, y), (3, 4), (4,))
`m` is the module (flowgrad or torch); inputs are shapes (random floats), NumPy arrays
(used as given; integer arrays never require grad), or Python values passed through.
"""
from __future__ import annotations

import numpy as np
import torch

import flowgrad as flow

_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
                 np.dtype(np.float16): torch.float16, np.dtype(np.int64): torch.int64,
                 np.dtype(np.int32): torch.int32, np.dtype(np.bool_): torch.bool,
                 np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8,
                 np.dtype(np.int16): torch.int16}


class Positive(tuple):
    """A shape whose random values are positive (for log, sqrt, ...): Positive((3, 4))."""


class Unit(tuple):
    """A shape whose random values lie in (-0.9, 0.9) (for asin, atanh, ...)."""


def make_arrays(specs, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if isinstance(s, Positive):
            out.append(rng.uniform(0.5, 2.0, tuple(s)).astype(dtype))
        elif isinstance(s, Unit):
            out.append(rng.uniform(-0.9, 0.9, tuple(s)).astype(dtype))
        elif isinstance(s, tuple):
            out.append(rng.standard_normal(s).astype(dtype))
        elif isinstance(s, np.ndarray) and s.dtype.kind == "f":
            out.append(s.astype(dtype))
        else:
            out.append(s)
    return out


def _to(module, a, requires_grad):
    if not isinstance(a, np.ndarray):
        return a
    if module is torch:
        t = torch.tensor(a, dtype=_TORCH_DTYPES[a.dtype])
    else:
        t = flow.tensor(a)
    if requires_grad and a.dtype.kind == "f":
        t.requires_grad_(True)
    return t


def _outputs(y):
    if isinstance(y, (tuple, list)):
        return [o for o in y if o is not None]
    return [y]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return t.detach().numpy()


def check(fn, *specs, torch_fn=None, atol=1e-5, rtol=1e-4, grad=True, dtype=np.float32,
          seed=0, grad_atol=None, grad_rtol=None):
    """Compare `fn(flowgrad, *inputs)` with `fn(torch, *inputs)`: values, then gradients of
    sum(output * weights) with respect to every floating input."""
    arrays = make_arrays(specs, dtype, seed)
    ours = [_to(flow, a, grad) for a in arrays]
    theirs = [_to(torch, a, grad) for a in arrays]
    y_ours = _outputs(fn(flow, *ours))
    y_theirs = _outputs((torch_fn or fn)(torch, *theirs))
    assert len(y_ours) == len(y_theirs), f"{len(y_ours)} outputs vs torch's {len(y_theirs)}"
    for a, b in zip(y_ours, y_theirs):
        assert tuple(a.shape) == tuple(b.shape), f"shape {tuple(a.shape)} vs torch {b.shape}"
        np.testing.assert_allclose(_np(a).astype(np.float64), _np(b).astype(np.float64),
                                   atol=atol, rtol=rtol, err_msg="forward differs from torch")
    if not grad:
        return
    diff = [(a, b) for a, b in zip(y_ours, y_theirs) if b.requires_grad]
    if not diff:
        return
    rng = np.random.default_rng(seed + 1)
    loss_ours, loss_theirs = 0, 0
    for a, b in diff:
        w = rng.standard_normal(tuple(b.shape)).astype(_np(b).dtype)
        loss_ours = loss_ours + (a * flow.tensor(w)).sum()
        loss_theirs = loss_theirs + (b * torch.tensor(w)).sum()
    loss_ours.backward()
    loss_theirs.backward()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert (a.grad is None) == (b.grad is None), f"input {i}: grad presence differs"
            if b.grad is not None:
                np.testing.assert_allclose(
                    _np(a.grad).astype(np.float64), _np(b.grad).astype(np.float64),
                    atol=grad_atol or atol * 10, rtol=grad_rtol or rtol * 10,
                    err_msg=f"gradient of input {i} differs from torch")


def _scalarize(fn, inputs, weights):
    ys = _outputs(fn(flow, *inputs))
    total = 0
    for y, w in zip(ys, weights):
        if y.requires_grad:
            total = total + (y * w).sum()
    return total


def gradcheck(fn, *specs, eps=1e-6, atol=1e-5, rtol=1e-3, second_order=True, seed=0):
    """float64 finite differences against flowgrad's first (and second) derivatives."""
    arrays = make_arrays(specs, np.float64, seed)
    idx = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    rng = np.random.default_rng(seed + 7)
    probe = [_to(flow, a, True) for a in arrays]
    weights = [flow.tensor(rng.standard_normal(tuple(y.shape)))
               for y in _outputs(fn(flow, *probe))]

    def first(arrs, create_graph=False):
        xs = [_to(flow, a, True) for a in arrs]
        s = _scalarize(fn, xs, weights)
        gs = flow.autograd.grad(s, [xs[i] for i in idx], create_graph=create_graph,
                                allow_unused=True)
        return xs, s, gs

    def numeric(scalar_of):
        out = []
        for i in idx:
            g = np.zeros_like(arrays[i])
            flat = g.reshape(-1)
            for k in range(arrays[i].size):
                plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
                minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
                plus[i].reshape(-1)[k] += eps
                minus[i].reshape(-1)[k] -= eps
                flat[k] = (scalar_of(plus) - scalar_of(minus)) / (2 * eps)
            out.append(g)
        return out

    _, _, analytic = first(arrays)
    num = numeric(lambda arrs: _scalarize(fn, [_to(flow, a, True) for a in arrs],
                                          weights).item())
    for i, a, n in zip(idx, analytic, num):
        got = np.zeros_like(n) if a is None else a.numpy()
        np.testing.assert_allclose(got, n, atol=atol, rtol=rtol,
                                   err_msg=f"first derivative of input {i} vs finite diff")
    if not second_order:
        return
    us = [rng.standard_normal(arrays[i].shape) for i in idx]

    def second_scalar(arrs, create_graph):
        xs, _, gs = first(arrs, create_graph=True)
        total = 0
        for g, u in zip(gs, us):
            if g is not None and g.requires_grad:
                total = total + (g * flow.tensor(u)).sum()
        return xs, total

    xs, s2 = second_scalar(arrays, True)
    if not isinstance(s2, flow.Tensor):
        return  # the first derivative is constant: nothing to check at second order
    analytic2 = flow.autograd.grad(s2, [xs[i] for i in idx], allow_unused=True)

    def s2_value(arrs):
        _, v = second_scalar(arrs, True)
        return v.item() if isinstance(v, flow.Tensor) else 0.0

    num2 = numeric(s2_value)
    for i, a, n in zip(idx, analytic2, num2):
        got = np.zeros_like(n) if a is None else a.numpy()
        np.testing.assert_allclose(got, n, atol=atol * 10, rtol=rtol * 10,
                                   err_msg=f"second derivative of input {i} vs finite diff")


def op_table_tests(cases, fd_cases=None, check_fn=None, fd_fn=None):
    """The two standard tests over a table of (name, fn, *specs) rows, ids from the names:
    against torch (values and every gradient) and by float64 finite differences to second
    order (over `fd_cases` when only some rows suit finite differences). In a test module:
        test_against_torch, test_finite_differences = op_table_tests(CASES)
    `check_fn` / `fd_fn` replace check / gradcheck (complex_helpers passes its complex ones).
    """
    import pytest

    def by_name(rows):
        return pytest.mark.parametrize("case", rows, ids=[c[0] for c in rows])

    @by_name(cases)
    def test_against_torch(case):
        name, fn, *specs = case
        (check_fn or check)(fn, *specs)

    @by_name(cases if fd_cases is None else fd_cases)
    def test_finite_differences(case):
        name, fn, *specs = case
        (fd_fn or gradcheck)(fn, *specs)

    return test_against_torch, test_finite_differences
