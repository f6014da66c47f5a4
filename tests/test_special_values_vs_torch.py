"""Every elementwise op at nan, +-inf, +-0, kinks and poles against torch, values and
gradients (tests/special_values_vs_torch.py). A new difference fails; the known ones are
listed with the reason, and one that disappears must leave the list."""
from __future__ import annotations

import numpy as np
import pytest
import special_values_vs_torch as sv

_NAN_INPUT = ("the gradient at a nan input: torch's conventions differ op by op (relu passes "
              "the gradient, softshrink blocks it, ...); flowgrad's value is nan as torch's")
KNOWN = {
    **dict.fromkeys([("unary", "F.elu"), ("unary", "F.selu"),
                     ("unary", "F.celu"), ("unary", "F.hardswish"),
                     ("unary", "special.i1"), ("unary", "special.i1e"),
                     ("unary", "special.logit_eps")], _NAN_INPUT),
    ("unary", "digamma"): ("trigamma: flowgrad is exact (pi^2/6 at 1, inf at the poles); torch "
                           "is 5e-10 off and finite at the poles"),
    ("unary", "logit"): ("outside [0, 1] torch's gradient is nan; flowgrad's log rule masks "
                         "the invalid branch"),
    ("unary", "F.gelu"): "float32 gelu(inf): torch's vectorised kernel gives nan, flowgrad inf",
    ("unary", "special.ndtri"): "float32 gradient at 1e-30: 8e-6 apart",
    ("unary", "special.log_ndtr"): ("the gradient phi/Phi for x << 0: flowgrad's 2 / erfcx(-x / "
                                    "sqrt 2) is ~-x (1e30 at -1e30, inf at -inf); torch's "
                                    "exp(-x^2/2 - log_ndtr) is nan/inf there, 5e-6 off at -20 "
                                    "in float32 (tests/test_special_fuzz.py)"),
}


@pytest.fixture(scope="module")
def differences():
    return sv.all_differences()


def test_no_new_special_value_differences(differences):
    new = {k: v for k, v in differences.items() if (k[0], k[1]) not in KNOWN}
    assert not new, "\n".join(f"{k}: {v[:300]}" for k, v in new.items())


# differences that come from torch's AVX-512 kernels: on a CPU without AVX-512 torch runs its
# AVX2 loops, whose lanes give what flowgrad gives
AVX512_ONLY = {("unary", "F.elu"), ("unary", "F.selu"), ("unary", "F.celu"),
               ("unary", "F.gelu"), ("unary", "special.logit_eps"), ("unary", "logit")}


def test_known_special_value_differences_still_differ(differences):
    import torch

    seen = {(k[0], k[1]) for k in differences}
    expected = set(KNOWN)
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        expected -= AVX512_ONLY
    assert not expected - seen, f"now equal to torch: {sorted(expected - seen)}"


def test_nan_inputs_pass_the_gradient_where_torch_is_consistent():
    # relu, threshold, maximum/minimum and cummax/cummin treat nan as torch does in its
    # vectorised and scalar loops alike: relu(nan) and threshold(nan) are nan with dy passed
    # through; maximum/minimum give a nan pair's whole gradient to both inputs; a running
    # extreme's index moves to each nan, and so does an adaptive max pool's. (hardtanh, relu6,
    # elu and hardshrink are not listed: torch's nan gradient there depends on whether the
    # element falls in a vector lane or in the scalar tail.)
    import torch

    import flowgrad as flow
    nan = float("nan")
    x = [nan, -1.0, 0.0, 2.0, nan, 0.5, -nan, 3.0, 1.0]
    other = [1.0, nan, 0.0, nan, nan, 0.25, 2.0, 3.0, -4.0]
    dy = [1.0, nan, np.inf, 3.0, 2.0, -1.0, 0.5, 4.0, 0.25]
    programs = {
        "relu": lambda m, a, b: m.relu(a),
        "threshold": lambda m, a, b: m.nn.functional.threshold(a, 0.75, -2.0),
        "maximum": lambda m, a, b: m.maximum(a, b),
        "minimum": lambda m, a, b: m.minimum(a, b),
        "cummax": lambda m, a, b: a.cummax(0)[0],
        "cummin": lambda m, a, b: b.cummin(0)[0],
        "adaptive_max_pool1d": lambda m, a, b: m.nn.functional.adaptive_max_pool1d(
            a[None, None], 2).flatten(),
    }
    for name, program in programs.items():
        results = []
        for m in (torch, flow):
            a = m.tensor(x, requires_grad=True)
            b = m.tensor(other, requires_grad=True)
            y = program(m, a, b)
            grads = m.autograd.grad(y, (a, b), m.tensor(dy[:y.numel()]), allow_unused=True,
                                    materialize_grads=True)
            results.append([y.detach().numpy()] + [g.numpy() for g in grads])
        for got, want in zip(results[1], results[0]):
            np.testing.assert_array_equal(got, want, err_msg=name)


def test_fixed_special_points():
    # found by this comparison and fixed: pow's gradients at 0 ** 0, atan2's at the origin,
    # xlogy's and xlog1py's x-gradient at x == 0, angle(+-inf), hardshrink(nan)
    for kind, name in [("binary", "pow"), ("binary", "float_power"), ("binary", "atan2"),
                       ("unary", "angle"), ("unary", "special.xlog1py_1")]:
        for dtype in (np.float64, np.float32):
            assert sv.compare(kind, name, dtype) is None, (name, dtype)
    # and, from torch's OpInfo reference inputs, made torch's: copysign, hypot, logaddexp(2),
    # nextafter, xlogy and xlog1py gradients at nan, inf and 0/0 points; shrinks at nan; lgamma
    for kind, name in [("binary", "copysign"), ("binary", "hypot"), ("binary", "logaddexp"),
                       ("binary", "logaddexp2"), ("binary", "nextafter"), ("binary", "xlogy"),
                       ("binary", "special.xlog1py"), ("unary", "F.hardshrink"),
                       ("unary", "F.softshrink"), ("unary", "lgamma")]:
        assert sv.compare(kind, name, np.float64) is None, name
