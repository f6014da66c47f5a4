"""Convolutions, pools, interpolate, pad, fold/unfold, pixel shuffles and grid_sample over
their whole argument space against torch: see tests/spatial_fuzz.py.

The cases that still differ are listed with the reason; in each, flowgrad refuses what torch
computes from memory it never wrote, or torch is wrong.
"""
from __future__ import annotations

import fuzz_common
import numpy as np
import pytest
import spatial_fuzz as sf
import torch

import flowgrad as flow

_CIRCULAR = ("circular pad whose negative pad leaves fewer elements than a positive pad wraps: "
             "torch fills the output from its own uninitialised memory; flowgrad refuses")
_EMPTY_TRANSPOSED = ("conv_transpose of an empty batch with an invalid output_padding or an "
                     "output size of 0: torch skips its checks for N = 0; flowgrad checks")
_TORCH_AA = ("torch 2.13's antialiased downsampling to an output one pixel wide gives every "
             "output row the first row's value ((8,1)->(2,1) of 0..7: [1.89, 1.89]; its "
             "(1,8)->(1,2) gives [1.89, 5.11]; also (7,5)->(2,1), seen at seed 7000747); "
             "flowgrad's rows are the transposed ones")
_TORCH_ONEDNN32 = ("torch 2.13's float32 conv_transpose on its oneDNN path (grouped, or with a "
                   "stride or dilation: seeds 5000481, 5040028) skips the output-size check: a "
                   "calculated size of 0 gives an empty output where float64 raises 'Output "
                   "size is too small'; flowgrad raises for every dtype")
KNOWN_DIFFERENCES = {
    **dict.fromkeys([5000481, 5040028], _TORCH_ONEDNN32),
    **dict.fromkeys([376, 955, 1045, 1146, 2362, 2533, 2795], _CIRCULAR),
    **dict.fromkeys([404, 1311, 1730, 2045, 2852], _EMPTY_TRANSPOSED),
    **dict.fromkeys([2075, 2978], _TORCH_AA),
}
FAST_SEEDS = range(400)
SLOW_SEEDS = range(400, 3000)


@pytest.mark.parametrize("seed", [s for s in FAST_SEEDS if s not in KNOWN_DIFFERENCES])
def test_spatial_case_matches_torch(seed):
    verdict = sf.check(seed)
    assert verdict is None, f"{sf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_spatial_cases_match_torch():
    fuzz_common.assert_seeds_agree(sf.check, SLOW_SEEDS, KNOWN_DIFFERENCES)


@pytest.mark.parametrize("seed", sorted(KNOWN_DIFFERENCES))
def test_known_differences_still_differ(seed):
    # when one starts to agree (a torch fix, a flowgrad change), it leaves the list
    assert sf.check(seed) is not None


def test_a_max_pool_window_over_padding_only_reads_nothing():
    # kernel 2 dilated by 2 with padding 1 and ceil_mode on a one-row input: every window
    # reads only padding; torch 2.13 returns out-of-range indices and its backward writes out
    # of bounds. flowgrad: -inf, negative indices, and no gradient from those windows
    x = flow.arange(3.0, dtype=flow.float64).reshape(1, 1, 1, 3).requires_grad_()
    y, idx = flow.nn.functional.max_pool2d(x, 2, stride=1, padding=1, dilation=2,
                                           ceil_mode=True, return_indices=True)
    assert y.tolist() == [[[[-np.inf] * 3]]] and (idx < 0).all()
    (g,) = flow.autograd.grad(y.clamp(min=-1.0).sum(), x, create_graph=True)
    assert g.tolist() == [[[[0.0, 0.0, 0.0]]]]
    (gg,) = flow.autograd.grad((g * x).sum(), x)  # the gather of double backward too
    assert gg.tolist() == [[[[0.0, 0.0, 0.0]]]]


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("bias_dtype", ["float16", "float32", "int64", "complex128"])
def test_conv_transpose_bias_of_another_dtype_as_torch(nd, bias_dtype):
    # torch's conv_transpose1d/2d add a real bias of any dtype to a floating result (the
    # gradient comes back in the bias's dtype); conv_transpose3d and a complex bias raise.
    # flowgrad refused every bias of another dtype
    def program(m):
        x = m.tensor(np.arange(2.0 * 3 ** nd).reshape((1, 2) + (3,) * nd))
        w = m.ones((2, 3) + (2,) * nd, dtype=m.float64)
        b = m.tensor([1, 2, 3], dtype=getattr(m, bias_dtype))
        b.requires_grad_(b.is_floating_point())
        y = getattr(m.nn.functional, f"conv_transpose{nd}d")(x, w, b)
        grads = m.autograd.grad(y.sum(), b) if b.requires_grad else ()
        return [y.detach().numpy()] + [g.numpy() for g in grads]

    out = []
    for m in (torch, flow):
        try:
            out.append(program(m))
        except RuntimeError:
            out.append(RuntimeError)
    want, got = out
    assert (want is RuntimeError) == (got is RuntimeError), (want, got)
    if want is not RuntimeError:
        for w, g in zip(want, got, strict=True):
            assert w.dtype == g.dtype
            np.testing.assert_array_equal(g, w)
