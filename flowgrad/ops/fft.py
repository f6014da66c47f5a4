"""Discrete Fourier transforms: three ops (complex-to-complex, real-to-complex onesided,
complex-to-real onesided) on the device's `xp.fft`, each with its adjoint as its rule; the
public functions of `flowgrad.fft` (fft, rfft2, irfftn, hfft, ...) resize the input to `n`/`s`
and call them.

The adjoint of a transform with norm m is the opposite-direction transform with the swapped
norm ("backward" <-> "forward", "ortho" stays): fft's rule is ifft. rfft's is the full ifft of
the zero-padded grad, taking the real part; irfft's is rfft of the grad with the bins that
stand for two conjugate bins of the full spectrum doubled (torch's fft_c2r_backward).

>>> import flowgrad as flow
>>> flow.fft.fft(flow.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..tensor import Tensor
from .complex import conj, real
from .kept import kept
from .layout import in_order
from .pad import pad
from .registry import op
from .shape import cat

_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _complex_of(xp, x, like):
    """NumPy's fft computes in complex128: back to the input's precision, as torch's."""
    want = xp.complex64 if like.dtype in (xp.float32, xp.complex64) else xp.complex128
    return x.astype(want, copy=False)


def _by_stride(strides, dims):
    """`dims` by the input's strides, largest first (torch's _sort_dims; stable on ties)."""
    return sorted(dims, key=lambda d: -abs(strides[d]))


def _exec_layout(xp, out, strides, dims):
    """`out` laid out as torch's CPU _exec_fft lays out a transform over `dims` (in this
    order) of an input with `strides`: the other dims outermost, by the input's strides
    (largest first), then `dims`, in C order among them all. (NumPy's result is C-ordered;
    torch's puts a transformed dim innermost: fft over dim 0 has stride 1 there.)"""
    batch = _by_stride(strides, _batch_dims(out.ndim, dims))
    return in_order(xp, out, (batch + list(dims))[::-1])


def _batch_dims(ndim, dims):
    """The dims not in `dims`, in the order torch's std::partition leaves them (libstdc++'s:
    from both ends, swapping), which decides the order of equal strides (broadcast dims)."""
    perm, first, last = list(range(ndim)), 0, ndim
    while True:
        while first != last and perm[first] not in dims:
            first += 1
        if first == last:
            return perm[:first]
        last -= 1
        while first != last and perm[last] in dims:
            last -= 1
        if first == last:
            return perm[:first]
        perm[first], perm[last] = perm[last], perm[first]
        first += 1


def _dense_strides(shape, fastest_first):
    strides, step = [0] * len(shape), 1
    for d in fastest_first:
        strides[d] = step
        step *= shape[d]
    return strides


# ---- the three transforms -----------------------------------------------------------------------
@op("fft_c2c", complex=True)
def _c2c(xp, x, *, dims, norm, forward, strides=None):
    # `strides`: those of the real input x was cast from, when they differ (below)
    f = xp.fft.fftn if forward else xp.fft.ifftn
    out = _complex_of(xp, f(x, axes=dims, norm=norm), x)
    strides = x.strides if strides is None else strides
    return _exec_layout(xp, out, strides, _by_stride(strides, dims))


@_c2c.grad
def fft_c2c_backward(ctx, dy):
    return _c2c(dy, dims=ctx.dims, norm=_SWAP[ctx.norm], forward=not ctx.forward)


# (its input saved, unread: torch's FftR2CBackward0 keeps self, so a write to it after the
# transform fails the backward)
@op("fft_r2c", complex=True, save="inputs")
def _r2c(xp, x, *, dims, norm, ihfft=False):
    out = _complex_of(xp, xp.fft.rfftn(x, axes=dims, norm=norm), x)
    if ihfft and len(dims) > 1:  # torch's ihfftn: a 1-d r2c, then a c2c over the other dims
        batch = _by_stride(x.strides, _batch_dims(x.ndim, (dims[-1],)))
        strides = _dense_strides(out.shape, (batch + [dims[-1]])[::-1])
        return _exec_layout(xp, out, strides, _by_stride(strides, dims[:-1]))
    return _exec_layout(xp, out, x.strides, _by_stride(x.strides, dims[:-1]) + [dims[-1]])


@_r2c.grad
def fft_r2c_backward(ctx, dy):
    # rfftn is fftn keeping the first n // 2 + 1 bins of the last dim: pad the grad back with
    # zeros to the full length, apply fftn's adjoint, keep the real part (the input is real)
    last = ctx.dims[-1]
    n = ctx.input_shapes[0][last]
    full = _resize(dy, last, n)
    return real(_c2c(full, dims=ctx.dims, norm=_SWAP[ctx.norm], forward=False))


@op("fft_c2r", complex=True)
def _c2r(xp, x, *, dims, norm, n):
    s = [x.shape[d] for d in dims[:-1]] + [n]
    y = xp.fft.irfftn(x, s=s, axes=dims, norm=norm)
    y = y.astype(xp.float32 if x.dtype == xp.complex64 else xp.float64, copy=False)
    strides = x.strides
    if len(dims) > 1:  # torch's: a c2c over the other dims first, then a 1-d c2r
        inner = _by_stride(strides, dims[:-1])
        batch = _by_stride(strides, _batch_dims(x.ndim, inner))
        strides = _dense_strides(x.shape, (batch + inner)[::-1])
    return _exec_layout(xp, y, strides, [dims[-1]])


@_c2r.grad
def fft_c2r_backward(ctx, dy):
    g = _r2c(dy, dims=ctx.dims, norm=_SWAP[ctx.norm])
    last = ctx.dims[-1]
    bins = g.shape[last]
    doubled = ctx.n - bins  # bins 1..doubled stand for themselves and their mirror image
    if doubled <= 0:
        return g
    parts = [g.narrow(last, 0, 1), g.narrow(last, 1, doubled) * 2.0]
    if bins - 1 - doubled:
        parts.append(g.narrow(last, 1 + doubled, bins - 1 - doubled))
    return cat(parts, last)


# ---- argument handling, as torch's ------------------------------------------------------------
def _norm(norm, name):
    if norm is None:
        return "backward"
    if norm not in _SWAP:
        raise ValueError(f"{name}: Invalid normalization mode: {norm!r}; expected None, "
                         f"'backward', 'forward' or 'ortho'")
    return norm


def _resize(x, dim, n):
    """x cut or zero-padded at the end of `dim` to length n (torch's n / s arguments)."""
    size = x.shape[dim]
    if n == size:
        return x
    if n < size:
        return x.narrow(dim, 0, n)
    # torch's constant_pad_nd: C order, or channels_last where x's strides suggest it
    return pad(x, (0, 0) * (x.ndim - 1 - dim % x.ndim) + (0, n - size))


def _wrap(dim, ndim, name):
    if not -ndim <= dim < ndim:
        raise IndexError(f"{name}: Dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim


def _dims_sizes(x, s, dim, name, default_all=True):
    """torch's rules: dim None and s None: all dims (or `default_all` False: the last one);
    s alone: the last len(s) dims; dim alone: the input's sizes there."""
    nd = x.ndim
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be a Tensor, not {type(x).__name__}")
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(s, int):
        s = (s,)
    if dim is None:
        dims = list(range(nd - len(s), nd)) if s is not None else list(range(nd))
        if s is not None and len(s) > nd:
            raise RuntimeError(f"{name}: Got shape with {len(s)} values but input tensor only "
                               f"has {nd} dimensions")
    else:
        dims = [_wrap(d, max(nd, 1), name) for d in dim]
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"{name}: FFT dims must be unique, got dim={tuple(dim)}")
        if s is not None and len(s) != len(dims):
            raise RuntimeError(f"{name}: When given, dim and shape arguments must have the same "
                               f"length, got s={tuple(s)} and dim={tuple(dim)}")
    if nd == 0 and dims:
        raise IndexError(f"{name}: Dimension specified as {dims[0]} but tensor has no "
                         f"dimensions")
    sizes = [x.shape[d] if s is None or s[i] == -1 else s[i] for i, d in enumerate(dims)]
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"{name}: Invalid number of data points ({n}) specified; pass a "
                               f"positive n / s")
    return dims, sizes


def _float_input(x):
    if x._data.dtype.kind in "iub":
        return x.to(_dt.get_default_dtype())
    if x._data.dtype.kind == "V" or x._data.dtype.itemsize < 4 and x._data.dtype.kind == "f":
        return x.to(_dt.float32)  # NumPy's fft has no half precision
    return x


def _as_complex(x):
    x = _float_input(x)
    return x if x._data.dtype.kind == "c" else x.to(_dt.to_complex(x.dtype))


def _real_input(x, name):
    x = _float_input(x)
    if x._data.dtype.kind == "c":
        raise RuntimeError(f"{name} expects a real input tensor, but got {x.dtype}; use "
                           f"{name.replace('rfft', 'fft').replace('ihfft', 'ifft')} for complex "
                           f"input")
    return x


# ---- the public transforms --------------------------------------------------------------------
def c2c(x, s, dim, norm, forward, name):
    dims, sizes = _dims_sizes(x, s, dim, name)
    norm = _norm(norm, name)
    x = _float_input(x)
    # torch's fft/ifft of a real input run its r2c (two-sided) on the input as it is, a
    # broadcast (stride-0) batch dim ordered by its stride, where the complex cast fftn makes
    # packs it densely
    strides = x._data.strides if name in ("fft_fft", "fft_ifft") and \
        x._data.dtype.kind != "c" and 0 in x._data.strides and \
        all(n <= x._data.shape[d] for d, n in zip(dims, sizes)) else None  # (not padded)
    real = x if name in ("fft_fft", "fft_ifft") and x._data.dtype.kind != "c" and \
        all(n <= x._data.shape[d] for d, n in zip(dims, sizes)) else None
    x = _as_complex(x)
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    if not dims:
        return x.clone()
    if strides is not None and x._data.ndim > 1:
        out = _c2c(x, dims=tuple(dims), norm=norm, forward=forward, strides=strides)
    else:
        out = _c2c(x, dims=tuple(dims), norm=norm, forward=forward)
    # torch's r2c node of a real input (not padded: a copy) keeps it: a write to it after the
    # transform fails the backward
    return out if real is None else kept(out, real, node="FftR2CBackward0")


def r2c(x, s, dim, norm, forward, name):
    """rfftn (forward) or ihfftn (conj of the onesided inverse transform) of real x."""
    dims, sizes = _dims_sizes(x, s, dim, name)
    norm = _norm(norm, name)
    x = _real_input(x, name)
    for d, n in zip(dims, sizes):
        x = _resize(x, d, n)
    if forward:
        return _r2c(x, dims=tuple(dims), norm=norm)
    return conj(_r2c(x, dims=tuple(dims), norm=_SWAP[norm], ihfft=True))


def c2r(x, s, dim, norm, forward, name):
    """irfftn, or hfftn (forward: the transform of a Hermitian signal given by its half)."""
    dims, sizes = _dims_sizes(x, s, dim, name)
    norm = _norm(norm, name)
    x = _as_complex(x)
    last = dims[-1]
    if s is None or (isinstance(s, (tuple, list)) and s[-1] == -1):
        sizes[-1] = 2 * (x.shape[last] - 1)
        if sizes[-1] < 1:
            raise RuntimeError(f"{name}: Invalid number of data points ({sizes[-1]}) "
                               f"specified; pass n / s for an input of one bin")
    n = sizes[-1]
    for d, m in zip(dims[:-1], sizes[:-1]):
        x = _resize(x, d, m)
    x = _resize(x, last, n // 2 + 1)
    if forward:
        return _c2r(conj(x), dims=tuple(dims), norm=_SWAP[norm], n=n)
    return _c2r(x, dims=tuple(dims), norm=norm, n=n)
