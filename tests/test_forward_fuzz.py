"""Forward-mode AD programs (views, in-place writes, no_grad, `.data`) against torch: see
tests/forward_fuzz.py. Before this fuzz, 239 of its first 300 programs differed: an in-place
op on make_dual's result dropped the tangent, a write through a view left the base's
tangent (and the other views') stale, `.data` shared the tangent, detach_ kept it.

The cases that still differ are listed with the reason; torch's tangent formula for an
in-place op whose operand aliases the target (x.mul_(x)) is not the derivative, and the
fuzz skips those itself (forward_fuzz.TORCH_ALIASED).
"""
from __future__ import annotations

import forward_fuzz as ff
import fuzz_common
import pytest
import torch

import flowgrad as flow

_OVERLAP = ("an operand shares some memory with the tensor written in place: torch's result "
            "depends on its loop order; flowgrad refuses (as program_fuzz's known cases)")
_TORCH_REFUSES = ("a setitem whose value overlaps the tensor written: torch refuses it; "
                  "flowgrad reads the whole value first")
KNOWN_DIFFERENCES = {
    **dict.fromkeys([84, 372], _OVERLAP),
}
SLOW_KNOWN = {
    **dict.fromkeys([446, 934, 1304, 1886, 1895, 2026, 2190, 2238, 2247, 2333, 2449, 2698,
                     2959], _OVERLAP),
    **dict.fromkeys([1749], _TORCH_REFUSES),
}


@pytest.mark.parametrize("seed", [s for s in range(400) if s not in KNOWN_DIFFERENCES])
def test_forward_mode_program_matches_torch(seed):
    report = ff.check(seed)
    assert report is None, report


@pytest.mark.parametrize("seed", sorted(KNOWN_DIFFERENCES))
def test_known_differences_still_differ(seed):
    assert ff.check(seed) is not None


@pytest.mark.slow
def test_many_forward_mode_programs_match_torch():
    fuzz_common.assert_seeds_agree(ff.check, range(400, 3000), SLOW_KNOWN)


def _tangents(m, program):
    """Run `program(m, fwAD)` in a dual level; the tangents (or None) of what it returns."""
    fw = m.autograd.forward_ad
    with fw.dual_level():
        out = program(m, fw)
        return [None if t is None else t.tolist() for t in
                (fw.unpack_dual(o).tangent for o in out)]


def _dual(m, fw, values=(1.0, -2.0, 3.0), tangent=(1.0, 2.0, 3.0)):
    return fw.make_dual(m.tensor(values, dtype=m.float64), m.tensor(tangent, dtype=m.float64))


PROGRAMS = {
    # an in-place op on make_dual's result (a view of the primal) keeps and updates its tangent
    "relu_ on make_dual": lambda m, fw: [_dual(m, fw).relu_()],
    "mul_ on make_dual": lambda m, fw: [_dual(m, fw).mul_(2.0)],
    # a write through one view reaches the base's tangent and every other view's
    "write through a view": lambda m, fw: (lambda z: (z[0:2].mul_(10), [z, z[1:3]])[1])(
        _dual(m, fw) * 1),
    # a tangent the user holds is updated in place, as torch's
    "held tangent": lambda m, fw: (lambda y: (lambda t: (y.exp_(), [t])[1])(
        fw.unpack_dual(y).tangent))(_dual(m, fw) * 1),
    # a dual written into a view of a plain tensor makes the base dual (zeros elsewhere), and
    # a view taken before that sees it
    "dual into a plain base": lambda m, fw: (lambda b: (lambda v, w: (
        v.copy_(_dual(m, fw)[1:] * 3), [b, v, w])[1])(b[1:], b[:2]))(m.zeros(3,
                                                                           dtype=m.float64)),
    # .data and detach() have no tangent, and writes through them leave it alone
    ".data write": lambda m, fw: (lambda y: (y.data.mul_(2.0), [y, y.data])[1])(
        _dual(m, fw) * 1),
    "detach_": lambda m, fw: [(_dual(m, fw) * 1).detach_()],
    "fill_ through an expand": lambda m, fw: (lambda d: (d[:1].expand(4).fill_(0.5), [d])[1])(
        _dual(m, fw)),
    "zero_ of a non-view": lambda m, fw: [(_dual(m, fw) * 1).zero_()],
    "no_grad write keeps the tangent": lambda m, fw: _under_no_grad(m, _dual(m, fw) * 1),
    # a view of a plain tensor made before a dual value is written into it: an op reading the
    # view sees its tangent (before, only unpack_dual did: the op's result had none; vmap
    # fuzz's jvp seed 1624)
    "a view's tangent from a dual written after": lambda m, fw: _view_made_before(m, fw),
}


def _view_made_before(m, fw):
    b = m.zeros(3, dtype=m.float64)
    v, w = b[1:], b.reshape(3, 1)
    b[...] += _dual(m, fw)
    return [v * 2, w.sin(), m.ones(2, dtype=m.float64).add_(v)]


def _under_no_grad(m, y):
    with m.no_grad():  # (no_grad does not stop forward AD)
        y[1:].mul_(2.0)
    return [y]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_in_place_forward_mode_matches_torch(name):
    program = PROGRAMS[name]
    assert _tangents(flow, program) == _tangents(torch, program)


def test_make_dual_of_a_requires_grad_leaf_keeps_requires_grad_under_no_grad_write():
    # an unrecorded write through a view replaced its metas: requires_grad became False
    for m in (torch, flow):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            d = fw.make_dual(m.tensor([1.0, 2.0], requires_grad=True), m.tensor([1.0, 1.0]))
            with m.no_grad():
                d.mul_(1.5)
            got = (d.requires_grad, fw.unpack_dual(d).tangent.tolist(), d.tolist())
        if m is torch:
            want = got
    assert got == want


def _rows(m, fw, dual_value=True):
    """make_dual over a plain (1, 3) primal, its (2, 3) expand, and a (3,) value (dual or
    not)."""
    x = fw.make_dual(m.tensor([[-1.0, 2.0, 3.0]], dtype=m.float64),
                     m.tensor([[1.0, 2.0, 3.0]], dtype=m.float64))
    y = m.tensor([10.0, 11.0, 12.0], dtype=m.float64)
    if dual_value:
        y = fw.make_dual(y, m.tensor([5.0, 6.0, 7.0], dtype=m.float64))
    return x, x.expand(2, 3), y


def _mask(m):
    return m.tensor([[True, False, True], [False, True, False]])


# writes into an expand of make_dual's result (torch: deprecated, computed): before, the
# advanced-index and mask writes went to the plain primal under the dual, and left the
# dual's tangent alone; index_put_ refused; a mask differing between the elements sharing a
# location (masked_fill_) was written into the tangent where the values changed
EXPANDED_WRITES = {
    "index, a number": lambda m, x, e, y: e.__setitem__([0], 2.0),
    "index, a dual": lambda m, x, e, y: e.__setitem__([1, 0], m.stack([y, y * 2])),
    "index of the last dim": lambda m, x, e, y: e.__setitem__(
        (slice(None), [2, 0]), y[:2]),
    "mask, a number": lambda m, x, e, y: e.__setitem__(e > 0, 2.0),
    "mask, a dual": lambda m, x, e, y: e.__setitem__(_mask(m), y),
    "masked_fill_, a mask per element": lambda m, x, e, y: e.masked_fill_(_mask(m), y[1]),
    "index_put_": lambda m, x, e, y: e.index_put_(
        (m.tensor([0, 1, 1]), m.tensor([2, 0, 2])), y),
    "index_put_, accumulate": lambda m, x, e, y: e.index_put_(
        (m.tensor([0, 1]),), y, accumulate=True),
    "index_put_ of the dual value's number": lambda m, x, e, y: e.index_put_(
        (m.tensor([1]),), y[0]),
}


@pytest.mark.filterwarnings("ignore:Use of .* on expanded tensors is deprecated")
@pytest.mark.parametrize("dual_value", [True, False])
@pytest.mark.parametrize("name", sorted(EXPANDED_WRITES))
def test_index_write_into_an_expanded_dual_matches_torch(name, dual_value):
    def run(m):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            x, e, y = _rows(m, fw, dual_value)
            EXPANDED_WRITES[name](m, x, e, y)
            return [(p.tolist(), None if t is None else t.tolist())
                    for p, t in (fw.unpack_dual(x), fw.unpack_dual(e))]
    assert run(flow) == run(torch)


_FULL_VIEWS = {"squeeze": lambda t: t.squeeze(), "ellipsis": lambda t: t[...],
               "view": lambda t: t.view(t.shape), "unsqueeze": lambda t: t.unsqueeze(0)}


@pytest.mark.parametrize("view", list(_FULL_VIEWS))
@pytest.mark.parametrize("shape", [(), (2,)])
def test_a_dual_copied_into_a_view_of_its_own_detached_alias_gives_the_base_its_tangent(
        shape, view):
    # copy_ of a tensor's own elements took a shortcut that gave the view alone src's tangent:
    # the base (x.detach(), a plain alias of the dual's primal) kept none, where torch's
    # takes it (found by forward_fuzz seed 11781 in a sweep past the slow range)
    tangents = []
    for m in (torch, flow):
        fw = m.autograd.forward_ad
        with fw.dual_level():
            x = fw.make_dual(m.full(shape, 0.38, dtype=m.float64),
                             m.full(shape, -0.06, dtype=m.float64))
            base = x.detach()
            target = _FULL_VIEWS[view](base)
            target.copy_(x if view != "unsqueeze" else x.unsqueeze(0))
            tangents.append([None if t is None else t.tolist() for t in (
                fw.unpack_dual(base).tangent, fw.unpack_dual(target).tangent)])
    assert tangents[1] == tangents[0]


def _copy_of_an_expand_into_itself(m, fw):
    x = fw.make_dual(m.tensor([[-1.69], [-1.61]], dtype=m.float64),
                     m.tensor([[-1.72], [-0.74]], dtype=m.float64))
    e = x.expand(2, 2, 3)
    e.copy_(x.expand(2, 2, 3))  # (the very elements: torch writes nothing)
    return [x, e, e * x]


def test_copy_of_an_expand_into_its_own_elements_writes_nothing_as_torch():
    """Under forward AD a copy_ into a view writes as any copy (its base takes the tangent),
    except into an expand of the very elements, which the write path refuses (one location,
    several elements) where torch returns early (the slow run's seeds 870, 1375, 1774, 2096,
    2854 raised before)."""
    assert _tangents(flow, _copy_of_an_expand_into_itself) == \
        _tangents(torch, _copy_of_an_expand_into_itself)


def _unpack_after_a_no_grad_write(m):
    fw = m.autograd.forward_ad
    x = m.ones(3, dtype=m.float64, requires_grad=True)
    seen = []
    with fw.dual_level():
        primal = fw.unpack_dual(x).primal
        seen.append((primal is x, primal._base is x))
        a, b, c = (x * 2.0).unbind(0)
        with m.no_grad():
            a.mul_(2.0)  # unrecorded: a and b are stale until read
        for out in (a, b):
            try:
                fw.unpack_dual(out)
                seen.append("read")
            except RuntimeError:
                seen.append("raised")
    return seen


def test_unpack_dual_reads_a_stale_view_as_torch():
    """unpack_dual's primal is a view of the tensor, tangent or not (torch's _fw_primal), so
    reading an output of unbind written in place under no_grad raises, as torch's does (28
    programs of the slow run read it before; the write no longer marks the view current)."""
    assert _unpack_after_a_no_grad_write(flow) == _unpack_after_a_no_grad_write(torch)


def _tangent_after_copy_then_source_written(m, clone_source):
    fw = m.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(m.tensor([1.0, 2.0], dtype=m.float64),
                         m.tensor([1.0, -1.0], dtype=m.float64))
        t = m.tensor([[5.0, 5.0]], dtype=m.float64).sigmoid()
        t.copy_(x.clone() if clone_source else x)
        with m.no_grad():
            x.mul_(3.0)
        return fw.unpack_dual(t).tangent.tolist()


def test_a_copy_keeps_the_tangent_it_copied_when_the_source_is_written_later():
    """t.copy_(x), then x written in place: t's tangent is x's tangent at the copy (forward
    fuzz 1146, 928597). torch's t takes x's tangent itself, so the later write shows in it;
    the fuzz's oracle (`forward_fuzz.unaliased`) copies from a clone there, as here."""
    ours = _tangent_after_copy_then_source_written(flow, clone_source=False)
    assert ours == [[1.0, -1.0]]
    assert ours == _tangent_after_copy_then_source_written(torch, clone_source=True)
    assert _tangent_after_copy_then_source_written(torch, clone_source=False) == [[3.0, -3.0]]
    program = ff.generate(1146)
    oracle = ff.unaliased(program, len(program.steps))
    assert "t6.copy_(x2.clone())" in [s.code for s in oracle.steps]
    assert not ff.execute(program).ok and ff.execute(program, oracle=oracle).ok


def _tangent_of_a_plain_expand_written(m, alias, write, vmapped):
    fw = m.autograd.forward_ad

    def f(x):
        e = getattr(x.expand(2, 4), alias)
        e = e() if callable(e) else e
        row, _ = e
        if write == "sub_":
            row.sub_(x)
        else:
            row.copy_(x * 2.0)
        return e * 1.0
    x = m.tensor([-1.74, 1.31, -0.9, 0.41], dtype=m.float64)
    tx = m.tensor([1.0, 2.0, 3.0, 4.0], dtype=m.float64)
    if vmapped:
        return m.func.vmap(lambda a, t: m.func.jvp(f, (a,), (t,))[1])(
            m.stack([x, -x]), m.stack([tx, tx * 3])).tolist()
    with fw.dual_level():
        return fw.unpack_dual(f(fw.make_dual(x, tx))).tangent.tolist()


@pytest.mark.parametrize("vmapped", [False, True])
@pytest.mark.parametrize("write", ["sub_", "copy_"])
@pytest.mark.parametrize("alias", ["data", "detach"])
def test_a_dual_written_into_a_row_of_a_plain_expand_reaches_every_row_as_torch(
        alias, write, vmapped):
    """The rows of an expand are one memory: a dual value written into one row of a plain
    (tangent-less) alias of an expand gives the alias a tangent laid out as it is, so every
    row has it (vmap_fuzz jvp 1027514). Before, the other rows' tangents stayed zero."""
    ours = _tangent_of_a_plain_expand_written(flow, alias, write, vmapped)
    assert ours == _tangent_of_a_plain_expand_written(torch, alias, write, vmapped)
