"""Arguments refused as torch refuses them: the same exception class, and a message that
starts with the function the user called (not an inner function's name or a NumPy
conversion's words), followed by the argument types where the call did not bind."""
import contextlib
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

# (call over x, a float 3x4 tensor; y another; xi an int64 one; b a 2x3x4 batch) -> name
REFUSED = [
    ("x.eq_(y, 0, 2)", "eq_"),
    ("x.logical_or_()", "logical_or_"),
    ("x.arctanh_(-2)", "arctanh_"),
    ("xi.bitwise_left_shift_(-1, xi)", "bitwise_left_shift_"),
    ("x.true_divide_(y, y)", "true_divide_"),
    ("x.absolute_(y, y)", "absolute_"),
    ("x.fix_(y, 0.5)", "fix_"),
    ("x.clip_(3, y, y)", "clip_"),
    ("xi.floor_divide_(xi, 0, y)", "floor_divide_"),
    ("x.add_(y, y, y)", "add_"),
    ("x.mul_()", "mul_"),
    ("x.exp_(1)", "exp_"),
    ("x.cumsum_(y)", "cumsum_"),
    ("x.swapaxes_(y, y)", "swapaxes_"),
    ("x.index_add_(y, y, -1.5)", "index_add_"),
    ("m.sum(x, x)", "sum"),
    ("m.sum(x, x, out=y)", "sum"),
    ("m.cumsum(x, y, out=y)", "cumsum"),
    ("m.logsumexp(x, y, out=y)", "logsumexp"),
    ("m.zeros(4).scatter_add_(0, m.tensor([1]), x)", "scatter_add"),
    ("x.uniform_(y)", "uniform_"),
    ("x.normal_(y, y)", "normal_"),
    ("x.resize_(-1, y, None)", "resize_"),
    ("x.exponential_(y)", "exponential_"),
    ("x.exponential_(None)", "exponential_"),
    ("x.exponential_(1 + 1j)", "exponential_"),
    ("x.geometric_(None)", "geometric_"),
    ("x.cauchy_(y)", "cauchy_"),
    ("x.log_normal_(1, None)", "log_normal_"),
    ("x.heaviside(-1)", "heaviside"),
    ("m.heaviside(x, 1.0)", "heaviside"),
    ("s.addmm_(s, s, s)", "addmm_"),
    ("x.neg().relu(1)", "relu"),  # (Tensor.relu took F.relu's `inplace`: x.relu(1) wrote x)
    ("x.relu(True)", "relu"),
    ("m.relu(x, True)", "relu"),
    ("m.selu(x, True)", "selu"),
    ("m.celu(x, 1.0, True)", "celu"),
    ("m.threshold(x, 0.5, 2.0, True)", "threshold"),
    ("b.baddbmm_(b, b, -2)", "baddbmm_"),
]


def _namespace(m):
    return {"m": m, "x": m.ones(3, 4), "y": m.ones(3, 4), "xi": m.ones(3, 4, dtype=m.int64),
            "s": m.ones(3, 3), "b": m.ones(2, 3, 3)}


@pytest.mark.parametrize("call,name", REFUSED)
def test_refused_as_torch_names_the_function(call, name):
    with pytest.raises(Exception) as want:
        eval(call, _namespace(torch))  # noqa: S307 - the table's own calls
    ns = _namespace(flow)
    before = {k: v.clone() for k, v in ns.items() if k != "m"}
    with pytest.raises(type(want.value)) as info:
        eval(call, ns)  # noqa: S307
    text = str(info.value)
    assert text.startswith(name + "("), text
    assert "<locals>" not in text and "<lambda>" not in text, text
    for k, v in before.items():  # (refused before anything was written)
        assert flow.equal(ns[k], v), k


def test_a_call_that_does_not_bind_lists_the_argument_types():
    with pytest.raises(TypeError, match=r"^eq_\(\) received an invalid combination of "
                                        r"arguments - got \(Tensor, int, int\)"):
        flow.ones(2).eq_(flow.ones(2), 0, 2)


def test_a_callable_argument_keeps_its_own_refusal():
    """x.apply_(f) of an f of the wrong arity: the user's function refused, not apply_."""
    with pytest.raises(TypeError, match=r"<lambda>\(\) takes 0 positional"):
        flow.ones(2).apply_(lambda: 1.0)


@pytest.mark.parametrize("value", [2, 2.5, True, np.float32(2), "t0", "t0i"])
def test_float_arguments_take_what_torch_takes(value):
    results = []
    for m in (torch, flow):
        v = {"t0": m.tensor(2.0), "t0i": m.tensor(3)}.get(value, value) \
            if isinstance(value, str) else value
        m.manual_seed(0)
        x = m.ones(4).exponential_(v)
        results.append(x.shape)
    assert results[0] == tuple(results[1])


# torch's deprecated signatures its parser still takes (old optimizers' code): values and
# gradients as torch's
DEPRECATED = [
    "x.add(2, y)", "x.add(2, 3)", "x.sub(2, y)", "m.sub(x, 2, y)", "m.sub(x, 2, 3)",
    "m.add(x, 2, 3)", "m.add(x, 2, y)", "x.add(m.tensor(2.0), y)", "m.rsub(x, 2, 3)",
    "x.addcdiv(0.5, y, x + 2)", "m.addcdiv(x, 0.5, y, x + 2)", "m.addcmul(x, 2, y, y)",
    "x.clone().addcmul_(0.5, y, y)", "x.clone().add_(-0.1, y)", "x.clone().sub_(2, -1)",
    "x.clone().addcdiv_(2, y, x + 1)", "xi.add(2, False)", "xi.subtract(0.5, 2)",
    "xi.sub(2, 0.5)", "x.subtract(m.tensor(2.0), 3)", "x.clone().subtract_(2, 2)",
    "x.add(2, m.ones(3, 3))",
    "v.addmv(2, M, x)", "v.addmv(2, 3, M, x)", "M.addr(2, v, x)", "M.addr(2, 3, v, x)",
    "B.baddbmm(2, B, B)", "B.baddbmm(2, 3, B, B)", "M.addbmm(2, B, B)", "M.addbmm(2, 3, B, B)",
    "m.addmm(2, M, M, M)", "m.addmm(2, M, 3, M, M)", "M.clone().addmm_(2, M, M)",
    "m.addmv(2, v, M, x)", "m.baddbmm(2, B, 3, B, B)", "M.clone().addr_(2, 3, v, x)",
    "m.add(x.detach(), 2, y.detach(), out=m.empty(3))",
    "m.addmm(2, M.detach(), M.detach(), M.detach(), out=m.empty(3, 3))",
]


def _deprecated_namespace(m):
    x = m.tensor([1.0, -2.0, 0.5], requires_grad=True)
    y = m.tensor([0.25, 3.0, -1.0], requires_grad=True)
    v = m.tensor([2.0, 1.0, -1.0], requires_grad=True)
    M = m.tensor([[1.0, 2.0, 0.0], [0.5, -1.0, 2.0], [3.0, 0.0, 1.0]], requires_grad=True)
    B = (M * 0.5).expand(2, 3, 3) + 0.0
    return {"m": m, "x": x, "y": y, "v": v, "M": M, "B": B, "xi": m.tensor([1, -2, 3])}


@pytest.mark.parametrize("call", DEPRECATED)
def test_deprecated_signatures_as_torch(call):
    results = []
    for m in (torch, flow):
        ns = _deprecated_namespace(m)
        with _quiet():
            out = eval(call, ns)  # noqa: S307 - the table's own calls
        leaves = [ns[k] for k in ("x", "y", "v", "M")]
        grads = [None] * 4
        if out.requires_grad:
            grads = m.autograd.grad(out.sum(), leaves, allow_unused=True)
        results.append([out.detach().numpy()] + [None if g is None else g.numpy()
                                                 for g in grads])
    for want, got in zip(*results):
        assert (want is None) == (got is None)
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-6)


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_an_old_style_optimizer_step_runs_as_in_torch():
    """Adam as code written for torch 0.4 has it: positional scale factors everywhere."""
    finals = []
    for m in (torch, flow):
        m.manual_seed(0)
        w = m.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
        exp_avg, exp_avg_sq = m.zeros(2, 2), m.zeros(2, 2)
        for step in range(1, 4):
            loss = ((w @ m.tensor([1.0, 2.0])) ** 2).sum()
            w.grad = None
            loss.backward()
            grad = w.grad.data
            with _quiet():
                exp_avg.mul_(0.9).add_(1 - 0.9, grad)
                exp_avg_sq.mul_(0.999).addcmul_(1 - 0.999, grad, grad)
                denom = exp_avg_sq.sqrt().add_(1e-8)
                w.data.addcdiv_(-0.01 / (1 - 0.9 ** step), exp_avg, denom)
        finals.append(w.detach().numpy())
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-6)


def test_deprecated_signatures_warn_as_torch():
    from flowgrad import argument_errors
    argument_errors._WARNED.discard("addcmul")
    with pytest.warns(UserWarning, match="This overload of addcmul is deprecated"):
        flow.ones(2).addcmul(0.5, flow.ones(2), flow.ones(2))
