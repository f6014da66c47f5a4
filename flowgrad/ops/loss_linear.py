"""linear_cross_entropy: cross_entropy of a linear layer's logits, and the options of torch's
chunked implementation (LinearCrossEntropyOptions).

torch's chunked path processes the batch in pieces so the (N, C) logits are never all
materialised on its accelerators; its result is the reference composition's. Here both paths
run the composition (the logits of a NumPy batch are what autograd saves either way), so
the options are checked as torch's and otherwise change nothing but the warning for the
configurations torch's chunked path does not take.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> x, w = flow.eye(2), flow.tensor([[2.0, 0.0], [0.0, 2.0]])
>>> F.linear_cross_entropy(x, w, flow.tensor([0, 1]))
tensor(0.1269)
"""
from __future__ import annotations

import dataclasses
import math

from .. import dtypes as _dt
from .._warn import warn
from .linalg import linear
from .loss import cross_entropy

__all__ = ["linear_cross_entropy"]

_ACC_POLICIES = ("auto", "accurate", "balanced", "compact")


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """torch.nn.LinearCrossEntropyOptions: opts linear_cross_entropy into the chunked path
    (batch_chunk_size rows per chunk, or a `chunking_method` heuristic; an accumulation
    policy and dtype). Checked as torch's; on NumPy the result is the reference one.

    >>> LinearCrossEntropyOptions(batch_chunk_size=4).batch_chunk_size
    4
    """
    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        size = self.batch_chunk_size
        if not (size is None or (isinstance(size, int) and size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (
                _dt.float16, _dt.bfloat16, _dt.float32, _dt.float64):
            raise ValueError(f"acc_dtype must be one of {{None, float16, bfloat16, float32, "
                             f"float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let "
                             f"the op pick automatically.")


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...): input
    (in_features) or (N, in_features), linear_weight (C, in_features) or
    (C, d1, ..., dK, in_features) for a K-dimensional loss (batched input only).
    ignore_index None means -100, and may not be given with probability targets.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.linear_cross_entropy(flow.ones(3), flow.zeros(4, 3), flow.tensor(1))
    tensor(1.3863)
    """
    if not 1 <= input.dim() <= 2:
        raise RuntimeError(f"expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    batches, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(f"expected equal input and linear_weight last dimensions "
                           f"(in_features), got {in_features} and {linear_weight.shape[-1]}, "
                           f"respectively")
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(f"expected linear_bias shape {(num_classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batches:
        raise RuntimeError(f"K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input, "
                           f"(N, {in_features}), got unbatched input with shape "
                           f"{tuple(input.shape)}")
    logits_shape = (*batches, num_classes, *out_features)
    # (cross_entropy tells probabilities from indices by the shapes, as torch's)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError("ignore_index cannot be specified when target contains "
                           "probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    if options is not None and (out_features or reduction not in ("mean", "sum", "none")
                                or label_smoothing != 0.0 or target.dtype.name != "int64"):
        bias_shape = None if linear_bias is None else tuple(linear_bias.shape)
        warn(f"linear_cross_entropy: ``options`` ignored; chunked path needs "
             f"reduction in {{'mean','sum','none'}}, label_smoothing == 0, "
             f"target.dtype == int64, out_features == (). Got "
             f"reduction={reduction!r}, label_smoothing={label_smoothing}, "
             f"target.dtype={target.dtype}, out_features={out_features}, "
             f"tracing=False, linear_bias.shape={bias_shape}.", stacklevel=2)
    if out_features:
        rows = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape(rows, in_features)
        linear_bias = None if linear_bias is None else linear_bias.reshape(rows)
    logits = linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return cross_entropy(logits, target, weight=weight, reduction=reduction,
                         ignore_index=ignore_index, label_smoothing=label_smoothing)
