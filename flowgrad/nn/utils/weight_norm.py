"""The hook-based weight_norm of torch.nn.utils (the older API, still common in published
models): the weight is split into parameters `weight_g` and `weight_v` and recomputed by a
forward pre-hook (spectral_norm, its sibling: spectral_norm.py).

>>> import flowgrad as flow
>>> m = weight_norm(flow.nn.Linear(3, 2), name="weight")
>>> sorted(n for n, _ in m.named_parameters())
['bias', 'weight_g', 'weight_v']
"""
from __future__ import annotations

from ..._warn import warn
from ...autograd.grad_mode import no_grad
from ...torch_format import loadable
from ..parameter import Parameter
from .parametrizations import norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


@loadable  # (load(weights_only=False) rebuilds it)
class WeightNorm:
    """The pre-hook: weight = g * v / ||v||."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def _find(module, cls, name):
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, cls) and hook.name == name:
            return key, hook
    return None, None


def weight_norm(module, name="weight", dim=0):
    """Split `module.<name>` into magnitude `<name>_g` and direction `<name>_v` (deprecated
    for parametrizations.weight_norm, as torch's)."""
    warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
         "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning)
    if _find(module, WeightNorm, name)[1] is not None:
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    fn = WeightNorm(name, dim)
    weight = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim)
                                                     .detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Fold g and v back into one parameter `<name>`."""
    key, fn = _find(module, WeightNorm, name)
    if fn is None:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    with no_grad():
        weight = fn.compute_weight(module)
    delattr(module, name)
    del module._parameters[name + "_g"], module._parameters[name + "_v"]
    module.register_parameter(name, Parameter(weight.detach()))
    del module._forward_pre_hooks[key]
    return module
