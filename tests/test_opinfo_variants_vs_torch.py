"""Every OpInfo's method, operator and in-place variants against torch (opinfo_variants.py
does the work): values, dtypes and float64/complex128 gradients of x.op(...) and x + y; for
x.op_(...) on a clone of the input, on a leaf that requires grad and on a non-contiguous view
of a base, raise/no-raise, identity, the version counter, the values written and the gradients.

The default tier runs each OpInfo's first float64 sample; the slow tier every sample
in float64, int64, bool and complex128 (and only it checks that each KNOWN entry still matches
something). A finding fails unless KNOWN explains
it (a pattern its messages match, with the reason).
"""
from __future__ import annotations

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import torch  # noqa: E402
from opinfo_variants import probe  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, one_thread, op_db  # noqa: E402
from test_opinfo_vs_torch import KNOWN as FUNCTION_KNOWN  # noqa: E402
from test_opinfo_vs_torch import MISSING  # noqa: E402

import flowgrad as flow  # noqa: E402

DTYPES = (torch.float64, torch.int64, torch.bool, torch.complex128)
FIRST_DTYPES = DTYPES[:1]  # the default tier's (CPU budget); the fixes: their own tests

_TORCH_NO_INPLACE_GRAD = (r"derivative for 'inplace version of \w+' is not implemented",
                          "torch 2.13 has no gradient for this in-place op (its derivatives.yaml "
                          "lists only the out-of-place one); flowgrad's in-place gradient is the "
                          "out-of-place one (test_inplace_inverse_hyperbolic_grads)")

KNOWN: dict[str, tuple[str, str]] = {
    "acosh": _TORCH_NO_INPLACE_GRAD,
    "asinh": _TORCH_NO_INPLACE_GRAD,
    "atanh": _TORCH_NO_INPLACE_GRAD,
    "addbmm": (r"addbmm_: output with shape \(1?,?\) doesn't match the broadcast shape",
               "a torch bug: its CPU addbmm_ resizes a (1,) or () self to the (5, 10) result "
               "(an in-place op changing self's shape); its addmm_, baddbmm_ and addmv_ refuse "
               "as flowgrad does (\"Bad in-place call\")"),
    "nn.functional.dropout3d": (
        r"version: torch 0 -> 2, flowgrad 0 -> 0|leaf raise: torch RuntimeError\('a leaf",
        "a 4-D (unbatched) input with inplace=True: torch's Python wrapper runs "
        "input.unsqueeze_(0) and squeeze_(0) around the kernel, in-place metadata edits that "
        "bump the version twice and refuse a leaf requiring grad even with training=False or "
        "p=0; flowgrad writes nothing when nothing changes"),
    # the function variant's own entries (test_opinfo_vs_torch.py), seen through the method
    **{name: FUNCTION_KNOWN[name] for name in ("cov", "as_strided_scatter", "to_sparse")},
}

DB = [info for info in op_db() if any(getattr(info, kind + "_variant", None) is not None for kind
                                      in ("method", "inplace", "operator", "inplace_operator"))]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():  # small tensors: thread pools only spin
        yield


def _check(info, first_only):
    findings = probe(info, FIRST_DTYPES if first_only else DTYPES, first_only=first_only)
    assert_explained(full_name(info), findings, KNOWN, stale_check=not first_only,
                     missing=MISSING)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_variants_first_sample_vs_torch(info):
    _check(info, first_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_variants_vs_torch(info):
    _check(info, first_only=False)


# ---- the fixes this sweep found, on their own ------------------------------------------------
def test_float_power_inplace_keeps_a_complex_exponent():
    """float_power_ cast a complex exponent tensor to float64, dropping its imaginary part:
    (1.5+2j).float_power_(0.5-1j) gave sqrt(1.5+2j) = 1.414+0.707j, torch 3.594-1.748j."""
    base = torch.tensor([1.5 + 2j, -0.3 + 0.1j], dtype=torch.complex128)
    exponent = torch.tensor([0.5 - 1j, 2.0 + 0.5j], dtype=torch.complex128)
    leaf = base.clone().requires_grad_()
    e_leaf = exponent.clone().requires_grad_()
    expected = leaf.clone().float_power_(e_leaf)
    t_grads = torch.autograd.grad(expected, (leaf, e_leaf), torch.ones_like(expected))
    f_leaf = flow.tensor(base.numpy()).requires_grad_()
    f_e_leaf = flow.tensor(exponent.numpy()).requires_grad_()
    actual = f_leaf.clone().float_power_(f_e_leaf)
    f_grads = flow.autograd.grad(actual, (f_leaf, f_e_leaf), flow.ones_like(actual))
    assert actual.dtype == flow.complex128
    assert torch.allclose(torch.from_numpy(actual.detach().numpy()), expected.detach())
    for t, f in zip(t_grads, f_grads):
        assert torch.allclose(torch.from_numpy(f.numpy()), t)


@pytest.mark.parametrize("name", ["abs_", "absolute_"])
def test_inplace_abs_refuses_complex(name):
    """abs_ on a complex tensor wrote |z| + 0j where torch refuses."""
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        getattr(torch.tensor([1 + 1j]), name)()
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        getattr(flow.tensor([1 + 1j]), name)()
    x = flow.tensor([-1.5, 2.0])
    assert getattr(x, name)() is x and x.tolist() == [1.5, 2.0]


@pytest.mark.parametrize("name,args", [("unsafe_chunk", (2,)), ("unsafe_split", (2, 1)),
                                       ("unsafe_split_with_sizes", ([1, 2], 1))])
def test_unsafe_split_methods(name, args):
    t = torch.arange(12.0).reshape(4, 3)
    expected = getattr(t, name)(*args)
    actual = getattr(flow.tensor(t.numpy()), name)(*args)
    assert [p.tolist() for p in actual] == [p.tolist() for p in expected]
    functional = getattr(flow, name)(flow.tensor(t.numpy()), *args)
    assert [p.tolist() for p in functional] == [p.tolist() for p in expected]


@pytest.mark.parametrize("name", ["acosh_", "asinh_", "atanh_"])
def test_inplace_inverse_hyperbolic_grads(name):
    """torch has no gradient for these in-place ops: flowgrad's equals torch's out-of-place."""
    values = [1.5, 2.0, 3.0] if name == "acosh_" else [0.1, -0.5, 0.7]
    cot = [1.0, 2.0, -1.0]
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    expected, = torch.autograd.grad(getattr(torch, name[:-1])(x.clone()), x,
                                    torch.tensor(cot, dtype=torch.float64))
    f_x = flow.tensor(values, dtype=flow.float64, requires_grad=True)
    actual, = flow.autograd.grad(getattr(f_x.clone(), name)(), f_x,
                                 flow.tensor(cot, dtype=flow.float64))
    assert torch.allclose(torch.from_numpy(actual.numpy()), expected)
