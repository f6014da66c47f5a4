"""Every op-table row on inputs whose storage is not contiguous: transposed, strided by a step,
and reversed (NumPy's negative strides, which torch has no view for). Kernels take the arrays
as they are, so a kernel that assumed a contiguous layout would give wrong numbers here; values
and gradients, with their dtypes and requires_grad, must be torch's for the same values, and an
op must raise only where torch, on the same layout, raises too (`view` of a transposed tensor).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import _outputs, _to, make_arrays
from test_saved_versions_vs_torch import _rows

import flowgrad as flow


def _laid_out(m, a, layout):
    """A leaf with a's values in a non-contiguous layout, or None where it has none."""
    if layout == "transposed" and a.ndim >= 2:
        t = m.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).transpose(-1, -2)
    elif layout == "stepped" and a.ndim >= 1:
        t = m.tensor(np.repeat(a, 2, axis=-1))[..., ::2]
    elif layout == "reversed" and a.ndim >= 1:  # torch's flip copies: its input is plain
        t = m.tensor(a[..., ::-1].copy()).flip(-1)
    else:
        return None
    return t.detach().requires_grad_()


def _run(m, fn, arrays, layout):
    inputs = []
    for a in arrays:
        t = None
        if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size > 1:
            t = _laid_out(m, a, layout)
        inputs.append(t if t is not None else _to(m, a, True))
    try:
        outputs = _outputs(fn(m, *inputs))
    except RuntimeError as e:
        return e
    rng = np.random.default_rng(1)
    loss = 0
    for o in outputs:
        if o.requires_grad:
            loss = loss + (o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum()
    if not isinstance(loss, int):
        loss.backward()
    grads = [t.grad if getattr(t, "grad", None) is not None else None for t in inputs]
    return outputs, grads


def _dtype(t):
    return str(t.dtype).rsplit(".", 1)[-1]


# where torch itself fails on a layout it should accept
TORCH_FAILS = {("odds:kron_mixed_dims", "transposed"): "torch's kron calls view() on its input"}


@pytest.mark.parametrize("layout", ["transposed", "stepped", "reversed"])
@pytest.mark.parametrize(("fn", "specs"), _rows())
def test_non_contiguous_inputs(fn, specs, layout, request):
    arrays = make_arrays(specs, np.float64, 0)
    if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size > 1
               and (a.ndim >= 2 or layout != "transposed") for a in arrays):
        pytest.skip(f"no input has a {layout} layout")
    ours, theirs = _run(flow, fn, arrays, layout), _run(torch, fn, arrays, layout)
    row = request.node.callspec.id.rsplit("-", 1)[0]
    if (row, layout) in TORCH_FAILS:
        assert isinstance(theirs, RuntimeError), f"torch now accepts {row}: drop TORCH_FAILS"
        theirs = _run(torch, fn, arrays, "contiguous")  # the same values, plainly laid out
    if isinstance(ours, RuntimeError) or isinstance(theirs, RuntimeError):
        assert isinstance(ours, RuntimeError) and isinstance(theirs, RuntimeError), (
            f"raised in one only: flowgrad {ours!r:.200}, torch {theirs!r:.200}")
        return
    for i, (a, b) in enumerate(zip(ours[0], theirs[0])):
        assert (_dtype(a), a.requires_grad) == (_dtype(b), b.requires_grad), (
            f"output {i}: {_dtype(a)}, requires_grad={a.requires_grad}; torch's "
            f"{_dtype(b)}, requires_grad={b.requires_grad}")
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-9,
                                   equal_nan=True, err_msg="forward differs from torch")
    for i, (a, b) in enumerate(zip(ours[1], theirs[1])):
        assert (a is None) == (b is None), f"input {i}: grad presence differs"
        if a is not None:
            assert _dtype(a) == _dtype(b), f"input {i}: grad {_dtype(a)}, torch's {_dtype(b)}"
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-9,
                                       equal_nan=True,
                                       err_msg=f"gradient of input {i} differs from torch")


# ---- the layout of a result made like its input: torch's preserve_format ----------------------
# before, clone, the *_like factories and flip returned row-major arrays whatever the input's
# layout: x.t().clone().view(-1) ran where torch raises, and a reshape of such a clone was a view
# (an in-place write through it changed the clone) where torch's is a copy
_SOURCES = {"transposed": lambda m: m.arange(12.0).reshape(3, 4).t(),
            "sliced": lambda m: m.arange(24.0).reshape(4, 6)[:, 1:5:2],
            "transposed, sliced": lambda m: m.arange(24.0).reshape(4, 6).t()[::2],
            "permuted": lambda m: m.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
            "expanded": lambda m: m.arange(4.0).reshape(4, 1).t().expand(3, 4).t(),
            "expanded, unsqueezed": lambda m: m.arange(12.0).reshape(3, 4).t()[None].expand(
                2, 4, 3)}
_MADE_LIKE = {"clone": lambda m, x: x.clone(), "torch.clone": lambda m, x: m.clone(x),
              "clone(preserve_format)": lambda m, x: x.clone(memory_format=m.preserve_format),
              "clone(contiguous_format)": lambda m, x: x.clone(memory_format=m.contiguous_format),
              "zeros_like": lambda m, x: m.zeros_like(x), "ones_like": lambda m, x: m.ones_like(x),
              "empty_like": lambda m, x: m.empty_like(x).zero_(),
              "full_like": lambda m, x: m.full_like(x, 2.0),
              "rand_like": lambda m, x: m.rand_like(x) * 0,
              "randn_like": lambda m, x: m.randn_like(x) * 0,
              "randint_like": lambda m, x: m.randint_like(x, 1),
              "zeros_like(int)": lambda m, x: m.zeros_like(x, dtype=m.int32),
              "flip": lambda m, x: x.flip(0), "flip(-1)": lambda m, x: x.flip(-1),
              "fliplr": lambda m, x: m.fliplr(x), "to(copy=True)": lambda m, x: x.to(
                  m.float32, copy=True), "detach().clone()": lambda m, x: x.detach().clone()}


def _made_like(m, source, make):
    """The layout (strides of the dims longer than 1) of the result, whether view(-1) of it
    raises, and whether an in-place write through reshape(-1) of it reaches it."""
    out = _MADE_LIKE[make](m, _SOURCES[source](m).float())
    strides = tuple(s for n, s in zip(out.shape, out.stride()) if n > 1)
    try:
        out.view(-1)
        views = True
    except RuntimeError:
        views = False
    before = out.clone()
    out.reshape(-1).add_(1)
    return strides, views, bool((out != before).any())


@pytest.mark.parametrize("make", _MADE_LIKE)
@pytest.mark.parametrize("source", _SOURCES)
def test_results_made_like_an_input_keep_its_layout_as_torch(source, make):
    assert _made_like(flow, source, make) == _made_like(torch, source, make)
