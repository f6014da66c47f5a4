"""The optimizers' device flags (capturable, fused, foreach) on the CPU, run in torch and in
flowgrad: capturable=True (without fused) raises AssertionError at the first step with a
gradient, after the state is made and before anything is updated; fused and foreach run and
give torch's numbers; fused=True with capturable=True runs (the fused CPU kernels)."""
import numpy as np
import pytest
import torch

import flowgrad as flow

CAPTURABLE = ["Adam", "AdamW", "Adamax", "Adadelta", "ASGD", "NAdam", "RAdam", "RMSprop",
              "Rprop"]
FUSED = ["SGD", "Adam", "AdamW", "Adagrad"]
FOREACH = ["SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "ASGD", "NAdam", "RAdam",
           "RMSprop", "Rprop", "Adafactor"]

CASES = (
    [(n, dict(capturable=True)) for n in CAPTURABLE]
    + [(n, dict(capturable=True, foreach=f)) for n in CAPTURABLE for f in (False, True)]
    + [(n, dict(capturable=True, fused=True)) for n in ("Adam", "AdamW")]
    + [(n, dict(fused=True)) for n in FUSED]
    + [(n, dict(foreach=f)) for n in FOREACH for f in (False, True)]
    + [(n, dict(fused=True, weight_decay=0.1, maximize=True)) for n in FUSED]
    + [("SGD", dict(fused=True, momentum=0.9, nesterov=True))]
    + [(n, dict(fused=True, amsgrad=True)) for n in ("Adam", "AdamW")]
)

_GEN = np.random.default_rng(0)
W0 = _GEN.standard_normal((3, 4)).astype(np.float32)
X = _GEN.standard_normal((5, 3)).astype(np.float32)


def _run(m, name, kwargs, steps=3):
    w = m.nn.Parameter(m.tensor(W0.copy()))
    x = m.tensor(X)
    try:
        opt = getattr(m.optim, name)([w], lr=0.05, **kwargs)
    except Exception as error:
        return ("ctor", type(error))
    for _ in range(steps):
        opt.zero_grad()
        (x @ w).tanh().square().sum().backward()
        try:
            opt.step()
        except Exception as error:
            return ("step", type(error), sorted(opt.state[w]), w.detach().numpy().copy())
    return ("ok", w.detach().numpy().copy())


def _same(expected, got):
    assert got[:-1] == expected[:-1] if got[0] == "step" else got[0] == expected[0], \
        (expected[:3], got[:3])
    if expected[0] != "ctor":
        np.testing.assert_allclose(got[-1], expected[-1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_device_flags_on_cpu(name, kwargs):
    _same(_run(torch, name, kwargs), _run(flow, name, kwargs))


def _two_groups(m):
    """A plain group is updated before a capturable group raises; a capturable step
    without gradients runs."""
    a = m.nn.Parameter(m.tensor(W0.copy()))
    b = m.nn.Parameter(m.tensor(W0.copy()))
    c = m.nn.Parameter(m.tensor(W0.copy()))
    opt = m.optim.Adam([{"params": [a]}, {"params": [c], "capturable": True},
                        {"params": [b]}], lr=0.1)
    (a.sum() + b.sum()).backward()
    opt.step()  # c has no gradient: nothing to check
    c.grad = m.ones_like(c)
    try:
        opt.step()
        raised = None
    except AssertionError:
        raised = "AssertionError"
    return raised, [p.detach().numpy().copy() for p in (a, b, c)], len(opt.state)


def test_capturable_group_among_plain_groups():
    expected, got = _two_groups(torch), _two_groups(flow)
    assert got[0] == expected[0] and got[2] == expected[2]
    for e, g in zip(expected[1], got[1]):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
