"""Adafactor (factored second moments) and SparseAdam, with torch's update formulas.

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.ones(2, 3))
>>> opt = flow.optim.Adafactor([w], lr=0.01)
>>> (w * w).sum().backward(); _ = opt.step(); round(w[0, 0].item(), 4)
0.99
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dt
from ..device import array_module, new_zeros
from ..tensor import Tensor
from .adam import _advance, _step_tensor
from .optimizer import Optimizer

__all__ = ["Adafactor", "SparseAdam"]


class Adafactor(Optimizer):
    """torch.optim.Adafactor: the second moment of a matrix gradient is kept as a row and a
    column factor; the step is relative to the parameter's RMS and clipped by `d`."""

    _state_keys = frozenset({"step", "row_var", "col_var", "variance"})

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        checks = [(0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}"),
                  (0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}"),
                  (eps[0] is None or 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}"),
                  (0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}"),
                  (1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}"),
                  (0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _check_group(self, group):
        for p in group["params"]:
            if p.grad is not None and p._data.dtype.kind == "c":
                self._update_complex(None, None, None, group)

    def _update_complex(self, param, grad, state, group):
        raise RuntimeError("Adafactor does not support complex parameters; optimize the "
                           "real and imaginary parts as real parameters (torch.view_as_real)")

    def _state_shape(self, key, shape):
        """The shape of state `key` of a parameter of shape `shape` (its factors)."""
        if key == "row_var" and len(shape) > 1:
            return (*shape[:-1], 1)
        if key == "col_var" and len(shape) > 1:
            return (*shape[:-2], 1, shape[-1])
        return shape

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        shape = p._data.shape
        if len(shape) > 1:
            state["row_var"] = Tensor._wrap(new_zeros(p._data, (*shape[:-1], 1)))
            state["col_var"] = Tensor._wrap(new_zeros(p._data, (*shape[:-2], 1, shape[-1])))
        else:
            state["variance"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        xp = array_module(param)
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = _dt.finfo(_dt.from_numpy_dtype(param.dtype)).eps  # (bfloat16's too)
        step = _advance(state)
        lr = group["lr"]
        beta2_t = step ** group["beta2_decay"]
        rho = min(lr, 1 / step ** 0.5)
        alpha = max(eps2, float(xp.sqrt((param.astype(np.float64) ** 2).sum()))
                    / param.size ** 0.5) * rho
        if group["weight_decay"] != 0:
            param *= 1 - lr * group["weight_decay"]
        if g.ndim > 1:
            row, col = state["row_var"]._data, state["col_var"]._data
            row += beta2_t * ((g * g).sum(-1, keepdims=True) / g.shape[-1] - row)
            col += beta2_t * ((g * g).sum(-2, keepdims=True) / g.shape[-2] - col)
            var = (row @ col) / xp.maximum(row.mean(-2, keepdims=True), eps1)
        else:
            var = state["variance"]._data
            var += beta2_t * (g * g - var)
            var = var.copy()
        update = 1 / xp.sqrt(xp.maximum(var, eps1 * eps1)) * g
        denom = max(1.0, float(xp.sqrt((update.astype(np.float64) ** 2).sum()))
                    / (update.size ** 0.5 * group["d"]))
        param -= (alpha / denom) * update.astype(param.dtype, copy=False)


class SparseAdam(Optimizer):
    """torch.optim.SparseAdam: Adam that updates only the entries a gradient touches.
    flowgrad has no sparse layout, so a dense gradient is read as sparse: a row of a
    matrix (an embedding row) with any non-zero gradient is updated, as torch updates the
    rows present in the sparse gradient of `Embedding(sparse=True)`; 1-D parameters are
    masked element by element."""

    _state_keys = frozenset({"step", "exp_avg", "exp_avg_sq"})

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def _init_state(self, p, group, state):
        state["step"] = 0
        state["exp_avg"] = Tensor._wrap(new_zeros(p._data))
        state["exp_avg_sq"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        g = -grad if group["maximize"] else grad
        state["step"] += 1
        step = state["step"]
        beta1, beta2 = group["betas"]
        xp = array_module(param)
        if g.ndim > 1:
            rows = xp.flatnonzero(xp.any(g.reshape(g.shape[0], -1) != 0, axis=1))
        else:
            rows = xp.flatnonzero(g)
        m, v, gv = state["exp_avg"]._data, state["exp_avg_sq"]._data, g[rows]
        m[rows] += (gv - m[rows]) * (1 - beta1)
        v[rows] += (gv * gv - v[rows]) * (1 - beta2)
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        param[rows] -= step_size * (m[rows] / (xp.sqrt(v[rows]) + group["eps"]))
