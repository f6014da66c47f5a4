"""local_response_norm, and normalize with the p-norm it divides by (`dist_norm`, also the
distances' norm: pdist, pairwise_distance, cdist's small cases).

>>> import flowgrad as flow
>>> flow.nn.functional.normalize(flow.tensor([[3.0, 4.0]])).tolist()
[[0.6000000238418579, 0.800000011920929]]
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import check_kernel_dtype
from ..tensor import Tensor, _wrap_dim
from .elementwise import where
from .halfprec import HALF, in_float32, upcast
from .norm import power_norm
from .out_arg import with_out
from .registry import op
from .shape import cat

__all__ = ["local_response_norm", "normalize"]


def _as_float(x, name, kinds="fV"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected input to be a Tensor, got {type(x).__name__}")
    if x._data.dtype.kind not in kinds:
        raise RuntimeError(f"{name}: expected a floating point input, got {x.dtype}; call "
                           f".float() first")
    return x


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha/size * sum of x**2 over `size` neighbouring channels) ** beta; an
    int64 x averages its squares in int64, truncated, as torch's avg_pool (a float result)."""
    x = input
    if not isinstance(x, Tensor):
        raise TypeError(f"local_response_norm: expected input to be a Tensor, got "
                        f"{type(x).__name__}")
    if x._data.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensionality input, "
                         f"got input of shape {tuple(x.shape)}")
    if x._data.size == 0:
        return x  # torch returns an empty input itself, whatever its dtype
    if size <= 0:
        raise ValueError(f"local_response_norm: size must be positive, got {size}")
    if x._data.dtype != np.int64:  # torch averages by avg_pool2d (3-d) or avg_pool3d
        check_kernel_dtype(x, "avg_pool2d" if x._data.ndim == 3 else "avg_pool3d_out_frame",
                           kinds="fV" if x._data.ndim == 3 or x._data.dtype not in HALF else "")
    # half precision in float32, rounded once: the window's sum of squares overflowed float16
    # (torch's average of them does not: its pool accumulates in float32)
    low, (x,) = upcast(x)
    c = x._data.shape[1]
    sq = x * x
    lo, hi = size // 2, (size - 1) // 2
    pad_shape = list(x.shape)
    parts = []
    if lo:
        pad_shape[1] = lo
        parts.append(sq.new_zeros(tuple(pad_shape)))
    parts.append(sq)
    if hi:
        pad_shape[1] = hi
        parts.append(sq.new_zeros(tuple(pad_shape)))
    padded = cat(parts, dim=1) if len(parts) > 1 else sq
    window = padded[:, 0:c]
    for tap in range(1, size):  # a handful of channel taps, each one vectorised op
        window = window + padded[:, tap:tap + c]
    if x._data.dtype == np.int64:
        window = window.div(size, rounding_mode="trunc") * alpha  # (float from here on)
    else:
        window = window * (alpha / size)
    y = x / (window + k) ** beta
    return y if low is None else y.to(low)


@op("dist_norm", save="inputs outputs", complex=True)
@in_float32  # a half-precision input accumulates in float32, as torch
def _dist_norm(xp, x, *, p, dim, keepdim, every_tie=False):
    a = xp.abs(x)  # (a complex x: its moduli, the real dtype the norm has)
    if p == 1:
        r = a.sum(axis=dim, keepdims=keepdim)
    elif p == math.inf:
        r = a.max(axis=dim, keepdims=keepdim)
    elif p == -math.inf:
        r = a.min(axis=dim, keepdims=keepdim)
    elif p == 0:
        r = (a != 0).sum(axis=dim, keepdims=keepdim)
    else:  # (float32 redone in float64 where it over- or underflowed)
        r = power_norm(xp, a, p, dim, keepdim)
    return xp.asarray(r, dtype=a.dtype)


@_dist_norm.grad
def dist_norm_backward(ctx, dy):
    # half precision in float32, rounded once, as torch's (in float16 dy * x of x ~ 1e-6
    # lands in subnormals, n ** (p - 1) overflows)
    low, (x, n, dy) = upcast(ctx.inputs[0], ctx.out, dy)
    g = _dist_norm_grad(ctx, x, n, dy)
    return g if low is None or g is None else g.to(low)


def _dist_norm_grad(ctx, x, n, dy):
    p = ctx.p
    if not ctx.keepdim:
        dy, n = dy.unsqueeze(ctx.dim), n.unsqueeze(ctx.dim)
    # a complex x: torch's rules with sgn(x) = x / |x| for sign(x) (the real loss's gradient)
    sign = x.sgn() if x.is_complex() else x.sign()
    if p == 0:  # a count: torch's undefined gradient, so x.grad stays None
        return None
    if p == 1:
        return dy * sign
    zero = n == 0
    safe_n = where(zero, 1.0, n)  # torch's convention: the norm's gradient at 0 is 0
    if p == 2:
        return dy * x / safe_n
    if p in (math.inf, -math.inf):
        hit = (x.abs() == n).to(n.dtype)
        # torch's cdist/pdist kernels give each element at the max the whole gradient; its
        # norms share it among them
        return dy * sign * hit if ctx.every_tie else dy * sign * hit / hit.sum(ctx.dim,
                                                                                keepdim=True)
    if p >= 1:  # torch masks dy / n ** (p - 1) at a zero norm: a nan dy there gives 0
        # (|x| / n) ** (p - 1), in [0, 1]: n ** (p - 1) and |x| ** (p - 1) apart underflowed
        # float32 at |x| ~ 1e-20 (p = 3: 0, an inf gradient; precision_fuzz seed 5006301)
        return where(zero, 0.0, dy) * sign * (x.abs() / safe_n) ** (p - 1)
    # p < 1: a zero element's |x| ** (p - 1) is inf (times sign 0: nan), and p < 0 makes
    # the whole norm 0; torch's rule masks the factor of x to zero there, not dy (a nan dy
    # stays nan). Masked before the power: forward mode differentiates this rule in dy, and
    # where's gradient times an inf factor would be nan
    masked = x == 0
    scaled = where(masked, 0.0, sign * where(masked, 1.0, x.abs()) ** (p - 1))
    return scaled * dy * n ** (1 - p)


def dist_norm(x, p, dim, keepdim=False, every_tie=False):
    """The p-norm of x along one dim (p = 2, 1, inf, -inf, 0 or any other real), with a zero
    gradient where the norm is zero (the distance functions' convention). `every_tie`: for
    p = inf, each element at the max gets the whole gradient (cdist's and pdist's rule)."""
    return _dist_norm(x, p=float(p), dim=_wrap_dim(dim, x._data.ndim, "norm"), keepdim=keepdim,
                      every_tie=every_tie)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps).

    >>> import flowgrad as flow
    >>> flow.nn.functional.normalize(flow.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    if out is not None:
        return with_out(normalize, out, (input,), "normalize", no_overlap="partial", p=p,
                        dim=dim, eps=eps)
    x = _as_float(input, "normalize", "fVc")
    if x._data.ndim == 0:  # a scalar is its own dim 0 (or -1), as torch's
        _wrap_dim(dim, 1, "normalize")
        return normalize(x.reshape(1), p, 0, eps).reshape(())
    d = _wrap_dim(dim, x._data.ndim, "normalize")
    if (p < 0 or p == math.inf) and x._data.shape[d] == 0:  # (min/max: no identity, as torch's)
        raise RuntimeError(f"linalg.vector_norm cannot compute the {p} norm on the dimension {d} "
                           f"because this dimension is empty and the operation does not have an "
                           f"identity; normalize along a non-empty dim")
    denom = dist_norm(x, p, dim, keepdim=True).clamp(min=eps)
    return x / denom
