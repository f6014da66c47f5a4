"""torch's nn-module database (ModuleInfo) through flowgrad, in float64, in training and in
eval mode: every module's outputs, input and parameter gradients and buffers as torch's
(tests/moduleinfo_vs_torch.py runs each ModuleInput; its script form prints a report).

Modules that still differ are listed in KNOWN with the reason; an entry whose module no longer
differs fails, so that the list only shrinks. The regression tests at the end are the fixes the
probe led to, each checked on its own against torch.
"""

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import moduleinfo_vs_torch as harness  # noqa: E402
import numpy as np  # noqa: E402
import opinfo_vs_torch  # noqa: E402
import torch  # noqa: E402

import flowgrad as flow  # noqa: E402

DB = harness.module_db()

KNOWN: dict = {}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with opinfo_vs_torch.one_thread():
        yield


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("info", DB, ids=[info.name for info in DB])
def test_module_matches_torch(info, training):
    findings = [f for f in harness.probe(info, modes=(training,)) if not f[2].startswith("skip")]
    if info.name in KNOWN:
        assert findings, f"{info.name} now matches torch: remove it from KNOWN"
        pytest.xfail(KNOWN[info.name])
    report = "\n".join(f"[{mode}] {where}: {message}" for mode, where, message in findings[:8])
    assert not findings, f"{len(findings)} differences from torch:\n{report}"


def test_known_names_are_in_the_database():
    assert set(KNOWN) <= {info.name for info in DB}


# ---- the fixes the probe led to --------------------------------------------------------------
@pytest.mark.parametrize("name", ["silu", "mish"])
@pytest.mark.parametrize("value", [0.5, -3.0, 30.0])
def test_silu_mish_of_a_0d_tensor(name, value):
    """A 0-d input made NumPy return a scalar where the kernel wrote with out= (TypeError)."""
    x = flow.tensor(value, dtype=flow.float64, requires_grad=True)
    y = getattr(flow.nn.functional, name)(x)
    (g,) = flow.autograd.grad(y, x, create_graph=True)
    (gg,) = flow.autograd.grad(g, x)
    xt = torch.tensor(value, dtype=torch.float64, requires_grad=True)
    yt = getattr(torch.nn.functional, name)(xt)
    (gt,) = torch.autograd.grad(yt, xt, create_graph=True)
    (ggt,) = torch.autograd.grad(gt, xt)
    for a, e in ((y, yt), (g, gt), (gg, ggt)):
        assert a.shape == () and np.isclose(a.item(), e.item(), rtol=1e-12, atol=1e-15)
    for dtype in (flow.float32, flow.bfloat16):
        assert getattr(flow.nn.functional, name)(flow.tensor(value, dtype=dtype)).dtype == dtype


@pytest.mark.parametrize("cls", ["FractionalMaxPool2d", "FractionalMaxPool3d"])
def test_fractional_max_pool_random_samples_is_a_buffer(cls):
    """As torch's: in the state_dict (a torch checkpoint loads strictly) and cast with .double()."""
    nd = 2 if cls.endswith("2d") else 3
    samples = torch.rand(1, 3, nd)
    t = getattr(torch.nn, cls)(2, output_ratio=0.5, _random_samples=samples).double()
    f = getattr(flow.nn, cls)(2, output_ratio=0.5, _random_samples=flow.tensor(samples.numpy()))
    f.double()
    assert list(f.state_dict()) == list(t.state_dict()) == ["_random_samples"]
    assert f._random_samples.dtype == flow.float64
    f.load_state_dict({k: flow.tensor(v.numpy()) for k, v in t.state_dict().items()})
    assert "_random_samples" not in getattr(flow.nn, cls)(2, output_ratio=0.5).state_dict()


@pytest.mark.parametrize("shape, rows", [((4, 5, 5, 5), 2), ((4, 5, 5, 5), 1),
                                         ((2, 4, 5, 5, 5), 3), ((2, 4, 5, 5, 5), 1),
                                         ((2, 4, 5, 5, 5), 0)])
def test_fractional_max_pool3d_reads_the_first_rows_of_random_samples(shape, rows):
    """torch reads row i of _random_samples for batch element i and ignores the rest (an
    unbatched input reads row 0); flowgrad raised on a longer one. Fewer rows than the batch
    raise in both."""
    x = torch.randn(*shape, dtype=torch.float64)
    samples = torch.rand(rows, 4, 3, dtype=torch.float64)
    kwargs = dict(output_ratio=0.5, return_indices=True)
    try:
        expected = torch.nn.functional.fractional_max_pool3d(x, 2, _random_samples=samples,
                                                             **kwargs)
    except RuntimeError:
        with pytest.raises(RuntimeError, match="no less then input batch size"):
            flow.nn.functional.fractional_max_pool3d(
                flow.tensor(x.numpy()), 2, _random_samples=flow.tensor(samples.numpy()),
                **kwargs)
        return
    actual = flow.nn.functional.fractional_max_pool3d(
        flow.tensor(x.numpy()), 2, _random_samples=flow.tensor(samples.numpy()), **kwargs)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


@pytest.mark.parametrize("samples_shape, message", [
    ((2, 3, 3), "size\\(1\\) equals to input channel size"),
    ((2, 4, 2), "size\\(2\\) equals to 3"),
    ((2, 4, 3, 1), "to have 3 dimensions, got 4")])
def test_fractional_max_pool3d_checks_random_samples(samples_shape, message):
    x = torch.randn(2, 4, 5, 5, 5, dtype=torch.float64)
    samples = torch.rand(*samples_shape, dtype=torch.float64)
    with pytest.raises(RuntimeError, match=message):
        torch.nn.functional.fractional_max_pool3d(x, 2, output_ratio=0.5, _random_samples=samples)
    with pytest.raises(RuntimeError, match=message):
        flow.nn.functional.fractional_max_pool3d(flow.tensor(x.numpy()), 2, output_ratio=0.5,
                                                 _random_samples=flow.tensor(samples.numpy()))
