"""Gradient clipping: by total norm (`clip_grad_norm_`) and by value (`clip_grad_value_`).

The gradients are scaled in place: the `.grad` tensors keep their identities.

>>> import flowgrad as flow
>>> w = flow.ones(4, requires_grad=True)
>>> (w * 3).sum().backward()
>>> flow.nn.utils.clip_grad_norm_([w], max_norm=1.0)
tensor(6.)
>>> round(float(w.grad.pow(2).sum().sqrt()), 4)
1.0
"""
from __future__ import annotations

import math

import numpy as np

from ..._warn import warn
from ...autograd import interpreter as _interpreter
from ...autograd.grad_mode import no_grad
from ...autograd.inplace import bump_version
from ...device import array_module
from ...dtypes import from_numpy_dtype
from ...errors import fill_scalar
from ...ops.norm import vector_norm
from ...ops.shape import stack
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _tensors(tensors):
    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


def _grads(parameters):
    return [p.grad for p in _tensors(parameters) if p.grad is not None]


def _half(dtype):
    """float16 or bfloat16: accumulated and scaled in float32, as torch's kernels do."""
    return dtype.itemsize < 4 and dtype.kind in "fV"


def _vector_norm(a, p):
    """torch.linalg.vector_norm of a flat array, in the array's (real) dtype; half-precision
    arrays are accumulated in float32 as torch does (a float16 [300, 400] has norm 500, not
    the inf of squares summed in float16)."""
    a = np.abs(a.reshape(-1))
    if not a.size and abs(p) == math.inf:  # (max and min have no identity)
        raise RuntimeError(f"linalg.vector_norm cannot compute the {p} norm on an empty "
                           f"tensor because the operation does not have an identity; clip "
                           f"with a finite norm_type, or leave the empty gradients out")
    if _half(a.dtype):
        return a.dtype.type(_vector_norm(a.astype(np.float32), p))
    if p == math.inf:
        return a.max()
    if p == -math.inf:
        return a.min()
    if p == 0:
        return a.dtype.type(np.count_nonzero(a))
    if p == 1:
        return a.sum(dtype=a.dtype)
    if p == 2:
        return np.sqrt(np.dot(a, a)) if a.size else a.dtype.type(0)
    return (a ** p).sum(dtype=a.dtype) ** (1.0 / p)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (as if they were one concatenated vector); a 0-d
    tensor. Raises on a non-finite norm when `error_if_nonfinite`."""
    tensors = _tensors(tensors)
    for i, t in enumerate(tensors):
        if t is None:  # (torch's type: the first one's .device fails, a later one its check)
            raise (AttributeError if i == 0 else RuntimeError)(
                f"get_total_norm: tensor {i} is None; pass only the gradients that exist "
                "([p.grad for p in params if p.grad is not None])")
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._zeros((), np.float32)
    if _interpreter.tracing_a_plan():  # inside nn.Graph's build: ops, which the plan runs
        return _traced_total_norm(tensors, norm_type, error_if_nonfinite)
    norms = [_vector_norm(t._data, norm_type) for t in tensors]
    # the norm of a complex tensor is real: the total takes the real dtypes' promotion
    dtype = np.result_type(*[t._data.dtype for t in tensors])
    if dtype.kind == "c":
        dtype = np.finfo(dtype).dtype  # float32 for complex64
    xp = array_module(tensors[0]._data)
    total = _vector_norm(xp.asarray(norms, dtype=dtype), norm_type)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(_NONFINITE.format(norm_type))
    return Tensor._wrap(xp.asarray(total, dtype=dtype))


_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it "
              "cannot be clipped. To disable this error and scale the gradients by the "
              "non-finite norm anyway, set `error_if_nonfinite=False`")


def _norm_op(t, p):
    """`_vector_norm` with ops (half precision accumulated in float32, as there)."""
    if _half(t._data.dtype):
        return vector_norm(t.float(), p).to(t.dtype)
    return vector_norm(t, p)


def _traced_total_norm(tensors, norm_type, error_if_nonfinite):
    """get_total_norm as ops, for nn.Graph's plan to compute on each call's gradients."""
    dtype = np.result_type(*[t._data.dtype for t in tensors])
    if dtype.kind == "c":
        dtype = np.finfo(dtype).dtype
    dtype = from_numpy_dtype(dtype)
    with no_grad():
        norms = stack([_norm_op(t, norm_type).to(dtype) for t in tensors])
        total = _norm_op(norms, norm_type)
        if error_if_nonfinite:
            _interpreter.current.value_check(total.isfinite(), _NONFINITE.format(norm_type),
                                             RuntimeError)
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by min(1, max_norm / (total_norm + 1e-6)), in place."""
    grads = _grads(parameters)
    if not grads:
        return
    if not isinstance(total_norm, Tensor):  # (torch's clamp of the coefficient refuses it)
        raise TypeError(f"clip_grads_with_norm_: total_norm must be a tensor (what "
                        f"get_total_norm returns), got {type(total_norm).__name__}; pass "
                        f"flowgrad.tensor(total_norm)")
    if _interpreter.tracing_a_plan():  # inside nn.Graph's build: in-place ops on the traced
        # gradients, which the plan runs on each call's before the update
        with no_grad():
            coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
            for g in grads:
                if _half(g._data.dtype):
                    g.copy_((g.float() * coef.float()).to(g.dtype))
                else:
                    g.mul_(coef.to(g.dtype))
        return
    xp = array_module(grads[0]._data)
    total = xp.asarray(total_norm._data)
    coef = xp.minimum(xp.asarray(max_norm, total.dtype) / (total + total.dtype.type(1e-6)), 1.0)
    for g in grads:
        data = g._data
        if _half(data.dtype):  # scaled in float32 and rounded once
            data[...] = (data.astype(np.float32) * coef.astype(np.float32)).astype(data.dtype)
        else:
            data *= coef.astype(data.dtype)
        bump_version(g)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Clip the gradients of `parameters` so their total `norm_type` norm is at most
    `max_norm` (in place); returns the total norm before clipping, a 0-d tensor.

    `norm_type` may be `inf` (the largest absolute entry). With `error_if_nonfinite=True`
    a nan/inf total norm raises instead of scaling the gradients by it.

    >>> import flowgrad as flow
    >>> w = flow.tensor([3.0, 4.0], requires_grad=True)
    >>> (w * w).sum().backward()
    >>> flow.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(10.)
    >>> w.grad
    tensor([0.6000, 0.8000])
    """
    parameters = _tensors(parameters)
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of `clip_grad_norm_` (as in torch)."""

    warn("`flowgrad.nn.utils.clip_grad_norm` is now deprecated in favor of "
         "`flowgrad.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient entry into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    if _interpreter.tracing_a_plan():  # inside nn.Graph's build:
        # the clamp as a recorded in-place op on each traced gradient
        with no_grad():
            for p in _tensors(parameters):
                if p.grad is not None:
                    p.grad.clamp_(-clip_value, clip_value)
        return
    grads = _grads(parameters)
    if any(g.is_complex() for g in grads):  # (NumPy would clip the real parts, silently)
        raise NotImplementedError("clamp is not supported for complex types")
    for g in grads:  # (as clamp_: a bound out of a grad's dtype raises, checked before any)
        fill_scalar("clip_grad_value_", -clip_value, g._data.dtype, arg="min")
        fill_scalar("clip_grad_value_", clip_value, g._data.dtype, arg="max")
    for g in grads:
        g._data.clip(-clip_value, clip_value, out=g._data)
        bump_version(g)
