"""A view whose base was written in place (recorded) is stale: its grad_fn misses that
write until the view is next read, when it is replayed on the base's new history. An
unrecorded write through the stale view (under no_grad) must leave it stale. Before, it
marked the view as up to date under every interpreter but eager's (forward AD, vmap,
nn.Graph's tracer), so the view kept its old history: jvp(grad(f)) lost the base write's
factor (vmap_fuzz jvp_of_grad seed 13282). Each row runs one transform of f against
torch.func, for several writes through the stale view."""
import numpy as np
import pytest
import torch

import flowgrad as flow

WRITES = {
    "exp_": lambda t: t.exp_(),
    "add_": lambda t: t.add_(1.0),
    "mul_": lambda t: t.mul_(t.detach() * 0.5),
}


def _f(m, write, read):
    def f(x):
        base = x * x
        view = base.t()
        base.mul_(2.0)  # recorded: `view` is stale from here
        with m.no_grad():
            WRITES[write](view)
        return ((view if read == "view" else base).sin() * 0.5).sum() + (view * 1.0).sum()
    return f


def _transform(m, kind, f, x, v):
    F = m.func
    if kind == "grad":
        return F.grad(f)(x)
    if kind == "jvp_of_grad":
        return F.jvp(F.grad(f), (x,), (v,))[1]
    if kind == "grad_of_grad":
        return F.grad(lambda y: (F.grad(f)(y) * v).sum())(x)
    if kind == "vmap_of_grad":
        return F.vmap(F.grad(f))(m.stack([x, v]))
    if kind == "jvp":
        return F.jvp(f, (x,), (v,))[1]
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["grad", "jvp_of_grad", "grad_of_grad", "vmap_of_grad", "jvp"])
@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("read", ["view", "base"])
def test_unrecorded_write_through_a_stale_view_keeps_it_stale_as_torch(kind, write, read):
    values = np.array([[0.46, -0.3, 0.2], [0.1, 0.5, -0.6]])

    def result(m):
        x = m.tensor(values, dtype=m.float64)
        return _transform(m, kind, _f(m, write, read), x, m.cos(3 * x)).detach().numpy()
    np.testing.assert_allclose(result(flow), result(torch), rtol=1e-12, atol=1e-14)
