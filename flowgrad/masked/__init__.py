"""flowgrad.masked: torch.masked's reductions and normalizations on strided tensors with a
boolean `mask` (None keeps every element). Masked-out elements take the identity of the
operation; gradients flow to the masked-in elements only. MaskedTensor is not provided.

>>> import flowgrad as flow
>>> x = flow.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> m = flow.tensor([[True, False], [True, True]])
>>> flow.masked.sum(x, 1, mask=m)
tensor([1., 7.], grad_fn=<SumBackward1>)
>>> flow.masked.sum(x, mask=m).backward(); x.grad
tensor([[1., 0.],
        [1., 1.]])
"""
from ._ops import (  # noqa: F401 - torch.masked's private helpers too
    _canonical_dim,
    _combine_input_and_mask,
    _input_mask,
    _output_mask,
    _reduction_identity,
    _where,
    amax,
    amin,
    argmax,
    argmin,
    cumprod,
    cumsum,
    log_softmax,
    logaddexp,
    logsumexp,
    mean,
    median,
    norm,
    normalize,
    prod,
    softmax,
    softmin,
    std,
    sum,
    var,
)

__all__ = ["amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
           "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]
