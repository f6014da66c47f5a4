"""Op-test helpers for complex tensors, the complex mode of tests/helpers.py.

A table entry is one line:  ccheck(lambda m, z, w: m.mul(z, w), (3,), Real((3,)))
Inputs are shapes (random complex values), `Real(shape)` / `Positive(shape)` (random real
values), NumPy arrays (used as given) or Python values passed through. Every output, real or
complex, enters one real loss L = sum(w_re * Re y + w_im * Im y); torch's gradient of a real
loss w.r.t. z = x + iy is dL/dx + i dL/dy, which `cgradcheck` checks by central differences
along x and along y (and, for the second order, the same for sum(Re(conj(u) * grad))).
"""
from __future__ import annotations

import numpy as np
import torch
from helpers import Positive, op_table_tests

import flowgrad as flow

_TORCH = {np.dtype(np.complex64): torch.complex64, np.dtype(np.complex128): torch.complex128,
          np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64,
          np.dtype(np.int64): torch.int64, np.dtype(np.bool_): torch.bool}


class Real(tuple):
    """A shape whose random values are real: Real((3, 4))."""


def make_complex_arrays(specs, double=False, seed=0):
    rng = np.random.default_rng(seed)
    cdt, fdt = (np.complex128, np.float64) if double else (np.complex64, np.float32)
    out = []
    for s in specs:
        if isinstance(s, Positive):
            out.append(rng.uniform(0.5, 2.0, tuple(s)).astype(fdt))
        elif isinstance(s, Real):
            out.append(rng.standard_normal(tuple(s)).astype(fdt))
        elif isinstance(s, tuple):
            out.append((rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(cdt))
        elif isinstance(s, np.ndarray) and s.dtype.kind in "fc":
            out.append(s.astype(cdt if s.dtype.kind == "c" else fdt))
        else:
            out.append(s)
    return out


def _differentiable(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "fc"


def _plain(module, a):
    if not isinstance(a, np.ndarray):
        return a
    return torch.tensor(a, dtype=_TORCH[a.dtype]) if module is torch else flow.tensor(a)


def _to(module, a):
    t = _plain(module, a)
    return t.requires_grad_(True) if _differentiable(a) else t


def _outputs(y):
    return [o for o in y if o is not None] if isinstance(y, (tuple, list)) else [y]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().resolve_neg().numpy()
    return t.detach().numpy()


def _weights(ys, seed):
    rng = np.random.default_rng(seed + 1)
    return [(rng.standard_normal(tuple(y.shape)), rng.standard_normal(tuple(y.shape)))
            for y in ys]


def _loss(ys, weights, module):
    """sum(w_re * Re y + w_im * Im y) over the outputs that require grad."""
    total = 0
    for y, (wr, wi) in zip(ys, weights):
        if not y.requires_grad:
            continue
        real = y.real if y.is_complex() else y
        dt = real.dtype
        total = total + (real * module.tensor(wr, dtype=dt)).sum()
        if y.is_complex():
            total = total + (y.imag * module.tensor(wi, dtype=dt)).sum()
    return total


def ccheck(fn, *specs, torch_fn=None, atol=1e-5, rtol=1e-4, grad=True, seed=0):
    """`fn(flowgrad, *inputs)` against `fn(torch, *inputs)` on complex64/float32 inputs:
    values and dtypes of every output, then every input's gradient of one real loss."""
    arrays = make_complex_arrays(specs, seed=seed)
    ours = [_to(flow, a) for a in arrays]
    theirs = [_to(torch, a) for a in arrays]
    y_ours, y_theirs = _outputs(fn(flow, *ours)), _outputs((torch_fn or fn)(torch, *theirs))
    assert len(y_ours) == len(y_theirs), f"{len(y_ours)} outputs vs torch's {len(y_theirs)}"
    for a, b in zip(y_ours, y_theirs):
        assert tuple(a.shape) == tuple(b.shape), f"shape {tuple(a.shape)} vs torch {b.shape}"
        assert a.dtype.name == str(b.dtype).replace("torch.", ""), f"{a.dtype} vs {b.dtype}"
        np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol,
                                   err_msg="forward differs from torch")
    if not grad or not any(b.requires_grad for b in y_theirs):
        return
    weights = _weights(y_theirs, seed)
    _loss(y_ours, weights, flow).backward()
    _loss(y_theirs, weights, torch).backward()
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert (a.grad is None) == (b.grad is None), f"input {i}: grad presence differs"
            if b.grad is not None:
                assert a.grad.dtype.name == str(b.grad.dtype).replace("torch.", "")
                np.testing.assert_allclose(_np(a.grad), _np(b.grad), atol=atol * 10,
                                           rtol=rtol * 10,
                                           err_msg=f"gradient of input {i} differs from torch")


def cgradcheck(fn, *specs, eps=1e-6, atol=1e-5, rtol=1e-3, second_order=True, seed=0):
    """complex128/float64 central differences of a real loss against flowgrad's gradients
    (dL/dx + i dL/dy for a complex input), and of its gradient's projection at second order."""
    arrays = make_complex_arrays(specs, double=True, seed=seed)
    idx = [i for i, a in enumerate(arrays) if _differentiable(a)]
    weights = _weights(_outputs(fn(flow, *[_to(flow, a) for a in arrays])), seed)

    def first(arrs, create_graph=False):
        xs = [_to(flow, a) for a in arrs]
        s = _loss(_outputs(fn(flow, *xs)), weights, flow)
        gs = flow.autograd.grad(s, [xs[i] for i in idx], create_graph=create_graph,
                                allow_unused=True)
        return xs, s, gs

    def numeric(scalar_of):
        out = []
        for i in idx:
            g = np.zeros_like(arrays[i])
            steps = (eps, 1j * eps) if arrays[i].dtype.kind == "c" else (eps,)
            for k in range(arrays[i].size):
                for step in steps:
                    plus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
                    minus = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
                    plus[i].reshape(-1)[k] += step
                    minus[i].reshape(-1)[k] -= step
                    d = (scalar_of(plus) - scalar_of(minus)) / (2 * eps)
                    g.reshape(-1)[k] += d if step == eps else 1j * d
            out.append(g)
        return out

    def value(s):
        return s.item() if isinstance(s, flow.Tensor) else 0.0

    _, _, analytic = first(arrays)
    num = numeric(lambda arrs: value(_loss(_outputs(fn(flow, *[_to(flow, a) for a in arrs])),
                                           weights, flow)))
    for i, a, n in zip(idx, analytic, num):
        got = np.zeros_like(n) if a is None else a.numpy()
        assert got.dtype == n.dtype, f"input {i}: grad dtype {got.dtype}, input {n.dtype}"
        np.testing.assert_allclose(got, n, atol=atol, rtol=rtol,
                                   err_msg=f"first derivative of input {i} vs finite diff")
    if not second_order:
        return
    us = [make_complex_arrays([Real(arrays[i].shape) if arrays[i].dtype.kind == "f"
                               else tuple(arrays[i].shape)], True, seed + 7 + i)[0]
          for i in idx]

    def second(arrs):
        xs, _, gs = first(arrs, create_graph=True)
        total = 0
        for g, u in zip(gs, us):  # sum(Re(conj(u) * g)): a real function of the inputs
            if g is not None and g.requires_grad:
                if g.is_complex():
                    total = total + (g.real * flow.tensor(u.real)).sum() + \
                        (g.imag * flow.tensor(u.imag)).sum()
                else:
                    total = total + (g * flow.tensor(u)).sum()
        return xs, total

    xs, s2 = second(arrays)
    if not isinstance(s2, flow.Tensor):
        return  # the first derivative is constant
    analytic2 = flow.autograd.grad(s2, [xs[i] for i in idx], allow_unused=True)
    num2 = numeric(lambda arrs: value(second(arrs)[1]))
    for i, a, n in zip(idx, analytic2, num2):
        got = np.zeros_like(n) if a is None else a.numpy()
        np.testing.assert_allclose(got, n, atol=atol * 10, rtol=rtol * 10,
                                   err_msg=f"second derivative of input {i} vs finite diff")


def complex_table_tests(cases, fd_cases=None):
    """test_against_torch and test_finite_differences over (name, fn, *specs) rows."""
    return op_table_tests(cases, fd_cases, check_fn=ccheck, fd_fn=cgradcheck)


def ccheck_jvp(fn, *specs, atol=1e-8, rtol=1e-6, seed=0):
    """flowgrad.func.jvp of `fn` against torch.func.jvp in complex128/float64: random tangents
    (complex for complex inputs) on every floating or complex input, every output compared
    (the tangent of a complex output is J applied to (Re t, Im t), as torch's)."""
    arrays = make_complex_arrays(specs, double=True, seed=seed)
    idx = [i for i, a in enumerate(arrays) if _differentiable(a)]
    rng = np.random.default_rng(seed + 3)
    tans = [rng.standard_normal(arrays[i].shape) + (
        1j * rng.standard_normal(arrays[i].shape) if arrays[i].dtype.kind == "c" else 0)
        for i in idx]

    def run(module, jvp):
        def f(*d):
            args = [_plain(module, a) for a in arrays]
            for i, x in zip(idx, d):
                args[i] = x
            return tuple(_outputs(fn(module, *args)))
        return jvp(f, tuple(_plain(module, arrays[i]) for i in idx),
                   tuple(_plain(module, t.astype(arrays[i].dtype)) for i, t in zip(idx, tans)))
    (y_ours, t_ours), (y_theirs, t_theirs) = run(flow, flow.func.jvp), run(torch, torch.func.jvp)
    for what, ours, theirs in (("primal", y_ours, y_theirs), ("tangent", t_ours, t_theirs)):
        assert len(ours) == len(theirs), f"jvp {what}: {len(ours)} outputs vs {len(theirs)}"
        for a, b in zip(ours, theirs):
            assert a.dtype.name == str(b.dtype).replace("torch.", ""), f"{a.dtype} vs {b.dtype}"
            np.testing.assert_allclose(_np(a), _np(b), atol=atol, rtol=rtol,
                                       err_msg=f"jvp {what} differs from torch")
