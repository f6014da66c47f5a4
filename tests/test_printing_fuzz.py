"""Random tensors (every dtype, 0-d to 4-d, summarized, views, nan/inf/-0./subnormals, print
options, requires_grad, grad_fn, Parameter, a user's subclass, meta) print in flowgrad as in
torch: repr, str, format, tolist and containers of them; see tests/printing_fuzz.py."""
from __future__ import annotations

import fuzz_common
import numpy as np
import printing_fuzz as pf
import pytest
import torch

import flowgrad as flow

# deliberate differences: the fuzz reads a grad_fn=<...> of these ops as any name
# (printing_fuzz.KNOWN: flowgrad's decompositions), does not draw these ops for complex
# tensors (INEXACT_COMPLEX) nor these cases (NOT_DRAWN: an op's values differ, not the
# printing), and places the suffixes by flowgrad's own text ("dtype=flowgrad.float64" is 3
# characters longer than torch's, so it wraps at linewidth a little earlier: as_flowgrad)
KNOWN = {**{f"grad_fn of {k}": v for k, v in pf.KNOWN.items()},
         **{f"complex {k}": v for k, v in pf.INEXACT_COMPLEX.items()}, **pf.NOT_DRAWN,
         "suffix wrap": "a suffix naming flowgrad is measured against linewidth as printed",
         "set_printoptions(profile='x')": "flowgrad raises ValueError naming the profiles; "
                                          "torch ignores an unknown profile (a typo does "
                                          "nothing)",
         "func transforms": "inside func.grad/jvp flowgrad's inputs are plain tensors "
                            "(requires_grad, a dual's tangent=), not GradTrackingTensor(lvl=...)"
                            "; vmap's BatchedTensor holds the batch dim at 0 (bdim=0)"}


@pytest.mark.parametrize("seed", range(400))
def test_printing_matches_torch(seed):
    verdict = pf.check(seed)
    assert verdict is None, f"{pf.Case(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_printings_match_torch():
    fuzz_common.assert_seeds_agree(pf.check, range(400, 20000))


@pytest.mark.parametrize("op", sorted(pf.KNOWN))
def test_known_grad_fn_names_still_differ(op):
    # each KNOWN entry is still a difference (else it should leave the table)
    def name(m):
        t = m.ones(3) if op == "contiguous" else m.ones(3, 2).t()  # (reshape: a copy)
        t = (t.to(m.complex64) if op in ("conj", "real") else t).requires_grad_()
        return type(pf.OPS[op](t).grad_fn).__name__

    names = {name(m) for m in (torch, flow)}
    assert len(names) == 2, names


def _both(fn):
    return [fn(m) for m in (torch, flow)]


def test_str_and_format_of_a_parameter_say_parameter_as_torch():
    # str(p) was Tensor.__repr__ (no "Parameter containing:"); f"{p}" of a 0-d Parameter
    # formatted its number, where torch's goes through object.__format__ (str(), and a spec
    # raises TypeError); a Buffer (torch's: a plain tensor) formats its number
    want, got = _both(lambda m: [str(m.nn.Parameter(m.ones(2))), f"{m.nn.Parameter(m.ones(()))}",
                                 f"{m.nn.Buffer(m.ones(())):.2f}"])
    assert got == [w.replace("torch.", "flowgrad.") for w in want]
    assert got[1].startswith("Parameter containing:\ntensor(1.")
    for m in (torch, flow):
        with pytest.raises(TypeError):
            f"{m.nn.Parameter(m.ones(())):.2f}"


def test_a_users_subclass_prints_its_name_as_torch():
    # flowgrad printed tensor(...) for every subclass; torch prints the class's name, and a
    # subclass tensor made a Parameter as Parameter(Name(...))
    def texts(m):
        sub = type("Scaled", (m.Tensor,), {})
        x = m.tensor([1.5, 2.0]).as_subclass(sub)
        return [repr(x), str(x[0]), f"{x[0]}", repr(m.nn.Parameter(x)), repr(x.to("meta")),
                repr(m.nn.Buffer(m.ones(2))), repr(m.nn.Parameter(m.ones(1)))]
    want, got = _both(texts)
    assert got == [w.replace("torch.", "flowgrad.") for w in want]
    assert got[0] == "Scaled([1.5000, 2.0000])" and got[-2] == "tensor([1., 1.])"


def test_meta_repr_wraps_its_suffixes_at_linewidth_as_torch():
    # the meta repr joined its suffixes on one line whatever the linewidth
    try:
        for m in (torch, flow):
            m.set_printoptions(linewidth=30)
        want, got = _both(lambda m: repr(m.ones(3, 400, device="meta", dtype=m.float64,
                                                 requires_grad=True)))
    finally:
        for m in (torch, flow):
            m.set_printoptions(profile="default")
    assert got == want.replace("torch.", "flowgrad.") and got.count("\n") == 3


def test_view_of_a_meta_tensor_as_torch():
    # view() compared memory to tell a copy: a meta array has none, so every view raised
    want, got = _both(lambda m: [tuple(m.ones(2, 3, device="meta").view(3, 2).shape),
                                 tuple(m.ones(6, device="meta").view(-1, 2).shape)])
    assert got == want


def test_permute_without_dims_raises_type_error_as_torch():
    # x.permute() was taken as permute(()): a 0-d tensor ran, others raised RuntimeError
    for m in (torch, flow):
        for shape in ((), (2, 3)):
            with pytest.raises(TypeError, match="dims"):
                m.ones(shape).permute()
        assert m.ones(()).permute(()).shape == ()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_cumsum_of_negative_zeros_is_positive_zero_as_torch(dtype):
    # torch's running sum starts at +0.: cumsum([-0., -0.]) is [0., 0.] (and so is the
    # gradient of a -0. upstream); NumPy's accumulate kept the -0.
    def run(m):
        x = m.tensor([-0.0, -0.0, 1.0]).to(getattr(m, dtype)).requires_grad_()
        y = x.cumsum(0)
        y.backward(m.full((3,), -0.0, dtype=y.dtype))
        return [np.signbit(y.detach().real.float().numpy()).tolist(),
                np.signbit(x.grad.real.float().numpy()).tolist()]
    want, got = _both(run)
    assert got == want == [[False, False, False], [False, False, False]]


def test_a_dual_tensor_prints_its_tangent_as_torch():
    # the repr of a forward-AD dual tensor left out torch's `tangent=` suffix
    def texts(m):
        fwAD = m.autograd.forward_ad
        with fwAD.dual_level():
            x = fwAD.make_dual(m.tensor([1.0, 2.0]), m.tensor([0.5, 1.0]))
            y = fwAD.make_dual(m.ones(2, 3, requires_grad=True) * 3, m.full((2, 3), 2.5))
            return [repr(x), repr(x * 2), repr(y), repr(x[0]), repr(fwAD.unpack_dual(x).primal)]
    want, got = _both(texts)
    assert got == want and got[0] == "tensor([1., 2.], tangent=tensor([0.5000, 1.0000]))"


def test_batched_tensor_repr_indents_its_value_as_torch():
    # vmap's BatchedTensor printed its value unindented, the ")" at the value's end
    def text(m):
        seen = []
        m.func.vmap(m.func.vmap(lambda t: seen.append(repr(t)) or t))(m.ones(2, 3))
        return seen[0]
    want, got = _both(text)
    assert got == want and got.endswith("\n    )\n)")


def test_sparse_coo_repr_as_torch():
    # flowgrad's sparse repr printed requires_grad inside values=tensor(...), named an int64
    # dtype, gave an empty indices tensor its dtype and an empty values tensor no size
    def texts(m):
        x = m.tensor([[0.0, 1.5], [2.0, 0.0]])
        return [repr(x.to_sparse().requires_grad_()), repr(m.tensor([[0, 1], [2, 0]]).to_sparse()),
                repr(m.zeros(2, 3).to_sparse()), repr(x.double().to_sparse()),
                f"{m.tensor(2.5).to_sparse():.2f}"]
    want, got = _both(texts)
    assert got == [w.replace("torch.", "flowgrad.") for w in want]
