"""Deep graphs: building, running and deleting a chain of a million ops never recurses.

The recursion limit is lowered to 200 while backward runs and while the graph is deleted:
any Python-level recursion over nodes would raise RecursionError.
"""
from __future__ import annotations

import gc
import sys
import weakref
from contextlib import contextmanager

import numpy as np
import torch

import flowgrad as flow


@contextmanager
def low_recursion_limit(limit=200):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


@contextmanager
def no_cycle_collector():
    """Graphs must be freed by reference counting alone; with the collector off, a cycle
    would keep the first node alive. (It also spares deep-graph tests the collector's
    repeated scans of millions of young objects.)"""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _chain(n, op):
    x = flow.tensor([1.0, 2.0], dtype=flow.float64, requires_grad=True)
    y = x * 1.0
    first = weakref.ref(y.grad_fn)
    for _ in range(n):
        y = op(y)
    return x, y, first


def test_million_op_chain_runs_and_frees_without_recursion():
    n = 1_000_000
    with no_cycle_collector():
        x, y, first = _chain(n, lambda t: t * 1.0000001)
        loss = y.sum()
        with low_recursion_limit():
            loss.backward()
            del y, loss
        assert first() is None, "the graph was not freed by reference counting"
    np.testing.assert_allclose(x.grad.numpy(), np.full(2, 1.0000001 ** n), rtol=1e-9)


def test_deep_graph_deleted_without_backward():
    with no_cycle_collector():
        _, y, first = _chain(200_000, lambda t: t + 0)
        with low_recursion_limit():
            del y
        assert first() is None


def _second_order_chain(m, n):
    x = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    y = x * 1.0
    first = weakref.ref(y.grad_fn) if m is flow else None
    for _ in range(n):
        y = (y * 1.0001).sin() * 0.5 + y
    (g,) = m.autograd.grad(y.sum(), x, create_graph=True)
    y.sum().backward(retain_graph=True)
    y.sum().backward(retain_graph=True)
    (g2,) = m.autograd.grad(g.sum(), x)  # frees the first-order graph too
    return x, g, g2, y, first


def test_deep_graph_retain_graph_and_create_graph():
    n = 5_000
    with no_cycle_collector():
        with low_recursion_limit():
            x, g, g2, y, first = _second_order_chain(flow, n)
            del y, g
        assert first() is None
    xt, gt, g2t, _, _ = _second_order_chain(torch, n)
    np.testing.assert_allclose(g2.numpy(), g2t.numpy(), rtol=1e-9)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9)


def test_deep_graph_with_fan_out_at_every_step():
    x = flow.tensor([0.5], requires_grad=True)
    y = x
    with no_cycle_collector():
        for _ in range(50_000):
            y = (y + y) * 0.5   # each node is consumed twice
        with low_recursion_limit():
            y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0])


def test_deep_graph_of_saving_ops_frees_saved_tensors():
    x = flow.tensor([1.0, 1.0], dtype=flow.float64, requires_grad=True)
    with no_cycle_collector():
        y = x
        for _ in range(100_000):
            y = y * x           # saves both inputs: a long chain of saved tensors
        ref = weakref.ref(y.grad_fn)
        with low_recursion_limit():
            y.sum().backward()
            del y
        assert ref() is None
    np.testing.assert_allclose(x.grad.numpy(), [100_001.0, 100_001.0])


def _freeze_count_after_import(env_value):
    import os
    import subprocess

    env = dict(os.environ)
    env.pop("FLOWGRAD_GC_FREEZE", None)
    if env_value is not None:
        env["FLOWGRAD_GC_FREEZE"] = env_value
    code = "import gc, flowgrad; print(gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return int(out.stdout.split()[-1])


def test_import_freezes_the_libraries_objects_unless_told_not_to():
    assert _freeze_count_after_import(None) > 10_000  # numpy's and flowgrad's objects
    assert _freeze_count_after_import("0") == 0


def test_cycles_made_after_import_are_still_collected():
    class Cyclic:
        pass

    a = Cyclic()
    a.self = a
    alive = weakref.ref(a)
    del a
    gc.collect()
    assert alive() is None
