"""L-BFGS with an optional strong-Wolfe line search, as torch.optim.LBFGS (a port of its
algorithm: same two-loop recursion, history, stopping tests and cubic interpolation), on the
parameters' NumPy arrays flattened into one vector.

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.tensor([3.0, -2.0]))
>>> opt = flow.optim.LBFGS([w], line_search_fn="strong_wolfe")
>>> def closure():
...     opt.zero_grad()
...     loss = ((w - 1.0) ** 2).sum()
...     loss.backward()
...     return loss
>>> _ = opt.step(closure)
>>> [round(v, 4) for v in w.tolist()]
[1.0, 1.0]
"""
from __future__ import annotations

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.inplace import bump_version
from ..device import array_module, new_array, new_zeros
from ..tensor import Tensor
from .optimizer import Optimizer, _as_real, _plain_group

__all__ = ["LBFGS"]


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    # minimiser of the cubic through two points with their slopes, clamped to the bounds
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2
                                                                else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Step length t along d meeting the strong Wolfe conditions (bracketing, then zoom)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1],
                               bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) \
                    else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    t = bracket[low_pos]
    return bracket_f[low_pos], bracket_g[low_pos], t, ls_func_evals


def _real_flat(a):
    return (_as_real(a) if a.dtype.kind == "c" else a).reshape(-1)


def _loaded_state_as_arrays(state):
    """A state loaded from a state dict holds tensors (flowgrad's or torch's) where the
    step keeps arrays and numbers: convert them back."""
    def arr(v):
        if hasattr(v, "detach"):
            v = v.detach()
            return v.cpu().numpy() if hasattr(v, "cpu") else v.numpy()
        return v

    for key in ("d", "prev_flat_grad"):
        if state.get(key) is not None:
            state[key] = arr(state[key])
    for key in ("old_dirs", "old_stps"):
        if state.get(key) is not None:
            state[key] = [arr(v) for v in state[key]]
    for key in ("ro", "al"):
        if state.get(key) is not None:
            state[key] = [None if v is None else float(arr(v)) for v in state[key]]
    for key in ("t", "H_diag", "prev_loss"):
        if state.get(key) is not None and not isinstance(state[key], (int, float)):
            state[key] = float(arr(state[key]))


def _as_tensors(key, value, flat):
    """A state entry as torch keeps it: the flat vectors and the curvature numbers (ro, al,
    H_diag) as tensors on the device and dtype of `flat` (a flat gradient array); the counts,
    t and prev_loss as they are."""
    def tensor(v):
        if v is None:
            return None
        if getattr(v, "ndim", 0):  # an array already on the device
            return Tensor._wrap(v)
        return Tensor._wrap(new_array(flat, float(v), flat.dtype))

    if isinstance(value, list):
        return [tensor(v) for v in value]
    if key in ("d", "prev_flat_grad") or key == "H_diag" and not isinstance(value, int):
        return tensor(value)
    return value


class LBFGS(Optimizer):
    """torch.optim.LBFGS: `step(closure)` runs up to `max_iter` quasi-Newton iterations
    (history of `history_size` curvature pairs), with `line_search_fn="strong_wolfe"` or a
    fixed step `lr`. One parameter group only. See the module example."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):  # torch raises at the first step
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _state_dict(self):
        """As torch's: the state's vectors and curvature numbers as tensors (the step keeps
        them as arrays and floats), so a checkpoint loads in torch and compares with its."""
        state_dict = super()._state_dict()
        lr = self.param_groups[0]["lr"]
        for k, s in list(state_dict["state"].items()):
            flat = s.get("prev_flat_grad")
            if flat is None:
                continue
            s = state_dict["state"][k] = {key: _as_tensors(key, value, flat)
                                          for key, value in s.items()}
            if isinstance(lr, Tensor) and isinstance(s.get("t"), (int, float)):
                s["t"] = Tensor._wrap(new_array(flat, s["t"], lr._data.dtype))  # torch's t: lr
        return state_dict

    def _state_shape(self, key, shape):
        return None  # flat vectors over all the parameters, lists, numbers: not checked

    def _gather_flat_grad(self):
        # complex parameters count as their real and imaginary parts (torch.view_as_real)
        like = self._params[0]._data
        return array_module(like).concatenate([
            _real_flat(new_zeros(like, p._data.size, p._data.dtype) if p.grad is None
                       else p.grad.to_dense()._data if p.grad.is_sparse  # (torch's too)
                       else p.grad._data) for p in self._params])

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            data = p._data
            if data.dtype.kind == "c":
                data = _as_real(data)
            n = data.size
            data += (step_size * update[offset:offset + n]).reshape(data.shape) \
                .astype(data.dtype, copy=False)
            bump_version(p)
            offset += n

    def _set_param(self, params_data):
        for p, data in zip(self._params, params_data):
            p._data[...] = data
            bump_version(p)

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def step(self, closure):
        """One optimisation step: `closure()` zeroes the grads, computes and backpropagates
        the loss and returns it; returns the first loss."""
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that recomputes the loss")
        with no_grad():
            return self._step(closure)

    def _step(self, closure):  # noqa: C901 - torch's algorithm, kept in one piece
        def evaluate():
            with enable_grad():
                return closure()

        group = _plain_group(self.param_groups[0])
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError(f"LBFGS: only 'strong_wolfe' is supported as line_search_fn, "
                               f"got {line_search_fn!r}; pass line_search_fn=None or "
                               "'strong_wolfe'")
        state = self.state[self._params[0]]
        _loaded_state_as_arrays(state)
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                al = state.setdefault("al", [None] * history_size)  # (kept, as torch's)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q - al[i] * old_dirs[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p._data.copy() for p in self._params]
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda x, t, d: self._directional_evaluate(evaluate, x, t, d),
                    x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tolerance_change or abs(loss - prev_loss) < \
                    tolerance_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss
