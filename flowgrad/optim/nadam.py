"""NAdam (Nesterov-accelerated Adam) and RAdam (rectified Adam)."""
from __future__ import annotations

import numpy as np

from ..device import new_full, new_zeros
from ..tensor import Tensor
from ._differentiable import radam_rectification
from .adam import (
    _advance,
    _check_betas,
    _decayed_grad,
    _step_tensor,
    _update_moments,
    check_moment_dtype,
    scalar_dtype,
)
from .optimizer import Optimizer, _validate

__all__ = ["NAdam", "RAdam"]


class NAdam(Optimizer):
    """torch.optim.NAdam (Dozat): Adam with a Nesterov momentum schedule
    mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay)); `decoupled_weight_decay=True` gives
    NAdamW."""

    _state_keys = frozenset({"step", "mu_product", "exp_avg", "exp_avg_sq"})
    _capturable_names = "params, mu_products and state_steps"

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _check_betas(lr, eps, betas, weight_decay)
        _validate("momentum_decay value", momentum_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["mu_product"] = Tensor._wrap(new_full(p._data, 1.0, (), scalar_dtype()))
        state["exp_avg"] = Tensor._wrap(new_zeros(p._data))
        state["exp_avg_sq"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        check_moment_dtype(state, grad)
        g = _decayed_grad(param, grad, group)
        step = _advance(state)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        bias_correction2 = 1 - beta2 ** step
        decay = group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * decay))
        mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * decay))
        mu_product = state["mu_product"]._data
        mu_product *= mu  # a product in the scalar dtype, as torch keeps it
        m, v = _update_moments(state, g, beta1, beta2)
        denom = np.sqrt(v / bias_correction2)
        denom += group["eps"]
        mu_prod = float(mu_product)
        mu_product_next = mu_prod * mu_next
        param += (-lr * (1.0 - mu) / (1.0 - mu_prod)) * (g / denom)
        param += ((-lr * mu_next) / (1.0 - mu_product_next)) * (m / denom)


class RAdam(Optimizer):
    """torch.optim.RAdam (Liu et al.): Adam whose adaptive term is switched on only once the
    variance of the adaptive learning rate is tractable (rho_t > 5), with a rectification."""

    _state_keys = frozenset({"step", "exp_avg", "exp_avg_sq"})

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _check_betas(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["exp_avg"] = Tensor._wrap(new_zeros(p._data))
        state["exp_avg_sq"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        check_moment_dtype(state, grad)
        g = _decayed_grad(param, grad, group)
        step = _advance(state)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        m, v = _update_moments(state, g, beta1, beta2)
        corrected = m / (1 - beta1 ** step)
        bias_correction2, rect = radam_rectification(beta2, step)
        if rect is not None:
            adaptive = (bias_correction2 ** 0.5) / (np.sqrt(v) + group["eps"])
            param += -1.0 * (corrected * lr * adaptive * rect)
        else:
            param += -1.0 * (corrected * lr)
