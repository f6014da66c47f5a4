"""flow.autograd.gradcheck / gradgradcheck agree with torch's verdicts on the same functions,
with every option: reverse and forward mode (check_forward_ad, check_backward_ad), batched
(check_batched_grad, check_batched_forward_grad), fast and slow, and gradgradcheck's
check_fwd_over_rev."""
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


def _cube(m, wrong_jvp=False, unbatchable=False, detached=False):
    """x^3 with a jvp staticmethod: wrong (2x^2 t), or right but written into a fresh tensor
    in place in both backward and jvp (right in a loop, impossible under vmap), or with a
    backward of the right value built from a detached x (wrong second order)."""
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.x = inputs[0]

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            if detached:
                return 3 * x.detach() ** 2 * dy
            return _written(m, x, 3 * x ** 2 * dy) if unbatchable else 3 * x ** 2 * dy

        @staticmethod
        def jvp(ctx, t):
            x = ctx.x
            if wrong_jvp:
                return 2 * x ** 2 * t
            return _written(m, x, 3 * x ** 2 * t) if unbatchable else 3 * x ** 2 * t
    return Cube.apply


def _written(m, like, value):
    out = m.zeros_like(like)
    out.copy_(value)
    return out


def _ignores_grad_output(m):
    """sum(x^3) whose backward returns 3x^2 whatever dy: a Jacobian check of the scalar
    output passes, torch's zero-cotangent check does not."""
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x ** 3).sum()

        @staticmethod
        def backward(ctx, dy):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2
    return F.apply


CASES = {
    "sin_mul": (lambda m: lambda x, y: (x.sin() * y, x @ y.t()), ((3, 2), (3, 2))),
    "softmax": (lambda m: lambda x: m.softmax(x, dim=-1), ((2, 3),)),
    "wrong_first": (lambda m: _bad_function(m), ((4,),)),
    "wrong_second": (lambda m: _bad_function(m, True), ((4,),)),
    "ignores_grad_output": (_ignores_grad_output, ((3,),)),
}
FORWARD_CASES = {
    "sin_mul": CASES["sin_mul"],
    "softmax": CASES["softmax"],
    "cube": (lambda m: _cube(m), ((4,),)),
    "wrong_jvp": (lambda m: _cube(m, wrong_jvp=True), ((4,),)),
    "unbatchable": (lambda m: _cube(m, unbatchable=True), ((4,),)),
    "wrong_second": (lambda m: _cube(m, detached=True), ((4,),)),
}
OPTIONS = {
    "forward": dict(check_forward_ad=True),
    "forward_only": dict(check_forward_ad=True, check_backward_ad=False),
    "batched": dict(check_batched_grad=True),
    "batched_forward": dict(check_forward_ad=True, check_backward_ad=False,
                            check_batched_forward_grad=True),
}


def _inputs(m, shapes, dtype="float64"):
    rng = np.random.default_rng(0)
    make = (lambda s: rng.standard_normal(s) + 1j * rng.standard_normal(s)) \
        if dtype == "complex128" else rng.standard_normal
    return tuple(m.tensor(make(s), dtype=getattr(m, dtype), requires_grad=True)
                 for s in shapes)


def _verdicts(check, make, shapes, dtype="float64", **options):
    """Each library's verdict, or that it refused (a Function without the jvp that forward
    mode needs: NotImplementedError or RuntimeError in both)."""
    verdicts = []
    for m in (flow, torch):
        try:
            verdicts.append(getattr(m.autograd, check)(
                make(m), _inputs(m, shapes, dtype), raise_exception=False, **options))
        except (NotImplementedError, RuntimeError) as e:
            verdicts.append(f"refused: {type(e).__name__}")
    return verdicts


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_verdicts_match_torch(name, fast_mode):
    make, shapes = CASES[name]
    for check in ("gradcheck", "gradgradcheck"):
        verdicts = _verdicts(check, make, shapes, fast_mode=fast_mode)
        assert verdicts[0] == verdicts[1], (check, verdicts)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("option", list(OPTIONS))
@pytest.mark.parametrize("name", list(FORWARD_CASES))
def test_forward_and_batched_verdicts_match_torch(name, option, fast_mode):
    make, shapes = FORWARD_CASES[name]
    verdicts = _verdicts("gradcheck", make, shapes, fast_mode=fast_mode, **OPTIONS[option])
    assert verdicts[0] == verdicts[1], verdicts


def test_each_wrong_rule_is_caught_by_its_own_option():
    shapes = ((4,),)
    assert _verdicts("gradcheck", lambda m: _cube(m, wrong_jvp=True), shapes) == [True] * 2
    assert _verdicts("gradcheck", lambda m: _cube(m, unbatchable=True), shapes,
                     check_forward_ad=True) == [True] * 2
    x = _inputs(flow, shapes)
    with pytest.raises(flow.autograd.GradcheckError, match="forward mode mismatch"):
        flow.autograd.gradcheck(_cube(flow, wrong_jvp=True), x, check_forward_ad=True)
    with pytest.raises(flow.autograd.GradcheckError, match=r"batched gradients \(vjp\)"):
        flow.autograd.gradcheck(_cube(flow, unbatchable=True), x, check_batched_grad=True)


@pytest.mark.parametrize("options", [dict(check_fwd_over_rev=True),
                                     dict(check_fwd_over_rev=True, check_rev_over_rev=False,
                                          check_undefined_grad=False),
                                     dict(check_batched_grad=True)])
@pytest.mark.parametrize("name", ["sin_mul", "cube", "wrong_jvp", "wrong_second"])
def test_gradgradcheck_options_match_torch(name, options):
    make, shapes = FORWARD_CASES[name]
    verdicts = _verdicts("gradgradcheck", make, shapes, **options)
    assert verdicts[0] == verdicts[1], verdicts


def _conj_times(m, wrong_jvp):
    """z * conj(z) as a Function whose jvp forgets the conjugate when wrong."""
    class F(m.autograd.Function):
        @staticmethod
        def forward(z):
            return z * z.conj()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.z = inputs[0]

        @staticmethod
        def backward(ctx, dy):
            return dy * 2 * ctx.z

        @staticmethod
        def jvp(ctx, t):
            z = ctx.z
            return 2 * (z * t).real if wrong_jvp else t * z.conj() + z * t.conj()
    return F.apply


def _conj_wrong_backward(m):
    class F(m.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            return z.conj() * 2

        @staticmethod
        def backward(ctx, dy):
            return dy * 2  # wrong: dy.conj() * 2
    return F.apply


COMPLEX_CASES = {
    "exp_conj": (lambda m: lambda z: (z * 1j).exp() * z.conj(), "complex128"),
    "abs": (lambda m: lambda z: (z.abs() * z.real, z * z), "complex128"),
    "real_to_complex": (lambda m: lambda x: (x * 1j).exp(), "float64"),
    "conj_wrong_backward": (_conj_wrong_backward, "complex128"),
}


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("name", list(COMPLEX_CASES))
def test_complex_reverse_mode_match_torch(name, fast_mode):
    """Complex outputs are checked through their real and imaginary parts, a complex input
    element's gradient is d/dx + i d/dy, as torch's."""
    make, dtype = COMPLEX_CASES[name]
    verdicts = _verdicts("gradcheck", make, ((3,),), dtype, fast_mode=fast_mode)
    assert verdicts[0] == verdicts[1], verdicts


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("make", [lambda m: lambda z: (z * 1j).exp() * z.conj(),
                                  lambda m: _conj_times(m, False),
                                  lambda m: _conj_times(m, True)])
def test_complex_inputs_forward_mode_match_torch(make, fast_mode):
    verdicts = _verdicts("gradcheck", make, ((3,),), "complex128", fast_mode=fast_mode,
                         check_forward_ad=True, check_backward_ad=False)
    assert verdicts[0] == verdicts[1], verdicts


def test_wrong_function_vmap_rule_in_backward_is_caught():
    """A custom Function used inside a backward, with a wrong vmap staticmethod: the batched
    backward uses that rule, so check_batched_grad fails. (torch's gradcheck vmaps with its
    legacy prototype vmap, which ignores Function.vmap, and passes this one.)"""
    class Double(flow.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, dy):
            return dy * 2

        @staticmethod
        def vmap(info, in_dims, x):
            return x * 3, in_dims[0]  # wrong: 2x

    def square(x):  # d(x^2) = Double(dy) * x through a Function's backward
        class Square(flow.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, dy):
                (x,) = ctx.saved_tensors
                return Double.apply(dy) * x
        return Square.apply(x)

    x = _inputs(flow, ((3,),))
    assert flow.autograd.gradcheck(square, x)
    assert not flow.autograd.gradcheck(square, x, check_batched_grad=True,
                                       raise_exception=False)


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


@pytest.mark.parametrize("options", [dict(check_backward_ad=False),
                                     dict(check_batched_grad=True, check_backward_ad=False,
                                          check_forward_ad=True),
                                     dict(check_batched_forward_grad=True)])
def test_inconsistent_options_are_refused_as_torch(options):
    for m in (flow, torch):
        x = m.ones(2, dtype=m.float64, requires_grad=True)
        with pytest.raises(AssertionError, match="Expected at least|requires check_"):
            m.autograd.gradcheck(lambda t: t * 2, (x,), **options)
