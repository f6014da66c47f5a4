"""Statistics over dims: var, std, var_mean, std_mean (with `correction`/`unbiased`),
median (all elements, or values+indices along a dim), mode, the N-dimensional histogram
histogramdd (torch's binning, shared through `bin_points`), cov and corrcoef.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, 2.0, 4.0], requires_grad=True)
>>> flow.var(x, correction=0).backward(); x.grad
tensor([-0.8889, -0.2222,  1.1111])
"""
from __future__ import annotations

import builtins
import math
import numbers
import warnings
from fractions import Fraction

import numpy as np

from .. import return_types
from .._warn import called_by_user, warn
from ..dtypes import TORCH_SCALAR_NAMES, complex128, float64, promote_types
from ..errors import check_kernel_dtype
from ..func.batched import check_every_example
from ..return_types import values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .elementwise import where
from .halfprec import in_float32
from .no_derivative import without_derivative
from .reduce import NO_DIM, dim_or_all, expand_reduced, keepdim_shape, normalize_dims
from .registry import op
from .scan import index_output_grad, of_zero_dim, with_rule_indices
from .select_ties import mode_row, within_budget
from .summation import add_reduce

__all__ = ["var", "std", "var_mean", "std_mean", "median", "mode", "histogramdd", "cov",
           "corrcoef"]


def _count(shape, axes):
    return math.prod(shape[a] for a in axes)


def _moment(xp, x, fn, axes, keepdim, correction):
    """x.var / x.std with torch's silent inf/nan where N <= correction: errstate quiets the
    arithmetic, and NumPy's 'Degrees of freedom <= 0' (a warnings.warn in its own Python
    code, out of reach of flowgrad's module filter) is caught only in that rare case.
    float32 (complex64) goes by `_float32_moment`, as accurate as torch's CPU Welford sums
    in double: before, the squares of values below 1e-19 underflowed (std 0) and above 1e19
    overflowed (inf), and near-equal values lost the spread (values 2e-9 apart at 3e-3: 4%
    off)."""
    with xp.errstate(divide="ignore", invalid="ignore"):
        if _count(x.shape, axes) > correction:
            if x.dtype.char in "fF" and axes:
                return _float32_moment(xp, x, fn, axes, keepdim, correction)
            if x.dtype.char in "fdFD" and axes:
                return _two_pass(xp, x, fn, axes, keepdim, correction)
            return fn(x, axis=axes, ddof=correction, keepdims=keepdim)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            # float32 (complex64) in double, as torch's sums: the squares of values below
            # 1e-19 underflowed, a sum of 0 over no degrees of freedom nan for torch's inf
            wide = {"f": xp.float64, "F": xp.complex128}.get(x.dtype.char)
            y = _no_dof_moment(xp, x if wide is None else x.astype(wide), fn, axes, keepdim,
                               correction)
            return y if wide is None else y.astype(xp.float32)


def _no_dof_moment(xp, x, fn, axes, keepdim, correction):
    """var / std where N <= correction: inf, or nan for a sum of squares of 0."""
    if x.dtype.kind == "c":  # torch's var(real) + var(imag): a constant part's 0/0 is nan
        v = sum(xp.var(p, axis=axes, ddof=correction, keepdims=keepdim)
                for p in (x.real, x.imag))
        return xp.sqrt(v) if fn is xp.std else v
    return fn(x, axis=axes, ddof=correction, keepdims=keepdim)


def _float32_moment(xp, x, fn, axes, keepdim, correction):
    """A float32 (complex64) var / std: the deviations x - mean less their own mean r, as
    float32 (x - mean is exact near the mean, so d - r are the deviations to float32's
    precision: folding r into a float32 mean left half an ulp of it, 4% of a spread of a
    few ulps); redone in float64 (`_wide_moment`) where the sum of squares over- or
    underflowed (|d| above 1e19 or below 1e-15: a zero var is redone too)."""
    count = _count(x.shape, axes)
    mean = add_reduce(xp, x, axes, keepdims=True)
    mean /= count
    d = xp.subtract(x, mean)
    d -= add_reduce(xp, d, axes, keepdims=True) / count
    if d.dtype.kind == "c":  # |d|^2
        d = d.real * d.real + d.imag * d.imag
    else:
        xp.multiply(d, d, out=d)
    y = add_reduce(xp, d, axes, keepdim)
    if not (xp.all(y > 1e-30) and xp.all(y < math.inf)):  # (a nan too)
        return _wide_moment(xp, x, fn, axes, keepdim, correction)
    y /= count - correction
    return xp.sqrt(y) if fn is xp.std else y


def _wide_moment(xp, x, fn, axes, keepdim, correction):
    """A float32 (complex64) var / std in two float64 passes, rounded once. NumPy's own
    reductions suffice there (a float64 sum of 1e6 rows added one after another is still
    far below a float32 ulp), and a constant slice's deviations are 0 exactly (its float64
    sum is exact below 2^29 elements)."""
    count = _count(x.shape, axes)
    d = x.astype(xp.float64 if x.dtype.char == "f" else xp.complex128)
    mean = xp.add.reduce(d, axis=axes, keepdims=True)
    mean /= count
    d -= mean
    if d.dtype.kind == "c":  # |d|^2
        d = d.real * d.real + d.imag * d.imag
    else:
        xp.multiply(d, d, out=d)
    y = xp.add.reduce(d, axis=axes, keepdims=keepdim)
    y /= count - correction
    return (xp.sqrt(y) if fn is xp.std else y).astype(xp.float32)


def _two_pass(xp, x, fn, axes, keepdim, correction):
    """NumPy's var (std: its root) with both sums taken by `add_reduce`, whose sums over
    leading dims are a cascade: NumPy's var down a million float32 rows added them one
    after another, 5e-4 off (torch's: 4e-8). Over the last dim, NumPy's own steps and bits."""
    count = _count(x.shape, axes)
    mean = add_reduce(xp, x, axes, keepdims=True)
    xp.true_divide(mean, count, out=mean)
    d = xp.subtract(x, mean)
    # the mean corrected by its residuals' mean: a constant slice's deviations are then 0
    # exactly (std 0, whose gradient is 0, as torch's), not the rounding of the sum
    mean += add_reduce(xp, d, axes, keepdims=True) / count
    xp.subtract(x, mean, out=d)
    if d.dtype.kind == "c":  # |d|^2
        d = d.real * d.real + d.imag * d.imag
    else:
        xp.multiply(d, d, out=d)
    y = add_reduce(xp, d, axes, keepdim) / (count - correction)
    return xp.sqrt(y) if fn is xp.std else y


def _centered(x, axes):
    xc = x - x.mean(dim=axes, keepdim=True)
    if x.dtype.name in ("float32", "complex64"):
        # less the residuals' mean, which takes off the float32 mean's rounding (c / s ulps
        # of the spread s about c: std's gradient at -16080 +- 41 was 7e-6 off, torch's 5e-7)
        xc = xc - xc.mean(dim=axes, keepdim=True)
    return xc


# ---- var / std -------------------------------------------------------------------------------
@op("var", save="inputs", layout="contiguous", complex=True)
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


@op("std", save="inputs outputs", layout="contiguous", complex=True)
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
    if unbiased is not None and not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"{name}(): argument 'unbiased' must be bool, not "
                        f"{type(unbiased).__name__} ({unbiased!r}); for a number, pass "
                        f"correction= instead")
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{name}(): pass either unbiased or correction, not both")
    if correction is None:
        correction = 0 if unbiased is False else 1
    elif isinstance(correction, Tensor) and correction._data.ndim == 0:  # torch's Scalar
        correction = correction.item()
    if input._data.dtype.kind not in "fVc":
        raise RuntimeError(f"{name}(): std and var only support floating point and complex "
                           f"dtypes, got {input.dtype.name}; call .float() first")
    axes = normalize_dims(dim, input._data.ndim, name)
    if _count(input._data.shape, axes) - correction <= 0 and called_by_user(3):  # (nan/inf)
        warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than "
             f"the reduction factor (input numel divided by output numel).")
    return axes, keepdim, correction, dim is None


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


def _moment_mean(input, axes, keepdim):
    """var_mean's mean: a float32 (complex64) input's in float64, rounded once, as torch's
    comes from the same double sums as its var (a float32 mean of values about 0 was 20
    times less accurate)."""
    wide = {"float32": float64, "complex64": complex128}.get(input.dtype.name)
    if wide is None:
        return input.mean(dim=axes, keepdim=keepdim)
    return input.to(wide).mean(dim=axes, keepdim=keepdim).to(input.dtype)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over `dim`."""
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "var_mean")
    return (_var(input, axes=axes, keepdim=keepdim, correction=c, whole=whole),
            _moment_mean(input, axes, keepdim))


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over `dim`."""
    axes, keepdim, c, whole = _var_args(input, dim, unbiased, keepdim, correction, "std_mean")
    return (_std(input, axes=axes, keepdim=keepdim, correction=c, whole=whole),
            _moment_mean(input, axes, keepdim))


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
    """The kth_of(n)-th smallest along dim and its index: torch's median kernel orders ties
    by position (nth_element on (value, index)), so the index is that of the value's
    (k - #smaller + 1)-th occurrence, not the one a partition leaves there."""
    k = kth_of(x.shape[dim])
    vals = xp.take_along_axis(xp.partition(x, k, axis=dim),
                              xp.full(keepdim_shape(x.shape, (dim,)), k), dim)
    same = x == vals
    nth = k - (x < vals).sum(axis=dim, keepdims=True) + 1
    idx = xp.argmax(same & (xp.cumsum(same, axis=dim) == nth), axis=dim, keepdims=True)
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
def median(input, dim=NO_DIM, keepdim=None):
    """median(x): the lower median of all elements; median(x, dim): (values, indices).

    >>> import flowgrad as flow
    >>> flow.median(flow.tensor([3.0, 1.0, 4.0, 2.0]))
    tensor(2.)
    """
    dim, keepdim = dim_or_all(dim, keepdim, "median")
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
    vals, idx = s[r, best], order[r, last].astype(xp.int64)
    # where torch's sort is not the stable one (above 16 values, a repeated mode) or a NaN
    # breaks its ordering, its own steps decide
    redo = counts[r, best] > 1 if n > 16 else xp.zeros(rows.shape[0], bool)
    if rows.dtype.kind in "fc":
        redo |= xp.isnan(rows).any(1)
    redo = xp.flatnonzero(redo)
    for i in redo.tolist() if within_budget(redo.size, n) else ():
        vals[i], idx[i] = mode_row(rows[i].tolist())
    vals, idx = vals.reshape(lead), idx.reshape(lead)
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


# ---- histogramdd -----------------------------------------------------------------------------
# torch's binning (aten's histogramdd kernel), exactly: a coordinate outside [first edge, last
# edge] (or nan) drops its point; inside, its bin is std::upper_bound's answer over the edges
# minus one, the last bin closed on the right. Equal-width bins (torch.linspace edges) first
# guess the bin by (x - lo) * bins / (hi - lo) in the input's own arithmetic, then search only
# the guess's neighbours, which gives the same bins as the full search.
def _upper_bound(xp, edges, x, first, length):
    """libstdc++'s std::upper_bound over edges[first:first + length] for each x: the same
    halving steps, so even unsorted edges (torch only documents increasing ones) bin alike."""
    first, length = first.copy(), length.copy()
    while True:
        active = length > 0
        if not active.any():
            return first
        half = length >> 1
        middle = first + half
        left = x < edges[xp.minimum(middle, edges.shape[0] - 1)]
        first = xp.where(active & ~left, middle + 1, first)
        length = xp.where(active, xp.where(left, half, length - half - 1), 0)


def bin_points(xp, points, edges, weight=None, method="search"):
    """The histogram of the rows of `points` (M, N) over the N 1-D edge arrays: counts, or the
    sum of `weight` (M,), in points' dtype, accumulated point by point as torch's CPU kernel
    on one thread. `method`, torch's three: "search" (any edges: histogramdd and histogram
    with edge tensors), "guess_and_search" (torch.linspace edges: histogramdd and histogram
    with bin counts) or "guess" (the bin the division gives, unchecked: histc)."""
    hist = xp.zeros(tuple(e.shape[0] - 1 for e in edges), points.dtype)
    if not edges:  # zero dims: nothing to bin (torch leaves its 0-d hist at 0)
        return hist
    keep = xp.ones(points.shape[0], bool)
    flat = xp.zeros(points.shape[0], xp.int64)
    for d, e in enumerate(edges):
        x, k = points[:, d], e.shape[0]
        keep &= (x >= e[0]) & (x <= e[-1])
        if method == "search":
            pos = _upper_bound(xp, e, x, xp.zeros(x.shape, xp.int64),
                               xp.full(x.shape, k, xp.int64)) - 1
        else:
            with xp.errstate(invalid="ignore", over="ignore"):
                guess = (x - e[0]) * e.dtype.type(k - 1) / (e[-1] - e[0])
            # 0/0 where the range rounds to one value in the dtype (every edge equal, 2^25
            # in float32): the point equals every edge, and the search puts it in the last
            # bin (torch casts the nan to int64 and indexes before the edges)
            guess = xp.where(xp.isnan(guess), k - 1, guess)
            pos = xp.where(keep, guess, 0).astype(xp.int64)
            if method == "guess_and_search":
                lo = xp.maximum(pos - 1, 0)
                pos = _upper_bound(xp, e, x, lo, xp.minimum(pos + 2, k) - lo) - 1
        pos = xp.where(pos == k - 1, pos - 1, pos)
        flat = flat * (k - 1) + xp.clip(pos, 0, k - 2)
    w = xp.ones(int(keep.sum()), points.dtype) if weight is None else weight[keep]
    xp.add.at(hist.reshape(-1), flat[keep], w)
    return hist


def linspace_edges(lo, hi, n, dtype, name="histogramdd"):
    """torch.linspace(lo, hi, n) in a floating `dtype` as torch 2.13's CPU kernel computes it
    (n >= 2): step = (hi - lo) / (n - 1), then lo + step * i up to the middle and
    hi - step * (n - 1 - i) after. float32/float64 evaluate each as one fused multiply-add
    (one rounding, exact here with fractions); float16/bfloat16 round every operation,
    the integers i included, to the dtype (c10::Half's arithmetic)."""
    t, half = dtype.type, dtype.itemsize < 4
    with np.errstate(over="ignore"):  # (a double bound reaches c10::Half through float)
        first, last = (t(np.float32(lo)), t(np.float32(hi))) if half else (t(lo), t(hi))
    if not (np.isfinite(first) and np.isfinite(last)):
        raise RuntimeError(f"{name}: range [{lo}, {hi}] cannot be converted to type "
                           f"{dtype} without overflow; pass a range the dtype can hold")
    if half:
        step = t(t(last - first) / t(n - 1))
        return np.array([first + t(step * t(i)) if i < n // 2 else
                         last - t(step * t(n - 1 - i)) for i in builtins.range(n)], dtype)
    with np.errstate(over="ignore"):
        step = (last - first) / t(n - 1)
    if not np.isfinite(step):  # (an overflowing range: inf * 0 and the ends make nans)
        i = np.arange(n)
        with np.errstate(invalid="ignore"):
            return np.where(i < n // 2, first + step * i, last - step * (n - 1 - i)).astype(dtype)
    q, a, b = Fraction(float(step)), Fraction(float(first)), Fraction(float(last))
    return np.array([float(a + q * i) if i < n // 2 else float(b - q * (n - 1 - i))
                     for i in builtins.range(n)]).astype(dtype)


def _outer_edges(xp, points, rng, n):
    """Each dim's first and last edge: `rng`, else the data's min and max (0 and 1 for no
    points), widened by 0.5 each way where they are equal, as torch (and NumPy)."""
    if rng is not None:
        lo, hi = list(rng[0::2]), list(rng[1::2])
    elif points.shape[0]:
        lo, hi = points.min(axis=0).tolist(), points.max(axis=0).tolist()
    else:
        lo, hi = [0.0] * n, [1.0] * n
    for d in builtins.range(n):
        if not (math.isfinite(lo[d]) and math.isfinite(hi[d])):
            raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{lo[d]}, {hi[d]}] "
                               f"is not finite; pass a finite range= or drop the inf/nan "
                               f"points")
        if lo[d] > hi[d]:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{lo[d]} max {hi[d]} for dimension {d}")
        if lo[d] == hi[d]:
            lo[d], hi[d] = lo[d] - 0.5, hi[d] + 0.5
    return lo, hi


@op("histogramdd", differentiable=False, n_out=None)
def _histogramdd(xp, points, *given, counts, rng, weighted, density):
    weight, edges = (given[0], given[1:]) if weighted else (None, given)
    if counts is not None:  # equal-width bins: torch.linspace edges in the input's dtype
        lo, hi = _outer_edges(xp, points, rng, len(counts))
        edges = tuple(xp.asarray(linspace_edges(lo[d], hi[d], c + 1, points.dtype))
                      for d, c in enumerate(counts))
    hist = bin_points(xp, points, edges, weight,
                      "search" if counts is None else "guess_and_search")
    if density:  # divide by the total, then by each bin's width per dim, as torch (0/0: nan)
        total = hist.sum(dtype=xp.float32 if hist.dtype.itemsize < 4 else hist.dtype)
        with xp.errstate(invalid="ignore", divide="ignore"):
            hist = (hist / total.astype(hist.dtype)).astype(hist.dtype)
            for d, e in enumerate(edges):
                shape = [1] * len(edges)
                shape[d] = e.shape[0] - 1
                hist = hist / xp.diff(e).reshape(shape)
    return (hist, *edges) if counts is not None else (hist,)


_histogramdd_type = return_types.histogramdd


def _histogramdd_bins(bins, n):
    """bins as (counts, None) or (None, edge tensors), refused as torch's argument parser."""
    if isinstance(bins, numbers.Integral) and not isinstance(bins, Tensor):
        return (int(bins),) * n, None
    if isinstance(bins, Tensor) or not isinstance(bins, (list, tuple)):
        raise TypeError(f"histogramdd(): argument 'bins' must be an int, a sequence of ints or "
                        f"a sequence of 1-D tensors, not {type(bins).__name__}")
    bins = list(bins)
    if bins and all(isinstance(b, Tensor) for b in bins):
        return None, bins
    for i, b in enumerate(bins):
        if isinstance(b, Tensor) or not isinstance(b, numbers.Integral):
            raise TypeError(f"histogramdd(): bins must be all ints or all tensors, but element "
                            f"{i} is {type(b).__name__}")
    if len(bins) != n:
        raise RuntimeError(f"histogramdd: The size of bins must be equal to the innermost "
                           f"dimension of the input (got {len(bins)} bin counts for points "
                           f"of {n} dims)")
    return tuple(int(b) for b in bins), None


def _histogramdd_checks(input, counts, edges, rng, weight, n):
    name = TORCH_SCALAR_NAMES.get(input._data.dtype.name, input._data.dtype.name)
    if counts is not None:
        if rng is not None and len(rng) != 2 * n:
            raise RuntimeError(f"torch.histogramdd: for a {n}-dimensional histogram range "
                               f"should have {2 * n} elements, but got {len(rng)}")
        kind, size = input._data.dtype.kind, input._data.dtype.itemsize
        if rng is None and (kind != "f" or size < 4) or kind not in "fV":
            # (the range's min/max has only float and double kernels; binning also halves)
            raise NotImplementedError(
                f'"{"histogramdd" if rng is None else "histogram_cpu"}" not implemented for '
                f"'{name}' (input of shape {tuple(input.shape)}); convert it with .float()")
        for d, c in enumerate(counts):
            if c < -1:
                raise RuntimeError(f"torch.histogramdd: number of steps must be non-negative "
                                   f"(bins {c} for dimension {d})")
            if c == -1:
                _edges_numel_error(d, 0)
            if c == 0:
                raise RuntimeError(f"torch.histogram(): bins must be > 0, but got 0 for "
                                   f"dimension {d}")
    else:
        if len(edges) != n:
            raise RuntimeError(f"torch.histogramdd: expected {n} sequences of bin edges for a "
                               f"{n}-dimensional histogram but got {len(edges)}")
        for d, e in enumerate(edges):
            if e._data.dtype != input._data.dtype:
                raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should "
                                   f"have the same dtype, but got input with dtype "
                                   f"{input.dtype} and bins for dimension {d} with dtype "
                                   f"{e.dtype}")
            if e._data.ndim != 1:
                raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, "
                                   f"but got {e._data.ndim} dimensions in the bins tensor for "
                                   f"dimension {d}")
            if e._data.size == 0:
                _edges_numel_error(d, 0)
    if weight is not None:
        if weight._data.dtype != input._data.dtype:
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor "
                               f"and weight tensor should have the same dtype, but got "
                               f"input({input.dtype}), and weight({weight.dtype})")
        if (tuple(weight.shape) or (1,)) != tuple(input.shape)[:-1]:
            raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should "
                               f"have the same shape as the input tensor excluding its "
                               f"innermost dimension, but got input with shape "
                               f"{list(input.shape)} and weight with shape {list(weight.shape)}")
    if edges is not None:
        for d, e in enumerate(edges):
            if e._data.size == 1:
                raise RuntimeError(f"torch.histogram(): bins must be > 0, but got 0 for "
                                   f"dimension {d}")
    if input._data.dtype.kind not in "fV":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{name}' (input of "
                                  f"shape {tuple(input.shape)}); convert it with .float()")


def _edges_numel_error(d, numel):
    raise RuntimeError(f"torch.histogramdd: bins tensor should have at least 1 element, but "
                       f"got {numel} elements in the bins tensor for dimension {d}")


def histogramdd(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the N-dimensional histogram of the points in the rows of `input`
    (..., N). `bins`: one int for every dim, N ints (equal-width bins over `range`, a flat
    [min0, max0, min1, max1, ...], default the data's), or N 1-D tensors of edges. Each bin
    holds its left edge, the last one both. `weight`: each point's weight (shape input.shape
    [:-1]); `density`: divide by the total and by each bin's volume. No gradient, as torch.

    >>> import flowgrad as flow
    >>> r = flow.histogramdd(flow.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]), bins=2)
    >>> r.hist
    tensor([[1., 0.],
            [1., 1.]])
    >>> r.bin_edges[0]
    tensor([0.0000, 0.5000, 1.0000])
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"histogramdd(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if input._data.ndim < 2:
        raise RuntimeError(f"torch.histogramdd: input tensor should have at least 2 dimensions "
                           f"(got shape {tuple(input.shape)}); pass the points as the rows of "
                           f"an (M, N) tensor, e.g. x.unsqueeze(-1) for 1-D values")
    n = input.shape[-1]
    counts, edges = _histogramdd_bins(bins, n)
    rng = None
    if range is not None:
        if isinstance(range, Tensor) or not all(
                isinstance(r, numbers.Real) and not isinstance(r, Tensor) for r in range):
            raise TypeError(f"histogramdd(): argument 'range' must be a sequence of numbers "
                            f"[min0, max0, min1, max1, ...], not {type(range).__name__}")
        rng = tuple(float(r) for r in range)
    if weight is not None and not isinstance(weight, Tensor):
        raise TypeError(f"histogramdd(): argument 'weight' must be Tensor, not "
                        f"{type(weight).__name__}")
    _histogramdd_checks(input, counts, edges, rng, weight, n)
    points = input.reshape(math.prod(input.shape[:-1]), n)
    inputs = [points] + ([weight.reshape(-1)] if weight is not None else []) + (edges or [])
    out = _histogramdd(*inputs, counts=counts, rng=rng,
                       weighted=weight is not None, density=bool(density))
    if counts is None:  # (edge tensors come back as given, as torch's)
        hist = without_derivative([out[0]], [input, weight, *edges], "_histogramdd_from_bin_"
                                  "tensors", "RuntimeError")[0]
        return _histogramdd_type(hist, tuple(edges))
    out = without_derivative(list(out), [input, weight], "_histogramdd_from_bin_cts",
                             "RuntimeError")
    return _histogramdd_type(out[0], tuple(out[1:]))


# ---- covariance --------------------------------------------------------------------------
def _check_cov_weights(weights, name, n):
    """torch.cov's checks of fweights (integers) and aweights (floats): one value per
    observation, none negative (a traced graph's weights are checked on the first call)."""
    integral = name == "fweights"
    if weights.dim() > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                           f"{name} with {weights.dim()} dimensions")
    if weights.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                           f"observations in the input but got {weights.numel()} != {n}")
    if integral == (weights.is_floating_point() or weights.is_complex()):
        kind = "integral" if integral else "floating point"
        raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} with "
                           f"{weights.dtype.name} dtype")
    check_every_example(weights >= 0, f"cov(): {name} cannot be negative")


@tensor_method()
def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance of the rows (variables) over the columns (observations) of a 1-D or 2-D
    input, with optional frequency and observation weights, as torch.cov.

    >>> import flowgrad as flow
    >>> flow.cov(flow.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    if input.dim() > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.dim()} dimensions")
    if input.dtype.name == "bool":
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not (x.is_floating_point() or x.is_complex()):
        x = x.float()
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_cov_weights(fweights, "fweights", n)
        w = fweights  # (the weights take part in type promotion, as torch's)
    if aweights is not None:
        _check_cov_weights(aweights, "aweights", n)
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum = n
        avg = x.mean(1)
    else:
        w_sum = w.sum()
        check_every_example(w_sum != 0, "cov(): weights sum to zero, can't be normalized")
        # one observation is its own mean: x * w / w_sum rounds off it, and a dof <= 0
        # (norm 0) then made that rounding an inf where torch's 0 / 0 is nan
        avg = x.squeeze(1).to(promote_types(x.dtype, w.dtype)) if n == 1 else \
            (x * w).sum(1) / w_sum
    if w is None:
        norm = w_sum - correction
    elif correction == 0:
        norm = w_sum
    elif aweights is None:
        norm = w_sum - correction
    else:
        norm = w_sum - correction * (w * aweights).sum() / w_sum
    if isinstance(norm, Tensor):
        norm = norm.clamp(min=0)
    else:
        norm = max(norm, 0)
    xm = x - avg.unsqueeze(1)
    if n > 1 and xm.dtype.name in ("float32", "complex64"):
        # less the residuals' mean: x - avg is exact near the mean, so this takes off avg's
        # rounding, c / s ulps of the spread for observations at c +- s (733 +- 6e-4: 0.5%
        # off where torch is exact); in exact arithmetic it subtracts 0 (the same gradient)
        xm = xm - (xm.mean(1) if w is None else (xm * w).sum(1) / w_sum).unsqueeze(1)
    c = ((xm * w) if w is not None else xm) @ xm.mT.conj()
    return (c / norm).squeeze()


@tensor_method()
def corrcoef(input):
    """Pearson correlation coefficients of the rows of input (cov scaled by the standard
    deviations, clipped to [-1, 1] as torch does).

    >>> import flowgrad as flow
    >>> flow.corrcoef(flow.tensor([[0.0, 1.0, 2.0], [2.0, 1.5, 0.0]])).round(decimals=4)
    tensor([[ 1.0000, -0.9608],
            [-0.9608,  1.0000]])
    """
    c = cov(input)
    if c.dim() == 0:
        return c / c
    std = c.diagonal().real.sqrt() if c.is_complex() else c.diagonal().sqrt()
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    return c if c.is_complex() else c.clamp(-1, 1)
