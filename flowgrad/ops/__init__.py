"""The op library, one module per family. Importing it fills the registry and attaches
Tensor methods. `REGISTRY` maps op names to their kernel and gradient rule."""
from . import (  # noqa: F401 - imported to register their ops
    activation,
    attention,
    conv,
    creation,
    einsum,
    diag,
    elementwise,
    elementwise_more,
    gather,
    index,
    linalg,
    loss,
    loss_ctc,
    loss_more,
    norm,
    math,
    nn_misc,
    normalization,
    pad,
    pool,
    reduce,
    scan,
    reorder,
    shape,
    stats,
    sort,
    spatial,
    split,
)
from .registry import REGISTRY, Op, op

__all__ = ["REGISTRY", "Op", "op"]
