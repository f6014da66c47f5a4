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
    """A capturable group with a gradient raises (torch's plain group before it is updated
    first; flowgrad checks every group before updating any); a capturable step without
    gradients runs."""
    a = m.nn.Parameter(m.tensor(W0.copy()))
    b = m.nn.Parameter(m.tensor(W0.copy()))
    c = m.nn.Parameter(m.tensor(W0.copy()))
    opt = m.optim.Adam([{"params": [a]}, {"params": [c], "capturable": True},
                        {"params": [b]}], lr=0.1)
    (a.sum() + b.sum()).backward()
    opt.step()  # c has no gradient: nothing to check
    first = a.detach().numpy().copy()
    c.grad = m.ones_like(c)
    try:
        opt.step()
        raised = None
    except AssertionError:
        raised = "AssertionError"
    return raised, [first] + [p.detach().numpy().copy() for p in (a, b, c)], len(opt.state)


def test_capturable_group_among_plain_groups():
    expected, got = _two_groups(torch), _two_groups(flow)
    assert got[0] == expected[0] and got[2] == expected[2]
    first, a, b, c = got[1]
    for e, g in zip((expected[1][0], expected[1][2], expected[1][3]), (first, b, c)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    # (torch's a took the refused step's update too; flowgrad's is as the refusal left it)
    assert not np.allclose(expected[1][1], first) and np.array_equal(a, first)


HALF_CASES = [(n, dt, kw) for n in ("Adam", "AdamW") for dt in ("float16", "bfloat16")
              for kw in (dict(), dict(weight_decay=0.1, maximize=True), dict(amsgrad=True),
                         dict(eps=1e-8, shape=(3, 4)))]
# SGD's and Adagrad's kernels only where their loops step each value (under 16 values): in
# torch 2.13 the vectorized loop of fused SGD leaves a float16 / bfloat16 parameter as it was,
# and fused Adagrad's rounds lr and eps to the parameter's dtype there
HALF_CASES += [(n, dt, dict(kw, shape=(12,))) for dt in ("float16", "bfloat16")
               for n, kw in (("SGD", {}), ("SGD", dict(momentum=0.9, nesterov=True)),
                             ("SGD", dict(momentum=0.9, dampening=0.2, weight_decay=0.1)),
                             ("Adagrad", dict(weight_decay=0.1, lr_decay=0.01)))]
# a 0-d parameter (the step count's shape, not a moment: it stays float32)
HALF_CASES += [(n, dt, dict(kw, shape=())) for dt in ("float16", "bfloat16")
               for n, kw in (("Adam", dict(amsgrad=True)), ("AdamW", {}),
                             ("SGD", dict(momentum=0.9)), ("Adagrad", {}))]


def _run_half(m, name, dtype, kwargs, steps=10):
    """Steps of a fused optimizer on a float16 / bfloat16 parameter (64 values: the kernels'
    vectorized loop, or 12 with eps=1e-8, where float16 steps that round after every
    operation reach 0 / 0 = nan)."""
    kwargs = dict(kwargs)
    shape = kwargs.pop("shape", (64,))
    gen = np.random.default_rng(1)
    dt = getattr(m, dtype)
    w = m.nn.Parameter(m.tensor(np.float32(gen.standard_normal(shape))).to(dt))
    x = m.tensor(np.float32(gen.standard_normal(shape))).to(dt)
    opt = getattr(m.optim, name)([w], lr=0.05, fused=True, **kwargs)
    for _ in range(steps):
        opt.zero_grad()
        ((w - x) ** (3 if name.startswith("Adam") else 2)).sum().backward()
        opt.step()
    state = {k: v.float().numpy() for k, v in opt.state[w].items() if k != "step"}
    if "step" in opt.state[w]:
        assert opt.state[w]["step"].dtype == m.float32
    return w.detach().float().numpy(), state, str(w.dtype).split(".")[-1]


@pytest.mark.parametrize("name,dtype,kwargs", HALF_CASES,
                         ids=[f"{n}-{d}-{k}" for n, d, k in HALF_CASES])
def test_fused_half_steps_in_float32(name, dtype, kwargs):
    """torch's fused CPU kernels read a float16 / bfloat16 parameter, gradient and state as
    float32 and rounds each stored value once."""
    (ew, estate, edt), (gw, gstate, gdt) = (_run_half(torch, name, dtype, kwargs),
                                            _run_half(flow, name, dtype, kwargs))
    assert gdt == edt and sorted(gstate) == sorted(estate)
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)
    for e, g in [(ew, gw)] + [(estate[k], gstate[k]) for k in estate]:
        assert np.isnan(g).sum() == np.isnan(e).sum()
        np.testing.assert_allclose(g, e, rtol=ulp, atol=1e-6)
        differ = (g != e) & ~(np.isnan(g) & np.isnan(e))
        assert differ.mean() <= 0.1  # at most a few values one rounding apart


SPARSE_CASES = [(n, kw) for n in ("SGD", "Adagrad")
                for kw in (dict(fused=True), dict(fused=True, weight_decay=0.1),
                           dict(foreach=True), dict(foreach=False))]
SPARSE_CASES += [("SGD", dict(fused=True, momentum=0.9))]


def _run_sparse(m, name, kwargs):
    e = m.nn.Embedding(5, 3, sparse=True)
    with m.no_grad():
        e.weight.copy_(m.arange(15.0).reshape(5, 3) / 10)
    opt = getattr(m.optim, name)(e.parameters(), lr=0.1, **kwargs)
    try:
        for _ in range(2):
            opt.zero_grad()
            e(m.tensor([1, 3, 1])).pow(2).sum().backward()
            opt.step()
    except RuntimeError as error:
        return type(error), e.weight.detach().numpy().copy()
    return None, e.weight.detach().numpy().copy()


@pytest.mark.parametrize("name,kwargs", SPARSE_CASES,
                         ids=[f"{n}-{k}" for n, k in SPARSE_CASES])
def test_fused_refuses_a_sparse_gradient(name, kwargs):
    """fused SGD and Adagrad raise RuntimeError at a step with a sparse gradient, before
    anything is updated; foreach steps it."""
    (etype, ew), (gtype, gw) = _run_sparse(torch, name, kwargs), _run_sparse(flow, name, kwargs)
    assert gtype is etype
    np.testing.assert_allclose(gw, ew, rtol=1e-6, atol=1e-7)
