"""Statistics over dims: var, std, var_mean, std_mean (with `correction`/`unbiased`),
median (all elements, or values+indices along a dim) and mode.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, 2.0, 4.0], requires_grad=True)
>>> flow.var(x, correction=0).backward(); x.grad
tensor([-0.8889, -0.2222,  1.1111])
"""
from __future__ import annotations

import math
import warnings

from ..errors import check_kernel_dtype
from ..return_types import of_zero_dim, values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .elementwise import where
from .halfprec import in_float32
from .reduce import expand_reduced, keepdim_shape, normalize_dims
from .registry import op
from .scan import index_output_grad, with_rule_indices

__all__ = ["var", "std", "var_mean", "std_mean", "median", "mode"]



def _count(shape, axes):
    return math.prod(shape[a] for a in axes)


def _moment(xp, x, fn, axes, keepdim, correction):
    """x.var / x.std with torch's silent inf/nan where N <= correction: errstate quiets the
    arithmetic, and NumPy's 'Degrees of freedom <= 0' (a warnings.warn in its own Python
    code, out of reach of flowgrad's module filter) is caught only in that rare case."""
    with xp.errstate(divide="ignore", invalid="ignore"):
        if _count(x.shape, axes) > correction:
            return fn(x, axis=axes, ddof=correction, keepdims=keepdim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(x, axis=axes, ddof=correction, keepdims=keepdim)


def _centered(x, axes):
    return x - x.mean(dim=axes, keepdim=True)


# ---- var / std -------------------------------------------------------------------------------
@op("var", save="inputs", contiguous=True, complex=True)
@in_float32  # a half-precision input accumulates in float32, as torch
def _var(xp, x, *, axes, keepdim, correction, whole=False):
    return _moment(xp, x, xp.var, axes, keepdim, correction)  # N <= correction: inf/nan


# A complex input's var is the mean of |x - mean|^2 (var(x.real) + var(x.imag)), real: its
# gradient 2 dy (x - mean) / dof is the conjugate Wirtinger one, as torch's (std's alike).
# torch's gradients where N - correction <= 0 (the value is inf/nan): with dims, a negative
# dof scales by 2 / dof (the forward clamps it at 0, the gradient does not) and dof 0 by inf;
# over the whole tensor (dim=None, `whole`), var's gradient is +inf off the mean and nan on
# it, std's nan
@_var.grad
def var_backward(ctx, dy):
    (x,), shape, axes = ctx.inputs, ctx.input_shapes[0], ctx.axes
    dof = _count(shape, axes) - ctx.correction
    if dof <= 0 and ctx.whole:
        return expand_reduced(dy, shape, axes) * _centered(x, axes).abs() * math.inf
    # (0 * inf = nan where x is the mean)
    return expand_reduced(dy, shape, axes) * _centered(x, axes) * (2.0 / dof if dof != 0
                                                                   else math.inf)


@op("std", save="inputs outputs", contiguous=True, complex=True)
@in_float32  # a half-precision input accumulates in float32, as torch
def _std(xp, x, *, axes, keepdim, correction, whole=False):
    return _moment(xp, x, xp.std, axes, keepdim, correction)


@_std.grad
def std_backward(ctx, dy):
    (x,), y, shape, axes = ctx.inputs, ctx.out, ctx.input_shapes[0], ctx.axes
    y = expand_reduced(y, shape, axes)
    # a constant slice has std 0: torch gives it gradient 0 rather than 0/0
    g = where(y == 0, 0.0, expand_reduced(dy, shape, axes) / where(y == 0, 1.0, y))
    dof = _count(shape, axes) - ctx.correction
    if dof <= 0 and ctx.whole:
        return g * math.nan
    return g * _centered(x, axes) * (1.0 / dof if dof != 0 else math.inf)  # as var's


def _var_args(input, dim, unbiased, keepdim, correction, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(input).__name__}")
    if isinstance(dim, bool):  # var(x, unbiased)
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    if input._data.dtype.kind not in "fVc":
        raise RuntimeError(f"{name}(): std and var only support floating point and complex "
                           f"dtypes, got {input.dtype.name}; call .float() first")
    return normalize_dims(dim, input._data.ndim, name), keepdim, correction, dim is None


@tensor_method()
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over `dim` with `correction` (default 1: Bessel's correction).

    >>> import flowgrad as flow
    >>> flow.var(flow.tensor([[1.0, 2.0, 3.0, 4.0]]), dim=1)
    tensor([1.6667])
    """
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "var")
    return _var(input, axes=axes, keepdim=keepdim, correction=c, whole=whole)


@tensor_method()
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation over `dim` with `correction` (default 1).

    >>> import flowgrad as flow
    >>> flow.std(flow.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor(1.2910)
    """
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "std")
    return _std(input, axes=axes, keepdim=keepdim, correction=c, whole=whole)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over `dim`."""
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "var_mean")
    return (_var(input, axes=axes, keepdim=keepdim, correction=c, whole=whole),
            input.mean(dim=axes, keepdim=keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over `dim`."""
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "std_mean")
    return (_std(input, axes=axes, keepdim=keepdim, correction=c, whole=whole),
            input.mean(dim=axes, keepdim=keepdim))


# ---- median ----------------------------------------------------------------------------------
@op("median", save="inputs outputs")
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _median(xp, x):
    flat = x.reshape(-1)
    if flat.dtype.kind in "fc" and xp.isnan(flat).any():  # nan, as torch's (nanmedian skips)
        return xp.full((), xp.nan, flat.dtype)
    return xp.partition(flat, (flat.size - 1) // 2)[(flat.size - 1) // 2]  # the lower median


@_median.grad
def median_backward(ctx, dy):
    (x,), y = ctx.inputs, ctx.out
    # ties share the gradient evenly, as torch's median() does; a nan result is a tie of the
    # nans
    hit = ((x == y) | (x.isnan() & y.isnan())).to(x.dtype)
    return dy * (hit / hit.sum())


def _select_kth(xp, x, dim, keepdim, kth_of):
    idx = xp.take_along_axis(xp.argpartition(x, kth_of(x.shape[dim]), axis=dim),
                             xp.full(keepdim_shape(x.shape, (dim,)), kth_of(x.shape[dim])), dim)
    vals = xp.take_along_axis(x, idx, dim)
    return (vals, idx) if keepdim else (vals.squeeze(dim), idx.squeeze(dim))


@op("median_dim", n_out=2)
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _median_dim(xp, x, *, dim, keepdim):
    vals, idx = _select_kth(xp, x, dim, keepdim, lambda n: (n - 1) // 2)
    if x.dtype.kind in "fc":
        nan = xp.isnan(x)
        if nan.any():  # a slice holding a nan has median nan, at its first nan (as torch's)
            has = nan.any(axis=dim, keepdims=keepdim)
            vals = xp.where(has, xp.asarray(xp.nan, x.dtype), vals)
            idx = xp.where(has, xp.argmax(nan, axis=dim, keepdims=keepdim), idx)
    return with_rule_indices(vals, idx)


def _index_grad(ctx, dy, d_indices):
    """Each value's gradient goes to its index (the only thing saved, as torch's)."""
    return index_output_grad(ctx, dy, d_indices)


_median_dim.grad(_index_grad)


@tensor_method()
def median(input, dim=None, keepdim=False):
    """median(x): the lower median of all elements; median(x, dim): (values, indices).

    >>> import flowgrad as flow
    >>> flow.median(flow.tensor([3.0, 1.0, 4.0, 2.0]))
    tensor(2.)
    """
    check_kernel_dtype(input, "median_cpu" if dim is None else "median_out", "fViu")
    if input._data.size == 0 and dim is None and input.is_floating_point():
        return input.sum() + math.nan  # as torch: nan, with a history (its gradient: empty)
    if input._data.size == 0 and (dim is None or input.shape[dim] == 0):
        raise IndexError(f"median(): cannot compute the median of an empty tensor of shape "
                         f"{tuple(input.shape)}")
    if dim is None:
        return _median(input)
    d = _wrap_dim(dim, input._data.ndim, "median")
    if input._data.ndim == 0:
        return of_zero_dim("median", input)
    return values_indices("median", *_median_dim(input, dim=d, keepdim=keepdim))


# ---- mode ------------------------------------------------------------------------------------
@op("mode", n_out=2)
@in_float32  # (ml_dtypes' bfloat16 sort leaves NaN where it is: float32 orders it)
def _mode(xp, x, *, dim, keepdim):
    xl = xp.moveaxis(x, dim, -1)
    lead, n = xl.shape[:-1], xl.shape[-1]
    rows = xl.reshape(-1, n)
    order = xp.argsort(rows, axis=1, kind="stable")
    s = xp.take_along_axis(rows, order, 1)
    # label runs of equal sorted values with ids unique across rows, count them with bincount
    new_run = xp.ones(s.shape, bool)
    new_run[:, 1:] = s[:, 1:] != s[:, :-1]
    run_id = xp.cumsum(new_run.reshape(-1)).reshape(s.shape) - 1
    counts = xp.bincount(run_id.reshape(-1))[run_id]
    best = xp.argmax(counts, axis=1)  # the first, i.e. smallest, of the most frequent values
    r = xp.arange(rows.shape[0])
    # torch reports the last position holding that value: the end of its (stable) run
    last = best + counts[r, best] - 1
    vals = s[r, best].reshape(lead)
    idx = order[r, last].astype(xp.int64).reshape(lead)
    if keepdim:
        vals, idx = xp.expand_dims(vals, dim), xp.expand_dims(idx, dim)
    return with_rule_indices(vals, idx)


_mode.grad(_index_grad)


@tensor_method()
def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest on ties) and its index."""
    d = _wrap_dim(dim, input._data.ndim, "mode")
    if input._data.ndim == 0:
        return of_zero_dim("mode", input)
    if input._data.shape[d] == 0:
        raise IndexError(f"mode(): expected reduction dim {d} to have non-zero size; input "
                         f"has shape {tuple(input.shape)}")
    return values_indices("mode", *_mode(input, dim=d, keepdim=keepdim))
