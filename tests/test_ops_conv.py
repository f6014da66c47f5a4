"""Convolutions against torch (forward and both gradients) and by float64 finite differences
to second order; bad arguments raise torch-like errors. One line per case."""
import numpy as np
import pytest
import torch
from helpers import op_table_tests

import flowgrad as flow

# torch warns that it copies the input for an even 'same' kernel; nothing to act on here
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


def F(m):
    return m.nn.functional


CASES = [
    ("conv1d", lambda m, x, w, b: F(m).conv1d(x, w, b), (2, 3, 7), (4, 3, 3), (4,)),
    ("conv1d_stride_pad_dil", lambda m, x, w: F(m).conv1d(x, w, stride=2, padding=2, dilation=2),
     (2, 3, 9), (4, 3, 3)),
    ("conv1d_same_even", lambda m, x, w: F(m).conv1d(x, w, padding="same", dilation=3),
     (2, 3, 9), (4, 3, 4)),
    ("conv1d_unbatched", lambda m, x, w: m.conv1d(x, w), (3, 6), (2, 3, 2)),
    ("conv2d", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=1), (2, 3, 5, 6), (4, 3, 3, 3),
     (4,)),
    ("conv2d_stride_dil_groups", lambda m, x, w, b: F(m).conv2d(
        x, w, b, stride=2, padding=1, dilation=2, groups=2), (2, 4, 9, 8), (6, 2, 3, 2), (6,)),
    ("conv2d_asym", lambda m, x, w: F(m).conv2d(x, w, stride=(1, 2), padding=(2, 0),
                                                dilation=(1, 2)), (2, 2, 6, 7), (3, 2, 2, 3)),
    ("conv2d_depthwise", lambda m, x, w: F(m).conv2d(x, w, padding=1, groups=4),
     (2, 4, 5, 5), (8, 1, 3, 3)),
    ("conv2d_same", lambda m, x, w: F(m).conv2d(x, w, padding="same"), (2, 3, 5, 6),
     (2, 3, 2, 3)),
    ("conv2d_valid", lambda m, x, w: F(m).conv2d(x, w, padding="valid"), (2, 3, 5, 6),
     (2, 3, 2, 3)),
    ("conv2d_big_pad", lambda m, x, w: F(m).conv2d(x, w, padding=3), (2, 2, 4, 4),
     (3, 2, 3, 3)),
    ("conv2d_unbatched", lambda m, x, w: m.conv2d(x, w, stride=2), (3, 6, 5), (2, 3, 2, 2)),
    # the kernels pick the banded path for few channels in and out (tiles of an output row,
    # or the whole row), else im2col's layout by channels per group vs output row length, and
    # the input gradient's method by channels: one case per path
    ("conv2d_band_tiles", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=(1, 2)),
     (2, 2, 6, 28), (3, 2, 3, 5), (3,)),
    ("conv2d_im2col", lambda m, x, w: F(m).conv2d(x, w, padding=1), (2, 20, 4, 5),
     (3, 20, 3, 3)),
    ("conv2d_channel_major_groups", lambda m, x, w: F(m).conv2d(x, w, padding=1, groups=2),
     (2, 2, 5, 12), (4, 1, 3, 3)),
    ("conv2d_channels_last_groups", lambda m, x, w, b: F(m).conv2d(x, w, b, padding=1,
                                                                   groups=2),
     (2, 16, 4, 5), (4, 8, 3, 2), (4,)),
    ("conv2d_dx_as_conv", lambda m, x, w: F(m).conv2d(x, w, padding=1, dilation=(1, 2)),
     (2, 16, 4, 6), (3, 16, 3, 2)),
    ("conv3d", lambda m, x, w, b: F(m).conv3d(x, w, b, padding=1, stride=(1, 2, 1)),
     (2, 2, 4, 5, 3), (3, 2, 2, 3, 2), (3,)),
    ("conv3d_groups", lambda m, x, w: m.conv3d(x, w, groups=2, dilation=(1, 1, 2)),
     (1, 4, 3, 3, 5), (2, 2, 2, 2, 2)),
    ("conv_transpose1d", lambda m, x, w, b: F(m).conv_transpose1d(
        x, w, b, stride=2, padding=1, output_padding=1), (2, 3, 5), (3, 2, 3), (2,)),
    ("conv_transpose2d", lambda m, x, w, b: F(m).conv_transpose2d(x, w, b, padding=1),
     (2, 4, 5, 5), (4, 3, 3, 3), (3,)),
    ("conv_transpose2d_full", lambda m, x, w: F(m).conv_transpose2d(
        x, w, stride=(2, 3), padding=1, output_padding=(1, 2), groups=2, dilation=(1, 2)),
     (2, 4, 5, 4), (4, 3, 3, 2)),
    ("conv_transpose2d_dil_outpad", lambda m, x, w: m.conv_transpose2d(
        x, w, dilation=3, output_padding=2), (2, 2, 3, 3), (2, 2, 2, 2)),
    ("conv_transpose2d_unbatched", lambda m, x, w: m.conv_transpose2d(x, w, stride=2),
     (2, 3, 3), (2, 1, 2, 2)),
    ("conv_transpose3d", lambda m, x, w: m.conv_transpose3d(x, w, stride=2, padding=1),
     (1, 2, 2, 3, 2), (2, 2, 3, 2, 2)),
]

GRAD_CASES = [
    ("conv1d", lambda m, x, w, b: F(m).conv1d(x, w, b, stride=2, padding=1), (1, 2, 5),
     (2, 2, 2), (2,)),
    ("conv2d", lambda m, x, w: F(m).conv2d(x, w, padding=1), (1, 2, 3, 3), (1, 2, 2, 2)),
    ("conv2d_groups_stride", lambda m, x, w: F(m).conv2d(x, w, stride=2, padding=1, groups=2),
     (1, 2, 4, 3), (2, 1, 2, 2)),
    ("conv2d_dilation", lambda m, x, w: F(m).conv2d(x, w, dilation=2), (1, 1, 4, 4),
     (1, 1, 2, 2)),
    ("conv3d", lambda m, x, w: F(m).conv3d(x, w), (1, 1, 2, 3, 3), (1, 1, 2, 2, 1)),
    ("conv2d_band_tiles", lambda m, x, w: F(m).conv2d(x, w, padding=(1, 0)), (1, 1, 2, 19),
     (2, 1, 2, 5)),
    ("conv2d_channel_major", lambda m, x, w: F(m).conv2d(x, w, stride=(1, 2)), (1, 1, 1, 9),
     (1, 1, 1, 2)),
    ("conv2d_channels_last", lambda m, x, w: F(m).conv2d(x, w, groups=2), (1, 16, 2, 1),
     (2, 8, 1, 1)),
    ("conv2d_dx_as_conv", lambda m, x, w: F(m).conv2d(x, w, padding=(0, 1), dilation=(1, 2)),
     (1, 16, 1, 3), (1, 16, 1, 2)),
    ("conv_transpose1d", lambda m, x, w: F(m).conv_transpose1d(x, w, stride=2, padding=1,
                                                               output_padding=1),
     (1, 2, 3), (2, 2, 3)),
    ("conv_transpose2d", lambda m, x, w: F(m).conv_transpose2d(x, w, padding=1), (1, 2, 3, 3),
     (2, 1, 2, 2)),
    ("conv_transpose2d_stride", lambda m, x, w: F(m).conv_transpose2d(x, w, stride=2,
                                                                      groups=2),
     (1, 2, 2, 2), (2, 1, 2, 2)),
]


test_against_torch, test_finite_differences = op_table_tests(CASES, GRAD_CASES)


def test_double_backward_matches_torch():
    """grad of grad (create_graph) through conv2d against torch's."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(2, 4, 6, 5), (4, 2, 3, 3)]]
    res = []
    for m in (flow, torch):
        x, w = (m.tensor(a, requires_grad=True) for a in xs)
        y = F(m).conv2d(x, w, stride=2, padding=1, groups=2)
        gx, gw = m.autograd.grad((y * y).sum(), [x, w], create_graph=True)
        ((gx ** 2).sum() + (gw ** 3).sum()).backward()
        res.append([t.detach().numpy() for t in (x.grad, w.grad)])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)


def _t(*shape):
    return flow.randn(*shape)


ERRORS = [
    (lambda: flow.conv2d(_t(2, 3, 8, 8), _t(0, 3, 3, 3)), RuntimeError,
     r"expected weight to be at least 1 at dimension 0, but got weight of size \[0, 3, 3, 3\]"),
    (lambda: flow.conv2d(_t(2, 0, 8, 8), _t(4, 0, 3, 3)), RuntimeError,
     r"conv2d: the input \[2, 0, 8, 8\] has no channels"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 3, 3, 3)), RuntimeError,
     r"weight of size \[6, 3, 3, 3\], expected input\[1, 4, 8, 8\] to have 3 channels"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(3, 2, 3, 3), groups=2), RuntimeError,
     "Given groups=2, expected weight to be divisible by 2"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), stride=0), RuntimeError,
     "non-positive stride"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), groups=0), RuntimeError,
     "non-positive groups"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), dilation=0), RuntimeError,
     "dilation should be greater than zero"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), padding=-1), RuntimeError,
     "negative padding"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), stride=2, padding="same"),
     RuntimeError, "padding='same' is not supported for strided convolutions"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), padding="full"), RuntimeError,
     "Invalid padding string: 'full'"),
    (lambda: flow.conv2d(_t(4, 8), _t(6, 4, 3, 3)), RuntimeError,
     r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv2d, but got input of size: "
     r"\[4, 8\]"),
    (lambda: flow.conv1d(_t(1, 4, 8), _t(6, 4, 3, 3)), RuntimeError,
     "expected weight to be 3-dimensional"),
    (lambda: flow.conv2d(_t(1, 4, 2, 2), _t(6, 4, 3, 3)), RuntimeError,
     "Kernel size can't be greater than actual input size"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), bias=_t(5)), RuntimeError,
     "expected bias to be 1-dimensional with 6 elements"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3).double()), RuntimeError,
     r"Input type \(flowgrad.float32\) and weight type \(flowgrad.float64\) should be "
     r"the same"),
    (lambda: flow.conv2d(_t(1, 4, 8, 8), _t(6, 4, 3, 3), stride=(1, 1, 1)), RuntimeError,
     "conv2d: expected stride to be a single int or a tuple of 2 ints"),
    (lambda: flow.conv_transpose2d(_t(1, 4, 8, 8), _t(4, 2, 3, 3), stride=2, output_padding=2),
     RuntimeError, "output padding must be smaller than either stride or dilation"),
    (lambda: flow.conv_transpose2d(_t(1, 3, 8, 8), _t(4, 2, 3, 3)), RuntimeError,
     r"Given transposed=1, weight of size \[4, 2, 3, 3\], expected input\[1, 3, 8, 8\] to have "
     r"4 channels"),
    (lambda: flow.conv_transpose2d(_t(1, 4, 8, 8), _t(4, 2, 3, 3), groups=3), RuntimeError,
     "Given groups=3, expected weight to be divisible by 3"),
    (lambda: flow.conv_transpose1d(_t(1, 4, 2), _t(4, 2, 1), padding=2), RuntimeError,
     "conv_transpose1d: .* calculated output size .* is too small"),
]


@pytest.mark.parametrize("fn,exc,match", ERRORS)
def test_bad_arguments(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


def _empty(name, fn, x_shape, w_shape):
    return pytest.param(fn, x_shape, w_shape, id=name)


EMPTY_BATCH = [
    _empty("conv1d", lambda m, x, w: m.nn.functional.conv1d(x, w, padding=1), (0, 2, 5),
           (3, 2, 3)),
    _empty("conv2d", lambda m, x, w: m.nn.functional.conv2d(x, w, stride=2), (0, 2, 5, 5),
           (3, 2, 3, 3)),
    _empty("conv2d_groups", lambda m, x, w: m.nn.functional.conv2d(x, w, groups=2),
           (0, 4, 5, 5), (4, 2, 3, 3)),
    _empty("conv2d_many_channels", lambda m, x, w: m.nn.functional.conv2d(x, w, padding=1),
           (0, 32, 4, 4), (32, 32, 3, 3)),
    _empty("conv3d", lambda m, x, w: m.nn.functional.conv3d(x, w), (0, 2, 4, 4, 4),
           (3, 2, 2, 2, 2)),
    _empty("conv_transpose1d", lambda m, x, w: m.nn.functional.conv_transpose1d(x, w, stride=2),
           (0, 2, 5), (2, 3, 3)),
    _empty("conv_transpose2d", lambda m, x, w: m.nn.functional.conv_transpose2d(
        x, w, stride=2, output_padding=1), (0, 2, 4, 4), (2, 3, 3, 3)),
    _empty("conv_transpose2d_many_channels", lambda m, x, w: m.nn.functional.conv_transpose2d(
        x, w, padding=1), (0, 32, 4, 4), (32, 32, 3, 3)),
    _empty("conv_transpose3d", lambda m, x, w: m.nn.functional.conv_transpose3d(x, w),
           (0, 2, 3, 3, 3), (2, 3, 2, 2, 2)),
]


@pytest.mark.parametrize("fn,x_shape,w_shape", EMPTY_BATCH)
def test_empty_batch_matches_torch(fn, x_shape, w_shape):
    """A batch of size 0: an empty output of torch's shape, an empty input gradient and a
    zero weight gradient (a sum of no terms), with create_graph too."""
    w_data = np.random.default_rng(0).standard_normal(w_shape)
    res = {}
    for m in (torch, flow):
        x = m.zeros(x_shape, dtype=m.float64, requires_grad=True)
        w = m.tensor(w_data, requires_grad=True)
        y = fn(m, x, w)
        gx, gw = m.autograd.grad(y.sum(), (x, w), create_graph=True)
        res[m] = tuple(y.shape), tuple(gx.shape), gw.detach().numpy()
    assert res[flow][:2] == res[torch][:2]
    assert res[flow][0][0] == 0 and res[flow][1] == x_shape
    np.testing.assert_array_equal(res[flow][2], res[torch][2])
    np.testing.assert_array_equal(res[flow][2], np.zeros(w_shape))


@pytest.mark.parametrize("xs, ws", [((2, 1, 14, 14), (3, 1, 5, 5)), ((2, 3, 9, 9), (4, 3, 5, 5))])
def test_banded_path_keeps_non_finite_values_in_their_receptive_field(xs, ws):
    # the banded GEMM multiplies structural zeros by the input (forward) and by dy (input
    # gradient): 0 * inf is nan, so a non-finite value there would reach outputs it does not
    # touch; those calls take im2col instead, and give torch's values and non-finite pattern
    rng = np.random.default_rng(6)
    x = rng.standard_normal(xs)
    x[0, 0, 3, 4], x[1, -1, 5, 2] = np.inf, np.nan
    w = rng.standard_normal(ws)
    out = (xs[0], ws[0], xs[2] - ws[2] + 1, xs[3] - ws[3] + 1)
    g = rng.standard_normal(out)
    g[0, 1, 2, 3] = -np.inf
    results = []
    for m in (torch, flow):
        xt = m.tensor(x.copy(), requires_grad=True)
        y = F(m).conv2d(xt, m.tensor(w))
        y.backward(m.tensor(g))
        clean = m.tensor(np.nan_to_num(x, nan=0.5, posinf=2.0), requires_grad=True)
        F(m).conv2d(clean, m.tensor(w)).backward(m.tensor(g))
        results.append((y.detach().numpy(), clean.grad.numpy()))
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)  # nan and inf alike



@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("xs, ws, padding", [
    ((8, 32, 8, 8), (64, 32, 3, 3), 1),        # the digits CNN's second layer
    ((4, 16, 11, 7), (24, 16, 3, 5), 0),       # non-square image and kernel, no padding
    ((3, 16, 9, 10), (16, 16, 5, 5), 2),
    ((2, 16, 6, 9), (32, 16, 2, 4), "same"),   # even kernels: torch pads unevenly
])
def test_shifted_gemm_input_gradient_as_torch(dtype, xs, ws, padding):
    # the input gradient of unit-stride 2-D convs with 16-64 channels: one GEMM per tap on
    # the padded grid, accumulated onto shifted rows; an inf in dy stays in its field (torch's
    # values and inf pattern), and a non-finite weight takes im2col (the grid's zero rows
    # times an inf would be nan): the same numbers as that path
    from flowgrad.ops import conv
    rng = np.random.default_rng(7)
    x0, w0 = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    tol = 1e-4 if dtype == "float32" else 1e-10
    for inf_in_dy in (False, True):
        results = []
        for m in (torch, flow):
            x, w = m.tensor(x0, requires_grad=True), m.tensor(w0, requires_grad=True)
            y = F(m).conv2d(x, w, padding=padding)
            g = np.random.default_rng(8).standard_normal(tuple(y.shape)).astype(dtype)
            g[0, 0, 0, 0] = np.inf if inf_in_dy else g[0, 0, 0, 0]
            y.backward(m.tensor(g))
            results.append((x.grad.numpy(),) if inf_in_dy else
                           (y.detach().numpy(), x.grad.numpy(), w.grad.numpy()))
        for ours, theirs in zip(results[1], results[0]):
            np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)  # inf where torch's
    pads = [(p, p) for p in ((padding,) * 2 if isinstance(padding, int) else (0, 0))]
    size = xs[2:] if padding != "same" else (xs[2] - ws[2] + 1, xs[3] - ws[3] + 1)
    out = tuple(s + sum(p) - k + 1 for s, p, k in zip(size, pads, ws[2:]))
    z = rng.standard_normal((2, ws[0]) + out).astype(dtype)
    assert conv._shifted_ok(z, w0, (1, 1), pads, (1, 1), 1, size) == (
        conv.blas.BACKEND == "mkl")  # the path under test
    w_inf = w0.copy()
    w_inf[0, 0, 0, 0] = np.inf
    kw = dict(stride=(1, 1), padding=tuple(pads), dilation=(1, 1), groups=1, size=size)
    taken = conv._conv_transpose.kernel(np, z, w_inf, **kw)
    conv_ok, conv._shifted_ok = conv._shifted_ok, lambda *args: False
    try:
        np.testing.assert_array_equal(taken, conv._conv_transpose.kernel(np, z, w_inf, **kw))
    finally:
        conv._shifted_ok = conv_ok


@pytest.mark.parametrize("name,xs,ws,kw", [
    ("conv1d", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, groups=2)),
    ("conv2d", (2, 4, 7, 6), (6, 4, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))),
    ("conv3d", (1, 2, 5, 4, 4), (3, 2, 2, 2, 2), dict(padding=1))])
def test_nn_grad_conv_input_and_weight_as_torch(name, xs, ws, kw):
    # torch.nn.grad (F.grad), which fused conv custom Functions call, was missing; values and
    # their own gradients (w.r.t. grad_output, weight and input) as torch's
    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal(xs), rng.standard_normal(ws)
    res = []
    for m in (torch, flow):
        x, w = m.tensor(xn, requires_grad=True), m.tensor(wn, requires_grad=True)
        out_shape = tuple(getattr(F(m), name)(x, w, **kw).shape)
        go = m.tensor(np.random.default_rng(1).standard_normal(out_shape), requires_grad=True)
        gi = getattr(m.nn.grad, name + "_input")(x.shape, w, go, **kw)
        gw = getattr(F(m).grad, name + "_weight")(x, w.shape, go, **kw)
        (gi.pow(2).sum() + gw.pow(2).sum()).backward()
        res.append([t.detach().numpy() for t in (gi, gw, go.grad, w.grad, x.grad)])
    for ours, theirs in zip(res[1], res[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
