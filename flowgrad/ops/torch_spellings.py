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

import warnings

from .. import dtypes as _dt
from .. import linalg as _linalg
from . import nn_misc as _nn_misc
from . import normalization as _norm

__all__ = ["dropout", "alpha_dropout", "feature_alpha_dropout", "layer_norm", "group_norm",
           "det", "logdet", "slogdet", "inverse", "result_type", "nuclear_norm", "cholesky",
           "cond"]


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
    two dims when None), as linalg.matrix_norm(input, 'nuc', dim, keepdim)."""
    return _linalg.matrix_norm(input, "nuc", dim=(-2, -1) if dim is None else dim,
                               keepdim=keepdim)


def cholesky(input, upper=False):
    """torch.cholesky (deprecated there): linalg.cholesky's L, or its conjugate transpose U
    with `upper=True`."""
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
                  "removed in a future PyTorch release; use torch.linalg.cholesky(A) (and .mH "
                  "for upper=True)", UserWarning, stacklevel=2)
    lower = _linalg.cholesky(input)
    return lower.mH if upper else lower


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
