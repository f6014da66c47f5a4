"""Tensor-op semantics torch users rely on without thinking, each case run in torch and in
flowgrad: the same values (bit for bit where torch rounds once), dtype and shape.

A probe of ~6,000 calls (promotion of every dtype pair and Python scalar, integer division
and remainders, bitwise ops, reductions with every dim form, the sort family, indexing
mixtures, factories, out=) agreed except for these, fixed:
- half precision (float16, bfloat16): logaddexp, logaddexp2, rsqrt and hardsigmoid rounded
  at each of their steps where torch computes in float32 and rounds once (1 ulp off on a
  third of the values); xlog1py rounded once where torch rounds log1p(y) first, then the
  product; renorm computed the norm and factor in half precision (torch: in float32, the
  factor rounded to the input's dtype); logsumexp, logit and ndtr rounded once from float32
  where torch computes them op by op in the tensor's dtype (bfloat16 logsumexp 0.125 off,
  logit 0.03, logit's gradient 0.06); round(decimals=) multiplied by 10 ** d in half
  precision (torch: in float32, rounded once; values 0.1 apart);
- a tuple inside the index tuple (`x[(0, 1), 2]`, `x[((0, 1),)]`) raised IndexError; torch
  reads it as a sequence, like a list.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import flowgrad as flow


def _data(kind):
    rs = np.random.RandomState({"any": 0, "pos": 1, "unit": 2}[kind])
    if kind == "any":
        return rs.randn(64).astype(np.float32) * 3
    if kind == "pos":
        return rs.rand(64).astype(np.float32) * 5 + 0.1
    return rs.rand(64).astype(np.float32) * 0.98 + 0.01


def _same_bits(t, f):
    assert str(t.dtype).split(".")[-1] == str(f.dtype).split(".")[-1]
    assert tuple(t.shape) == tuple(f.shape)
    np.testing.assert_array_equal(f.float().numpy(), t.float().numpy())


HALF_ROWS = [
    ("logaddexp", lambda m, a, b: m.logaddexp(a, b), "any", "any"),
    ("logaddexp pos", lambda m, a, b: m.logaddexp(a, b), "pos", "any"),
    ("logaddexp2", lambda m, a, b: m.logaddexp2(a, b), "any", "any"),
    ("logaddexp2 pos", lambda m, a, b: m.logaddexp2(a, b), "pos", "unit"),
    ("rsqrt", lambda m, a, b: a.rsqrt(), "pos", None),
    ("rsqrt unit", lambda m, a, b: m.rsqrt(a), "unit", None),
    ("hardsigmoid", lambda m, a, b: m.nn.functional.hardsigmoid(a), "any", None),
    ("hardsigmoid unit", lambda m, a, b: m.nn.functional.hardsigmoid(a), "unit", None),
    ("xlog1py", lambda m, a, b: m.special.xlog1py(a, b), "any", "pos"),
    ("xlog1py unit", lambda m, a, b: m.special.xlog1py(a, a), "unit", None),
    ("renorm", lambda m, a, b: a.reshape(8, 8).renorm(2, 0, 1.0), "any", None),
    ("renorm dim 1 p 3", lambda m, a, b: a.reshape(8, 8).renorm(3, 1, 2.0), "any", None),
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,call,first,second", HALF_ROWS, ids=[r[0] for r in HALF_ROWS])
def test_half_precision_rounds_as_torch(name, call, first, second, dtype):
    results = []
    for m in (torch, flow):
        a = m.tensor(_data(first)).to(getattr(m, dtype))
        b = m.tensor(_data(second)).to(getattr(m, dtype)) if second else None
        results.append(call(m, a, b))
    _same_bits(*results)


def test_half_precision_gradients_stay_close():
    # the rounding moved into float32: the gradients still agree with torch's
    for dtype in ("float16", "bfloat16"):
        grads = []
        for m in (torch, flow):
            a = m.tensor(_data("any")).to(getattr(m, dtype)).requires_grad_()
            b = m.tensor(_data("pos")).to(getattr(m, dtype)).requires_grad_()
            y = (m.logaddexp(a, b) + m.nn.functional.hardsigmoid(a) + b.rsqrt()
                 + m.special.xlog1py(a, b) + a.reshape(8, 8).renorm(2, 0, 1.0).reshape(-1))
            grads.append([g.float().numpy() for g in m.autograd.grad(y.sum(), (a, b))])
        for t, f in zip(*grads):
            np.testing.assert_allclose(f, t, rtol=2e-2, atol=2e-2)


COMPOSITE_ROWS = [
    ("logit", lambda m, dt: m.logit(m.linspace(-0.1, 1.1, 4001).to(dt))),
    ("logit eps", lambda m, dt: m.logit(m.linspace(-0.1, 1.1, 4001).to(dt), eps=1e-3)),
    ("logit eps 0.3", lambda m, dt: m.linspace(-0.1, 1.1, 4001).to(dt).logit(0.3)),
    ("ndtr", lambda m, dt: m.special.ndtr(m.linspace(-9, 9, 4001).to(dt))),
    ("logsumexp dim 1", lambda m, dt: _spread(m, dt).logsumexp(1)),
    ("logsumexp dim 0 keepdim", lambda m, dt: _spread(m, dt).logsumexp(0, keepdim=True)),
    ("logsumexp all", lambda m, dt: _spread(m, dt).logsumexp((0, 1))),
    ("logsumexp infinities", lambda m, dt: m.tensor(
        [[-math.inf, -math.inf], [math.inf, 1.0], [math.nan, 1.0], [-math.inf, 2.0]]
    ).to(dt).logsumexp(1)),
    ("logsumexp grad", lambda m, dt: _grad(m, lambda x: x.logsumexp(1), _spread(m, dt)[:5, :7])),
    ("logit grad", lambda m, dt: _grad(m, m.logit, m.linspace(0.05, 0.95, 37).to(dt))),
    ("logit eps grad", lambda m, dt: _grad(m, lambda x: x.logit(0.2),
                                           m.linspace(0.05, 0.95, 37).to(dt))),
]


def _spread(m, dt):
    x = m.linspace(-30, 30, 4000).to(dt).reshape(40, 100)
    return (x * m.linspace(0.1, 3, 100).to(dt)).reshape(100, 40)


def _grad(m, f, x):
    x = x.clone().requires_grad_()
    return m.autograd.grad(f(x).sum(), x)[0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name,call", COMPOSITE_ROWS, ids=[r[0] for r in COMPOSITE_ROWS])
def test_half_precision_composites_round_at_each_step_as_torch(name, call, dtype):
    # torch computes these in the tensor's dtype, op by op (logsumexp: amax, x - m, exp, a
    # float32-accumulated sum, log, + m; logit: log(x / (1 - x)); ndtr: (1 + erf(x / sqrt 2))
    # * 0.5), rounding at each step; flowgrad rounded once from float32
    _same_bits(call(torch, torch.float16 if dtype == "float16" else torch.bfloat16),
               call(flow, getattr(flow, dtype)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("decimals", [1, 2, -1])
def test_round_decimals_of_half_precision_in_float32_as_torch(dtype, decimals):
    # torch: rint(x * 10 ** d) / 10 ** d in float32, rounded once; flowgrad multiplied in
    # half precision first (float16 2.936 rounded to 2.900, torch 2.900; 5.293: 5.301 both,
    # but 3 of 256 float16 and 11 bfloat16 values 0.1 apart)
    x = np.random.RandomState(0).randn(256).astype(np.float32) * (30 if decimals < 0 else 3)
    _same_bits(torch.tensor(x).to(getattr(torch, dtype)).round(decimals=decimals),
               flow.tensor(x).to(getattr(flow, dtype)).round(decimals=decimals))


INDEX_ROWS = [
    ("tuple then int", lambda: ((0, 1), 1)),
    ("tuple alone", lambda: ((0, 1),)),
    ("two tuples", lambda: ((1, 0), (2, 1))),
    ("tuple slice tuple", lambda: ((1, 0), slice(None), (3, 0))),
    ("int tuple", lambda: (1, (2, 0, 2))),
    ("tuple of bools", lambda: ((True, False),)),
]


@pytest.mark.parametrize("name,index", INDEX_ROWS, ids=[r[0] for r in INDEX_ROWS])
def test_tuple_inside_the_index_is_a_sequence(name, index):
    got = []
    for m in (torch, flow):
        x = m.arange(24.0).reshape(2, 3, 4).requires_grad_()
        y = x.detach().clone()
        y[index()] = -1.0
        (g,) = m.autograd.grad((x[index()] * 2).sum(), x)
        got.append((x[index()].detach(), y, g))
    for t, f in zip(*got):
        _same_bits(t, f)
