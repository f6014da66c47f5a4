"""torch._foreach_* against torch: every function and overload (numbers, lists of numbers,
0-d tensors, lists of tensors, alpha, per-tensor values), out of place with gradients and in
place (the list given returned, its tensors written), and the same errors for bad lists."""
import numpy as np
import pytest
import torch

import flowgrad as flow

SHAPES = [(3,), (2, 2), ()]
UNARY = ["abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
         "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
         "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc"]
POSITIVE = {"acos", "asin", "log", "log10", "log1p", "log2", "rsqrt", "sqrt"}


def _lists(m, n=3, seed=0, positive=False, requires_grad=False):
    rng = np.random.default_rng(seed)
    out = []
    for shape in SHAPES[:n]:
        a = rng.uniform(0.1, 0.9, shape) if positive else rng.uniform(-2, 2, shape)
        out.append(m.tensor(a, requires_grad=requires_grad))
    return out


# name -> f(m, self, others): the call; `others` are more lists like self
CALLS = {f"{op}": (lambda op: lambda m, s, o: getattr(m, f"_foreach_{op}")(s))(op)
         for op in UNARY}
CALLS.update({
    "add_scalar": lambda m, s, o: m._foreach_add(s, 1.5),
    "add_scalars": lambda m, s, o: m._foreach_add(s, [1.0, -2.0, 0.5]),
    "add_list_alpha": lambda m, s, o: m._foreach_add(s, o[0], alpha=-0.5),
    "add_0d_tensor_alpha": lambda m, s, o: m._foreach_add(s, m.tensor(2.0, dtype=m.float64),
                                                          alpha=3),
    "sub_list_alpha": lambda m, s, o: m._foreach_sub(s, o[0], alpha=2),
    "sub_scalar": lambda m, s, o: m._foreach_sub(s, 0.25),
    "mul_list": lambda m, s, o: m._foreach_mul(s, o[0]),
    "mul_0d_tensor": lambda m, s, o: m._foreach_mul(s, m.tensor(-3.0, dtype=m.float64)),
    "mul_scalars": lambda m, s, o: m._foreach_mul(s, [2, 3, 4]),
    "div_list": lambda m, s, o: m._foreach_div(s, o[0]),
    "div_scalar": lambda m, s, o: m._foreach_div(s, 4.0),
    "pow_scalar": lambda m, s, o: m._foreach_pow(s, 2),
    "pow_list": lambda m, s, o: m._foreach_pow([t.abs() + 0.5 for t in s], o[0]),
    "pow_scalars": lambda m, s, o: m._foreach_pow(s, [1, 2, 3]),
    "pow_number_base": lambda m, s, o: m._foreach_pow(2.0, s),
    "clamp_min_scalar": lambda m, s, o: m._foreach_clamp_min(s, 0.1),
    "clamp_max_list": lambda m, s, o: m._foreach_clamp_max(s, o[0]),
    "maximum_list": lambda m, s, o: m._foreach_maximum(s, o[0]),
    "minimum_scalars": lambda m, s, o: m._foreach_minimum(s, [0.0, 1.0, -1.0]),
    "addcmul": lambda m, s, o: m._foreach_addcmul(s, o[0], o[1], value=0.5),
    "addcmul_scalars": lambda m, s, o: m._foreach_addcmul(s, o[0], o[1], [1.0, 2.0, 3.0]),
    "addcdiv_tensor_values": lambda m, s, o: m._foreach_addcdiv(
        s, o[0], [t.abs() + 1 for t in o[1]], m.tensor([1.0, -1.0, 0.5], dtype=m.float64)),
    "lerp_scalar": lambda m, s, o: m._foreach_lerp(s, o[0], 0.3),
    "lerp_scalars": lambda m, s, o: m._foreach_lerp(s, o[0], [0.1, 0.5, 0.9]),
    "lerp_tensors": lambda m, s, o: m._foreach_lerp(s, o[0], o[1]),
    "norm": lambda m, s, o: m._foreach_norm(s),
    "norm_1": lambda m, s, o: m._foreach_norm(s, 1),
    "norm_inf": lambda m, s, o: m._foreach_norm(s, float("inf")),
    "powsum": lambda m, s, o: m._foreach_powsum(s, 3),
    "max": lambda m, s, o: m._foreach_max(s),
    "mm": lambda m, s, o: m._foreach_mm([t.reshape(-1, 1) for t in s],
                                        [t.reshape(1, -1) for t in o[0]]),
    "clone": lambda m, s, o: m._foreach_clone(s),
})


# torch has no derivative for these two: values only
NO_TORCH_GRAD = {"addcdiv_tensor_values", "powsum"}


def _run(m, name):
    positive = name in POSITIVE
    s = _lists(m, positive=positive, requires_grad=True)
    o = [_lists(m, seed=k + 1, positive=positive, requires_grad=True) for k in range(2)]
    out = CALLS[name](m, s, o)
    loss = sum((t * t).sum() for t in out if t.dtype.is_floating_point)
    leaves = s + o[0] + o[1]
    grads = m.autograd.grad(loss, leaves, allow_unused=True) \
        if loss.requires_grad and name not in NO_TORCH_GRAD else []
    return type(out).__name__, out, grads


@pytest.mark.parametrize("name", list(CALLS))
def test_out_of_place_matches_torch(name):
    kind, ours, our_grads = _run(flow, name)
    their_kind, theirs, their_grads = _run(torch, name)
    assert kind == their_kind == "tuple" and len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    for a, b in zip(our_grads, their_grads):
        assert (a is None) == (b is None)
        if b is not None:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-12)


INPLACE = ([op for op in UNARY] + ["add_scalar", "add_list_alpha", "add_0d_tensor_alpha",
                                   "sub_list_alpha", "mul_list", "mul_0d_tensor", "div_scalar",
                                   "pow_scalar", "clamp_min_scalar", "clamp_max_list",
                                   "maximum_list", "minimum_scalars", "addcmul",
                                   "addcdiv_tensor_values", "lerp_scalar", "lerp_tensors",
                                   "copy", "zero"])


def _run_inplace(m, name):
    s = _lists(m, positive=name in POSITIVE)
    o = [_lists(m, seed=k + 1, positive=name in POSITIVE) for k in range(2)]
    if name in UNARY:
        result = getattr(m, f"_foreach_{name}_")(s)
    elif name == "copy":
        result = m._foreach_copy_(s, o[0])
    elif name == "zero":
        result = m._foreach_zero_(s)
    else:  # the in-place form of the out-of-place call: same arguments
        op = next(p for p in ("addcmul", "addcdiv", "add", "sub", "mul", "div", "pow",
                              "clamp_min", "clamp_max", "maximum", "minimum", "lerp")
                  if name.startswith(p))
        fn = getattr(m, f"_foreach_{op}_")
        real = getattr(m, f"_foreach_{op}")
        try:
            setattr(m, f"_foreach_{op}", fn)
            result = CALLS[name](m, s, o)
        finally:
            setattr(m, f"_foreach_{op}", real)
    return result is s, [t.numpy() for t in s]


@pytest.mark.parametrize("name", INPLACE)
def test_in_place_matches_torch(name):
    (ours, our_values), (theirs, their_values) = _run_inplace(flow, name), \
        _run_inplace(torch, name)
    assert ours and theirs  # the list given, returned
    for a, b in zip(our_values, their_values):
        np.testing.assert_allclose(a, b, rtol=1e-12)


BAD = {
    "empty_list": lambda m: m._foreach_add([], 1),
    "lengths": lambda m: m._foreach_add([m.ones(2), m.ones(2)], [m.ones(2)]),
    "scalar_list_length": lambda m: m._foreach_mul([m.ones(2), m.ones(2)], [1.0]),
    "tensor_not_0d": lambda m: m._foreach_add([m.ones(2)], m.ones(2)),
    "empty_max": lambda m: m._foreach_max([m.ones(0)]),
    "leaf_in_place": lambda m: m._foreach_add_([m.ones(2, requires_grad=True)], 1),
    "integer_in_place_float": lambda m: m._foreach_mul_([m.ones(2, dtype=m.int64)], 1.5),
    "integer_out_of_place": lambda m: m._foreach_add([m.ones(2, dtype=m.int64)], 1.5),
}


@pytest.mark.parametrize("name", list(BAD))
def test_errors_as_torch(name):
    outcomes = []
    for m in (flow, torch):
        try:
            result = BAD[name](m)
            outcomes.append(("ok", [t.tolist() for t in result] if result else None))
        except RuntimeError as e:
            outcomes.append(("raise", type(e)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("name", sorted(NO_TORCH_GRAD))
def test_gradients_torch_lacks_by_finite_differences(name):
    """torch has no derivative for these; flowgrad's (its ops') against float64 finite
    differences."""
    def f(*leaves):
        s, o = list(leaves[:3]), [list(leaves[3:6]), list(leaves[6:])]
        return tuple(CALLS[name](flow, s, o))
    leaves = _lists(flow, requires_grad=True) + _lists(flow, seed=1, requires_grad=True) + \
        _lists(flow, seed=2, requires_grad=True)
    assert flow.autograd.gradcheck(f, leaves)
