"""Model ensembling helpers of torch.func: `stack_module_state` (one stacked tensor per
parameter and buffer of several same-shaped models, to `vmap` a `functional_call` over),
`replace_all_batch_norm_modules_` (batch norm without running statistics, which vmap cannot
update), and `functionalize` (eager flowgrad runs mutations as written: the same numbers).

>>> import flowgrad as flow
>>> from flowgrad.func import functional_call, stack_module_state, vmap
>>> models = [flow.nn.Linear(3, 2) for _ in range(4)]
>>> params, buffers = stack_module_state(models)
>>> params["weight"].shape
flowgrad.Size([4, 2, 3])
>>> run = lambda p, b, x: functional_call(models[0], (p, b), (x,))
>>> vmap(run, in_dims=(0, 0, None))(params, buffers, flow.ones(5, 3)).shape
flowgrad.Size([4, 5, 2])
"""
from __future__ import annotations

import functools

from ..ops.shape import stack

__all__ = ["stack_module_state", "replace_all_batch_norm_modules_", "functionalize"]


def _stacked_leaf(tensors, name):
    grads = {t.requires_grad for t in tensors}
    if len(grads) > 1:
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    return result.detach().requires_grad_() if grads == {True} else result


def stack_module_state(models):
    """({name: parameters stacked along a new dim 0}, {name: buffers stacked}) of `models`
    (same class, same mode); the stacked parameters are new leaves, detached from the
    models', that an optimizer can take."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode.")
    if len({type(m) for m in models}) > 1:
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return ({k: _stacked_leaf([p[k] for p in params], k) for k in params[0]},
            {k: _stacked_leaf([b[k] for b in buffers], k) for k in buffers[0]})


def replace_all_batch_norm_modules_(root):
    """In place: every batch norm module under `root` stops tracking running statistics (it
    normalises by the batch's own, in training and eval). Returns `root`."""
    from ..nn.modules.normalization import _BatchNorm

    for module in root.modules():
        if isinstance(module, _BatchNorm):
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root


def functionalize(func, *, remove="mutations"):
    """`func` with its mutations removed (torch.func's). flowgrad's transforms run in-place
    ops as written, with the same results, so this is `func` itself, wrapped."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize (got remove={remove!r}): only 'mutations' and "
                           f"'mutations_and_views' are currently supported")

    @functools.wraps(func)
    def functionalized(*args, **kwargs):
        return func(*args, **kwargs)
    return functionalized
