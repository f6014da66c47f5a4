"""vmapped programs (views, in-place writes, no_grad) against torch.func.vmap: see
tests/vmap_fuzz.py. Before this fuzz, an in-place op on a batched tensor rebound its examples
instead of writing them: a view taken before the write (x[0], x.narrow(...)) kept the old
values, and so did the caller's tensor torch's vmap writes into; .data, requires_grad_ and
detach_ ran where torch refuses them; partial overlaps went unchecked. Under vmap(grad(f)),
views were not views for autograd: a write through one was missing from the gradient, as was
a base's write from a view read after it, and a write through a detach() went unseen by the
saved tensors' version checks.

The cases that still differ are listed with the reason: each is a write whose operand
overlaps the tensor written (flowgrad refuses what torch computes in its loop order, or the
other way round), or a layout difference.
"""
from __future__ import annotations

import fuzz_common
import numpy as np
import pytest
import torch
import vmap_fuzz as vf

import flowgrad as flow

_TORCH_REFUSES_SOURCE = ("a setitem whose value shares memory with the tensor written (x[i] = x, "
                         "or its .data): torch refuses it; flowgrad reads the whole value first")
_TORCH_TANGENT_OVERLAP = ("torch refuses the write of its own tangent (an operand's tangent "
                          "sharing the written tangent's memory); flowgrad computes")
_OVERLAP = ("an operand shares some memory with the tensor written in place: torch's result "
            "depends on its loop order; flowgrad refuses, as it does eagerly")
_SOURCE_OVERLAP = ("a setitem whose value is a view of the tensor written: torch reads while "
                   "writing, flowgrad reads the whole value first (program_fuzz's 102894)")
_LAYOUT = ("view() of the sum of a transposed and a plain tensor: torch's result is laid out "
           "as one operand, NumPy's as the other, so one can view it and the other cannot")
# (the seeds of "a write into an expanded batched tensor": 21, 472, 606, 675, 1254, 1496, ...,
# agree since flowgrad refuses an example's expand written, as torch's vmap)
KNOWN_DIFFERENCES = {}
SLOW_KNOWN = {
    **dict.fromkeys([1214, 1372, 1392, 1550, 1648, 1746, 1812, 1953, 2333, 2340, 2359],
                    _OVERLAP),
    1267: _SOURCE_OVERLAP,
}


GRAD_KNOWN = {}
GRAD_SLOW_KNOWN = {
    1714: _OVERLAP,
}


JVP_KNOWN = {}
# and three seeds past 3000 where a tangent nothing carried (a detached tensor's) came out
# as primal * 0, nan where an exp overflowed, instead of torch's zeros
JVP_SEEDS = (*range(300), 21151, 26202, 32345)
JVP_SLOW_KNOWN = {
    **dict.fromkeys([704, 1282], _TORCH_REFUSES_SOURCE),
    1633: _TORCH_TANGENT_OVERLAP,
    **dict.fromkeys([947, 1214, 1293, 1329, 1348, 1372, 1376, 1392, 1487, 1534, 1550, 1648,
                     1714, 1752, 1780, 1812, 1886, 1953, 2131, 2284, 2285, 2333, 2340, 2359,
                     2383, 2923], _OVERLAP),
    505: _LAYOUT,
}


HVP_KNOWN = {}
HVP_SLOW_KNOWN = {}
_SPLIT_AFTER_DETACH = ("detach_() inside grad inside jvp keeps the jvp tangent (torch's); a "
                       "write into one split output of the detached tensor then makes the "
                       "tangent rule of an op reading the other output regenerate that view "
                       "(views.sync_view), which raises for a multi-output view; torch "
                       "computes. A flowgrad gap, open")
JOG_KNOWN = {}
JOG_SLOW_KNOWN = {
    1859: _SPLIT_AFTER_DETACH,
}
# the hvp and jvp_of_grad programs under vmap: vmap(grad(grad)) and vmap(jvp(grad)); before,
# .data and detach_() there stripped every level (the outer derivative missed the path
# through them). `make test` runs seeds that differed then (one of each kind of program)
VMAP_HVP_SEEDS = (83, 143, 724, 1823)
VHVP_SLOW_KNOWN = {
    1714: _OVERLAP,
}
VJOG_SLOW_KNOWN = {
    1714: _OVERLAP,
    1859: _SPLIT_AFTER_DETACH,
}
# jvp of jvp, not vmapped (the inner tangents cos(3 x) of the dual input): before, a write
# in place changed an inner tangent by a raw array write, so the outer level kept its old
# tangent of it (636 of the first 1000 seeds differed)
# grad of the tangents, not vmapped (reverse over forward): before, `x.data` of jvp's input
# (make_dual's view of a leaf that requires grad below the jvp) took writes torch refuses
_TORCH_SAVES_RESULT = ("torch's tangent rule of sigmoid reads the op's output, which the grad "
                       "level saves; a no_grad write to that output then fails torch's "
                       "backward. flowgrad's rule reads the input, and computes")
# (seeds 252 and 563 were div's case of that: its tangent rule is torch's formula now, which
# reads the output, and flowgrad's backward refuses the write as torch's)
GOJ_KNOWN = {}
GOJ_SLOW_KNOWN = {}
JOJ_SLOW_KNOWN = {
    505: _LAYOUT,
    **dict.fromkeys([704, 1282], _TORCH_REFUSES_SOURCE),
    1633: _TORCH_TANGENT_OVERLAP,
    **dict.fromkeys([1348, 1372, 1534, 1550, 1648, 1812, 1886, 1953, 2333, 2340, 2359],
                    _OVERLAP),
}
# the same two under vmap: `make test` runs a few seeds (two that jvp_of_jvp found)
VMAP_NESTED_JVP_SEEDS = (83, 143, 203, 724, 813, 1823)
VJOJ_SLOW_KNOWN = {**JOJ_SLOW_KNOWN, **dict.fromkeys([1214, 1392], _OVERLAP)}
# differentiated outside the vmap, over the whole batch: grad of the per-example gradients
# (before, refused: the inner grad recorded per example only), and the vmapped program by
# func.grad and by backward() (before, a no_grad write into an expanded physical tensor lost
# its history, and a write into a vmap input that is a leaf requiring grad went to a copy)
_VMAP_SAVED_WRITE = ("an in-place op under vmap saves its result and a later write changes "
                     "it: torch (and eager flowgrad) refuse the backward; flowgrad's vmap "
                     "saved a physical tensor of its own and differentiates at the values "
                     "before the write (checked against the program with the op out of place)")
_TORCH_BATCHED_COPY = ("a tensor saved by matmul is written in place: flowgrad refuses the "
                       "backward, as eagerly; torch's batched matmul saved a reshaped copy")
GOVG_SEEDS = (*range(300), 314, 2770)  # (a no_grad fill_ through an expand; x.data: wrong)
GOVG_SLOW_KNOWN = {737: _TORCH_SAVES_RESULT}
GOV_SLOW_KNOWN = {**dict.fromkeys([1539, 2530], _VMAP_SAVED_WRITE), 1850: _TORCH_BATCHED_COPY}
# a random chain of two to four transforms (vmap_fuzz.CHAINS) over the whole batch: before,
# grad(vmap(jvp(f))) refused writes into jvp's input (its batch taken for a leaf), the outer
# grad of grad(vmap(grad(f))) missed writes through x.data (wrong, silently), and a write
# into an inner grad input after its detach_() was refused (180, 634)
_SAVED_DIFFER = ("a tensor saved for backward is written later: under vmap torch's batching "
                 "rules save reshaped copies or outputs and flowgrad the physical tensors, so "
                 "one of them refuses the backward where the other computes")
CHAIN_KNOWN = dict.fromkeys([163, 230, 239, 278], _SAVED_DIFFER)
CHAIN_SLOW_KNOWN = {
    **dict.fromkeys([410, 518, 575, 837, 1043, 1243, 1504, 1867, 2078, 2174,
                     2252, 2303, 2483, 2539, 2756, 2808, 2930, 2968, 2971], _SAVED_DIFFER),
    505: _LAYOUT}  # (563, 1211, 1315 agree since div's tangent reads its output, as torch's)
# (seeds from 100000 draw chains with jacrev and jacfwd: before, jacfwd ran the function once
# per input, so a write into an input was seen by the later runs, and vmap(jacfwd(f)) lost a
# write through a view of its input (100131, 100261, 100482), both wrong silently)
CHAIN_SEEDS = (*range(300), *range(100000, 100200))
# mode -> (its check, the seeds `make test` runs, their known differences, those of the
# slow run's seeds, the rest of 0..2999): the vmapped programs' tensors, their per-example
# gradients (vmap of grad: before, a write through a batched view was missing from the
# gradient) and their tangents (vmap of jvp, jacfwd's order: before, a write through a
# batched view left the tangent alone), grad of grad without vmap (a Hessian-vector product:
# before, a view read after a no_grad write skipped the inner input; x.data and detach_()
# cut the outer grad), jvp of grad without vmap (the same product forward-over-reverse:
# before, x.data and detach_() dropped the jvp level's tangent), those two under vmap, and
# jvp of jvp (before, an in-place write left the outer tangent of an inner tangent alone)
MODES = {
    "values": (vf.check, range(400), KNOWN_DIFFERENCES, SLOW_KNOWN),
    "grad": (vf.CHECKS["grad"], range(300), GRAD_KNOWN, GRAD_SLOW_KNOWN),
    "jvp": (vf.CHECKS["jvp"], JVP_SEEDS, JVP_KNOWN, JVP_SLOW_KNOWN),
    "hvp": (vf.CHECKS["hvp"], range(300), HVP_KNOWN, HVP_SLOW_KNOWN),
    "jvp_of_grad": (vf.CHECKS["jvp_of_grad"], range(300), JOG_KNOWN, JOG_SLOW_KNOWN),
    "vmap_hvp": (vf.CHECKS["vmap_hvp"], VMAP_HVP_SEEDS, {}, VHVP_SLOW_KNOWN),
    "vmap_jvp_of_grad": (vf.CHECKS["vmap_jvp_of_grad"], VMAP_HVP_SEEDS, {}, VJOG_SLOW_KNOWN),
    "jvp_of_jvp": (vf.CHECKS["jvp_of_jvp"], range(300), {}, JOJ_SLOW_KNOWN),
    "grad_of_jvp": (vf.CHECKS["grad_of_jvp"], range(300), GOJ_KNOWN, GOJ_SLOW_KNOWN),
    "vmap_jvp_of_jvp": (vf.CHECKS["vmap_jvp_of_jvp"], VMAP_NESTED_JVP_SEEDS, {}, VJOJ_SLOW_KNOWN),
    "vmap_grad_of_jvp": (vf.CHECKS["vmap_grad_of_jvp"], VMAP_NESTED_JVP_SEEDS, {},
                         {**GOJ_KNOWN, **GOJ_SLOW_KNOWN}),
    "grad_of_vmap_grad": (vf.CHECKS["grad_of_vmap_grad"], GOVG_SEEDS, {}, GOVG_SLOW_KNOWN),
    "grad_of_vmap": (vf.CHECKS["grad_of_vmap"], range(300), {}, GOV_SLOW_KNOWN),
    "backward_of_vmap": (vf.CHECKS["backward_of_vmap"], range(300), {}, GOV_SLOW_KNOWN),
    "chain": (vf.CHECKS["chain"], CHAIN_SEEDS, CHAIN_KNOWN, CHAIN_SLOW_KNOWN),
}


@pytest.mark.parametrize("mode,seed", [(mode, s) for mode, (_, seeds, known, _) in
                                       MODES.items() for s in seeds if s not in known])
def test_vmapped_program_matches_torch(mode, seed):
    report = MODES[mode][0](seed)
    assert report is None, report


@pytest.mark.parametrize("mode,seed", [(mode, s) for mode, (_, _, known, _) in MODES.items()
                                       for s in sorted(known)])
def test_known_differences_still_differ(mode, seed):
    assert MODES[mode][0](seed) is not None


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_many_vmapped_programs_match_torch(mode):
    check, seeds, _, known = MODES[mode]
    more = range(100000, 100700) if mode == "chain" else ()  # (the jacrev/jacfwd chains)
    fuzz_common.assert_seeds_agree(check, [s for s in (*range(3000), *more) if s not in seeds],
                                   known)


def _in_place_under_vmap(m):
    """A view taken before an in-place write sees it, and so does the caller's tensor."""
    x = m.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], dtype=m.float64)

    def f(row):
        head = row[:2]
        row.relu_()
        return head * 1.0
    out = m.func.vmap(f)(x)
    return out.tolist(), x.tolist()


def _per_example_gradient_through_a_view(m):
    def f(x):
        y = x * 1.5
        v = y.reshape(2, -1)
        v[1:, :] = 2.0   # through a view: y[1] no longer depends on x
        y[:1].mul_(x[2:3])  # through another: y[0] = 1.5 x0 x2
        return (v.sin() * 0.5).sum() + y.sin().sum()
    x = m.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 5.0, 6.0, 7.0]], dtype=m.float64) / 4
    return m.func.vmap(m.func.grad(f))(x).tolist(), m.func.grad(f)(x[1]).tolist()


def test_per_example_gradient_through_views_matches_torch():
    ours, theirs = _per_example_gradient_through_a_view(flow), \
        _per_example_gradient_through_a_view(torch)
    np.testing.assert_allclose(ours[0][1], ours[1], rtol=1e-12)  # as grad(f) of example 1
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)


def test_in_place_write_under_vmap_reaches_views_and_the_caller_as_torch():
    assert _in_place_under_vmap(flow) == _in_place_under_vmap(torch)


@pytest.mark.parametrize("call", ["data", "requires_grad_", "detach_"])
def test_what_torch_vmap_refuses_is_refused(call):
    def f(m, x):
        if call == "data":
            return x.data
        return getattr(x, call)()
    for m in (torch, flow):
        with pytest.raises(RuntimeError):
            m.func.vmap(lambda x, m=m: f(m, x))(m.ones(2, 3))


def _hessian_vector_product(m):
    """grad(grad(f)) with a no_grad write to a view of the input inside f (vmap_fuzz's
    program 115, without vmap)."""
    def f(x):
        t3 = x.reshape(1, -1)
        t4 = t3[:1, 2:]
        with m.no_grad():
            t4.copy_(t4)
        t5 = t3.diagonal(0, -2, -1)
        return (t3.sin() * 0.3).sum() + (t4.sin() * 0.5).sum() + (t5.sin() * 0.7).sum()
    x = m.tensor([0.5, -0.36, -1.13], dtype=m.float64)
    v = m.tensor([0.07, 0.47, -0.97], dtype=m.float64)
    g = m.func.grad(f)
    return m.func.grad(lambda a: (g(a) * v).sum())(x).tolist()


def test_grad_of_grad_through_a_no_grad_write_to_a_view_matches_torch():
    # the inner input was a view of the outer one: the view read after the write was
    # regenerated from the outer input, past the inner one (about a quarter of the value)
    np.testing.assert_allclose(_hessian_vector_product(flow), _hessian_vector_product(torch),
                               rtol=1e-12)


def test_an_in_place_write_to_an_inner_grad_input_is_refused_as_torch():
    # the inner input is a copy now, but a leaf to in-place writes, as functorch's
    for m in (torch, flow):
        def inner(x):
            x.mul_(2.0)
            return x.sum()
        with pytest.raises(RuntimeError, match="leaf"):
            m.func.grad(lambda a: m.func.grad(inner)(a).sum())(m.ones(3, dtype=m.float64))


def _data_inside_nested_transforms(m, outer, inner):
    """x.data inside the inner of two transforms: torch's strips the inner level alone, so
    the outer grad or jvp differentiates through it (vmap_fuzz's hvp seeds 1823, 2770)."""
    v = m.tensor([1.0, 0.5, 0.25], dtype=m.float64)

    def f(x):
        d = x.data
        return (x * 2 + d).sin() + d * d
    if inner == "grad":
        g = m.func.grad(lambda x: f(x).sum())
    else:
        def g(a):
            return m.func.jvp(f, (a,), (v,))[1]
    x = m.tensor([0.18, -1.02, -0.35], dtype=m.float64)
    if outer == "grad":
        return m.func.grad(lambda a: (g(a) * v).sum())(x).tolist()
    return m.func.jvp(g, (x,), (v,))[1].tolist()


@pytest.mark.parametrize("outer,inner", [("grad", "grad"), ("jvp", "grad"), ("grad", "jvp"),
                                         ("jvp", "jvp")])
def test_data_inside_nested_transforms_strips_the_inner_level_as_torch(outer, inner):
    # flowgrad's .data cut every level: the outer derivative missed the path through it
    np.testing.assert_allclose(_data_inside_nested_transforms(flow, outer, inner),
                               _data_inside_nested_transforms(torch, outer, inner), rtol=1e-12)


def _data_inside_a_transform_under_autograd(m):
    x = m.tensor([0.5, 1.0], dtype=m.float64, requires_grad=True)
    g = m.func.grad(lambda a: (a * a.data).sum())(x)
    p, _ = m.func.jvp(lambda a: a * a.data, (x,), (m.ones(2, dtype=m.float64),))
    return [m.autograd.grad(g.sum(), x)[0].tolist(), m.autograd.grad(p.sum(), x)[0].tolist()]


def test_data_inside_a_transform_keeps_autograd_around_it_as_torch():
    assert _data_inside_a_transform_under_autograd(flow) == \
        _data_inside_a_transform_under_autograd(torch)


def test_writing_the_data_of_an_inner_grad_input_is_refused_as_torch():
    # torch's x.data there wraps the outer input itself, a leaf (vmap_fuzz's hvp 1823)
    for m in (torch, flow):
        def inner(x):
            x.data.mul_(2.0)
            return x.sum()
        with pytest.raises(RuntimeError, match="leaf"):
            m.func.grad(lambda a: m.func.grad(inner)(a).sum())(m.ones(3, dtype=m.float64))


def _detach__inside_nested_transforms(m, outer):
    """y.detach_() inside the inner grad: torch's strips the grad level alone, so an outer
    jvp keeps y's tangent and an outer grad its history (vmap_fuzz's jvp_of_grad 1712)."""
    def loss(x):
        y = x * 1.0
        y.detach_()
        return (y.sin() * x).sum()
    x = m.tensor([-1.03, 0.5], dtype=m.float64)
    v = m.tensor([1.0, 2.0], dtype=m.float64)
    g = m.func.grad(loss)
    if outer == "jvp":
        return m.func.jvp(g, (x,), (v,))[1].tolist()
    return m.func.grad(lambda a: (g(a) * v).sum())(x).tolist()


@pytest.mark.parametrize("outer", ["grad", "jvp"])
def test_detach__inside_nested_transforms_strips_the_inner_level_as_torch(outer):
    # flowgrad's detach_ dropped every tangent and every level's history: zeros
    np.testing.assert_allclose(_detach__inside_nested_transforms(flow, outer),
                               _detach__inside_nested_transforms(torch, outer), rtol=1e-12)


def _expanded_writes_under_vmap_of_jvp(m):
    """vmap(jvp(f)) with writes into an expand of an input: a mask per example differing
    between the elements that share a location (masked_fill_), and an index write (jvp seeds
    1338 and 203: the tangents of the input were left alone)."""
    def f(x, w):
        e = x.expand(3, 3)
        e.masked_fill_(w > 0, 0.0)
        e[[2, 0]] = x[0].sin() * 2
        return x * 1.0

    x = m.tensor([[[-1.86], [-0.77], [-1.65]], [[0.5], [1.5], [2.5]]], dtype=m.float64)
    w = m.tensor([[[0.7, -0.3, -1.4], [1.8, 0.4, 1.3], [-1.6, 0.1, 0.5]],
                  [[-0.7, -0.3, -1.4], [-1.8, 0.4, -1.3], [-1.6, -0.1, -0.5]]],
                 dtype=m.float64)
    t = m.tensor([[[1.0], [2.0], [3.0]], [[4.0], [5.0], [6.0]]], dtype=m.float64)
    out, tangent = m.func.vmap(lambda a, b, u: m.func.jvp(lambda c: f(c, b), (a,), (u,)))(
        x, w, t)
    return out.tolist(), tangent.tolist()


@pytest.mark.filterwarnings("ignore:Use of .* on expanded tensors is deprecated")
def test_writes_into_an_expand_under_vmap_of_jvp_match_torch():
    assert _expanded_writes_under_vmap_of_jvp(flow) == _expanded_writes_under_vmap_of_jvp(torch)


def _stripped(t, variant, scale):
    """t.data ("data"), or t * scale made a leaf by detach_() ("detach_")."""
    if variant == "data":
        return t.data
    d = t * scale
    d.detach_()
    return d


def _under(m, nest, variant):
    """f reading x.data (or detach_()-ing a tensor computed from x) under the transforms
    `nest`, outermost first: V vmap, G grad of a weighted sum, J jvp, A autograd.grad around
    them all; x is a batch of two rows per V."""
    def f(x):
        d = _stripped(x, variant, 2.0)
        return m.sin(3 * x) * d + x ** 3 + d * d * x

    def weights(shape, lo, hi):
        n = int(np.prod(shape))
        return m.tensor(np.linspace(lo, hi, n).reshape(tuple(shape)), dtype=m.float64)

    def grad_of(h):
        return m.func.grad(lambda a: (h(a) * weights(a.shape, 0.5, 1.5)).sum())

    def jvp_of(h):
        return lambda a: m.func.jvp(h, (a,), (weights(a.shape, -1.0, 0.7),))[1]
    h = f
    for t in reversed(nest.lstrip("A")):
        h = {"G": grad_of, "J": jvp_of, "V": m.func.vmap}[t](h)
    x = weights((2,) * nest.count("V") + (3,), 0.1, 0.9)
    if not nest.startswith("A"):
        return h(x).tolist()
    x.requires_grad_()
    out = h(x)
    return m.autograd.grad((out * weights(out.shape, 0.2, 1.1)).sum(), x)[0].tolist()


@pytest.mark.parametrize("variant", ["data", "detach_"])
@pytest.mark.parametrize("nest", ["VGG", "VGJ", "VJG", "VJJ", "VVGG", "VGVJ", "GVJ", "JVJ",
                                  "JVG", "AVJ", "AJVJ", "VG", "VJ"])
def test_data_and_detach__under_vmap_strip_the_inner_level_as_torch(nest, variant):
    # under vmap, .data and detach_() stripped every level: vmap(grad(grad(f))), jvp(vmap(
    # jvp(f))) and the like missed the outer derivative through them (vmap(grad(f)) was right)
    np.testing.assert_allclose(_under(flow, nest, variant), _under(torch, nest, variant),
                               rtol=1e-12)


def _closure_under_vmap(m, variant):
    """w.data (or detach_() of w * 1) inside vmap, w from the grad around it: torch's strips
    w's own level, the grad's (vmap does not lift a tensor it does not batch)."""
    xs = m.tensor([[0.1, 0.4, 0.9], [-0.3, 0.2, 0.5]], dtype=m.float64)

    def outer(w):
        def f(x):
            return (x * _stripped(w, variant, 1.0) * w).sum()
        return m.func.vmap(f)(xs).sum()
    return m.func.grad(outer)(m.tensor([0.3, -0.2, 0.5], dtype=m.float64)).tolist()


@pytest.mark.parametrize("variant", ["data", "detach_"])
def test_data_and_detach__of_an_unbatched_tensor_inside_vmap_strip_its_level_as_torch(variant):
    np.testing.assert_allclose(_closure_under_vmap(flow, variant),
                               _closure_under_vmap(torch, variant), rtol=1e-12)


@pytest.mark.parametrize("outer", ["grad", "vjp", "jvp"])
def test_an_outer_transform_of_vmap_of_grad_as_torch(outer):
    # (grad and vjp outside were refused: the inner grad recorded per example only; the
    # family is tests/test_grad_of_vmap_of_grad_vs_torch.py)
    def run(m):
        inner = m.func.vmap(m.func.grad(lambda x: (m.sin(3 * x) * x).sum()))
        xs = m.tensor(np.linspace(0.1, 0.9, 6).reshape(2, 3))
        if outer == "grad":
            return m.func.grad(lambda a: inner(a).sum())(xs)
        if outer == "vjp":
            return m.func.vjp(inner, xs)[1](m.ones_like(xs))[0]
        return m.func.jvp(inner, (xs,), (m.ones_like(xs),))[1]
    np.testing.assert_allclose(run(flow).numpy(), run(torch).numpy(), rtol=1e-12)


def test_an_aliased_write_is_checked_against_torch_reading_a_clone():
    """torch's tangent of t.mul_(t) is not the derivative (forward_fuzz.TORCH_ALIASED); the
    jvp checks compare flowgrad with torch on the program whose aliased writes read clones
    (`forward_fuzz.unaliased`) instead of skipping it, so a wrong tangent elsewhere in it
    still shows (jvp_of_grad 931259: the aliased write is steps before the difference)."""
    program = vf.generate(931259)
    rewritten = vf.forward_fuzz.unaliased(program, len(program.steps))
    changed = [(a.code, b.code) for a, b in zip(program.steps, rewritten.steps)
               if a.code != b.code]
    assert ("with m.no_grad(): t6.mul_(t6)", "with m.no_grad(): t6.mul_(t6.clone())") in changed
    batches = vf._batches(program)
    n = len(program.steps)
    assert vf._differ(program, n, batches, "jvp_of_grad") is not None  # torch's own tangent
    assert vf._differ(program, n, batches, "jvp_of_grad", rewritten) is None
    assert vf.CHECKS["jvp_of_grad"](931259) is None
