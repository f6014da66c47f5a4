"""The op library, one module per family. Importing it fills the registry and attaches
Tensor methods. `REGISTRY` maps op names to their kernel and gradient rule."""
from . import (  # noqa: F401 - imported to register their ops
    activation,
    attention,
    complex,
    conv,
    creation,
    creation_extra,
    diag,
    einsum,
    elementwise,
    elementwise_more,
    fft,
    gather,
    index,
    index_functions,
    jvp_rules,
    linalg,
    linalg_decomp,
    linalg_eig,
    linalg_func,
    linalg_ldl,
    linalg_solve,
    loss,
    loss_ctc,
    loss_more,
    math,
    nn_misc,
    node_names,
    norm,
    normalization,
    odds,
    pad,
    pool,
    pool_more,
    random_fill,
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
    stacks,
    stats,
    strided,
    transfer,
    view_scatter,
)
from .registry import REGISTRY, Op, op

complex.mark_complex_ops()

__all__ = ["REGISTRY", "Op", "op"]

CUSTOM_NAMESPACES = []  # flowgrad.library's lookup, registered when it is imported


def __getattr__(name):
    """`flowgrad.ops.<namespace>`: the custom ops `flowgrad.library.custom_op` made there
    (torch.ops.mylib.my_op)."""
    found = CUSTOM_NAMESPACES[0](name) if CUSTOM_NAMESPACES else None
    if found is None:
        raise AttributeError(f"module 'flowgrad.ops' has no attribute {name!r}")
    return found
