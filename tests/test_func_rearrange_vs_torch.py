"""flow.func.rearrange and debug_unwrap against torch.func's: values, gradients, and the
patterns both refuse."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

# (input shape, pattern, axes lengths)
PATTERNS = [
    ((2, 3, 4), "b h w -> b (h w)", {}),
    ((2, 3, 4), "b h w -> w b h", {}),
    ((2, 3, 4), "b h w -> b h w", {}),
    ((2, 3, 4), "b h w -> (b h w)", {}),
    ((2, 3, 4), "b h w -> (w b) h", {}),
    ((6, 4), "(h w) c -> h w c", {"h": 2}),
    ((6, 4), "(h w) c -> w (c h)", {"w": 3}),
    ((6, 4), "(h w) c -> h w c", {"h": 2, "w": 3}),
    ((2, 3, 4), "b ... -> ... b", {}),
    ((2, 3, 4), "... w -> w ...", {}),
    ((2, 3, 4), "b ... -> b (...)", {}),
    ((2, 3, 4), "... -> ...", {}),
    ((2, 3, 4, 5), "b ... c -> c ... b", {}),
    ((2, 3), "b h ... -> h b ...", {}),
    ((2, 3, 4), "b h w -> b h w 1", {}),
    ((2, 3, 4), "b h w -> b () h w", {}),
    ((2, 1, 4), "b 1 w -> b w", {}),
    ((2, 1, 4), "b () w -> w b", {}),
    ((8, 6, 4, 3), "b (h h1) (w w1) c -> b h w (c h1 w1)", {"h1": 2, "w1": 2}),
    ((8, 6, 4, 3), "b (h1 h) (w1 w) c -> (b h1 w1) h w c", {"h1": 2, "w1": 2}),
    ((2, 3, 4), "b h w -> b h w", {"b": 2}),
    ((0, 3), "b c -> c b", {}),
]
# patterns both refuse (torch raises ValueError, or functorch.dim's DimensionBindError where
# sizes do not fit; flowgrad raises ValueError for all)
REFUSED = [
    ((2, 3, 4), "b h w -> b h", {}),
    ((2, 3, 4), "b h w -> b h w x", {}),
    ((2, 3, 4), "b h -> b h", {}),
    ((2, 3, 4), "b h w h -> b h w", {}),
    ((6, 4), "(h w) c -> h w c", {}),
    ((6, 4), "(h w) c -> h w c", {"h": 4}),
    ((6, 4), "(h w) c -> h w c", {"h": 2, "w": 2}),
    ((2, 3, 4), "b h w -> b h w", {"z": 2}),
    ((2, 3, 4), "b h w -> b h w", {"b": 3}),
    ((2, 3, 4), "b h w", {}),
    ((2, 3, 4), "(b ...) -> b", {}),
    ((2, 3, 4), "b h w -> b h (w", {}),
    ((2, 3, 4), "b ... -> b", {}),
    ((2, 3, 4), "b h w -> b 2 h w", {}),
    ((2,), "a b c -> a", {}),
    ((2, 3, 4), "b h w -> (b (h w))", {}),
]


def _rearranged(m, shape, pattern, lengths):
    """The result and the input's gradient under a fixed random weighting, or the error type."""
    x = m.tensor(np.arange(np.prod(shape), dtype=np.float64).reshape(shape), requires_grad=True)
    try:
        y = m.func.rearrange(x, pattern, **lengths)
    except Exception as error:  # noqa: BLE001 - the refusal is the observation
        return type(error)
    weight = m.tensor(np.random.default_rng(0).standard_normal(tuple(y.shape)))
    (y * weight).sum().backward()
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("shape,pattern,lengths", PATTERNS,
                         ids=[f"{p} {k}" for _, p, k in PATTERNS])
def test_rearrange_matches_torch(shape, pattern, lengths):
    (y, g), (ty, tg) = (_rearranged(m, shape, pattern, lengths) for m in (flow, torch))
    assert y.shape == ty.shape
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(g, tg)


@pytest.mark.parametrize("shape,pattern,lengths", REFUSED,
                         ids=[f"{p} {k}" for _, p, k in REFUSED])
def test_rearrange_refuses_what_torch_refuses(shape, pattern, lengths):
    theirs = _rearranged(torch, shape, pattern, lengths)
    assert isinstance(theirs, type) and issubclass(theirs, Exception)
    assert _rearranged(flow, shape, pattern, lengths) is ValueError


def test_rearrange_of_a_sequence_stacks_it():
    ours = flow.func.rearrange([flow.ones(2), flow.zeros(2)], "n d -> d n")
    theirs = torch.func.rearrange([torch.ones(2), torch.zeros(2)], "n d -> d n")
    assert ours.tolist() == theirs.tolist()


def test_rearrange_double_backward_by_finite_differences():
    x = flow.tensor(np.random.default_rng(1).standard_normal((4, 6)), requires_grad=True)
    assert flow.autograd.gradgradcheck(
        lambda t: flow.func.rearrange(t, "a (b c) -> (c a) b", c=2).sin(), (x,))


def test_rearrange_under_vmap_and_grad():
    # (torch's own rearrange, on functorch.dim, refuses vmap: the oracle is its reshape)
    def f(row):
        return (flow.func.rearrange(row, "(h w) -> w h", h=2) ** 3).sum()

    def g(row):
        return (row.reshape(2, 3).t() ** 3).sum()
    ours = flow.func.vmap(flow.func.grad(f))(flow.arange(12.0).reshape(2, 6))
    assert ours.tolist() == torch.func.vmap(torch.func.grad(g))(
        torch.arange(12.0).reshape(2, 6)).tolist()


def _unwrapped_shapes(m):
    seen = []

    def f(x):
        seen.append((tuple(m.func.debug_unwrap(x).shape),
                     tuple(m.func.debug_unwrap(x, recurse=False).shape)))
        return x
    m.func.vmap(m.func.vmap(f))(m.ones(3, 2, 4))
    m.func.grad(lambda x: (seen.append(tuple(m.func.debug_unwrap(x).shape)), x.sum())[1])(
        m.ones(2))
    seen.append(tuple(m.func.debug_unwrap(m.ones(5)).shape))
    return seen


def test_debug_unwrap_as_torch():
    assert _unwrapped_shapes(flow) == _unwrapped_shapes(torch)
