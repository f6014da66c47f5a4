"""`flowgrad.fft`: torch.fft's discrete Fourier transforms, differentiable (ops/fft.py).

`n` / `s` cut or zero-pad the input along the transformed dims, `dim` picks them, `norm` is
"backward" (default: the inverse divides by n), "forward" or "ortho". Real float32 input
gives complex64, float64 gives complex128, integers are taken as the default float dtype.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, 2.0, 3.0, 4.0])
>>> flow.fft.rfft(x)
tensor([10.+0.j, -2.+2.j, -2.+0.j])
>>> flow.fft.irfft(flow.fft.rfft(x), n=4)
tensor([1., 2., 3., 4.])
"""
from __future__ import annotations

import numpy as _np

from . import dtypes as _dt
from .device import check_device as _check_device
from .ops.fft import c2c as _c2c
from .ops.fft import c2r as _c2r
from .ops.fft import r2c as _r2c
from .ops.out_arg import check_out as _check_out
from .ops.out_arg import write_out as _write_out
from .tensor import Tensor as _Tensor

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "hfft2", "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftfreq",
           "rfftfreq", "fftshift", "ifftshift"]


def _one(n, dim):
    return None if n is None else (n,), (dim,)


def _transform(kind, input, s, dim, norm, forward, name, out):
    """Run the c2c/r2c/c2r transform, into `out` when given (torch's out=: a complex `out`
    for a complex result, a floating one for a real result, cast within the kind)."""
    if out is None:
        return kind(input, s, dim, norm, forward, name)
    short = name[4:]  # fft_rfft2 -> rfft2
    _check_out(out, (input,), short)
    if kind is _c2r and not out.dtype.is_floating_point:
        raise RuntimeError(f"{short} expects a floating point output tensor, but got "
                           f"{out.dtype.name}")
    if kind is not _c2r and not out.dtype.is_complex:
        raise RuntimeError(f"{short} expects a complex output tensor, but got {out.dtype.name}")
    return _write_out(kind(input, s, dim, norm, forward, name), out, short)


# ---- one dimension ------------------------------------------------------------------------------
def fft(input, n=None, dim=-1, norm=None, *, out=None):
    """The 1-D discrete Fourier transform along `dim` (complex output).

    >>> import flowgrad as flow
    >>> flow.fft.fft(flow.tensor([0.0, 1.0]), n=4)
    tensor([ 1.+0.j,  0.-1.j, -1.+0.j,  0.+1.j])
    """
    return _transform(_c2c, input, *_one(n, dim), norm, True, "fft_fft", out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):
    """The 1-D inverse discrete Fourier transform (divides by n with the default norm).

    >>> import flowgrad as flow
    >>> flow.fft.ifft(flow.tensor([4.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _transform(_c2c, input, *_one(n, dim), norm, False, "fft_ifft", out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The FFT of a real signal: the n // 2 + 1 non-redundant bins.

    >>> import flowgrad as flow
    >>> flow.fft.rfft(flow.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([4.+0.j, 0.+0.j, 0.+0.j])
    """
    return _transform(_r2c, input, *_one(n, dim), norm, True, "fft_rfft", out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of rfft: a real signal of length n (default 2 * (bins - 1)).

    >>> import flowgrad as flow
    >>> flow.fft.irfft(flow.tensor([4 + 0j, 0j, 0j]))
    tensor([1., 1., 1., 1.])
    """
    return _transform(_c2r, input, *_one(n, dim), norm, False, "fft_irfft", out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The FFT of a Hermitian-symmetric signal given by its first half: a real output of
    length n (default 2 * (len - 1)).

    >>> import flowgrad as flow
    >>> flow.fft.hfft(flow.tensor([1 + 0j, 0j, 0j]))
    tensor([1., 1., 1., 1.])
    """
    return _transform(_c2r, input, *_one(n, dim), norm, True, "fft_hfft", out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):
    """The inverse of hfft: the n // 2 + 1 bins of the inverse FFT of a real signal.

    >>> import flowgrad as flow
    >>> flow.fft.ihfft(flow.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([1.-0.j, 0.-0.j, 0.-0.j])
    """
    return _transform(_r2c, input, *_one(n, dim), norm, False, "fft_ihfft", out)


# ---- two and n dimensions ------------------------------------------------------------------------
def fftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-D FFT over `dim` (all dims by default, or the last len(s) when s is given).

    >>> import flowgrad as flow
    >>> flow.fft.fftn(flow.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _transform(_c2c, input, s, dim, norm, True, "fft_fftn", out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-D inverse FFT.

    >>> import flowgrad as flow
    >>> flow.fft.ifftn(flow.fft.fftn(flow.ones(2, 2))).real
    tensor([[1., 1.],
            [1., 1.]])
    """
    return _transform(_c2c, input, s, dim, norm, False, "fft_ifftn", out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-D FFT of a real signal: the last transformed dim keeps n // 2 + 1 bins.

    >>> import flowgrad as flow
    >>> flow.fft.rfftn(flow.ones(2, 4)).shape
    flowgrad.Size([2, 3])
    """
    return _transform(_r2c, input, s, dim, norm, True, "fft_rfftn", out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of rfftn (the last dim's length defaults to 2 * (bins - 1)).

    >>> import flowgrad as flow
    >>> flow.fft.irfftn(flow.fft.rfftn(flow.ones(2, 4))).shape
    flowgrad.Size([2, 4])
    """
    return _transform(_c2r, input, s, dim, norm, False, "fft_irfftn", out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The n-D FFT of a Hermitian-symmetric signal given by its half (real output).

    >>> import flowgrad as flow
    >>> flow.fft.hfftn(flow.ones(2, 3, dtype=flow.complex64)).shape
    flowgrad.Size([2, 4])
    """
    return _transform(_c2r, input, s, dim, norm, True, "fft_hfftn", out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):
    """The inverse of hfftn: onesided bins of the n-D inverse FFT of a real signal.

    >>> import flowgrad as flow
    >>> flow.fft.ihfftn(flow.ones(2, 4)).shape
    flowgrad.Size([2, 3])
    """
    return _transform(_r2c, input, s, dim, norm, False, "fft_ihfftn", out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D FFT over the last two dims.

    >>> import flowgrad as flow
    >>> flow.fft.fft2(flow.ones(1, 2, 2))[0, 0, 0]
    tensor(4.+0.j)
    """
    return _transform(_c2c, input, s, dim, norm, True, "fft_fft2", out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D inverse FFT over the last two dims.

    >>> import flowgrad as flow
    >>> flow.fft.ifft2(flow.ones(2, 2))[0, 0]
    tensor(1.+0.j)
    """
    return _transform(_c2c, input, s, dim, norm, False, "fft_ifft2", out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D FFT of a real signal (onesided in the last dim).

    >>> import flowgrad as flow
    >>> flow.fft.rfft2(flow.ones(2, 4)).shape
    flowgrad.Size([2, 3])
    """
    return _transform(_r2c, input, s, dim, norm, True, "fft_rfft2", out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of rfft2.

    >>> import flowgrad as flow
    >>> flow.fft.irfft2(flow.fft.rfft2(flow.ones(2, 4))).shape
    flowgrad.Size([2, 4])
    """
    return _transform(_c2r, input, s, dim, norm, False, "fft_irfft2", out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The 2-D hfft (Hermitian half in, real out).

    >>> import flowgrad as flow
    >>> flow.fft.hfft2(flow.ones(2, 3, dtype=flow.complex64)).shape
    flowgrad.Size([2, 4])
    """
    return _transform(_c2r, input, s, dim, norm, True, "fft_hfft2", out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):
    """The inverse of hfft2.

    >>> import flowgrad as flow
    >>> flow.fft.ihfft2(flow.ones(2, 4)).shape
    flowgrad.Size([2, 3])
    """
    return _transform(_r2c, input, s, dim, norm, False, "fft_ihfft2", out)


# ---- frequencies and shifts --------------------------------------------------------------------
def _freqs(values, dtype, requires_grad, device, name, out):
    _check_device(device, name)
    if out is not None:
        _check_out(out, (), name)
        if not out.dtype.is_floating_point:
            raise RuntimeError(f"{name} requires a floating point dtype, but out= is "
                               f"{out.dtype.name}")
        dtype = out.dtype if dtype is None else dtype
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    t = _Tensor._wrap(_np.asarray(values).astype(d.np))
    if out is not None:
        return _write_out(t, out, name)
    return t._set_requires_grad(True) if requires_grad else t


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point FFT: [0, 1, ..., -(n // 2), ..., -1] / (d * n).

    >>> import flowgrad as flow
    >>> flow.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    return _freqs(_np.fft.fftfreq(n, d), dtype, requires_grad, device, "fftfreq", out)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """The sample frequencies of rfft's n // 2 + 1 bins: [0, 1, ..., n // 2] / (d * n).

    >>> import flowgrad as flow
    >>> flow.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    return _freqs(_np.fft.rfftfreq(n, d), dtype, requires_grad, device, "rfftfreq", out)


def _shift(input, dim, sign):
    dims = range(input.ndim) if dim is None else ((dim,) if isinstance(dim, int) else dim)
    dims = tuple(dims)
    if not dims:
        return input.clone()
    shifts = tuple(sign * (input.shape[d] // 2) for d in dims)
    return input.roll(shifts, dims)


def fftshift(input, dim=None):
    """Move the zero frequency to the middle: a roll by n // 2 along `dim` (all by default).

    >>> import flowgrad as flow
    >>> flow.fft.fftshift(flow.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    return _shift(input, dim, 1)


def ifftshift(input, dim=None):
    """The inverse of fftshift: a roll by -(n // 2).

    >>> import flowgrad as flow
    >>> flow.fft.ifftshift(flow.fft.fftshift(flow.fft.fftfreq(5)))
    tensor([ 0.0000,  0.2000,  0.4000, -0.4000, -0.2000])
    """
    return _shift(input, dim, -1)
