"""torch's OpInfo samples through flowgrad's graph mode, against eager flowgrad.

Each sample's tensors (the input, and every tensor in its args and kwargs) become the graph's
inputs; its other arguments are Python constants of `build`. Eager flowgrad (tested against
torch by opinfo_vs_torch.py) is the reference. Every compiled thing is called twice, the second
time on other values of the same shapes and dtypes (floats `0.9 x + 0.03`, which keeps order,
signs of positive values and positive-definiteness; integers and bools reversed in memory
order, which keeps index tensors valid), and checked:

- `graph`: an eval `nn.Graph.trace` of the op: raise/no-raise, structure, dtype, shape, values
  as eager on each call's data; the first call's outputs, held by the caller, unchanged after
  the second call (a reused buffer); the inputs after each call as eager leaves them;
- `grad` (float64): `build` computes sum((out * cotangent).sum()) over the differentiable
  outputs and calls `.backward()`: each input's `.grad` as eager's, on fresh leaves each call,
  then a third call on the second call's leaves accumulates into their `.grad` as eager does;
- `captured`: only the sample's input is a graph input; the other tensors are free variables
  of `build`, written in place between the calls: the second call reads the new values;
- `compile`: `flow.compile(fn, fullgraph=True)` of the op on leaves that require grad: its
  outputs and, through `backward()` outside, the gradients as eager's, on both data;
- `masked`: the input selected by a boolean mask inside build (x[mask]: a size that depends on
  values), with another count on the 2nd call: eager's values, then StalePlanError (a plan's
  sizes are static: flowgrad's code turned the traced size into shapes and numbers, which
  gave wrong results with no error).

Every call (eager and compiled) starts from the same seed, so random ops compare by value: a
plan draws the numbers eager draws. (`compare`'s messages say "torch" for eager, "flowgrad" for
the graph.)

Run as a script for a report: .venv/bin/python tests/opinfo_graph.py [name ...] [--shard=i/n]
(`--first`: each OpInfo's first sample per dtype; `--samples=n`: the first n; `--kinds=graph,grad`:
those checks only)
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import torch
from opinfo_vs_torch import (
    Converter,
    Unsupported,
    _differentiable,
    compare,
    convert_sample,
    describe,
    dtype_samples,
    flowgrad_wrapper,
    full_name,
    one_thread,
    op_db,
    report,
    resolve,
    shard_of,
    to_numpy,
)

import flowgrad as flow
from flowgrad.graph.graph import StalePlanError

KINDS = ("graph", "grad", "captured", "compile", "masked")
DTYPES = (torch.float64, torch.int64, torch.bool)


class _Slot:
    def __init__(self, i):
        self.i = i


def flatten(value, tensors, seen):
    """`value` with each flowgrad tensor replaced by a _Slot into `tensors` (one per object)."""
    if isinstance(value, flow.Tensor):
        if id(value) not in seen:
            seen[id(value)] = len(tensors)
            tensors.append(value)
        return _Slot(seen[id(value)])
    if type(value) in (list, tuple):
        return type(value)(flatten(v, tensors, seen) for v in value)
    if isinstance(value, dict):
        return {k: flatten(v, tensors, seen) for k, v in value.items()}
    return value


def fill(spec, tensors):
    if isinstance(spec, _Slot):
        return tensors[spec.i]
    if type(spec) in (list, tuple):
        return type(spec)(fill(v, tensors) for v in spec)
    if isinstance(spec, dict):
        return {k: fill(v, tensors) for k, v in spec.items()}
    return spec


def perturbed(t):
    """Other values of t's shape and dtype, valid where t's are (see the module docstring)."""
    data = t.detach()
    if data.dtype.is_floating_point or data.dtype.is_complex:
        return data * 0.9 + 0.03
    return data.flatten().flip(0).reshape(data.shape).clone()


def copies(tensors, grads=()):
    """Fresh copies (the layout kept), those at indices `grads` leaves that require grad."""
    out = []
    for i, t in enumerate(tensors):
        c = flow.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype) if all(
            s > 0 for s in t.stride()) else flow.empty(tuple(t.shape), dtype=t.dtype)
        with flow.no_grad():
            c.copy_(t.detach())
        out.append(c.requires_grad_() if i in grads else c)
    return out


def _attempt(fn, *args):
    flow.manual_seed(7)  # (random ops: a plan draws eager's numbers from the same seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as error:  # noqa: BLE001 - any raise is compared with eager's
            return None, error


def _raise_message(where, e_error, g_error):
    if (e_error is None) != (g_error is None):
        return f"{where} raise: eager {e_error!r:.200}, graph {g_error!r:.300}"
    return None


class Case:
    """One sample ready for graph mode: its tensors flat, the call rebuilding the arguments."""

    def __init__(self, info, fn, sample):
        convert = Converter()
        f_input, f_args, f_kwargs = convert_sample(sample, convert)
        self.tensors, seen = [], {}
        self.spec = flatten((f_input, f_args, f_kwargs), self.tensors, seen)
        self.grads = {seen[id(f)] for _, f in convert.pairs if id(f) in seen}
        self.wrap = flowgrad_wrapper(info.gradcheck_wrapper)
        self.fn = fn
        self.process = sample.output_process_fn_grad
        self.values = True  # (random ops too: each call is seeded alike)

    def call(self, tensors):
        inp, args, kwargs = fill(self.spec, list(tensors))
        return self.wrap(self.fn, inp, *args, **kwargs)

    def data(self, second):
        return [perturbed(t) for t in self.tensors] if second else list(self.tensors)

    def loss(self, out, cots):
        outs = _float_outputs(self.process(out))
        return sum(((o * c).sum() for o, c in zip(outs, cots)), flow.zeros((),
                                                                            dtype=flow.float64))

    def cotangents(self, out):
        rng = np.random.RandomState(0)
        return [flow.tensor(rng.standard_normal(tuple(o.shape))).to(o.dtype)
                for o in _float_outputs(self.process(out))]


def _float_outputs(out):
    return [o for o in _differentiable(out, flow) if o.dtype.is_floating_point]


def _snapshot(value):
    return to_numpy(value) if value is not None else None


def check_forward(case):
    """The eval graph against eager on two data; None or a message."""
    graph = flow.nn.Graph.trace(lambda *ts: case.call(ts))
    held = []
    for second in (False, True):
        where = "2nd call" if second else "1st call"
        data = case.data(second)
        e_in, g_in = copies(data), copies(data)
        e_out, e_error = _attempt(case.call, e_in)
        g_out, g_error = _attempt(graph, *g_in)
        message = _raise_message(where, e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(to_numpy(e_out), to_numpy(g_out), where + " output", case.values) or \
            compare(to_numpy(e_in), to_numpy(g_in), where + " inputs after", case.values)
        if message:
            return message
        held.append((g_out, _snapshot(g_out)))
    out, before = held[0]
    return compare(before, to_numpy(out), "1st call's output after the 2nd call", case.values)


def check_grad(case):
    """build = op, (out * cot).sum(), backward(): the inputs' .grad as eager's; None or a
    message."""
    if not case.grads:
        return None
    probe, _ = _attempt(case.call, copies(case.tensors, case.grads))
    if probe is None or not _float_outputs(case.process(probe)):
        return None
    cots = case.cotangents(probe)

    def step(*ts):
        out = case.call(ts)
        loss = case.loss(out, cots)
        loss.backward()
        return out, loss

    graph = flow.nn.Graph.trace(step)
    leaves = None
    for call in range(3):
        where = ("1st", "2nd", "3rd (accumulating)")[call] + " call"
        if call < 2:
            data = case.data(call == 1)
            e_in, g_in = copies(data, case.grads), copies(data, case.grads)
        else:
            e_in, g_in = leaves
        e_out, e_error = _attempt(step, *e_in)
        g_out, g_error = _attempt(graph, *g_in)
        message = _raise_message(where, e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(to_numpy(e_out), to_numpy(g_out), where + " output", case.values)
        if message or not case.values:
            return message
        e_grads = tuple(to_numpy(e_in[i].grad) for i in sorted(case.grads))
        g_grads = tuple(to_numpy(g_in[i].grad) for i in sorted(case.grads))
        message = compare(e_grads, g_grads, where + " grad")
        if message:
            return message
        leaves = (e_in, g_in)
    return None


def check_captured(case):
    """Tensors other than the input as free variables of build, written between calls."""
    if len(case.tensors) < 2:
        return None
    captured = copies(case.tensors[1:])
    e_captured = copies(case.tensors[1:])
    graph = flow.nn.Graph.trace(lambda x: case.call([x, *captured]))
    for second in (False, True):
        where = "2nd call" if second else "1st call"
        data = case.data(second)
        if second:
            try:
                with flow.no_grad():
                    for c, e, d in zip(captured, e_captured, data[1:]):
                        c.copy_(d)
                        e.copy_(d)
            except RuntimeError:
                return None  # (a captured tensor that cannot be written: an expanded one)
        e_in, g_in = copies(data[:1]), copies(data[:1])
        e_out, e_error = _attempt(case.call, [e_in[0], *e_captured])
        g_out, g_error = _attempt(graph, g_in[0])
        message = _raise_message("captured " + where, e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(to_numpy(e_out), to_numpy(g_out), "captured " + where + " output",
                          case.values)
        if message:
            return message
    return None


def check_compile(case):
    """flow.compile(fullgraph=True) of the op: outputs and gradients through backward()."""
    if not case.tensors:
        return None  # (flow.compile compiles calls with tensor arguments; graph checks those)
    compiled = flow.compile(lambda *ts: case.call(ts), fullgraph=True)
    for second in (False, True):
        where = "compile " + ("2nd call" if second else "1st call")
        data = case.data(second)
        e_in, g_in = copies(data, case.grads), copies(data, case.grads)
        e_out, e_error = _attempt(case.call, e_in)
        g_out, g_error = _attempt(compiled, *g_in)
        message = _raise_message(where, e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(to_numpy(e_out), to_numpy(g_out), where + " output", case.values)
        if message or not case.values or not case.grads:
            return message
        if not _float_outputs(case.process(e_out)):
            continue
        cots = case.cotangents(e_out)
        _, e_error = _attempt(lambda: case.loss(e_out, cots).backward())
        _, g_error = _attempt(lambda: case.loss(g_out, cots).backward())
        message = _raise_message(where + " backward", e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(tuple(to_numpy(e_in[i].grad) for i in sorted(case.grads)),
                          tuple(to_numpy(g_in[i].grad) for i in sorted(case.grads)),
                          where + " grad")
        if message:
            return message
    return None


def check_masked(case):
    """The sample's input selected along dim 0 by a boolean mask inside build (a size that
    depends on values), all rows but the last on the 1st call and all on the 2nd: the plan
    computes eager's values on the 1st call and on the 2nd raises StalePlanError (its sizes
    are static), never another value."""
    if not (isinstance(case.spec[0], _Slot) and case.spec[0].i == 0) or \
            case.tensors[0].ndim == 0 or case.tensors[0].shape[0] < 2:
        return None
    rows = case.tensors[0].shape[0]

    def call(mask, *tensors):
        return case.call((tensors[0][mask],) + tuple(tensors[1:]))

    graph = flow.nn.Graph.trace(call)
    for second in (False, True):
        where = "masked " + ("2nd call" if second else "1st call")
        data, mask = case.data(second), flow.tensor([True] * (rows - 1) + [second])
        e_out, e_error = _attempt(call, mask, *copies(data))
        g_out, g_error = _attempt(graph, mask, *copies(data))
        if second and e_error is None and isinstance(g_error, StalePlanError):
            return None
        message = _raise_message(where, e_error, g_error)
        if message or e_error is not None:
            return message
        message = compare(to_numpy(e_out), to_numpy(g_out), where + " output", case.values)
        if message:
            return message
    return f"{where}: the plan ran with another count than the traced one"


LIMIT = None  # the most samples per dtype (`--samples=n`); None: all


CHECKS = {"graph": check_forward, "grad": check_grad, "captured": check_captured,
          "compile": check_compile, "masked": check_masked}


def probe(info, dtypes=DTYPES, kinds=KINDS, first_only=False):
    """Every finding for one OpInfo: [(kind/dtype, sample, message)]."""
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    for dtype, all_samples in dtype_samples(info, dtypes, found, 1 if first_only else LIMIT):
        name = str(dtype).split(".")[1]
        for sample in all_samples:
            try:
                case = Case(info, fn, sample)
            except Unsupported as reason:
                found.append((name, describe(sample), "skip: " + str(reason)))
                continue
            for kind in kinds:
                if kind in ("grad",) and dtype != torch.float64:
                    continue
                try:
                    message = CHECKS[kind](case)
                except Exception as error:  # noqa: BLE001 - the check's own failure
                    message = f"check error: {error!r:.300}"
                if message:
                    found.append((f"{kind}/{name}", describe(sample), message))
    return found


def main(names):
    shard, shards = shard_of(names)
    first = "--first" in names
    if first:
        names.remove("--first")
    kinds = KINDS
    global LIMIT
    for arg in list(names):
        if arg.startswith("--kinds="):
            kinds = tuple(arg[8:].split(","))
            names.remove(arg)
        elif arg.startswith("--samples="):
            LIMIT = int(arg[10:])
            names.remove(arg)
    with one_thread():
        report(op_db(), lambda info: probe(info, kinds=kinds, first_only=first),
               lambda k, info: k % shards == shard and (
                   not names or info.name in names or full_name(info) in names), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])
