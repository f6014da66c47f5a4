"""The op library, one module per family. Importing it fills the registry and attaches
Tensor methods. `REGISTRY` maps op names to their kernel and gradient rule."""
from . import (  # noqa: F401 - imported to register their ops
    activation,
    attention,
    conv,
    creation,
    diag,
    einsum,
    fft,
    elementwise,
    elementwise_more,
    gather,
    index,
    linalg,
    loss,
    loss_ctc,
    loss_more,
    math,
    nn_misc,
    norm,
    normalization,
    pad,
    pool,
    reduce,
    reorder,
    rnn,
    scan,
    shape,
    sort,
    spatial,
    special_fns,
    special_poly,
    split,
    stats,
)
from .registry import REGISTRY, Op, op

__all__ = ["REGISTRY", "Op", "op"]
