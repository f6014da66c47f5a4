"""torch.nn.attention's kernel choice for F.scaled_dot_product_attention against torch's CPU
dispatch: which calls run and which raise (RuntimeError) under each set of allowed kernels,
by `sdpa_kernel` and by the `backends.cuda` switches, and that a call that runs gives the
same numbers as with every kernel allowed."""
import numpy as np
import pytest
import torch
import torch.nn.attention  # noqa: F401 - torch.nn.attention below

import flowgrad as flow

SHAPES = {  # name -> (query, key, value shapes, keywords)
    "4d": ((1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8), {}),
    "4d_causal": ((1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), {"is_causal": True}),
    "4d_mask": ((1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), {"mask": True}),
    "4d_dropout": ((1, 2, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), {"dropout_p": 0.5}),
    "3d": ((2, 4, 8), (2, 4, 8), (2, 4, 8), {}),
    "value_width_differs": ((1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 5, 4), {}),
    "heads_broadcast": ((1, 2, 3, 8), (1, 1, 3, 8), (1, 1, 3, 8), {}),
    "grouped_heads": ((1, 4, 3, 8), (1, 2, 3, 8), (1, 2, 3, 8), {"enable_gqa": True}),
}
CHOICES = {
    "math": ["MATH"], "flash": ["FLASH_ATTENTION"], "efficient": ["EFFICIENT_ATTENTION"],
    "cudnn": ["CUDNN_ATTENTION"], "none": [], "efficient_and_math": ["EFFICIENT_ATTENTION",
                                                                     "MATH"],
}


def _call(m, shape, choice, by_switches):
    qs, ks, vs, kw = SHAPES[shape]
    kw = dict(kw)
    rng = np.random.default_rng(0)
    q, k, v = (m.tensor(rng.standard_normal(s)) for s in (qs, ks, vs))
    if kw.pop("mask", False):
        kw["attn_mask"] = m.tensor(np.tril(np.ones((3, 3), bool)))
    if kw.get("dropout_p"):
        m.manual_seed(0)
    names = CHOICES[choice]
    if by_switches:
        flags = {"MATH": "math", "FLASH_ATTENTION": "flash", "EFFICIENT_ATTENTION":
                 "mem_efficient", "CUDNN_ATTENTION": "cudnn"}
        saved = {f: getattr(m.backends.cuda, f"{f}_sdp_enabled")() for f in flags.values()}
        for name, flag in flags.items():
            getattr(m.backends.cuda, f"enable_{flag}_sdp")(name in names)
        try:
            return m.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        finally:
            for flag, on in saved.items():
                getattr(m.backends.cuda, f"enable_{flag}_sdp")(on)
    backends = [getattr(m.nn.attention.SDPBackend, n) for n in names]
    with m.nn.attention.sdpa_kernel(backends):
        return m.nn.functional.scaled_dot_product_attention(q, k, v, **kw)


def _outcome(m, *args):
    try:
        return _call(m, *args), None
    except RuntimeError as e:
        return None, str(e).split(".")[0]


@pytest.mark.parametrize("by_switches", [False, True], ids=["sdpa_kernel", "switches"])
@pytest.mark.parametrize("choice", list(CHOICES))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_kernel_choice_runs_or_raises_as_torch(shape, choice, by_switches):
    theirs, their_error = _outcome(torch, shape, choice, by_switches)
    ours, our_error = _outcome(flow, shape, choice, by_switches)
    assert our_error == their_error
    if ours is not None and not SHAPES[shape][3].get("dropout_p"):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(ours.numpy(), _call(flow, shape, "math", False).numpy())


def test_the_block_restores_the_switches_and_takes_one_backend():
    for m in (torch, flow):
        sdp = m.nn.attention.SDPBackend
        with m.nn.attention.sdpa_kernel(sdp.FLASH_ATTENTION):
            assert not m.backends.cuda.math_sdp_enabled()
            assert m.backends.cuda.flash_sdp_enabled()
        assert m.backends.cuda.math_sdp_enabled()
        assert int(sdp.MATH) == 0 and str(sdp.CUDNN_ATTENTION) == "SDPBackend.CUDNN_ATTENTION"
