"""Ops a graph-mode tracer can replay: no op takes a NumPy array as an attribute (index
arrays, loss targets and class weights, batch-norm running statistics are op inputs), so a
traced step replayed on a new batch reads the new data instead of a frozen constant.

An interpreter that refuses any array-valued attribute (recursively inside tuples, lists and
dicts) runs a model that indexes, gathers, scatters, takes losses and batch-normalises,
forward and backward. Embedding and dropout are left out: another change converts them.
"""
import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad.autograd.interpreter import AutogradInterpreter, using_interpreter
from flowgrad.ops.registry import REGISTRY


def _array_in(value):
    if isinstance(value, np.ndarray):
        return True
    if isinstance(value, (tuple, list)):
        return any(_array_in(v) for v in value)
    if isinstance(value, dict):
        return any(_array_in(v) for v in value.values())
    return False


class StrictInterpreter:
    """Eager execution that fails on an op called with an array-valued attribute."""

    seen: set

    def __init__(self):
        self.seen = set()

    def apply(self, op, inputs, attrs):
        for name, value in attrs.items():
            if _array_in(value):
                raise AssertionError(f"op {op.name!r} got a NumPy array in attribute {name!r}"
                                     f"; pass it as an input tensor")
        self.seen.add(op.name)
        return AutogradInterpreter.apply(op, inputs, attrs)


def _model(x, w, logits, bn):
    """One step touching every converted op family; returns a scalar loss."""
    idx = flow.tensor([3, 0, 3, 1])
    cols = flow.tensor([2, 4])
    mask = flow.tensor([True, False, True, True, False, True])
    h = x * 1.5
    terms = [
        h[1:4, ::2].sum(), h[0].sum(), h[None, ..., 1].sum(),           # basic: views
        h[idx].sum(), (h[idx, 1] * 2).sum(), h[:, cols].sum(),          # advanced
        h[1, :, None][cols].sum(), h[mask].sum(), h[h > 0].sum(),       # ints, masks
        h[[0, 2], [1, 1]].sum(),                                         # lists
    ]
    g = h * 1
    g[1:3] = w[:5]                                   # basic setitem
    g[idx, cols.repeat(2)] = w[5:9]                  # advanced setitem (repeats)
    g[mask] = 0.5 * w[9]                             # mask setitem
    g[g > 2] = 0.0                                   # data-dependent mask
    terms.append((g * g).sum())
    gi = flow.tensor([[0, 4], [1, 1], [3, 2], [0, 0], [4, 3], [2, 2]])
    terms += [
        h.gather(1, gi).sum(),
        h.scatter(1, gi, w[:12].reshape(6, 2)).sum(),
        h.scatter_add(1, gi, w[:12].reshape(6, 2)).pow(2).sum(),
        h.scatter_reduce(1, gi, w[:12].reshape(6, 2), "amax", include_self=False).sum(),
        h.scatter_reduce(1, gi, w[:12].reshape(6, 2), "prod").sum(),
        h.index_select(0, idx).sum(), h.index_add(1, cols, w[:12].reshape(6, 2)).pow(2).sum(),
        h.index_fill(1, cols, 0.25).sum(), h.index_copy(0, flow.tensor([5, 0]), h[:2] * 3).sum(),
        h.index_put((idx, cols.repeat(2)), w[:4], accumulate=True).pow(2).sum(),
        h.take(flow.tensor([-1, 7, 7])).sum(), h.masked_select(h > 0.5).sum(),
        h.masked_scatter(h < 0, w[:30].reshape(6, 5)).sum(),
    ]
    target = flow.tensor([0, 2, 1, -100, 2, 3])
    cw = flow.tensor([1.0, 2.0, 0.5, 1.5], dtype=logits.dtype)  # (torch wants one dtype)
    terms += [
        F.cross_entropy(logits, target, weight=cw),
        F.cross_entropy(logits, target.clamp(min=0), reduction="sum"),
        F.cross_entropy(logits, target, label_smoothing=0.1),
        F.nll_loss(logits.log_softmax(1), target, weight=cw, ignore_index=-100),
        F.binary_cross_entropy(logits.sigmoid(), (logits > 0).to(logits.dtype), weight=cw),
        F.binary_cross_entropy_with_logits(logits, (logits < 0).to(logits.dtype), pos_weight=cw),
    ]
    lp = logits[:, None, :].expand(6, 2, 4).log_softmax(2)  # T=6, N=2, C=4
    terms.append(F.ctc_loss(lp, flow.tensor([[1, 2, 2], [3, 1, 0]]), flow.tensor([6, 5]),
                            flow.tensor([3, 2])))
    bn.train()
    y = bn(h)
    bn.eval()
    stats = flow.zeros(3, dtype=h.dtype), flow.ones(3, dtype=h.dtype)
    terms += [(y * y).sum(), bn(h).sum(),
              F.instance_norm(h.reshape(2, 3, 5), *stats).pow(2).sum()]
    return sum(terms[1:], terms[0])


def _run(interpreter=None):
    flow.manual_seed(0)
    x = flow.randn(6, 5, dtype=flow.float64, requires_grad=True)
    w = flow.randn(30, dtype=flow.float64, requires_grad=True)
    logits = flow.randn(6, 4, dtype=flow.float64, requires_grad=True)
    bn = flow.nn.BatchNorm1d(5, dtype=flow.float64)
    if interpreter is None:
        loss = _model(x, w, logits, bn)
        loss.backward()
    else:
        with using_interpreter(interpreter):
            loss = _model(x, w, logits, bn)
            loss.backward()
    return loss, (x.grad, w.grad, logits.grad, bn.weight.grad, bn.running_mean,
                  bn.running_var)


def test_no_op_takes_an_array_attribute():
    strict = StrictInterpreter()
    loss, grads = _run(strict)
    eager_loss, eager_grads = _run()
    # the same results as the default interpreter: the checker changed nothing
    np.testing.assert_allclose(loss.item(), eager_loss.item(), rtol=1e-12)
    for got, want in zip(grads, eager_grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    # every converted family really ran under the checker, forward and backward
    expected = {"getitem", "getitem_backward", "index", "index_backward", "setitem",
                "take_flat", "put_flat", "scatter_reduce_flat", "dim_flat", "flat_count",
                "flat_mask", "flat_nonzero", "cross_entropy", "nll_loss", "nll_coef",
                "binary_cross_entropy", "binary_cross_entropy_with_logits", "ctc_loss",
                "ctc_loss_grad", "batch_stats", "norm_affine", "running_update"}
    assert expected <= strict.seen, expected - strict.seen


def test_double_backward_through_index_has_no_array_attribute():
    strict = StrictInterpreter()
    x = flow.randn(4, 3, dtype=flow.float64, requires_grad=True)
    with using_interpreter(strict):
        y = (x[flow.tensor([0, 0, 2])] ** 2).sum() + (x[1:, 1] ** 3).sum()
        (gx,) = flow.autograd.grad(y, [x], create_graph=True)
        gx.sum().backward()
    assert {"index_backward", "getitem_backward"} <= strict.seen
    want = np.zeros((4, 3))
    want[0] = 4.0  # d/dx of sum(2 * 2x) over two picks of row 0
    want[2] = 2.0
    want[1:, 1] += 6 * x.detach().numpy()[1:, 1]
    np.testing.assert_allclose(x.grad.numpy(), want)


def test_checker_catches_an_array_attribute():
    x = flow.randn(3)
    with using_interpreter(StrictInterpreter()):
        with pytest.raises(AssertionError, match="getitem"):
            REGISTRY["getitem"](x, index=(np.array([0, 2]),))
