"""unfold/fold, pixel_shuffle, interpolate, grid_sample and affine_grid against torch and by
float64 finite differences to second order; bad arguments raise torch-like errors."""
import numpy as np
import pytest
from helpers import op_table_tests

import flowgrad as flow


def F(m):
    return m.nn.functional


def _interp(mode, ac=None, **kw):
    return lambda m, x: F(m).interpolate(x, mode=mode, align_corners=ac, **kw)


# grid points spread past [-1, 1] so padding modes matter; off the pixel lattice so bilinear
# weights (and nearest's rounding) are away from their kinks
GRID = np.random.default_rng(3).uniform(-1.3, 1.3, (2, 3, 2, 2))
GRID_TINY = np.random.default_rng(4).uniform(-1.2, 1.2, (1, 2, 2, 2))


def _gs(mode, pad, ac):
    return lambda m, x, g: F(m).grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac)


CASES = [
    ("unfold", lambda m, x: F(m).unfold(x, 2), (2, 3, 4, 5)),
    ("unfold_full", lambda m, x: F(m).unfold(x, (2, 3), dilation=(1, 2), padding=1,
                                             stride=(2, 1)), (2, 3, 5, 6)),
    ("unfold_unbatched", lambda m, x: F(m).unfold(x, 2, stride=2), (3, 4, 4)),
    ("fold", lambda m, x: F(m).fold(x, (4, 5), 2), (2, 12, 12)),
    ("fold_full", lambda m, x: F(m).fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1,
                                         stride=(2, 1)), (2, 18, 12)),
    ("fold_unbatched", lambda m, x: F(m).fold(x, 4, 2, stride=2), (8, 4)),
    ("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), (2, 8, 3, 2)),
    ("pixel_shuffle_5d", lambda m, x: F(m).pixel_shuffle(x, 3), (2, 1, 9, 2, 2)),
    ("pixel_unshuffle", lambda m, x: m.pixel_unshuffle(x, 2), (2, 2, 4, 6)),
    ("nearest_size", _interp("nearest", size=(5, 3)), (2, 3, 4, 6)),
    ("nearest_scale", _interp("nearest", scale_factor=(1.7, 2.5)), (2, 3, 4, 6)),
    ("nearest_1d", _interp("nearest", scale_factor=1.5), (2, 3, 7)),
    ("nearest_3d", _interp("nearest", size=(3, 2, 5)), (1, 2, 2, 3, 4)),
    ("nearest_exact", _interp("nearest-exact", size=(5, 3)), (2, 3, 4, 6)),
    ("linear", _interp("linear", False, scale_factor=1.5), (2, 3, 7)),
    ("linear_corners", _interp("linear", True, size=11), (2, 3, 7)),
    ("bilinear_size", _interp("bilinear", False, size=(5, 3)), (2, 3, 4, 6)),
    ("bilinear_scale", _interp("bilinear", False, scale_factor=(1.7, 2.5)), (2, 3, 4, 6)),
    ("bilinear_corners", _interp("bilinear", True, size=(7, 9)), (2, 3, 4, 6)),
    ("bilinear_recompute", _interp("bilinear", False, scale_factor=1.7,
                                   recompute_scale_factor=True), (2, 3, 4, 6)),
    ("bicubic_size", _interp("bicubic", False, size=(5, 9)), (2, 3, 4, 6)),
    ("bicubic_scale", _interp("bicubic", False, scale_factor=2), (2, 3, 4, 6)),
    ("bicubic_corners", _interp("bicubic", True, size=(7, 3)), (2, 3, 4, 6)),
    ("trilinear", _interp("trilinear", False, size=(3, 4, 5)), (1, 2, 2, 3, 4)),
    ("area", _interp("area", scale_factor=0.5), (2, 3, 8, 6)),
    ("upsample_default", lambda m, x: F(m).interpolate(x, scale_factor=2), (1, 2, 3, 3)),
    ("grid_bilinear_zeros", _gs("bilinear", "zeros", False), (2, 3, 4, 5), GRID),
    ("grid_bilinear_zeros_ac", _gs("bilinear", "zeros", True), (2, 3, 4, 5), GRID),
    ("grid_bilinear_border", _gs("bilinear", "border", False), (2, 3, 4, 5), GRID),
    ("grid_bilinear_border_ac", _gs("bilinear", "border", True), (2, 3, 4, 5), GRID),
    ("grid_nearest_zeros", _gs("nearest", "zeros", False), (2, 3, 4, 5), GRID),
    ("grid_nearest_border_ac", _gs("nearest", "border", True), (2, 3, 4, 5), GRID),
    ("affine_grid", lambda m, t: F(m).affine_grid(t, (2, 3, 4, 5), align_corners=False),
     (2, 2, 3)),
    ("affine_grid_ac", lambda m, t: F(m).affine_grid(t, (2, 3, 4, 5), align_corners=True),
     (2, 2, 3)),
    ("affine_grid_3d", lambda m, t: F(m).affine_grid(t, (2, 3, 2, 4, 5), align_corners=False),
     (2, 3, 4)),
    ("affine_then_sample", lambda m, t, x: F(m).grid_sample(
        x, F(m).affine_grid(t, (2, 3, 3, 4), align_corners=False), align_corners=False),
     (2, 2, 3), (2, 3, 4, 5)),
]

GRAD_CASES = [
    ("unfold", lambda m, x: F(m).unfold(x, 2, padding=1), (1, 1, 2, 3)),
    ("fold", lambda m, x: F(m).fold(x, (3, 3), 2), (1, 4, 4)),
    ("pixel_shuffle", lambda m, x: F(m).pixel_shuffle(x, 2), (1, 4, 2, 2)),
    ("nearest", _interp("nearest", scale_factor=2), (1, 1, 2, 3)),
    ("linear", _interp("linear", False, size=5), (1, 2, 3)),
    ("bilinear", _interp("bilinear", True, size=(3, 4)), (1, 1, 2, 3)),
    ("bicubic", _interp("bicubic", False, scale_factor=2), (1, 1, 2, 3)),
    ("grid_bilinear_zeros", _gs("bilinear", "zeros", False), (1, 1, 3, 3), GRID_TINY),
    ("grid_bilinear_border", _gs("bilinear", "border", True), (1, 1, 3, 3), GRID_TINY),
    ("grid_nearest", _gs("nearest", "zeros", False), (1, 1, 3, 3), GRID_TINY),
    ("affine_grid", lambda m, t: F(m).affine_grid(t, (1, 1, 2, 3), align_corners=False),
     (1, 2, 3)),
]


test_against_torch, test_finite_differences = op_table_tests(CASES, GRAD_CASES)


def _t(*shape):
    return flow.randn(*shape)


Fn = flow.nn.functional
ERRORS = [
    (lambda: Fn.interpolate(_t(1, 2, 4, 4), scale_factor=2, mode="foo"), NotImplementedError,
     r"Only 3D, 4D and 5D input Tensors supported \(got 4D\) .* \(got foo\)"),
    (lambda: Fn.interpolate(_t(1, 2, 4), scale_factor=2, mode="bilinear"),
     NotImplementedError, "Got 3D input, but bilinear mode needs 4D input"),
    (lambda: Fn.interpolate(_t(1, 2, 4, 4), size=3, scale_factor=2), ValueError,
     "only one of size or scale_factor should be defined"),
    (lambda: Fn.interpolate(_t(1, 2, 4, 4)), ValueError,
     "either size or scale_factor should be defined"),
    (lambda: Fn.interpolate(_t(1, 2, 4, 4), size=(3,)), ValueError,
     "Input and output must have the same number of spatial dimensions"),
    (lambda: Fn.interpolate(_t(1, 2, 4, 4), scale_factor=2, align_corners=True), ValueError,
     "align_corners option can only be set with the interpolating modes"),
    (lambda: Fn.grid_sample(_t(1, 2, 4, 4), _t(1, 3, 3, 2), mode="foo"), ValueError,
     "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'foo'"),
    (lambda: Fn.grid_sample(_t(1, 2, 4, 4), _t(1, 3, 3, 2), padding_mode="foo"), ValueError,
     "expected padding_mode to be 'zeros', 'border', or 'reflection', but got: 'foo'"),
    (lambda: Fn.grid_sample(_t(1, 2, 4, 4), _t(1, 3, 3, 3)), RuntimeError,
     "expected grid to have size 2 in last dimension"),
    (lambda: Fn.grid_sample(_t(2, 2, 4, 4), _t(1, 3, 3, 2)), RuntimeError,
     "expected grid and input to have same batch size"),
    (lambda: Fn.affine_grid(_t(1, 2, 3), (1, 2, 4)), NotImplementedError,
     "affine_grid only supports 4D and 5D sizes"),
    (lambda: Fn.affine_grid(_t(1, 3, 3), (1, 2, 4, 4)), ValueError,
     "Expected a batch of 2D affine matrices of shape Nx2x3"),
    (lambda: Fn.pixel_shuffle(_t(1, 3, 4, 4), 2), RuntimeError,
     r"input.size\(-3\)=3 is not divisible by 4"),
    (lambda: Fn.pixel_unshuffle(_t(1, 3, 5, 4), 2), RuntimeError,
     r"pixel_unshuffle expects height to be divisible by downscale_factor, but "
     r"input.size\(-2\)=5"),
    (lambda: Fn.unfold(_t(4, 8), 2), RuntimeError, r"Only 3D or 4D input Tensors are supported"),
    (lambda: Fn.unfold(_t(1, 2, 4, 4), 2, stride=0), RuntimeError,
     "expected stride to be positive"),
    (lambda: Fn.unfold(_t(1, 2, 2, 2), 3), RuntimeError,
     "calculated shape of the array of sliding blocks"),
    (lambda: Fn.fold(_t(1, 5, 9), (4, 4), 2), RuntimeError,
     r"divisible by the product of kernel_size, but got input.size\(1\)=5"),
    (lambda: Fn.fold(_t(1, 8, 10), (4, 4), 2), RuntimeError,
     r"calculated number of sliding blocks 3 \* 3 = 9, but got input.size\(2\)=10"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_bad_arguments(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("mode", ["linear", "bilinear", "bicubic", "trilinear"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_float32_within_float32_rounding_of_torch(mode, align_corners):
    """torch computes the source coordinates in float32 for float32 input (its opmath type),
    scale * (i + 0.5) - 0.5 as one fused multiply-add; computing them in float64 put
    flowgrad's float32 results ~4e-5 relative off torch's on images of a few hundred pixels."""
    import torch
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}[mode]
    rng = np.random.default_rng(3)
    for k in range(4):
        size_in = tuple(int(v) for v in rng.integers(5, 300 if nd < 3 else 30, nd))
        size_out = tuple(int(v) for v in rng.integers(5, 400 if nd < 3 else 40, nd))
        x = rng.standard_normal((1, 2) + size_in).astype(np.float32)
        kw = {"size": size_out} if k % 2 else {"scale_factor": 1.37}
        want = torch.nn.functional.interpolate(torch.from_numpy(x), mode=mode,
                                               align_corners=align_corners, **kw).numpy()
        got = flow.nn.functional.interpolate(flow.from_numpy(x), mode=mode,
                                             align_corners=align_corners, **kw).numpy()
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 2e-6 * np.abs(want).max()


@pytest.mark.parametrize("call", [
    lambda F, t: F.grid_sample(t.ones(1, 1, 2, 2), t.zeros(1, 1, 1, 2)),
    lambda F, t: F.affine_grid(t.eye(2, 3).unsqueeze(0), (1, 1, 2, 2)),
], ids=["grid_sample", "affine_grid"])
def test_align_corners_left_out_warns_as_torch(call):
    """torch warns that the default changed (align_corners=False since 1.3) when it is left out,
    and not when it is given."""
    import warnings

    import torch

    for F, t in ((Fn, flow), (torch.nn.functional, torch)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call(F, t)
        assert [str(w.message)[:39] for w in caught] == ["Default grid_sample and affine_grid beh"]


def _sizes(m):
    return [m.tensor(3), m.tensor([3]), [m.tensor(3), 5], m.tensor([3, 5]), m.tensor(3.0),
            [m.tensor(3.0), 5], [3.0, 5], True, m.tensor(True), [m.tensor([3, 4]), 5]]


@pytest.mark.parametrize("i", range(10))
def test_interpolate_size_read_as_torch_reads_it(i):
    """torch takes a one-element integer tensor as an int size (alone or in a list) and refuses
    floats, bools and longer tensors; flowgrad iterated a 0-d tensor (TypeError) and took a
    2-element tensor, a float list or True as sizes."""
    import torch
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    try:
        want = tuple(torch.nn.functional.interpolate(torch.tensor(x), size=_sizes(torch)[i]).shape)
    except (TypeError, RuntimeError) as e:
        with pytest.raises(type(e)):
            flow.nn.functional.interpolate(flow.tensor(x), size=_sizes(flow)[i])
    else:
        assert tuple(flow.nn.functional.interpolate(flow.tensor(x), size=_sizes(flow)[i]).shape) \
            == want
