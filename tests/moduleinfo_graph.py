"""torch's nn-module database (ModuleInfo) through flowgrad's nn.Graph, against eager flowgrad.

For each ModuleInput (float64) the flowgrad module is built twice from the same constructor
arguments with the same state (an eager copy and a compiled copy), and:

1. eval: an nn.Graph whose build returns `self.m(*inputs)`, called on three batches of the
   same shapes (permutations of the first's values; the third under no_grad, where a module
   may take another path), against the eager copy: the outputs; the first call's outputs
   still as they were after the later calls; the inputs not written. Between the calls an
   eager write (`p.add_(0.01)` under no_grad) into every parameter and buffer of both copies
   (1 into integer ones), which the next call must see.
2. train: the module in training mode, SGD with momentum (`--adam`: Adam), loss
   `sum((out * cotangent).sum())` over the float outputs that require grad, `loss.backward()`
   in build, three calls (new data and cotangents each) against three eager steps: loss,
   outputs, the inputs' gradients, parameters and buffers after each call; before the third,
   the eager write again. Random modules draw from `flow.manual_seed(100 + call)` on both
   sides: the graph's plan must draw the eager copy's numbers.

Findings are messages; `skip:` ones are cases this sweep cannot run (a constructor argument
flowgrad's converter cannot express, data the variant breaks).

Run as a script for a report: .venv/bin/python tests/moduleinfo_graph.py [Name ...]
(`--all`: every sample, not the first; `--adam`; `--no-optimizer`: backward only, the
parameters' .grad compared; `--float32`: float32 modules and data; `--history`: inputs
requiring grad computed from leaves; `--shard=i/n`)
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
from moduleinfo_vs_torch import (
    InputConverter,
    ModuleConverter,
    flow_class,
    inputs_or_skip,
    module_db,
)
from opinfo_vs_torch import Unsupported, compare, full_name, one_thread, report, shard_of, to_numpy

import flowgrad as flow

CALLS_EVAL, CALLS_TRAIN = 3, 3  # (the last eval call under no_grad)
WRITE = 0.01  # the eager write between calls


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


# ---- inputs: a structure with tensor slots ---------------------------------------------------
def template(value, slots, seen):
    """`value` with each flowgrad tensor replaced by ("slot", i), the tensors in `slots` (one
    slot for a tensor given twice)."""
    if isinstance(value, flow.Tensor):
        if id(value) not in seen:
            seen[id(value)] = len(slots)
            slots.append(value)
        return ("slot", seen[id(value)])
    if isinstance(value, (list, tuple)):
        return type(value)(template(v, slots, seen) for v in value)
    if isinstance(value, dict):
        return {k: template(v, slots, seen) for k, v in value.items()}
    return value


def fill(spec, tensors):
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] == "slot":
        return tensors[spec[1]]
    if isinstance(spec, (list, tuple)):
        return type(spec)(fill(v, tensors) for v in spec)
    if isinstance(spec, dict):
        return {k: fill(v, tensors) for k, v in spec.items()}
    return spec


def variant(arrays, rng):
    """The same shapes, the values of each array permuted (ranges kept: probabilities stay in
    [0, 1], indices in range)."""
    return [rng.permutation(a.reshape(-1)).reshape(a.shape) if a.size > 1 else a.copy()
            for a in arrays]


def leaves(arrays, grads):
    """Fresh flowgrad tensors of `arrays`, those marked in `grads` leaves requiring grad."""
    return [flow.tensor(a.copy()).requires_grad_(g) for a, g in zip(arrays, grads)]


def outputs_of(out):
    """The tensors of a (nested) output, in order."""
    if isinstance(out, flow.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in outputs_of(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in outputs_of(o)]
    return []


def eager_write(*modules):
    """WRITE into every float parameter and buffer, 1 into the integer buffers (a
    BatchNorm's num_batches_tracked, its momentum=None's average reads it)."""
    with flow.no_grad():
        for m in modules:
            for t in list(m.parameters()) + list(m.buffers()):
                t.add_(WRITE if t.is_floating_point() else 1)


def compare_state(eager, compiled, where):
    found = []
    for kind, e_items, g_items in (("param", eager.named_parameters(),
                                    compiled.named_parameters()),
                                   ("buffer", eager.named_buffers(), compiled.named_buffers())):
        g_items = dict(g_items)
        for name, e in e_items:
            message = compare(to_numpy(e), to_numpy(g_items.get(name)),
                              f"{where}: {kind} {name}")
            if message:
                found.append(message)
    return found


# ---- the two copies --------------------------------------------------------------------------
class Case:
    """One ModuleInput's eager and compiled copies, its input structure and data."""

    def __init__(self, info, module_input, training, dtype="float64"):
        self.name = info.module_cls.__name__
        self.dtype = dtype
        f_cls = flow_class(info)
        ctor, fwd = module_input.constructor_input, module_input.forward_input
        copies = []
        for _ in range(2):
            convert = ModuleConverter()
            cargs, ckwargs = convert(list(ctor.args)), convert(dict(ctor.kwargs))
            flow.manual_seed(0)
            m = _quiet(lambda: f_cls(*cargs, **ckwargs))  # noqa: B023 - called at once
            m.to(getattr(flow, dtype))
            m.train(training)
            copies.append(m)
        self.eager, self.compiled = copies
        convert = InputConverter()
        args, kwargs = convert(list(fwd.args)), convert(dict(fwd.kwargs))
        slots = []
        self.spec = template((args, kwargs), slots, {})
        self.arrays = [t.detach().numpy().astype(dtype) if t.dtype == flow.float64 else
                       t.detach().numpy().copy() for t in slots]
        self.grads = [t.requires_grad and t.is_floating_point() for t in slots]
        if any(isinstance(m, flow.nn.modules.lazy.LazyModuleMixin) for m in self.eager.modules()):
            for m in copies:  # shapes from a first forward, as the graph asks
                with flow.no_grad():
                    self.call(m, leaves(self.arrays, [False] * len(slots)))
        self.compiled.load_state_dict(self.eager.state_dict())

    def call(self, module, tensors):
        args, kwargs = fill(self.spec, tensors)
        return _quiet(lambda: module(*args, **kwargs))

    def batches(self, calls, seed):
        """`calls` input data: the sample's, then permutations of it the eager copy takes (if
        a permutation makes the eager module raise, the sample's again)."""
        rng = np.random.default_rng(seed)
        out = [self.arrays]
        for _ in range(calls - 1):
            out.append(variant(self.arrays, rng))
        return out


def _graph(case, optimizer, cot_positions, train):
    n = len(case.arrays)

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.m = case.compiled
            if optimizer is not None:
                self.add_optimizer(optimizer)

        def build(self, *tensors):
            out = case.call(self.m, list(tensors[:n]))
            if not train:
                return out
            flat = outputs_of(out)
            terms = [(flat[i] * c).sum() for i, c in zip(cot_positions, tensors[n:])]
            if not terms:
                return out
            loss = sum(terms[1:], terms[0])
            if loss.requires_grad:
                loss.backward()
            return loss, out

    return Step()


def _raised(error):
    return f"{type(error).__name__}: {str(error)[:300]}"


def run_eval(case, seed=0):
    found = []
    case.eager.eval()
    case.compiled.eval()
    graph = _graph(case, None, [], False)
    held = None
    no_grads = [False] * len(case.arrays)
    for call, arrays in enumerate(case.batches(CALLS_EVAL, seed)):
        if call:
            eager_write(case.eager, case.compiled)
        grad = call < CALLS_EVAL - 1
        flow.manual_seed(100 + call)
        try:
            with flow.set_grad_enabled(grad):
                expected = case.call(case.eager, leaves(arrays, no_grads))
        except Exception:  # noqa: BLE001 - the permuted data is not valid: nothing to compare
            if call == 0:
                return []
            return found + ["skip: eager raises on the permuted data"]
        inputs = leaves(arrays, no_grads)
        flow.manual_seed(100 + call)
        try:
            with flow.set_grad_enabled(grad):
                actual = _quiet(lambda: graph(*inputs))  # noqa: B023 - called at once
        except Exception as error:  # noqa: BLE001 - any raise where eager works is a finding
            return found + [f"eval call {call}: graph raises {_raised(error)}"]
        held = _after_call(found, f"eval call {call}", expected, actual, inputs, arrays, held)
        found += compare_state(case.eager, case.compiled, f"eval call {call}")
    return found


def _after_call(found, where, expected, actual, inputs, arrays, held):
    """Add to `found` what one graph call got wrong against eager: its outputs, an input it
    wrote (`arrays`: the inputs' values before), the first call's output as held by the user
    (`held`: (that output, a copy of its values), None on the first call); returns `held`."""
    message = compare(to_numpy(expected), to_numpy(actual), f"{where}: output")
    if message:
        found.append(message)
    for i, (t, a) in enumerate(zip(inputs, arrays)):
        if not np.array_equal(t.detach().numpy(), a, equal_nan=True):
            found.append(f"{where}: input {i} written by the graph")
    if held is None:
        return actual, _copied(to_numpy(actual))
    message = compare(held[1], to_numpy(held[0]), f"{where}: call 0's output after it")
    if message:
        found.append(message)
    return held


def _copied(value):
    if isinstance(value, tuple) and value and value[0] == "tensor":
        return (value[0], value[1], value[2].copy())
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    return value


def _optimizer(module, adam):
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return None
    if adam:
        return flow.optim.Adam(params, lr=0.01)
    return flow.optim.SGD(params, lr=0.1, momentum=0.9)


def _through(tensors, history):
    """`tensors`, those requiring grad given as `leaf * 2 - 1` with history=True (an input
    with an eager history: its gradient goes on to the leaf)."""
    if not history:
        return tensors
    return [t * 2 - 1 if t.requires_grad else t for t in tensors]


def run_train(case, seed=0, adam=False, optimizer=True, history=False):
    """Training calls against eager steps. optimizer=False: no optimizer, the graph's
    backward only: the parameters' .grad then sums every call's, as eagerly. history=True:
    the inputs requiring grad computed from leaves, whose gradients are compared."""
    found = []
    case.eager.train()
    case.compiled.train()
    if optimizer:
        opt_e, opt_g = _optimizer(case.eager, adam), _optimizer(case.compiled, adam)
    else:
        opt_e = opt_g = None
    rng = np.random.default_rng(seed + 1)
    graph = held = None
    for call, arrays in enumerate(case.batches(CALLS_TRAIN, seed)):
        if call == CALLS_TRAIN - 1:
            eager_write(case.eager, case.compiled)
        e_inputs = leaves(arrays, case.grads)
        if opt_e is not None:
            opt_e.zero_grad()
        flow.manual_seed(100 + call)
        try:
            out = case.call(case.eager, _through(e_inputs, history))
        except Exception:  # noqa: BLE001
            if call == 0:
                return []
            return found + ["skip: eager raises on the permuted data"]
        flat = outputs_of(out)
        positions = [i for i, o in enumerate(flat) if o.is_floating_point() and o.requires_grad]
        cots = [rng.standard_normal(tuple(flat[i].shape)).astype(case.dtype) for i in positions]
        if positions:
            loss = sum(((flat[i] * flow.tensor(c)).sum() for i, c in zip(positions, cots)),
                       flow.tensor(0.0, dtype=getattr(flow, case.dtype)))
            _quiet(loss.backward)
            if opt_e is not None:
                opt_e.step()
            expected = (loss, out)
        else:
            expected = out
        if graph is None:
            graph = _graph(case, opt_g, positions, True)
        g_inputs = leaves(arrays, case.grads)
        flow.manual_seed(100 + call)
        try:
            actual = _quiet(lambda: graph(*_through(g_inputs, history),  # noqa: B023
                                          *[flow.tensor(c) for c in cots]))
        except Exception as error:  # noqa: BLE001
            return found + [f"train call {call}: graph raises {_raised(error)}"]
        where = f"train call {call}"
        held = _after_call(found, where, expected, actual, g_inputs, arrays, held)
        for i, (e, g) in enumerate(zip(e_inputs, g_inputs)):
            if e.grad is None and g.grad is None:
                continue
            e_grad = e.grad if e.grad is not None else flow.zeros_like(e)
            g_grad = g.grad if g.grad is not None else flow.zeros_like(g)
            message = compare(to_numpy(e_grad), to_numpy(g_grad), f"{where}: input {i}'s grad")
            if message:
                found.append(message)
        found += compare_state(case.eager, case.compiled, where)
        if not optimizer:
            found += compare_param_grads(case.eager, case.compiled, where)
        if found:
            return found
    return found


def compare_param_grads(eager, compiled, where):
    found = []
    g_params = dict(compiled.named_parameters())
    for name, e in eager.named_parameters():
        g = g_params[name]
        if (e.grad is None) != (g.grad is None):
            found.append(f"{where}: param {name}'s .grad: eager "
                         f"{'None' if e.grad is None else 'a tensor'}, graph "
                         f"{'None' if g.grad is None else 'a tensor'}")
        elif e.grad is not None:
            message = compare(to_numpy(e.grad), to_numpy(g.grad), f"{where}: param {name}'s .grad")
            if message:
                found.append(message)
    return found


def _relabel(message):
    """compare()'s sides are torch and flowgrad: here they are eager and the graph."""
    return message.replace(": torch ", ": eager ").replace(", flowgrad ", ", graph ").replace(
        "dtype torch ", "dtype eager ").replace("shape torch ", "shape eager ")


def probe(info, first=1, modes=(True, False), adam=False, optimizer=True, dtype="float64",
          history=False):
    """Every finding for one ModuleInfo: [(mode, input description, message)]."""
    if flow_class(info) is None:
        return [("", "", "missing")]
    found = []
    for training in modes:
        mode = "train" if training else "eval"
        for k, module_input in enumerate(inputs_or_skip(info, training, mode, found)[:first]):
            if module_input.forward_input is None:
                continue
            where = f"#{k} {module_input.desc}"
            try:
                case = Case(info, module_input, training, dtype)
            except Unsupported as reason:
                found.append((mode, where, f"skip: {reason}"))
                continue
            except Exception as error:  # noqa: BLE001 - the eager module cannot take it
                found.append((mode, where, f"skip: eager: {error!r:.150}"))
                continue
            try:
                messages = (run_train(case, k, adam, optimizer, history) if training
                            else run_eval(case, k))
            except Exception as error:  # noqa: BLE001 - the harness's own failure
                messages = [f"probe error: {error!r:.300}"]
            found += [(mode, where, _relabel(m)) for m in messages]
    return found


def main(names):
    first = None if "--all" in names else 1
    adam = "--adam" in names
    optimizer = "--no-optimizer" not in names
    dtype = "float32" if "--float32" in names else "float64"
    history = "--history" in names
    names = [n for n in names if n not in ("--all", "--adam", "--no-optimizer", "--float32",
                                           "--history")]
    shard, shards = shard_of(names)
    report(module_db(), lambda info: probe(info, first, adam=adam, optimizer=optimizer,
                                                dtype=dtype, history=history),
           lambda k, info: k % shards == shard and (
               not names or {full_name(info), info.name, info.module_cls.__name__} & set(names)),
           "ModuleInfos (nn.Graph)")


if __name__ == "__main__":
    with one_thread():
        main(sys.argv[1:])
