"""Forward AD: writes into the elements of an expand, recorded or not, against torch.

An expand's elements share memory, so a recorded write into them goes to its root base's
elements (`index.write_elements`). make_dual's result is a view with a tangent of its own
over a plain base: that write did not reach it, and its tangent kept the old values, with no
error (forward_fuzz 1077726, 1099603). Two neighbours of the same family: a tangent laid out
otherwise than its primal (a view's tangent then copied, and missed later writes:
forward_fuzz 1028357), and a recorded fill of an expand whose tangent requires grad
(forward_fuzz 1099603's last step).
"""
from __future__ import annotations

import itertools

import pytest
import torch

import flowgrad as flow

_MASK = [[True, False, True], [False, True, False]]
WRITES = {
    "rows": lambda m, e, v: e.__setitem__([0, 1], v),
    "one": lambda m, e, v: e.__setitem__(([0], [1]), v[1]),
    "two": lambda m, e, v: e.__setitem__(([0, 1], [1, 1]), v[:2]),
    "mask": lambda m, e, v: e.masked_fill_(m.tensor(_MASK), v[2]),
    "accumulate": lambda m, e, v: e.index_put_(
        (m.tensor([1]), m.tensor([2])), v[0], accumulate=True),
    "row_slice": lambda m, e, v: e[0].__setitem__(slice(0, 2), v[:2]),
}
# the written tensor x and its root base p: make_dual's view of p (plain, or recorded
# p = leaf * 1), a dual root (an op's result), or plain x = p
PRIMALS = ("make_dual", "make_dual_recorded", "dual_root", "plain")
VALUES = ("constant", "requires_grad", "dual", "dual_requires_grad")


def _write_into_expand(m, write, primal, value):
    """x.expand(2, 3) written by `write`; x's values and tangent, p's tangent, e's tangent."""
    fw = m.autograd.forward_ad

    def t(values, requires_grad=False):
        return m.tensor(values, dtype=m.float64, requires_grad=requires_grad)

    def tangent_of(x):
        tangent = fw.unpack_dual(x).tangent
        return None if tangent is None else tangent.tolist()

    with fw.dual_level():
        p = t([1.0, 2.0, 3.0], primal == "make_dual_recorded")
        if primal == "make_dual_recorded":
            p = p * 1
        if primal == "dual_root":
            p = fw.make_dual(p, t([0.5, -1.0, 2.0])) * 1
            x = p
        elif primal == "plain":
            x = p
        else:
            x = fw.make_dual(p, t([0.5, -1.0, 2.0]))
        v = t([4.0, 5.0, 6.0], value.endswith("requires_grad"))
        if value.startswith("dual"):
            v = fw.make_dual(v * 1 if v.requires_grad else v, t([7.0, 8.0, 9.0]))
        e = x.expand(2, 3)
        WRITES[write](m, e, v)
        return x.detach().tolist(), tangent_of(x), tangent_of(p), tangent_of(e)


def _rounded(result):
    """Nested lists of floats (or None), rounded to compare torch's and flowgrad's."""
    if isinstance(result, (list, tuple)):
        return [_rounded(r) for r in result]
    return None if result is None else round(result, 9)


CASES = list(itertools.product(WRITES, PRIMALS, VALUES))


def _outcome(m, write, primal, value):
    """The values and tangents after the write, or RuntimeError where it is refused."""
    try:
        return _rounded(_write_into_expand(m, write, primal, value))
    except RuntimeError:
        return RuntimeError


@pytest.mark.filterwarnings("ignore:Use of")
@pytest.mark.parametrize("write,primal,value", CASES)
def test_a_write_into_an_expand_updates_the_tangents_as_torch(write, primal, value):
    # a dual value written into the elements of a plain expand is refused (torch writes the
    # primal, then refuses to make the tangent; flowgrad refuses before the write)
    assert _outcome(flow, write, primal, value) == _outcome(torch, write, primal, value)


def test_the_table_has_refusals_and_writes():
    outcomes = [_outcome(torch, *case) is RuntimeError for case in CASES]
    assert 0 < sum(outcomes) < len(outcomes)


def _tangents_after_a_broadcast_copy(m):
    """A copy_ from a broadcast dual source gives a tangent laid out as the target: a view of
    the target read later (reshape) is then a view of its tangent, and sees a later write."""
    fw = m.autograd.forward_ad
    with fw.dual_level():
        x = m.tensor([[0.65, -1.26, -1.77], [-1.36, 0.48, -1.93]], dtype=m.float64)
        source = fw.make_dual(m.tensor([[-0.51, 0.52, -1.2]], dtype=m.float64),
                              m.tensor([[-0.96, -1.86, -0.56]], dtype=m.float64))
        x.copy_(source)
        view = x.reshape(3, -1)
        total = view.sum()
        x[[0, 1]] = total
        return fw.unpack_dual(view).tangent.tolist(), fw.unpack_dual(x).tangent.tolist()


def test_a_tangent_is_laid_out_as_its_primal_so_views_see_later_writes():
    """forward_fuzz 1028357: the reshape's tangent kept the values before the write."""
    assert _rounded(_tangents_after_a_broadcast_copy(flow)) == \
        _rounded(_tangents_after_a_broadcast_copy(torch))


def _fill_of_an_expand_whose_tangent_requires_grad(m):
    """x = make_dual(...) times a dual that requires grad: x's tangent requires grad; a
    recorded fill_ of x.expand(2) must still zero it."""
    fw = m.autograd.forward_ad
    with fw.dual_level():
        y = fw.make_dual(m.tensor([1.39, -0.95], dtype=m.float64, requires_grad=True),
                         m.tensor([-1.46, -0.59], dtype=m.float64))
        x = fw.make_dual(m.tensor(-0.31, dtype=m.float64), m.tensor(0.92, dtype=m.float64))
        x.mul_(y[0])
        x.expand(2).fill_(0.3)
        return fw.unpack_dual(x).tangent.tolist()


def test_a_recorded_fill_of_an_expand_zeroes_a_tangent_that_requires_grad():
    """forward_fuzz 1099603: the tangent kept x.mul_'s value."""
    assert _rounded(_fill_of_an_expand_whose_tangent_requires_grad(flow)) == \
        _rounded(_fill_of_an_expand_whose_tangent_requires_grad(torch))


def _jvp_of_a_write_into_an_expanded_input(m, how):
    """func.jvp of f writing a value that requires grad into x.expand(2, 3), x its input
    (a dual view over the caller's tensor): x's tangent is zero where written."""
    w = m.tensor([4.0, 5.0, 6.0], dtype=m.float64, requires_grad=True)

    def f(x):
        x.expand(2, 3)[[0], [1]] = w[1] * 1
        return x * 1
    xs = m.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=m.float64)
    ts = m.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], dtype=m.float64)
    if how == "jvp":
        return m.func.jvp(f, (xs[0],), (ts[0],))[1].tolist()
    if how == "vmap(jvp)":
        return m.func.vmap(lambda x, t: m.func.jvp(f, (x,), (t,))[1])(xs, ts).tolist()
    return m.func.jvp(m.func.vmap(f), (xs,), (ts,))[1].tolist()


@pytest.mark.filterwarnings("ignore:Use of")
@pytest.mark.parametrize("how", ["jvp", "vmap(jvp)", "jvp(vmap)"])
def test_jvp_of_a_write_into_an_expanded_input_as_torch(how):
    """The write went to the base, the caller's tensor, and was refused as a write into a
    capture (jvp, vmap(jvp))."""
    assert _jvp_of_a_write_into_an_expanded_input(flow, how) == \
        _jvp_of_a_write_into_an_expanded_input(torch, how)
