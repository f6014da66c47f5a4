"""torch's nn-module database (ModuleInfo) from the other angles of torch's test_modules.py,
against torch 2.13 (moduleinfo_vs_torch.py compares one forward per ModuleInput; this module
builds its module pairs with its `build_pair`).

Angles (each a function `angle(info, f_cls, module_input, training)` -> messages):
  gradgrad    float64 second derivatives: g = grad(outputs, inputs + params, v, create_graph)
              and grad(g, inputs + params + v, u), as opinfo_gradgrad.py does for ops
  noncontig   inputs, parameters and cotangents replaced by non-contiguous copies with the same
              values: the same outputs and gradients as torch's contiguous ones
  memformat   4-d/5-d inputs and the module in channels_last(_3d): values, and the output's
              is_contiguous() / is_contiguous(memory_format=...) as torch's
  inplace     a module with `inplace`: in-place and out-of-place give torch's outputs and input
              gradients; the out-of-place call leaves its input alone, the in-place one writes
              it (and returns it) as torch's does
  serialize   pickle, copy.deepcopy, flow.save/flow.load of the module and of its state_dict:
              the copy gives the original's outputs and keeps its train/eval flags
  repr        repr(module) as torch's
  errors      module_error_inputs_func: raise (at construction or forward) and type as torch's
  train_eval  outputs in train() and eval() (same state) differ exactly where torch's do

Run as a script for a report: .venv/bin/python tests/moduleinfo_angles.py [Name ...]
(`--angle=a,b`: those angles only; `--all`: every ModuleInput, not the first; `--shard=i/n`).
"""
from __future__ import annotations

import copy
import inspect
import io
import pickle
import sys
import warnings

import numpy as np
import torch
from moduleinfo_vs_torch import (
    RANDOM,
    RANDOM_IN_EVAL,
    InputConverter,
    ModuleConverter,
    Stop,
    _differentiable,
    _warnings_off,
    build_pair,
    compare_each_grad,
    flow_class,
    inputs_or_skip,
    module_db,
    state_to_flow,
)
from opinfo_gradgrad import _none_pattern, _random_like, both_grads
from opinfo_vs_torch import (
    Converter,
    Unsupported,
    compare,
    full_name,
    one_thread,
    report,
    shard_of,
    to_numpy,
)

import flowgrad as flow

ANGLES = ("gradgrad", "noncontig", "memformat", "inplace", "serialize", "repr", "errors",
          "train_eval")


def _forward(module, mod, args, kwargs):
    """(output, None) or (None, the exception)."""
    try:
        return _warnings_off(lambda: mod(*args, **kwargs)), None
    except Exception as error:  # noqa: BLE001 - flowgrad's raises are findings
        return None, error


def _random(info, training):
    name = info.module_cls.__name__
    return name in RANDOM_IN_EVAL or (training and name in RANDOM)


def _leaves(t_mod, f_mod, pairs):
    """(torch leaves, flowgrad leaves, labels): the inputs that require grad, then every
    parameter (by name)."""
    f_params = dict(f_mod.named_parameters())
    names = [k for k, p in t_mod.named_parameters() if p.requires_grad and k in f_params]
    return ([t for t, _ in pairs] + [t_mod.get_parameter(k) for k in names],
            [f for _, f in pairs] + [f_params[k] for k in names],
            [f"input {i}" for i in range(len(pairs))] + [f"param {k}" for k in names])


def _both(info, module_input, training, f_cls):
    """build_pair and one forward on each side: (t_mod, f_mod, f_args, f_kwargs, convert,
    expected, actual); Stop where there is nothing (more) to compare."""
    t_mod, f_mod, f_args, f_kwargs, convert, _ = build_pair(info, f_cls, module_input,
                                                            training)
    fwd = module_input.forward_input
    expected, t_error = _forward(torch, t_mod, fwd.args, fwd.kwargs)
    actual, f_error = _forward(flow, f_mod, f_args, f_kwargs)
    if t_error is not None or f_error is not None:
        raise Stop([])  # (moduleinfo_vs_torch compares raise/no-raise)
    return t_mod, f_mod, f_args, f_kwargs, convert, expected, actual


# ---- 1. second derivatives ---------------------------------------------------------------
def gradgrad(info, f_cls, module_input, training):
    if not info.supports_gradgrad or _random(info, training):
        return []
    t_mod, f_mod, _, _, convert, expected, actual = _both(info, module_input, training, f_cls)
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, convert.pairs)
    if not t_out or not t_leaves:
        return []
    if len(t_out) != len(f_out):
        return [f"grad: torch has {len(t_out)} differentiable outputs, flowgrad {len(f_out)}"]
    rng = np.random.default_rng(0)
    vs = [_random_like(rng, tuple(o.shape), o.dtype) for o in t_out]
    t_v, f_v = [t for t, _ in vs], [f for _, f in vs]
    t_g, f_g, stop = both_grads((t_out, t_leaves, t_v), (f_out, f_leaves, f_v), True, "grad")
    if stop is not None:
        return stop
    found = [m for m in _none_pattern(t_g, f_g, "grad") if not m.startswith("unused")]
    found += compare_each_grad(labels, t_leaves, t_g, f_g, "grad")
    if found:
        return found
    pick = [i for i, g in enumerate(t_g) if g is not None and g.requires_grad]
    if not pick:
        return []
    flat = [labels[i] for i in pick if f_g[i] is None or not f_g[i].requires_grad]
    if flat:
        return [f"gradgrad: flowgrad's first gradient of {flat} does not require grad"]
    us = [_random_like(rng, tuple(t_g[i].shape), t_g[i].dtype) for i in pick]
    t_gg, f_gg, stop = both_grads(
        ([t_g[i] for i in pick], t_leaves + t_v, [t.detach() for t, _ in us]),
        ([f_g[i] for i in pick], f_leaves + f_v, [f.detach() for _, f in us]), False, "gradgrad")
    if stop is not None:
        return stop
    found = [m for m in _none_pattern(t_gg, f_gg, "gradgrad") if not m.startswith("unused")]
    return found + compare_each_grad(labels + [f"cotangent {i}" for i in range(len(t_v))],
                                     t_leaves + t_v, t_gg, f_gg, "gradgrad")


# ---- 2. non-contiguous inputs, parameters and cotangents ---------------------------------
def noncontiguous(t):
    """A non-contiguous flowgrad tensor with t's values (a 0-d or empty one: t itself); through
    differentiable ops when t requires grad and is not a leaf."""
    if t.ndim == 0 or t.numel() == 0:
        return t
    if t.requires_grad and not t.is_leaf:
        return flow.stack([t, t], -1)[..., 0]
    out = flow.stack([t.detach(), t.detach()], -1)[..., 0]
    return out.requires_grad_(True) if t.requires_grad else out


def _map_tensors(value, fn):
    if isinstance(value, flow.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def noncontig(info, f_cls, module_input, training):
    if _random(info, training):
        return []
    t_mod, f_mod, f_args, f_kwargs, convert, expected, _ = _both(info, module_input,
                                                                 training, f_cls)
    # the same starting state: _both's forward moved the running statistics
    _, f_mod, f_args, f_kwargs, convert, _ = build_pair(info, f_cls, module_input, training)
    leaves = {id(f): f for _, f in convert.pairs}
    made = {}

    def swap(t):
        if id(t) not in made:
            made[id(t)] = noncontiguous(t)
        return made[id(t)]
    nc_args, nc_kwargs = _map_tensors(f_args, swap), _map_tensors(f_kwargs, swap)
    pairs = [(t, made.get(id(f), f)) for t, f in convert.pairs if id(f) in leaves]
    with flow.no_grad():
        for p in list(f_mod.parameters()) + list(f_mod.buffers()):
            if p.ndim and p.numel():
                p.set_(noncontiguous(p.detach()))
    actual, f_error = _forward(flow, f_mod, nc_args, nc_kwargs)
    if f_error is not None:
        return [f"raise: flowgrad (non-contiguous) {f_error!r:.300}"]
    message = compare(to_numpy(expected), to_numpy(actual), "output (non-contiguous)")
    if message:
        return [message]
    found = []
    for key, t_buf in t_mod.named_buffers():  # (running statistics, updated in place)
        f_buf = dict(f_mod.named_buffers()).get(key)
        message = f_buf is not None and compare(to_numpy(t_buf), to_numpy(f_buf),
                                                f"buffer {key} (non-contiguous)")
        if message:
            found.append(message)
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, pairs)
    if not t_out or not t_leaves or len(t_out) != len(f_out):
        return found
    gen = torch.Generator().manual_seed(0)
    cots = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in t_out]
    try:
        t_grads = _warnings_off(lambda: torch.autograd.grad(t_out, t_leaves, cots,
                                                            allow_unused=True))
    except Exception:  # noqa: BLE001 - torch cannot differentiate it
        return found
    try:
        f_cots = [noncontiguous(Converter().tensor(c)) for c in cots]
        f_grads = _warnings_off(lambda: flow.autograd.grad(f_out, f_leaves, f_cots,
                                                           allow_unused=True))
    except Exception as error:  # noqa: BLE001
        return found + [f"grad raise: flowgrad (non-contiguous) {error!r:.300}"]
    return found + compare_each_grad(labels, t_leaves, t_grads, f_grads,
                                     "grad (non-contiguous)")


# ---- 3. memory format ------------------------------------------------------------------
FORMATS = {4: (torch.channels_last, flow.channels_last),
           5: (torch.channels_last_3d, flow.channels_last_3d)}


def _layout(module, out, fmt):
    """(is_contiguous(), is_contiguous(memory_format=fmt)) of each tensor output."""
    if isinstance(out, (list, tuple)):
        return tuple(_layout(module, o, fmt) for o in out)
    if isinstance(out, module.Tensor):
        return (out.is_contiguous(), out.is_contiguous(memory_format=fmt))
    return None


def memformat(info, f_cls, module_input, training):
    fwd = module_input.forward_input
    if fwd is None or _random(info, training):
        return []
    first = fwd.args[0] if fwd.args else None
    if not isinstance(first, torch.Tensor) or first.ndim not in FORMATS:
        return []
    t_fmt, f_fmt = FORMATS[first.ndim]
    found = []
    for in_cl, mod_cl in ((True, False), (False, True), (True, True)):
        try:
            t_mod, f_mod, f_args, f_kwargs, _, _ = build_pair(info, f_cls, module_input,
                                                              training)
        except Stop:
            return found
        t_args, f_args = list(fwd.args), list(f_args)
        if in_cl:
            t_args[0] = t_args[0].contiguous(memory_format=t_fmt)
            f_args[0] = f_args[0].contiguous(memory_format=f_fmt)
        if mod_cl:
            try:
                t_mod.to(memory_format=t_fmt)
            except Exception:  # noqa: BLE001 - torch refuses (a parameter of another rank)
                continue
            try:
                f_mod.to(memory_format=f_fmt)
            except Exception as error:  # noqa: BLE001
                found.append(f"module.to(memory_format) raise: flowgrad {error!r:.300}")
                continue
        where = f"(input {'cl' if in_cl else 'c'}, module {'cl' if mod_cl else 'c'})"
        expected, t_error = _forward(torch, t_mod, t_args, fwd.kwargs)
        actual, f_error = _forward(flow, f_mod, f_args, f_kwargs)
        if t_error is not None or f_error is not None:
            if (t_error is None) != (f_error is None):
                found.append(f"raise {where}: torch {t_error!r:.200}, flowgrad {f_error!r:.300}")
            continue
        message = compare(to_numpy(expected), to_numpy(actual), f"output {where}")
        if message:
            found.append(message)
            continue
        t_layout, f_layout = _layout(torch, expected, t_fmt), _layout(flow, actual, f_fmt)
        if t_layout != f_layout:
            found.append(f"layout {where}: (contiguous, {str(t_fmt)[6:]}) torch {t_layout}, "
                         f"flowgrad {f_layout}")
        found += _format_grads(t_mod, f_mod, expected, actual, t_args[0], f_args[0], where)
    return found


def _format_grads(t_mod, f_mod, expected, actual, t_x, f_x, where):
    """The gradients of a random cotangent to the (converted) first input and the
    parameters."""
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    if not t_out or len(t_out) != len(f_out):
        return []
    pairs = [(t_x, f_x)] if t_x.requires_grad and f_x.requires_grad else []
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, pairs)
    if not t_leaves:
        return []
    gen = torch.Generator().manual_seed(0)
    cots = [torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in t_out]
    try:
        t_grads = _warnings_off(lambda: torch.autograd.grad(t_out, t_leaves, cots,
                                                            allow_unused=True))
    except Exception:  # noqa: BLE001 - torch cannot differentiate it
        return []
    try:
        f_grads = _warnings_off(lambda: flow.autograd.grad(
            f_out, f_leaves, [Converter().tensor(c) for c in cots], allow_unused=True))
    except Exception as error:  # noqa: BLE001
        return [f"grad raise {where}: flowgrad {error!r:.300}"]
    return compare_each_grad(labels, t_leaves, t_grads, f_grads, f"grad {where}")


# ---- 4. in-place modules ---------------------------------------------------------------
def inplace(info, f_cls, module_input, training):
    if "inplace" not in inspect.signature(info.module_cls.__init__).parameters or \
            _random(info, training):
        return []
    ctor, fwd = module_input.constructor_input, module_input.forward_input
    if fwd is None or not fwd.args or ctor.kwargs.get("inplace"):
        return []
    mods = {}
    for flag in (False, True):
        kwargs = dict(ctor.kwargs, inplace=flag)
        try:
            mods[flag] = (_warnings_off(lambda: info.module_cls(*ctor.args, **kwargs)),
                          _warnings_off(lambda: f_cls(*ModuleConverter()(list(ctor.args)),
                                                      **ModuleConverter()(kwargs))))
        except Exception as error:  # noqa: BLE001
            return [f"construct raise (inplace={flag}): {error!r:.300}"]
    x = fwd.args[0].detach().clone().requires_grad_(True)
    fx = InputConverter().tensor(x)
    rest, f_rest = list(fwd.args[1:]), InputConverter()(list(fwd.args[1:]))
    found = []
    results = {}
    for lib, side, inp in ((torch, 0, x), (flow, 1, fx)):
        mod_op, mod_ip = mods[False][side], mods[True][side]
        before = inp.detach().clone()
        out_op, error = _forward(lib, mod_op, [inp, *rest] if side == 0 else [inp, *f_rest],
                                 fwd.kwargs)
        if error is not None:
            return found + [f"raise (out of place, {lib.__name__}): {error!r:.300}"]
        written_op = not bool((inp.detach() == before).all())
        copy_ = inp.detach().clone().requires_grad_(True)
        clone = copy_.clone()
        out_ip, error = _forward(lib, mod_ip, [clone, *rest] if side == 0 else [clone, *f_rest],
                                 fwd.kwargs)
        if error is not None:
            results[side] = ("raise", type(error).__name__)
            continue
        results[side] = (written_op, out_ip is clone, clone._version != 0, out_op, out_ip,
                         copy_, inp)
    if results[0][0] == "raise" or results[1][0] == "raise":
        if results[0][0] != results[1][0]:
            found.append(f"in-place call: torch {results[0][:2]}, flowgrad {results[1][:2]}")
        return found
    t_r, f_r = results[0], results[1]
    for k, what in enumerate(("out-of-place call writes its input", "in-place call returns "
                              "its input", "in-place call bumps the input's version")):
        if t_r[k] != f_r[k]:
            found.append(f"{what}: torch {t_r[k]}, flowgrad {f_r[k]}")
    for k, what in ((3, "output (out of place)"), (4, "output (in place)")):
        message = compare(to_numpy(t_r[k]), to_numpy(f_r[k]), what)
        if message:
            found.append(message)
    if found:
        return found
    grad = torch.randn(t_r[3].shape, generator=torch.Generator().manual_seed(0),
                       dtype=t_r[3].dtype)
    f_grad = Converter().tensor(grad)
    try:
        t_g = torch.autograd.grad([t_r[3], t_r[4]], [t_r[6], t_r[5]], [grad, grad])
    except Exception:  # noqa: BLE001 - torch cannot differentiate it
        return found
    try:
        f_g = flow.autograd.grad([f_r[3], f_r[4]], [f_r[6], f_r[5]], [f_grad, f_grad])
    except Exception as error:  # noqa: BLE001
        return found + [f"grad raise: flowgrad {error!r:.300}"]
    return compare_each_grad(["input (out of place)", "input (in place)"], [x, x], t_g, f_g,
                             "grad")


# ---- 5. pickle, deepcopy, save/load ------------------------------------------------------
def _saved(obj):
    buf = io.BytesIO()
    flow.save(obj, buf)
    buf.seek(0)
    return flow.load(buf, weights_only=False)


def _flags(mod):
    return [m.training for m in mod.modules()]


def serialize(info, f_cls, module_input, training):
    if _random(info, training) or _random(info, True):
        return []  # (a dropout's outputs are draws: the copies are checked in eval)
    try:
        t_mod, f_mod, f_args, f_kwargs, _, _ = build_pair(info, f_cls, module_input, training)
        _, fresh, _, _, _, _ = build_pair(info, f_cls, module_input, not training)
        _, from_torch, _, _, _, _ = build_pair(info, f_cls, module_input, not training)
    except Stop:
        return []
    f_mod.eval()
    expected, error = _forward(flow, f_mod, f_args, f_kwargs)
    if error is not None:
        return []
    f_mod.train(training)
    found = []
    copies = {}
    for how, make in (("pickle", lambda m: pickle.loads(pickle.dumps(m))),
                      ("deepcopy", copy.deepcopy), ("flow.save", _saved)):
        try:
            copies[how] = make(f_mod)
        except Exception as error:  # noqa: BLE001
            found.append(f"{how} raise: {error!r:.300}")
    try:
        fresh.load_state_dict(_saved(f_mod.state_dict()))
        fresh.train(training)
        copies["state_dict"] = fresh
    except Exception as error:  # noqa: BLE001
        found.append(f"state_dict save/load raise: {error!r:.300}")
    try:  # a checkpoint torch wrote (torch.save of the state_dict), read by flowgrad
        buf = io.BytesIO()
        torch.save(t_mod.state_dict(), buf)
        buf.seek(0)
        from_torch.load_state_dict(flow.load(buf))
        from_torch.train(training)
        copies["torch's state_dict file"] = from_torch
    except Exception as error:  # noqa: BLE001
        found.append(f"torch.save'd state_dict: flow.load/load_state_dict raise: {error!r:.300}")
    for how, mod in copies.items():
        if _flags(mod) != _flags(f_mod):
            found.append(f"{how}: training flags {_flags(mod)}, the original's {_flags(f_mod)}")
        if list(mod.state_dict()) != list(f_mod.state_dict()):
            found.append(f"{how}: state_dict keys {list(mod.state_dict())}, the original's "
                         f"{list(f_mod.state_dict())}")
        mod.eval()
        actual, error = _forward(flow, mod, f_args, f_kwargs)
        if error is not None:
            found.append(f"{how}: the copy's forward raises {error!r:.300}")
            continue
        message = compare(to_numpy(expected), to_numpy(actual), f"{how}: output")
        if message:
            found.append(message)
    return found


# ---- 6. repr ---------------------------------------------------------------------------
def repr_(info, f_cls, module_input, training):
    try:
        t_mod, f_mod, _, _, _, _ = build_pair(info, f_cls, module_input, training)
    except Stop:
        return []
    t_text, f_text = repr(t_mod), repr(f_mod)
    return [] if t_text == f_text else [f"repr: torch {t_text!r:.300}, flowgrad {f_text!r:.300}"]


# ---- 7. error inputs -------------------------------------------------------------------
def errors(info, f_cls, module_input=None, training=True):
    """Each of torch's error inputs: flowgrad raises at the same step with the same type (the
    module as constructed, uncast: as torch's test_errors)."""
    if info.module_error_inputs_func is None:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        error_inputs = list(info.module_error_inputs_func(
            info, device="cpu", dtype=torch.float64, requires_grad=False, training=training))
    found = []
    for k, error_input in enumerate(error_inputs):
        mi = error_input.module_error_input
        ctor, fwd = mi.constructor_input, mi.forward_input
        step = error_input.error_on.name  # CONSTRUCTION_ERROR / FORWARD_ERROR
        try:
            t_mod = _warnings_off(lambda: info.module_cls(*ctor.args, **ctor.kwargs))
            t_error = None if fwd is None else _forward(torch, t_mod, fwd.args, fwd.kwargs)[1]
        except Exception as error:  # noqa: BLE001
            t_error = error
        try:
            convert = ModuleConverter()
            f_cargs, f_ckwargs = convert(list(ctor.args)), convert(dict(ctor.kwargs))
            f_inputs = InputConverter()((list(fwd.args), dict(fwd.kwargs))) if fwd else None
        except Unsupported:
            continue
        try:
            f_mod = _warnings_off(lambda: f_cls(*f_cargs, **f_ckwargs))
            f_error = None if fwd is None else _forward(flow, f_mod, *f_inputs)[1]
        except Exception as error:  # noqa: BLE001
            f_error = error
        where = f"error input #{k} ({step}, torch's regex {error_input.error_regex!r:.60})"
        if t_error is None:
            found.append(f"{where}: torch 2.13 does not raise")
        elif f_error is None:
            found.append(f"{where}: no raise where torch raises {t_error!r:.200}")
        elif type(f_error).__name__ != type(t_error).__name__:
            found.append(f"{where}: type torch {type(t_error).__name__}, flowgrad "
                         f"{type(f_error).__name__} ({f_error!s:.150})")
    return found


# ---- 8. train() against eval() ---------------------------------------------------------
def _differ(a, b):
    if isinstance(a, (list, tuple)):
        return any(_differ(x, y) for x, y in zip(a, b))
    if hasattr(a, "shape"):
        a, b = to_numpy(a)[2], to_numpy(b)[2]
        return a.shape != b.shape or not np.allclose(a, b, rtol=1e-9, atol=1e-12,
                                                     equal_nan=True)
    return a != b


def train_eval(info, f_cls, module_input, training=True):
    if info.module_cls.__name__ in RANDOM:
        return []
    try:
        t_mod, f_mod, f_args, f_kwargs, _, _ = build_pair(info, f_cls, module_input, True)
    except Stop:
        return []
    t_state = copy.deepcopy(t_mod.state_dict())
    fwd = module_input.forward_input
    outs = {}
    for mode in (True, False):
        t_mod.load_state_dict(t_state)
        f_mod.load_state_dict(state_to_flow(t_state), strict=False)
        t_mod.train(mode)
        f_mod.train(mode)
        t_out, t_error = _forward(torch, t_mod, fwd.args, fwd.kwargs)
        f_out, f_error = _forward(flow, f_mod, f_args, f_kwargs)
        if t_error is not None or f_error is not None:
            return []
        outs[mode] = (t_out, f_out)
    t_differ = _differ(outs[True][0], outs[False][0])
    f_differ = _differ(outs[True][1], outs[False][1])
    if t_differ != f_differ:
        return [f"train and eval outputs differ: torch {t_differ}, flowgrad {f_differ}"]
    return []


FUNCTIONS = {"gradgrad": gradgrad, "noncontig": noncontig, "memformat": memformat,
             "inplace": inplace, "serialize": serialize, "repr": repr_, "errors": errors,
             "train_eval": train_eval}
# the angles that do not depend on the mode (run in training mode only)
ONE_MODE = frozenset(("repr", "errors", "train_eval"))


def probe(info, angles=ANGLES, first=1, modes=(True, False)):
    """Every finding for one ModuleInfo: [(angle/mode, input description, message)]."""
    f_cls = flow_class(info)
    if f_cls is None:
        return [("", "", "missing")]
    found = []
    for angle in angles:
        fn = FUNCTIONS[angle]
        if angle == "errors":
            found += [("errors", "", m) for m in fn(info, f_cls)]
            continue
        for training in modes[:1] if angle in ONE_MODE else modes:
            mode = f"{angle}/{'train' if training else 'eval'}"
            inputs = inputs_or_skip(info, training, mode, found)[:first]
            for k, module_input in enumerate(inputs):
                try:
                    messages = fn(info, f_cls, module_input, training)
                except Stop as stop:
                    messages = stop.found
                except Exception as error:  # noqa: BLE001 - the harness's own failure
                    messages = [f"probe error: {error!r:.300}"]
                found += [(mode, f"#{k} {module_input.desc}", m) for m in messages]
    return found


def main(names):
    angles = ANGLES
    first = None if "--all" in names else 1
    for arg in list(names):
        if arg.startswith("--angle="):
            angles = tuple(arg[8:].split(","))
            names.remove(arg)
    names = [n for n in names if n != "--all"]
    shard, shards = shard_of(names)
    report(module_db(), lambda info: probe(info, angles, first),
           lambda k, info: k % shards == shard and (
               not names or {full_name(info), info.name, info.module_cls.__name__} & set(names)),
           "ModuleInfos (angles)")


if __name__ == "__main__":
    with one_thread():
        main(sys.argv[1:])
