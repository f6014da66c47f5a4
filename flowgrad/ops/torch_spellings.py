"""`flowgrad.*` forms of ops whose torch.* signature differs from the F.* or linalg.* one:
torch.dropout takes `train` where F.dropout takes `training`, torch.det takes `input` where
torch.linalg.det takes `A`, torch.layer_norm takes `cudnn_enable`. Each forwards to the one
implementation, so only the keyword spellings differ.

>>> import flowgrad as flow
>>> flow.dropout(flow.ones(2), 0.5, train=False)
tensor([1., 1.])
>>> flow.det(input=flow.eye(2))
tensor(1.)
"""
from __future__ import annotations

import functools
import inspect

from .. import dtypes as _dt
from .. import linalg as _linalg
from .._warn import warn
from ..tensor import tensor_method
from . import activation as _act
from . import nn_misc as _nn_misc
from . import normalization as _norm
from . import softmax as _softmax

__all__ = ["dropout", "alpha_dropout", "feature_alpha_dropout", "layer_norm", "group_norm",
           "det", "logdet", "slogdet", "inverse", "result_type", "nuclear_norm", "cholesky",
           "cond", "while_loop", "softmax", "log_softmax", "relu", "selu", "celu", "threshold",
           "rrelu"]


def dropout(input, p, train):
    """torch.dropout: F.dropout with torch's `train` spelling of `training`.

    >>> import flowgrad as flow
    >>> flow.dropout(flow.ones(3), 0.0, True)
    tensor([1., 1., 1.])
    """
    return _nn_misc.dropout(input, p, train)


def alpha_dropout(input, p, train):
    """torch.alpha_dropout: F.alpha_dropout with `train` for `training`."""
    return _nn_misc.alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    """torch.feature_alpha_dropout: F.feature_alpha_dropout with `train` for `training`."""
    return _nn_misc.feature_alpha_dropout(input, p, train)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """torch.layer_norm: F.layer_norm; `cudnn_enable` is accepted and has no effect on the CPU.

    >>> import flowgrad as flow
    >>> flow.layer_norm(flow.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    return _norm.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """torch.group_norm: F.group_norm; `cudnn_enabled` is accepted and has no effect."""
    return _norm.group_norm(input, num_groups, weight, bias, eps)


# torch.relu and its kin take no `inplace` (F.relu does): `x.relu(True)` and
# `torch.selu(x, True)` are refused, not run in place; torch.rrelu's fifth is the generator
@tensor_method()
def relu(input):
    """torch.relu and Tensor.relu: max(x, 0) (F.relu without its `inplace`).

    >>> import flowgrad as flow
    >>> flow.tensor([-1.0, 2.0]).relu()
    tensor([0., 2.])
    """
    if input._data.dtype.kind == "b":  # (F.relu's body: no extra call on this hot path)
        _act._no_bool(input, "relu")
    return _act._relu(input)


def selu(input):
    """torch.selu: F.selu without its `inplace`."""
    return _act.selu(input)


def celu(input, alpha=1.0):
    """torch.celu: F.celu without its `inplace`."""
    return _act.celu(input, alpha)


def threshold(input, threshold, value):
    """torch.threshold: F.threshold without its `inplace`."""
    return _act.threshold(input, threshold, value)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """torch.rrelu: F.rrelu without its `inplace` (the generator comes fifth)."""
    return _act.rrelu(input, lower, upper, training, generator=generator)


@tensor_method()
def softmax(input, dim, dtype=None):
    """torch.softmax and Tensor.softmax: F.softmax, with the int dim torch's parser requires
    (F.softmax alone picks an implicit dim for None, with a warning).

    >>> import flowgrad as flow
    >>> flow.tensor([0.0, 0.0]).softmax(0)
    tensor([0.5000, 0.5000])
    """
    return _softmax.softmax(input, _softmax.int_dim(dim, "softmax"), dtype=dtype)


@tensor_method()
def log_softmax(input, dim, dtype=None):
    """torch.log_softmax and Tensor.log_softmax: F.log_softmax with an int dim."""
    return _softmax.log_softmax(input, _softmax.int_dim(dim, "log_softmax"), dtype=dtype)


def det(input):
    """torch.det: the determinant of (batches of) square matrices, as linalg.det.

    >>> import flowgrad as flow
    >>> flow.det(flow.tensor([[2.0, 0.0], [0.0, 3.0]]))
    tensor(6.)
    """
    return _linalg.det(input)


def logdet(input):
    """torch.logdet: log det (nan for negative determinants)."""
    return _linalg.logdet(input)


def slogdet(input):
    """torch.slogdet: (sign, log|det|), as linalg.slogdet."""
    return _linalg.slogdet(input)


def inverse(input):
    """torch.inverse: the inverse of (batches of) square matrices, as linalg.inv."""
    return _linalg.inv(input)


def result_type(tensor, other):
    """torch.result_type: the dtype an op on `tensor` and `other` (tensors or numbers) gives.

    >>> import flowgrad as flow
    >>> flow.result_type(flow.tensor([1, 2]), 1.0)
    flowgrad.float32
    """
    return _dt.result_type(tensor, other)


def nuclear_norm(input, dim=None, keepdim=False):
    """torch.nuclear_norm (deprecated there): the sum of singular values over `dim` (the last
    two dims when None), as linalg.matrix_norm(input, 'nuc', dim, keepdim); a bool second
    argument is keepdim (torch's nuclear_norm(input, keepdim) overload)."""
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return _linalg.matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim,
                               keepdim=keepdim)


def cholesky(input, upper=False):
    """torch.cholesky (deprecated there): linalg.cholesky's L, or its conjugate transpose U
    with `upper=True`."""
    warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
         "removed in a future PyTorch release; use torch.linalg.cholesky(A) (and .mH "
         "for upper=True)", UserWarning, stacklevel=2)
    return _linalg.cholesky(input, upper=upper)  # (upper: A's upper triangle is read)


def cond(pred, true_fn, false_fn, operands=()):
    """torch.cond run eagerly: true_fn(*operands) if `pred` (a bool or a one-element tensor)
    holds, else false_fn(*operands).

    >>> import flowgrad as flow
    >>> flow.cond(flow.tensor(False), lambda x: x + 1, lambda x: x - 1, (flow.ones(2),))
    tensor([0., 0.])
    """
    if not isinstance(operands, (tuple, list)):
        raise RuntimeError(f"cond: operands must be a tuple or list of tensors, got "
                           f"{type(operands).__name__}")
    return (true_fn if bool(pred) else false_fn)(*operands)


def while_loop(cond_fn, body_fn, carried_inputs):
    """torch.while_loop run eagerly: while cond_fn(*values) holds, values = body_fn(*values),
    from `carried_inputs` (a tuple or list); autograd records every iteration, as torch's
    eager loop. body_fn must return as many values as it takes.

    >>> import flowgrad as flow
    >>> flow.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2),
    ...                 (flow.tensor(0), flow.ones(2)))
    (tensor(3), tensor([8., 8.]))
    """
    if not isinstance(carried_inputs, (tuple, list)):
        raise RuntimeError(f"while_loop: carried_inputs must be a tuple or list, got "
                           f"{type(carried_inputs).__name__}")
    values = tuple(carried_inputs)
    while bool(cond_fn(*values)):
        out = body_fn(*values)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(values):
            raise RuntimeError(f"while_loop: body_fn returned {len(out)} values for "
                               f"{len(values)} carried inputs; return one per input")
        values = out
    return values


# ---- NumPy's keyword spellings: torch's argument parser takes `axis` for `dim` and
# `keepdims` for `keepdim` (x.sum(axis=0, keepdims=True)); so do these functions and methods
NUMPY_SPELLED = (
    "sum", "mean", "nansum", "nanmean", "prod", "std", "var", "std_mean", "var_mean", "max",
    "min", "amax", "amin", "aminmax", "argmax", "argmin", "all", "any", "count_nonzero",
    "logsumexp", "median", "nanmedian", "mode", "kthvalue", "quantile", "nanquantile", "cumsum",
    "cumprod", "cummax", "cummin", "logcumsumexp", "sort", "argsort", "topk", "cat", "concat",
    "concatenate", "stack", "squeeze", "unsqueeze", "diff", "softmax", "log_softmax",
    "unbind", "chunk", "narrow", "select", "index_select", "gather", "take_along_dim",
    "repeat_interleave", "tensor_split", "cross", "flatten", "unflatten", "trapezoid",
    "cumulative_trapezoid", "trapz", "gradient", "unsafe_chunk", "unsafe_split", "slice_copy",
    "squeeze_copy", "unsqueeze_copy", "unbind_copy")
# (not norm: torch.norm is Python, which refuses axis=; nor Tensor.size/stride, which torch's
# parser lets take axis= too, kept unwrapped as the hottest methods)
_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))


def numpy_spelled(fn):
    """`fn` taking `axis=` for `dim=` and `keepdims=` for `keepdim=`, as torch does.

    >>> import flowgrad as flow
    >>> flow.ones(2, 3).sum(axis=1, keepdims=True)
    tensor([[3.],
            [3.]])
    """
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "axis" in kwargs or "keepdims" in kwargs:
            for alias, name in _ALIASES:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got both '{alias}' and '{name}'")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    call._respell = numpy_spelled  # (autocast's install rewraps a method's inner function)
    return call


def accept_numpy_spellings(namespace, cls, skip=()):
    """Wrap `namespace[name]` and `cls.name` for each name in NUMPY_SPELLED that takes `dim`
    (and no `axis` of its own) with `numpy_spelled`, except the names in `skip`. (autocast's
    composites, cat/stack/prod/quantile, are wrapped too: its install follows __wrapped__.)"""
    for get, put in ((namespace.get, namespace.__setitem__),
                     (lambda n: cls.__dict__.get(n), lambda n, f: setattr(cls, n, f))):
        for name in NUMPY_SPELLED:
            if name in skip:
                continue
            fn = get(name)
            if fn is None or not callable(fn):
                continue
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if "dim" in params and "axis" not in params:
                put(name, numpy_spelled(fn))
