"""torch's own nn-module database (ModuleInfo) run through flowgrad: the same constructor
arguments, the same weights, the same inputs; the same outputs, gradients and buffers.

`torch.testing._internal.common_modules.module_db` lists ~110 torch.nn modules with the
constructor and forward arguments torch tests each one on. For each of them the torch module
is built (seed 0), the flowgrad module of the same name is built from the same arguments, both
are cast to float64 and put in the same train/eval mode, torch's state_dict is copied into the
flowgrad module, and the outcome of one forward is compared: raise/no-raise, the output's
structure, shape, dtype and values, the gradients of a fixed cotangent with respect to the
inputs and to every parameter (by name), and the buffers after the forward (running stats).

Run as a script for a report: .venv/bin/python tests/moduleinfo_vs_torch.py [Name ...]
(names as `nn.Linear` or `Linear`; `--shard=i/n` runs every n-th ModuleInfo from the i-th).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import types
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opinfo_vs_torch import (  # noqa: E402, I001
    Converter, Unsupported, compare, full_name, one_thread, report, shard_of, to_numpy,
    torch_test_internals)

import flowgrad as flow  # noqa: E402

# modules whose outputs are random draws (in training): only the structure is compared
RANDOM = frozenset(("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                    "FeatureAlphaDropout", "RReLU", "FractionalMaxPool2d",
                    "FractionalMaxPool3d"))
RANDOM_IN_EVAL = frozenset(("FractionalMaxPool2d", "FractionalMaxPool3d"))


def module_db():
    """torch's ModuleInfo list (imports torch's test internals once)."""
    with torch_test_internals():
        from torch.testing._internal.common_modules import module_db as db
    return db


def flow_class(info):
    return getattr(flow.nn, info.module_cls.__name__, None)


class ModuleConverter(Converter):
    """Constructor arguments too: a torch.device as its string, a torch.nn.functional
    function as flowgrad's of the same name, a torch module as flowgrad's (see
    `convert_module`)."""

    def __call__(self, value):
        if isinstance(value, torch.device):
            return str(value)
        if isinstance(value, torch.nn.Module):
            return convert_module(value)
        if isinstance(value, torch.nn.LinearCrossEntropyOptions):  # (a frozen dataclass)
            return flow.nn.LinearCrossEntropyOptions(**{
                f.name: self(getattr(value, f.name)) for f in dataclasses.fields(value)})
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
            fn = getattr(flow.nn.functional, value.__name__, None)
            if fn is None:
                raise Unsupported(f"flowgrad has no nn.functional.{value.__name__}")
            return fn
        return super().__call__(value)


def convert_module(module):
    """A flowgrad module standing for a torch module passed to a constructor (the
    TransformerEncoder's layer): rebuilt from the torch module's attributes, with its weights."""
    if type(module).__name__ != "TransformerEncoderLayer":
        raise Unsupported(f"a {type(module).__name__} constructor argument")
    attn = module.self_attn
    activation = module.activation
    if not isinstance(activation, str):
        activation = ModuleConverter()(activation)
    new = flow.nn.TransformerEncoderLayer(
        attn.embed_dim, attn.num_heads, module.linear1.out_features, module.dropout.p,
        activation, module.norm1.eps, attn.batch_first, module.norm_first,
        bias=module.linear1.bias is not None)
    new.to(ModuleConverter()(module.linear1.weight.dtype))
    new.load_state_dict(state_to_flow(module.state_dict()))
    return new


class InputConverter(Converter):
    """Forward inputs: a tensor passed twice stays one tensor (KLDivLoss's scalar sample passes
    the same tensor as input and target), and an input torch made from a leaf by one op (the
    CTCLoss's log_softmax of a leaf) is made the same way from flowgrad's copy of that leaf, so
    the gradients compared are those of the leaf, as torch's own tests take them."""

    REPLAY = {
        "LogSoftmaxBackward0": lambda f, x: x.log_softmax(f._saved_dim),
        "SoftmaxBackward0": lambda f, x: x.softmax(f._saved_dim),
        "TransposeBackward0": lambda f, x: x.transpose(f._saved_dim0, f._saved_dim1),
        "LogBackward0": lambda f, x: x.log(),
        "AbsBackward0": lambda f, x: x.abs(),
    }

    def __init__(self):
        super().__init__()
        self.seen = {}

    def tensor(self, t):
        if id(t) in self.seen:
            return self.seen[id(t)][1]
        fn = t.grad_fn
        replay = self.REPLAY.get(type(fn).__name__) if fn is not None else None
        if replay is not None and len(fn.next_functions) == 1 and hasattr(
                fn.next_functions[0][0], "variable"):
            out = replay(fn, self.tensor(fn.next_functions[0][0].variable))
        else:
            out = super().tensor(t)
        self.seen[id(t)] = (t, out)  # (t kept alive: its id stays its own)
        return out


def state_to_flow(state):
    return {k: flow.tensor(v.detach().numpy().copy()) for k, v in state.items()}


def _differentiable(out, module):
    """The floating outputs that require grad, flattened, in order."""
    if isinstance(out, (list, tuple)):
        return [t for item in out for t in _differentiable(item, module)]
    if isinstance(out, module.Tensor) and out.requires_grad and out.is_floating_point():
        return [out]
    return []


def compare_state(t_mod, f_mod, what="state_dict"):
    """Key sets, shapes and dtypes of the two modules' state_dicts."""
    t_state, f_state = t_mod.state_dict(), f_mod.state_dict()
    found = []
    if set(t_state) != set(f_state):
        found.append(f"{what} keys: only torch {sorted(set(t_state) - set(f_state))}, "
                     f"only flowgrad {sorted(set(f_state) - set(t_state))}")
    for key in t_state:
        if key in f_state and isinstance(t_state[key], torch.Tensor):
            message = compare(to_numpy(t_state[key]), to_numpy(f_state[key]),
                              f"{what} {key}", values=False)
            if message:
                found.append(message)
    return found


def _warnings_off(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


class Stop(Exception):
    """build_pair's early answer: the findings so far (empty: nothing to compare)."""

    def __init__(self, found):
        super().__init__(found)
        self.found = found


def build_pair(info, f_cls, module_input, training, dtype=torch.float64):
    """The torch module and flowgrad's of one ModuleInput, built from the same arguments, cast
    to `dtype`, in the same mode, with torch's state copied in; with flowgrad's copies of the
    forward inputs: (t_mod, f_mod, f_args, f_kwargs, convert (its pairs: the input leaves),
    findings about the state_dicts). Raises Stop(findings) where there is nothing to compare."""
    ctor, fwd = module_input.constructor_input, module_input.forward_input
    if fwd is None:
        raise Stop([])
    convert = ModuleConverter()
    try:
        f_cargs = convert(list(ctor.args))
        f_ckwargs = convert(dict(ctor.kwargs))
    except Unsupported as reason:
        raise Stop(["skip: " + str(reason)]) from None
    torch.manual_seed(0)
    try:
        t_mod = _warnings_off(lambda: info.module_cls(*ctor.args, **ctor.kwargs))
        t_mod.to(dtype)
        t_mod.train(training)
    except Exception:  # noqa: BLE001 - torch refuses the arguments: nothing to compare
        raise Stop([]) from None
    f_dtype = Converter()(dtype)
    try:
        f_mod = _warnings_off(lambda: f_cls(*f_cargs, **f_ckwargs))
        f_mod.to(f_dtype)
        f_mod.train(training)
    except Exception as error:  # noqa: BLE001 - any raise where torch builds is a finding
        raise Stop([f"construct raise: flowgrad {error!r:.300}"]) from None
    convert = InputConverter()  # forward inputs: its pairs are the leaves for the gradients
    try:
        f_args = convert(list(fwd.args))
        f_kwargs = convert(dict(fwd.kwargs))
    except Unsupported as reason:
        raise Stop(["skip: " + str(reason)]) from None
    if isinstance(t_mod, torch.nn.modules.lazy.LazyModuleMixin):
        try:  # the placeholders take their shapes from a first forward (no state to change)
            with torch.no_grad():
                _warnings_off(lambda: t_mod(*fwd.args, **fwd.kwargs))
        except Exception:  # noqa: BLE001
            raise Stop([]) from None
        try:
            with flow.no_grad():
                _warnings_off(lambda: f_mod(*f_args, **f_kwargs))
        except Exception as error:  # noqa: BLE001
            raise Stop([f"raise: flowgrad (a lazy module's first forward) {error!r:.300}"]) \
                from None
    found = compare_state(t_mod, f_mod)
    t_state = t_mod.state_dict()
    f_keys = set(f_mod.state_dict())
    f_mod.load_state_dict(state_to_flow({k: v for k, v in t_state.items() if k in f_keys}),
                          strict=False)
    return t_mod, f_mod, f_args, f_kwargs, convert, found


def run_input(info, f_cls, module_input, training):
    """Compare one ModuleInput; a list of messages (empty: the same)."""
    name = info.module_cls.__name__
    ctor, fwd = module_input.constructor_input, module_input.forward_input
    try:
        t_mod, f_mod, f_args, f_kwargs, convert, found = build_pair(
            info, f_cls, module_input, training)
    except Stop as stop:
        return stop.found
    # forward
    try:
        expected = _warnings_off(lambda: t_mod(*fwd.args, **fwd.kwargs))
        t_error = None
    except Exception as error:  # noqa: BLE001
        expected, t_error = None, error
    try:
        actual = _warnings_off(lambda: f_mod(*f_args, **f_kwargs))
        f_error = None
    except Exception as error:  # noqa: BLE001 - any raise where torch works is a finding
        actual, f_error = None, error
    if t_error is not None or f_error is not None:
        if t_error is None:
            found.append(f"raise: flowgrad {f_error!r:.300}")
        elif f_error is None:
            found.append(f"no raise where torch raises {t_error!r:.200}")
        return found
    # fractional max pooling with its _random_samples given draws nothing
    values = name not in RANDOM or (not training and name not in RANDOM_IN_EVAL) or (
        "_random_samples" in ctor.kwargs)
    message = compare(to_numpy(expected), to_numpy(actual), values=values)
    if message:
        return found + [message]
    found += compare_buffers(t_mod, f_mod, values)
    if not values:
        return found
    found += compare_grads(t_mod, f_mod, expected, actual, convert.pairs)
    return found


def compare_buffers(t_mod, f_mod, values=True):
    f_buffers = dict(f_mod.named_buffers())
    found = []
    for key, t_buf in t_mod.named_buffers():
        if key not in f_buffers:
            found.append(f"buffer {key}: flowgrad has none")
            continue
        message = compare(to_numpy(t_buf), to_numpy(f_buffers[key]), f"buffer {key}",
                          values=values)
        if message:
            found.append(message)
    return found


def compare_grads(t_mod, f_mod, expected, actual, pairs):
    """The gradients of one random cotangent (the same numbers on both sides) with respect to
    the inputs that require grad and to every parameter, by name."""
    t_out, f_out = _differentiable(expected, torch), _differentiable(actual, flow)
    if len(t_out) != len(f_out):
        return [f"grad: torch has {len(t_out)} differentiable outputs, flowgrad {len(f_out)}"]
    if not t_out:
        return []
    f_params = dict(f_mod.named_parameters())
    names = [k for k, p in t_mod.named_parameters() if p.requires_grad and k in f_params]
    t_leaves = [t for t, _ in pairs] + [t_mod.get_parameter(k) for k in names]
    f_leaves = [f for _, f in pairs] + [f_params[k] for k in names]
    labels = [f"input {i}" for i in range(len(pairs))] + [f"param {k}" for k in names]
    if not t_leaves:
        return []
    gen = torch.Generator().manual_seed(0)
    cotangents = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype)
                  for o in t_out]
    try:
        t_grads = _warnings_off(lambda: torch.autograd.grad(t_out, t_leaves, cotangents,
                                                            allow_unused=True))
    except Exception:  # noqa: BLE001 - torch cannot differentiate it: nothing to compare
        return []
    try:
        f_cot = [Converter().tensor(c) for c in cotangents]
        f_grads = _warnings_off(lambda: flow.autograd.grad(f_out, f_leaves, f_cot,
                                                           allow_unused=True))
    except Exception as error:  # noqa: BLE001
        return [f"grad raise: flowgrad {error!r:.300}"]
    return compare_each_grad(labels, t_leaves, t_grads, f_grads, "grad")


def compare_each_grad(labels, t_leaves, t_grads, f_grads, what):
    """Differences between torch's and flowgrad's gradient of each leaf (a None gradient is
    zeros; flowgrad's None against torch's nonzero one is a difference)."""
    found = []
    for label, leaf, t_g, f_g in zip(labels, t_leaves, t_grads, f_grads):
        t_g = torch.zeros_like(leaf) if t_g is None else t_g
        if f_g is None:
            if t_g.numel() and t_g.abs().max() > 0:
                found.append(f"{what} {label}: torch nonzero, flowgrad None")
            continue
        message = compare(to_numpy(t_g), to_numpy(f_g), f"{what} {label}")
        if message:
            found.append(message)
    return found


def module_inputs(info, training):
    return _warnings_off(lambda: list(info.module_inputs_func(
        info, device="cpu", dtype=torch.float64, requires_grad=True, training=training)))


def inputs_or_skip(info, training, mode, found):
    """module_inputs(info, training), or none with a skip finding for `mode` in `found` where
    torch's own input generator fails (every ModuleInfo sweep's probe starts a mode so)."""
    try:
        return module_inputs(info, training)
    except Exception as error:  # noqa: BLE001
        found.append((mode, "", f"skip: module_inputs: {error!r:.100}"))
        return []


def probe(info, modes=(True, False)):
    """Every finding for one ModuleInfo: [(mode, input description, message)]."""
    f_cls = flow_class(info)
    if f_cls is None:
        return [("", "", "missing")]
    found = []
    for training in modes:
        mode = "train" if training else "eval"
        for k, module_input in enumerate(inputs_or_skip(info, training, mode, found)):
            try:
                messages = run_input(info, f_cls, module_input, training)
            except Exception as error:  # noqa: BLE001 - the harness's own failure
                messages = [f"probe error: {error!r:.300}"]
            for message in messages:
                found.append((mode, f"#{k} {module_input.desc}", message))
    return found


def main(names):
    shard, shards = shard_of(names)
    report(module_db(), probe, lambda k, info: k % shards == shard and (
        not names or {full_name(info), info.name, info.module_cls.__name__} & set(names)),
        "ModuleInfos")


if __name__ == "__main__":
    with one_thread():  # small tensors: thread pools only spin
        main(sys.argv[1:])
