"""float16 and bfloat16 products outside autocast, against torch: the output and every
gradient in the inputs' dtype, values as torch's float32-accumulating CPU kernels give."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

DTYPES = {"bfloat16": (flow.bfloat16, torch.bfloat16), "float16": (flow.float16, torch.float16)}

# (case, fn(m, F, *inputs), input shapes)
CASES = [
    ("matmul", lambda m, F, a, b: a @ b, (3, 4), (4, 5)),
    ("matmul batch x 2d", lambda m, F, a, b: a @ b, (2, 3, 4), (4, 5)),
    ("matmul vector", lambda m, F, a, b: m.matmul(a, b), (3, 4), (4,)),
    ("mm", lambda m, F, a, b: m.mm(a, b), (3, 4), (4, 5)),
    ("bmm", lambda m, F, a, b: m.bmm(a, b), (2, 3, 4), (2, 4, 5)),
    ("mv", lambda m, F, a, b: m.mv(a, b), (3, 4), (4,)),
    ("dot", lambda m, F, a, b: m.dot(a, b), (4,), (4,)),
    ("outer", lambda m, F, a, b: m.outer(a, b), (3,), (4,)),
    ("addmm", lambda m, F, c, a, b: m.addmm(c, a, b, beta=0.5), (3, 5), (3, 4), (4, 5)),
    ("baddbmm", lambda m, F, c, a, b: m.baddbmm(c, a, b), (2, 3, 5), (2, 3, 4), (2, 4, 5)),
    ("einsum", lambda m, F, a, b: m.einsum("ij,jk->ik", a, b), (3, 4), (4, 5)),
    ("einsum one operand", lambda m, F, a: m.einsum("ij->j", a), (3, 4)),
    ("tensordot", lambda m, F, a, b: m.tensordot(a, b, dims=1), (3, 4), (4, 5)),
    ("linear", lambda m, F, x, w: F.linear(x, w), (2, 3, 4), (5, 4)),
    ("linear+bias", lambda m, F, x, w, b: F.linear(x, w, b), (3, 4), (5, 4), (5,)),
    ("conv1d", lambda m, F, x, w: F.conv1d(x, w, padding=1), (2, 3, 7), (4, 3, 3)),
    ("conv2d+bias", lambda m, F, x, w, b: F.conv2d(x, w, b, stride=2), (2, 3, 6, 6),
     (4, 3, 3, 3), (4,)),
    ("conv2d groups", lambda m, F, x, w: F.conv2d(x, w, groups=2), (1, 4, 5, 5), (4, 2, 3, 3)),
    ("conv3d", lambda m, F, x, w: F.conv3d(x, w), (1, 2, 4, 4, 4), (3, 2, 2, 2, 2)),
    ("conv_transpose2d", lambda m, F, x, w: F.conv_transpose2d(x, w, stride=2), (2, 3, 4, 4),
     (3, 2, 3, 3)),
]


def _run(m, dt, fn, arrays):
    F = flow.nn.functional if m is flow else torch.nn.functional
    ts = [m.tensor(a).to(dt).requires_grad_(True) for a in arrays]
    y = fn(m, F, *ts)
    w = m.tensor(np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32))
    (y.float() * w).sum().backward()
    return y, [t.grad for t in ts]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_half_precision_products_keep_dtype(case, dtype):
    _, fn, *shapes = case
    arrays = [np.random.default_rng(0).standard_normal(s).astype(np.float32) for s in shapes]
    fdt, tdt = DTYPES[dtype]
    y, grads = _run(flow, fdt, fn, arrays)
    ty, tgrads = _run(torch, tdt, fn, arrays)
    assert y.dtype is fdt and str(ty.dtype) == f"torch.{dtype}"
    tol = 2 ** -7 if dtype == "bfloat16" else 2 ** -10  # one rounding of the result
    np.testing.assert_allclose(y.detach().float().numpy(), ty.detach().float().numpy(),
                               rtol=2 * tol, atol=2 * tol)
    for g, tg in zip(grads, tgrads):
        assert g.dtype is fdt and tg.dtype is tdt
        np.testing.assert_allclose(g.float().numpy(), tg.float().numpy(), rtol=4 * tol,
                                   atol=8 * tol)


def test_half_products_round_a_float32_accumulation():
    """Accumulated in float32 as torch: 256 ones plus one 1 is 257, which float32 holds; a
    bfloat16 accumulator would stop at 256. The result is then rounded once (to 256 or 258)."""
    a = np.ones((1, 257), np.float32)
    for fdt, tdt in DTYPES.values():
        y = flow.tensor(a).to(fdt) @ flow.tensor(a.T).to(fdt)
        ty = torch.tensor(a).to(tdt) @ torch.tensor(a.T).to(tdt)
        assert y.dtype is fdt and y.float().item() == ty.float().item()
