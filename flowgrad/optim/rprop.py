"""Rprop and ASGD, with torch's update formulas.

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.tensor([1.0, -1.0]))
>>> opt = flow.optim.Rprop([w], lr=0.1)
>>> (w * w).sum().backward(); _ = opt.step(); w
Parameter containing:
tensor([ 0.9000, -0.9000], requires_grad=True)
"""
from __future__ import annotations

from ..device import array_module, new_full, new_zeros
from ..dtypes import get_default_dtype
from ..tensor import Tensor
from .adam import _advance, _step_tensor, scalar_dtype
from .optimizer import Optimizer, _validate

__all__ = ["Rprop", "ASGD"]


class Rprop(Optimizer):
    """torch.optim.Rprop: a per-element step size grows by etas[1] while the gradient keeps
    its sign and shrinks by etas[0] when it flips (that step is skipped); p -= sign(g) step."""

    _state_keys = frozenset({"step", "prev", "step_size"})

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _validate("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["prev"] = Tensor._wrap(new_zeros(p._data))
        lr = group["lr"]
        if isinstance(lr, Tensor):  # torch.full_like(grad, lr) (complex(lr, lr) takes any)
            if lr.requires_grad and p._data.dtype.kind != "c":
                raise TypeError("full_like(): argument 'fill_value' (position 2) must be "
                                "Number, not Tensor (Rprop's initial step sizes take the lr "
                                "as a number: give an lr that does not require grad)")
            lr = lr.item()
        if p._data.dtype.kind == "c":  # torch: lr for the real and the imaginary parts
            lr = complex(lr, lr)
        state["step_size"] = Tensor._wrap(new_full(p._data, lr))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        _advance(state)
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        prev, step_size = state["prev"]._data, state["step_size"]._data
        xp = array_module(param)
        sign = xp.sign(g * prev)
        factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0))
        step_size *= factor.astype(step_size.dtype)
        xp.clip(step_size, lo, hi, out=step_size)
        g = xp.where(factor == etaminus, 0, g).astype(param.dtype, copy=False)
        param -= xp.sign(g) * step_size
        prev[...] = g


class ASGD(Optimizer):
    """torch.optim.ASGD (averaged SGD): p = p (1 - lambd eta) - eta g; the running average
    `ax` of the iterates starts after t0 steps; eta = lr / (1 + lambd lr step)^alpha."""

    _state_keys = frozenset({"step", "eta", "mu", "ax"})
    _capturable_names = "params, mus, etas, and state_steps"

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _validate("learning rate", lr)
        _validate("weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        lr = group["lr"]  # (torch.as_tensor(lr).clone().detach(): a tensor lr's value)
        lr = lr.item() if isinstance(lr, Tensor) else lr
        state["eta"] = Tensor._wrap(new_full(p._data, lr, (), scalar_dtype()))
        state["mu"] = Tensor._wrap(new_full(p._data, 1.0, (), scalar_dtype()))
        state["ax"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        step = _advance(state)
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * param
        eta, mu = float(state["eta"]._data), float(state["mu"]._data)
        param *= 1 - group["lambd"] * eta
        param -= eta * g
        ax = state["ax"]._data
        if mu != 1:
            ax += (param - ax) * mu
        else:
            ax[...] = param
        lr, lambd = group["lr"], group["lambd"]
        # torch makes each new value a tensor of the default dtype (torch.as_tensor) and copies
        # it in: a state loaded into float64 still gets float32-rounded values
        scalar = get_default_dtype().np.type
        state["eta"]._data[...] = scalar(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        state["mu"]._data[...] = scalar(1 / max(1, step - group["t0"]))
