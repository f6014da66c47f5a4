"""Shape, join, split and layout ops over their argument spaces against torch: values, shapes,
view-ness and writes through the results, gradients, raise/no-raise and the exception type:
see tests/shape_fuzz.py."""
from __future__ import annotations

import fuzz_common
import pytest
import shape_fuzz as sf
import torch

import flowgrad as flow

DEFAULT = range(1500)
_KNOWN_HERE = [s for s in DEFAULT if sf.known(sf.generate(s))]


@pytest.mark.parametrize("seed", [s for s in DEFAULT if s not in _KNOWN_HERE])
def test_shape_case_matches_torch(seed):
    verdict = sf.check(seed)
    assert verdict is None, f"{sf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_shape_cases_match_torch():
    seeds = range(1500, 20000)
    fuzz_common.assert_seeds_agree(sf.check, seeds,
                                   {s for s in seeds if sf.known(sf.generate(s))})


@pytest.mark.parametrize("seed", _KNOWN_HERE)
def test_known_differences_still_differ(seed):
    assert sf.check(seed) is not None, sf.known(sf.generate(seed))


def _case(op, inputs, *args, call="method", **kw):
    """A fuzz case written out: inputs as (shape, dtype, layout)."""
    return dict(call=call, op=op, args=list(args), kw=kw, seed=7,
                inputs=[dict(shape=s, dtype=d, layout=lay) for s, d, lay in inputs])


F64 = "float64"
# each differed from torch before its fix (the comment: what flowgrad did)
FIXED = {
    # a view of the expanded input, so writes through it reached the input (torch: a copy)
    "ravel of an expanded input": _case("ravel", [((2, 1), F64, "expand")], call="fn"),
    "ravel of a strided slice": _case("ravel", [((3, 1), F64, "slice")]),
    # float64 (a 0-d block promoted as a dimensioned one)
    "block_diag dtype": _case("block_diag", [((3,), "float32", "contig"), ((), F64, "contig")],
                              call="star"),
    # a view of the 0-d tensor (torch: the tensor itself)
    "mT of 0-d": _case("mT", [((), F64, "contig")], call="attr"),
    "adjoint of 0-d": _case("adjoint", [((), F64, "contig")], call="fn"),
    # ran, or a ValueError (torch: RuntimeError)
    "expand -1 of 0-d": _case("expand", [((), F64, "contig")], (-1,)),
    "expand -1 leading": _case("expand", [((1,), F64, "slice")], -1, 1),
    "broadcast_to -1 leading": _case("broadcast_to", [((), F64, "contig")], (-1, 3)),
    # an IndexError (torch: RuntimeError), or the reverse
    "narrow of 0-d": _case("narrow", [((), F64, "contig")], 0, 0, 1),
    "narrow_copy of 0-d": _case("narrow_copy", [((), F64, "contig")], -1, 1, 0),
    "narrow past the end": _case("narrow", [((2, 1), F64, "contig")], -2, 0, 3),
    "unbind of 0-d": _case("unbind", [((), F64, "contig")], 0),
    "stack checks its dim first": _case(
        "stack", [((2, 3, 1), F64, "contig"), ((2, 2, 1), F64, "contig")], -5, call="seq"),
    "diagonal of 1-d, dim out of range": _case("diagonal", [((1,), F64, "expand")], 4, -2, 0),
    "unflatten of 0-d, dim out of range": _case("unflatten", [((), F64, "contig")], 1, (1,)),
    # ran (torch: RuntimeError / IndexError)
    "squeeze repeated dims": _case("squeeze", [((0, 1), F64, "transpose")], (0, 0)),
    "repeat_interleave of 0-d with a dim": _case("repeat_interleave", [((), F64, "contig")], 1,
                                                 call="fn", dim=0),
    "flatten of 0-d, dim out of range": _case("flatten", [((), F64, "contig")], 1, -1,
                                              call="fn"),
    # a repeated dim found only after a later bad one (torch checks in order)
    "squeeze: a repeat before a bad dim": _case("squeeze", [((0, 2, 2, 1), F64, "contig")],
                                                (3, 3, -5)),
    "flip: a repeat before a bad dim": _case("flip", [((2, 2, 2), F64, "contig")], (-1, 2, 3)),
    # raised (torch checks no dim when every tensor is an empty 1-D one; roll's early return)
    "cat of legacy empties, any dim": _case("cat", [((0,), "bool", "expand")], 1, call="seq"),
    "roll of an empty tensor": _case("roll", [((3, 2, 0), F64, "contig")], (-4, -5), (-4, -1)),
    # the result did not require grad (torch's does: the skipped empty one does)
    "cat: a skipped empty requires grad": _case(
        "cat", [((1, 1, 1), "bool", "transpose"), ((0,), F64, "slice")], -1, call="seq"),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_case_matches_torch(name):
    assert sf.check(None, FIXED[name]) is None


@pytest.mark.parametrize("index", [[-1], [3]])
def test_gather_and_take_along_dim_out_of_range_raise_runtime_error_as_torch(index):
    for m in (torch, flow):
        x, i = m.ones(3, dtype=m.float64), m.tensor(index)
        with pytest.raises(RuntimeError, match="out of bounds"):
            m.gather(x, 0, i)
        with pytest.raises(RuntimeError, match="out of bounds"):
            m.take_along_dim(x, i)  # (dim=None: torch's flat gather takes no negative index)


def test_ravel_copies_a_non_contiguous_input_and_views_a_contiguous_one():
    x = flow.zeros(1).expand(3)  # (a reshape(-1) of it is a view: NumPy's, of stride 0)
    r = x.ravel()
    r[0] = 5.0
    assert x.sum().item() == 0.0 and r._base is not x._base
    y = flow.zeros(2, 3)
    assert y.ravel()._base is y


# one written case for each KNOWN entry (the fuzz draws some of them rarely)
KNOWN_CASES = {
    "lazy conj": _case("mH", [((2, 2), "complex128", "contig")], call="attr"),
    "narrow_copy negative start": _case("narrow_copy", [((3,), F64, "contig")], 0, -1, 1),
    "block_diag empty block": _case("block_diag", [((0,), F64, "contig"), ((1,), F64, "contig")],
                                    call="star"),
    "take_along_dim flat view": _case("take_along_dim", [((3, 2), F64, "transpose")],
                                      ("flat index", (2,), 6), call="fn"),
    "as_strided of an empty view": _case("as_strided", [((0,), F64, "slice")], (), (), 0),
}


@pytest.mark.parametrize("name", sorted(sf.KNOWN))
def test_each_known_difference_still_differs(name):
    case = KNOWN_CASES[name]
    assert sf.known(case) == name
    assert sf.check(None, case) is not None


@pytest.mark.parametrize("method", ["reshape", "view", "expand", "repeat"])
def test_a_shape_method_without_sizes_raises_as_torch(method):
    # flowgrad took no sizes as the 0-d shape (x.reshape() of a 1-element x gave a 0-d view)
    with pytest.raises(TypeError, match="x.view|missing"):
        getattr(flow.ones(1), method)()
    assert getattr(flow.ones(()), method)(()).shape == ()


def test_repeat_interleave_of_negative_counts_raises_runtime_error_as_torch():
    # the index form (counts alone) let NumPy's repeat raise its ValueError
    for m in (torch, flow):
        for call in (lambda: m.repeat_interleave(m.tensor([-1, 2])),
                     lambda: m.tensor([1, 2]).repeat_interleave(m.tensor([-1, 2]))):
            with pytest.raises(RuntimeError, match="negative"):
                call()
