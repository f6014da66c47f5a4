"""Writing in place to a tensor an op saved for backward: flowgrad refuses only what torch
refuses, and what it accepts gives the gradient at the values the forward saw.

Every row of the op tables (test_ops_*.py) is run with each floating input, then each output,
written in place through a detached alias after the forward (the version counter moves, the
autograd graph does not see the write), under each pattern of which inputs require grad:
- when flowgrad raises ("modified by an in-place operation"), torch must raise too: an op saves
  only what the gradients needed read (`grad_reads`), and the same tensor torch saves (input or
  output);
- when flowgrad does not raise, its gradients equal torch's without the write: an op never reads
  a written-to tensor unchecked.
flowgrad may accept a write that torch refuses: it saves less than torch for some ops
(threshold) and the gradient it gives is still the right one; the ops that save their input
for its sizes, as torch's (gather, take, masked_select, cummax, the max and average pools,
reflection and replication pads), refuse it as torch, and so do the composites whose torch
node is one that saves its inputs (mse/smooth_l1/huber/soft_margin losses, the adaptive
average pools and area interpolation, grid_sample, cdist, pdist, dist, nansum, nanmean:
ops/kept.py).
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from helpers import _outputs, _to, make_arrays

import flowgrad as flow

TABLES = ["test_ops_elementwise", "test_ops_activation", "test_ops_loss", "test_ops_reduce",
          "test_ops_linalg", "test_api_more", "test_ops_conv", "test_ops_core", "test_ops_index",
          "test_ops_nn_misc", "test_ops_norm", "test_ops_odds", "test_ops_pool", "test_ops_shape",
          "test_ops_spatial", "test_ops_special"]


def _rows():
    rows = []
    for name in TABLES:
        table = importlib.import_module(name)
        for row in table.CASES:
            if hasattr(row, "values"):  # pytest.param(fn, specs, ...)
                rows.append(pytest.param(row.values[0], row.values[1],
                                         id=f"{name[9:]}:{row.id}"))
            else:  # (name, fn, *specs)
                rows.append(pytest.param(row[1], row[2:], id=f"{name[9:]}:{row[0]}"))
    return rows


def _run(m, fn, arrays, requires, written):
    """Gradients of sum(outputs * weights) for the inputs in `requires`, after writing in
    place to input or output `written` ("in", i) / ("out", k); or the backward's error."""
    inputs = [_to(m, a, i in requires) for i, a in enumerate(arrays)]
    outputs = [o for o in _outputs(fn(m, *inputs)) if getattr(o, "requires_grad", False)]
    if not outputs:
        return None
    if written is not None:
        kind, i = written
        target = inputs[i] if kind == "in" else outputs[i] if i < len(outputs) else None
        if target is None:
            return None
        try:
            with m.no_grad():
                target.detach().mul_(0.75)
        except RuntimeError as e:  # a multi-output view or an expanded one: not writable
            return ("write", e)
    rng = np.random.default_rng(1)
    try:  # a multi-output view whose base was written refuses to be used
        loss = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype)).sum()
                   for o in outputs)
    except RuntimeError as e:
        return ("use", e)
    try:
        loss.backward()
    except RuntimeError as e:
        return ("backward", e)
    return [None if inputs[i].grad is None else inputs[i].grad.detach().numpy()
            for i in sorted(requires)]


def _scenarios(arrays):
    floats = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)
              and a.dtype.kind == "f"]
    every = frozenset(floats)
    out = [(every, ("in", j)) for j in floats]
    if len(floats) > 1:
        out += [(frozenset([i]), ("in", j)) for i in floats for j in floats]
    out += [(every, ("out", k)) for k in range(3)]
    return out


# Rows where flowgrad refuses a write torch accepts only because torch's implementation is a
# composite that saves an internal tensor (a copy, a product) instead of the user's: flowgrad's
# op reads the user's tensor, which was written, so it raises rather than compute with it.
TORCH_SAVES_A_TEMPORARY = {
    "linalg:matmul_1d_3d": "torch's matmul expands and reshapes the 1-d operand (a copy)",
    "linalg:matmul_bcast": "torch's broadcast matmul expands and reshapes (copies) both",
    "core:matmul_broadcast": "torch's broadcast matmul expands and reshapes (copies) both",
    "linalg:einsum_sum_only": "torch's einsum sums the summed-away operand first",
    "linalg:einsum_three": "torch's einsum contracts the first pair first and saves that",
    "linalg:tensordot_lists": "torch's tensordot permutes and reshapes (copies) its operands",
    "linalg:slogdet": "flowgrad saves both outputs, its rule reads only the sign",
    "more:ldexp_float": "torch's ldexp is x * 2**e and saves the power",
    "special:ndtr": "torch's ndtr is (1 + erf(x / sqrt(2))) / 2 and saves x / sqrt(2)",
    "nn_misc:sdpa": "torch's attention scales q first and saves the scaled copy",
    "nn_misc:sdpa_causal_scale": "torch's attention scales q first and saves the scaled copy",
    "nn_misc:sdpa_bool_mask_empty_row": "torch's attention scales q first (a copy)",
    "nn_misc:sdpa_float_mask": "torch's attention scales q first and saves the scaled copy",
}


# Rows whose torch op saves an alias of the input that autograd does not see as one (kron's
# _unsafe_view of its operands): the write is legal there and its backward reads the written
# values; flowgrad's kron does the same (ops/odds.py), compared with torch after the write.
TORCH_READS_THE_WRITE = {"odds:kron", "odds:kron_mixed_dims"}


@pytest.mark.parametrize(("fn", "specs"), _rows())
def test_in_place_write_to_saved_tensor(fn, specs, request):
    row = request.node.callspec.id
    arrays = make_arrays(specs, np.float64, 0)
    only_ours = []
    for requires, written in _scenarios(arrays):
        fresh = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        ours = _run(flow, fn, fresh, requires, written)
        if ours is None:
            continue
        where = f"inputs {sorted(requires)} require grad, {written[0]}put {written[1]} written"
        if isinstance(ours, tuple):
            theirs = _run(torch, fn, fresh, requires, written)
            if not isinstance(theirs, tuple) and ours[0] == "backward":
                only_ours.append(f"{where}: only flowgrad raised: {ours[1]}")
                continue
            assert isinstance(theirs, tuple) and theirs[0] == ours[0], (
                f"{where}: only flowgrad raised at the {ours[0]}: {ours[1]}")
            continue
        reference = _run(torch, fn, fresh, requires,
                         written if row in TORCH_READS_THE_WRITE else None)
        for i, a, b in zip(sorted(requires), ours, reference):
            assert (a is None) == (b is None), f"{where}: grad presence of input {i} differs"
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=(
                    f"{where}: gradient of input {i} is not the gradient at the values the "
                    "forward saw"))
    if row in TORCH_SAVES_A_TEMPORARY:
        assert only_ours, f"{row} now matches torch: take it out of TORCH_SAVES_A_TEMPORARY"
    else:
        assert not only_ours, "\n".join(only_ours)


def test_cross_entropy_reads_its_logits_only_to_differentiate_twice():
    """Its plain backward reads the saved log-probs (a write to the logits is legal, as in
    torch); create_graph differentiates softmax(x), so there the write raises."""
    def loss_after_write(create_graph):
        x = flow.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
        logits = x * 1.0
        loss = flow.nn.functional.cross_entropy(logits, flow.tensor([2, 0]))
        with flow.no_grad():
            logits.detach().mul_(0.75)
        return flow.autograd.grad(loss, x, create_graph=create_graph)[0]

    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
    reference = torch.autograd.grad(torch.nn.functional.cross_entropy(x, torch.tensor([2, 0])),
                                    x)[0]
    np.testing.assert_allclose(loss_after_write(False).numpy(), reference.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss_after_write(True)


@pytest.mark.parametrize("program", [
    lambda m, x, c: m.remainder(x, c),  # x's gradient reads nothing: nothing saved
    lambda m, x, c: x * c,              # x's gradient reads c: saved
    lambda m, x, c: x / c,
    lambda m, x, c: c / x,
    lambda m, x, c: x + c,
    lambda m, x, c: m.matmul(x.reshape(1, 3), c.reshape(3, 1)),
])
def test_second_backward_raises_only_where_something_was_saved(program):
    """torch frees saved tensors after a backward and raises only when a node that saved
    some is run again; a node that saved nothing runs any number of times."""
    def raises(m):
        x = m.tensor([0.5, -1.5, 2.0], requires_grad=True)
        c = m.tensor([1.5, 0.75, -1.25])
        y = program(m, x, c).sum()
        y.backward()
        try:
            y.backward()
        except RuntimeError as e:
            assert "second time" in str(e)
            return True
        return False

    assert raises(flow) == raises(torch)


def test_second_backward_through_a_slice_assignment():
    """`x[0:2] = leaf` saves nothing (a basic index): a second loss through x backpropagates."""
    grads = []
    for m in (flow, torch):
        leaf = m.tensor([0.3, -0.3, -1.2], requires_grad=True)
        x = m.zeros(1, 3)
        x[0:2] = leaf
        (x.sin() * 0.5).sum().backward()
        (x.sin() * -0.25).sum().backward()  # the sum of both: 0.25 cos(leaf)
        grads.append(leaf.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6, atol=1e-7)
    assert np.abs(grads[0]).min() > 0.05


QUOTIENTS = {
    "value / x": lambda m, t: 2.0 / t,
    "tensor / x": lambda m, t: m.tensor([[2.0, 3.0], [1.5, 0.7]], dtype=m.float64) / t,
    "x / f(x)": lambda m, t: t / (t * t + 1.0),
}


def _quotient_after_a_data_write(m, quotient, create_graph):
    """A quotient's backward, or the double backward of its create_graph gradient, after a
    write to x through .data (no version bump): it reads what torch's saved. torch's
    `value / x` is reciprocal(x) * value: its backward reads the reciprocal its forward
    made."""
    x = m.tensor([[-0.16, -1.16], [-1.6, 0.94]], dtype=m.float64, requires_grad=True)
    t = x * 1.0
    y = QUOTIENTS[quotient](m, t)
    if create_graph:
        g, = m.autograd.grad(y.sin().sum(), [t], create_graph=True)
        t.data.add_(0.25)
        g.sin().sum().backward()
    else:
        t.data.add_(0.25)
        y.sin().sum().backward()
    return x.grad.tolist()


# (not yet: a divisor's double backward after such a write. flowgrad's rule for b is
# -(dy / b * a) / b, torch's -dy * ((a / b) / b): the saved values mix old and new alike only
# in torch's order, whose nan pattern where dy is 0 differs from flowgrad's masked rules)
@pytest.mark.parametrize("quotient,create_graph", [
    (q, c) for q in sorted(QUOTIENTS) for c in (False, True) if q == "value / x" or not c])
def test_a_quotient_reads_what_torch_saved_after_a_data_write(quotient, create_graph):
    """flowgrad's rule for value / x read x, written since, where torch's reads the
    reciprocal its forward made (a different gradient, no error)."""
    np.testing.assert_allclose(_quotient_after_a_data_write(flow, quotient, create_graph),
                               _quotient_after_a_data_write(torch, quotient, create_graph),
                               rtol=1e-12)


def _idx(m):
    return m.tensor([[0, 2], [1, 0]])


# torch's nodes for these save self (for its sizes, or unread): a write to it after the op fails
# the backward; flowgrad's kept the index alone (or read the input only under create_graph)
SAVES_ITS_INPUT = {
    "gather": lambda m, t: t.gather(1, _idx(m)),
    "take_along_dim": lambda m, t: m.take_along_dim(t, _idx(m), 1),
    "take": lambda m, t: t.take(m.tensor([0, 3])),
    "masked_select": lambda m, t: t.masked_select(t.detach() > 0),
    "cummax": lambda m, t: t.cummax(1)[0],
    "cummin": lambda m, t: t.cummin(1)[0],
    "max_pool1d": lambda m, t: m.nn.functional.max_pool1d(t[None], 2),
    "adaptive_max_pool1d": lambda m, t: m.nn.functional.adaptive_max_pool1d(t[None], 2),
    "avg_pool1d": lambda m, t: m.nn.functional.avg_pool1d(t[None], 2),
    "reflect_pad": lambda m, t: m.nn.functional.pad(t, (2, 1), mode="reflect"),
    "replicate_pad": lambda m, t: m.nn.functional.pad(t[None], (1, 1, 2, 0), mode="replicate"),
    "circular_pad": lambda m, t: m.nn.functional.pad(t[None], (1, 2), mode="circular"),
    # (and these save the indices alone, in both)
    "topk": lambda m, t: t.topk(2, 1)[0],
    "sort": lambda m, t: t.sort(1)[0],
    "index_select": lambda m, t: t.index_select(1, m.tensor([0, 2])),
}


@pytest.mark.parametrize("name", list(SAVES_ITS_INPUT))
def test_a_write_to_an_input_torch_saves_for_its_sizes(name):
    raised = []
    for m in (torch, flow):
        x = m.tensor([[0.5, -1.0, 2.0, 0.1], [1.5, 0.3, -0.7, 0.9]], dtype=m.float64,
                     requires_grad=True)
        t = x * 1
        y = SAVES_ITS_INPUT[name](m, t)
        t.add_(1.0)
        try:
            y.sum().backward()
            raised.append(False)
        except RuntimeError as e:
            assert "modified by an inplace operation" in str(e).replace("in-place", "inplace")
            raised.append(True)
    assert raised[1] == raised[0]


def test_sgn_of_a_real_input_saves_it_and_its_gradient_is_zero():
    # torch's SgnBackward0 saves the input even for a real one (sign's node saves nothing):
    # a write to it fails the backward; the gradient is a zero tensor, 0 at nan too
    got = []
    for m in (torch, flow):
        x = m.tensor([1.0, -2.0, 0.0, float("nan")], dtype=m.float64, requires_grad=True)
        t = x * 1
        y = t.sgn()
        t.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an"):
            y.sum().backward()
        x.sgn().sum().backward()
        got.append(((x.grad + 0).tolist(), type(x.sgn().grad_fn).__name__))
    assert got[1] == got[0]


_F = "m.nn.functional."
KEPT_COMPOSITES = {  # expression of (m, x, t) -> which tensors torch's node checks
    "mse_loss": (_F + "mse_loss(x, t)", "x t"),
    "mse_loss_none": (_F + "mse_loss(x, t, reduction='none')", "x t"),
    "smooth_l1_loss": (_F + "smooth_l1_loss(x, t)", "x t"),
    "huber_loss": (_F + "huber_loss(x, t, delta=0.5)", "x t"),
    "soft_margin_loss": (_F + "soft_margin_loss(x, t.detach())", "x t"),
    "adaptive_avg_pool1d": (_F + "adaptive_avg_pool1d(x[0], 2)", "x"),
    "adaptive_avg_pool2d": (_F + "adaptive_avg_pool2d(x[None], (2, 3))", "x"),
    "adaptive_avg_pool3d": (_F + "adaptive_avg_pool3d(x[None, None], (1, 2, 3))", "x"),
    "interpolate_area": (_F + "interpolate(x, size=3, mode='area')", "x"),
    "grid_sample": (_F + "grid_sample(x[None], t[None, :, :, :2], align_corners=False)", "x t"),
    "cdist": ("m.cdist(x, t)", "x t y"),
    "pdist": (_F + "pdist(x[0])", "x y"),
    "dist": ("m.dist(x, t)", "x t y"),
    "nansum": ("m.nansum(x, 1)", "x"),
    "nanmean": ("m.nanmean(x)", "x"),
    "fft_of_real": ("m.fft.fft(x).real", "x"),  # (torch's r2c, two-sided: FftR2CBackward0)
    "ifft_of_real": ("m.fft.ifft(x, n=3).imag", "x"),
    "rfft": ("m.fft.rfft2(x).real", "x"),
}


def _write_then_backward(m, expr, written):
    rng = np.random.default_rng(3)
    x = m.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    t = m.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    y = eval(expr, {"m": m, "x": x, "t": t})
    with m.no_grad():
        {"x": x, "t": t, "y": y}[written].mul_(0.75)
    try:
        y.sum().backward()
    except RuntimeError as e:
        assert "modified by an in" in str(e)
        return "raised"
    return x.grad.numpy()


@pytest.mark.parametrize("name", sorted(KEPT_COMPOSITES))
def test_composite_whose_torch_node_saves_its_inputs_checks_them(name):
    """A write to the input (target, grid, result) after one of these ops fails the backward
    as torch's (flowgrad's composite saved none of them: it ran, and gave the gradient at the
    forward's values)."""
    expr, checked = KEPT_COMPOSITES[name]
    for written in "xty":
        ours, theirs = (_write_then_backward(m, expr, written) for m in (flow, torch))
        assert isinstance(theirs, str) == (written in checked), (written, "torch")
        if isinstance(theirs, str):
            assert isinstance(ours, str), f"{name}: a write to {written} ran"
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)
