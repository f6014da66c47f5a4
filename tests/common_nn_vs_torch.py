"""torch's older nn test database (common_nn) run through flowgrad: the same constructor
arguments, the same weights, the same inputs and targets; the same outputs, gradients, buffers.

`torch.testing._internal.common_nn` describes ~280 module and loss configurations as dicts
(`module_tests`, `get_new_module_tests()`, `criterion_tests`): a module name or a constructor
(a lambda over `nn`, or `wrap_functional(F.fn, **kwargs)`), its arguments, the input (a size, a
value or a function), for a loss the target. For each entry the torch module is built (seed 0,
under the entry's default dtype, float64 where it gives none), the flowgrad module of the same
name is built from the same arguments (a constructor lambda is run with `torch`, `nn` and `F`
bound to flowgrad's, its closure's tensors copied; a `wrap_functional` entry calls flowgrad's
functional of the same name with the same keyword arguments), torch's state_dict is copied into
it, and one forward on the same numbers is compared: raise/no-raise, the output's structure,
shape, dtype and values, the gradients of a fixed cotangent with respect to the inputs and to
every parameter (by name), their gradients against a second cotangent where torch runs
gradgradcheck (`check_gradgrad`), and the buffers after the forward. A module runs in training
and in eval mode; every entry runs again with flowgrad's inputs non-contiguous (torch's
test_noncontig), under float32 (first order), a loss with its floating target requiring grad;
in the first run, the backward under vmap along a batch of cotangents (torch's
check_batched_grad) and the forward-mode jvp are compared too. Random modules (RReLU in
training) are compared by structure only.

Run as a script for a report: .venv/bin/python -W ignore tests/common_nn_vs_torch.py [name ...]
(names as torch's tests name them without `test_`: `Conv1d_stride`, `BCELoss_no_reduce`;
`--shard=i/n` runs every n-th entry from the i-th).
"""
from __future__ import annotations

import contextlib
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from moduleinfo_vs_torch import (  # noqa: E402, I001
    RANDOM, RANDOM_IN_EVAL, InputConverter, ModuleConverter, _differentiable, _warnings_off,
    compare_buffers, compare_state, state_to_flow)
from opinfo_vs_torch import (  # noqa: E402
    Converter, Unsupported, compare, one_thread, shard_of, to_numpy, torch_test_internals)

from moduleinfo_vs_torch import compare_each_grad  # noqa: E402

import flowgrad as flow  # noqa: E402

class Entry:
    """One test dict: its name (torch's test name without `test_`), its kind ('module' or
    'criterion') and the dict."""

    def __init__(self, kind, params, name):
        self.kind, self.params, self.name = kind, params, name

    def __repr__(self):
        return f"Entry({self.name})"


def _base_name(params):
    if params.get("fullname"):
        return params["fullname"]
    name = params.get("module_name") or params["constructor"].__name__
    return name + ("_" + params["desc"] if params.get("desc") else "")


def entries():
    """Every entry of torch's common_nn lists (imports torch's test internals once)."""
    with torch_test_internals():
        from torch.testing._internal import common_nn
        state = torch.get_rng_state()
        new_tests = common_nn.get_new_module_tests()  # (it seeds the global generator)
        torch.set_rng_state(state)
    found, seen = [], {}
    for kind, tests in (("module", common_nn.module_tests), ("module", new_tests),
                        ("criterion", common_nn.criterion_tests)):
        for params in tests:
            name = _base_name(params)
            seen[name] = seen.get(name, 0) + 1
            found.append(Entry(kind, params, name if seen[name] == 1 else f"{name}#{seen[name]}"))
    return found


def _torch_test(entry):
    """torch's own test object for the entry (it makes the inputs as torch's tests do)."""
    from torch.testing._internal import common_nn
    params = {k: v for k, v in entry.params.items() if k != "decorator"}
    if "constructor" not in params:
        params["constructor"] = getattr(torch.nn, params.pop("module_name"))
    params["constructor"] = _bind_reduction(params["constructor"], entry.name)
    cls = common_nn.CriterionTest if entry.kind == "criterion" else common_nn.NewModuleTest
    return cls(**params)


def _bind_reduction(ctor, name):
    """The `*_no_batch_dim_{none,mean,sum}` loss entries build their loss with the module-level
    loop variable `reduction`, which is 'sum' by the time a test runs: each is given the
    reduction its name says."""
    reduction = name.rsplit("_", 1)[-1]
    if (isinstance(ctor, types.FunctionType) and "reduction" in ctor.__code__.co_names
            and "_no_batch_dim_" in name and reduction in ("none", "mean", "sum")):
        scope = dict(ctor.__globals__, reduction=reduction)
        new = types.FunctionType(ctor.__code__, scope, ctor.__name__, ctor.__defaults__,
                                 ctor.__closure__)
        new.__kwdefaults__ = ctor.__kwdefaults__
        return new
    return ctor


# ---- building the flowgrad module ----------------------------------------------------------
class FunctionalModule(flow.nn.Module):
    """flowgrad's counterpart of common_nn's `wrap_functional(fn, **kwargs)`."""

    def __init__(self, fn, kwargs):
        super().__init__()
        self.fn, self.kwargs = fn, kwargs

    def forward(self, *args):
        return self.fn(*args, **self.kwargs)


class _Identity:
    """`Variable(x)` (common_nn's closures still use it): x itself."""

    def __call__(self, x, *args, **kwargs):
        return x


def _cell(value):
    return (lambda: value).__closure__[0]


def translate(value):
    """A torch-side value of a constructor as flowgrad's: a tensor copied, a torch function as
    flowgrad's of the same name, a function written in torch's tests re-bound to flowgrad."""
    if isinstance(value, types.FunctionType) and value.__module__.startswith("torch.testing"):
        scope = dict(value.__globals__, torch=flow, nn=flow.nn, F=flow.nn.functional,
                     Variable=_Identity())
        closure = None
        if value.__closure__:
            closure = tuple(_cell(translate(c.cell_contents)) for c in value.__closure__)
        defaults = tuple(translate(d) for d in value.__defaults__ or ()) or None
        new = types.FunctionType(value.__code__, scope, value.__name__, defaults, closure)
        new.__kwdefaults__ = translate(value.__kwdefaults__) if value.__kwdefaults__ else None
        return new
    if isinstance(value, type) and issubclass(value, torch.nn.Module):
        return flow_constructor(value)
    if isinstance(value, torch.Tensor):
        return ModuleConverter().tensor(value.detach()).requires_grad_(value.requires_grad)
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(translate(v) for v in value)
    if isinstance(value, dict):
        return {k: translate(v) for k, v in value.items()}
    return ModuleConverter()(value)


def flow_constructor(ctor):
    """flowgrad's constructor for a torch module class or constructor function."""
    if isinstance(ctor, type):
        if ctor.__qualname__ == "wrap_functional.<locals>.FunctionalModule":
            forward = ctor.forward
            cells = dict(zip(forward.__code__.co_freevars,
                             (c.cell_contents for c in forward.__closure__)))
            fn, kwargs = translate(cells["fn"]), translate(cells["kwargs"])
            return lambda: FunctionalModule(fn, kwargs)
        cls = getattr(flow.nn, ctor.__name__, None)
        if cls is None:
            raise Unsupported(f"missing: flowgrad has no nn.{ctor.__name__}")
        return cls
    return translate(ctor)


# ---- one entry -------------------------------------------------------------------------------
@contextlib.contextmanager
def default_dtype(dtype):
    t_saved, f_saved = torch.get_default_dtype(), flow.get_default_dtype()
    torch.set_default_dtype(dtype)
    flow.set_default_dtype(ModuleConverter()(dtype))
    try:
        yield
    finally:
        torch.set_default_dtype(t_saved)
        flow.set_default_dtype(f_saved)


def _forward_args(entry, inputs, target, extra):
    args = tuple(inputs) if isinstance(inputs, tuple) else (inputs,)
    if entry.kind == "criterion":
        args = args + (target,) + tuple(extra)
    return args


def _floating(t):
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _torch_side(entry, training, variant):
    """(torch test, module, forward args) made as torch's test makes them, seed 0; with
    variant 'target_grad' a floating target requires grad too (None: the entry has none)."""
    test = _torch_test(entry)
    torch.manual_seed(0)
    module = _warnings_off(lambda: test.constructor(*test.constructor_args))
    module.train(training)
    inputs = test._get_input()
    target = test._get_target() if entry.kind == "criterion" else None
    if variant == "target_grad":
        if not _floating(target):
            return None
        target = target.detach().requires_grad_(True)
    extra = test.extra_args if entry.kind == "criterion" else ()
    return test, module, _forward_args(entry, inputs, target, extra)


def _noncontiguous(f_args, pairs):
    """flowgrad's inputs as non-contiguous tensors (as torch's test_noncontig makes them: each
    stacked with another along the dimension after its first non-trivial one, then selected),
    the leaf pairs updated."""
    swapped = {}

    def one(x):
        if isinstance(x, (list, tuple)):
            return type(x)(one(v) for v in x)
        if not isinstance(x, flow.Tensor) or x.ndim == 0:
            return x
        dim = next((d + 1 for d in range(x.ndim) if x.shape[d] > 1), x.ndim)
        out = flow.stack([flow.zeros_like(x), x.detach()], dim).select(dim, 1).detach()
        out.requires_grad_(x.requires_grad)
        swapped[id(x)] = out
        return out

    new_args = one(f_args)
    pairs[:] = [(t, swapped.get(id(f), f)) for t, f in pairs]
    return new_args


def run_entry(entry, training, variant="base"):
    """Compare one entry in one mode; a list of messages (empty: the same). variant: 'base',
    'noncontig' (flowgrad's inputs non-contiguous), 'target_grad' (a loss's floating target
    requires grad) or 'float32' (built and fed under float32 as torch's default; first-order
    gradients only)."""
    if entry.params.get("test_cpu", True) is False:
        return ["skip: a CUDA-only entry"]
    dtype = entry.params.get("default_dtype") or torch.float64
    with default_dtype(torch.float32 if variant == "float32" else dtype):
        try:
            made = _torch_side(entry, training, variant)
        except Exception:  # noqa: BLE001 - torch cannot build it: nothing to compare
            return []
        if made is None:
            return []
        test, t_mod, t_args = made
        try:
            ctor = flow_constructor(test.constructor)
            f_cargs = translate(test.constructor_args)
        except Unsupported as reason:
            return [str(reason) if str(reason).startswith("missing") else f"skip: {reason}"]
        try:
            f_mod = _warnings_off(lambda: ctor(*f_cargs))
            f_mod.train(training)
        except Exception as error:  # noqa: BLE001 - any raise where torch builds is a finding
            return [f"construct raise: flowgrad {error!r:.300}"]
    convert = InputConverter()
    try:
        f_args = convert(list(t_args))
    except Unsupported as reason:
        return ["skip: " + str(reason)]
    if variant == "noncontig":
        f_args = _noncontiguous(f_args, convert.pairs)
    found = compare_state(t_mod, f_mod)
    f_keys = set(f_mod.state_dict())
    f_mod.load_state_dict(state_to_flow({k: v for k, v in t_mod.state_dict().items()
                                         if k in f_keys}), strict=False)
    try:
        expected, t_error = _warnings_off(lambda: t_mod(*t_args)), None
    except Exception as error:  # noqa: BLE001
        expected, t_error = None, error
    try:
        actual, f_error = _warnings_off(lambda: f_mod(*f_args)), None
    except Exception as error:  # noqa: BLE001 - any raise where torch works is a finding
        actual, f_error = None, error
    if t_error is not None or f_error is not None:
        if t_error is None:
            found.append(f"raise: flowgrad {f_error!r:.300}")
        elif f_error is None and variant == "base":
            found.append(f"no raise where torch raises {t_error!r:.200}")
        return found
    name = type(t_mod).__name__
    values = name not in RANDOM or (not training and name not in RANDOM_IN_EVAL)
    message = compare(to_numpy(expected), to_numpy(actual), values=values)
    if message:
        return found + [message]
    found += compare_buffers(t_mod, f_mod, values)
    if values:
        gradgrad = entry.params.get("check_gradgrad", True) and variant != "float32"
        found += compare_grads(t_mod, f_mod, expected, actual, convert.pairs, gradgrad)
    if values and variant == "base" and training and not found:
        found += compare_batched_grads(t_mod, f_mod, expected, actual, convert.pairs)
        found += compare_jvp(t_mod, f_mod, t_args, f_args, convert.pairs)
    return found


def _leaves(t_mod, f_mod, pairs):
    f_params = dict(f_mod.named_parameters())
    names = [k for k, p in t_mod.named_parameters() if p.requires_grad and k in f_params]
    t_leaves = [t for t, _ in pairs] + [t_mod.get_parameter(k) for k in names]
    f_leaves = [f for _, f in pairs] + [f_params[k] for k in names]
    labels = [f"input {i}" for i in range(len(pairs))] + [f"param {k}" for k in names]
    return t_leaves, f_leaves, labels


def _cotangents(tensors, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
            for o in tensors]


def _compare_each(labels, t_leaves, t_grads, f_grads, what):
    return compare_each_grad(labels, t_leaves, t_grads, f_grads, what)


def compare_grads(t_mod, f_mod, expected, actual, pairs, gradgrad=True):
    """The gradients of one random cotangent (the same numbers on both sides) with respect to
    the inputs that require grad and to every parameter, by name; with `gradgrad`, the
    gradients of those gradients against a second random cotangent too (torch's tests run
    gradgradcheck on these entries unless `check_gradgrad=False`)."""
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    if len(t_out) != len(f_out):
        return [f"grad: torch has {len(t_out)} differentiable outputs, flowgrad {len(f_out)}"]
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, pairs)
    if not t_out or not t_leaves:
        return []
    cotangents = _cotangents(t_out, 0)
    try:
        t_grads = _warnings_off(lambda: torch.autograd.grad(
            t_out, t_leaves, cotangents, allow_unused=True, create_graph=gradgrad))
    except Exception:  # noqa: BLE001 - torch cannot differentiate it: nothing to compare
        return []
    try:
        f_cot = [Converter().tensor(c) for c in cotangents]
        f_grads = _warnings_off(lambda: flow.autograd.grad(
            f_out, f_leaves, f_cot, allow_unused=True, create_graph=gradgrad))
    except Exception as error:  # noqa: BLE001
        return [f"grad raise: flowgrad {error!r:.300}"]
    found = _compare_each(labels, t_leaves, t_grads, f_grads, "grad")
    if found or not gradgrad:
        return found
    # second order: d<grads, v>/d(leaves) (the graph kept for the checks after)
    chosen = [i for i, g in enumerate(t_grads) if g is not None and g.requires_grad]
    if not chosen:
        return []
    t_gs = [t_grads[i] for i in chosen]
    v = _cotangents(t_gs, 1)
    try:
        t_gg = _warnings_off(lambda: torch.autograd.grad(t_gs, t_leaves, v, allow_unused=True,
                                                         retain_graph=True))
    except Exception:  # noqa: BLE001 - torch has no double backward here
        return []
    f_gs, f_v = [], []
    for i, c in zip(chosen, v):
        g = f_grads[i]
        if g is not None and g.requires_grad:
            f_gs.append(g)
            f_v.append(Converter().tensor(c))
    if not f_gs:
        f_gg = [None] * len(f_leaves)
    else:
        try:
            f_gg = _warnings_off(lambda: flow.autograd.grad(f_gs, f_leaves, f_v,
                                                            allow_unused=True, retain_graph=True))
        except Exception as error:  # noqa: BLE001
            return [f"gradgrad raise: flowgrad {error!r:.300}"]
    return _compare_each(labels, t_leaves, t_gg, f_gg, "gradgrad")


def _substitute(value, new):
    """`value` (a structure of arguments) with each tensor whose id is in `new` replaced."""
    if isinstance(value, (list, tuple)):
        return type(value)(_substitute(v, new) for v in value)
    return new.get(id(value), value)


def _floating_outputs(out, lib):
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in _floating_outputs(item, lib)]
    if isinstance(out, lib.Tensor) and (out.is_floating_point() or out.is_complex()):
        return [out]
    return []


def compare_jvp(t_mod, f_mod, t_args, f_args, pairs):
    """Forward mode: the jvp of the forward, as a function of the inputs that require grad and
    of every parameter, along the same random tangents (torch.func.jvp vs flowgrad's)."""
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, pairs)
    if not t_leaves:
        return []
    n_in = len(pairs)
    names = [label[6:] for label in labels[n_in:]]
    tangents = _cotangents(t_leaves, 2)

    def caller(module, func, args, leaves, lib):
        def call(*primals):
            new = {id(leaf): p for leaf, p in zip(leaves[:n_in], primals[:n_in])}
            params = dict(zip(names, primals[n_in:]))
            out = func.functional_call(module, params, _substitute(tuple(args), new))
            return tuple(_floating_outputs(out, lib))
        return call

    t_primals = tuple(leaf.detach() for leaf in t_leaves)
    try:
        _, t_jvp = _warnings_off(lambda: torch.func.jvp(
            caller(t_mod, torch.func, t_args, t_leaves, torch), t_primals, tuple(tangents)))
    except Exception:  # noqa: BLE001 - torch has no forward-mode rule here
        return []
    f_primals = tuple(leaf.detach() for leaf in f_leaves)
    try:
        f_tangents = tuple(Converter().tensor(t) for t in tangents)
        _, f_jvp = _warnings_off(lambda: flow.func.jvp(
            caller(f_mod, flow.func, f_args, f_leaves, flow), f_primals, f_tangents))
    except Exception as error:  # noqa: BLE001
        return [f"jvp raise: flowgrad {error!r:.300}"]
    message = compare(to_numpy(tuple(t_jvp)), to_numpy(tuple(f_jvp)), "jvp")
    return [message] if message else []


def compare_batched_grads(t_mod, f_mod, expected, actual, pairs, batch=3):
    """torch's check_batched_grad: flowgrad's vmap over the backward along `batch` cotangents
    against torch's backward along each of them."""
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    t_leaves, f_leaves, labels = _leaves(t_mod, f_mod, pairs)
    if not t_out or not t_leaves or len(t_out) != len(f_out):
        return []
    gen = torch.Generator().manual_seed(3)
    cots = [torch.randn((batch,) + tuple(o.shape), generator=gen, dtype=torch.float64).to(
        o.dtype) for o in t_out]
    try:
        per = [_warnings_off(lambda b=b: torch.autograd.grad(
            t_out, t_leaves, [c[b] for c in cots], allow_unused=True, retain_graph=True))
            for b in range(batch)]
    except Exception:  # noqa: BLE001
        return []
    t_grads = [None if per[0][i] is None else torch.stack([p[i] for p in per])
               for i in range(len(t_leaves))]

    def backward(*vs):
        grads = flow.autograd.grad(f_out, f_leaves, list(vs), retain_graph=True,
                                   allow_unused=True)
        return tuple(flow.zeros_like(leaf) if g is None else g
                     for g, leaf in zip(grads, f_leaves))

    try:
        f_cots = [Converter().tensor(c) for c in cots]
        f_grads = _warnings_off(lambda: flow.func.vmap(backward)(*f_cots))
    except Exception as error:  # noqa: BLE001
        return [f"batched grad raise: flowgrad {error!r:.300}"]
    stacked = [torch.zeros((batch,) + tuple(leaf.shape), dtype=leaf.dtype) if g is None else g
               for g, leaf in zip(t_grads, t_leaves)]
    return _compare_each(labels, [None] * len(labels), stacked, f_grads, "batched grad")


def modes(entry):
    """(True,) for a loss, (True, False) for a module: training, and eval."""
    return (True,) if entry.kind == "criterion" else (True, False)


VARIANTS = ("base", "noncontig", "target_grad", "float32")


def probe(entry):
    """Every finding for one entry: [(mode/variant, message)]."""
    found = []
    for training in modes(entry):
        for variant in VARIANTS:
            if variant == "target_grad" and entry.kind != "criterion":
                continue
            where = ("train" if training else "eval") + ("" if variant == "base" else
                                                         "/" + variant)
            try:
                messages = run_entry(entry, training, variant)
            except Exception as error:  # noqa: BLE001 - the harness's own failure
                messages = [f"probe error: {error!r:.300}"]
            found += [(where, message) for message in messages]
            if any(m.startswith(("missing", "skip")) for m in messages):
                return found
    return found


def main(names):
    shard, shards = shard_of(names)
    total = bad = missing = skipped = 0
    for k, entry in enumerate(entries()):
        if k % shards != shard or (names and entry.name not in names):
            continue
        total += 1
        findings = probe(entry)
        real = [f for f in findings if not f[1].startswith("skip")]
        if any(m.startswith("missing") for _, m in real):
            missing += 1
            print(f"MISSING {entry.name}: {real[0][1]}")
            continue
        if len(real) < len(findings):
            skipped += 1
            print(f"SKIP {entry.name}: {findings[0][1][:200]}")
        if real:
            bad += 1
            print(f"FAIL {entry.name}: {len(real)} findings")
            for mode, message in real[:6]:
                print(f"    [{mode}] {message[:400]}")
    print(f"# {total} entries, {missing} missing in flowgrad, {skipped} with skips, "
          f"{bad} with findings")


if __name__ == "__main__":
    with one_thread():  # small tensors: thread pools only spin
        main(sys.argv[1:])
