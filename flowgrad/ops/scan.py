"""Scans along one dim: cumsum, cumprod, cummax, cummin.

cumsum's gradient is a reversed cumsum (the op carries a `reverse` flag, so its rule is
itself); cumprod divides by the input where it can and falls back to a division-free form
when the input holds zeros; cummax/cummin send each gradient to the index that won.

>>> import flowgrad as flow
>>> x = flow.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> flow.cumsum(x, 0).sum().backward(); x.grad
tensor([3., 2., 1.])
"""
from __future__ import annotations

import math

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..autograd.interpreter import varies_per_run
from ..device import array_module
from ..func.batched import every_example
from ..return_types import values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .complex import conj
from .creation import eye as _eye
from .elementwise import where
from .halfprec import HALF
from .registry import op

__all__ = ["cumsum", "cumprod", "cummax", "cummin"]



def _scan_input(input, dim, dtype, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(input).__name__}")
    x = input.to(dtype) if dtype is not None else input
    if dtype is None and x._data.dtype.kind in "biu":  # torch scans integers in int64
        x = x.to(_dt.int64)
    elif x._data.dtype.kind == "b" and x._data.ndim and x._data.size:
        # dtype=bool (or out= a bool tensor): torch's kernel refuses once it runs (a 0-d or
        # empty input is copied)
        raise NotImplementedError(f"{name}(): not implemented for dtype bool (as torch's "
                                  f"\"{name}_out_cpu\"); scan in an integer dtype and compare "
                                  f"with 0")
    return x, _wrap_dim(dim, x._data.ndim, name)


# ---- gather / scatter along one dim: the rules of index-returning ops (max/min with a dim,
# cummax/cummin, mode) ---------------------------------------------------------------------------
# The index is an op input (an int64 tensor shaped like the result), not an attribute, so a
# trace replays the op on new indices.
def _along_index(xp, index, dim):
    """A full index tuple that addresses `index` (positions along `dim`) in its target."""
    grids = list(xp.indices(index.shape, sparse=True))
    grids[dim] = index
    return tuple(grids)


@op("select_along", jvp="linear", save="inputs[1]")
def _select_along(xp, x, index, *, dim):
    return xp.take_along_axis(x, index, dim)


@_select_along.grad
def select_along_backward(ctx, dy):
    index = ctx.inputs[1]
    return _select_along_backward(dy, index, dim=ctx.dim, shape=ctx.input_shapes[0]), None


@op("select_along_backward", jvp="linear", save="inputs[1]")
def _select_along_backward(xp, dy, index, *, dim, shape):
    dx = xp.zeros(shape, dy.dtype)
    xp.add.at(dx, _along_index(xp, index, dim), dy)  # repeated positions (cummax) add up
    return dx


@_select_along_backward.grad
def select_along_backward_backward(ctx, ddx):
    return _select_along(ddx, ctx.inputs[1], dim=ctx.dim), None


def select_along(x, index, dim):
    """x gathered at `index` (an int64 tensor shaped like the result) along `dim`."""
    return _select_along(x, index, dim=dim)


# ---- a 0-d input: the value itself, at index 0 -------------------------------------------------
# max/sort/cumprod/... of a 0-d input is the value itself, through a node that saves what
# torch's saves there, so a later in-place write or a second backward without retain_graph
# raises as torch's does: its indices (max, sort, topk, median, mode...: nothing of the user's,
# yet the node has saved state), the input (cummax, cummin), input and result (cumprod,
# logcumsumexp). `of` names the op, for the node's name.
def _zero_dim_kernel(xp, x, *, of):
    return x.copy()


def zero_dim_backward(ctx, dy):
    return dy


zero_dim_value = op("zero_dim_value", jvp="linear", save="attrs", complex=True)(_zero_dim_kernel)
zero_dim_of_input = op("zero_dim_of_input", jvp="linear", save="inputs",
                       complex=True)(_zero_dim_kernel)
zero_dim_of_result = op("zero_dim_of_result", jvp="linear", save="inputs outputs",
                        complex=True)(_zero_dim_kernel)
zero_dim_value.grad(zero_dim_backward)
zero_dim_of_input.grad(zero_dim_backward)
zero_dim_of_result.grad(zero_dim_backward)


def of_zero_dim(op_name, input):
    """The (values, indices) result of `op_name` on a 0-d input: the value, at index 0."""
    index = Tensor._wrap(array_module(input._data).zeros((), _dt.int64.np))
    value = (zero_dim_of_input if op_name in ("cummax", "cummin") else zero_dim_value)
    return values_indices(op_name, value(input, of=op_name), index)


def with_rule_indices(vals, idx, returned=True):
    """A (values, indices) kernel's result plus the indices for its rule (an aux array, never
    version-checked): the op saves nothing else, so an in-place write to the input or the
    values stays legal as in torch, which saves only the indices. When the caller gets the
    indices (`returned`), the rule reads a private copy: a write to the returned indices
    leaves the gradient as the forward saw it (torch refuses that backward)."""
    return vals, idx, (idx.copy() if returned else idx)


def index_output_grad(ctx, dy, _):
    """Gradient of (values, indices) ops along `ctx.dim`: each value's gradient goes to its
    index (`ctx.aux[0]`, see with_rule_indices)."""
    idx = ctx.aux[0]
    shape, dim = ctx.input_shapes[0], ctx.dim
    if not getattr(ctx, "keepdim", True):  # (cummax/cummin keep every dim)
        idx, dy = idx.unsqueeze(dim), dy.unsqueeze(dim)
    return _select_along_backward(dy, idx, dim=dim, shape=shape)


# ---- cumsum ----------------------------------------------------------------------------------
_WIDER = {"f": "d", "F": "D"}  # the accumulator torch's CPU scans use for these dtypes


def _accumulate(xp, scan, x, dim):
    """x scanned in torch's CPU accumulator (its acc_type), each running value rounded to
    x's dtype: double for float32 and complex64 (NumPy's float32 running sum of a hundred
    thousand 0.1s was 7e-4 off), float32 for half precision (in double, 12 of 20000 float16
    running sums came out a unit in the last place off torch's), an int32 scan in int32."""
    if x.dtype in HALF:
        return scan(x.astype(xp.float32), axis=dim, dtype=xp.float32).astype(x.dtype)
    wide = _WIDER.get(x.dtype.char)
    return scan(x, axis=dim, dtype=x.dtype) if wide is None else \
        scan(x, axis=dim, dtype=wide).astype(x.dtype)


@op("cumsum", jvp="linear", layout="contiguous")
def _cumsum(xp, x, *, dim, reverse):
    # floats: the ufunc's accumulate, not xp.cumsum, which runs through NumPy's Python code
    # (fromnumeric.py), where an inf - inf would warn out of reach of flowgrad's filter
    scan = xp.add.accumulate if x.dtype.kind in "fV" else xp.cumsum
    if reverse:
        x = xp.flip(x, dim)
    y = _accumulate(xp, scan, x, dim)
    if x.dtype.kind in "fcV":  # torch's running sum starts at +0.: a -0. prefix sums to +0.
        y += xp.zeros((), y.dtype)
    return xp.flip(y, dim) if reverse else y



@_cumsum.grad
def cumsum_backward(ctx, dy):
    return _cumsum(dy, dim=ctx.dim, reverse=not ctx.reverse)


@tensor_method()
def cumsum(input, dim, *, dtype=None):
    """Running sum along `dim`.

    >>> import flowgrad as flow
    >>> flow.cumsum(flow.tensor([1, 2, 3]), dim=0)
    tensor([1, 3, 6])
    """
    x, d = _scan_input(input, dim, dtype, "cumsum")
    if x._data.ndim == 0:
        return x.clone()
    return _cumsum(x, dim=d, reverse=False)


# ---- cumprod ---------------------------------------------------------------------------------
@op("cumprod", save="inputs outputs", complex=True, layout="contiguous")
def _cumprod(xp, x, *, dim):
    scan = xp.multiply.accumulate if x.dtype.kind in "fV" else xp.cumprod
    if x.dtype.kind == "c" and x.shape[dim]:
        # torch's running product starts at 1: 1 * (inf + 0j) is inf + nanj
        x = x.copy()
        x[(slice(None),) * dim + (slice(0, 1),)] *= 1
    return _accumulate(xp, scan, x, dim)


@_cumprod.grad
def cumprod_backward(ctx, dy):
    (x,), y, dim = ctx.inputs, ctx.out, ctx.dim
    shape = ctx.input_shapes[0]
    if math.prod(shape) <= 1 or shape[dim] == 1:  # y is x itself (torch's: grad, not y / x)
        return dy
    x, y = conj(x), conj(y)  # torch's convention for complex; the identity for real
    # (the division, when x has no zero; a compiled plan, whose later inputs may have zeros,
    # always takes the exact form)
    if not varies_per_run(x):
        if every_example(x != 0):  # (under vmap: the division only if no example has a 0)
            # dx_i = sum_{k >= i} dy_k y_k / x_i
            return _cumsum(dy * y, dim=dim, reverse=True) / x
        if not grad_mode.is_grad_enabled():  # first order: torch's O(n) rule, inf/nan alike
            return _cumprod_grad_first_order(x, y, dy, dim)
    return _cumprod_grad_with_zeros(x, dy, dim)


def _cumprod_grad_first_order(x, y, dy, dim):
    """torch's first-order cumprod gradient for an x with zeros: before the first zero z1,
    the reversed cumsum of dy * y over x; at z1, prod(x[:z1]) * sum over [z1, z2) of dy_k
    prod(x[z1 + 1:k + 1]); after it, 0."""
    n = x.shape[dim]
    seen = _cumsum((x == 0).to(_dt.int64), dim=dim, reverse=False)  # zeros up to here
    before, first_run = seen == 0, seen == 1
    first = (x == 0) & first_run
    dx = where(before, _cumsum(where(before, dy * y, 0.0), dim=dim, reverse=True) / x, 0.0)
    run = _cumprod(where(first_run & ~first, x, 1.0), dim=dim)
    lead = _cumprod(where(before, x, 1.0), dim=dim).narrow(dim, n - 1, 1)  # prod(x[:z1])
    at_first = (run * where(first_run, dy, 0.0)).sum(dim, keepdim=True) * lead
    return where(first, at_first, dx)


def _cumprod_grad_with_zeros(x, dy, dim):
    """dx_i = sum_{k >= i} dy_k prod_{j <= k, j != i} x_j, without dividing by x: build the
    n x n table of products with x_i replaced by 1 (O(n^2), only taken when x has zeros)."""
    nd = x.ndim
    xl = x.transpose(dim, -1) if dim != nd - 1 else x
    gl = dy.transpose(dim, -1) if dim != nd - 1 else dy
    n = xl.shape[-1]
    eye = _eye(n, dtype=_dt.bool)
    table = where(eye, 1.0, xl.unsqueeze(-2).expand(*xl.shape[:-1], n, n))
    upper = x.new_ones((n, n), dtype=_dt.bool).triu()  # k >= i
    # selected, not multiplied by the 0/1 mask: an inf running product at k < i gives 0 there
    dx = (where(upper, _cumprod(table, dim=nd), 0.0) * gl.unsqueeze(-2)).sum(-1)
    return dx.transpose(dim, -1) if dim != nd - 1 else dx


@tensor_method()
def cumprod(input, dim, *, dtype=None):
    """Running product along `dim`; the gradient is exact where the input has zeros.

    >>> import flowgrad as flow
    >>> flow.cumprod(flow.tensor([1.0, 2.0, 3.0]), dim=0)
    tensor([1., 2., 6.])
    """
    x, d = _scan_input(input, dim, dtype, "cumprod")
    if x._data.ndim == 0:
        return zero_dim_of_result(x, of="cumprod")
    return _cumprod(x, dim=d)


# ---- cummax / cummin -------------------------------------------------------------------------
def _running_extremum(xp, x, dim, ufunc):
    values = ufunc.accumulate(x, axis=dim)
    pos = xp.arange(x.shape[dim]).reshape((-1,) + (1,) * (x.ndim - dim - 1))
    # the latest position where x reached the running extreme (torch picks the last tie) or
    # was nan (torch's index moves to each nan, and stays once the extreme is nan)
    reached = x == values
    if x.dtype.kind in "fcV":  # (V: bfloat16)
        reached |= xp.isnan(x)
    hit = xp.where(reached, pos, 0)
    return values, xp.maximum.accumulate(hit, axis=dim).astype(xp.int64)


# (their input saved, unread: torch's nodes save self, so a write to it fails the backward)
@op("cummax", n_out=2, save="inputs", layout="contiguous")
def _cummax(xp, x, *, dim):
    return with_rule_indices(*_running_extremum(xp, x, dim, xp.maximum))


@op("cummin", n_out=2, save="inputs", layout="contiguous")
def _cummin(xp, x, *, dim):
    return with_rule_indices(*_running_extremum(xp, x, dim, xp.minimum))


# each running extreme's gradient goes to the index that won (summed where repeated)
_cummax.grad(index_output_grad)
_cummin.grad(index_output_grad)


def _cum_extremum(input, dim, fn, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): expected a Tensor, got {type(input).__name__}")
    d = _wrap_dim(dim, input._data.ndim, name)
    if input._data.ndim == 0:
        return of_zero_dim(name, input)
    if input._data.dtype.kind == "c":  # (torch's kernel runs for no element, as its loop)
        if input._data.size == 0:
            return values_indices(name, input.detach().clone(), input.new_empty(
                input.shape, dtype=_dt.int64))
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{_dt.TORCH_SCALAR_NAMES[input._data.dtype.name]}'; apply "
                                  f"it to .real, .imag or .abs()")
    return values_indices(name, *fn(input, dim=d))


@tensor_method()
def cummax(input, dim):
    """Running maximum along `dim`: (values, indices)."""
    return _cum_extremum(input, dim, _cummax, "cummax")


@tensor_method()
def cummin(input, dim):
    """Running minimum along `dim`: (values, indices)."""
    return _cum_extremum(input, dim, _cummin, "cummin")
