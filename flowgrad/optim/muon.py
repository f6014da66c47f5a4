"""Muon: momentum, then the update orthogonalized by a Newton-Schulz iteration (torch.optim.Muon).

For the 2-D weights of hidden layers; biases, embeddings and other parameters go to another
optimizer (AdamW). As torch's, the iteration runs in bfloat16: each product is accumulated in
float32 and rounded to bfloat16, as torch's CPU bfloat16 matmul does.

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.eye(2) * 2.0)
>>> opt = flow.optim.Muon([w], lr=0.1)
>>> (w * w).sum().backward(); _ = opt.step(); [round(v, 4) for v in w.diagonal().tolist()]
[1.8675, 1.8675]
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..device import array_module, new_zeros
from ..tensor import Tensor
from .optimizer import Optimizer, _lerp_

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5
_BF16 = ml_dtypes.bfloat16


def _bf16(xp, value):
    """float32 values rounded to bfloat16 and back to float32 (the precision of a bfloat16
    tensor, kept in a dtype BLAS multiplies)."""
    return xp.asarray(value, np.float32).astype(_BF16).astype(np.float32)


def zeropower_via_newtonschulz(xp, grad, ns_coefficients, ns_steps, eps):
    """The Newton-Schulz iteration of torch's Muon (quintic, coefficients a, b, c): roughly
    U S' V^T for grad = U S V^T with S' near 1; a bfloat16-valued float32 array."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = _bf16(xp, grad)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    norm = _bf16(xp, xp.sqrt((x * x).sum(dtype=np.float32)))
    x = _bf16(xp, x / max(norm, _bf16(xp, eps)))
    for _ in range(ns_steps):
        gram = _bf16(xp, x @ x.T)
        update = _bf16(xp, b * gram + c * (gram @ gram))
        x = _bf16(xp, a * x + update @ x)
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    return lr


class Muon(Optimizer):
    """torch.optim.Muon: for each 2-D parameter, a momentum buffer (Nesterov by default), its
    Newton-Schulz orthogonalization, decoupled weight decay and a step scaled by the
    parameter's shape (`adjust_lr_fn`: None or "original", or "match_rms_adamw")."""

    _state_keys = frozenset({"momentum_buffer"})

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C), eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()} (give 1-D and other "
                                     f"parameters to another optimizer, e.g. AdamW)")

    def _check_group(self, group):
        for p in group["params"]:
            if p.grad is not None and p._data.dtype.kind == "c":
                raise RuntimeError("Muon does not support complex parameters")

    def _init_state(self, p, group, state):
        state["momentum_buffer"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        xp = array_module(param)
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        momentum = group["momentum"]
        buf = state["momentum_buffer"]._data
        _lerp_(buf, grad, 1 - momentum)
        if group["nesterov"]:
            update = grad.copy()
            _lerp_(update, buf, momentum)
        else:
            update = buf
        update = zeropower_via_newtonschulz(xp, update, group["ns_coefficients"],
                                            group["ns_steps"], group["eps"])
        lr = group["lr"]
        param *= 1 - lr * group["weight_decay"]
        param -= _adjust_lr(lr, group["adjust_lr_fn"], param.shape) * update.astype(
            param.dtype, copy=False)
