"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from ..tensor import Tensor
from .optimizer import Optimizer, _no_differentiable, _validate

__all__ = ["SGD"]


class SGD(Optimizer):
    """torch.optim.SGD: with momentum mu, dampening tau and weight decay lambda,

        g = grad + lambda * p;  b = mu * b + (1 - tau) * g  (b = g on the first step)
        g = g + mu * b if nesterov else b;  p = p - lr * g

    >>> import flowgrad as flow
    >>> w = flow.ones(2, requires_grad=True)
    >>> opt = flow.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> w.sum().backward(); opt.step(); w.detach()
    tensor([0.9000, 0.9000])
    """

    _state_keys = frozenset({"momentum_buffer"})

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _validate("learning rate", lr)
        _validate("momentum value", momentum)
        _validate("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _no_differentiable("SGD", differentiable, fused)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        wd, momentum = group["weight_decay"], group["momentum"]
        if wd != 0:
            g = g + wd * param
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = Tensor._wrap(g.copy())
            else:
                b = buf._data
                b *= momentum
                b += (1 - group["dampening"]) * g
            g = g + momentum * buf._data if group["nesterov"] else buf._data
        param += -group["lr"] * g
