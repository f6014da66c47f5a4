"""gradcheck / gradgradcheck as users' testing tools: random functions (op compositions, custom
Functions with right or wrongly drawn backwards) under random options must get torch's verdict
(True, False, or the same exception class) and torch's precision warning: see
tests/gradcheck_fuzz.py. Then one test per difference the fuzz found."""
from __future__ import annotations

import warnings

import fuzz_common
import gradcheck_fuzz as gf
import pytest
import torch
from torch.autograd.gradcheck import GradcheckError as TorchGradcheckError

import flowgrad as flow


@pytest.mark.parametrize("seed", range(1000))
def test_gradcheck_verdict_matches_torch(seed):
    verdict = gf.check(seed)
    assert verdict is None, f"{gf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_gradcheck_verdicts_match_torch():
    fuzz_common.assert_seeds_agree(gf.check, range(1000, 20000))


def test_the_fuzz_draws_passing_failing_and_raising_checks():
    verdicts = {gf.run(torch, gf.generate(s))[0] for s in range(40)}
    assert {True, False, "GradcheckError", "RuntimeError"} <= verdicts


def test_known_torch_bug_is_still_torchs():
    # KNOWN (gradcheck_fuzz.KNOWN): torch's fast forward-mode check of a function with an
    # output that does not require grad indexes past its analytical list; flowgrad checks it
    case = next(c for c in map(gf.generate, range(1000)) if gf.known(c) and c["kind"] == "ops")
    assert gf.run(torch, case)[0] == "IndexError"
    assert gf.run(flow, case)[0] is True


def _both(make, inputs, check="gradcheck", **opts):
    """{module: verdict} of m.autograd.<check>(make(m), inputs(m), **opts): True/False or the
    exception's class name, GradcheckError for either framework's."""
    out = {}
    for m in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out[m] = getattr(m.autograd, check)(make(m), inputs(m), **opts)
            except (TorchGradcheckError, flow.autograd.GradcheckError):
                out[m] = "GradcheckError"
            except Exception as e:
                out[m] = type(e).__name__
    return out[torch], out[flow]


def _noisy(amp):
    def make(m):
        calls = [0]

        class Noisy(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                calls[0] += 1
                return g * (2 * x + amp * (calls[0] % 2))
        return Noisy.apply
    return make


def _x(m, n=3):
    return (m.linspace(0.5, 1.5, n, dtype=m.float64).requires_grad_(),)


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("nondet_tol, raise_exception", [(0.0, False), (0.0, True),
                                                          (1e-6, False)])
def test_backward_differing_between_runs_fails_beyond_nondet_tol(fast_mode, nondet_tol,
                                                                 raise_exception):
    # torch runs each backward twice: a difference over nondet_tol fails ("not reentrant")
    # even when both runs match the numerical Jacobian; flowgrad ignored nondet_tol and passed
    want, got = _both(_noisy(1e-8), lambda m: _x(m), fast_mode=fast_mode,
                      nondet_tol=nondet_tol, raise_exception=raise_exception)
    assert got == want
    assert want is not True or nondet_tol > 0


@pytest.mark.parametrize("fast_mode", [False, True])
def test_check_grad_dtypes_with_several_inputs_and_outputs(fast_mode):
    # flowgrad's dtype check ran a backward per input on a freed graph: RuntimeError
    def make(m):
        return lambda x, y: ((x * y).sum(), x.exp() * y)
    want, got = _both(make, lambda m: _x(m) + _x(m), check_grad_dtypes=True,
                      fast_mode=fast_mode)
    assert got == want is True


@pytest.mark.parametrize("fast_mode", [False, True])
@pytest.mark.parametrize("check", ["gradcheck", "gradgradcheck"])
def test_an_output_that_does_not_require_grad_is_not_compared(fast_mode, check):
    # torch compares only the outputs that require grad (when one does); flowgrad compared a
    # detached output's numerical Jacobian with a zero analytical one and failed
    def make(m):
        return lambda x: (x * x, x.detach() * 3, (x.detach() * 10).long())
    want, got = _both(make, lambda m: _x(m), check, fast_mode=fast_mode,
                      raise_exception=False)
    assert got == want is True


@pytest.mark.parametrize("fast_mode", [False, True])
def test_no_differentiable_output_needs_a_zero_numerical_jacobian(fast_mode):
    for scale, verdict in ((3.0, "GradcheckError"), (0.0, True)):
        def make(m, scale=scale):
            return lambda x: x.detach() * scale
        assert _both(make, lambda m: _x(m), fast_mode=fast_mode) == (verdict, verdict)
    x = flow.ones(2, dtype=flow.float64, requires_grad=True)
    with pytest.raises(flow.autograd.GradcheckError, match="expected to be zero"):
        flow.autograd.gradcheck(lambda t: t.detach() * 3, (x,))


def _half_undefined(kind):
    """A Function of two outputs with set_materialize_grads(False) that handles either output
    gradient being None, but not both ("raise": a RuntimeError, "ones": a wrong default)."""
    def make(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                if g1 is None and g2 is None:
                    if kind == "raise":
                        raise RuntimeError("backward needs an output gradient")
                    return m.ones(3, dtype=m.float64)
                g1 = 0 if g1 is None else g1
                g2 = 0 if g2 is None else g2
                return g1 * 2 + g2 * 3
        return F.apply
    return make


@pytest.mark.parametrize("kind", ["raise", "ones"])
@pytest.mark.parametrize("check_undefined_grad", [True, False])
@pytest.mark.parametrize("raise_exception", [True, False])
def test_backward_given_only_undefined_output_grads(kind, check_undefined_grad,
                                                    raise_exception):
    # torch's check_undefined_grad also runs the backward with every output's gradient
    # undefined (None in a Function that does not materialize them): it must run and give
    # None or zeros; flowgrad did not check it and passed
    want, got = _both(_half_undefined(kind), lambda m: _x(m),
                      check_undefined_grad=check_undefined_grad,
                      raise_exception=raise_exception)
    assert got == want
    assert (want is True) == (not check_undefined_grad)


def test_undefined_grad_failure_warns_as_torch():
    x = flow.ones(3, dtype=flow.float64, requires_grad=True)
    with pytest.warns(UserWarning, match="check_undefined_grad=False"):
        assert flow.autograd.gradcheck(_half_undefined("ones")(flow), (x,),
                                       raise_exception=False) is False


@pytest.mark.parametrize("n", [2, 5])
def test_fast_mode_error_of_one_sign_does_not_cancel(n):
    # torch's fast mode projects on non-negative random vectors (an error of one sign in
    # every element never cancels) and scales atol by their sums; flowgrad's signed normal
    # vectors let a wrong gradient of 1e-4 per element (a zero Jacobian) pass
    def make(m):
        class F(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return (x * 0).sum()

            @staticmethod
            def backward(ctx, g):
                return g * m.full((n,), 1e-4, dtype=m.float64)
        return F.apply
    want, got = _both(make, lambda m: _x(m, n), fast_mode=True, raise_exception=False)
    assert got == want is False


def test_inputs_torch_warns_about_or_refuses():
    # a complex64 input gave no precision warning (only a dtype under 8 bytes warned); an
    # input with a stride-0 dimension failed in NumPy (ValueError: read-only) for torch's
    # RuntimeError
    for m in (torch, flow):
        z = m.ones(3, dtype=m.complex64, requires_grad=True)
        with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double"):
            assert m.autograd.gradcheck(lambda t: (t * 2).abs().sum(), (z,), eps=1e-3,
                                        atol=1e-2, rtol=1e-2)
        x = m.ones(1, dtype=m.float64).expand(3).requires_grad_()
        with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0"):
            m.autograd.gradcheck(lambda t: (t * t).sum(), (x,))


@pytest.mark.parametrize("masked", [None, False, True])
def test_masked_allows_a_tiny_gradient_from_a_zero_grad_output(masked):
    # torch's masked=True checks a zero grad_output's gradient with allclose, not == 0 (the
    # undefined-grad check still wants exact zeros); flowgrad ignored masked
    def make(m):
        class Biased(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 2 * x + 1e-12 * (x * 0 + 1)
        return Biased.apply
    want, got = _both(make, lambda m: _x(m), masked=masked, check_undefined_grad=False,
                      raise_exception=False)
    assert got == want
    assert (want is True) == bool(masked)


@pytest.mark.parametrize("masked", [False, True])
def test_gradgradcheck_passes_masked_on(masked):
    # a double backward with a tiny gradient from a zero grad_output: gradgradcheck did not
    # pass masked on to its gradcheck
    def make(m):
        class Grad(m.autograd.Function):
            @staticmethod
            def forward(ctx, g, x):
                ctx.save_for_backward(g, x)
                return g * 2 * x

            @staticmethod
            def backward(ctx, gg):
                g, x = ctx.saved_tensors
                return gg * 2 * x + 1e-12 * (x * 0 + 1), gg * 2 * g

        class Square(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return Grad.apply(g, x)
        return Square.apply
    want, got = _both(make, lambda m: _x(m), "gradgradcheck", masked=masked,
                      check_undefined_grad=False, raise_exception=False)
    assert got == want == masked
