"""A second backward() without retain_graph: raises exactly where torch's does.

torch raises only through a node that saved a tensor. A number operand that torch keeps as a
Scalar (add's alpha, lerp's weight, trapezoid's dx) is saved by no one, so a second backward
through such an op works; flowgrad records those products with the unsaved `scale` op.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import flowgrad as flow

EXPRESSIONS = {
    "add_alpha": "m.add(x, y, alpha=2.5)",
    "sub_alpha": "m.sub(x, y, alpha=0.5)",
    "add_negative_alpha": "m.add(x, y, alpha=-1)",
    "lerp_small_weight": "m.lerp(x, y, 0.3)",
    "lerp_large_weight": "m.lerp(x, y, 0.7)",
    "lerp_method": "x.lerp(y, 0.5)",
    "trapezoid_dx": "m.trapezoid(x, dx=0.5)",
    "trapezoid": "m.trapezoid(x)",
    "cumulative_trapezoid_dx": "m.cumulative_trapezoid(x, dx=0.5)",
    "mul_number": "x * 2.0",
    "div_number": "x / 2.0",
    "mul_method": "x.mul(2)",
    "sub_number": "x - 2.0",
    "rsub_number": "2.0 - x",
    "mean": "x.mean(1)",
    "cumsum": "x.cumsum(1)",
    "pad": "m.nn.functional.pad(x, (1, 2))",
    "cat": "m.cat([x, y])",
    "lerp_tensor_weight": "m.lerp(x, y, y.sigmoid())",
    "add_then_mul": "m.add(x, y, alpha=2) * y",
}
# (torch raises through ComplexBackward, which saves real and imag; flowgrad's complex()
# saves nothing; adaptive_avg_pool1d to size 1 is a mean in torch, a product with the window
# matrix in flowgrad, which saves it)
KNOWN = {"complex_abs": ("m.view_as_real(m.complex(x, y))", "raises", "ok"),
         "adaptive_avg_pool1d_to_1": ("m.nn.functional.adaptive_avg_pool1d(x.unsqueeze(0), 1)",
                                      "ok", "raises")}


def _second_backward(m, expr):
    x = m.tensor([[0.3, -1.2, 0.7], [1.3, 0.2, -0.7], [0.5, 0.9, -0.1]], dtype=m.float64,
                 requires_grad=True)
    y = m.tensor([[1.3, 0.2, -0.7], [0.1, 0.4, 0.6], [-0.5, 0.2, 1.1]], dtype=m.float64,
                 requires_grad=True)
    z = eval(expr, {"m": m, "x": x, "y": y})
    z.sum().backward()
    first = x.grad.numpy().copy()
    try:
        z.sum().backward()
    except RuntimeError:
        return "raises", first, None
    return "ok", first, x.grad.numpy()


@pytest.mark.parametrize("name", list(EXPRESSIONS))
def test_second_backward_raises_where_torch_does(name):
    want = _second_backward(torch, EXPRESSIONS[name])
    got = _second_backward(flow, EXPRESSIONS[name])
    assert got[0] == want[0], (name, want[0], got[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    if want[0] == "ok":
        np.testing.assert_allclose(got[2], want[2], rtol=1e-12)


@pytest.mark.parametrize("name", list(KNOWN))
def test_known_differences_stay_as_listed(name):
    expr, torch_answer, flow_answer = KNOWN[name]
    assert _second_backward(torch, expr)[0] == torch_answer
    assert _second_backward(flow, expr)[0] == flow_answer


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float16", "float64", "bool"])
@pytest.mark.parametrize("call", ["trapezoid", "trapezoid_dx", "cumulative_trapezoid_dx"])
def test_trapezoid_dtypes_as_torch(dtype, call):
    def run(m):
        y = m.tensor([1, 2, 4, 7]).to(getattr(m, dtype))
        fn = m.cumulative_trapezoid if call.startswith("cumulative") else m.trapezoid
        try:
            r = fn(y, dx=2) if call.endswith("dx") else fn(y)
        except RuntimeError:
            return "raises"
        return str(r.dtype).split(".")[-1], r.float().numpy()
    want, got = run(torch), run(flow)
    assert (want == "raises") == (got == "raises"), (want, got)
    if want != "raises":
        assert got[0] == want[0]
        np.testing.assert_allclose(got[1], want[1], rtol=1e-3)
