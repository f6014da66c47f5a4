"""Differential fuzzing of the nn.Module API: random programs of API calls, in torch and in
flowgrad.

A seed draws a small module tree (Linear, Conv1d, BatchNorm1d, Embedding, Sequential,
ModuleList, ModuleDict, ParameterList, ParameterDict, a module with extra state, custom boxes
with their own parameters and buffers, persistent or not, some of them None; a submodule shared
by two parents, a weight tied between two Linears), builds it in both frameworks with the same
values, then runs a random sequence of steps: state_dict (prefix, keep_vars),
load_state_dict (strict or not, keys dropped, unexpected keys, a wrong shape, assign, the
given tensors changed afterwards), the named_* iterators (prefix, recurse, remove_duplicate),
apply, requires_grad_, zero_grad, train/eval, dtype conversions, register_buffer /
register_parameter / add_module / register_module with good and bad names and values,
__setattr__ / __delattr__, get_submodule / get_parameter / get_buffer / set_submodule,
forward pre/post hooks (with_kwargs, prepend, always_call, replacing what they see), full
backward (pre) hooks, state_dict and load_state_dict pre/post hooks, handle.remove(), forward
and backward, repr and dir. Each step's outcome (its result, or the exception's class), the
hooks' calls and a snapshot of the tree (names, values, dtypes, requires_grad, grads, training
flags) must agree with torch's after every step.

    .venv/bin/python tests/module_api_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/module_api_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import random
import warnings
import zlib

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

F = 3  # every layer maps (N, F) to (N, F)
STEPS = 10

# names a program registers or assigns: new ones, ones the tree uses, bad ones
NAMES = ["fresh", "fresh2", "w", "buf", "lin", "box", "0", "training", "forward", "a.b", "",
         "weight", "bias", "running_mean", "lst", 7, None]
# paths get_submodule and friends are asked for (the tree's own are added per program)
BAD_PATHS = ["", "nope", "lin.nope", "lin.weight", "lin.weight.x", "0.1.2", "box.w.x"]


# ----------------------------------------------------------------------------- the tree

def _leaf(r, depth):
    kind = r.choice(["linear", "linear", "conv", "bn", "emb", "seq", "mlist", "mdict", "plist",
                     "pdict", "extra"] + (["box"] if depth < 2 else []))
    if kind == "linear":
        return ("linear", r.random() < 0.7)
    if kind == "conv":
        return ("conv", r.random() < 0.7)
    if kind == "bn":
        return ("bn", r.random() < 0.7, r.random() < 0.7)
    if kind == "seq":
        return ("seq", [r.choice([("linear", True), ("bn", True, True), ("linear", False)])
                        for _ in range(r.randint(0, 3))])
    if kind == "mlist":
        return ("mlist", [_leaf(r, 2) for _ in range(r.randint(0, 2))])
    if kind == "mdict":
        return ("mdict", [(k, _leaf(r, 2)) for k in r.sample(["a", "b", "c"], r.randint(0, 2))])
    if kind == "plist":
        return ("plist", [r.choice([(F,), (1, F), ()]) for _ in range(r.randint(0, 3))])
    if kind == "pdict":
        return ("pdict", [(k, r.choice([(F,), (2,), ()]))
                          for k in r.sample(["p", "q", "r"], r.randint(0, 2))])
    if kind == "box":
        return _box(r, depth + 1)
    return (kind,)


def _box(r, depth):
    children = [(n, _leaf(r, depth)) for n in
                r.sample(["lin", "box", "0", "lst", "d", "seq", "e"], r.randint(1, 3))]
    params = [(n, None if r.random() < 0.2 else r.choice([(F,), (1,), ()]))
              for n in r.sample(["w", "u"], r.randint(0, 2))]
    buffers = [(n, None if r.random() < 0.2 else r.choice([(F,), ()]), r.random() < 0.6)
               for n in r.sample(["buf", "stat"], r.randint(0, 2))]
    return ("box", children, params, buffers)


def _classes(m):
    """The custom classes of the tree, in framework `m`."""
    cache = _classes.__dict__.setdefault("cache", {})
    if m in cache:
        return cache[m]

    class Box(m.nn.Module):
        def __init__(self, order):
            super().__init__()
            self.order = order

        def forward(self, x):
            for name in self.order:
                child = getattr(self, name, None)
                if isinstance(child, m.nn.Module):
                    x = _run(m, child, x)
                elif isinstance(child, m.Tensor) and child.is_floating_point():
                    x = x + child.sum().to(x.dtype)
            return x

    class Extra(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = m.nn.Linear(F, F)
            self.count = 1

        def forward(self, x):
            return self.lin(x) * self.count

        def get_extra_state(self):
            return {"count": self.count}

        def set_extra_state(self, state):
            self.count = state["count"] + 1

        def extra_repr(self):
            return f"count={self.count}"

    cache[m] = Box, Extra
    return cache[m]


def _run(m, mod, x):
    """`mod` applied to x (N, F), whatever kind of module it is."""
    name = type(mod).__name__
    if name == "Conv1d":
        return mod(x.unsqueeze(-1)).squeeze(-1)
    if name == "Embedding":
        return x + mod(m.tensor([0, 2, 4])).sum(0).to(x.dtype)
    if name in ("ModuleList", "ModuleDict"):
        for child in (mod.values() if name == "ModuleDict" else mod):
            x = _run(m, child, x)
        return x
    if name in ("ParameterList", "ParameterDict"):
        for p in (mod.values() if name == "ParameterDict" else mod):
            if isinstance(p, m.Tensor):
                x = x + p.sum().to(x.dtype)
        return x
    return mod(x)


def _build(m, spec, path, values):
    """The module of `spec` in framework `m` (`path` names its values)."""
    kind = spec[0]
    if kind == "linear":
        mod = m.nn.Linear(F, F, bias=spec[1])
    elif kind == "conv":
        mod = m.nn.Conv1d(F, F, 1, bias=spec[1])
    elif kind == "bn":
        mod = m.nn.BatchNorm1d(F, affine=spec[1], track_running_stats=spec[2])
    elif kind == "emb":
        mod = m.nn.Embedding(5, F)
    elif kind == "extra":
        mod = _classes(m)[1]()
    elif kind == "seq":
        mod = m.nn.Sequential(*[_build(m, s, f"{path}.{i}", values)
                                for i, s in enumerate(spec[1])])
    elif kind == "mlist":
        mod = m.nn.ModuleList([_build(m, s, f"{path}.{i}", values)
                               for i, s in enumerate(spec[1])])
    elif kind == "mdict":
        mod = m.nn.ModuleDict({k: _build(m, s, f"{path}.{k}", values) for k, s in spec[1]})
    elif kind == "plist":
        mod = m.nn.ParameterList([m.nn.Parameter(m.tensor(values(f"{path}.{i}", s)))
                                  for i, s in enumerate(spec[1])])
    elif kind == "pdict":
        mod = m.nn.ParameterDict({k: m.nn.Parameter(m.tensor(values(f"{path}.{k}", s)))
                                  for k, s in spec[1]})
    else:
        _, children, params, buffers = spec
        mod = _classes(m)[0]([n for n, _ in children] + [n for n, _ in params]
                             + [n for n, _, _ in buffers])
        for n, s in children:
            mod.add_module(n, _build(m, s, f"{path}.{n}".lstrip("."), values))
        for n, s in params:
            mod.register_parameter(n, None if s is None else
                                   m.nn.Parameter(m.tensor(values(f"{path}.{n}", s))))
        for n, s, persistent in buffers:
            mod.register_buffer(n, None if s is None else m.tensor(values(f"{path}.{n}", s)),
                                persistent=persistent)
    return mod


def _module_paths(spec, path=""):
    """The paths of the modules of a spec, and of its Linears."""
    out = [(path, spec[0])]
    kids = []
    if spec[0] in ("seq", "mlist"):
        kids = [(str(i), s) for i, s in enumerate(spec[1])]
    elif spec[0] == "mdict":
        kids = spec[1]
    elif spec[0] == "box":
        kids = spec[1]
    elif spec[0] == "extra":
        kids = [("lin", ("linear", True))]
    for n, s in kids:
        out += _module_paths(s, f"{path}.{n}".lstrip("."))
    return out


# ----------------------------------------------------------------------------- the steps

def _draw_step(r, paths, linears):
    """One step: (kind, arguments), the same in both frameworks."""
    target = r.choice(paths)
    kind = r.choice([
        "state_dict", "load", "load", "load", "named", "named", "apply", "requires_grad",
        "zero_grad", "train", "dtype", "register_buffer", "register_parameter", "add_module",
        "setattr", "delattr", "get", "get", "set_submodule", "forward_hook", "forward_hook",
        "backward_hook", "state_hook", "load_hook", "remove", "forward", "forward", "forward",
        "repr", "dir"])
    name = r.choice(NAMES)
    if kind == "state_dict":
        return kind, (target, r.choice(["", "top."]), r.random() < 0.5)
    if kind == "load":
        return kind, (target, r.choice(["same", "drop", "extra", "shape", "scalar", "partial",
                                        "buffers_only", "other_dtype", "keep_vars",
                                        "prefixed"]), r.random() < 0.6, r.random() < 0.3,
                      r.randrange(1000))
    if kind == "named":
        return kind, (target, r.choice(["parameters", "buffers", "modules", "children",
                                        "count"]),
                      r.choice(["", "p."]), r.random() < 0.8, r.random() < 0.7)
    if kind == "requires_grad":
        return kind, (target, r.random() < 0.5)
    if kind == "zero_grad":
        return kind, (target, r.random() < 0.5)
    if kind == "train":
        return kind, (target, r.choice([True, False, "eval", 1]))
    if kind == "dtype":
        return kind, (target, r.choice(["double", "float", "half_float", "to64", "to32",
                                        "to_int", "to_tensor", "to_cpu", "to_bad"]))
    if kind in ("register_buffer", "register_parameter", "add_module", "setattr"):
        return kind, (target, name, r.choice(["tensor", "param", "none", "module", "int",
                                              "tied"]), r.random() < 0.5, r.choice(linears))
    if kind == "delattr":
        return kind, (target, name)
    if kind == "get":
        return kind, (r.choice(["get_submodule", "get_parameter", "get_buffer"]),
                      r.choice(paths + [f"{p}.{n}".lstrip(".") for p in paths[:4]
                                        for n in ("weight", "bias", "w", "buf", "running_mean",
                                                  "0", "order")] + BAD_PATHS))
    if kind == "set_submodule":
        return kind, (r.choice(paths + BAD_PATHS), r.random() < 0.3)
    if kind == "forward_hook":
        return kind, (target, r.choice(["pre", "post"]), r.random() < 0.4, r.random() < 0.3,
                      r.random() < 0.3, r.choice([None, None, "scale", "raise"]))
    if kind == "backward_hook":
        return kind, (target, r.choice(["full", "pre"]), r.random() < 0.3, r.random() < 0.4)
    if kind == "state_hook":
        return kind, (target, r.choice(["pre", "post", "old"]),
                      r.choice([None, "add", "return"]))
    if kind == "load_hook":
        return kind, (target, r.choice(["pre", "post"]), r.random() < 0.5)
    if kind == "remove":
        return kind, (r.randrange(8),)
    if kind == "forward":
        return kind, (r.randrange(1000), r.random() < 0.7, r.random() < 0.15)
    return kind, (target,)


_SETTERS = ("register_buffer", "register_parameter", "add_module", "setattr")


def _value(m, ctx, what, persistent_or_grad, linear):
    if what == "tensor":
        return m.full((F,), 0.5, dtype=ctx.dtype(m))
    if what == "param":
        return m.nn.Parameter(m.full((F,), 0.25, dtype=ctx.dtype(m)),
                              requires_grad=persistent_or_grad)
    if what == "module":
        return _linear(m, persistent_or_grad)
    if what == "tied":
        mod = _resolve(ctx.root, linear)
        return getattr(mod, "weight", None)
    return None if what == "none" else 3


def _linear(m, bias):
    """A new Linear with the same values in both frameworks."""
    lin = m.nn.Linear(F, F, bias=bias)
    with m.no_grad():
        for p in lin.parameters():
            p.copy_(m.linspace(-1, 1, p.numel()).reshape(p.shape))
    return lin


def _resolve(root, path):
    try:
        return root.get_submodule(path)
    except Exception:  # noqa: BLE001 - a path a step deleted: the root instead
        return root


class Context:
    """One framework's tree, its hook handles and the hooks' log."""

    def __init__(self, root, module):
        self.root, self.m, self.handles, self.log = root, module, [], []

    def dtype(self, m):
        for t in self.root.parameters():
            if t.is_floating_point():
                return t.dtype
        return m.float32


def _hook_return(m, ctx, tag, replace, value):
    if replace == "raise":
        raise ValueError(f"hook {tag} refuses")
    return value if replace == "scale" else None


def _step(m, ctx, kind, args):
    """The outcome of one step in framework `m`: a value built of plain data and tensors."""
    root = ctx.root
    if kind == "state_dict":
        sd = _resolve(root, args[0]).state_dict(prefix=args[1], keep_vars=args[2])
        return [(k, _tensor(v) if isinstance(v, m.Tensor) else repr(v)) for k, v in sd.items()]
    if kind == "load":
        return _load(m, ctx, *args)
    if kind == "named":
        mod = _resolve(root, args[0])
        what, prefix, recurse, dedup = args[1:]
        if what == "parameters":
            return [(n, _tensor(p)) for n, p in mod.named_parameters(prefix, recurse, dedup)]
        if what == "buffers":
            return [(n, _tensor(b)) for n, b in mod.named_buffers(prefix, recurse, dedup)]
        if what == "modules":
            return [(n, type(c).__name__) for n, c in
                    mod.named_modules(prefix=prefix, remove_duplicate=dedup)]
        if what == "children":
            return [(n, type(c).__name__) for n, c in mod.named_children()]
        return (len(list(mod.parameters(recurse))), len(list(mod.buffers(recurse))),
                len(list(mod.modules())), len(list(mod.children())))
    if kind == "apply":
        seen = []
        result = _resolve(root, args[0]).apply(lambda c: seen.append(type(c).__name__))
        return seen, result is _resolve(root, args[0])
    if kind == "requires_grad":
        mod = _resolve(root, args[0])
        return mod.requires_grad_(args[1]) is mod
    if kind == "zero_grad":
        return _resolve(root, args[0]).zero_grad(set_to_none=args[1])
    if kind == "train":
        mod = _resolve(root, args[0])
        return (mod.eval() if args[1] == "eval" else mod.train(args[1])) is mod
    if kind == "dtype":
        mod, how = _resolve(root, args[0]), args[1]
        if how == "half_float":
            return mod.half().float() is mod
        if how == "to_int":
            return mod.to(m.int32) is mod
        if how in ("to_tensor", "to_cpu", "to_bad"):
            arg = {"to_tensor": m.zeros(1, dtype=m.float64), "to_cpu": "cpu",
                   "to_bad": "float64"}[how]
            return mod.to(arg) is mod
        out = {"double": mod.double, "float": mod.float, "to64": lambda: mod.to(m.float64),
               "to32": lambda: mod.to(dtype=m.float32)}[how]()
        return out is mod
    if kind in ("register_buffer", "register_parameter", "add_module", "setattr"):
        mod = _resolve(root, args[0])
        name, what, flag, linear = args[1:]
        value = _value(m, ctx, what, flag, linear)
        if kind == "register_buffer":
            return mod.register_buffer(name, value, persistent=flag)
        if kind == "register_parameter":
            return mod.register_parameter(name, value)
        if kind == "add_module":
            return (mod.add_module if flag else mod.register_module)(name, value)
        return setattr(mod, name, value)
    if kind == "delattr":
        return delattr(_resolve(root, args[0]), args[1])
    if kind == "get":
        got = getattr(root, args[0])(args[1])
        return _tensor(got) if isinstance(got, m.Tensor) else type(got).__name__
    if kind == "set_submodule":
        return root.set_submodule(args[0], _linear(m, True), strict=args[1])
    if kind == "forward_hook":
        return _forward_hook(m, ctx, *args)
    if kind == "backward_hook":
        return _backward_hook(m, ctx, *args)
    if kind == "state_hook":
        return _state_hook(m, ctx, *args)
    if kind == "load_hook":
        return _load_hook(m, ctx, *args)
    if kind == "remove":
        if ctx.handles:
            ctx.handles[args[0] % len(ctx.handles)].remove()
        return None
    if kind == "forward":
        x = m.tensor(np.random.default_rng(args[0]).standard_normal((4, F)),
                     dtype=ctx.dtype(m), requires_grad=True)
        counts = _batch_counts(root) if m is torch else []
        try:
            out = root(x=x) if args[2] else root(x)
        except Exception:
            _uncount(counts)  # KNOWN["refused forward"]: torch's BatchNorm has counted
            raise
        if args[1] and out.requires_grad:
            up = np.random.default_rng(args[0] + 1).standard_normal(tuple(out.shape))
            (out * m.tensor(up, dtype=out.dtype)).sum().backward()
        return _tensor(out), None if x.grad is None else _tensor(x.grad)
    if kind == "repr":
        return repr(_resolve(root, args[0])).replace(m.__name__ + ".", "")
    mod = _resolve(root, args[0])
    return sorted(n for n in set(dir(mod)) - set(dir(type(mod))) if not n.startswith("_"))


def _batch_counts(root):
    """Every BatchNorm's count of batches and its running mean's values (or None)."""
    out = []
    for mod in root.modules():
        n = getattr(mod, "num_batches_tracked", None)
        if isinstance(n, torch.Tensor):
            if hasattr(mod, "running_mean"):  # (deleted: raised outside batch_norm, counted)
                out.append((mod, int(n), _values(mod.running_mean)))
    return out


def _values(t):
    return t.detach().numpy().copy() if isinstance(t, torch.Tensor) else None


def _uncount(counts):
    """Take back the count of a batch whose batch_norm refused before touching its running
    statistics (a forward that raised), as flowgrad's BatchNorm does (torch's batch_norm
    updates them with no new version: their values tell)."""
    for mod, n, mean in counts:
        now = _values(getattr(mod, "running_mean", None))
        same = now is None and mean is None or now is not None and mean is not None and \
            now.shape == mean.shape and np.array_equal(now, mean, equal_nan=True)
        if int(mod.num_batches_tracked) == n + 1 and same:
            with torch.no_grad():
                mod.num_batches_tracked.sub_(1)


def _load(m, ctx, target, how, strict, assign, seed):
    mod = _resolve(ctx.root, target)
    sd = mod.state_dict(keep_vars=how == "keep_vars")
    rng = np.random.default_rng(seed)
    given = {}
    for k, v in sd.items():
        if how == "keep_vars":  # the module's own tensors (Parameters), given back
            pass
        elif how == "other_dtype" and isinstance(v, m.Tensor) and v.is_floating_point():
            v = m.tensor(rng.standard_normal(tuple(v.shape)),
                         dtype=m.float32 if v.dtype == m.float64 else m.float64)
        elif isinstance(v, m.Tensor) and v.is_floating_point():
            v = m.tensor(rng.standard_normal(tuple(v.shape)), dtype=v.dtype)
        given[("x." if how == "prefixed" else "") + k] = v
    keys = [k for k, v in given.items() if isinstance(v, m.Tensor)]  # (not extra state)
    if how == "drop" and keys:
        del given[keys[seed % len(keys)]]
    elif how == "extra":
        given[keys[seed % len(keys)] + "_x" if keys else "x"] = m.ones(2)
        given["nothing.here"] = m.ones(1)
    elif how == "shape" and keys:
        given[keys[seed % len(keys)]] = m.ones(7)
    elif how == "scalar" and keys:
        k = keys[seed % len(keys)]
        if isinstance(given[k], m.Tensor):
            given[k] = given[k].flatten()[:1].reshape(())
    elif how == "partial":
        given = {k: v for i, (k, v) in enumerate(given.items()) if i % 2 == seed % 2}
    elif how == "buffers_only":
        names = {n for n, _ in mod.named_buffers()}
        given = {k: v for k, v in given.items() if k in names}
    before = _tensors_of(ctx.root)
    try:
        result = mod.load_state_dict(given, strict=strict, assign=assign)
    except Exception:
        _restore(m, before)  # KNOWN["partial load"]: torch has copied the keys that matched
        raise
    with m.no_grad():  # whether the module shares the given tensors
        for v in given.values():
            if isinstance(v, m.Tensor) and v.is_floating_point():
                v.mul_(-1)
    return sorted(result.missing_keys), sorted(result.unexpected_keys)


def _tensors_of(root):
    """Every module's parameter and buffer stores (and extra state), and the values of their
    tensors, to be put back."""
    stores, values = [], []
    for _, mod in root.named_modules(remove_duplicate=False):
        for store in (mod._parameters, mod._buffers):
            stores.append((store, dict(store)))
            values += [(t, t.detach().numpy().copy()) for t in store.values() if t is not None]
        if hasattr(mod, "count"):
            stores.append((mod.__dict__, {"count": mod.count}))
    return stores, values


def _restore(m, saved):
    stores, values = saved
    for store, entries in stores:
        if "count" not in entries:  # (a module's __dict__ only gets its count back)
            store.clear()
        store.update(entries)
    with m.no_grad():
        for t, v in values:
            t.copy_(m.tensor(v))


def _forward_hook(m, ctx, target, when, with_kwargs, prepend, always_call, replace):
    mod, log = _resolve(ctx.root, target), ctx.log
    tag = f"{when}{len(ctx.handles)}"
    if when == "pre":
        if with_kwargs:
            def hook(mod, args, kwargs):
                log.append((tag, type(mod).__name__, len(args), sorted(kwargs)))
                return _hook_return(m, ctx, tag, replace, ((args[0] * 0.5,), kwargs))
        else:
            def hook(mod, args):
                log.append((tag, type(mod).__name__, len(args)))
                return _hook_return(m, ctx, tag, replace, args[0] * 0.5)
        handle = mod.register_forward_pre_hook(hook, prepend=prepend, with_kwargs=with_kwargs)
    else:
        if with_kwargs:
            def hook(mod, args, kwargs, out):
                log.append((tag, type(mod).__name__, len(args), sorted(kwargs), _tensor(out)))
                return _hook_return(m, ctx, tag, replace, out * 2)
        else:
            def hook(mod, args, out):
                log.append((tag, type(mod).__name__, len(args), _tensor(out)))
                return _hook_return(m, ctx, tag, replace, out * 2)
        handle = mod.register_forward_hook(hook, prepend=prepend, with_kwargs=with_kwargs,
                                           always_call=always_call)
    ctx.handles.append(handle)


def _grads(gs):
    return [None if g is None else _tensor(g) for g in gs]


def _backward_hook(m, ctx, target, when, prepend, replace):
    mod, log = _resolve(ctx.root, target), ctx.log
    tag = f"b{when}{len(ctx.handles)}"
    if when == "full":
        def hook(mod, grad_input, grad_output):
            log.append((tag, type(mod).__name__, _grads(grad_input), _grads(grad_output)))
            if replace:
                return tuple(None if g is None else g * 3 for g in grad_input)
        handle = mod.register_full_backward_hook(hook, prepend=prepend)
    else:
        def hook(mod, grad_output):
            log.append((tag, type(mod).__name__, _grads(grad_output)))
            if replace:
                return tuple(None if g is None else g * 0.5 for g in grad_output)
        handle = mod.register_full_backward_pre_hook(hook, prepend=prepend)
    ctx.handles.append(handle)


def _state_hook(m, ctx, target, when, mutate):
    mod, log = _resolve(ctx.root, target), ctx.log
    tag = f"s{when}{len(ctx.handles)}"
    if when == "pre":
        def hook(mod, prefix, keep_vars):
            log.append((tag, type(mod).__name__, prefix, keep_vars))
            return {} if mutate == "return" else None
        handle = mod.register_state_dict_pre_hook(hook)
    else:
        def hook(mod, sd, prefix, meta):
            log.append((tag, type(mod).__name__, prefix, sorted(meta)))
            if mutate == "add":
                sd[prefix + "added"] = m.zeros(1)
            return {prefix + "new": m.ones(1)} if mutate == "return" else None
        register = mod.register_state_dict_post_hook if when == "post" else \
            mod._register_state_dict_hook  # (torch's older form: a dict returned replaces)
        handle = register(hook)
    ctx.handles.append(handle)


def _load_hook(m, ctx, target, when, mutate):
    mod, log = _resolve(ctx.root, target), ctx.log
    tag = f"l{when}{len(ctx.handles)}"
    if when == "pre":
        def hook(mod, sd, prefix, meta, strict, missing, unexpected, errors):
            log.append((tag, type(mod).__name__, prefix, strict, sorted(k for k in sd
                                                                         if k.startswith(prefix))))
            if mutate:
                for k in [k for k in sd if k.startswith(prefix)][:1]:
                    sd.pop(k)
        handle = mod.register_load_state_dict_pre_hook(hook)
    else:
        def hook(mod, keys):
            log.append((tag, type(mod).__name__, sorted(keys.missing_keys),
                        sorted(keys.unexpected_keys)))
            if mutate:
                keys.missing_keys.clear()
        handle = mod.register_load_state_dict_post_hook(hook)
    ctx.handles.append(handle)


# ----------------------------------------------------------------------------- observing

def _tensor(t):
    """A tensor as plain data: its class, dtype, requires_grad and values."""
    dtype = str(t.dtype).split(".")[-1]
    values = t.detach().float().numpy().copy() if dtype in ("float16", "bfloat16") else \
        t.detach().numpy().copy()
    return ("Parameter" if type(t).__name__ == "Parameter" else "Tensor", dtype,
            bool(t.requires_grad), values)


def _plain(v):
    """A tensor as plain data, a module as its repr."""
    if hasattr(v, "detach"):
        return _tensor(v)
    return repr(v).replace("torch.", "").replace("flowgrad.", "") if hasattr(v, "apply") else v


def _snapshot(m, root):
    """The tree: every parameter (with its grad) and buffer, every module's training flag."""
    params = [(n, _tensor(p), None if p.grad is None else _tensor(p.grad))
              for n, p in root.named_parameters(remove_duplicate=False)]
    buffers = [(n, _tensor(b)) for n, b in root.named_buffers(remove_duplicate=False)]
    modules = [(n, type(c).__name__, _plain(getattr(c, "training", "deleted"))) for n, c in
               root.named_modules(remove_duplicate=False)]
    return params, buffers, modules


def _difference(a, b, rtol, where="outcome"):
    """Where plain data `a` (flowgrad's) differs from `b` (torch's), or None."""
    if isinstance(b, np.ndarray) or isinstance(a, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{where}: flowgrad {a!r}, torch {b!r}"
        if b.dtype != np.float64:
            rtol = max(rtol, 1e-3)
        return fuzz_common.first_difference([(where, a, b)], rtol)
    if isinstance(b, (list, tuple)) and isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: flowgrad {_short(a)}, torch {_short(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _difference(x, y, rtol, f"{where}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{where}: flowgrad {_short(a)}, torch {_short(b)}"
    return None


def _short(v):
    return repr(v)[:300]


# ----------------------------------------------------------------------------- programs

class Program:
    """A module tree and the steps run on it, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.seed = seed
        self.spec = _box(r, 0)
        paths = _module_paths(self.spec)
        linears = [p for p, k in paths if k == "linear"] or [""]
        self.shares = []  # (parent path, name, shared path)
        boxes = [p for p, k in paths if k == "box"]
        if len(paths) > 2 and r.random() < 0.5:  # (not an ancestor of the box: no cycle)
            box = r.choice(boxes)
            shareable = [p for p, _ in paths[1:] if not (box + ".").startswith(p + ".")]
            if shareable:
                self.shares.append((box, "shared", r.choice(shareable)))
        self.tie = (r.choice(linears), r.choice(linears)) if r.random() < 0.5 else None
        self.paths = [p for p, _ in paths] + [f"{b}.shared".lstrip(".") for b, _, _ in
                                               self.shares]
        self.dtype = r.choice(["float32", "float64"])
        self.steps = [_draw_step(r, self.paths, linears) for _ in range(STEPS)]
        # (forward and backward through a few layers: float32 somewhere, BatchNorm's
        # cancellations take a float32 tolerance; a new Linear is float32 in any tree, and
        # float64 gradients flowing out of it carry float32 sums)
        self.rtol = 1e-9 if self.dtype == "float64" and not any(
            k in ("dtype", "set_submodule") or k == "load" and a[1] == "other_dtype"
            or k in _SETTERS and a[2] == "module" for k, a in self.steps) else 1e-3

    def describe(self):
        return (f"tree {self.spec} shares {self.shares} tie {self.tie} {self.dtype}\n"
                + "\n".join(f"  {k}{a}" for k, a in self.steps))

    def truth(self):
        """This program in float64 on the same float32 values: the arbiter of a float32 run."""
        exact = Program(self.seed)
        exact.dtype, exact.rtol = "float64", self.rtol
        return exact

    def build(self, m):
        def values(path, shape):
            rng = np.random.default_rng(self.seed + zlib.crc32(path.encode()))
            return rng.standard_normal(shape).astype(np.float32).astype(self.dtype)
        root = _build(m, self.spec, "", values)
        for parent, name, path in self.shares:
            root.get_submodule(parent).add_module(name, root.get_submodule(path))
        if self.tie is not None and self.tie[0]:
            a, b = (root.get_submodule(p) for p in self.tie)
            b.weight = a.weight
        root.to(getattr(m, self.dtype))
        with m.no_grad():  # the same values in both: torch's initialization is random
            for n, p in root.named_parameters():
                p.copy_(m.tensor(values(n, tuple(p.shape))))
        return Context(root, m)

    def run(self, m):
        """[(step outcome, hook log, snapshot)] after building and after each step."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ctx = self.build(m)
            history = [(None, [], _snapshot(m, ctx.root))]
            for kind, args in self.steps:
                try:
                    outcome = _step(m, ctx, kind, args)
                except Exception as e:  # noqa: BLE001 - the exception's class is the outcome
                    outcome = ("raised", type(e).__name__, str(e)[:200])
                log, ctx.log[:] = list(ctx.log), []
                history.append((outcome, log, _snapshot(m, ctx.root)))
            return history


def check(seed):
    """None when flowgrad's program runs as torch's, else a message naming the step. A float32
    program whose numbers differ is judged by the float64 truth: flowgrad's float32 numbers
    may be as far from it as torch's are (a BatchNorm bias's gradient of 0 is -1e-3 in
    torch's float32 sums, 8e-6 in flowgrad's)."""
    prog = Program(seed)
    want, got = prog.run(torch), prog.run(flow)
    verdict = _verdict(prog, want, got)
    if verdict and prog.dtype == "float32":
        truth = prog.truth().run(torch)
        if len(truth) == len(want) and _verdict(prog, want, got, truth) is None:
            return None
    return verdict


def _no_further(a, b, t, rtol, where):
    """Where flowgrad's `a` differs from torch's `b` other than in float32 numbers that are
    no further from the float64 truth `t` than torch's (to `rtol` of the scale), or None."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and isinstance(t, np.ndarray) \
            and b.dtype == np.float32 and a.shape == b.shape == t.shape:
        if not np.array_equal(np.isfinite(a), np.isfinite(b)):
            return f"{where}: nan/inf differ: flowgrad {a!r}, torch {b!r}"
        err = np.abs(a - t) - np.abs(b - t)
        scale = max(1.0, float(np.abs(t).max(initial=0.0)))
        if np.nanmax(err, initial=0.0) > rtol * scale:
            return f"{where}: flowgrad {a!r}, torch {b!r}, float64 {t!r}"
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and \
            isinstance(t, (list, tuple)) and len(a) == len(b) == len(t):
        for i, xyz in enumerate(zip(a, b, t)):
            d = _no_further(*xyz, rtol, f"{where}[{i}]")
            if d:
                return d
        return None
    return _difference(a, b, rtol, where)


def _verdict(prog, want, got, truth=None):
    """The first step where `got` (flowgrad's history) differs from `want` (torch's), or None;
    with the float64 `truth`, float32 numbers need only be no further from it than torch's."""
    truth = truth or [None] * len(want)
    for i, ((ow, lw, sw), (og, lg, sg), t) in enumerate(zip(want, got, truth)):
        step = "build" if i == 0 else f"step {i - 1} {prog.steps[i - 1]}"
        if _raised(ow) or _raised(og):
            if not (_raised(ow) and _raised(og) and ow[1] == og[1]):
                return f"{step}: flowgrad {_short(og)}, torch {_short(ow)}"
            ow = og = None  # the same exception class: the messages are not compared
        if t is None:
            d = _difference(og, ow, prog.rtol) or _difference(lg, lw, prog.rtol, "hooks") or \
                _difference(sg, sw, prog.rtol, "snapshot")
        else:
            d = _no_further((og, lg, sg), (ow, lw, sw), t, 1e-4, "step")
        if d:
            return f"{step}: {d}"
    return None


def _raised(o):
    return isinstance(o, tuple) and o[:1] == ("raised",)


def main():
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
