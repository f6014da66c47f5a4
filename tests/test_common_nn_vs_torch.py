"""torch's older nn test database (common_nn: module_tests, get_new_module_tests(),
criterion_tests) through flowgrad: every entry's outputs, input and parameter gradients (and
their gradients where torch runs gradgradcheck), buffers, in training and eval mode, with
non-contiguous inputs, with a loss's floating target requiring grad, and under float32
(tests/common_nn_vs_torch.py runs each entry; its script form prints a report).

Entries that still differ are listed in KNOWN (entry name -> (a regex every finding of the
entry matches, the reason)); an entry listed there that no longer differs fails, so that the
list only shrinks. The regression tests at the end are the fixes the probe led to, each
checked on its own against torch.
"""
import re

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import common_nn_vs_torch as harness  # noqa: E402
import numpy as np  # noqa: E402
import opinfo_vs_torch  # noqa: E402
import torch  # noqa: E402

import flowgrad as flow  # noqa: E402

ENTRIES = harness.entries()

KNOWN: dict[str, tuple[str, str]] = {}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with opinfo_vs_torch.one_thread():
        yield


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.name for entry in ENTRIES])
def test_entry_matches_torch(entry):
    findings = [f for f in harness.probe(entry) if not f[1].startswith("skip")]
    if entry.name in KNOWN:
        pattern, reason = KNOWN[entry.name]
        assert findings, f"{entry.name} now matches torch: remove it from KNOWN"
        unexplained = [f for f in findings if not re.search(pattern, f[1])]
        assert not unexplained, f"{entry.name}: findings beyond KNOWN: {unexplained[:4]}"
        pytest.xfail(reason)
    report = "\n".join(f"[{where}] {message}" for where, message in findings[:8])
    assert not findings, f"{len(findings)} differences from torch:\n{report}"


def test_database_is_all_there():
    """module_tests, get_new_module_tests() and criterion_tests, every entry named once."""
    assert len(ENTRIES) >= 280
    assert len({entry.name for entry in ENTRIES}) == len(ENTRIES)
    assert set(KNOWN) <= {entry.name for entry in ENTRIES}


def test_loss_entries_get_the_reduction_their_names_say():
    """The `*_no_batch_dim_{none,mean,sum}` entries read a loop variable that is 'sum' when a
    test runs; the harness binds each to its own reduction."""
    entry = next(e for e in ENTRIES if e.name == "L1Loss_no_batch_dim_none")
    test = harness._torch_test(entry)
    assert test.constructor().reduction == "none"
    assert harness.flow_constructor(test.constructor)().reduction == "none"


# ---- the fixes the probe led to --------------------------------------------------------------
@pytest.mark.parametrize("channels, size", [(3, 5), (7, 3), (8, 5), (6, 4), (1, 2), (9, 2)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cross_map_lrn2d(channels, size, dtype):
    """flowgrad had no nn.CrossMapLRN2d (torch's legacy Lua-torch layer). Its forward window
    keeps channel 0 in every scale past the first few channels, and its hand-written backward
    sums a window of its own (not the forward's transpose): both are torch's, value for value."""
    x = torch.randn(2, channels, 3, 4, dtype=dtype, requires_grad=True)
    module = torch.nn.CrossMapLRN2d(size, 0.3, 0.9, 1.5)
    y = module(x)
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    fx = flow.tensor(x.detach().numpy(), requires_grad=True)
    f_module = flow.nn.CrossMapLRN2d(size, 0.3, 0.9, 1.5)
    fy = f_module(fx)
    (fg,) = flow.autograd.grad(fy, fx, flow.tensor(g.numpy()))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-14)
    assert fy.dtype == (flow.float32 if dtype == torch.float32 else flow.float64)
    np.testing.assert_allclose(fy.detach().numpy(), y.detach().numpy(), **tol)
    np.testing.assert_allclose(fg.numpy(), gx.numpy(), **tol)
    assert repr(f_module) == repr(module)
    assert list(f_module.state_dict()) == list(module.state_dict()) == []


def test_cross_map_lrn2d_wants_a_4d_input():
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D"):
        torch.nn.CrossMapLRN2d(3)(torch.randn(2, 3, 4))
    with pytest.raises(ValueError, match="Expected input to be 4D, got 3D"):
        flow.nn.CrossMapLRN2d(3)(flow.randn(2, 3, 4))


@pytest.mark.parametrize("name", ["silu", "mish"])
@pytest.mark.parametrize("shape", [(4,), (2, 4), ()])
def test_silu_backward_under_vmap(name, shape):
    """vmap over the backward (torch's check_batched_grad): the batched cotangent meets the
    unbatched input, and silu's gradient kernel wrote the product into an array of the input's
    shape (ValueError: non-broadcastable output operand)."""
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    y = getattr(torch.nn.functional, name)(x)
    cotangents = torch.randn((3, *shape), dtype=torch.float64)
    expected = torch.stack([torch.autograd.grad(y, x, v, retain_graph=True)[0]
                            for v in cotangents])
    fx = flow.tensor(x.detach().numpy(), requires_grad=True)
    fy = getattr(flow.nn.functional, name)(fx)
    actual = flow.func.vmap(lambda v: flow.autograd.grad(fy, fx, v, retain_graph=True)[0])(
        flow.tensor(cotangents.numpy()))
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-12, atol=1e-14)
