"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

import numpy as np

from ..blas import axpby, axpy, takes
from ..device import new_empty
from ..tensor import Tensor
from ._foreach import SMALL, apply, bump, fast_dtype, plain_numbers
from .optimizer import Optimizer, _check_flags, _validate

__all__ = ["SGD"]


class SGD(Optimizer):
    """torch.optim.SGD: with momentum mu, dampening tau and weight decay lambda,

        g = grad + lambda * p;  b = mu * b + (1 - tau) * g  (b = g on the first step)
        g = g + mu * b if nesterov else b;  p = p - lr * g

    OneFlow's `contiguous_params` (one buffer for all parameters, a speed option) is
    accepted and changes nothing: small parameters are already stepped in batches.

    >>> import flowgrad as flow
    >>> w = flow.ones(2, requires_grad=True)
    >>> opt = flow.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> w.sum().backward(); opt.step(); w.detach()
    tensor([0.9000, 0.9000])
    """

    _state_keys = frozenset({"momentum_buffer"})
    _foreach_differentiable = True  # (torch's foreach ops record autograd: the same numbers)

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None, contiguous_params=False):
        _validate("learning rate", lr)
        _validate("momentum value", momentum)
        _validate("weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_flags(fused, foreach, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        if fused:  # torch's: GradScaler.step hands the step its scale (see grad_scaler.py)
            self._step_supports_amp_scaling = True

    def _check_sparse(self, group):
        """A sparse gradient is read as its dense form (the same update), as torch takes it,
        but not with weight decay (torch's add(sparse, dense) raises) or fused=True."""
        if group.get("fused"):
            raise RuntimeError("`_fused_sgd` does not support sparse gradients")
        if group["weight_decay"] != 0:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                               "instead. (SGD with weight_decay takes no sparse gradient)")

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        wd, momentum = group["weight_decay"], group["momentum"]
        if wd != 0:  # (the number in param's dtype: ml_dtypes < 0.7 makes bfloat16 * 0.1 float32)
            g = g + param * param.dtype.type(wd)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = Tensor._wrap(g.copy())
            else:
                axpby(buf._data, 1 - group["dampening"], g, momentum)
            g = g + buf._data * buf._data.dtype.type(momentum) if group["nesterov"] else buf._data
        axpy(param, -group["lr"], g)

    def _batched(self, group):
        return plain_numbers(group["lr"], group["momentum"], group["dampening"],
                             group["weight_decay"])

    @staticmethod
    def _plain_rate(group):
        """-lr when the group's step is plain SGD, p -= lr * g (no momentum, weight decay or
        maximize; a number lr), else None. nn.Graph's plans ask it on every run, and where it
        holds may compute the step inside the gradient's own GEMM (optimizer_pass.py)."""
        lr = group["lr"]
        if type(lr) is not float and type(lr) is not int or group["momentum"] != 0 or \
                group["weight_decay"] != 0 or group["maximize"] or group.get("fused") or \
                group.get("foreach") is False:
            return None
        return -lr

    def _step_plain(self, group, params, grads):
        """p -= lr * g for each parameter and gradient array, when the group is plain SGD
        (`_plain_rate`) and every pair is a floating CPU array of one dtype; False, updating
        nothing, otherwise. nn.Graph's update nodes call it on every run of a plan
        (`_step_params`' bookkeeping was most of a small update)."""
        neg_lr = self._plain_rate(group)
        if neg_lr is None or not all(fast_dtype(p._data, g) for p, g in zip(params, grads)):
            return False
        for p, gd in zip(params, grads):
            pd = p._data
            if takes(pd):  # a large parameter: BLAS's one pass
                axpy(pd, neg_lr, gd)
            else:
                pd += neg_lr * gd
            bump(p)
        return True

    def _step_group(self, group):
        lr, momentum, wd = group["lr"], group["momentum"], group["weight_decay"]
        damp1 = 1 - group["dampening"]
        args = (-lr, momentum, damp1, wd, bool(group["nesterov"]), bool(group["maximize"]))
        first_args = args + (True,)
        args += (False,)
        scratch, states = self._scratch(), self.state
        packer = self._packer(group, _sgd_kernel, 3, (0, 2))
        neg_lr = -lr
        plain = momentum == 0 and wd == 0 and not group["maximize"]
        for p, g, pd, gd in self._batchable(group):
            if takes(pd):  # a large parameter: BLAS's fused passes over the whole array
                # (a state entry only where there is state: torch makes none without momentum)
                self._update(pd, gd, states[p] if momentum != 0 else None, group)
                bump(p)
                continue
            a = args
            buf = None
            if momentum != 0:
                state = states[p]
                bt = state.get("momentum_buffer")
                if bt is None:
                    bt = state["momentum_buffer"] = Tensor._wrap(new_empty(pd))
                    a = first_args
                buf = bt._data
                if buf.dtype is not pd.dtype and buf.dtype != pd.dtype:
                    self._step_one(p, g, group)
                    continue
            if plain and pd.size <= SMALL:
                pd += neg_lr * gd  # the whole update: one call beats packing
            elif packer is not None and pd.size <= SMALL:
                packer.add((pd, gd, buf), a)
            else:
                apply(_sgd_kernel, scratch, (pd, gd, buf), a)
            bump(p)
        if packer is not None:
            packer.flush()


def _sgd_kernel(arrays, tmps, args):
    """SGD._update with `out=` into the scratch arrays t1, t2 (the same operations)."""
    p, g, b = arrays
    t1, t2 = tmps
    neg_lr, momentum, damp1, wd, nesterov, maximize, first = args
    if maximize:
        np.negative(g, out=t1)
        g = t1
    if wd != 0:
        np.multiply(p, wd, out=t2)
        np.add(g, t2, out=t1)
        g = t1
    if b is not None:
        if first:
            np.copyto(b, g)
        else:
            b *= momentum
            if damp1 == 1:  # 1 * g is g exactly
                b += g
            else:
                np.multiply(g, damp1, out=t2)
                b += t2
        if nesterov:
            np.multiply(b, momentum, out=t2)
            np.add(g, t2, out=t2)
            g = t2
        else:
            g = b
    np.multiply(g, neg_lr, out=t2)
    p += t2
