"""Edge values against torch: infinities, NaNs and signed zeros through lerp's two formulas,
remainder's zero results, and the dtypes round's decimals= refuses. Values are compared with
their signs (a zero's too) and NaN positions."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

NAN, INF = float("nan"), float("inf")
EDGES = [-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, NAN, INF, -INF, 3.75]

CALLS = {
    "lerp small weight": lambda T, x: T.lerp(x, T.zeros_like(x), 0.25),
    "lerp half weight": lambda T, x: T.lerp(x, T.zeros_like(x), 0.5),
    "lerp weight 1": lambda T, x: T.lerp(x, T.ones_like(x) * 3, 1.0),
    "lerp large weight": lambda T, x: T.lerp(T.zeros_like(x), x, 0.75),
    "lerp negative weight": lambda T, x: T.lerp(x, T.ones_like(x), -0.75),
    "lerp tensor weight": lambda T, x: T.lerp(x, T.zeros_like(x),
                                              T.linspace(-1, 2, x.numel())),
    "lerp float64": lambda T, x: T.lerp(x.double(), T.zeros_like(x).double(), 0.7),
    "method lerp_": lambda T, x: x.clone().lerp_(T.zeros_like(x), 0.9),
    "remainder by negative": lambda T, x: T.remainder(x, -1.5),
    "remainder by positive": lambda T, x: T.remainder(x, 1.5),
    "remainder float64": lambda T, x: T.remainder(x.double(), -0.5),
    "x % y": lambda T, x: x % T.full_like(x, -2.5),
    "round int decimals": lambda T, x: T.round(T.tensor([15, 25]), decimals=-1),
    "round int": lambda T, x: T.round(T.tensor([15, 25])),
    "round decimals": lambda T, x: T.round(x, decimals=1),
    "unary plus of bool": lambda T, x: +(x > 0), "positive of bool": lambda T, x: T.positive(x > 0),
    "unary plus": lambda T, x: +x,
}


@pytest.mark.parametrize("name", list(CALLS))
def test_edge_values_as_torch(name):
    expected, torch_error = outcome(lambda: CALLS[name](torch, torch.tensor(EDGES)))
    got, error = outcome(lambda: CALLS[name](flow, flow.tensor(EDGES)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        e, g = expected.numpy(), got.numpy()
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=2e-7, atol=0)
        finite = ~np.isnan(e)
        np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(e[finite]))


def test_lerp_gradients_through_both_formulas():
    """The weight picks the formula per element; the gradients are those of the line."""
    x = flow.tensor([1.0, -2.0, 0.5, 3.0], dtype=flow.float64, requires_grad=True)
    end = flow.tensor([0.5, 1.0, -1.0, 2.0], dtype=flow.float64, requires_grad=True)
    weight = flow.tensor([0.1, 0.5, 0.9, -0.7], dtype=flow.float64, requires_grad=True)
    assert flow.autograd.gradcheck(flow.lerp, (x, end, weight))
    assert flow.autograd.gradgradcheck(flow.lerp, (x, end, weight))
    for w in (0.25, 0.75):
        assert flow.autograd.gradcheck(lambda a, b, w=w: flow.lerp(a, b, w), (x, end))


INPLACE_ARGS = {"addmv_": lambda T: (T.ones(2, 3), T.ones(3)),
                "as_strided_": lambda T: ((2,), (2,)), "clamp_": lambda T: (0.3, 0.6),
                "clamp_max_": lambda T: (0.5,),
                "clamp_min_": lambda T: (0.5,), "clip_": lambda T: (0.3, 0.6),
                "fill_": lambda T: (2.5,), "gcd_": lambda T: (T.tensor([4, 6, 9]),),
                "lcm_": lambda T: (T.tensor([4, 6, 9]),), "ldexp_": lambda T: (T.tensor([2.0]),),
                "index_put_": lambda T: ((T.tensor([0, 2]),), T.tensor([7.0, 8.0])),
                "xlogy_": lambda T: (T.tensor([2.0, 3.0, 0.5]),), "logit_": lambda T: (0.1,)}
INPLACE = ["abs_", "acos_", "acosh_", "addmv_", "arccos_", "arcsin_", "arcsinh_", "arctan_",
           "arctanh_", "as_strided_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
           "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_",
           "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
           "index_put_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_",
           "nan_to_num_", "neg_", "negative_", "rad2deg_", "reciprocal_", "round_", "rsqrt_",
           "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_",
           "xlogy_", "detach_", "conj_physical_", "arccosh_"]


@pytest.mark.parametrize("name", INPLACE)
def test_torch_namespace_inplace_functions(name):
    """torch.sigmoid_(x) and the other in-place functions of the torch namespace: x itself,
    written as x.sigmoid_() writes it."""
    results = []
    for T in (torch, flow):
        integer = name in ("gcd_", "lcm_")
        x = T.tensor([4, 2, 3]) if integer else T.tensor([0.25, 0.5, 0.75]) + (
            1.5 if name in ("acosh_", "arccosh_") else 0)
        if name == "addmv_":
            x = T.tensor([0.25, 0.5])
        args = INPLACE_ARGS.get(name, lambda T: ())(T)
        assert getattr(T, name)(x, *args) is x
        results.append(x.double().numpy() if not integer else x.numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-6)


NAN_MATRIX = {
    "addmm alpha 0": lambda T: T.addmm(T.ones(2, 2), T.full((2, 3), NAN), T.ones(3, 2), alpha=0),
    "addmv alpha 0": lambda T: T.addmv(T.ones(2), T.full((2, 3), INF), T.ones(3), alpha=0),
    "addbmm alpha 0": lambda T: T.addbmm(T.ones(2, 2), T.full((1, 2, 3), NAN), T.ones(1, 3, 2),
                                         alpha=0),
    "baddbmm alpha 0": lambda T: T.baddbmm(T.ones(1, 2, 2), T.full((1, 2, 3), NAN),
                                           T.ones(1, 3, 2), alpha=0),
    "addr alpha 0": lambda T: T.addr(T.ones(2, 2), T.full((2,), NAN), T.ones(2), alpha=0),
    "addmm alpha 0 beta 0": lambda T: T.addmm(T.full((2, 2), NAN), T.full((2, 3), NAN),
                                              T.ones(3, 2), alpha=0, beta=0),
    "einsum sublists": lambda T: T.einsum(T.arange(24.0).reshape(2, 3, 4), [0, 1, 2],
                                          T.arange(12.0).reshape(4, 3), [2, 1], [0]),
    "einsum sublist ellipsis": lambda T: T.einsum(T.arange(6.0).reshape(2, 3), [Ellipsis, 1],
                                                  [1, Ellipsis]),
    "einsum sublist range": lambda T: T.einsum(T.ones(2), [52]),
    "einsum bool sum": lambda T: T.einsum("ij->j", T.arange(6.0).reshape(2, 3) > 1),
    "einsum bool trace": lambda T: T.einsum("ii", T.eye(3) > 0),
    "einsum bool contraction": lambda T: T.einsum("i,i->", T.ones(3) > 0, T.ones(3) > 0),
    "einsum bool outer": lambda T: T.einsum("i,j->ij", T.ones(2) > 0, T.ones(3) > 0),
    "chain_matmul of one": lambda T: T.chain_matmul(T.arange(4.0).reshape(2, 2)),
}


@pytest.mark.parametrize("name", list(NAN_MATRIX))
def test_products_as_torch(name):
    """addmm, addmv and addbmm read no operand at alpha 0 (BLAS's rule: a nan in them does not
    reach the result; baddbmm and addr do propagate it, as torch's); einsum's sublist form and
    its bool rules (a sum counts in int64, a contraction is refused); chain_matmul of one
    matrix."""
    expected, torch_error = outcome(lambda: NAN_MATRIX[name](torch))
    got, error = outcome(lambda: NAN_MATRIX[name](flow))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_alpha_zero_keeps_the_operands_in_the_graph():
    grads = []
    for T in (torch, flow):
        a, b = T.ones(2, 3, requires_grad=True), T.ones(3, 2, requires_grad=True)
        i = T.ones(2, 2, requires_grad=True)
        T.addmm(i, a, b, alpha=0, beta=0.5).sum().backward()
        grads.append([a.grad.tolist(), b.grad.tolist(), i.grad.tolist()])
    assert grads[0] == grads[1]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("wdtype", ["float32", "float64", "float16", "complex64"])
def test_lerp_of_integers_with_a_0d_float_weight_promotes_as_torch(dtype, wdtype):
    # flowgrad refused ("lerp_kernel_tensor not implemented for Long"); torch computes in the
    # weight's dtype
    a, b = np.array([1, 2, 0]), np.array([5, 6, 1])
    w = np.array(0.75 + (0.5j if wdtype == "complex64" else 0))
    got, want = (m.lerp(m.tensor(a).to(getattr(m, dtype)), m.tensor(b).to(getattr(m, dtype)),
                        m.tensor(w, dtype=getattr(m, wdtype))) for m in (flow, torch))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-3)
