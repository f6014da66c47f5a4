"""Composite modules under combinations of their options, against torch 2.13: torch's
initialised weights loaded into flowgrad's layer, forward in train and eval, backward with a
random upstream gradient; outputs, input gradients and parameter gradients compared."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow


def _flow(t):
    """flowgrad's copy of a torch tensor (dtype and requires_grad kept), None as None."""
    if t is None:
        return None
    return flow.tensor(t.detach().numpy().copy(), dtype=getattr(flow, str(t.dtype)[6:]),
                       requires_grad=t.requires_grad)


def _flat(obj):
    if isinstance(obj, (tuple, list)):
        return [x for o in obj for x in _flat(o)]
    return [obj]


def _close(f, t, dtype):
    assert t is not None and f is not None, (t, f)
    assert tuple(f.shape) == tuple(t.shape) and str(f.dtype)[9:] == str(t.dtype)[6:]
    rtol, atol = (1e-7, 1e-9) if dtype == torch.float64 else (1e-4, 1e-5)
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def _check_pair(tm, fm, inputs, call, dtype, train=True, seed=0):
    """Run `call(module, *inputs)` in torch and flowgrad (torch's weights loaded into fm) and
    compare outputs, then the gradients of sum(out * g) for a random g."""
    fm.load_state_dict({k: _flow(v) for k, v in tm.state_dict().items()})
    tm.train(train)
    fm.train(train)
    f_inputs = [_flow(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    t_out, f_out = _flat(call(tm, *inputs)), _flat(call(fm, *f_inputs))
    assert len(t_out) == len(f_out)
    gen = torch.Generator().manual_seed(seed)
    t_loss, f_loss = 0, 0
    for t, f in zip(t_out, f_out):
        _close(f, t, dtype)
        if t.requires_grad:
            g = torch.randn(t.shape, generator=gen, dtype=t.dtype)
            t_loss, f_loss = t_loss + (t * g).sum(), f_loss + (f * _flow(g)).sum()
    if isinstance(t_loss, int):
        return
    t_loss.backward()
    f_loss.backward()
    for t, f in zip(inputs, f_inputs):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            _close(f.grad, t.grad, dtype)
    f_params = dict(fm.named_parameters())
    for name, p in tm.named_parameters():
        if p.grad is not None:
            _close(f_params[name].grad, p.grad, dtype)


def _pair(name, *args, **kwargs):
    """torch's and flowgrad's layer `name` made with the same arguments (torch's seeded)."""
    torch.manual_seed(0)
    return getattr(torch.nn, name)(*args, **kwargs), getattr(flow.nn, name)(*args, **kwargs)


# ---- LPPool with norm_type = +-inf -------------------------------------------------------------
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("p", [float("inf"), -float("inf")])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_lp_pool_of_infinite_norm_is_max_pooling_of_abs_as_torch(nd, p, ceil_mode):
    """torch's lp_pool{1,2,3}d take p = inf as max pooling of |x| and p = -inf as the min of
    |x|; x ** inf averaged and raised to 1/inf gave 1.0 (0.0 where every |x| < 1)."""
    tm, fm = _pair(f"LPPool{nd}d", p, 2, stride=(1, 2, 2)[nd - 1], ceil_mode=ceil_mode)
    x = torch.randn((2, 3) + (5,) * nd, dtype=torch.float64, requires_grad=True)
    _check_pair(tm, fm, [x], lambda m, x: m(x), torch.float64)


# ---- option combinations torch refuses ---------------------------------------------------------
_REFUSED = {
    # an explicit size leaves no scale to recompute
    "interpolate_size_recompute": lambda lib: lib.nn.functional.interpolate(
        lib.ones(1, 1, 4), size=3, recompute_scale_factor=True),
    # per_sample_weights must have the input's shape, not just its number of elements
    "embedding_bag_2d_flat_weights": lambda lib: lib.nn.EmbeddingBag(5, 2, mode="sum")(
        lib.tensor([[1, 2]]), per_sample_weights=lib.ones(2)),
    "embedding_bag_1d_weights_too_long": lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([1, 2]), lib.ones(5, 2), lib.tensor([0]), per_sample_weights=lib.ones(3),
        mode="sum"),
    "embedding_bag_1d_weights_2d": lambda lib: lib.nn.functional.embedding_bag(
        lib.tensor([1, 2]), lib.ones(5, 2), lib.tensor([0]), per_sample_weights=lib.ones(1, 2),
        mode="sum"),
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_option_combinations_torch_refuses_raise_its_error(case):
    with pytest.raises(ValueError) as torch_error:
        _REFUSED[case](torch)
    with pytest.raises(ValueError) as error:
        _REFUSED[case](flow)
    assert str(error.value).split(" (")[0].split(":")[0] == \
        str(torch_error.value).split(" (")[0].split(":")[0]


# ---- EmbeddingBag(mode="max") with equal maxima ----------------------------------------------
_TIED = [[1.0, 2.0], [1.0, 2.0], [3.0, 0.0], [float("nan"), 1.0], [3.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("bags", [
    ([[0, 1]], None), ([[2, 4, 0]], None), ([[1, 0, 1]], None), ([[5, 5, 2]], None),
    ([[0, 3]], None), ([[3, 0]], None), ([[3, 0], [0, 3]], 3), ([[5, 1, 0, 1]], 5),
    ([2, 4, 0, 1, 0, 5, 5], [0, 3, 3, 5]), ([3, 1, 0, 4, 2], [0, 2])])
def test_embedding_bag_max_gives_the_first_of_equal_maxima_the_gradient_as_torch(bags):
    """torch's max kernel keeps a bag's first row and replaces it only by a strictly greater
    value: of equal maxima the first gets the whole gradient (flowgrad's amax split it, 0.5
    each), and a nan counts only as a bag's first (non-padding) row."""
    indices, extra = bags
    offsets, padding_idx = (extra, None) if isinstance(extra, list) else (None, extra)
    results = []
    for lib in (torch, flow):
        w = lib.tensor(_TIED, dtype=lib.float64, requires_grad=True)
        i = lib.tensor(indices)
        o = lib.tensor(offsets) if offsets is not None else None
        y = lib.nn.functional.embedding_bag(i, w, o, mode="max", padding_idx=padding_idx)
        y.nan_to_num().mul(lib.arange(1.0, y.numel() + 1, dtype=lib.float64).reshape(
            y.shape)).sum().backward()
        results.append((y.detach().numpy(), w.grad.numpy()))
    (ty, tg), (fy, fg) = results
    np.testing.assert_array_equal(fy, ty)
    np.testing.assert_array_equal(fg, tg)
