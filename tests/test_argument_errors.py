"""Arguments refused as torch refuses them: the same exception class, and a message that
starts with the function the user called (not an inner function's name or a NumPy
conversion's words), followed by the argument types where the call did not bind."""
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
