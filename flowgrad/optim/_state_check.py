"""Validation of optimizer and lr-scheduler state dicts before they are loaded.

Loading checks the whole state dict first and changes nothing when it does not fit: a
different number of param groups or of params in a group (torch's own two checks and
messages), a state dict from another optimizer or scheduler class, state tensors whose
shape is not their parameter's, per-group lists of another length.
"""
from __future__ import annotations

import numpy as np

# group options that some torch versions add or drop: their absence says nothing about
# which optimizer class saved a state dict
_VERSION_FLAGS = frozenset({"foreach", "differentiable", "fused", "capturable", "maximize",
                            "decoupled_weight_decay", "param_names", "initial_lr"})
# per-parameter state entries that are scalars, not shaped like their parameter
_SCALAR_STATE = frozenset({"step", "mu_product", "eta", "mu"})  # NAdam, ASGD


def _shape(value):
    """The shape of a tensor-like state value (flowgrad, torch, NumPy), else None."""
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, (list, tuple, dict, str)):
        return None
    return tuple(int(d) for d in shape)


def _keys(keys):
    return ", ".join(repr(k) for k in sorted(keys, key=str))


def check_optimizer_state(opt, state_dict):
    """Raise ValueError/TypeError naming the mismatch if `state_dict` cannot be loaded
    into `opt`; return the validated saved param groups."""
    name = type(opt).__name__
    where = f"{name}.load_state_dict"
    if not isinstance(state_dict, dict) or "param_groups" not in state_dict \
            or "state" not in state_dict:
        raise ValueError(f"{where}: optimizer state dict must be a dict with keys 'state' "
                         "and 'param_groups', as Optimizer.state_dict() returns")
    saved_groups, state = state_dict["param_groups"], state_dict["state"]
    if not isinstance(saved_groups, (list, tuple)) or not all(
            isinstance(g, dict) and isinstance(g.get("params"), (list, tuple))
            for g in saved_groups):
        raise ValueError(f"{where}: 'param_groups' must be a list of dicts, each with a "
                         "'params' list of parameter ids")
    if not isinstance(state, dict):
        raise ValueError(f"{where}: 'state' must be a dict from parameter id to its state, "
                         f"got {type(state).__name__}")
    groups = opt.param_groups
    if len(groups) != len(saved_groups):
        raise ValueError(
            f"loaded state dict has a different number of parameter groups ({where}: the "
            f"optimizer has {len(groups)}, the state dict {len(saved_groups)}); build the "
            "optimizer with the same param groups as the one that was saved")
    for i, (g, s) in enumerate(zip(groups, saved_groups)):
        if len(g["params"]) != len(s["params"]):
            raise ValueError(
                f"loaded state dict contains a parameter group that doesn't match the size "
                f"of optimizer's group ({where}: group {i} has {len(g['params'])} params in "
                f"the optimizer but {len(s['params'])} in the state dict)")
    core = set(opt.defaults) - _VERSION_FLAGS
    for i, s in enumerate(saved_groups):
        missing = core - set(s)
        if missing:
            extra = set(s) - set(opt.defaults) - {"params"} - _VERSION_FLAGS
            raise ValueError(
                f"{where}: param group {i} of the state dict lacks {_keys(missing)}, which "
                f"{name} keeps (it has {_keys(extra) or 'no other options'}); it was saved "
                f"from another optimizer class. Load it into the class that saved it")
    allowed = type(opt).__dict__.get("_state_keys")  # None: a subclass; not checked
    params = {}
    for s, g in zip(saved_groups, groups):
        for i, (pid, p) in enumerate(zip(s["params"], g["params"])):
            params[pid] = p
    for pid, entry in state.items():
        key = int(pid) if isinstance(pid, str) and pid.isdigit() else pid
        if key not in params:
            continue
        p = params[key]
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: the state of parameter {key} must be a dict, got "
                             f"{type(entry).__name__}")
        if allowed is not None and set(entry) - allowed:
            raise ValueError(
                f"{where}: the state of parameter {key} has {_keys(set(entry) - allowed)}, "
                f"which {name} does not keep (it keeps {_keys(allowed)}); it was saved from "
                "another optimizer class. Load it into the class that saved it")
        for k, v in entry.items():
            shape = _shape(v)
            if shape is None:
                continue
            if k in _SCALAR_STATE:
                if int(np.prod(shape)) != 1:
                    raise ValueError(f"{where}: state {k!r} of parameter {key} must be a "
                                     f"scalar, but has shape {shape}")
                continue
            want = tuple(p.shape)
            if hasattr(opt, "_state_shape"):
                want = opt._state_shape(k, want)
            if want is not None and shape != want:
                need = ("the parameter has shape" if want == tuple(p.shape) else
                        f"it needs shape {want} for a parameter of shape")
                raise ValueError(
                    f"{where}: state {k!r} of parameter {key} has shape {shape} but {need} "
                    f"{tuple(p.shape)}; the state dict was saved for other parameters "
                    "(check the model and the param group order)")
    return saved_groups


_OPTIONAL_SCHED = frozenset({"verbose"})


def _public(d):
    return {k for k in d if isinstance(k, str) and not k.startswith("_")} - _OPTIONAL_SCHED


def check_scheduler_state(sched, state_dict):
    """Raise ValueError/TypeError naming the mismatch if `state_dict` (from
    `state_dict()`) cannot be loaded into scheduler `sched`. torch loads anything here."""
    name = type(sched).__name__
    where = f"{name}.load_state_dict"
    if not isinstance(state_dict, dict):
        raise TypeError(f"{where}: expected the dict {name}.state_dict() returns, got "
                        f"{type(state_dict).__name__}")
    own = sched.state_dict()
    missing, extra = _public(own) - _public(state_dict), _public(state_dict) - _public(own)
    # OneFlow's extra options, absent from torch's state dicts: they keep their values
    missing -= getattr(sched, "_optional_state", frozenset())
    if missing or extra:
        raise ValueError(
            f"{where}: the state dict does not fit a {name}: it lacks "
            f"{_keys(missing) or 'nothing'} and has {_keys(extra) or 'nothing'} extra; it was "
            f"saved from another scheduler class or one built with other options. Load it "
            "into a scheduler of the class and options that saved it")
    n_groups = len(sched.optimizer.param_groups)
    for k, mine in own.items():
        if k not in state_dict or k == "_schedulers":
            continue
        theirs = state_dict[k]
        if isinstance(mine, (list, tuple)):
            if not isinstance(theirs, (list, tuple)) or len(theirs) != len(mine):
                got = (f"{len(theirs)} entries" if isinstance(theirs, (list, tuple))
                       else type(theirs).__name__)
                why = (f"(the optimizer has {n_groups} param groups) but {got} in the state "
                       "dict; it was saved for an optimizer with other param groups"
                       if len(mine) == n_groups else
                       f"but {got} in the state dict; it was saved from a scheduler built "
                       "with other options")
                raise ValueError(f"{where}: {k!r} has {len(mine)} entries here {why}")
        elif isinstance(mine, (int, float)) and not isinstance(mine, bool) and not (
                isinstance(theirs, (int, float)) and not isinstance(theirs, bool)):
            raise ValueError(f"{where}: {k!r} must be a number, got "
                             f"{type(theirs).__name__} in the state dict")
    if hasattr(sched, "_schedulers"):  # SequentialLR, ChainedScheduler: check the children
        children = state_dict.get("_schedulers")
        if not isinstance(children, list) or len(children) != len(sched._schedulers):
            raise ValueError(f"{where}: the state dict holds "
                             f"{len(children) if isinstance(children, list) else 'no'} "
                             f"scheduler states for {len(sched._schedulers)} schedulers")
        for s, sd in zip(sched._schedulers, children):
            check_scheduler_state(s, sd)
