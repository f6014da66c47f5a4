"""flowgrad.fft against torch.fft: values, output dtypes and gradients (real and complex
inputs, n / s / dim / norm), and complex finite differences of a real loss."""
import warnings

import numpy as np
import pytest
import torch
from complex_helpers import Real, complex_table_tests

import flowgrad as flow


def f(name, **kw):
    return lambda m, x: getattr(m.fft, name)(x, **kw)


CASES = [
    ("fft", f("fft"), (2, 5)),
    ("fft_real", f("fft"), Real((2, 5))),
    ("fft_pad_dim0_ortho", f("fft", n=4, dim=0, norm="ortho"), (3, 2)),
    ("fft_trim_forward", f("fft", n=3, norm="forward"), (2, 5)),
    ("ifft", f("ifft"), (2, 4)),
    ("ifft_real_n", f("ifft", n=6, norm="ortho"), Real((3,))),
    ("rfft", f("rfft"), Real((2, 6))),
    ("rfft_odd_n_dim0", f("rfft", n=5, dim=0, norm="forward"), Real((4, 2))),
    ("rfft_ortho", f("rfft", norm="ortho"), Real((7,))),
    ("irfft", f("irfft"), (2, 4)),
    ("irfft_odd_n", f("irfft", n=7), (2, 4)),
    ("irfft_trim_forward", f("irfft", n=4, norm="forward"), (5,)),
    ("irfft_ortho_dim0", f("irfft", dim=0, norm="ortho"), (3, 2)),
    ("hfft", f("hfft"), (2, 4)),
    ("hfft_n_ortho", f("hfft", n=5, norm="ortho"), (3,)),
    ("ihfft", f("ihfft"), Real((2, 6))),
    ("ihfft_forward", f("ihfft", n=5, norm="forward"), Real((4,))),
    ("fft2", f("fft2"), (3, 4)),
    ("fft2_s", f("fft2", s=(2, 5)), (2, 3, 4)),
    ("ifft2_real", f("ifft2", norm="ortho"), Real((3, 4))),
    ("rfft2", f("rfft2"), Real((3, 4))),
    ("irfft2", f("irfft2"), (3, 3)),
    ("irfft2_s", f("irfft2", s=(4, 5), norm="forward"), (3, 3)),
    ("fftn", f("fftn"), (2, 3, 2)),
    ("fftn_dim", f("fftn", dim=(0, 2), norm="ortho"), (2, 3, 2)),
    ("ifftn_s", f("ifftn", s=(3, -1)), (2, 3)),
    ("rfftn", f("rfftn", dim=(0, 1)), Real((2, 4, 2))),
    ("irfftn", f("irfftn"), (2, 3, 3)),
    ("irfftn_s_dim", f("irfftn", s=(3, 6), dim=(2, 0)), (4, 2, 3)),
    ("hfftn", f("hfftn", dim=(0, 1)), (2, 3)),
    ("ihfftn", f("ihfftn"), Real((2, 4))),
    ("ihfft2_s", f("ihfft2", s=(3, 3)), Real((2, 4))),
    ("hfft2", f("hfft2"), (2, 3)),
    ("fftshift", f("fftshift"), (3, 4)),
    ("ifftshift_dim", f("ifftshift", dim=1), (3, 5)),
    ("fft_then_abs", lambda m, x: m.fft.irfft(m.fft.rfft(x) * m.fft.rfft(x).abs(), n=6),
     Real((6,))),
]

test_against_torch, test_finite_differences = complex_table_tests(CASES)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_output_dtypes(dtype):
    x = np.arange(6).astype(dtype)
    for name in ("fft", "rfft", "ihfft", "fftn"):
        ours = getattr(flow.fft, name)(flow.tensor(x))
        theirs = getattr(torch.fft, name)(torch.tensor(x))
        assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    back = flow.fft.irfft(flow.fft.rfft(flow.tensor(x)))
    assert back.dtype.name == str(torch.fft.irfft(torch.fft.rfft(torch.tensor(x))).dtype)[6:]


@pytest.mark.parametrize("n", [1, 4, 5])
@pytest.mark.parametrize("d", [1.0, 0.1])
def test_frequencies(n, d):
    for name in ("fftfreq", "rfftfreq"):
        ours, theirs = getattr(flow.fft, name)(n, d), getattr(torch.fft, name)(n, d)
        assert ours.dtype is flow.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)
    assert flow.fft.fftfreq(4, dtype=flow.float64).dtype is flow.float64


def test_bad_arguments():
    x = flow.ones(4)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        flow.fft.fft(x, norm="bad")
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        flow.fft.fft(x, n=0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        flow.fft.fft(x, dim=1)
    with pytest.raises(RuntimeError, match="expects a real input"):
        flow.fft.rfft(x + 1j)
    with pytest.raises(RuntimeError, match="unique"):
        flow.fft.fftn(flow.ones(2, 2), dim=(0, 0))
    with pytest.raises(RuntimeError, match="same length"):
        flow.fft.fftn(flow.ones(2, 2), s=(2,), dim=(0, 1))


# out=: (function, input, out dtype, out shape): results, dtypes, resizing as torch's
OUT_CASES = [
    ("fft", Real((2, 5)), "complex64", (2, 5)),
    ("fft", (2, 5), "complex128", (0,)),  # empty: resized silently
    ("ifft2", (3, 4), "complex64", (3, 4)),
    ("rfft", Real((6,)), "complex128", (2,)),  # resized with a warning; widened
    ("rfftn", Real((2, 4)), "complex64", (2, 3)),
    ("irfft", (2, 4), "float32", (2, 6)),
    ("hfft", (4,), "float64", (6,)),
    ("ihfft2", Real((2, 4)), "complex64", (2, 3)),
]


@pytest.mark.parametrize("case", OUT_CASES, ids=[f"{c[0]}_{c[2]}_{c[3]}" for c in OUT_CASES])
def test_out_argument(case):
    name, shape, dtype, out_shape = case
    real = isinstance(shape, Real)
    x = np.random.default_rng(0).standard_normal(tuple(shape))
    x = x.astype(np.float32) if real else (x + 1j * x[::-1]).astype(np.complex64)
    results = []
    for m in (flow, torch):
        out = m.zeros(out_shape, dtype=getattr(m, dtype))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = getattr(m.fft, name)(m.tensor(x), out=out)
        assert r is out
        results.append((out.numpy(), [str(w.message)[:40] for w in caught]))
    (ours, w_ours), (theirs, w_theirs) = results
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and w_ours == w_theirs
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_out_argument_writes_views_and_frequencies():
    x = np.arange(4.0, dtype=np.float32)
    for m in (flow, torch):
        base = m.zeros(8, dtype=m.complex64)
        m.fft.fft(m.tensor(x), out=base[::2])  # a strided view of the right shape: written
        np.testing.assert_allclose(base.numpy()[::2], np.fft.fft(x), atol=1e-6)
        assert not base.numpy()[1::2].any()
        freq = m.zeros(4, dtype=m.float64)
        assert m.fft.rfftfreq(6, out=freq) is freq and freq.dtype is m.float64
        np.testing.assert_allclose(freq.numpy(), np.fft.rfftfreq(6))


@pytest.mark.parametrize("bad", [
    (lambda m: m.fft.fft(m.ones(4), out=m.zeros(4)), "expects a complex output tensor"),
    (lambda m: m.fft.irfft(m.ones(3, dtype=m.complex64), out=m.zeros(4, dtype=m.complex64)),
     "expects a floating point output tensor"),
    (lambda m: m.fft.fft(m.ones(4, requires_grad=True), out=m.zeros(4, dtype=m.complex64)),
     "don't support automatic differentiation"),
    (lambda m: m.fft.fftfreq(4, out=m.zeros(4, dtype=m.int64)), "requires a floating point"),
])
def test_out_argument_refusals(bad):
    fn, message = bad
    for m in (flow, torch):
        with pytest.raises(RuntimeError, match=message):
            fn(m)


def test_fft_trains_a_filter():
    """A learnable frequency response fitted through rfft / irfft, as a spectral layer would."""
    rng = np.random.default_rng(0)
    signal = flow.tensor(rng.standard_normal((8, 16)).astype(np.float32))
    target = flow.fft.irfft(flow.fft.rfft(signal) * flow.tensor(np.linspace(1, 0, 9)), n=16)
    w = flow.zeros(9, dtype=flow.complex64, requires_grad=True)
    opt = flow.optim.Adam([w], lr=0.05)
    for _ in range(200):
        loss = ((flow.fft.irfft(flow.fft.rfft(signal) * w, n=16) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3

