"""Reductions: sum, mean, prod, max/min (values and indices), amax/amin, argmax/argmin,
logsumexp, all/any/count_nonzero (and `sum_to`, the engine's one un-broadcasting step, from
shape.py, beside expand: it is expand's adjoint).
Statistics (var, std, median, mode) live in stats.py, scans (cumsum, cummax) in scan.py.

>>> import flowgrad as flow
>>> x = flow.tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
>>> x.max(dim=1).values.sum().backward(); x.grad
tensor([[0., 1.],
        [1., 0.]])
"""
from __future__ import annotations

import builtins
import math

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..autograd.interpreter import varies_per_run
from ..errors import not_a_tensor
from ..func.batched import every_example
from ..return_types import values_indices
from ..tensor import Tensor, _wrap_dim, tensor_method
from .complex import conj
from .elementwise import maximum, minimum, where
from .halfprec import HALF, in_float32
from .out_arg import with_out
from .registry import op
from .scan import cumprod, index_output_grad, of_zero_dim, with_rule_indices
from .shape import _expand, _reshape, cat, sum_to
from .sort import refuse_complex_order
from .summation import add_reduce

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "sum_to",
           "logsumexp", "all", "any", "count_nonzero"]



class _NoDim:
    """The default of `dim` where torch's reduction has an overload without dim, which takes
    no keepdim: sum, mean, prod, max, min, median, nanmedian (`NO_DIM`)."""
    __slots__ = ()

    def __repr__(self):
        return "None"


NO_DIM = _NoDim()


def dim_or_all(dim, keepdim, name, none_is_all=False):
    """(dim as the op reads it, None for every element; keepdim as a bool), with torch's
    TypeErrors: keepdim given (True or False; None: not given) without a dim (the overload of
    all elements takes none: sum(x, keepdim=True) is one, sum(x, None, True) is not), and an
    explicit dim=None where torch's dim overload takes an int only (prod, max, min, median,
    nanmedian; `none_is_all`: sum and mean take None)."""
    if dim is NO_DIM:
        if keepdim is not None:
            raise TypeError(f"{name}(): keepdim needs a dim (torch's {name} of all elements "
                            f"takes no keepdim); pass dim=" +
                            ("None for all dims" if none_is_all else ", or reshape the result"))
        return None, False
    if dim is None and not none_is_all:
        raise TypeError(f"{name}(): argument 'dim' must be int, not NoneType; leave dim out "
                        f"to reduce over every element")
    return dim, bool(keepdim)


def normalize_dims(dim, ndim, op_name):
    """dim (None, int or sequence) -> sorted tuple of non-negative axes."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    axes = set()
    for d in dim if isinstance(dim, (tuple, list)) else (dim,):
        a = _wrap_dim(d, ndim, op_name)  # (a 0-d tensor takes dim 0 or -1, both dim 0)
        if a in axes:
            raise RuntimeError(f"{op_name}: dim {a} appears multiple times in the list of dims "
                               f"{tuple(dim)}; name each dim once")
        axes.add(a)
    return () if ndim == 0 else tuple(sorted(axes))  # (0-d: nothing to reduce)


def keepdim_shape(shape, axes):
    """`shape` with the dims in `axes` set to 1 (the shape a keepdim=True reduction returns)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def expand_reduced(dy, shape, axes):
    """Broadcast a reduced gradient back over the reduced axes of `shape`."""
    kd = keepdim_shape(shape, axes)
    if dy._data.shape != kd and dy._data.ndim:  # (a 0-d dy broadcasts as it is)
        dy = _reshape(dy, shape=kd)
    return _expand(dy, shape=tuple(shape))


# ---- sum and mean ------------------------------------------------------------------------------
# The kernels call the ufuncs' reduce, not x.sum() / x.mean(): those run through NumPy's own
# Python code (numpy/_core/_methods.py), so an inf - inf or an empty mean would warn from a
# NumPy frame, out of reach of flowgrad's filter for RuntimeWarnings raised from its modules.
@op("sum", jvp="linear", layout="contiguous")
def _sum(xp, x, *, axes, keepdim):
    return add_reduce(xp, x, axes, keepdim)  # (half precision: in float32, as torch)


@_sum.grad
def sum_backward(ctx, dy):
    return expand_reduced(dy, ctx.input_shapes[0], ctx.axes)


@op("mean", jvp="linear", layout="contiguous")
def _mean(xp, x, *, axes, keepdim, dtype=None):
    if dtype is not None:  # a half result of another dtype: summed in float32, as torch's CPU
        return mean_array(xp, x.astype(xp.float32), axes, keepdim).astype(dtype)
    return mean_array(xp, x, axes, keepdim)


def mean_array(xp, x, axes, keepdim):
    """x.mean(axis=axes, keepdims=keepdim), same values and types, for kernels."""
    if x.dtype.kind == "V" and x.dtype.name == "bfloat16":  # in float32, as torch (see _sum)
        return mean_array(xp, x.astype(xp.float32), axes, keepdim).astype(x.dtype)
    if x.dtype == xp.float16:  # NumPy accumulates float16 in float32: keep its x.mean
        with xp.errstate(divide="ignore", invalid="ignore"):
            return x.mean(axis=axes, keepdims=keepdim)
    # x.mean's own steps: the sum, divided in place by the count (empty: 0 / 0 = nan, as torch)
    count = math.prod(x.shape[a] for a in axes)
    total = add_reduce(xp, x, axes, keepdim)
    if isinstance(total, xp.ndarray):
        return xp.true_divide(total, count, out=total, casting="unsafe")
    return total.dtype.type(total / count)


@_mean.grad
def mean_backward(ctx, dy):
    shape = ctx.input_shapes[0]
    count = math.prod(shape[a] for a in ctx.axes)
    # divided after the expand, as torch's (sum_backward / numel): the gradient is then a
    # dense tensor, which an in-place write to autograd.grad's result may change
    dx = expand_reduced(dy, shape, ctx.axes) / count
    if ctx.attrs.get("dtype") is not None:  # (in dy's half dtype, then x's, as torch's)
        return dx.to(_dt.from_numpy_dtype(ctx.input_infos[0][1]))
    return dx


def _sum_dtype(x, dtype):
    if dtype is not None:
        return x.to(dtype)
    if x._data.dtype.kind in "biu":  # torch sums integers and bools in int64
        return x.to(_dt.int64)
    return x


@tensor_method()
def sum(input, dim=NO_DIM, keepdim=None, *, dtype=None):
    """Sum over `dim` (an int, a tuple, or None or left out for all; keepdim needs a dim).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> flow.sum(x)
    tensor(10.)
    >>> x.sum(dim=0)
    tensor([4., 6.])
    >>> x.sum(1, keepdim=True)
    tensor([[3.],
            [7.]])
    """
    try:
        x = _sum_dtype(input, dtype)
    except AttributeError:
        not_a_tensor("sum", input)
    dim, keepdim = dim_or_all(dim, keepdim, "sum", True)
    axes = normalize_dims(dim, x._data.ndim, "sum")
    if x._data.dtype.kind == "b":  # a sum in bool (dtype=bool, out= a bool tensor): torch's
        return _any(x, axes=axes, keepdim=keepdim)  # True + True is True: any
    return _sum(x, axes=axes, keepdim=keepdim)


@tensor_method()
def mean(input, dim=NO_DIM, keepdim=None, *, dtype=None):
    """Mean over `dim`; floating inputs only, as torch.

    >>> import flowgrad as flow
    >>> flow.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(dim=1)
    tensor([1.5000, 3.5000])
    """
    dim, keepdim = dim_or_all(dim, keepdim, "mean", True)
    if dtype is not None:
        dtype = _dt.as_dtype(dtype)
        if dtype in (_dt.float16, _dt.bfloat16) and isinstance(input, Tensor) and \
                input.dtype != dtype and input._data.dtype.kind in "fVbiu":
            # torch's CPU mean into a half dtype sums x cast to float32, not to the half
            # dtype (70000 in a float64 x stays finite)
            return _mean(input, axes=normalize_dims(dim, input._data.ndim, "mean"),
                         keepdim=keepdim, dtype=dtype.np)
    x = input.to(dtype) if dtype is not None else input
    try:
        kind = x._data.dtype.kind
    except AttributeError:
        not_a_tensor("mean", input)
    if kind not in "fVc":
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating "
            f"point or complex dtype. Got: {x.dtype.name}; call .float() first or pass dtype=")
    return _mean(x, axes=normalize_dims(dim, x._data.ndim, "mean"), keepdim=keepdim)


# ---- max / min -------------------------------------------------------------------------------
@op("amax", save="inputs outputs", layout="contiguous")
def _amax(xp, x, *, axes, keepdim, whole=False):
    return x.max(axis=axes, keepdims=keepdim)


@op("amin", save="inputs outputs", layout="contiguous")
def _amin(xp, x, *, axes, keepdim, whole=False):
    return x.min(axis=axes, keepdims=keepdim)


@op("extremum_hits", differentiable=False)
def _extremum_hits(xp, x, y, *, axes, whole):
    """Where x holds its reduction's result y: amax/amin's 1/0 in x's dtype (y broadcast back
    over `axes`); `whole` (max(x) / min(x)): True/False, and a nan y hits the nans."""
    if whole:
        return x != x if y != y else x == y
    return (x == y.reshape(keepdim_shape(x.shape, axes))).astype(x.dtype)


def _extremum_grad(ctx, dy):
    """Gradient of amax/amin: shared evenly between tied extremes, as torch does (torch's
    amax multiplies by the mask: an inf dy gives nan at the others, as here).

    `whole` (max(x) / min(x) of every element): torch's evenly_distribute_backward, which
    fills the hits (the nans when the result is nan) and leaves exactly 0 elsewhere."""
    (x,), y = ctx.inputs, ctx.out
    shape, whole = ctx.input_shapes[0], bool(ctx.attrs.get("whole"))
    hit = _extremum_hits(x, y, axes=ctx.axes, whole=whole)
    if whole:
        share = dy / count_nonzero(hit)  # dy is 0-d, as the result is
        return where(hit, share if share.ndim == 0 else share.reshape(()), 0.0)
    count = hit.sum(dim=ctx.axes, keepdim=True)
    return expand_reduced(dy, shape, ctx.axes) * (hit / count)


_amax.grad(_extremum_grad)
_amin.grad(_extremum_grad)


def _check_nonempty(x, axes, name, whole=False):
    if whole and x._data.size == 0:  # no dim given: torch's RuntimeError, not IndexError
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           f"== 0. Specify the reduction dim with the 'dim' argument.")
    if builtins.any(x._data.shape[a] == 0 for a in axes):  # (2, 0) over dim 0 is fine: (0,)
        raise IndexError(f"{name}(): Expected reduction dim to have non-zero size; input has "
                         f"shape {tuple(x.shape)}")


def _no_dims(dim):
    return isinstance(dim, (tuple, list)) and len(dim) == 0


@tensor_method()
def amax(input, dim=(), keepdim=False):
    """Maximum over `dim` (all dims when empty); ties share the gradient.

    >>> import flowgrad as flow
    >>> flow.amax(flow.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=0)
    tensor([3., 5.])
    """
    axes = normalize_dims(dim, input._data.ndim, "amax")
    _check_nonempty(input, axes, "amax", whole=dim is None or _no_dims(dim))
    return _amax(input, axes=axes, keepdim=keepdim)


@tensor_method()
def amin(input, dim=(), keepdim=False):
    """Minimum over `dim` (all dims when empty); ties share the gradient."""
    axes = normalize_dims(dim, input._data.ndim, "amin")
    _check_nonempty(input, axes, "amin", whole=dim is None or _no_dims(dim))
    return _amin(input, axes=axes, keepdim=keepdim)


def _pick(xp, x, arg, dim, keepdim):
    idx = xp.expand_dims(arg(x, axis=dim), dim)
    vals = xp.take_along_axis(x, idx, dim)
    if not keepdim:
        vals, idx = vals.squeeze(dim), idx.squeeze(dim)
    return with_rule_indices(vals, idx)


@op("max_dim", n_out=2)
def _max_dim(xp, x, *, dim, keepdim):
    return _pick(xp, x, xp.argmax, dim, keepdim)


@op("min_dim", n_out=2)
def _min_dim(xp, x, *, dim, keepdim):
    return _pick(xp, x, xp.argmin, dim, keepdim)


def _index_grad(ctx, dy, d_indices):
    """The gradient goes to the selected index only, as torch's (which saves only those)."""
    return index_output_grad(ctx, dy, d_indices)


_max_dim.grad(_index_grad)
_min_dim.grad(_index_grad)


def _max_min(input, dim, keepdim, other, name):
    # (torch's overloads: keepdim only with an int dim; max(x) and max(x, y) keep none)
    if isinstance(dim, Tensor) or other is not None:
        if keepdim is not None:
            raise TypeError(f"{name}(): keepdim needs an int dim (torch's {name} of two tensors "
                            f"takes no keepdim)")
        return (maximum if name == "max" else minimum)(input, dim if other is None else other)
    dim, keepdim = dim_or_all(dim, keepdim, name)
    if dim is None:
        axes = tuple(range(input._data.ndim))
        _check_nonempty(input, axes, name, whole=True)
        return (_amax if name == "max" else _amin)(input, axes=axes, keepdim=False, whole=True)
    d = _wrap_dim(dim, input._data.ndim, name)
    _check_nonempty(input, (d,) if input._data.ndim else (), name)
    refuse_complex_order(input, name)
    if input._data.ndim == 0:
        return of_zero_dim(name, input)
    fn = _max_dim if name == "max" else _min_dim
    values, indices = fn(input, dim=d, keepdim=keepdim)
    return values_indices(name, values, indices.to(_dt.int64))


@tensor_method()
def max(input, dim=NO_DIM, keepdim=None, *, other=None):
    """max(x): the largest element; max(x, dim): (values, indices); max(x, y): maximum.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> flow.max(x)
    tensor(5.)
    >>> values, indices = flow.max(x, dim=1)
    >>> values, indices
    (tensor([5., 3.]), tensor([1, 0]))
    """
    return _max_min(input, dim, keepdim, other, "max")


@tensor_method()
def min(input, dim=NO_DIM, keepdim=None, *, other=None):
    """min(x): the smallest element; min(x, dim): (values, indices); min(x, y): minimum.

    >>> import flowgrad as flow
    >>> flow.min(flow.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=0).indices
    tensor([0, 1])
    """
    return _max_min(input, dim, keepdim, other, "min")


@op("argmax", differentiable=False)
def _argmax(xp, x, *, dim, keepdim):
    if dim is None:
        r = xp.argmax(x)
        return xp.reshape(r, (1,) * x.ndim) if keepdim else xp.asarray(r)
    r = xp.argmax(x, axis=dim)
    return xp.expand_dims(r, dim) if keepdim else r


@op("argmin", differentiable=False)
def _argmin(xp, x, *, dim, keepdim):
    if dim is None:
        r = xp.argmin(x)
        return xp.reshape(r, (1,) * x.ndim) if keepdim else xp.asarray(r)
    r = xp.argmin(x, axis=dim)
    return xp.expand_dims(r, dim) if keepdim else r


def _check_empty_arg(input, d, name):
    """torch's IndexError for an argmax/argmin with nothing to pick from (NumPy's is a
    ValueError)."""
    if input._data.size == 0 and (d is None or input._data.shape[d] == 0):
        raise IndexError(f"{name}(): Expected reduction dim "
                         f"{'to be specified for input.numel() == 0' if d is None else d}"
                         f"{'' if d is None else ' to have non-zero size'}.")


@tensor_method()
def argmax(input, dim=None, keepdim=False):
    """Index of the largest element (over all elements when dim is None); int64.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[1.0, 5.0], [3.0, 2.0]])
    >>> flow.argmax(x)
    tensor(1)
    >>> flow.argmax(x, dim=1)
    tensor([1, 0])
    """
    if input._data.dtype.kind == "b":
        raise RuntimeError(f"argmax(): does not support bool input (shape {tuple(input.shape)})"
                           f"; convert it with .int() first")
    d = None if dim is None else _wrap_dim(dim, input._data.ndim, "argmax")
    d = None if input._data.ndim == 0 else d  # dim 0 of a 0-d tensor: the element itself
    _check_empty_arg(input, d, "argmax")
    return _argmax(input, dim=d, keepdim=keepdim).to(_dt.int64)


@tensor_method()
def argmin(input, dim=None, keepdim=False):
    """Index of the smallest element; int64.

    >>> import flowgrad as flow
    >>> flow.argmin(flow.tensor([[1.0, 5.0], [3.0, 2.0]]), dim=1)
    tensor([0, 1])
    """
    if input._data.dtype.kind == "b":
        raise RuntimeError(f"argmin(): does not support bool input (shape {tuple(input.shape)})"
                           f"; convert it with .int() first")
    d = None if dim is None else _wrap_dim(dim, input._data.ndim, "argmin")
    d = None if input._data.ndim == 0 else d  # dim 0 of a 0-d tensor: the element itself
    _check_empty_arg(input, d, "argmin")
    return _argmin(input, dim=d, keepdim=keepdim).to(_dt.int64)


# ---- prod ----------------------------------------------------------------------------------
@op("prod", save="inputs outputs", complex=True, layout="contiguous")
@in_float32  # a half-precision input accumulates in float32, as torch
def _prod(xp, x, *, axes, keepdim, whole=False):
    return xp.multiply.reduce(x, axis=axes, keepdims=keepdim,
                              # (see add_reduce; bool: dtype=torch.bool asked for it)
                              dtype=x.dtype if x.dtype.kind in "iub" else None)


@_prod.grad
def prod_backward(ctx, dy):
    (x,), y = ctx.inputs, ctx.out
    x, y = conj(x), conj(y)  # torch's convention for complex; the identity for real
    shape, axes = ctx.input_shapes[0], ctx.axes
    g = expand_reduced(dy, shape, axes)
    if not shape:  # a 0-d input: the product is x itself (torch's: grad, not grad * y / x)
        return g
    # (the division, when x has no zero; a compiled plan, whose later inputs may have zeros,
    # always takes the exact form)
    if not varies_per_run(x):
        # (every example's: under vmap the division only if no example has a zero)
        if every_example(x != 0):
            return g * (expand_reduced(y, shape, axes) / x)
        if ctx.whole and not grad_mode.is_grad_enabled() and every_example(
                (x == 0).sum() > 1):
            # torch's first-order rule for prod(): two zeros make every gradient 0 (even that
            # of a nan or inf element, where the product of the others is 0 * nan)
            return g.new_zeros(tuple(shape))
    return g * _prod_of_others(x, axes)  # a zero in x: y / x would be 0 / 0


def _prod_of_others(x, axes):
    """For each element, the product of the other elements of its reduction group, without
    division: exclusive cumulative products from the left and from the right."""
    nd = x.ndim
    rest = tuple(i for i in range(nd) if i not in axes)
    perm = rest + tuple(axes)
    xp_ = x.permute(*perm) if perm != tuple(range(nd)) else x
    lead = tuple(xp_.shape[:len(rest)])
    flat = xp_.reshape(*lead, -1)
    one = x.new_ones(lead + (1,))  # not x * 0 + 1: inf * 0 is nan
    left = cumprod(cat([one, flat[..., :-1]], dim=-1), -1)
    right = cumprod(cat([one, flat[..., 1:].flip(-1)], dim=-1), -1).flip(-1)
    others = (left * right).reshape(xp_.shape)
    if perm == tuple(range(nd)):
        return others
    return others.permute(*sorted(range(nd), key=perm.__getitem__))


@tensor_method()
def prod(input, dim=NO_DIM, keepdim=None, *, dtype=None):
    """Product over `dim` (one int, or left out for all); zeros get torch's gradient.

    >>> import flowgrad as flow
    >>> flow.prod(flow.tensor([[1.0, 2.0], [3.0, 4.0]]), dim=1)
    tensor([ 2., 12.])
    """
    try:
        x = _sum_dtype(input, dtype)
    except AttributeError:
        not_a_tensor("prod", input)
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}; "
                        f"reduce one dim at a time")
    dim, keepdim = dim_or_all(dim, keepdim, "prod")
    return _prod(x, axes=normalize_dims(dim, x._data.ndim, "prod"), keepdim=keepdim,
                 whole=dim is None)


# ---- logsumexp -----------------------------------------------------------------------------
@op("logsumexp", save="inputs outputs", layout="contiguous", complex=True)
def _logsumexp(xp, x, *, axes, keepdim):
    # complex: shifted by the largest real part, as torch (the log is the principal one)
    m = xp.real(x).max(axis=axes, keepdims=True, initial=-xp.inf)  # empty dims give -inf
    m = xp.where(xp.isfinite(m), m, xp.zeros((), m.dtype))  # all -inf (or an inf) rows: by 0
    with xp.errstate(divide="ignore", invalid="ignore"):  # all -inf: log(0) = -inf, as torch
        if x.dtype in HALF:  # torch's composite: each op rounded to x's dtype, the sum
            # accumulated in float32
            f32 = xp.float32
            e = xp.exp((x - m).astype(f32)).astype(x.dtype).astype(f32)
            s = e.sum(axis=axes, keepdims=True).astype(x.dtype)
            y = xp.log(s.astype(f32)).astype(x.dtype) + m
        else:
            y = xp.log(xp.exp(x - m).sum(axis=axes, keepdims=True)) + m
    return y if keepdim else y.squeeze(axes)


@_logsumexp.grad
def logsumexp_backward(ctx, dy):
    (x,), y = ctx.inputs, ctx.out
    shape = ctx.input_shapes[0]
    # d/dx logsumexp = softmax(x) = exp(x - y): never overflows since x <= y (complex: its
    # conjugate, torch's convention)
    soft = (x - expand_reduced(y, shape, ctx.axes)).exp()
    return expand_reduced(dy, shape, ctx.axes) * (conj(soft) if x.is_complex() else soft)


def float_input(input, name, complex_ok=False):
    """`input` as a float tensor: ints and bools promote to the default float dtype; a
    complex one is refused (a cast would drop its imaginary part without a word) unless
    `complex_ok` (the op takes it as it is)."""
    kind = input._data.dtype.kind
    if kind == "c" and not complex_ok:
        raise RuntimeError(f"{name}: complex input (dtype {input.dtype}, shape "
                           f"{tuple(input.shape)}) is not supported yet; apply it to .real "
                           f"and .imag, or .abs(), explicitly")
    return input if kind in "fVc" else input.to(_dt.get_default_dtype())


@tensor_method()
def logsumexp(input, dim, keepdim=False, *, out=None):
    """log(sum(exp(x))) over `dim`, computed stably (|x| ~ 1e4 is fine).

    >>> import flowgrad as flow
    >>> flow.logsumexp(flow.tensor([[0.0, 0.0], [100.0, 100.0]]), dim=1)
    tensor([  0.6931, 100.6931])
    """
    if out is not None:
        return with_out(lambda t: _logsumexp_into(t, dim, keepdim, out.dtype), out, (input,),
                        "logsumexp")
    x = float_input(input, "logsumexp", complex_ok=True)
    return _logsumexp(x, axes=_logsumexp_axes(x, dim, keepdim), keepdim=keepdim)


def _logsumexp_axes(x, dim, keepdim):
    """logsumexp's axes, with torch's errors: dim=None (a TypeError: torch's dim is a list of
    ints), and dim=() without keepdim on a non-empty tensor with dims (torch's composite adds
    the kept-dims maxima to the squeezed sum: a RuntimeError)."""
    if dim is None:
        raise TypeError("logsumexp(): argument 'dim' must be tuple of ints, not NoneType; "
                        "pass every dim, tuple(range(x.ndim)), to reduce them all")
    if isinstance(dim, (tuple, list)) and not dim and not keepdim and x._data.size \
            and x._data.ndim:
        raise RuntimeError(f"logsumexp(): output with shape [] doesn't match the broadcast "
                           f"shape {[1] * x._data.ndim} (dim=() reduces every dim of shape "
                           f"{tuple(x.shape)}, as torch); pass the dims or keepdim=True")
    return normalize_dims(dim, x._data.ndim, "logsumexp")


def _logsumexp_into(input, dim, keepdim, dtype):
    """logsumexp for an out of `dtype`: where that is another floating or complex dtype than
    a real input's, torch's out= form sums the exponentials into out, in its dtype, and
    takes the log there (logsumexp of int64 into complex128: exp in float32, the rest in
    double; the float32 result cast would be 1e-7 off it). A complex input into a real out:
    the sum of the terms' real parts, in out's dtype, then its log (torch's sum_out into out:
    a negative sum gives nan)."""
    x = float_input(input, "logsumexp", complex_ok=True)
    axes = _logsumexp_axes(x, dim, keepdim)
    if dtype == x.dtype or not (dtype.is_floating_point or dtype.is_complex):
        return _logsumexp(x, axes=axes, keepdim=keepdim)
    re = x.real if x.is_complex() else x  # (torch shifts a complex x by its real parts' max)
    top = re.amax(axes, keepdim=True) if x.numel() else re.sum(axes, keepdim=True) - math.inf
    top = where(top.abs() == math.inf, 0.0, top)  # (all -inf, or an inf: shifted by 0)
    e = (x - top).exp()
    if x.is_complex() and not dtype.is_complex:  # (each term cast, as torch's sum kernel: its
        e = e.to(dtype)  # cast warns)
    total = e.sum(axes, keepdim=keepdim, dtype=dtype)
    return total.log() + (top if keepdim else top.squeeze(axes))


# ---- boolean reductions ----------------------------------------------------------------------
@op("all", differentiable=False, layout="contiguous")
def _all(xp, x, *, axes, keepdim):
    r = xp.all(x, axis=axes, keepdims=keepdim)
    return r.astype(x.dtype) if x.dtype == xp.uint8 else r  # torch keeps uint8


@op("any", differentiable=False, layout="contiguous")
def _any(xp, x, *, axes, keepdim):
    r = xp.any(x, axis=axes, keepdims=keepdim)
    return r.astype(x.dtype) if x.dtype == xp.uint8 else r


@op("count_nonzero", differentiable=False, layout="contiguous")
def _count_nonzero(xp, x, *, axes):
    if len(axes) == x.ndim:  # all of it: the fast whole-array count, not a sum over axes
        return xp.asarray(xp.count_nonzero(x), dtype=xp.int64)
    return xp.count_nonzero(x, axis=axes).astype(xp.int64)


@tensor_method()
def all(input, dim=None, keepdim=False):
    """True where every element (over `dim`) is non-zero.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[True, False], [True, True]])
    >>> flow.all(x), flow.all(x, dim=1)
    (tensor(False), tensor([False,  True]))
    """
    return _all(input, axes=_bool_axes(dim, input, "all"), keepdim=keepdim)


@tensor_method()
def any(input, dim=None, keepdim=False):
    """True where some element (over `dim`) is non-zero.

    >>> import flowgrad as flow
    >>> flow.any(flow.tensor([0, 0, 3]))
    tensor(True)
    """
    return _any(input, axes=_bool_axes(dim, input, "any"), keepdim=keepdim)


def _bool_axes(dim, input, name):
    """all/any's axes: an empty dim tuple reduces over no dim (x != 0, as torch's), where
    sum's reduces over every dim."""
    if isinstance(dim, (tuple, list)) and not dim:
        return ()
    return normalize_dims(dim, input._data.ndim, name)


@tensor_method()
def count_nonzero(input, dim=None, *dims):
    """Number of non-zero elements over `dim` (int64); several dims as one tuple or as ints
    (x.count_nonzero(0, 1), torch's int[] dim)."""
    if dims:
        dim = (dim, *dims)
    return _count_nonzero(input, axes=normalize_dims(dim, input._data.ndim, "count_nonzero"))
