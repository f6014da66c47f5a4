"""flow.autograd.gradcheck / gradgradcheck agree with torch's verdicts on the same functions."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def _bad_function(m, wrong_second_order=False):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            if wrong_second_order:  # right value, but built from a detached x
                return dy * 3 * x.detach() ** 2
            return dy * 2 * x ** 2  # wrong: 3x^2
    return F.apply


CASES = {
    "sin_mul": (lambda m: lambda x, y: (x.sin() * y, x @ y.t()), ((3, 2), (3, 2))),
    "softmax": (lambda m: lambda x: m.softmax(x, dim=-1), ((2, 3),)),
    "wrong_first": (lambda m: _bad_function(m), ((4,),)),
    "wrong_second": (lambda m: _bad_function(m, True), ((4,),)),
}


def _inputs(m, shapes):
    rng = np.random.default_rng(0)
    return tuple(m.tensor(rng.standard_normal(s), dtype=m.float64, requires_grad=True)
                 for s in shapes)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_verdicts_match_torch(name, fast_mode):
    make, shapes = CASES[name]
    for check in ("gradcheck", "gradgradcheck"):
        verdicts = [getattr(m.autograd, check)(make(m), _inputs(m, shapes), fast_mode=fast_mode,
                                               raise_exception=False)
                    for m in (flow, torch)]
        assert verdicts[0] == verdicts[1], (check, verdicts)


def test_raises_with_jacobians_and_rejects_no_grad_inputs():
    x = flow.ones(3, dtype=flow.float64, requires_grad=True)
    with pytest.raises(flow.autograd.GradcheckError, match="Jacobian mismatch for output 0"):
        flow.autograd.gradcheck(_bad_function(flow), (x,))
    with pytest.raises(ValueError, match="requires_grad=True"):
        flow.autograd.gradcheck(lambda t: t * 2, (flow.ones(2),))
    with pytest.warns(UserWarning, match="double precision"):
        flow.autograd.gradcheck(lambda t: t * 2, (flow.ones(2, requires_grad=True),),
                                eps=1e-3, atol=1e-2)
    y = flow.randn(4, 3, dtype=flow.float64).t().requires_grad_()  # non-contiguous input
    assert flow.autograd.gradcheck(lambda t: t.exp().sum(0), (y,), check_grad_dtypes=True)
