"""The op library, one module per family. Importing it fills the registry and attaches
Tensor methods. `REGISTRY` maps op names to their kernel and gradient rule."""
from . import (  # noqa: F401 - imported to register their ops
    activation,
    attention,
    complex,
    conv,
    creation,
    diag,
    einsum,
    elementwise,
    elementwise_more,
    fft,
    gather,
    index,
    linalg,
    linalg_decomp,
    linalg_eig,
    linalg_func,
    linalg_solve,
    loss,
    loss_ctc,
    loss_more,
    math,
    nn_misc,
    norm,
    normalization,
    odds,
    pad,
    pool,
    pool_more,
    reduce,
    reduce_nan,
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

complex.mark_complex_ops()

__all__ = ["REGISTRY", "Op", "op"]
