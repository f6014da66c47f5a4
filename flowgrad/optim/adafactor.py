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
from ..autograd.grad_mode import enable_grad
from ..autograd.inplace import bump_version
from ..device import array_module, new_zeros
from ..sparse import SparseTensor
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
    """torch.optim.SparseAdam: Adam that updates only the entries a sparse gradient names
    (`Embedding(sparse=True)`'s: each row looked up, whatever its gradient), the moments of
    the others left as they are. A dense gradient is refused, as torch's; in nn.Graph's plans,
    whose embedding gradients are dense, the rows with a non-zero gradient are updated.

    >>> import flowgrad as flow
    >>> emb = flow.nn.Embedding(4, 2, sparse=True)
    >>> opt = flow.optim.SparseAdam(emb.parameters(), lr=0.1)
    >>> before = emb.weight.detach().clone()
    >>> emb(flow.tensor([1, 1])).sum().backward(); opt.step()
    >>> (emb.weight != before).any(1).tolist()
    [False, True, False, False]
    """

    _state_keys = frozenset({"step", "exp_avg", "exp_avg_sq"})
    # its step is the base class's after a check that the gradients are sparse: nn.Graph runs
    # it in a plan all the same (whose update nodes read dense gradients as sparse), and
    # hands it the plan's gradients as sparse when it steps it eagerly
    _takes_sparse_only = True

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

    def step(self, closure=None):
        """One update of every parameter with a (sparse) gradient; `closure` (optional)
        re-evaluates the model and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                m = p._meta
                if m is not None and m.acc_grad is not None and \
                        type(m.acc_grad) is not SparseTensor:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
        super().step()
        return loss

    def _check_sparse(self, group):
        """Sparse gradients are what SparseAdam takes."""

    def _step_one(self, p, g, group):
        if type(g) is not SparseTensor:
            return super()._step_one(p, g, group)
        state = self.state[p]
        if not state:
            self._init_state(p, group, state)
        g = (-g if group["maximize"] else g).coalesce()  # (the update is not linear in g)
        self._update_entries(p._data, tuple(g._idx._data), g._vals._data, state, group)
        bump_version(p)

    def _update(self, param, grad, state, group):
        """A dense gradient (nn.Graph's): the rows with a non-zero gradient, 1-D parameters
        element by element."""
        g = -grad if group["maximize"] else grad
        xp = array_module(param)
        g = g.reshape(1) if g.ndim == 0 else g
        if g.ndim > 1:
            rows = xp.flatnonzero(xp.any(g.reshape(g.shape[0], -1) != 0, axis=1))
        else:
            rows = xp.flatnonzero(g)
        self._update_entries(param, (rows,), g[rows], state, group)

    def _update_entries(self, param, where, gv, state, group):
        """torch's sparse_adam on the entries `where` (a tuple of index arrays, one per
        sparse dim) whose gradient values are `gv`."""
        state["step"] += 1
        if gv.size == 0:
            return
        step = state["step"]
        beta1, beta2 = group["betas"]
        xp = array_module(param)
        m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
        if param.ndim == 0:  # its one entry, through 1-element views (a 0-d sparse gradient
            # has no index array, a dense one's row indices index a 1-d array)
            param, m, v = param.reshape(1), m.reshape(1), v.reshape(1)
            where = where or (xp.zeros(gv.shape[0], dtype=xp.intp),)
        m[where] += (gv - m[where]) * (1 - beta1)
        v[where] += (gv * gv - v[where]) * (1 - beta2)
        step_size = group["lr"] * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        param[where] -= step_size * (m[where] / (xp.sqrt(v[where]) + group["eps"]))
