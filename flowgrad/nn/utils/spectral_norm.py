"""The hook-based spectral_norm of torch.nn.utils (the older API, still common in published
GANs): the weight becomes the parameter `weight_orig` plus buffers `weight_u` and `weight_v`,
and a forward pre-hook divides it by its largest singular value, estimated by power iteration
while training.

>>> import flowgrad as flow
>>> m = spectral_norm(flow.nn.Linear(3, 2))
>>> sorted(n for n, _ in m.named_parameters()), sorted(n for n, _ in m.named_buffers())
(['bias', 'weight_orig'], ['weight_u', 'weight_v'])
"""
from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...ops.creation import randn
from ...ops.normalization import normalize
from ...torch_format import loadable
from ..parameter import Parameter
from .weight_norm import _find

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


@loadable  # (load(weights_only=False) rebuilds it)
class SpectralNorm:
    """The pre-hook: weight = weight_orig / sigma, sigma by power iteration (training)."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mat.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(normalize(mat.mv(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        return weight / (u * mat.mv(v)).sum()

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide `module.<name>` by its spectral norm before each forward (hook-based API)."""
    if _find(module, SpectralNorm, name)[1] is not None:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                           f"{name}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    mat = fn.matrix(weight.detach())
    h, w = mat.shape
    u = normalize(randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    v = normalize(randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Make `<name>` a plain parameter again, holding the normalised weight."""
    key, fn = _find(module, SpectralNorm, name)
    if fn is None:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    with no_grad():
        weight = fn.compute_weight(module, False)
    del module._forward_pre_hooks[key]
    delattr(module, name)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_u"], module._buffers[name + "_v"]
    module.register_parameter(name, Parameter(weight.detach()))
    return module
