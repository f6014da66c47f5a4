"""flowgrad.func: torch.func's composable transforms (grad, vjp, jvp, jacrev, jacfwd,
hessian, vmap, functional_call) on flowgrad's interpreter levels.

>>> import flowgrad as flow
>>> from flowgrad.func import grad, vmap
>>> vmap(grad(lambda x: (x ** 3).sum()))(flow.tensor([[1.0], [2.0]]))
tensor([[ 3.],
        [12.]])
"""
from .ensembling import functionalize, replace_all_batch_norm_modules_, stack_module_state
from .rearrange import rearrange
from .transforms import (
    functional_call,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    vjp,
)
from .vmap import debug_unwrap, vmap

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "vmap", "linearize", "stack_module_state",
           "replace_all_batch_norm_modules_", "functionalize", "rearrange", "debug_unwrap"]
