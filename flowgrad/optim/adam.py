"""Adam, AdamW and Adamax: first and second moment estimates with bias correction."""
from __future__ import annotations

import numpy as np

from ..device import array_module, new_zeros
from ..dtypes import get_default_dtype
from ..tensor import Tensor
from ._foreach import SMALL, advance, apply, bump, plain_numbers
from .optimizer import Optimizer, _check_flags, _lerp_, _validate

__all__ = ["Adam", "AdamW", "Adamax"]


def scalar_dtype():
    """The dtype of an optimizer's scalar state (the step count, NAdam's mu_product, ASGD's
    eta and mu), as torch's `_get_scalar_dtype`: float64 under a float64 default dtype, else
    float32."""
    return np.dtype(np.float64) if get_default_dtype().np == np.float64 else \
        np.dtype(np.float32)


def _step_tensor():
    # torch keeps the step count as a 0-d tensor of `scalar_dtype`; state dicts carry it so
    return Tensor._zeros((), scalar_dtype())  # on the CPU, as torch's (not capturable)


def _advance(state):
    step = state["step"]._data
    step += 1
    return float(step)


def _decayed_grad(param, grad, group):
    """The gradient the Adam family steps with: negated under `maximize`, then weight decay,
    either added to it (L2) or applied to the parameter itself (decoupled, AdamW)."""
    g = -grad if group["maximize"] else grad
    wd = group["weight_decay"]
    if wd != 0:
        if group.get("decoupled_weight_decay", False):
            param *= 1 - group["lr"] * wd
        else:
            g = g + wd * param
    return g


def check_moment_dtype(state, grad):
    """torch's lerp_ refusal of a first moment of another dtype than the gradient (the model's
    dtype changed after steps: model.double()), raised before anything is written."""
    m = state["exp_avg"]._data
    if m.dtype != grad.dtype:
        raise RuntimeError(
            f"expected dtype {m.dtype} for `end` but got dtype {grad.dtype}: the optimizer's "
            f"state is {m.dtype} and the gradient {grad.dtype} (the model's dtype changed "
            f"after steps); make the optimizer again after changing the model's dtype")


def _update_moments(state, g, beta1, beta2):
    """In place: m <- lerp(m, g, 1 - beta1), v <- beta2 v + (1 - beta2) g^2; returns m, v."""
    m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
    _lerp_(m, g, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * g * g
    return m, v


def _bias_corrections(group, lr, beta1, beta2, step):
    """(lr / (1 - b1^t), sqrt(1 - b2^t)); (lr, 1) under OneFlow's do_bias_correction=False."""
    if not group.get("do_bias_correction", True):
        return lr, 1.0
    return lr / (1 - beta1 ** step), (1 - beta2 ** step) ** 0.5


def _check_betas(lr, eps, betas, weight_decay):
    _validate("learning rate", lr)
    _validate("epsilon value", eps)
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
    _validate("weight_decay value", weight_decay)


def _check_tensor_options(lr, betas, foreach, capturable):
    """torch.optim.Adam's checks of tensor hyperparameters: a tensor lr or tensor betas need
    foreach=False (or None) without capturable, and the betas are both floats or both
    tensors (an int beta is refused: write 0.0, not 0)."""
    batched = foreach and not capturable
    if isinstance(lr, Tensor) and batched:
        raise ValueError("lr as a Tensor is not supported for capturable=False and "
                         "foreach=True; pass lr as a float, or foreach=False")
    if not (all(isinstance(b, float) for b in betas)
            or all(isinstance(b, Tensor) for b in betas)):
        raise ValueError("betas must be either both floats or both Tensors (got "
                         f"{tuple(type(b).__name__ for b in betas)}); write 0.0, not 0")
    for i, b in enumerate(betas):
        if isinstance(b, Tensor):
            if batched:
                raise ValueError(f"betas[{i}] as a Tensor is not supported for "
                                 "capturable=False and foreach=True; pass floats, or "
                                 "foreach=False")
            if b.numel() != 1:
                raise ValueError(f"Tensor betas[{i}] must be 1-element")


class Adam(Optimizer):
    """torch.optim.Adam (Kingma & Ba), with amsgrad, L2 weight decay and maximize:

        m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
        p = p - lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)

    OneFlow's options: `do_bias_correction=False` drops both (1-b^t) factors;
    `contiguous_params` is accepted and changes nothing (see SGD).

    >>> import flowgrad as flow
    >>> w = flow.ones(2, requires_grad=True)
    >>> opt = flow.optim.Adam([w], lr=0.1)
    >>> w.sum().backward(); opt.step(); w.detach()
    tensor([0.9000, 0.9000])
    """

    _sparse_error = "Adam does not support sparse gradients, please consider SparseAdam instead"

    _state_keys = frozenset({"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
    _refuses_step_requiring_grad = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False,
                 do_bias_correction=True, contiguous_params=False):
        _check_tensor_options(lr, betas, foreach, capturable)
        _check_betas(lr, eps, betas, weight_decay)
        _check_flags(fused, foreach, differentiable)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        if not do_bias_correction:  # OneFlow's option; absent (True) keeps torch's groups
            defaults["do_bias_correction"] = False
        super().__init__(params, defaults)
        if fused:  # torch's: GradScaler.step hands the step its scale (see grad_scaler.py)
            self._step_supports_amp_scaling = True

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["exp_avg"] = Tensor._wrap(new_zeros(p._data))
        state["exp_avg_sq"] = Tensor._wrap(new_zeros(p._data))
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        check_moment_dtype(state, grad)
        g = _decayed_grad(param, grad, group)
        step = _advance(state)
        lr, (beta1, beta2) = group["lr"], group["betas"]
        m, v = _update_moments(state, g, beta1, beta2)
        step_size, bias_correction2_sqrt = _bias_corrections(group, lr, beta1, beta2, step)
        xp = array_module(param)
        if group["amsgrad"]:
            if "max_exp_avg_sq" not in state:  # amsgrad switched on after the first step
                state["max_exp_avg_sq"] = Tensor._wrap(new_zeros(param))
            vmax = state["max_exp_avg_sq"]._data
            xp.maximum(vmax, v, out=vmax)
            denom = xp.sqrt(vmax) / bias_correction2_sqrt
        else:
            denom = xp.sqrt(v) / bias_correction2_sqrt
        denom += group["eps"]
        param += -step_size * (m / denom)

    def _batched(self, group):
        betas = group["betas"]
        return (type(betas) is tuple and len(betas) == 2
                and plain_numbers(group["lr"], group["eps"], group["weight_decay"], *betas))

    def _step_group(self, group):
        lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
        amsgrad = group["amsgrad"]
        decay = None
        if wd != 0 and group.get("decoupled_weight_decay", False):
            decay = 1 - lr * wd
        head = (bool(group["maximize"]), wd, decay, 1 - beta1, beta2, 1 - beta2)
        eps = group["eps"]
        scratch, states = self._scratch(), self.state
        packer = self._packer(group, _adam_kernel, 5, (0, 2, 3, 4))
        last_step, args = None, None
        for p, g, pd, gd in self._batchable(group):
            state = states[p]
            if not state:
                self._init_state(p, group, state)
            ea, eas = state["exp_avg"]._data, state["exp_avg_sq"]._data
            vmax = None
            if amsgrad:
                if "max_exp_avg_sq" not in state:  # amsgrad switched on after the first step
                    state["max_exp_avg_sq"] = Tensor._wrap(new_zeros(pd))
                vmax = state["max_exp_avg_sq"]._data
            dt = pd.dtype
            if not (ea.dtype is dt and eas.dtype is dt and (vmax is None or vmax.dtype is dt)):
                self._update(pd, gd, state, group)  # state of another dtype: the reference
                bump(p)
                continue
            step = advance(state["step"])
            if step != last_step:
                last_step = step
                step_size, bc2_sqrt = _bias_corrections(group, lr, beta1, beta2, step)
                args = head + (bc2_sqrt, eps, -step_size)
            if packer is not None and pd.size <= SMALL:
                packer.add((pd, gd, ea, eas, vmax), args)
            else:
                apply(_adam_kernel, scratch, (pd, gd, ea, eas, vmax), args)
            bump(p)
        if packer is not None:
            packer.flush()


def _adam_kernel(arrays, tmps, args):
    """Adam._update with `out=` into the scratch arrays t1, t2 (the same operations)."""
    p, g, m, v, vmax = arrays
    t1, t2 = tmps
    maximize, wd, decay, w, beta2, c2, bc2_sqrt, eps, neg_step_size = args
    if maximize:
        np.negative(g, out=t1)
        g = t1
    if wd != 0:
        if decay is not None:
            p *= decay
        else:
            np.multiply(p, wd, out=t2)
            np.add(g, t2, out=t1)
            g = t1
    np.subtract(g, m, out=t2)  # _lerp_(m, g, w)
    if w < 0.5:
        t2 *= w
        m += t2
    else:
        t2 *= 1 - w
        np.subtract(g, t2, out=m)
    v *= beta2
    np.multiply(g, c2, out=t2)
    t2 *= g
    v += t2
    if vmax is not None:
        np.maximum(vmax, v, out=vmax)
        v = vmax
    np.sqrt(v, out=t2)
    t2 /= bc2_sqrt
    t2 += eps
    np.divide(m, t2, out=t2)
    t2 *= neg_step_size
    p += t2


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay, `p = p * (1 - lr * wd)` before
    the Adam step (Loshchilov & Hutter). Default weight_decay is 1e-2."""

    _state_keys = Adam._state_keys

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, do_bias_correction=True,
                 contiguous_params=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, do_bias_correction=do_bias_correction,
                         contiguous_params=contiguous_params)


class Adamax(Optimizer):
    """torch.optim.Adamax: Adam with the infinity norm,

        m = b1 m + (1-b1) g;  u = max(b2 u, |g| + eps);  p = p - lr / (1-b1^t) * m / u
    """

    _state_keys = frozenset({"step", "exp_avg", "exp_inf"})

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _check_betas(lr, eps, betas, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _init_state(self, p, group, state):
        state["step"] = _step_tensor()
        state["exp_avg"] = Tensor._wrap(new_zeros(p._data))
        state["exp_inf"] = Tensor._wrap(new_zeros(p._data))

    def _update(self, param, grad, state, group):
        check_moment_dtype(state, grad)
        g = _decayed_grad(param, grad, group)
        step = _advance(state)
        beta1, beta2 = group["betas"]
        m, u = state["exp_avg"]._data, state["exp_inf"]._data
        _lerp_(m, g, 1 - beta1)
        u *= beta2
        xp = array_module(u)
        xp.maximum(u, xp.abs(g) + group["eps"], out=u)
        clr = group["lr"] / (1 - beta1 ** step)
        param += -clr * (m / u)
