"""The op library, one module per family. Importing it fills the registry and attaches
Tensor methods. `REGISTRY` maps op names to their kernel and gradient rule."""
from . import (  # noqa: F401 - imported to register their ops
    activation,
    creation,
    elementwise,
    index,
    linalg,
    loss,
    reduce,
    shape,
)
from .registry import REGISTRY, Op, op

__all__ = ["REGISTRY", "Op", "op"]
