"""Short-time Fourier transforms, `flow.stft` and `flow.istft`, as torch defines them.

Both are compositions of registered ops, so their gradients (and nn.Graph traces) come from
those: stft frames the (centre-padded) signal with `Tensor.unfold`, multiplies each frame by
the window and takes `fft.rfft` (or `fft.fft`); istft inverts each frame, multiplies by the
window again and overlap-adds the frames with `index_add`, dividing by the overlap-added
squared window (window ** 2, as torch, also for a complex window; it needs that sum nonzero
everywhere: NOLA).

>>> import flowgrad as flow
>>> x = flow.arange(16.0)
>>> spec = flow.stft(x, 8, hop_length=2, window=flow.hann_window(8), return_complex=True)
>>> spec.shape
flowgrad.Size([5, 9])
>>> y = flow.istft(spec, 8, hop_length=2, window=flow.hann_window(8), length=16)
>>> bool((y - x).abs().max() < 1e-4)
True
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import fft
from .._warn import warn_once
from ..tensor import tensor_method
from .complex import complex as _complex
from .complex import view_as_real
from .creation import ones, zeros
from .creation import tensor as _tensor
from .gather import index_add
from .pad import pad as _pad

__all__ = ["stft", "istft"]


def _sizes(name, n_fft, hop_length, win_length):
    hop = n_fft // 4 if hop_length is None else hop_length
    win = n_fft if win_length is None else win_length
    if n_fft <= 0:
        raise RuntimeError(f"{name}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"{name}: expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win}")
    return hop, win


def _full_window(name, window, win, n_fft, like):
    """The window as n_fft values: ones if None, zero-padded on both sides when shorter."""
    if window is None:
        window = ones(win, dtype=_dt.to_real(like.dtype))
    elif window.dim() != 1 or window.shape[0] != win:
        raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to win_length="
                           f"{win}, but got window with size {tuple(window.shape)}")
    if win < n_fft:
        left = (n_fft - win) // 2
        window = _pad(window, (left, n_fft - win - left))
    return window


@tensor_method()
def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
         pad_mode="reflect", normalized=False, onesided=None, return_complex=None,
         align_to_window=None):
    """Short-time Fourier transform of a (L,) or (B, L) signal: (B?, freq, frames), frame t
    being fft(window * x[t * hop : t * hop + n_fft]) of the signal padded by n_fft // 2 on
    each side (`center`, with `pad_mode`). `onesided` (real input and window: default) keeps
    the n_fft // 2 + 1 nonnegative frequencies; `normalized` multiplies by n_fft ** -0.5. Real
    input needs `return_complex=True` (False gives torch's deprecated (..., 2) real view).
    `align_to_window` (center=False only): frames of win_length values start every hop, each
    zero-padded to n_fft around its middle, instead of n_fft-value frames.

    >>> import flowgrad as flow
    >>> flow.stft(flow.ones(8), 4, hop_length=4, center=False, return_complex=True)
    tensor([[4.+0.j, 4.+0.j],
            [0.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    complex_in = input.is_complex() or (window is not None and window.is_complex())
    if return_complex is None:
        if not complex_in:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and "
                "will further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D tensor "
                           f"of shape {tuple(input.shape)}")
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    hop, win = _sizes("stft", n_fft, hop_length, win_length)
    if window is None:
        warn_once("A window was not provided. A rectangular window will be applied,which is "
                  "known to cause spectral leakage. Other windows such as torch.hann_window or "
                  "torch.hamming_window are recommended to reduce spectral leakage.To suppress "
                  "this warning and use a rectangular window, explicitly set "
                  "`window=torch.ones(n_fft, device=<device>)`.")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if center:
        x = _pad(x.unsqueeze(0), (n_fft // 2, n_fft // 2), mode=pad_mode).squeeze(0)
    length = x.shape[-1]
    if n_fft > length:
        raise RuntimeError(f"stft: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    onesided = not complex_in if onesided is None else onesided
    if onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    size = win if align_to_window else n_fft
    if x.is_complex():  # (unfold is real-only: the two parts framed alike)
        frames = _complex(x.real.unfold(-1, size, hop), x.imag.unfold(-1, size, hop))
    else:
        frames = x.unfold(-1, size, hop)
    if align_to_window:
        frames = frames * _full_window("stft", window, win, win, input)
        frames = _pad(frames, ((n_fft - win) // 2, n_fft - win - (n_fft - win) // 2))
    else:
        frames = frames * _full_window("stft", window, win, n_fft, input)
    norm = "ortho" if normalized else "backward"
    spec = (fft.rfft if onesided else fft.fft)(frames, dim=-1, norm=norm).transpose(-1, -2)
    if input.dim() == 1:
        spec = spec.squeeze(0)
    return spec if return_complex else view_as_real(spec)


@tensor_method()
def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True,
          normalized=False, onesided=None, length=None, return_complex=False):
    """Inverse of `stft` (torch's): each frame's inverse FFT times the window, overlap-added
    and divided by the overlap-added squared window; `center` drops the n_fft // 2 padding,
    `length` trims or zero-pads the result. Input: complex (B?, freq, frames).

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    >>> spec = flow.stft(x, 4, window=flow.hann_window(4), return_complex=True)
    >>> flow.istft(spec, 4, window=flow.hann_window(4), length=8).round(decimals=3)
    tensor([1., 2., 3., 4., 5., 6., 7., 8.])
    """
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor, got "
                           f"{input.dtype} (make one with torch.view_as_complex)")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor with 2 or 3 dimensions of complex "
                           f"values, but got shape {tuple(input.shape)}")
    hop, win = _sizes("istft", n_fft, hop_length, win_length)
    if hop > win:  # (frames would not overlap into a whole signal)
        raise RuntimeError(f"istft: expected 0 < hop_length <= win_length, but got "
                           f"hop_length={hop}, win_length={win}")
    spec = input if input.dim() == 3 else input.unsqueeze(0)
    bins, n_frames = spec.shape[-2], spec.shape[-1]
    onesided = bins != n_fft if onesided is None else onesided
    if onesided and bins != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                           f"{bins}")
    if not onesided and bins != n_fft:
        raise RuntimeError(f"istft: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {bins}")
    window = _full_window("istft", window, win, n_fft, input)
    norm = "ortho" if normalized else "backward"
    spec = spec.transpose(-1, -2)  # (B, frames, freq)
    if return_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        frames = fft.ifft(spec, n=n_fft, dim=-1, norm=norm)
    else:
        if window.is_complex():
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:
            spec = spec[..., :n_fft // 2 + 1]
        frames = fft.irfft(spec, n=n_fft, dim=-1, norm=norm)
    frames = frames * window  # (B, frames, n_fft)
    total = n_fft + hop * (n_frames - 1)
    where = (np.arange(n_frames)[:, None] * hop + np.arange(n_fft)).reshape(-1)
    index = _tensor(where)
    signal = index_add(zeros(frames.shape[0], total, dtype=frames.dtype), 1, index,
                       frames.reshape(frames.shape[0], -1))
    # torch's envelope is the sum of window ** 2, not |window| ** 2: with a complex window
    # the frames are multiplied by the window itself, so w * w / sum(w ** 2) inverts stft
    squares = window * window
    envelope = index_add(zeros(total, dtype=squares.dtype), 0, index,
                         squares.expand(n_frames, n_fft).reshape(-1))
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else (total - n_fft // 2 if center else total)
    signal, envelope = signal[:, start:end], envelope[start:end]
    if float(envelope.abs().min()) < 1e-11:
        raise RuntimeError("istft: window overlap add min: the squared windows sum to zero "
                           "somewhere (not NOLA); use another window or hop_length")
    signal = signal / envelope
    if end > total:
        signal = _pad(signal, (0, end - total))
    return signal if input.dim() == 3 else signal.squeeze(0)

