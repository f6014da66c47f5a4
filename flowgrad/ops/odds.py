"""Odds and ends of torch.*: kron, diff, cartesian_prod, combinations, trapezoid and
cumulative_trapezoid, histc/histogram, unique_consecutive, tril_indices/triu_indices, and
Tensor.unfold (sliding windows along one dim, a view).

The differentiable ones are compositions of registered ops (their gradients come from those),
except Tensor.unfold, one view op whose rule sums the windows back. The counting ones
(histc, histogram, unique_consecutive, the index builders) have no gradient, as in torch.

>>> import flowgrad as flow
>>> flow.diff(flow.tensor([1.0, 4.0, 9.0]))
tensor([3., 5.])
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as _dt
from .. import return_types
from ..autograd.interpreter import check_read
from ..device import array_module, resolve_device, to_device
from ..errors import expect_tensor, int_arg
from ..tensor import Tensor, _wrap_dim, tensor_method
from .creation import FACTORY_HINTS, check_hints
from .elementwise import scale
from .index import narrow
from .index_functions import index_select
from .no_derivative import without_derivative
from .registry import op
from .shape import cat, meshgrid, stack
from .sort import unique_dim
from .stats import bin_points, histogramdd, linspace_edges

__all__ = ["kron", "diff", "cartesian_prod", "combinations", "trapezoid", "trapz",
           "cumulative_trapezoid", "histc", "histogram", "unique_consecutive", "tril_indices",
           "triu_indices", "gradient"]


@op("unsafe_view", jvp="linear", complex=True)
def _unsafe_view(xp, x, *, shape):
    # torch's _unsafe_view, which its kron takes of its operands (and of the product): the
    # same memory (a copy only where NumPy can't view it), yet no view to autograd, with a
    # version counter of its own; so a write to an operand after kron is legal and its
    # product's backward reads the written values, as torch's
    return x.reshape(shape)


@_unsafe_view.grad
def unsafe_view_backward(ctx, dy):
    return dy.reshape(ctx.input_shapes[0])


@tensor_method()
def kron(input, other):
    """The Kronecker product: block (i, j) of the result is input[i, j] * other.

    >>> import flowgrad as flow
    >>> flow.kron(flow.tensor([1.0, 2.0]), flow.tensor([1.0, 10.0]))
    tensor([ 1., 10.,  2., 20.])
    """
    nd = max(input._data.ndim, other._data.ndim)
    a = (1,) * (nd - input._data.ndim) + input._data.shape
    b = (1,) * (nd - other._data.ndim) + other._data.shape
    # interleave: a's dims at even positions, b's at odd ones, then merge each pair
    out = _unsafe_view(input, shape=tuple(s for n in a for s in (n, 1))) * \
        _unsafe_view(other, shape=tuple(s for n in b for s in (1, n)))
    return _unsafe_view(out, shape=tuple(m * n for m, n in zip(a, b)))


@tensor_method()
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim (after concatenating prepend/append).

    >>> import flowgrad as flow
    >>> flow.diff(flow.tensor([1, 4, 9, 16]), n=2)
    tensor([2, 2])
    """
    n = int_arg(n, "diff", "n", 2)  # (parsed first, as torch's: a tensor is a TypeError)
    if input._data.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    for t in (prepend, append):  # (a 0-d one too: NumPy's diff broadcasts it, torch's not)
        if t is not None and t._data.ndim != input._data.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as "
                               "input")
    if n == 0 and prepend is None and append is None:
        return input.clone()  # (torch checks no dim then)
    d = _wrap_dim(dim, input._data.ndim, "diff")
    for t in (prepend, append):
        if t is not None and any(a != b for k, (a, b) in
                                 enumerate(zip(t._data.shape, input._data.shape)) if k != d):
            raise RuntimeError("diff expects the shape of tensor to prepend or append to match "
                               "that of input except along the differencing dimension")
    if n == 0:  # torch ignores prepend/append then and returns a copy of the input
        return input.clone()
    parts = [t for t in (prepend, input, append) if t is not None]
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        length = x._data.shape[d]
        if length == 0:
            break
        hi, lo = narrow(x, d, 1, length - 1), narrow(x, d, 0, length - 1)
        x = hi ^ lo if x._data.dtype == np.bool_ else hi - lo
    return x


def _diff_out(input, n=1, dim=-1, prepend=None, append=None):
    """diff's out= form: torch's diff_out_helper narrows from 1 along the differenced dim, so
    a dim of length 0 (prepend and append included) raises there for n >= 1, where the form
    without out= returns the empty input."""
    result = diff(input, n, dim, prepend, append)  # (its checks first, as torch's)
    d = _wrap_dim(dim, input._data.ndim, "diff")
    length = sum(t._data.shape[d] for t in (prepend, input, append) if t is not None)
    if length == 0 and int(n) >= 1:
        raise IndexError(f"diff(): start out of range (expected to be in range of [0, 0], but "
                         f"got 1): with out=, torch narrows dim {d} of length 0 from 1 "
                         f"(without out= the result is empty); drop out= for an empty input")
    return result


diff.out_form = _diff_out


def cartesian_prod(*tensors):
    """All combinations of one element from each 1-D tensor, one per row.

    >>> import flowgrad as flow
    >>> flow.cartesian_prod(flow.tensor([1, 2]), flow.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    for t in tensors:
        if t._data.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expect a 1D vector, but got shape "
                               f"{tuple(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-length combinations of a 1-D tensor's elements, one per row (itertools order).

    >>> import flowgrad as flow
    >>> flow.combinations(flow.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    xp = array_module(input._data)
    if input._data.ndim != 1:
        raise RuntimeError(f"combinations: Expect a 1D vector, but got shape "
                           f"{tuple(input.shape)}")
    if r < 0:
        raise RuntimeError(f"combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor._wrap(xp.empty((0,), input._data.dtype))
    pick = itertools.combinations_with_replacement if with_replacement \
        else itertools.combinations
    rows = xp.array(list(pick(range(input._data.shape[0]), r)), np.int64).reshape(-1, r)
    # no combinations (r > len) still goes through index_select, so the empty result is
    # connected to the graph as torch's is
    return stack([index_select(input, 0, Tensor._wrap(rows[:, k].copy())) for k in range(r)], 1)


# ---- trapezoidal rule ------------------------------------------------------------------------
def _trapezoid_steps(y, x, dx, d, name):
    """The sum of the interval pairs y[i] + y[i+1] and the steps x[i+1] - x[i] along d (None
    where the spacing is the number dx), after torch's checks."""
    if y._data.dtype.kind == "b":
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported; "
                           f"convert it with y.float()")
    n = y._data.shape[d]
    k = max(n - 1, 0)  # (no samples: no intervals, as torch's slices give)
    pairs = narrow(y, d, 0, k) + narrow(y, d, min(n, 1), k)
    if x is None:
        return pairs, None
    if dx is not None:
        raise RuntimeError(f"{name}: cannot pass both x and dx")
    if x._data.ndim == 1:
        if x._data.shape[0] != n:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point; "
                               f"got {x._data.shape[0]} x values and {n} samples")
        return pairs, diff(x).reshape([k if i == d else 1 for i in range(y._data.ndim)])
    return pairs, diff(x, dim=d - y._data.ndim)


@tensor_method()
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Numerical derivative along each dim in `dim` (all when None), as torch.gradient and
    numpy.gradient: second-order central differences inside, one-sided differences of order
    `edge_order` (1 or 2) at the ends. `spacing`: one number for every dim, a number per dim,
    or per dim a 1-D tensor of the sample coordinates (unevenly spaced allowed). Composed of
    ops, so differentiable. Returns a tuple, one tensor per dim.

    >>> import flowgrad as flow
    >>> flow.gradient(flow.tensor([1.0, 4.0, 9.0, 16.0, 25.0]))
    (tensor([3., 4., 6., 8., 9.]),)
    """
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    if input._data.dtype.kind == "b":  # (torch's differences of bools refuse)
        raise RuntimeError("gradient: Subtraction, the `-` operator, with two bool tensors is "
                           "not supported; convert the input with .float() first")
    if spacing is None:  # (torch's default when spelt out: unit spacing)
        spacing = 1
    elif isinstance(spacing, Tensor) and spacing._data.ndim == 0:  # torch's Scalar form
        if spacing.requires_grad:  # (torch's parser takes no such tensor for a Number)
            raise TypeError("gradient() received an invalid combination of arguments: a "
                            "spacing tensor that requires grad is no Number")
        spacing = spacing.item()
    ndim = input._data.ndim
    dims = (list(range(ndim)) if dim is None else [dim] if isinstance(dim, int)
            else list(dim))
    dims = [_wrap_dim(d, ndim, "gradient") for d in dims]
    for k, d in enumerate(dims):
        if d in dims[:k]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar "
                               f"or it's spacing and dim arguments to have the same length, "
                               f"but got a spacing argument of length {len(spacing)} and a "
                               f"dim argument of length {len(dims)}")
        spacings = list(spacing)
    else:
        spacings = [spacing] * len(dims)
    if any(input._data.shape[d] < edge_order + 1 for d in dims):
        raise RuntimeError("torch.gradient expected each dimension size to be at least "
                           "edge_order+1")
    x = input if input.is_floating_point() or input.is_complex() else \
        input.to(_dt.get_default_dtype())
    return tuple(_gradient_along(x, d, h, edge_order) for d, h in zip(dims, spacings))


def _gradient_along(f, d, h, edge_order):
    n = f._data.shape[d]

    def at(start, length=1):
        return narrow(f, d, start, length)

    if not isinstance(h, Tensor):  # evenly spaced by h
        inner = (at(2, n - 2) - at(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (at(1) - at(0)) / h, (at(n - 1) - at(n - 2)) / h
        else:
            first = (at(0) * -3.0 + at(1) * 4.0 - at(2)) / (2.0 * h)
            last = (at(n - 3) - at(n - 2) * 4.0 + at(n - 1) * 3.0) / (2.0 * h)
        return cat([first, inner, last], d)
    if h._data.ndim != 1 or h._data.shape[0] != n:
        raise RuntimeError(f"torch.gradient expected each tensor in spacing to be 1-D with "
                           f"the size of its dim ({n}), got shape {tuple(h.shape)} for dim {d}")
    # the coordinates take part in type promotion, as torch's (float32 samples at float64
    # coordinates give float64)
    f = f.to(_dt.promote_types(f.dtype, h.dtype))
    shape = [1] * f._data.ndim
    shape[d] = -1

    def along(coefficients):  # per-position weights broadcast along dim d
        return coefficients.to(f.dtype).reshape(shape)

    dx = diff(h)
    left, right = dx[:-1], dx[1:]
    inner = (along(-right / (left * (left + right))) * at(0, n - 2)
             + along((right - left) / (left * right)) * at(1, n - 2)
             + along(left / (right * (left + right))) * at(2, n - 2))
    if edge_order == 1:
        first = (at(1) - at(0)) / along(dx[:1])
        last = (at(n - 1) - at(n - 2)) / along(dx[-1:])
    else:
        a, b = dx[:1], dx[1:2]
        first = (along(-(2.0 * a + b) / (a * (a + b))) * at(0) + along((a + b) / (a * b))
                 * at(1) + along(-a / (b * (a + b))) * at(2))
        a, b = dx[-2:-1], dx[-1:]
        last = (along(b / (a * (a + b))) * at(n - 3) + along(-(a + b) / (a * b)) * at(n - 2)
                + along((2.0 * b + a) / (b * (a + b))) * at(n - 1))
    return cat([first, inner, last], d)


def _promoted_samples(y):
    """y, an integer one in the default float (torch's 0.5 promotes it)."""
    return y.to(_dt.get_default_dtype()) if y._data.dtype.kind in "iu" else y


def _times(t, number):
    """t * number, the number kept unsaved as torch keeps its Scalar dx (a second backward
    through trapezoid works); 1.0 leaves t as it is."""
    if isinstance(number, Tensor):
        return t * number
    return t if number == 1.0 else scale(t, value=number)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """Integral of y along dim by the trapezoidal rule (sample points x, or spacing dx).

    >>> import flowgrad as flow
    >>> flow.trapezoid(flow.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    d = _wrap_dim(dim, y._data.ndim, "trapezoid")
    if y._data.shape[d] == 0:  # (torch's: zeros of y's dtype, off the graph, before any check)
        return y.detach().new_zeros(tuple(y.shape[:d]) + tuple(y.shape[d + 1:]))
    # torch's formulas and order of rounding (they differ in half precision): with a number
    # dx, (sum(y) - (y[0] + y[-1]) / 2) * dx; with x, sum((y[i] + y[i+1]) * step) / 2
    y = _promoted_samples(y)
    pairs, steps = _trapezoid_steps(y, x, dx, d, "trapezoid")
    if steps is None:
        ends = y.select(d, 0) + y.select(d, -1)
        return _times(y.sum(d) - _times(ends, 0.5), 1.0 if dx is None else dx)
    return (pairs * steps).sum(d) / 2


def trapz(y, x=None, *, dx=None, dim=-1):
    """trapezoid's older name (torch.trapz).

    >>> import flowgrad as flow
    >>> flow.trapz(flow.tensor([0.0, 1.0]), dx=2.0)
    tensor(1.)
    """
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along dim (one element shorter than y).

    >>> import flowgrad as flow
    >>> flow.cumulative_trapezoid(flow.tensor([1.0, 2.0, 3.0]))
    tensor([1.5000, 4.0000])
    """
    d = _wrap_dim(dim, y._data.ndim, "cumulative_trapezoid")
    for t, what in ((y, "y"), (x, "x")):
        if t is not None and t._data.dtype == np.bool_:
            raise RuntimeError(f"cumulative_trapezoid: received a bool input for `{what}`, "
                               f"but bool is not supported")
    # torch's formulas: cumsum(dx / 2 * (y[i] + y[i+1])), cumsum((y[i] + y[i+1]) * step) / 2
    y = _promoted_samples(y)
    pairs, steps = _trapezoid_steps(y, x, dx, d, "cumulative_trapezoid")
    if steps is None:
        return _times(pairs, (1.0 if dx is None else dx) / 2.0).cumsum(d)
    return (pairs * steps).cumsum(d) / 2


# ---- counting: no gradient -------------------------------------------------------------------
def _float_input(input, name):
    if input._data.dtype.kind not in "fV":
        raise NotImplementedError(f"{name}: \"{name}_cpu\" not implemented for "
                                  f"'{input.dtype}'; convert the input with .float()")
    return input._data


@tensor_method()
def histc(input, bins=100, min=0, max=0):
    """Counts in `bins` equal bins over [min, max] (the data's range when both are 0);
    elements outside are ignored. No gradient.

    >>> import flowgrad as flow
    >>> flow.histc(flow.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    bins = int_arg(bins, "histc", "bins", 2)  # (parsed first, as torch's)
    _float_input(input, "histc")
    if bins <= 0:
        raise RuntimeError(f"histc: bins must be > 0, but got {bins}")
    return _histc(input, bins=bins, lo=float(min), hi=float(max))


@op("histc", differentiable=False)  # an op: a graph compiles it rather than freezing it
def _histc(xp, a, *, bins, lo, hi):
    if lo == hi and a.size:  # the data's range, on every run
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi or not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histc: range of [{lo}, {hi}] is not finite or max < min")
    # torch's binning: edges by its linspace in a's dtype (an overflowing step makes them
    # nan, and then every element is dropped), bin = (x - lo) * bins / (hi - lo) in a's dtype
    edges = xp.asarray(linspace_edges(lo, hi, bins + 1, a.dtype, "histc"))
    return bin_points(xp, a.reshape(-1, 1), (edges,), method="guess")


_histogram_type = return_types.histogram


@tensor_method()
def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges): counts (or weighted sums, or a density) in `bins` equal bins over
    `range` (default the data's), or in the bins whose edges the 1-D tensor `bins` gives.
    As torch, the 1-D case of histogramdd: the same edges (torch's linspace) and binning.

    >>> import flowgrad as flow
    >>> flow.histogram(flow.tensor([1.0, 2.0, 1.0]), 2)
    histogram(hist=tensor([2., 1.]), bin_edges=tensor([1.0000, 1.5000, 2.0000]))
    """
    expect_tensor("histogram", input)
    if isinstance(bins, Tensor) and range is not None:  # (torch has no such overload)
        raise TypeError("histogram(): range= goes with a number of bins, not with bin edges")
    if not isinstance(bins, Tensor):
        bins = int_arg(bins, "histogram", "bins", 2)
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                               f"dimension 0")
    out = histogramdd(input.reshape(-1, 1), [bins], range=range,
                      weight=None if weight is None else weight.reshape(-1), density=density)
    edges = out.bin_edges[0]
    if isinstance(bins, Tensor):  # (torch returns a copy of the edges, not the tensor given)
        edges = without_derivative([edges.detach().clone()], [input, weight, bins],
                                   "histogram", "RuntimeError")[0]
    return _histogram_type(out.hist, edges)


@tensor_method()
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse each run of equal consecutive elements (or slices along dim) to one;
    optionally the inverse indices and the run lengths. No gradient.

    >>> import flowgrad as flow
    >>> flow.unique_consecutive(flow.tensor([1, 1, 2, 2, 3, 1, 1]))
    tensor([1, 2, 3, 1])
    """
    check_read(input, "unique_consecutive()")  # (its output's shape is the values')
    xp = array_module(input._data)
    a = input._data
    if dim is None:
        flat = a.reshape(-1)
        starts = xp.ones(flat.shape, bool)
        starts[1:] = flat[1:] != flat[:-1]
        values = flat[starts]
        inv_shape = a.shape
    else:
        d = unique_dim(a.shape, dim, "unique_consecutive")
        rest = math.prod(a.shape[:d] + a.shape[d + 1:])  # not -1: a 0-size dim leaves it open
        moved = xp.moveaxis(a, d, 0).reshape(a.shape[d], rest)
        starts = xp.ones(a.shape[d], bool)
        starts[1:] = (moved[1:] != moved[:-1]).any(axis=1)
        # laid out as torch's: the slices kept, C-ordered with `dim` first, moved back
        kept = xp.ascontiguousarray(xp.compress(starts, xp.moveaxis(a, d, 0), axis=0))
        values = xp.moveaxis(kept, 0, d)
        inv_shape = (a.shape[d],)
    out = [Tensor._wrap(values)]
    if return_inverse:
        out.append(Tensor._wrap((xp.cumsum(starts) - 1).astype(np.int64).reshape(inv_shape)))
    if return_counts:
        edges = xp.flatnonzero(xp.append(starts, True))
        out.append(Tensor._wrap(xp.diff(edges).astype(np.int64)))
    out = without_derivative(out, [input], "unique_consecutive")
    return out[0] if len(out) == 1 else tuple(out)


def _tri_indices(row, col, offset, dtype, lower, device):
    name = "tril_indices" if lower else "triu_indices"
    dev = resolve_device(device, name)
    row, col, offset = (int(v.item()) if isinstance(v, Tensor) and v._data.ndim == 0 and
                        v._data.dtype.kind in "iu" else v for v in (row, col, offset))
    for position, (what, size) in enumerate((("row", row), ("col", col), ("offset", offset))):
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool):
            raise TypeError(f"{name}(): argument '{what}' (position {position + 1}) must be "
                            f"int, not {type(size).__name__}")
    dtype = _dt.int64 if dtype is None else dtype
    if dtype not in (_dt.int64, _dt.int32):
        raise NotImplementedError(f"\"{'tril' if lower else 'triu'}_indices\" not implemented "
                                  f"for '{dtype}'; pass dtype=flow.long or flow.int")
    for what, size in (("row", row), ("col", col)):
        if size < 0:
            raise RuntimeError(f"{name}: {what} must be non-negative, got {size}")
    r, c = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    indices = np.stack([r, c]).astype(_dt.as_dtype(dtype).np).reshape(2, -1)
    return Tensor._wrap(to_device(indices, dev))  # computed from the sizes on the host


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None,
                 pin_memory=False, requires_grad=False):
    """The (2, N) coordinates of the lower triangle of a row x col matrix, row by row.

    >>> import flowgrad as flow
    >>> flow.tril_indices(2, 2)
    tensor([[0, 1, 1],
            [0, 0, 1]])
    """
    check_hints("tril_indices", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    if requires_grad:
        raise RuntimeError("tril_indices(): only tensors of floating point and complex dtype can "
                           "require gradients (these are integer indices)")
    return _tri_indices(row, col, offset, dtype, True, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None,
                 pin_memory=False, requires_grad=False):
    """The (2, N) coordinates of the upper triangle of a row x col matrix, row by row.

    >>> import flowgrad as flow
    >>> flow.triu_indices(2, 2)
    tensor([[0, 0, 1],
            [0, 1, 1]])
    """
    check_hints("triu_indices", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    if requires_grad:
        raise RuntimeError("triu_indices(): only tensors of floating point and complex dtype can "
                           "require gradients (these are integer indices)")
    return _tri_indices(row, col, offset, dtype, False, device)


# ---- Tensor.unfold: windows along one dim, a view --------------------------------------------
@op("unfold_dim", is_view=True, complex=True)
def _unfold_dim(xp, x, *, dim, size, step):
    windows = xp.lib.stride_tricks.sliding_window_view(x, size, axis=dim,
                                                       writeable=x.flags.writeable)
    return windows[(slice(None),) * dim + (slice(None, None, step),)]


@_unfold_dim.grad
def unfold_dim_backward(ctx, dy):
    return _unfold_dim_backward(dy, shape=ctx.input_shapes[0], dim=ctx.dim, size=ctx.size,
                                step=ctx.step)


@op("unfold_dim_backward", complex=True)
def _unfold_dim_backward(xp, dy, *, shape, dim, size, step):
    out = xp.zeros(shape, dy.dtype)
    count = dy.shape[dim]
    target = xp.moveaxis(out, dim, -1)
    source = xp.moveaxis(dy, dim, -2)  # (..., windows, size)
    for k in range(size):  # each offset within the windows hits a strided slice
        target[..., k:k + (count - 1) * step + 1:step] += source[..., k]
    return out


@_unfold_dim_backward.grad
def unfold_dim_backward_backward(ctx, g):
    return _unfold_dim(g, dim=ctx.dim, size=ctx.size, step=ctx.step)


def _tensor_unfold(self, dimension, size, step):
    """Every `size`-long window along `dimension`, `step` apart, as a new last dim (a view).

    >>> import flowgrad as flow
    >>> flow.arange(5.0).unfold(0, 2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    x = self if self._data.ndim else self.reshape(1)
    d = _wrap_dim(dimension, x._data.ndim, "unfold")
    length = x._data.shape[d]
    if size < 0 or size > length:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is {length} but "
                           f"size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    out = _unfold_dim(x, dim=d, size=int_arg(size, "unfold", "size", 3),
                      step=int_arg(step, "unfold", "step", 4))
    # a 0-d tensor has one window: torch returns it alone, shape (size,)
    return out if self._data.ndim else out[0]


Tensor.unfold = _tensor_unfold
