"""Dynamic loss scaling (torch.amp.GradScaler), for float16 training.

The loss is multiplied by a scale before backward so small float16 gradients do not flush to
zero; `unscale_` divides the gradients back and notes whether any is inf or NaN; `step` skips
the optimizer step when one was; `update` halves the scale after an overflow and doubles it
after `growth_interval` clean steps. The numbers follow torch's kernels: the scale is a
float32 0-d tensor, the unscale factor is 1/scale computed in float64 then rounded to
float32.

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.ones(2))
>>> opt = flow.optim.SGD([w], lr=0.1)
>>> scaler = flow.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1)
>>> scaler.scale((w * 3).sum()).backward()
>>> w.grad
tensor([24., 24.])
>>> scaler.step(opt); scaler.update()
>>> w, scaler.get_scale()
(Parameter containing:
tensor([0.7000, 0.7000], requires_grad=True), 16.0)
"""
from __future__ import annotations

import operator
from collections import defaultdict
from enum import Enum

import numpy as np

from .. import dtypes as _dt
from .._warn import warn
from ..autograd.grad_mode import enable_grad, no_grad

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """torch's GradScaler. `device` defaults to 'cuda' as torch's does: without CUDA (always,
    here) it warns and disables itself, so pass 'cpu' to scale on the CPU.

    `scale(outputs)` multiplies by the scale; `unscale_(optimizer)` divides the optimizer's
    gradients in place; `step(optimizer)` unscales if not done and steps unless a gradient
    was inf/NaN; `update()` moves the scale (`backoff_factor` after an overflow,
    `growth_factor` after `growth_interval` clean steps).
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                 "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_fresh_state)

    def _check_scale_growth_tracker(self, funcname):
        if self._scale is None:
            raise AssertionError(
                f"Attempted {funcname} but _scale is None.  This may indicate your script did "
                f"not use scaler.scale(loss or outputs) earlier in the iteration.")
        return self._scale, self._growth_tracker

    def _lazy_init(self):
        from ..ops.creation import full

        self._scale = full((), self._init_scale, dtype=_dt.float32)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=_dt.int32)

    def scale(self, outputs):
        """`outputs` (a tensor, or nested lists/tuples of them) times the current scale."""
        from ..tensor import Tensor

        if not self._enabled:
            return outputs

        def scale_of(_):  # the scale made at the first tensor met, as torch's (a generator's
            if self._scale is None:  # tensors are met when it is consumed)
                self._lazy_init()
            return self._scale
        return _scaled(outputs, scale_of, Tensor)

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        grads = []  # all checked before any is unscaled, as torch's
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if not allow_fp16 and param.grad.dtype is _dt.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                grads.append(param)
        found = None
        with no_grad():
            for param in grads:
                grad = param.grad
                sparse = grad.is_sparse  # (its values; unscaled out of place, as torch allows)
                values = grad._values() if sparse else grad
                bad = not bool(values.isfinite().all())
                found = bad or bool(found)
                if inv_scale != 1.0 and sparse:
                    param.grad = _sparse_coo(grad._indices(), values * inv_scale, grad.shape)
                elif inv_scale != 1.0:
                    grad.mul_(inv_scale)
        if found is None:  # no gradients: torch records no inf check
            return {}
        from ..ops.creation import full

        return {"cpu": full((), float(found), dtype=_dt.float32)}

    def unscale_(self, optimizer):
        """Divide `optimizer`'s gradients by the scale, in place (once per step), e.g. before
        clipping them; notes whether any is inf or NaN."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        with np.errstate(divide="ignore", over="ignore"):  # a scale of 0 (or under 2**-128)
            inv_scale = float(np.float32(np.float64(1.0) / self._scale.item()))  # unscales by inf
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale (if `unscale_` was not called) and step `optimizer`, unless a gradient
        was inf or NaN: then the step is skipped and None returned."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            return self._fused_step(optimizer, state, args, kwargs)
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def _fused_step(self, optimizer, state, args, kwargs):
        """torch's step of an optimizer made with fused=True (SGD, Adam, AdamW, Adagrad): the
        scaler only checks the gradients (when unscale_ was not called) and the fused kernel
        divides them by the scale, or skips the update with the gradients left scaled; its
        state is made all the same (Adam's and AdamW's zeros, step 0). No inf check
        recorded (no gradients) is no error here."""
        divide = state["stage"] is OptState.READY
        if divide:
            self._check_inf_per_device(optimizer)
        found = sum(v.item() for v in state["found_inf_per_device"].values())
        if found:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None and not optimizer.state.get(p):
                        made = {}
                        optimizer._init_state(p, group, made)
                        if made:
                            optimizer.state[p] = made
            retval = None
            if args:  # a closure (positional: closure= is refused) still runs, as torch's
                with enable_grad():  # step runs it before its kernel skips the update
                    retval = args[0]()
        else:
            if divide:
                with no_grad():
                    for group in optimizer.param_groups:
                        for p in group["params"]:
                            g = p.grad
                            if g is not None and g.dtype in (_dt.float16, _dt.bfloat16):
                                g.copy_(g.float() / self._scale)  # (in float32, as the
                            elif g is not None:  # kernels: 2**20 is inf in float16)
                                g.div_(self._scale.to(g.dtype))
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Move the scale for the next iteration (or set it to `new_scale`: a float or a
        1-element float32 tensor)."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                if new_scale.device.type != self._device or new_scale.numel() != 1 or \
                        new_scale.requires_grad:
                    raise AssertionError(
                        "new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                        "torch.FloatTensor with requires_grad=False.")
                scale.copy_(new_scale)  # (a (1,) tensor is refused: not broadcast to ())
        else:
            found = [f.item() for s in self._per_optimizer_states.values()
                     for f in s["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            interval = _growth_interval(self._growth_interval)
            # torch's _amp_update_scale_ kernel: products in float64, stored as float32
            current, grown = float(scale.item()), int(tracker.item()) + 1
            if sum(found):
                scale.fill_(float(np.float32(current * self._backoff_factor)))
                tracker.fill_(0)
            elif grown == interval:
                bigger = np.float32(current * self._growth_factor)
                if np.isfinite(bigger):
                    scale.fill_(float(bigger))
                tracker.fill_(0)
            else:
                tracker.fill_(grown)
        self._per_optimizer_states = defaultdict(_fresh_state)

    def _get_scale_async(self):
        return self._scale

    def _check_inf_per_device(self, optimizer):
        """torch's: record whether `optimizer`'s gradients hold an inf or NaN, unscaling
        nothing (what the fused path runs; some training loops call it)."""
        self._check_scale_growth_tracker("_check_inf_per_device")
        found = self._unscale_grads_(optimizer, 1.0, True)
        self._per_optimizer_states[id(optimizer)]["found_inf_per_device"] = found
        return found

    def _found_inf_per_device(self, optimizer):
        return self._per_optimizer_states[id(optimizer)]["found_inf_per_device"]

    def get_scale(self):
        """The current scale as a float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    def is_enabled(self):
        return self._enabled

    def __getstate__(self):
        """torch's: only between iterations; the scale and tracker pickle as the initial
        values (the tensors are made again at the next `scale`)."""
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError(
                    "A GradScaler instance may only be pickled at the beginning of an "
                    "iteration, or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    def state_dict(self):
        """torch's keys: scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker ({} when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])


def _sparse_coo(indices, values, shape):
    from ..sparse import sparse_coo_tensor

    return sparse_coo_tensor(indices, values, shape)


def _growth_interval(value):
    """`growth_interval` as torch's update kernel takes it: an int (not a bool, not a
    float)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"_amp_update_scale_(): argument 'growth_interval' (position 6) must "
                        f"be int, not {type(value).__name__}") from None


def _scaled(val, scale, tensor_class):
    """`val` (a tensor, or nested lists/tuples/iterables of them) times `scale(tensor)`."""
    if isinstance(val, tensor_class):
        return val * scale(val)
    if isinstance(val, (list, tuple)):
        return type(val)(_scaled(v, scale, tensor_class) for v in val)
    if hasattr(val, "__iter__"):
        return map(lambda v: _scaled(v, scale, tensor_class), val)
    raise ValueError("outputs must be a Tensor or an iterable of Tensors")
