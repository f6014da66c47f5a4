"""Convolutions in the dtypes torch takes besides real floats, against torch on CPU: complex
values and (conjugate Wirtinger) gradients to second order, integer values with their
wraparound, and torch's NotImplementedError where its kernel lacks the dtype."""
import numpy as np
import pytest
import torch

import flowgrad as flow

# torch warns that it copies the input for an even 'same' kernel; nothing to act on here
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


def _fn(m, name):
    return getattr(m.nn.functional, name)


def _crandn(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# (op, input shape, weight shape, bias?, kwargs): shapes and options that reach each GEMM path
# of the kernels (channel-major and channels-last im2col, the banded shape of a real 2-D conv,
# the transposed conv's batch-last col2im, its plain-convolution and its col2im paths)
CASES = [
    ("conv1d", (2, 3, 9), (4, 3, 3), True, {}),
    ("conv1d", (2, 4, 11), (6, 2, 3), False, dict(stride=2, padding=2, dilation=2, groups=2)),
    ("conv1d", (6, 7), (2, 3, 2), True, dict(padding="same", groups=2)),
    ("conv2d", (2, 3, 6, 7), (4, 3, 3, 3), True, dict(padding=1)),
    ("conv2d", (2, 2, 12, 12), (3, 2, 5, 5), True, {}),  # (banded when real)
    ("conv2d", (2, 4, 9, 8), (6, 2, 3, 2), True, dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv2d", (1, 2, 5, 6), (2, 2, 2, 3), False, dict(padding="same")),
    ("conv2d", (2, 8, 4, 40), (4, 8, 1, 3), False, dict(stride=(1, 2))),
    ("conv2d", (1, 20, 6, 6), (24, 20, 3, 3), True, dict(padding=1)),
    ("conv3d", (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, dict(padding=1, stride=(1, 2, 1))),
    ("conv3d", (1, 4, 5, 5, 5), (4, 2, 3, 3, 3), False, dict(dilation=2, groups=2)),
    ("conv_transpose1d", (2, 3, 6), (3, 4, 3), True, dict(stride=2, output_padding=1)),
    ("conv_transpose1d", (4, 5), (4, 2, 2), False, dict(groups=2, dilation=2, padding=1)),
    ("conv_transpose2d", (2, 3, 5, 4), (3, 2, 3, 3), True, dict(stride=2, padding=1)),
    ("conv_transpose2d", (2, 2, 6, 6), (2, 2, 5, 5), False, {}),  # (banded when real)
    ("conv_transpose2d", (2, 4, 4, 5), (4, 3, 2, 3), True,
     dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2), groups=2, dilation=(2, 1))),
    ("conv_transpose2d", (1, 24, 5, 5), (24, 20, 3, 3), False, dict(padding=1)),
    ("conv_transpose2d", (2, 4, 3, 30), (4, 4, 1, 2), False, dict(stride=(1, 2))),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 3, 2, 2, 3), True,
     dict(stride=2, padding=1, output_padding=1)),
]


def _ids(cases):
    return [f"{c[0]}-{i}" for i, c in enumerate(cases)]


def _inputs(case, dtype, seed=0):
    name, xs, ws, bias, _ = case
    rng = np.random.default_rng(seed)
    make = (lambda s: _crandn(rng, s, dtype)) if np.dtype(dtype).kind == "c" else \
        (lambda s: rng.integers(-5, 6, s).astype(dtype))
    o = ws[0] if name.startswith("conv") and "transpose" not in name else ws[1] * \
        case[4].get("groups", 1)
    return [make(xs), make(ws)] + ([make((o,))] if bias else [])


def _call(m, case, arrays):
    name, kw = case[0], case[4]
    return _fn(m, name)(*arrays, **kw)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_complex128_value_and_grads(case):
    arrays = _inputs(case, np.complex128)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fs = [flow.tensor(a, requires_grad=True) for a in arrays]
    yt, yf = _call(torch, case, ts), _call(flow, case, fs)
    assert yf.dtype == flow.complex128 and tuple(yf.shape) == tuple(yt.shape)
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-10,
                               atol=1e-10)
    g = _crandn(np.random.default_rng(1), tuple(yt.shape))
    yt.backward(torch.tensor(g))
    yf.backward(flow.tensor(g))
    for t, f in zip(ts, fs):
        np.testing.assert_allclose(f.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", CASES[1::3], ids=_ids(CASES[1::3]))
def test_complex128_second_order(case):
    """Gradients of a real function of the first gradients (conv_weight's and the transposed
    conv's own rules, conjugated)."""
    arrays = _inputs(case, np.complex128, seed=2)
    g = None
    grads = []
    for m, wrap in ((torch, torch.tensor), (flow, flow.tensor)):
        ins = [wrap(a, requires_grad=True) for a in arrays]
        y = _call(m, case, ins)
        if g is None:
            g = _crandn(np.random.default_rng(3), tuple(y.shape))
        first = (m.autograd.grad((y * wrap(g)).real.sum(), ins[:2], create_graph=True))
        loss = sum(((d * d.conj()).real * (k + 1)).sum() + d.imag.sum()
                   for k, d in enumerate(first))
        grads.append([v.detach().numpy() for v in m.autograd.grad(loss, ins[:2])])
    for f, t in zip(grads[1], grads[0]):
        np.testing.assert_allclose(f, t, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("case", CASES[::4], ids=_ids(CASES[::4]))
def test_complex64_values(case):
    arrays = _inputs(case, np.complex64)
    yt = _call(torch, case, [torch.tensor(a) for a in arrays])
    yf = _call(flow, case, [flow.tensor(a) for a in arrays])
    assert yf.dtype == flow.complex64
    np.testing.assert_allclose(yf.numpy(), yt.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_int64_values(case):
    arrays = _inputs(case, np.int64)
    yt = _call(torch, case, [torch.tensor(a) for a in arrays])
    yf = _call(flow, case, [flow.tensor(a) for a in arrays])
    assert yf.dtype == flow.int64
    np.testing.assert_array_equal(yf.numpy(), yt.numpy())


SMALL_INTS = (np.int32, np.int16, np.int8, np.uint8, np.bool_)


@pytest.mark.parametrize("dtype", SMALL_INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_small_int_and_bool_as_torch(case, dtype):
    """Computed where torch computes (undilated convolutions, with its wraparound), torch's
    NotImplementedError naming the same kernel elsewhere (dilated, transposed, bool)."""
    arrays = [a > 0 if dtype is np.bool_ else a.astype(dtype) for a in _inputs(case, np.int64)]
    t, f = _call_outcome(torch, case, arrays), _call_outcome(flow, case, arrays)
    assert f[0] == t[0]
    if t[0] == "raise":
        assert f[1] == t[1]
    else:
        np.testing.assert_array_equal(f[1], t[1])


def _call_outcome(m, case, arrays):
    wrap = torch.tensor if m is torch else flow.tensor
    try:
        y = _call(m, case, [wrap(a) for a in arrays])
    except NotImplementedError as e:
        return "raise", str(e).split(" (as torch)")[0]
    return str(y.dtype).split(".")[-1], y.numpy()


def test_int8_uint8_wrap_around_as_torch():
    for dt, v, b in ((torch.int8, 100, 0), (torch.uint8, 200, 7), (torch.int16, 300, -5)):
        args = (torch.full((1, 2, 5), v, dtype=dt), torch.full((3, 2, 3), v, dtype=dt),
                torch.full((3,), b, dtype=dt))
        yt = torch.nn.functional.conv1d(*args, stride=2)
        yf = flow.nn.functional.conv1d(*(flow.tensor(a.numpy()) for a in args), stride=2)
        assert str(yf.dtype) == str(yt.dtype).replace("torch", "flowgrad")
        np.testing.assert_array_equal(yf.numpy(), yt.numpy())


@pytest.mark.parametrize("name,xs,ws,kw", [
    ("conv3d", (1, 1, 4, 4, 4), (1, 1, 1, 1, 1), {}),
    ("conv3d", (1, 1, 4, 4, 4), (1, 1, 1, 1, 1), dict(stride=2)),
    ("conv3d", (1, 1, 4, 4, 4), (1, 1, 1, 1, 1), dict(padding=1)),
    ("conv2d", (1, 1, 5, 5), (1, 1, 1, 1), dict(dilation=(2, 1))),
    ("conv2d", (0, 2, 6, 6), (2, 2, 3, 3), dict(dilation=2)),
    ("conv_transpose2d", (0, 2, 4, 4), (2, 2, 3, 3), {}),
    ("conv1d", (0, 2, 6), (3, 2, 3), {}),
])
@pytest.mark.parametrize("dtype", (np.bool_, np.int32, np.uint8), ids=lambda d: np.dtype(d).name)
def test_kernel_choice_and_empty_batch_as_torch(name, xs, ws, kw, dtype):
    """torch's message names the kernel it dispatched to; an empty batch runs none."""
    arrays = [np.ones(xs, dtype), np.ones(ws, dtype)]
    case = (name, xs, ws, False, kw)
    t, f = _call_outcome(torch, case, arrays), _call_outcome(flow, case, arrays)
    assert f[0] == t[0] and (f[1] == t[1] if t[0] == "raise" else f[1].shape == t[1].shape)


@pytest.mark.parametrize("x_dt,w_dt", [(torch.int64, torch.float32), (torch.float32, torch.int64),
                                       (torch.int64, torch.int32),
                                       (torch.complex64, torch.complex128),
                                       (torch.complex64, torch.float32)])
def test_mixed_dtypes_raise(x_dt, w_dt):
    x, w = torch.ones(1, 2, 5, dtype=x_dt), torch.ones(3, 2, 3, dtype=w_dt)
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv1d(x, w)
    with pytest.raises(RuntimeError):
        flow.nn.functional.conv1d(flow.tensor(x.numpy()), flow.tensor(w.numpy()))


@pytest.mark.parametrize("cls,kw", [("Conv1d", {}), ("Conv2d", dict(padding=1, groups=2)),
                                    ("Conv3d", dict(stride=2)),
                                    ("ConvTranspose1d", dict(stride=2)),
                                    ("ConvTranspose2d", dict(output_padding=1, stride=2)),
                                    ("ConvTranspose3d", {})])
def test_complex_modules(cls, kw):
    """nn.Conv*(dtype=complex64) as torch's: complex parameters, torch's state dict loads, the
    same outputs and parameter gradients."""
    nd = int(cls[-2])
    tm = getattr(torch.nn, cls)(4, 6, 3, dtype=torch.complex64, **kw)
    fm = getattr(flow.nn, cls)(4, 6, 3, dtype=flow.complex64, **kw)
    assert fm.weight.dtype == flow.complex64 and fm.bias.dtype == flow.complex64
    assert tuple(fm.weight.shape) == tuple(tm.weight.shape)
    w = fm.weight.detach().numpy()
    assert np.abs(w.imag).max() > 0
    fm.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    x = _crandn(np.random.default_rng(4), (2, 4) + (5,) * nd, np.complex64)
    yt, yf = tm(torch.tensor(x)), fm(flow.tensor(x))
    np.testing.assert_allclose(yf.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    yt.abs().sum().backward()
    yf.abs().sum().backward()
    for name, p in tm.named_parameters():
        np.testing.assert_allclose(dict(fm.named_parameters())[name].grad.numpy(),
                                   p.grad.numpy(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("case", CASES[::5], ids=_ids(CASES[::5]))
def test_complex128_forward_mode(case):
    """jvp: the convolutions are bilinear and holomorphic, so no conjugate enters."""
    arrays = _inputs(case, np.complex128, seed=5)
    tangents = _inputs(case, np.complex128, seed=6)
    n = len(arrays)
    _, jt = torch.func.jvp(lambda *a: _call(torch, case, a), tuple(map(torch.tensor, arrays)),
                           tuple(map(torch.tensor, tangents[:n])))
    _, jf = flow.func.jvp(lambda *a: _call(flow, case, a), tuple(map(flow.tensor, arrays)),
                          tuple(map(flow.tensor, tangents[:n])))
    np.testing.assert_allclose(jf.numpy(), jt.numpy(), rtol=1e-10, atol=1e-10)
