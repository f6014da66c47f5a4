"""NaN-skipping reductions (nansum, nanmean, nanmedian), quantile/nanquantile, logcumsumexp.

The order statistics are composed from sort and gather (NaN sorts last), so their gradients
are those ops' and reach the selected elements only, as torch's do; logcumsumexp is one op.

>>> import flowgrad as flow
>>> flow.nansum(flow.tensor([1.0, float("nan"), 2.0]))
tensor(3.)
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..device import array_module
from ..errors import check_kernel_dtype
from ..func.batched import check_every_example
from ..return_types import values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .elementwise import exp, log, where
from .elementwise_more import lerp
from .gather import gather
from .halfprec import in_float32
from .kept import kept
from .reduce import NO_DIM, dim_or_all, float_input
from .registry import op
from .reorder import flip
from .scan import of_zero_dim, zero_dim_of_result
from .sort import sort

__all__ = ["nansum", "nanmean", "nanmedian", "quantile", "nanquantile", "logcumsumexp"]


def _zero_nans(input):
    return where(input.isnan(), 0.0, input) if input._data.dtype.kind in "fV" else input


@tensor_method()
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over `dim`, NaNs counted as zero (their gradient is zero).

    >>> import flowgrad as flow
    >>> flow.tensor([[1.0, float("nan")], [2.0, 3.0]]).nansum(1)
    tensor([1., 5.])
    """
    if input._data.dtype.kind == "c":
        raise RuntimeError(f"nansum on CPU does not support complex inputs (input of shape "
                           f"{tuple(input.shape)}); sum .real and .imag separately")
    if dtype is not None and input._data.dtype.kind in "fV" and _dt.as_dtype(dtype).is_complex \
            and input._data.size:  # (an empty input runs no kernel: torch's zeros)
        raise NotImplementedError(f"nansum(): not implemented for a complex dtype ({dtype}) of a "
                                  f"floating input, as torch's \"nansum_cpu\"; convert the "
                                  f"sum afterwards")
    if input._data.dtype.kind not in "fV":
        return input.sum(dim, keepdim, dtype=dtype)
    # torch's node saves the input (a write to it after the op fails the backward)
    return kept(_zero_nans(input).sum(dim, keepdim, dtype=dtype), input, node="NansumBackward0")


@tensor_method()
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean of the non-NaN elements over `dim` (NaN where all are NaN).

    >>> import flowgrad as flow
    >>> flow.nanmean(flow.tensor([1.0, float("nan"), 2.0]))
    tensor(1.5000)
    """
    if input._data.dtype.kind not in "fV":
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got "
                           f"{input.dtype}; convert it with .float()")
    if dtype is not None and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be "
                           f"either a floating point or complex dtype. Got: {dtype}")
    count = (~input.isnan()).sum(dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def _nan_last_sorted(input, dim):
    """(sorted values, their indices, count of non-NaN) along dim."""
    values, indices = sort(input, dim)
    count = (~input.isnan()).sum(dim, keepdim=True)
    return values, indices, count


@op("nanmedian_all", save="inputs outputs")
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _nanmedian_all(xp, x):
    flat = x.reshape(-1)
    if flat.dtype.kind in "fV":
        flat = flat[~xp.isnan(flat)]
        if flat.size == 0:  # all NaN: NaN
            return xp.full((), xp.nan, x.dtype)
    k = (flat.size - 1) // 2
    return xp.partition(flat, k)[k]  # the lower median


@_nanmedian_all.grad
def nanmedian_all_backward(ctx, dy):
    (x,), y = ctx.inputs, ctx.out
    # ties share the gradient evenly, as torch's nanmedian() (and median()) do; an all-NaN
    # input's NaN result is a tie of its NaNs
    hit = ((x == y) | (x.isnan() & y.isnan())).to(x.dtype)
    return dy * (hit / hit.sum())


@tensor_method()
def nanmedian(input, dim=NO_DIM, keepdim=None):
    """The lower median of the non-NaN elements (NaN if all are NaN); with `dim`,
    (values, indices) as torch.

    >>> import flowgrad as flow
    >>> flow.nanmedian(flow.tensor([3.0, float("nan"), 1.0, 2.0]))
    tensor(2.)
    """
    dim, keepdim = dim_or_all(dim, keepdim, "nanmedian")
    check_kernel_dtype(input, "median_cpu" if dim is None else "median_out", "fViu")
    if dim is None:
        if input._data.size == 0:
            if input.is_floating_point():  # as torch: nan, with a history
                return input.sum() + math.nan
            raise IndexError(f"nanmedian(): cannot compute the median of an empty tensor of "
                             f"shape {tuple(input.shape)} and integer dtype {input.dtype} (torch "
                             f"returns an uninitialised value); convert it to a float first")
        return _nanmedian_all(input)
    d = _wrap_dim(dim, input._data.ndim, "nanmedian")  # (a 0-d input's dims: -1 and 0)
    if input._data.ndim == 0:
        return of_zero_dim("nanmedian", input)
    if input._data.shape[d] == 0:
        raise IndexError(f"nanmedian(): expected reduction dim {d} to have non-zero size; "
                         f"input has shape {tuple(input.shape)}")
    values, indices, count = _nan_last_sorted(input, d)
    k = ((count - 1) // 2).clamp(min=0)
    v, i = gather(values, d, k), gather(indices, d, k)
    if not keepdim:
        v, i = v.squeeze(d), i.squeeze(d)
    return values_indices("nanmedian", v, i)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    xp = array_module(input._data)
    if input._data.dtype not in (np.float32, np.float64):  # (torch refuses half precision)
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype, got "
                           f"{input.dtype}; convert it with .float()")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"{name}() interpolation must be one of {', '.join(_INTERPOLATIONS)}."
                         f" Got {interpolation!r}")
    scalar_q = not isinstance(q, Tensor)
    qt = Tensor._wrap(xp.asarray(q, dtype=np.float64)) if scalar_q else q
    if qt.dim() > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor, got {qt.dim()}D")
    check_every_example((qt >= 0) & (qt <= 1),
                        f"{name}() q values must be in the range [0, 1]")
    if not scalar_q and q._data.dtype != input._data.dtype:
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor, got "
                           f"{q.dtype} and {input.dtype}")
    if input._data.size == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else _wrap_dim(dim, input._data.ndim, name)
    if x._data.ndim == 0:
        x, d = x.reshape(1), 0
    values, _, count = _nan_last_sorted(x, d)
    # as torch's: the reduced dim last, the quantiles gathered into a new last dim (so a
    # result of several q is laid out with them innermost), then moved to the front
    values, count = values.movedim(d, -1), count.movedim(d, -1)
    # the ranks come from ops on the count (no NumPy on values), so that under vmap each
    # example gets its own; computed in the input's dtype, as torch's
    last = x._data.shape[d] - 1
    qs = qt.to(x.dtype).reshape(-1)  # q is an op input: it may batch
    if ignore_nan:  # ranks among the non-NaN values; an all-NaN row takes rank 0 (a NaN)
        ranks = qs * (count - 1).clamp(min=0).to(x.dtype)
    else:  # a NaN anywhere makes the row's result NaN: point at the last (NaN)
        ranks = where(count <= last, float(last), qs * last)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # half to even, as torch
    below = ranks.floor()
    out = gather(values, -1, below.long())
    if interpolation not in ("lower", "higher", "nearest"):  # else the value itself, as torch
        # torch's lerp: its two formulas keep an infinite end exact where lo + w * (hi - lo)
        # is nan, and give nan for inf - inf as torch
        hi = gather(values, -1, ranks.ceil().clamp(max=last).long())
        weight = ranks * 0.0 + 0.5 if interpolation == "midpoint" else ranks - below
        out = lerp(out, hi, weight)
    out = out.movedim(-1, 0)
    if input._data.ndim == 0:  # a 0-d input keeps no reduced dim, keepdim or not (torch)
        out = out.reshape(-1)
    elif dim is None:
        out = out.reshape(qs.shape[0], *([1] * input._data.ndim)) if keepdim \
            else out.reshape(-1)
    elif keepdim:
        out = out.unsqueeze(d + 1)
    return out[0] if qt.dim() == 0 else out


@tensor_method()
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along `dim` (all elements when None); q a float or a 1-D tensor
    (then the quantiles are stacked in a new first dim). NaN if the row has a NaN.

    >>> import flowgrad as flow
    >>> flow.quantile(flow.tensor([1.0, 2.0, 3.0, 4.0]), 0.5)
    tensor(2.5000)
    """
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@tensor_method()
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs (NaN only where a row is all NaN).

    >>> import flowgrad as flow
    >>> flow.nanquantile(flow.tensor([1.0, float("nan"), 3.0]), 0.5)
    tensor(2.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ---- logcumsumexp ----------------------------------------------------------------------------
@op("logcumsumexp", save="inputs outputs", layout="contiguous", complex=True)
@in_float32  # a half-precision input accumulates in float32, as torch
def _logcumsumexp(xp, x, *, dim):
    with xp.errstate(all="ignore"):
        if x.dtype == xp.float32:
            # the running total in float64, rounded once, as torch's CPU scans accumulate (in
            # double): a float32 total rounds at every step (1000 steps: 5.9e-6 off against
            # torch's 5e-8, and 4.9e-5 in the gradient, its reversed scans)
            return xp.logaddexp.accumulate(x.astype(xp.float64), axis=dim).astype(x.dtype)
        if x.dtype.kind != "c":
            return xp.logaddexp.accumulate(x, axis=dim)
        # complex: torch's sequential scan from -inf (its imaginary parts are not wrapped to
        # (-pi, pi]: each step adds to the larger term's), vectorised across the other dims
        steps = xp.moveaxis(x, dim, 0)
        out = xp.empty_like(steps)
        total = xp.full(steps.shape[1:], -xp.inf, x.dtype)
        for i in range(steps.shape[0]):
            total = out[i] = _complex_logaddexp(xp, steps[i], total)
        return xp.moveaxis(out, 0, dim)


def _complex_logaddexp(xp, x, y):
    """log(exp(x) + exp(y)) of complex arrays as torch's _log_add_exp_helper: log1p(exp(lo -
    hi)) + hi, hi the term with the larger real part (x when tied: lo is y); both real parts
    -inf: lo; both +inf: the plain formula; a nan anywhere: nan + nan j. (In an errstate.)"""
    lo_is_x = x.real < y.real
    lo, hi = xp.where(lo_is_x, x, y), xp.where(lo_is_x, y, x)
    out = xp.log1p(xp.exp(lo - hi)) + hi
    same_inf = ~xp.isfinite(lo.real) & (lo.real == hi.real)
    out = xp.where(same_inf & (lo.real < 0), lo, out)
    out = xp.where(same_inf & (lo.real > 0), xp.log(xp.exp(lo) + xp.exp(hi)), out)
    nan = xp.isnan(x.real) | xp.isnan(x.imag) | xp.isnan(y.real) | xp.isnan(y.imag)
    return xp.where(nan, xp.asarray(complex(xp.nan, xp.nan), x.dtype), out)


def _reverse_logcumsumexp(z, dim):
    return flip(_logcumsumexp(flip(z, [dim]), dim=dim), [dim])


@_logcumsumexp.grad
def logcumsumexp_backward(ctx, dy):
    x, y, d = ctx.inputs[0], ctx.out, ctx.dim
    if x.is_complex():  # dx_i = conj(sum_{j >= i} conj(dy_j) exp(x_i - y_j)), as torch's
        return exp(_reverse_logcumsumexp(log(dy.conj()) - y, d) + x).conj()
    # dx_i = sum_{j >= i} dy_j exp(x_i - y_j); split by the sign of dy so that each part is a
    # reversed logcumsumexp of log|dy| - y, stable for any |x| (torch's scheme). The lowest
    # finite float stands for log 0: -inf would make -inf - -inf = nan in the double backward
    lowest = float(_dt.finfo(x.dtype).min)
    log_abs = log(dy.abs())
    pos, neg = where(dy > 0, log_abs, lowest), where(dy < 0, log_abs, lowest)
    return (exp(_reverse_logcumsumexp(pos - y, d) + x)
            - exp(_reverse_logcumsumexp(neg - y, d) + x))


@tensor_method()
def logcumsumexp(input, dim):
    """log(cumsum(exp(input))) along dim, computed stably.

    >>> import flowgrad as flow
    >>> flow.logcumsumexp(flow.tensor([0.0, 0.0, 0.0]), 0)
    tensor([0.0000, 0.6931, 1.0986])
    """
    check_kernel_dtype(input, "logcumsumexp_out_cpu", "fVc")
    x = float_input(input, "logcumsumexp", complex_ok=True)
    if x._data.ndim == 0:
        _wrap_dim(dim, 1, "logcumsumexp")
        return zero_dim_of_result(x, of="logcumsumexp")
    return _logcumsumexp(x, dim=_wrap_dim(dim, x._data.ndim, "logcumsumexp"))
