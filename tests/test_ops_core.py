"""Issue-2 ops against torch (forward and backward) and by float64 finite differences to
second order. One line per case."""
import numpy as np
import pytest
from helpers import Positive, check, gradcheck

IDX = np.array([2, 0, 1, 2], dtype=np.int64)

CASES = [
    ("add", lambda m, x, y: x + y, (3, 4), (4,)),
    ("add_scalar", lambda m, x: 2.5 + x + 1, (3, 4)),
    ("sub", lambda m, x, y: x - y, (3, 1), (1, 4)),
    ("rsub", lambda m, x: 1 - x, (3, 4)),
    ("mul", lambda m, x, y: x * y, (2, 3, 4), (3, 1)),
    ("mul_scalar", lambda m, x: 3 * x * 0.5, (5,)),
    ("div", lambda m, x, y: x / y, (3, 4), Positive((4,))),
    ("rdiv", lambda m, x: 2.0 / x, Positive((3, 4))),
    ("pow", lambda m, x, y: x ** y, Positive((3, 4)), (3, 4)),
    ("pow_scalar", lambda m, x: x ** 3, (3, 4)),
    ("rpow", lambda m, x: 2 ** x, (3, 4)),
    ("neg", lambda m, x: -x, (3, 4)),
    ("abs", lambda m, x: x.abs(), (3, 4)),
    ("exp", lambda m, x: m.exp(x), (3, 4)),
    ("log", lambda m, x: m.log(x), Positive((3, 4))),
    ("sqrt", lambda m, x: m.sqrt(x), Positive((3, 4))),
    ("sin", lambda m, x: m.sin(x), (3, 4)),
    ("cos", lambda m, x: m.cos(x), (3, 4)),
    ("tanh", lambda m, x: m.tanh(x), (3, 4)),
    ("sigmoid", lambda m, x: m.sigmoid(x), (3, 4)),
    ("relu", lambda m, x: m.relu(x), (3, 4)),
    ("gelu", lambda m, x: m.nn.functional.gelu(x), (3, 4)),
    ("gelu_tanh", lambda m, x: m.nn.functional.gelu(x, approximate="tanh"), (3, 4)),
    ("softplus", lambda m, x: m.nn.functional.softplus(x), (3, 4)),
    ("sum", lambda m, x: x.sum(), (3, 4)),
    ("sum_dim", lambda m, x: x.sum(dim=1, keepdim=True), (3, 4)),
    ("sum_dims", lambda m, x: x.sum((0, 2)), (2, 3, 4)),
    ("mean", lambda m, x: x.mean(-1), (3, 4)),
    ("max", lambda m, x: x.max(), (3, 4)),
    ("max_dim", lambda m, x: x.max(dim=1).values, (3, 4)),
    ("min_dim", lambda m, x: x.min(0, keepdim=True)[0], (3, 4)),
    ("amax", lambda m, x: m.amax(x, dim=(0, 1)), (3, 4, 2)),
    ("matmul_2d", lambda m, x, y: x @ y, (3, 4), (4, 5)),
    ("matmul_1d", lambda m, x, y: x @ y, (4,), (4,)),
    ("matmul_mv", lambda m, x, y: x @ y, (3, 4), (4,)),
    ("matmul_vm", lambda m, x, y: x @ y, (4,), (4, 2)),
    ("matmul_batched", lambda m, x, y: m.matmul(x, y), (2, 3, 4), (4, 5)),
    ("matmul_broadcast", lambda m, x, y: m.matmul(x, y), (2, 1, 3, 4), (3, 4, 2)),
    ("reshape", lambda m, x: x.reshape(4, -1), (2, 3, 2)),
    ("view", lambda m, x: x.view(6, 2), (3, 4)),
    ("transpose", lambda m, x: x.transpose(0, 2), (2, 3, 4)),
    ("permute", lambda m, x: x.permute(2, 0, 1), (2, 3, 4)),
    ("T", lambda m, x: x.T, (3, 4)),
    ("expand", lambda m, x: x.expand(2, 3, 4), (3, 1)),
    ("squeeze", lambda m, x: x.squeeze(1), (3, 1, 4)),
    ("unsqueeze", lambda m, x: x.unsqueeze(-1), (3, 4)),
    ("flatten", lambda m, x: x.flatten(1), (2, 3, 4)),
    ("getitem_basic", lambda m, x: x[1:, None, ..., ::2], (3, 4)),
    ("getitem_int", lambda m, x: x[-1, 2], (3, 4)),
    ("getitem_tensor", lambda m, x, i: x[i], (3, 4), IDX[:3]),
    ("getitem_repeat", lambda m, x, i: x[:, i], (3, 4), IDX),
    ("getitem_mask", lambda m, x: x[x > 0], (3, 4)),
    ("cat", lambda m, x, y: m.cat([x, y], dim=1), (3, 4), (3, 2)),
    ("stack", lambda m, x, y: m.stack([x, y], dim=-1), (3, 4), (3, 4)),
    ("where", lambda m, x, y: m.where(x > 0, x, y), (3, 4), (3, 4)),
    ("clamp", lambda m, x: m.clamp(x, -0.5, 0.5), (3, 4)),
    ("softmax", lambda m, x: m.softmax(x, dim=1), (3, 4)),
    ("log_softmax", lambda m, x: m.log_softmax(x, dim=0), (3, 4)),
    ("cross_entropy", lambda m, x, t: m.nn.functional.cross_entropy(x, t), (4, 3), IDX % 3),
    ("mse_loss", lambda m, x, y: m.nn.functional.mse_loss(x, y), (3, 4), (3, 4)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_finite_differences(case):
    name, fn, *specs = case
    gradcheck(fn, *specs)
