"""Every OpInfo of torch's op database under vmap: flow.func.vmap against torch.func.vmap
(opinfo_vmap.py does the work): the sample's tensors batched in several in_dims/out_dims
combinations, and vmap(func.grad) per-example gradients. A finding fails the test unless the
OpInfo is in KNOWN with a pattern its findings match (each with its reason); an entry that no
longer matches anything fails too. The default tier runs each OpInfo's first float64 sample
(all tensors batched at 0, at -1, and the gradients); the slow tier adds int64 (values), the
first SLOW_SAMPLES samples of each, each tensor batched alone and the dim-1 case (every
sample is ~15 min of CPU: the CLI's --all).
"""
from __future__ import annotations

import pytest

pytest.importorskip("expecttest")  # torch's test internals import it

import torch  # noqa: E402
from opinfo_vmap import DTYPES, probe  # noqa: E402
from opinfo_vs_torch import assert_explained, full_name, one_thread, op_db  # noqa: E402
from test_opinfo_vs_torch import MISSING  # noqa: E402

import flowgrad as flow  # noqa: E402

_BESSEL = ("torch's float32-accurate approximation (as in test_opinfo_vs_torch's KNOWN); "
           "flowgrad's Cephes agrees with mpmath")
_AS_STRIDED = (r"values differ|out of bounds for storage",
               "NOT FIXED: with the batch dim not outermost in memory "
               "(in_dims=-1 or 1) torch's as_strided reads each example's physical storage "
               "(the strides are the storage's, so windows cross examples, as a loop over "
               "x[..., i] does); flowgrad's treats each example as its own contiguous storage "
               "(ops/strided.py _source)")
_INT_MATMUL = (r"output: dtype torch float32, flowgrad int64",
               "a torch bug: int64 operands with float alpha/beta give float32 under torch's "
               "vmap (its decomposition) but int64 outside it, as flowgrad gives in both")

KNOWN: dict[str, tuple[str, str]] = {
    "as_strided.partial_views": _AS_STRIDED,
    "special.bessel_j0": (r"output: values differ", _BESSEL),
    "special.bessel_j1": (r"output: values differ", _BESSEL),
    "special.bessel_y0": (r"output: values differ", _BESSEL),
    "special.bessel_y1": (r"output: values differ", _BESSEL),
    "as_strided_scatter": (r"grad\[0\]: values differ",
                           "torch 2.13's input gradient is the complement of the right one (as "
                           "in test_opinfo_vs_torch's KNOWN): flowgrad's 0 where src lands"),
    "linalg.lstsq": (r"output\[\d\]: shape torch \(34359738369, 0, 0\)",
                     "out_dims=-1 of the empty residuals: torch's shape is garbage (2**35 + 1); "
                     "flowgrad's (0, 3)"),
    "linalg.lstsq.grad_oriented": (r"output\[\d\]: shape torch \(34359738369, 0, 0\)",
                                   "as linalg.lstsq"),
}

_UNPOOL = (r"output: values differ", "indices batched (rolled) over unbatched values: a "
           "pool's indices repeat where windows overlap, and the repeats now carry different "
           "values; which write lands is each kernel's order (no flowgrad bug)")

# what only the other samples show (the slow tier; the sweep was cut short after
# max_unpool2d, so entries past it may be missing)
KNOWN_SLOW: dict[str, tuple[str, str]] = {
    "nn.functional.max_unpool1d": _UNPOOL,
    "nn.functional.max_unpool2d": _UNPOOL,
    "nn.functional.max_unpool3d": _UNPOOL,
    "as_strided": _AS_STRIDED,
    "as_strided_copy": _AS_STRIDED,
    "addmv": _INT_MATMUL,
    "addbmm": _INT_MATMUL,
    "baddbmm": _INT_MATMUL,
    "index_fill": (r"output: values differ", "a torch bug: an unbatched 0-d self filled with a "
                   "batched 0-d value gives every example the last value (torch [3, 3, 3] for "
                   "values [1, 2, 3], its loop [1, 2, 3], as flowgrad)"),
    "linalg.pinv": (r"output: shape torch \([\d, ]*\), flowgrad \(3, ",
                    "a torch bug: pinv of an empty A with a batched rtol alone gives a result "
                    "whose batch is lost (shape (0, 0) from vmap; `* rtol` then fails to "
                    "broadcast 0 against 3); flowgrad's is the unbatched result expanded"),
    "linalg.matrix_rank": (r"shape torch \(3435973836|Dimension out of range",
                           "out_dims=-1/1 of empty or 0-d results: torch's shapes are garbage "
                           "(2**35 + ...); flowgrad refuses out_dims=1 for a 0-d example result"),
    "linalg.matrix_rank.hermitian": (r"shape torch \(3435973836|Dimension out of range",
                                     "as linalg.matrix_rank"),
    "nn.functional.binary_cross_entropy_with_logits": (
        r"not differentiable with respect to argument 'weight'",
        "the gradient in weight: torch's autograd refuses it as flowgrad does; torch.func "
        "differentiates its decomposition"),
}

DB = op_db()


SLOW_SAMPLES = 3


def _check(info, every, known):
    name = full_name(info)
    if name in MISSING:
        pytest.skip("not in flowgrad")
    with one_thread():
        findings = probe(info, DTYPES if every else DTYPES[:1], every=every, first=SLOW_SAMPLES)
    if findings and findings[0][2] == "missing":
        pytest.skip("flowgrad lacks a name the sample uses")
    return assert_explained(name, findings, known, stale_check=not every)


@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_vmap_vs_torch(info):
    _check(info, False, KNOWN)


@pytest.mark.slow
@pytest.mark.parametrize("info", DB, ids=[full_name(info) for info in DB])
def test_opinfo_vmap_all_samples_vs_torch(info):
    _check(info, True, {**KNOWN, **KNOWN_SLOW})


def test_vmap_cov_weights_checked_per_example():
    """cov's fweights/aweights checks read every example (they read a placeholder of zeros
    under vmap before, so a negative batched weight passed); valid weights agree with torch's
    loop over the batch."""
    x = torch.randn(3, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    fw = torch.tensor([[1, 2, 1, 3], [2, 2, 1, 1], [1, 1, 1, 1]])
    # (torch's vmap refuses cov with weights, aten::equal: a loop is the reference)
    expected = torch.stack([torch.cov(x[i], fweights=fw[i]) for i in range(3)])
    actual = flow.func.vmap(lambda a, w: flow.cov(a, fweights=w))(
        flow.tensor(x.numpy()), flow.tensor(fw.numpy()))
    assert abs(actual.numpy() - expected.numpy()).max() < 1e-12
    bad = fw.clone()
    bad[1, 2] = -1
    with pytest.raises(RuntimeError, match="cannot be negative"):
        flow.func.vmap(lambda a, w: flow.cov(a, fweights=w))(flow.tensor(x.numpy()),
                                                             flow.tensor(bad.numpy()))
