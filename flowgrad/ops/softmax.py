"""The softmax family: softmax, log_softmax, softmin and torch's _safe_softmax, each a fused
kernel with one rule (softmax's backward is one kernel too, composed of ops under
create_graph), and the row helpers the losses share (`row_max`, `_row_sums`).

>>> import flowgrad as flow
>>> flow.softmax(flow.tensor([0.0, 0.0]), dim=0)
tensor([0.5000, 0.5000])
"""
from __future__ import annotations

from .._warn import warn
from ..autograd import grad_mode
from ..blas import ROWS_MIN, fill_rows, rows_ready, vector_math, vector_math2, vector_ready
from ..errors import check_kernel_dtype as _check_kernel_dtype
from ..tensor import _wrap_dim, tensor_method
from .halfprec import HALF, in_float32
from .registry import op


def _row_sums(xp, a, dim):
    """a's sums along `dim` (keepdims); along a contiguous last dim by one BLAS gemv, as
    layer norm's: NumPy's reduction runs an inner loop per short row (attention's rows of 64:
    180 us against 18 on 512k values)."""
    if dim == a.ndim - 1 and a.size and a.dtype.char in "fd" and a.flags.c_contiguous:
        n = a.shape[-1]
        return xp.matmul(a.reshape(-1, n), xp.ones(n, a.dtype)).reshape(a.shape[:-1] + (1,))
    return a.sum(axis=dim, keepdims=True)


_SHORT_ROW = 16  # rows of at most this many values: their maxima by `row_max`'s columns


def row_max(xp, x, dim):
    """x's maxima along `dim` (keepdims; -inf along an empty dim). Short rows of a contiguous
    float array, along its last dim, from a transposed copy: one contiguous maximum per
    column, where NumPy's max runs an inner loop per row (a (2048, 10) batch of logits took
    118 us against 12, (128, 10) 9.4 against 2.9; from 32 values on, NumPy's is as fast)."""
    n = x.shape[-1] if x.ndim else 0
    if 0 < n <= _SHORT_ROW and dim in (-1, x.ndim - 1) and x.size > n and \
            x.dtype.char in "efd" and x.flags.c_contiguous:
        columns = xp.ascontiguousarray(x.reshape(-1, n).T)
        return xp.maximum.reduce(columns, axis=0).reshape(x.shape[:-1] + (1,))
    return x.max(axis=dim, keepdims=True, initial=-xp.inf)  # (initial: empty dims)


def _short_rows(x, dim):
    """x as a (rows, n) matrix when dim is its contiguous last dim and `fill_rows` pays."""
    if dim != x.ndim - 1 or x.size < ROWS_MIN:  # (and no reshape of an empty x)
        return None
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows_ready(rows) else None


@op("softmax", save="outputs", layout="contiguous")
@in_float32  # a half-precision input accumulates in float32, as torch
def _softmax(xp, x, *, dim):
    return _softmax_of(xp, x, dim)


def _softmax_of(xp, x, dim, peak=None):
    """softmax along dim; `peak`: x's maxima along dim (keepdims), when already known."""
    if peak is None:
        peak = row_max(xp, x, dim)
    rows = _short_rows(x, dim)
    if rows is not None:  # NumPy's broadcasts and exp, one thread each: by BLAS and VML
        e = xp.empty_like(rows)
        fill_rows(peak.reshape(-1), e)
        vector_math2("Sub", rows, e, e)
        vector_math("Exp", e, e, no_inf=True)  # (x - max: no +inf)
        scale = xp.empty_like(e)
        fill_rows(xp.reciprocal(_row_sums(xp, e, 1)).reshape(-1), scale)  # 1 / sum, as torch
        return vector_math2("Mul", e, scale, e).reshape(x.shape)
    e = xp.asarray(x - peak)  # (asarray: a 0-d difference is a scalar, and exp writes in place)
    xp.exp(e, out=e)
    e *= xp.reciprocal(_row_sums(xp, e, dim))  # times 1 / sum, as torch's kernel
    return e


@op("safe_softmax", save="outputs", layout="contiguous")
@in_float32
def _safe_softmax_op(xp, x, *, dim):
    """softmax, but 0 on a row whose every value is -inf (NaN in softmax): torch's
    _safe_softmax, the attention kernels' rule for a fully masked row. Its gradient is
    softmax's, from the output (torch's too: 0 * dy on such a row)."""
    peak = row_max(xp, x, dim)
    empty = peak == -xp.inf
    if not empty.any():  # (the usual case: one test on the row maxima)
        return _softmax_of(xp, x, dim, peak)
    y = _softmax_of(xp, xp.where(empty, xp.zeros((), x.dtype), x), dim)
    xp.copyto(y, xp.zeros((), y.dtype), where=empty)
    return y


@_softmax.grad
def softmax_backward(ctx, dy):
    y = ctx.out
    if not grad_mode.is_grad_enabled():  # plain backward: one kernel
        return _softmax_grad(y, dy, dim=ctx.dim)
    return y * (dy - (dy * y).sum(ctx.dim, keepdim=True))


_safe_softmax_op.grad(softmax_backward)


@op("softmax_grad", differentiable=False)  # (create_graph takes the composed form above)
@in_float32  # a half-precision input accumulates in float32, as torch
def _softmax_grad(xp, y, dy, *, dim):
    """softmax's plain backward y * (dy - sum(dy * y)), the sum by _row_sums."""
    rows = _short_rows(y, dim)
    if rows is not None and vector_ready(y, dy):  # as softmax's: by BLAS and VML
        d = dy.reshape(rows.shape)
        g = vector_math2("Mul", d, rows)
        fill_rows(_row_sums(xp, g, 1).reshape(-1), g)
        vector_math2("Sub", d, g, g)
        return vector_math2("Mul", g, rows, g).reshape(y.shape)
    g = xp.asarray(dy * y)  # (0-d: a scalar otherwise, and g is written in place)
    s = _row_sums(xp, g, dim)
    xp.subtract(dy, s, out=g)
    g *= y
    return g


@op("log_softmax", save="outputs", layout="contiguous")
@in_float32  # a half-precision input accumulates in float32, as torch
def _log_softmax(xp, x, *, dim):
    shifted = x - row_max(xp, x, dim)
    shifted -= xp.log(xp.exp(shifted).sum(axis=dim, keepdims=True))
    return shifted


@_log_softmax.grad
def log_softmax_backward(ctx, dy):
    y = ctx.out
    if y.dtype.np in HALF:  # torch's kernel: in float32, rounded once (in half precision
        # each of the four ops would round: 1e-2 off in float16)
        g = dy.float()
        return (g - y.float().exp() * g.sum(ctx.dim, keepdim=True)).to(dy.dtype)
    return dy - y.exp() * dy.sum(ctx.dim, keepdim=True)


def int_dim(dim, name):
    """`dim` of torch.softmax, Tensor.softmax, special.softmax and _safe_softmax (and their
    log_softmax): torch's parser takes an int only, where F.softmax picks an implicit dim for
    None."""
    if dim is None:
        raise TypeError(f"{name}(): argument 'dim' must be int, not NoneType; pass the dim "
                        f"(only F.{name} picks one for None)")
    return dim


def _softmax_dim(input, dim, dtype, name):
    if name == "softmin" and input._data.dtype.kind == "b":  # (before dtype=, as torch's)
        -input  # noqa: B018 - raises torch's error for negating a bool tensor
    if dtype is not None:
        input = input.to(dtype)
    _check_kernel_dtype(input, ("log_softmax" if name == "log_softmax" else "softmax")
                     + "_lastdim_kernel_impl")
    if dim is None:
        warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
             f"include dim=X as an argument.")
        dim = 0 if input._data.ndim in (0, 1, 3) else 1  # torch's legacy implicit choice
    return input, _wrap_dim(dim, input._data.ndim, name)


@tensor_method()
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, computed stably. `_stacklevel` (torch's F.softmax)
    is accepted and ignored.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.softmax(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    tensor([[0.0900, 0.2447, 0.6652]])
    """
    input, d = _softmax_dim(input, dim, dtype, "softmax")
    return _softmax(input, dim=d)


def _safe_softmax(input, dim, dtype=None):
    """torch._safe_softmax: softmax along dim, with 0 (not NaN) on a slice whose every
    value is -inf, as attention gives a fully masked row.

    >>> import flowgrad as flow
    >>> flow._safe_softmax(flow.tensor([[0.0, 0.0], [-float("inf"), -float("inf")]]), 1)
    tensor([[0.5000, 0.5000],
            [0.0000, 0.0000]])
    """
    input, d = _softmax_dim(input, int_dim(dim, "_safe_softmax"), dtype, "_safe_softmax")
    return _safe_softmax_op(input, dim=d)


@tensor_method()
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """log(softmax(x)) along dim, stable for large |x|. `_stacklevel` is accepted and
    ignored, as torch's F.log_softmax.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.log_softmax(flow.tensor([1.0, 2.0, 3.0]), dim=0)
    tensor([-2.4076, -1.4076, -0.4076])
    """
    input, d = _softmax_dim(input, dim, dtype, "log_softmax")
    return _log_softmax(input, dim=d)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along dim (`_stacklevel` accepted and ignored, as torch)."""
    input, d = _softmax_dim(input, dim, dtype, "softmin")
    return _softmax(-input, dim=d)
