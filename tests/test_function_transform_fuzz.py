"""Random functions built from ops and custom autograd.Functions (both styles, saved inputs,
outputs and intermediates, mark_dirty, mark_non_differentiable, set_materialize_grads(False),
needs_input_grad, once_differentiable, several outputs, inputs returned as-is, non-tensor
arguments), differentiated by backward, torch.autograd.functional and torch.func's
transforms, must give torch's values, gradients and raise/no-raise: see
tests/function_transform_fuzz.py."""
from __future__ import annotations

import function_transform_fuzz as ff
import fuzz_common
import pytest
import torch

import flowgrad as flow

SEEDS = range(500)


@pytest.mark.parametrize("seed", SEEDS)
def test_function_transform_case_matches_torch(seed):
    verdict = ff.check_unknown(seed)
    assert verdict is None, f"{ff.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_function_transform_cases_match_torch():
    fuzz_common.assert_seeds_agree(ff.check_unknown, range(SEEDS.stop, 3000))


@pytest.mark.parametrize("name", list(ff.KNOWN))
def test_known_differences_still_differ(name):
    # each KNOWN entry still explains a difference (else it should go)
    seed = ff.KNOWN[name][-1]
    assert ff.known(seed, ff.check(seed) or "") == name


def _sq(m):
    class Sq(m.autograd.Function):  # no vmap staticmethod, no generate_vmap_rule
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            return 2 * g * ctx.saved_tensors[0]
    return Sq


@pytest.mark.parametrize("call", [
    lambda m, Sq, x: m.func.vmap(lambda y: Sq.apply(x) + y)(x),
    lambda m, Sq, x: m.func.vmap(lambda y: m.func.jvp(lambda y: Sq.apply(x) + y, (y,), (y,)))(x),
    lambda m, Sq, x: m.func.vmap(m.func.grad(lambda y: (Sq.apply(x) * y).sum()))(x),
    lambda m, Sq, x: m.func.jacfwd(lambda a, b: (Sq.apply(a), b * 2)[1], argnums=1)(x, x),
])
def test_vmap_refuses_a_function_without_a_rule_even_where_nothing_is_batched(call):
    # torch's vmap level refuses a custom Function without a batching rule whether or not
    # its arguments are batched; flowgrad ran it where they were not (and a jvp inside
    # vmap never asked the vmap level at all)
    for m in (torch, flow):
        x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64)
        with pytest.raises(RuntimeError, match="vmap"):
            call(m, _sq(m), x)


def _first(m, log=None):
    class First(m.autograd.Function):  # backward returns None for y
        @staticmethod
        def forward(ctx, x, y):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g, None
    return First


def _none_gradient_outcome(m):
    First = _first(m)
    x = m.tensor(0.5, dtype=m.float64, requires_grad=True)
    y = m.tensor(0.7, dtype=m.float64, requires_grad=True)
    z = (y * 2).tanh()
    z.retain_grad()
    seen = []
    z.register_hook(lambda g: seen.append(g))
    First.apply(x, z).backward()
    grads = m.autograd.grad(First.apply(x, y.exp()), [x, y], allow_unused=True)
    g, = m.autograd.grad(First.apply(x, x.sin()) * 2, [x], create_graph=True)
    return [x.grad.item(), y.grad, z.grad, seen, grads[0].item(), grads[1], g.requires_grad]


def test_a_none_gradient_from_a_function_stays_none_through_the_ops_before_it():
    # a custom Function's backward returning None for an input: torch's ops before it get no
    # gradient and pass none on (y.grad None, autograd.grad None, a hook sees None, the
    # create_graph gradient needs no graph); flowgrad made zeros there and ran the ops'
    # backward on them (y.grad 0, and a gradient requiring grad through sin's backward)
    assert _none_gradient_outcome(flow) == _none_gradient_outcome(torch) == \
        [1.0, None, None, [None], 1.0, None, False]


def test_a_hook_may_not_replace_a_none_gradient():
    for m in (torch, flow):
        x = m.tensor(0.5, dtype=m.float64, requires_grad=True)
        z = x * 2
        z.register_hook(lambda g: m.ones(()))
        with pytest.raises(RuntimeError, match="can't replace a None gradient"):
            _first(m).apply(x, z).backward()


def test_jacrev_of_several_outputs_runs_backward_once():
    # torch's jacrev vmaps one vjp over a basis of every output together; flowgrad vmapped
    # one per output, running a custom Function's backward (and its side effects) per output
    calls = {}
    for m in (torch, flow):
        seen = calls[m.__name__] = []

        class Mul(m.autograd.Function):
            generate_vmap_rule = True

            @staticmethod
            def forward(x, y):
                return x * y

            @staticmethod
            def setup_context(ctx, inputs, output):
                ctx.save_for_backward(*inputs)

            @staticmethod
            def backward(ctx, g):
                seen.append(tuple(g.shape))
                x, y = ctx.saved_tensors
                return g * y, g * x
        x = m.tensor([1.0, 2.0, 3.0], dtype=m.float64)
        jac = m.func.jacrev(lambda x: (Mul.apply(x, x), x.sin(), Mul.apply(x, x)[:2]))(x)
        calls[m.__name__ + " jac"] = [j.numpy() for j in jac]
    assert calls["flowgrad"] == calls["torch"]
    for a, b in zip(calls["flowgrad jac"], calls["torch jac"]):
        assert fuzz_common.first_difference([("jacobian", a, b)], 1e-12) is None


def _once_sq(m):
    class OnceSq(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @m.autograd.function.once_differentiable
        def backward(ctx, g):
            return 2 * g * ctx.saved_tensors[0]
    return OnceSq


def _once_outcome(m):
    x = m.tensor([0.5, 1.0], dtype=m.float64, requires_grad=True)
    g, = m.autograd.grad(_once_sq(m).apply(x).sigmoid().sum(), x, create_graph=True)
    unused = m.autograd.grad(g.sum(), x, allow_unused=True)
    try:
        g.sum().backward()
        second = "ran"
    except RuntimeError as e:
        second = "once_differentiable" in str(e)
    return g.requires_grad, unused, second


def test_once_differentiable_results_refuse_a_second_backward():
    # torch's once_differentiable under create_graph (an incoming gradient requiring grad)
    # makes its results require grad through a node that raises on a second backward (not
    # connected to the inputs: autograd.grad of x with allow_unused gives None); flowgrad's
    # results required no grad, so autograd.grad raised and backward named no Function
    assert _once_outcome(flow) == _once_outcome(torch) == (True, (None,), True)


def _dirty_view_unreached(m, through_view):
    """A Function writing a view in place (mark_dirty), whose result then gets no gradient (a
    Function after set_materialize_grads(False) returns None for it)."""
    class Dirty(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class PassLazy(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.set_materialize_grads(False)
            return x.clone(), y * 2

        @staticmethod
        def backward(ctx, gx, gy):
            return gx, None if gy is None else gy * 2

    x0 = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    x1 = m.tensor([3.0, 4.0], dtype=m.float64, requires_grad=True)
    if through_view:
        base = x1.clone().unsqueeze(0)
        Dirty.apply(base[0])
        y = base[0] + 0
    else:
        y = Dirty.apply(x1.clone()) + 0
    out = PassLazy.apply(x0, y)[0]
    return [None if g is None else g.tolist()
            for g in m.autograd.grad(out.sum(), [x0, x1], allow_unused=True)]


@pytest.mark.parametrize("through_view", [True, False])
def test_dirty_view_reached_by_no_gradient_gives_none_as_torch(through_view):
    """torch's CopySlices runs such a Function's backward, and on an undefined gradient
    returns undefined ones without calling it: x1's gradient is None (flowgrad's materialized
    zeros for the Function, as for one not writing a view, where torch does too; fuzz seed
    5004829)."""
    assert _dirty_view_unreached(flow, through_view) == _dirty_view_unreached(torch, through_view)
