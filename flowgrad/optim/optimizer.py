"""Optimizer: parameter groups, per-parameter state, and torch-format state dicts.

Subclasses give their defaults and two hooks: `_init_state(p, group, state)` fills a new
parameter's state, `_update(param, grad, state, group)` applies one step to the NumPy
arrays in place (vectorised; the parameter and `.grad` objects keep their identities).

>>> import flowgrad as flow
>>> w = flow.nn.Parameter(flow.ones(2))
>>> opt = flow.optim.SGD([w], lr=0.5)
>>> (w * w).sum().backward(); opt.step(); w
Parameter containing:
tensor([0., 0.], requires_grad=True)
"""
from __future__ import annotations

import copy
import functools
import itertools
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from typing import Any, TypeAlias

import numpy as np

from .._warn import warn
from ..autograd import interpreter as _interpreter
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.inplace import bump_version
from ..device import new_array
from ..hook_handles import RemovableHandle
from ..ops.complex import view_as_complex, view_as_real
from ..sparse import SparseTensor
from ..tensor import Tensor
from ..torch_format import loadable
from ._differentiable import STEPS
from ._foreach import Packer, Scratch, fast_dtype
from ._state_check import check_optimizer_state

__all__ = ["Optimizer", "required", "ParamsT", "StateDict"]

# what an optimizer takes as params (torch's annotations): tensors, param-group dicts, or
# (name, tensor) pairs; and a state_dict's type
ParamsT: TypeAlias = Iterable[Tensor] | Iterable[dict[str, Any]] | Iterable[tuple[str, Tensor]]
StateDict: TypeAlias = dict[str, Any]


class _RequiredParameter:
    """Marks a default every parameter group must set itself (SGD's lr in old torch)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__


def _as_state_tensor(value, like=None):
    """A loaded state value as a flowgrad Tensor: torch tensors and arrays are converted
    (copied), floating values take the parameter's dtype as torch's load_state_dict does. A
    flowgrad Tensor needing no cast is kept itself, as torch's `.to` keeps it: the loaded
    optimizer then steps the given state dict's tensors."""
    if isinstance(value, Tensor):
        data = value._data
        if like is None or type(data) is type(like._data) and (
                data.dtype == like._data.dtype or not (like._data.dtype.kind in "fV"
                                                       and data.dtype.kind in "fV")):
            return value
    else:
        data = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
    if like is not None and like._data.dtype.kind in "fV" and data.dtype.kind in "fV":
        data = data.astype(like._data.dtype)
    return Tensor._wrap(new_array(None if like is None else like._data, data).copy())


_GLOBAL_STEP_PRE_HOOKS = OrderedDict()
# the optimizers alive: nn.Graph notes which of their options build reads (graph.group_reads)
LIVE = weakref.WeakSet()
_GLOBAL_STEP_POST_HOOKS = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """Call `hook(optimizer, args, kwargs)` before every optimizer's step (it may return new
    `(args, kwargs)`); returns a handle whose `remove()` unregisters it."""
    return _added(_GLOBAL_STEP_PRE_HOOKS, hook)


def register_optimizer_step_post_hook(hook):
    """Call `hook(optimizer, args, kwargs)` after every optimizer's step."""
    return _added(_GLOBAL_STEP_POST_HOOKS, hook)


def refuse_in_graph(what):
    """An optimizer's or a scheduler's step inside nn.Graph's build: it updates arrays (or
    numbers) once, while build is traced, and the compiled plan would never repeat it."""
    if _interpreter.tracing_a_plan():  # inside nn.Graph's build
        raise RuntimeError(
            f"nn.Graph: {what} inside build() runs once, while build is traced, and the "
            f"compiled plan would not repeat it on later calls. Register the optimizer and its "
            f"scheduler with self.add_optimizer(optimizer, lr_sch=scheduler) in the graph's "
            f"__init__ and leave step() and zero_grad() out of build: the graph steps them "
            f"after every call (clipping by the param groups' clip_grad_max_norm)")


def _hooked_step(step):
    """`step` running the global and the optimizer's step hooks around it, as torch wraps
    every optimizer class's step (a subclass's own step included: see __init_subclass__)."""
    @functools.wraps(step)
    def hooked(self, *args, **kwargs):
        if self.__dict__.get("_in_step"):  # a subclass's step calling super().step()
            return step(self, *args, **kwargs)
        refuse_in_graph(f"{type(self).__name__}.step()")
        args = (self,) + args  # (torch's hooks see the optimizer as args[0] too)
        for hook in list(_GLOBAL_STEP_PRE_HOOKS.values()) + list(self._step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step.__qualname__} must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        self._in_step = True
        try:
            out = step(*args, **kwargs)
        finally:
            self._in_step = False
        for hook in list(self._step_post_hooks.values()) + \
                list(_GLOBAL_STEP_POST_HOOKS.values()):
            hook(self, args, kwargs)
        return out
    hooked.hooked = True
    return hooked


@loadable  # (load(weights_only=False) rebuilds it)
class Optimizer:
    """Base class of all optimizers: holds `param_groups` (dicts with 'params' and the
    hyperparameters) and `state` (a dict per parameter, keyed by the parameter)."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "hooked", False):
            cls.step = _hooked_step(step)  # its step hooks run as the base class's do

    def __init__(self, params, defaults):
        LIVE.add(self)
        self.defaults = defaults
        self._step_pre_hooks = OrderedDict()
        self._step_post_hooks = OrderedDict()
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {_typename(params)}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_step_post_hooks", OrderedDict())

    # ---- parameter groups ---------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a group of parameters with its own options (missing ones take the defaults).

        >>> import flowgrad as flow
        >>> a, b = flow.zeros(2, requires_grad=True), flow.zeros(3, requires_grad=True)
        >>> opt = flow.optim.SGD([a], lr=0.1)
        >>> opt.add_param_group({"params": [b], "lr": 0.01})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.01]
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError("all optimizer params should be with/without names. Some param "
                             "names are missing")
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                f"is {_typename(p)}")
            if not (p.is_leaf or p.retains_grad or self.defaults.get("differentiable")):
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group)
        group["params"] = params
        if names:
            group["param_names"] = names
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):

            warn("optimizer contains a parameter group with duplicate parameters; "
                 "in future, this will cause an error", UserWarning, stacklevel=3)
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        if self.param_groups and bool(names) != ("param_names" in self.param_groups[0]):
            raise ValueError("all optimizer param groups should be with/without names. cannot "
                             f"add param group {'with' if names else 'without'} names to the "
                             "optimizer (name every parameter of every group, or none)")
        self.param_groups.append(group)

    # ---- gradients and steps ------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset the gradients: drop them (`set_to_none=True`, the default) or zero them in
        place, keeping the `.grad` tensors."""
        for group in self.param_groups:
            if set_to_none:
                for p in group["params"]:
                    m = p._meta  # p.grad = None, without the property and its checks
                    if m is not None and m.acc_grad is not None:
                        m.acc_grad = None
                continue
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if type(g) is SparseTensor:  # no entries left, still sparse (torch's zero_())
                    g.zero_()
                    continue
                if g.grad_fn is not None:
                    g.detach_()
                else:
                    g.requires_grad_(False)
                g._data[...] = 0
                bump_version(g)

    @_hooked_step
    def step(self, closure=None):
        """Update every parameter that has a gradient; `closure` (optional) re-evaluates the
        model and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        # torch's: grad mode follows the optimizer's differentiable flag
        with enable_grad() if self.defaults.get("differentiable") else no_grad():
            # every group checked before any parameter is updated: a refused group (a tensor
            # lr of several values, a gradient of another shape) leaves all as they were
            ready = [None if group.get("differentiable") else self._prepared(group)
                     for group in self.param_groups]
            for group, prepared in zip(self.param_groups, ready):
                if prepared is None:
                    self._step_differentiable(group)
                else:
                    self._step_prepared(prepared)
        return loss

    # True where torch's foreach step runs differentiable (SGD's foreach ops record autograd;
    # the other optimizers' assert it does not)
    _foreach_differentiable = False
    _refuses_step_requiring_grad = False  # (Adam's and AdamW's check of a loaded state)

    def _step_differentiable(self, group):
        """differentiable=True: torch's single-tensor update in flowgrad tensor ops, recorded by
        autograd (see _differentiable.py); the group's tensor hyperparameters stay tensors."""
        update = STEPS.get(type(self).__name__) or STEPS.get(self._differentiable_base())
        if update is None:
            raise NotImplementedError(f"{type(self).__name__}: differentiable=True is not "
                                      "supported (no differentiable step)")
        self._check_group(group)
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            if type(p.grad) is SparseTensor:
                raise NotImplementedError(f"{type(self).__name__}(differentiable=True): "
                                          "flowgrad steps dense gradients only (got a sparse "
                                          "gradient); use differentiable=False")
        for p in params:  # (torch's _init_group: every state first, then the updates)
            state = self.state[p]
            if not state:
                self._init_state(p, group, state)
            if self._refuses_step_requiring_grad and state["step"].requires_grad:
                raise RuntimeError("`requires_grad` is not supported for `step` in "
                                   "differentiable mode")
        if group.get("foreach") and not self._foreach_differentiable and params:
            raise AssertionError("_foreach ops don't support autograd")
        if group.get("capturable"):
            self._refuse_capturable(group)
        for p in params:
            if p.is_complex() and update.__name__ != "sgd":
                _complex_as_real(update, p, self.state[p], group)
            else:  # (SGD steps complex tensors as they are, as torch's)
                update(p, p.grad, self.state[p], group)

    def _differentiable_base(self):
        """The torch optimizer a subclass of a flowgrad optimizer steps as."""
        for cls in type(self).__mro__:
            if cls.__name__ in STEPS:
                return cls.__name__
        return None

    def _step_params(self, group):
        """Update the group's parameters that have a gradient (also what nn.Graph's update
        nodes run, on a group holding the parameters of one node)."""
        self._step_prepared(self._prepared(group))

    def _step_prepared(self, group):
        """`_step_params` of a group `_prepared` made."""
        if group.get("foreach") is not False and self._batched(group):
            self._step_group(group)
            return
        for p in group["params"]:
            g = p.grad
            if g is not None:
                self._step_one(p, g, group)

    def _prepared(self, group):
        """The group as a step reads it (tensor hyperparameters as numbers: `_plain_group`),
        after torch's fused check and the optimizer's own (`_check_group`); every step path
        (eager, and nn.Graph's update nodes) starts here."""
        group = _plain_group(group)
        if group.get("fused"):
            check_fused_params(group)
        self._check_group(group)
        sparse = False
        for p in group["params"]:
            m = p._meta
            g = m.acc_grad if m is not None else None
            if g is None:
                continue
            if type(g) is SparseTensor:
                sparse = True
            elif g._data.shape != p._data.shape and getattr(p, "_phys", None) is None:
                raise RuntimeError(
                    f"{type(self).__name__}.step: a parameter of shape {tuple(p.shape)} has a "
                    f"gradient of shape {tuple(g.shape)} (a .grad or .grad.data assigned "
                    f"another shape); give it a gradient of the parameter's shape (nothing "
                    f"was updated)")
        if sparse:
            self._check_sparse(group)  # (before anything is updated)
        if group.get("capturable") and not group.get("fused"):
            self._refuse_capturable(group)
        return group

    # what torch's capturable check names (ASGD, NAdam name their extra state tensors)
    _capturable_names = "params and state_steps"

    def _refuse_capturable(self, group):
        """torch's capturable step asserts that the parameters are on an accelerator, so on
        the CPU (flowgrad's only device) it raises AssertionError at the first step with a
        gradient, after the state is made and before anything is updated (fused=True skips
        that check: the fused CPU kernels run)."""
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        for p in params:
            state = self.state[p]
            if not state:
                self._init_state(p, group, state)
        raise AssertionError(
            f"If capturable=True, {self._capturable_names} must be on supported devices: "
            "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla'].")

    def _check_group(self, group):
        """Validate options that users may have changed since construction."""

    _sparse_error = None  # torch's refusal of a sparse gradient (default: "<Name> does not ...")

    def _check_sparse(self, group):
        """A parameter of `group` has a sparse gradient (Embedding(sparse=True)'s): raise
        torch's error where this optimizer takes none (SGD and Adagrad take one, read as the
        dense gradient: the same update; SparseAdam updates the rows it names)."""
        raise RuntimeError(self._sparse_error or
                           f"{type(self).__name__} does not support sparse gradients")

    # The batched path (foreach=None or True; foreach=False takes the loop over `_update`):
    # a subclass that defines `_step_group(group)` updates the whole group in one pass,
    # with the same numbers as `_update` (see _foreach.py); `_batched(group)` says whether
    # the group qualifies (plain Python hyperparameters).
    def _batched(self, group):
        return False

    def _batchable(self, group):
        """(param, grad, their arrays) for the group's params with a gradient that the batched
        path takes; the others (another dtype, ...) are updated one by one here."""
        fused = group.get("fused")
        for p in group["params"]:
            m = p._meta
            g = None if m is None else m.acc_grad
            if g is None:
                continue
            if type(g) is SparseTensor:
                self._step_one(p, g, group)
                continue
            pd, gd = p._data, g._data
            if not fast_dtype(pd, gd) or fused and pd.dtype.name in _HALF:
                self._step_one(p, g, group)
                continue
            yield p, g, pd, gd

    def _step_one(self, p, g, group):
        """The reference per-parameter step (also the batched path's fallback), on a group
        `_prepared` made."""
        state = self.state[p]
        if not state:
            self._init_state(p, group, state)
        pd = p._data
        gd = g._data if type(g) is not SparseTensor else g.to_dense()._data
        if pd.dtype.kind == "c":
            self._update_complex(pd, gd, state, group)
        elif group.get("fused") and pd.dtype.name in _HALF:
            self._update_fused_half(pd, gd, state, group)
        else:
            self._update(pd, gd, state, group)
        bump_version(p)

    def _update_fused_half(self, param, grad, state, group):
        """`_update` of a float16 / bfloat16 parameter as torch's fused CPU kernels step it:
        parameter, gradient and state read as float32, every operation in float32, each
        stored value rounded once to the parameter's dtype (the unfused steps round after
        every operation)."""
        dt = param.dtype
        moments = [k for k, v in state.items() if k != "step" and isinstance(v, Tensor)
                   and v._data.shape == param.shape]  # (the step count stays as it is)
        if any(state[k]._data.dtype != dt for k in moments):
            self._update(param, grad, state, group)  # state of another dtype: torch refuses
            return
        wide = dict(state)
        for k in moments:
            wide[k] = Tensor._wrap(state[k]._data.astype(np.float32))
        wide_param = param.astype(np.float32)
        self._update(wide_param, grad.astype(np.float32), wide, group)
        for k, v in wide.items():
            if k in moments:
                state[k]._data[...] = v._data
            elif k not in state and isinstance(v, Tensor) and v._data.shape == param.shape:
                state[k] = Tensor._wrap(v._data.astype(dt))  # made in the step (momentum)
            else:
                state[k] = v
        param[...] = wide_param

    def _update_complex(self, param, grad, state, group):
        """`_update` on a complex parameter, as torch steps it: on real views (..., 2) of the
        parameter, its grad and its complex state (torch.view_as_real), so that squares,
        square roots and signs act on the real and imaginary parts separately."""
        real = {k: Tensor._wrap(_as_real(v._data))
                if isinstance(v, Tensor) and v._data.dtype.kind == "c" else v
                for k, v in state.items()}
        before = dict(real)
        self._update(_as_real(param), _as_real(grad.astype(param.dtype, copy=False)), real,
                     group)
        for k, v in real.items():
            if before.get(k) is v:
                continue
            if isinstance(v, Tensor) and v._data.shape == param.shape + (2,) \
                    and v._data.dtype.kind == "f":  # a state entry made during the step
                v = Tensor._wrap(_as_complex(v._data, param.dtype))
            state[k] = v

    def _scratch(self, n=2, name="tmp"):
        """Scratch arrays for the batched path (not part of the state or of pickles)."""
        pool = self.__dict__.setdefault("_scratch_arrays", {})
        scratch = pool.get(name)
        if scratch is None or scratch.n != n:
            scratch = pool[name] = Scratch(n)
        return scratch

    def _packer(self, group, kernel, n_operands, written):
        """A Packer for the group's small parameters, or None where the group lists a
        parameter twice (its updates must then run one after the other)."""
        params = group["params"]
        if len({id(p) for p in params}) != len(params):
            return None
        return Packer(kernel, self._scratch(), self._scratch(n_operands, "pack"), written)

    def _init_state(self, p, group, state):
        """Fill `state` for parameter `p` on its first step."""

    def _update(self, param, grad, state, group):
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    def register_step_pre_hook(self, hook):
        """Call `hook(optimizer, args, kwargs)` before every step."""
        return _added(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """Call `hook(optimizer, args, kwargs)` after every step."""
        return _added(self._step_post_hooks, hook)

    # ---- state dicts --------------------------------------------------------------------
    def _hook_dict(self, kind, hook=None, prepend=False):
        store = self.__dict__.setdefault(kind, OrderedDict())
        if hook is None:
            return list(store.values())
        handle = _added(store, hook)
        if prepend:
            store.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """`hook(optimizer)` before state_dict() builds the dict."""
        return self._hook_dict("_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """`hook(optimizer, state_dict)` after; a non-None result replaces the dict."""
        return self._hook_dict("_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """`hook(optimizer, state_dict)` before loading; a non-None result is loaded
        instead."""
        return self._hook_dict("_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """`hook(optimizer)` after loading."""
        return self._hook_dict("_load_state_dict_post_hooks", hook, prepend)

    def state_dict(self):
        """{'state': {param_id: {...}}, 'param_groups': [{..., 'params': [ids]}]}, as torch:
        ids number the parameters in group order; state values are the live tensors."""
        for hook in self._hook_dict("_state_dict_pre_hooks"):
            hook(self)
        state_dict = self._state_dict()
        for hook in self._hook_dict("_state_dict_post_hooks"):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def _state_dict(self):
        """{'state': {param_id: {...}}, 'param_groups': [{..., 'params': [ids]}]}, as torch:
        ids number the parameters in group order; state values are the live tensors."""
        mapping = {}
        groups = []
        start = 0
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items() if not isinstance(k, Tensor) or v}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state dict made by `state_dict()` (flowgrad's or torch's: torch tensors
        are converted). Validates everything before changing anything: the number of param groups
        and of params per group, that the state dict comes from this optimizer class, and
        that each state tensor has its parameter's shape (torch checks only the counts)."""
        state_dict = dict(state_dict)  # (the pre-hooks may change it; the caller's stays)
        for hook in self._hook_dict("_load_state_dict_pre_hooks"):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self._load_state_dict(state_dict)
        for hook in self._hook_dict("_load_state_dict_post_hooks"):
            hook(self)

    def _load_state_dict(self, state_dict):
        groups = self.param_groups
        check_optimizer_state(self, state_dict)
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        id_map = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            key = int(k) if isinstance(k, str) and k.isdigit() else k
            if key in id_map:
                state[id_map[key]] = _cast_state(id_map[key], v)
            else:
                state[key] = v
        new_groups = []
        for group, saved in zip(groups, saved_groups):
            for key, value in saved.items():
                if isinstance(value, list) and key == "betas":
                    saved[key] = tuple(value)  # JSON round trips turn tuples into lists
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
            new_groups.append(saved)
        self.state = state
        self.param_groups = new_groups


def _complex_as_real(update, p, state, group):
    """A differentiable step of a complex parameter on real views (torch.view_as_real) of it,
    its gradient and its complex state, as torch's steps take them; a state entry the step
    makes is kept complex."""
    real = {k: view_as_real(v) if isinstance(v, Tensor) and v.is_complex() else v
            for k, v in state.items()}
    update(view_as_real(p), view_as_real(p.grad), real, group)
    for k, v in real.items():
        if k not in state:
            state[k] = view_as_complex(v)


def _as_real(a):
    """A writable real view (..., 2) of complex array `a` (torch.view_as_real)."""
    if type(a) is not np.ndarray:
        return a.view(a.real.dtype).reshape(a.shape + (2,))
    re = a.real
    return np.lib.stride_tricks.as_strided(re, a.shape + (2,), re.strides + (re.itemsize,))


def _as_complex(a, dtype):
    """The complex array of dtype `dtype` whose real view is `a` (shape (..., 2))."""
    return np.ascontiguousarray(a).view(dtype)[..., 0]


def _scalar(value):
    if isinstance(value, Tensor) or hasattr(value, "detach") and hasattr(value, "item"):
        return value.item()
    return value


def _plain_group(group):
    """The group with its 1-element tensor hyperparameters (an lr given as a 0-d tensor,
    tensor betas) read as Python numbers, as torch's non-capturable steps read them
    (`group` itself when it holds none)."""
    for key, value in group.items():
        if key == "params" or not (isinstance(value, (Tensor, tuple))):
            continue
        if isinstance(value, Tensor) or any(isinstance(v, Tensor) for v in value):
            break
    else:
        return group
    plain = {}
    for key, value in group.items():
        if key != "params":
            if isinstance(value, tuple):
                value = tuple(_scalar(v) for v in value)
            else:
                value = _scalar(value)
        plain[key] = value
    return plain


def _added(hooks, hook):
    """`hook` put in the OrderedDict `hooks` under a new handle's id; the handle."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _validate(name, value, low=0.0, strict=False, high=None, message=None):
    """Raise torch's `ValueError('Invalid <name>: <value>')` for a bad hyperparameter."""
    if isinstance(value, Tensor) and value.numel() != 1:
        short = "lr" if name == "learning rate" else name.split()[0]
        raise ValueError(f"Tensor {short} must be 1-element")
    bad = value < low if not strict else value <= low
    if high is not None:
        bad = bad or value >= high
    if bad:
        raise ValueError(message or f"Invalid {name}: {value}")


def _lerp_(a, b, weight):
    """a.lerp_(b, weight) as torch computes it (two formulas split at weight 0.5)."""
    if weight < 0.5:
        a += weight * (b - a)
    else:
        a[...] = b - (b - a) * (1 - weight)


def _check_flags(fused=None, foreach=None, differentiable=False):
    """torch's constructor checks of fused= (SGD, Adam, AdamW, Adagrad: their fused CPU
    kernels give the unfused numbers in float32 and float64, and step float16 / bfloat16 in
    float32: `_update_fused_half`) against foreach= and differentiable=."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")


def check_fused_params(group):
    """torch's step-time check of a fused group: floating-point parameters only."""
    for p in group["params"]:
        if p.grad is not None and p._data.dtype.kind != "f" and p._data.dtype.name not in (
                "bfloat16",):
            raise RuntimeError(f"`fused=True` requires all the params to be floating point "
                               f"Tensors of supported devices: ['cpu'] but {p.dtype} and cpu")


_HALF = ("float16", "bfloat16")  # the dtypes torch's fused kernels step in float32


def _cast_state(param, value, key=None):
    """A loaded state value as `param`'s state: tensors (and arrays) on its dtype and device
    (a step count as it is), containers item by item."""
    if isinstance(value, Tensor) or hasattr(value, "__array__") and not \
            isinstance(value, (list, tuple, dict)):
        return _as_state_tensor(value, None if key == "step" else param)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value
