"""RMSprop (Hinton), with centering, momentum and weight decay."""
from __future__ import annotations

from ..device import array_module, new_zeros
from ..tensor import Tensor
from .adam import _advance, _step_tensor
from .optimizer import Optimizer, _lerp_, _validate

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """torch.optim.RMSprop:

        v = alpha v + (1-alpha) g^2;  (centered: v~ = v - ga^2, ga = mean of g)
        b = momentum b + g / (sqrt(v~) + eps);  p = p - lr b   (or p - lr g / (...))
    """

    _state_keys = frozenset({"step", "square_avg", "momentum_buffer", "grad_avg"})

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _validate("learning rate", lr)
        _validate("epsilon value", eps)
        _validate("momentum value", momentum)
        _validate("weight_decay value", weight_decay)
        _validate("alpha value", alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["square_avg"] = Tensor._wrap(new_zeros(p._data))
        if group["momentum"] > 0:
            state["momentum_buffer"] = Tensor._wrap(new_zeros(p._data))
        if group["centered"]:
            state["grad_avg"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        _advance(state)
        alpha, momentum = group["alpha"], group["momentum"]
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * param
        sq = state["square_avg"]._data
        sq *= alpha
        sq += (1 - alpha) * g * g
        if group["centered"]:
            ga = state.setdefault("grad_avg", Tensor._wrap(new_zeros(param)))._data
            _lerp_(ga, g, 1 - alpha)
            avg = array_module(sq).sqrt(sq + (-1 * ga) * ga)
        else:
            avg = array_module(sq).sqrt(sq)
        avg += group["eps"]
        if momentum > 0:
            buf = state.setdefault("momentum_buffer", Tensor._wrap(new_zeros(param)))._data
            buf *= momentum
            buf += g / avg
            param += -group["lr"] * buf
        else:
            param += -group["lr"] * (g / avg)
