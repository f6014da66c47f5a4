"""Adagrad and Adadelta: per-coordinate learning rates from accumulated squared grads."""
from __future__ import annotations

from ..device import array_module, new_full, new_zeros
from ..tensor import Tensor
from .adam import _advance, _step_tensor
from .optimizer import Optimizer, _check_flags, _validate

__all__ = ["Adagrad", "Adadelta"]


class Adagrad(Optimizer):
    """torch.optim.Adagrad (Duchi et al.):

        lr_t = lr / (1 + (t-1) lr_decay);  s = s + g^2;  p = p - lr_t g / (sqrt(s) + eps)

    Its state exists from construction (sum starts at `initial_accumulator_value`), as
    torch's does.
    """

    _state_keys = frozenset({"step", "sum"})

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _validate("learning rate", lr)
        _validate("lr_decay value", lr_decay)
        _validate("weight_decay value", weight_decay)
        _validate("initial_accumulator_value value", initial_accumulator_value)
        _validate("epsilon value", eps)
        _check_flags(fused, foreach, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)
        if fused:  # torch's: GradScaler.step hands the step its scale (see grad_scaler.py)
            self._step_supports_amp_scaling = True
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group, self.state[p])

    def _check_sparse(self, group):
        """A sparse gradient is read as its dense form (the rows it names change, the others
        take a zero step: torch's sparse update), but not with weight decay (torch's) or
        fused=True."""
        if group.get("fused"):
            raise RuntimeError("`fused` does not support sparse grad or complex param")
        if group["weight_decay"] != 0:
            raise RuntimeError("weight_decay option is not compatible with sparse gradients")

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        # torch reads the constructor's value (self.defaults), not the group's, and fills
        # both parts of a complex parameter's accumulator with it
        init = self.defaults["initial_accumulator_value"]
        if p._data.dtype.kind == "c":
            init = complex(init, init)
        state["sum"] = Tensor._wrap(new_full(p._data, init))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        step = _advance(state)
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * param
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        s = state["sum"]._data
        s += 1 * g * g
        std = array_module(s).sqrt(s)
        std += group["eps"]
        param += -clr * (g / std)


class Adadelta(Optimizer):
    """torch.optim.Adadelta (Zeiler):

        v = rho v + (1-rho) g^2;  d = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho u + (1-rho) d^2;  p = p - lr d
    """

    _state_keys = frozenset({"step", "square_avg", "acc_delta"})

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _validate("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _validate("epsilon value", eps)
        _validate("weight_decay value", weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["square_avg"] = Tensor._wrap(new_zeros(p._data))
        state["acc_delta"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        _advance(state)
        rho, eps = group["rho"], group["eps"]
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * param
        sq, acc = state["square_avg"]._data, state["acc_delta"]._data
        sq *= rho
        sq += (1 - rho) * g * g
        xp = array_module(sq)
        std = xp.sqrt(sq + eps)
        delta = xp.sqrt(acc + eps)
        delta /= std
        delta *= g
        acc *= rho
        acc += (1 - rho) * delta * delta
        param += -group["lr"] * delta
