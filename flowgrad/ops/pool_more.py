"""More pooling: max_unpool1d/2d/3d (the inverse of max pooling with its indices), fractional
max pooling (2-D and 3-D, Graham's pseudo-random windows, torch's interval rule), and the
per-dim weights of interpolate(antialias=True) (torch's, after PIL's resampling filters).

All are compositions: unpooling is a scatter, fractional pooling a gather then a max, and
antialiased resizing a product with one weight matrix per dim, so the gradients (and second
derivatives) are those ops'.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> y, i = F.max_pool1d(flow.tensor([[[1.0, 3.0, 2.0, 0.0]]]), 2, return_indices=True)
>>> F.max_unpool1d(y, i, 2)
tensor([[[0., 3., 2., 0.]]])
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..autograd.interpreter import require, varies_per_run
from ..device import array_module
from ..errors import check_kernel_dtype
from ..tensor import Tensor
from .conv import ntuple
from .creation import arange, full, rand
from .gather import gather
from .layout import suggested_order
from .shape import cat, relaid

__all__ = ["max_unpool1d", "max_unpool2d", "max_unpool3d", "fractional_max_pool2d",
           "fractional_max_pool2d_with_indices", "fractional_max_pool3d",
           "fractional_max_pool3d_with_indices"]


# ---- max_unpool ------------------------------------------------------------------------------
def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nd):
    xp = array_module(input._data)
    name = f"max_unpool{nd}d"
    check_kernel_dtype(input, "max_unpool3d" if nd == 3 else "max_unpool2d")
    k = ntuple(kernel_size, nd, "kernel_size", name)
    s = k if stride is None else ntuple(stride, nd, "stride", name)
    p = ntuple(padding, nd, "padding", name)
    if input._data.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: expected a {nd + 1}D or {nd + 2}D input, got shape "
                           f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape) or indices._data.dtype != np.int64:
        raise RuntimeError(f"{name}: expected indices (int64) of the input's shape "
                           f"{tuple(input.shape)}, got {indices.dtype} {tuple(indices.shape)}; "
                           f"pass the indices max_pool{nd}d(..., return_indices=True) gave")
    batched = input._data.ndim == nd + 2
    x, idx = (input, indices) if batched else (input.unsqueeze(0), indices.unsqueeze(0))
    spatial = x.shape[2:]
    out = tuple((n - 1) * st - 2 * pd + kk for n, st, pd, kk in zip(spatial, s, p, k))
    if output_size is not None:  # torch's _unpool_output_size: within a stride of the default
        given = tuple(int(o) for o in output_size)
        given = given[2:] if len(given) == nd + 2 else given
        if len(given) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                             f"elements, but it has a length of '{len(given)}'")
        for d, (o, dflt, st) in enumerate(zip(given, out, s)):
            if not dflt - st < o < dflt + st:
                raise ValueError(f'invalid output_size "{list(output_size)}" (dim {d} must be '
                                 f"between {dflt - st} and {dflt + st})")
        out = given
    size = math.prod(out)
    n, c = x.shape[0], x.shape[1]
    flat = idx._data.reshape(n, c, math.prod(idx.shape[2:]))  # (not -1: an empty batch)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        raise RuntimeError(f"{name}: found an invalid max index {int(flat.max())} (output "
                           f"volumes are of size {'x'.join(map(str, out))})")
    if varies_per_run(idx) and flat.size:  # (a plan's: its error, on each call's indices)
        require((idx >= 0) & (idx < size), f"{name}: found an invalid max index (output "
                f"volumes are of size {'x'.join(map(str, out))})", RuntimeError)
    zeros = Tensor._wrap(xp.zeros((n, c, size), x._data.dtype))
    y = zeros.scatter(2, idx.reshape(n, c, flat.shape[2]), x.reshape(n, c, flat.shape[2]))
    y = y.reshape(n, c, *out)
    if nd == 2 and batched:  # (torch's 2-d kernel keeps a channels_last input's format)
        return relaid(y, suggested_order(input._data))
    return y if batched else y.squeeze(0)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Put each value back at its max_pool1d index (zeros elsewhere).

    >>> import flowgrad as flow
    >>> flow.nn.functional.max_unpool1d(flow.tensor([[[5.0]]]), flow.tensor([[[1]]]), 2)
    tensor([[[0., 5.]]])
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Put each value back at its max_pool2d index (flat over H*W), zeros elsewhere.

    >>> import flowgrad as flow
    >>> flow.nn.functional.max_unpool2d(flow.ones(1, 1, 1, 1), flow.tensor([[[[3]]]]), 2)
    tensor([[[[0., 0.],
              [0., 1.]]]])
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Put each value back at its max_pool3d index (flat over D*H*W), zeros elsewhere.

    >>> import flowgrad as flow
    >>> flow.nn.functional.max_unpool3d(flow.ones(1, 1, 1, 1, 1), flow.tensor([[[[[7]]]]]), 2).sum()
    tensor(1.)
    """
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3)


# ---- fractional max pooling ------------------------------------------------------------------
def _intervals(sample, n_in, n_out, pool):
    """The window starts of one dim (torch's generate_intervals, in the input's dtype): an
    int64 tensor (*sample.shape, n_out), made with ops so that samples differing per vmap
    example give each example its own windows."""
    last = full((*sample.shape, 1), n_in - pool, dtype=_dt.int64, device=sample.device)
    if n_out == 1:
        return last
    dt = sample._data.dtype.type
    alpha = float(dt(n_in - pool) / dt(n_out - 1))  # exact in the input's dtype
    s = sample.unsqueeze(-1)
    steps = arange(n_out - 1, dtype=sample.dtype, device=sample.device)
    starts = ((steps + s) * alpha).long() - (s * alpha).long()
    return cat([starts, last], -1)


def _fractional_max_pool(input, kernel_size, output_size, output_ratio, return_indices,
                         samples, nd):
    name = f"fractional_max_pool{nd}d"
    k = ntuple(kernel_size, nd, "kernel_size", name)
    if input._data.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}: expected a {nd + 1}D or {nd + 2}D input, got shape "
                           f"{tuple(input.shape)}")
    batched = input._data.ndim == nd + 2
    x = input if batched else input.unsqueeze(0)
    n, c, spatial = x.shape[0], x.shape[1], tuple(x.shape[2:])
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output_size or an "
                             f"output_ratio")
        ratio = (output_ratio,) * nd if isinstance(output_ratio, (int, float)) \
            else tuple(output_ratio)
        out = tuple(int(s * r) for s, r in zip(spatial, ratio))
    else:
        out = ntuple(output_size, nd, "output_size", name)
    for size, kk, o, dim in zip(spatial, k, out, ("time", "height", "width")[3 - nd:]):
        # torch's 3-D kernel wants the last window to end before the input's end (2-D: at it)
        if o + kk - 1 > size - (nd == 3):
            raise RuntimeError(f"{name}{'_out' * (nd == 3)}(): pool {dim} {kk} too large "
                               f"relative to input {dim} {size}")
    if samples is None:  # an op draw: under vmap, randomness= decides, as torch's rand
        samples = rand(n, c, nd, dtype=x.dtype, device=x.device)
    else:  # torch's checks; rows past the batch are not read (an unbatched input reads row 0)
        if samples.ndim != 3:
            raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
        if samples.shape[0] < n:
            raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
        if samples.shape[1] != c:
            raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
        if samples.shape[2] != nd:
            raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got "
                               f"{samples.shape[2]}.")
        samples = samples[:n]
    # torch draws the samples per dim in the order (W, H) for 2-D and (T, H, W) for 3-D
    order = (1, 0) if nd == 2 else (0, 1, 2)
    flat, stride = 0, 1
    for d in reversed(range(nd)):
        starts = _intervals(samples[..., order[d]], spatial[d], out[d], k[d])  # (n, c, o_d)
        pos = (starts.unsqueeze(-1) + arange(k[d], device=x.device)) * stride  # (n, c, o_d, k_d)
        shape = [n, c] + [1] * (2 * nd)
        shape[2 + d], shape[2 + nd + d] = out[d], k[d]
        flat = flat + pos.reshape(shape)
        stride *= spatial[d]
    taps = flat.reshape(n, c, math.prod(out), math.prod(k))
    # (explicit sizes, not -1: an empty batch leaves -1 undetermined)
    picked = gather(x.reshape(n, c, math.prod(spatial)), 2,
                    taps.reshape(n, c, math.prod(out) * math.prod(k)))
    values, which = picked.reshape(n, c, math.prod(out), math.prod(k)).max(-1)
    values = values.reshape(n, c, *out)
    if not batched:
        values = values.squeeze(0)
    if not return_indices:
        return values
    # a gather, not NumPy on `which`: under vmap each example's argmax picks its own tap
    idx = gather(taps, -1, which.unsqueeze(-1)).reshape(n, c, *out)
    return values, idx if batched else idx.squeeze(0)


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """Max over pseudo-random kh x kw windows that tile (N, C, H, W) down to output_size
    (or output_ratio of the input size); `_random_samples` (N, C, 2) fixes the windows.

    >>> import flowgrad as flow
    >>> F = flow.nn.functional
    >>> F.fractional_max_pool2d(flow.ones(1, 1, 5, 5), 2, output_size=3).shape
    flowgrad.Size([1, 1, 3, 3])
    """
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples, 2)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None):
    """3-D fractional max pooling over (N, C, T, H, W); `_random_samples` is (N, C, 3).

    >>> import flowgrad as flow
    >>> F = flow.nn.functional
    >>> F.fractional_max_pool3d(flow.ones(1, 1, 4, 4, 4), 2, output_ratio=0.5).shape
    flowgrad.Size([1, 1, 2, 2, 2])
    """
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples, 3)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool2d returning (values, indices), as torch's.

    >>> import flowgrad as flow
    >>> F = flow.nn.functional
    >>> len(F.fractional_max_pool2d_with_indices(flow.ones(1, 1, 4, 4), 2, output_size=2))
    2
    """
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None,
                                       output_ratio=None, return_indices=False,
                                       _random_samples=None):
    """fractional_max_pool3d returning (values, indices), as torch's.

    >>> import flowgrad as flow
    >>> F = flow.nn.functional
    >>> len(F.fractional_max_pool3d_with_indices(flow.ones(1, 1, 4, 4, 4), 2, output_size=2))
    2
    """
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True,
                                 _random_samples)


# ---- interpolate(antialias=True): torch's separable filter weights ---------------------------
def _aa_filter(mode, t):
    t = np.abs(t)
    if mode == "bilinear":
        return np.where(t < 1.0, 1.0 - t, 0.0)
    a = -0.5  # torch's antialiased bicubic uses Keys' a = -0.5 (PIL's), not -0.75
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t < 1.0, near, np.where(t < 2.0, far, 0.0))


def antialias_matrix(n_in, n_out, mode, align_corners, scale):
    """The (n_out, n_in) weights of one dim of interpolate(antialias=True): the filter is
    stretched by the downscaling factor so each output averages all the inputs it covers."""
    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale else n_in / n_out
    half = 1.0 if mode == "bilinear" else 2.0
    support = half * s if s >= 1.0 else half
    inv = 1.0 / s if s >= 1.0 else 1.0
    max_taps = int(math.ceil(support)) * 2 + 1
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        center = s * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        size = min(max(min(int(center + support + 0.5), n_in) - lo, 0), max_taps)
        w = _aa_filter(mode, (np.arange(size) + lo - center + 0.5) * inv)
        total = w.sum()
        m[i, lo:lo + size] = w / total if total != 0 else w
    return m
