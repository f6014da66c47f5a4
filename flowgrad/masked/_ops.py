"""torch.masked's reductions and normalizations on strided tensors, after torch/masked/_ops.py.

Each function takes a boolean `mask` (broadcast to the input's shape; None keeps every
element). Masked-out elements are replaced by the operation's identity (0 for sum, 1 for prod,
-inf for amax...) with `flow.where`, and the plain flowgrad op then runs on the result, so the
values, dtypes and gradients are torch's (the gradient of a masked-out element is zero).
Sparse layouts and MaskedTensor inputs are not supported.
"""
from __future__ import annotations

import math

import flowgrad as flow

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
           "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]

_SMALL_INTS = ("uint8", "bool", "int8", "int16", "int32")


def _is_small_int(dtype):
    """The dtypes that sum and prod promote to int64 (torch's list)."""
    return any(dtype == getattr(flow, name) for name in _SMALL_INTS)


def _scalar(value, input):
    return flow.tensor(value, dtype=input.dtype, device=input.device)


def _reduction_identity(op_name, input, *args):
    """The identity of a reduction on `input`'s dtype as a 0-dim tensor, or None when it is not
    defined (mean, var, std; amax of bool...)."""
    op_name = op_name.rsplit(".", 1)[-1]
    dtype = input.dtype
    floating = dtype.is_floating_point
    integral = (not floating and not dtype.is_complex and dtype != flow.bool)
    if op_name in ("sum", "cumsum"):
        return _scalar(0, input)
    if op_name in ("prod", "cumprod"):
        return _scalar(1, input)
    if op_name in ("amax", "argmax", "logaddexp", "logsumexp"):
        if floating:
            return _scalar(-math.inf, input)
        if op_name == "logsumexp" and dtype.is_complex:
            return _scalar(complex(-math.inf, 0), input)
        if integral:
            return _scalar(flow.iinfo(dtype).min, input)
        return None
    if op_name in ("amin", "argmin"):
        if floating:
            return _scalar(math.inf, input)
        if integral:
            return _scalar(flow.iinfo(dtype).max, input)
        return None
    if op_name in ("mean", "var", "std"):
        return None
    if op_name == "norm":
        ord = args[0] if args else 2
        if ord == -math.inf:
            if not floating:
                raise AssertionError(f"input must be floating point, got {input.dtype}")
            return _scalar(math.inf, input)
        return _scalar(0, input)
    if op_name == "median":
        return flow.tensor(math.nan, dtype=dtype if floating else flow.float32,
                           device=input.device)
    raise NotImplementedError(f"identity of {op_name} on {dtype} input")


def _canonical_dim(dim, ndim):
    """`dim` as a sorted tuple of non-negative dims; None and () mean every dim."""
    if dim == () or dim is None:
        return tuple(range(ndim))
    ndim = max(ndim, 1)
    dims = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-ndim}, {ndim - 1}], but got {d})")
        dims.append(d % ndim)
    return tuple(sorted(dims))


def _check_strided(input, name):
    layout = getattr(input, "layout", flow.strided)
    if layout != flow.strided:
        raise ValueError(f"masked {name} expects strided tensor (got {layout} tensor)")


def _any(input, dim, keepdim):
    """`input.any` over a tuple of dims."""
    r = input
    for d in reversed(dim):
        r = r.any(dim=d, keepdim=keepdim)
    return r


def _where(mask, input, fill_value):
    """`flow.where` (torch's helper of this name also handles sparse layouts)."""
    return flow.where(mask, input, fill_value)


def _input_mask(input, *args, **kwargs):
    """The `mask` keyword broadcast to `input`'s shape, as bool (torch.masked._input_mask)."""
    _check_strided(input, "_input_mask")
    mask = kwargs.get("mask")
    if mask is None:
        raise ValueError("_input_mask requires explicit mask")
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask dimensionality "
                             "higher than of the input)")
        mask = flow.broadcast_to(mask.clone(), input.shape)
    return mask.to(dtype=flow.bool)


_REDUCTIONS = frozenset(("sum", "prod", "amax", "amin", "argmax", "argmin", "mean", "median",
                         "norm", "var", "std", "logsumexp"))
_NORMALIZATIONS = frozenset(("softmax", "log_softmax", "softmin", "normalize", "cumsum",
                             "cumprod"))


def _output_mask(op, input, *args, **kwargs):
    """Which output elements of the masked operation `op` have a masked-in source
    (torch.masked._output_mask): the mask reduced with `any` for a reduction, the input mask
    itself for a normalization.

    >>> import flowgrad as flow
    >>> m = flow.tensor([[True, False], [False, False]])
    >>> flow.masked._output_mask(flow.masked.sum, flow.ones(2, 2), 1, mask=m)
    tensor([ True, False])
    """
    if not callable(op):
        raise ValueError(f"_output_mask expected masked operation (got {type(op).__name__} "
                         f"object)")
    if op.__name__ in _REDUCTIONS:
        if op.__name__ == "norm" and args:
            args = args[1:]  # (ord)
        dim = args[0] if args else kwargs.get("dim")
        outmask = _input_mask(input, *args, **kwargs)
        keepdim = kwargs.get("keepdim", False)
        return _any(outmask, _canonical_dim(dim, input.ndim), bool(keepdim))
    if op.__name__ in _NORMALIZATIONS:
        return _input_mask(input, *args, **kwargs)
    raise ValueError(f"_output_mask expected masked operation (got callable "
                     f"{op.__module__}.{op.__name__})")


def _combine_input_and_mask(op, input, mask, *args):
    """`input` with its masked-out elements replaced by the identity of `op` (a masked
    function or its name)."""
    if mask is None:
        return input
    canonical = _input_mask(input, mask=mask)
    name = op if isinstance(op, str) else op.__name__
    fill = _reduction_identity(name, input, *args)
    if fill is None:
        raise TypeError(f"masked {name}: no identity value for {input.dtype} input")
    return _where(canonical, input, fill)


def _promoted(input, dtype):
    """sum's and prod's output dtype: `dtype`, else the input's with small ints -> int64."""
    if dtype is not None:
        return dtype
    return flow.int64 if _is_small_int(input.dtype) else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Sum of the elements of `input` along `dim` where `mask` is True (torch.masked.sum).
    Fully masked-out slices give 0.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3, -2, -1], [0, 1, 2]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.sum(x, 1, mask=m)
    tensor([-4,  0])
    """
    _check_strided(input, "sum")
    dtype = _promoted(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    mask_input = _combine_input_and_mask("sum", input, mask)
    return flow.sum(mask_input, dim_, bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Product of the elements of `input` along `dim` where `mask` is True
    (torch.masked.prod). Fully masked-out slices give 1.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3, -2, -1], [0, 1, 2]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.prod(x, 1, mask=m)
    tensor([3, 1])
    """
    _check_strided(input, "prod")
    dtype = _promoted(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    result = _combine_input_and_mask("prod", input, mask).to(dtype=dtype)
    for d in reversed(dim_):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    """Cumulative sum along `dim`, masked-out elements counting as 0 (torch.masked.cumsum).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.cumsum(x, 1, mask=m)
    tensor([[-3., -3., -4.],
            [ 0.,  0.,  0.]])
    """
    _check_strided(input, "cumsum")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    mask_input = _combine_input_and_mask("sum", input, mask)
    return flow.cumsum(mask_input, dim_, dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    """Cumulative product along `dim`, masked-out elements counting as 1
    (torch.masked.cumprod).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.cumprod(x, 1, mask=m)
    tensor([[-3., -3.,  3.],
            [ 1.,  1.,  1.]])
    """
    _check_strided(input, "cumprod")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    mask_input = _combine_input_and_mask("prod", input, mask)
    return flow.cumprod(mask_input, dim_, dtype=dtype).to(dtype=dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Maximum of `input` along `dim` where `mask` is True (torch.masked.amax). Fully
    masked-out slices give -inf (the dtype's minimum for integers).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.amax(x, 1, mask=m)
    tensor([-1., -inf])
    """
    _check_strided(input, "amax")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("amax", input, mask)
    dim_ = _canonical_dim(dim, mask_input.ndim)
    return flow.amax(mask_input, dim_, bool(keepdim)).to(dtype=dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Minimum of `input` along `dim` where `mask` is True (torch.masked.amin). Fully
    masked-out slices give inf (the dtype's maximum for integers).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.amin(x, 1, mask=m)
    tensor([-3., inf])
    """
    _check_strided(input, "amin")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("amin", input, mask)
    dim_ = _canonical_dim(dim, mask_input.ndim)
    return flow.amin(mask_input, dim_, bool(keepdim)).to(dtype=dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the maximum along `dim` among the elements where `mask` is True
    (torch.masked.argmax). As in torch, the result is cast to `dtype` (default: the input's).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, False], [True, True, False]])
    >>> flow.masked.argmax(x, 1, mask=m, dtype=flow.int64)
    tensor([0, 1])
    """
    _check_strided(input, "argmax")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("argmax", input, mask)
    return flow.argmax(mask_input, dim, bool(keepdim)).to(dtype=dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Index of the minimum along `dim` among the elements where `mask` is True
    (torch.masked.argmin). As in torch, the result is cast to `dtype` (default: the input's).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[False, True, True], [False, True, True]])
    >>> flow.masked.argmin(x, 1, mask=m, dtype=flow.int64)
    tensor([1, 1])
    """
    _check_strided(input, "argmin")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("argmin", input, mask)
    return flow.argmin(mask_input, dim, bool(keepdim)).to(dtype=dtype)


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Mean of the elements of `input` along `dim` where `mask` is True (torch.masked.mean).
    Fully masked-out slices give nan; the output dtype must be floating or complex.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.mean(x, 1, mask=m)
    tensor([-2., nan])
    """
    _check_strided(input, "mean")
    source = "Optional"
    if dtype is None:
        dtype, source = input.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {source} dtype must be either "
                         f"a floating point or complex dtype. Got: {dtype}")
    if mask is None:
        ones = flow.ones(input.shape, dtype=flow.int64, device=input.device)
        count = sum(ones, dim, keepdim=keepdim)
        total = sum(input, dim, keepdim=keepdim, dtype=dtype)
    else:
        inmask = _input_mask(input, mask=mask)
        count = inmask.sum(dim=dim, keepdim=bool(keepdim))
        total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """Median of `input` along one `dim` among the elements where `mask` is True
    (torch.masked.median, via nanmedian). Fully masked-out slices give nan (an error for
    non-floating input).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.median(x, 1, mask=m)
    tensor([-3., nan])
    """
    _check_strided(input, "median")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    is_float = input.dtype.is_floating_point
    if not is_float:
        input = input.to(dtype=flow.float32)
    mask_input = _combine_input_and_mask("median", input, mask)
    output = flow.nanmedian(mask_input, dim_, keepdim).values
    if is_float:
        return output
    if not bool(flow.isnan(output).any()):
        return output.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not floating "
                     "point")


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """log(sum(exp(x))) along `dim` over the elements where `mask` is True
    (torch.masked.logsumexp). Fully masked-out slices give -inf.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[0.0, 5.0, 0.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.logsumexp(x, 1, mask=m)
    tensor([0.6931,   -inf])
    """
    _check_strided(input, "logsumexp")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)
    mask_input = _combine_input_and_mask("logsumexp", input, mask)
    return flow.logsumexp(mask_input, dim_, keepdim=keepdim).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """log(exp(input) + exp(other)) elementwise, the masked-out elements of each operand
    counting as -inf (torch.masked.logaddexp).

    >>> import flowgrad as flow
    >>> x = flow.tensor([-100.0, -200.0, -300.0])
    >>> y = flow.tensor([-1.0, -2.0, -3.0])
    >>> m = flow.tensor([True, False, True])
    >>> flow.masked.logaddexp(x, y, input_mask=m, other_mask=m)
    tensor([-1., -inf, -3.])
    """
    dtype = input.dtype if dtype is None else dtype
    if getattr(input, "layout", flow.strided) != flow.strided or getattr(
            other, "layout", flow.strided) != flow.strided:
        raise ValueError(f"masked logaddexp expects strided tensors (got {input.layout} tensor "
                         f"for input, {other.layout} for other)")
    mask_input = _combine_input_and_mask("logaddexp", input, input_mask)
    mask_other = _combine_input_and_mask("logaddexp", other, other_mask)
    return flow.logaddexp(mask_input, mask_other).to(dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """Vector `ord`-norm of the elements of `input` along `dim` where `mask` is True
    (torch.masked.norm). Fully masked-out slices give 0 (inf for ord=-inf).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -4.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.norm(x, 2.0, 1, mask=m)
    tensor([5., 0.])
    """
    _check_strided(input, "norm")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("norm", input, mask, ord)
    dim_ = _canonical_dim(dim, input.ndim)
    return flow.linalg.vector_norm(mask_input, ord, dim_, bool(keepdim), dtype=dtype)


def _std_var(input, dim, unbiased, *, correction_opt, keepdim, dtype, mask, take_sqrt):
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = flow.float32
    compute_dtype = dtype
    if not (compute_dtype.is_floating_point or compute_dtype.is_complex):
        compute_dtype = flow.float32
    _check_strided(input, "std/var")
    if mask is None:
        ones = flow.ones(input.shape, dtype=flow.int64, device=input.device)
        count = sum(ones, dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype)
        inmask = None
    else:
        inmask = _input_mask(input, mask=mask)
        count = inmask.sum(dim=dim, keepdim=True)
        sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    sample_mean = flow.divide(sample_total, count)
    x = flow.subtract(input, sample_mean)
    total = sum(x * x.conj(), dim, keepdim=keepdim, dtype=compute_dtype, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        real_dtype = compute_dtype
        if compute_dtype.is_complex:
            real_dtype = flow.float64 if compute_dtype == flow.complex128 else flow.float32
        count = count.to(real_dtype)
        count = flow.subtract(count, correction)
        count = flow.maximum(count, count.new_zeros([]))
    output = flow.divide(total, count).to(dtype=dtype)
    if take_sqrt:
        output = flow.sqrt(output)
    return output


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Variance of the elements of `input` along `dim` where `mask` is True
    (torch.masked.var; `correction` defaults to 1). Fully masked-out slices give nan.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.var(x, 1, mask=m)
    tensor([2., nan])
    """
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """Standard deviation of the elements of `input` along `dim` where `mask` is True
    (torch.masked.std; `correction` defaults to 1). Fully masked-out slices give nan.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.std(x, 1, mask=m)
    tensor([1.4142,    nan])
    """
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=True)


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax along `dim` over the elements where `mask` is True (torch.masked.softmax):
    masked-out elements get 0, fully masked-out slices nan.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.softmax(x, 1, mask=m)
    tensor([[0.1192, 0.0000, 0.8808],
            [   nan,    nan,    nan]])
    """
    _check_strided(input, "softmax")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    mask_input = _combine_input_and_mask("amax", input, mask)
    return flow.nn.functional.softmax(mask_input, dim_, dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    """log(softmax) along `dim` over the elements where `mask` is True
    (torch.masked.log_softmax): masked-out elements get -inf, fully masked-out slices nan.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.log_softmax(x, 1, mask=m)
    tensor([[-2.1269,    -inf, -0.1269],
            [    nan,     nan,     nan]])
    """
    _check_strided(input, "log_softmax")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    mask_input = _combine_input_and_mask("amax", input, mask)
    return flow.nn.functional.log_softmax(mask_input, dim_, dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    """softmax(-x) along `dim` over the elements where `mask` is True (torch.masked.softmin):
    masked-out elements get 0, fully masked-out slices nan.

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -1.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.softmin(x, 1, mask=m)
    tensor([[0.8808, 0.0000, 0.1192],
            [   nan,    nan,    nan]])
    """
    _check_strided(input, "softmin")
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    mask_input = _combine_input_and_mask("amin", input, mask)
    return flow.nn.functional.softmin(mask_input, dim_, dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """`input` divided by its masked `ord`-norm along `dim` (at least `eps`), masked-out
    elements set to 0 (torch.masked.normalize).

    >>> import flowgrad as flow
    >>> x = flow.tensor([[-3.0, -2.0, -4.0], [0.0, 1.0, 2.0]])
    >>> m = flow.tensor([[True, False, True], [False, False, False]])
    >>> flow.masked.normalize(x, 2.0, 1, mask=m)
    tensor([[-0.6000,  0.0000, -0.8000],
            [ 0.0000,  0.0000,  0.0000]])
    """
    _check_strided(input, "normalize")
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("sum", input, mask)
    nrm_ = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denom = flow.maximum(nrm_, nrm_.new_full([], eps))
    return flow.divide(mask_input, denom)
