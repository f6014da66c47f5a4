"""The executor: a Program becomes one straight-line Python function over arrays.

Each node is a direct call of its op's kernel (`op.kernel(xp, *arrays, **attrs)`, attributes
bound once with functools.partial), and a fused chain its ufunc calls written inline
(`FusedOp.inline`): no Tensor objects, no autograd bookkeeping. The function
takes the array module `xp` of the inputs' device, so another device needs no change here.

>>> import numpy as np
>>> import flowgrad as flow
>>> from flowgrad.graph.tracer import Tracer
>>> from flowgrad.autograd.interpreter import using_interpreter
>>> tracer = Tracer()
>>> x = flow.tensor([1.0, -2.0])
>>> tracer.program.inputs.append(tracer.bind(x, "input", 0))
>>> with using_interpreter(tracer):
...     y = flow.relu(x) * 3
>>> tracer.program.outputs.append(tracer.value(y))
>>> plan = generate(tracer.program)
>>> plan.run(np, [np.array([4.0, -5.0], np.float32)])[0]
array([12.,  0.], dtype=float32)
"""
from __future__ import annotations

import functools
import re

import numpy as np

from ..autograd.inplace import bump_version
from ..device import ARRAY_MODULES
from .fusion import FusedOp
from .ir import CONST, INPUT, NODE, STATE, StalePlanError
from .sites import user_line


class Plan:
    """A compiled step: `run(xp, input_arrays)` returns the result arrays in Program order. A
    kernel that fails names its op and the user's line that created it."""

    def __init__(self, source, function, node_at_line):
        self.source = source
        self.function = function
        self.node_at_line = node_at_line  # line of the plan's source -> Node

    def run(self, xp, arrays):
        try:
            return self.function(xp, arrays)
        except Exception as error:
            node = self._failed_node(error)
            if node is None or isinstance(error, StalePlanError):  # (a size guard names its line)
                raise
            where = user_line(node.where) if node.where else "an unknown line"
            raise type(error)(f"nn.Graph: op {node.op.name} failed while running the compiled "
                              f"plan: {error}. It was created at {where}") from error

    def _failed_node(self, error):
        tb, line = error.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == _FILENAME:
                line = tb.tb_lineno
            tb = tb.tb_next
        return self.node_at_line.get(line)


_FILENAME = "<nn.Graph plan>"
_XP_CALL = re.compile(r"\bxp\.(\w+)\(")


def _views_of_written_state(program, lines):
    """A result that is a view (expand, slicing, reshape, ...) of a value written into state:
    eagerly it is a view of the state tensor itself, so the writes after it (the optimizer's
    update) show through it. The plan computed it from the written value's own array; after
    the write-backs it takes the same views again, of the state's storage (`w<i>` below)."""
    written = {v.id: i for i, v in enumerate(program.writebacks.values())}
    if not written:
        return
    position = {id(node): i for i, node in enumerate(program.nodes)}
    for result in program.results():
        chain, v = [], result
        while v.id not in written and v.kind == NODE and v.source is not None and \
                getattr(v.source.op, "is_view", False) and len(v.source.inputs) == 1 and \
                len(v.source.outputs) == 1 and id(v.source) in position:
            chain.append(v.source)
            v = v.source.inputs[0]
        if not chain or v.id not in written:
            continue
        current = f"w{written[v.id]}._data"
        for node in reversed(chain):
            lines.append(f"    v{node.outputs[0].id} = k{position[id(node)]}(xp, {current})")
            current = f"v{node.outputs[0].id}"


def generate(program):
    """Python source for the program, compiled; state and constants are read by reference."""
    # (a module name under flowgrad: NumPy's floating-point warnings from the plan are
    # silenced by flowgrad's filter, as its kernels' are eagerly)
    scope = {"ND": np.ndarray, "AS": _as_array, "AS1": _first_as_array,
             "__name__": "flowgrad.graph.plan"}
    lines = ["def plan(xp, args):"]
    constants = {}  # fused chains' 0-d constants, made on the plan's device (CONSTS below)
    consts = {}  # (dtype, bytes) -> the name of that constant: one per value in the plan
    ufuncs = {}  # xp.<name>( in a fused chain -> xp_<name>(, a local bound once per call
    node_at_line = {}
    dead_after = getattr(program, "dead_after", None) or {}
    ref, alive = {}, {}  # value id -> `list[i]`: an item a fused loop left in its list;
    #                      list -> how many of its items are still to be read

    def expr(value):
        return ref.get(value.id) or f"v{value.id}"
    used = {v.id for node in program.nodes for v in node.inputs}
    used.update(v.id for v in program.results())
    values = program.values  # (a Value's id is its position: only the used ones looked at)
    for value in map(values.__getitem__, sorted(used)):
        name = f"v{value.id}"
        if value.kind == INPUT:
            lines.append(f"    {name} = args[{value.source}]")
        elif value.kind in (STATE, CONST):
            scope[f"t{value.id}"] = value.source
            lines.append(f"    {name} = t{value.id}._data")
    for i, node in enumerate(program.nodes):
        if isinstance(node.op, FusedOp):  # written inline: no call per chain
            outs = [f"v{v.id}" for v in node.outputs]
            body, names, aliases = node.op.inline(
                [expr(v) for v in node.inputs], outs, f"f{i}_", consts, share=True)
            for v, out in zip(node.outputs, outs):
                item = aliases.get(out)
                if item is not None:
                    ref[v.id] = item
                    base = item.split("[")[0]
                    alive[base] = alive.get(base, 0) + 1
            for name, value in names.items():
                (constants if isinstance(value, np.ndarray) else scope)[name] = value
            for line in body:
                lines.append("    " + _XP_CALL.sub(
                    lambda m: ufuncs.setdefault(m.group(1), f"xp_{m.group(1)}("), line))
                node_at_line[len(lines)] = node
            _free(lines, dead_after.get(i), ref, alive)
            continue
        kernel = node.op.kernel
        scope[f"k{i}"] = functools.partial(kernel, **node.attrs) if node.attrs else kernel
        args = "".join(f", {expr(v)}" for v in node.inputs)
        lines.append(f"    r = k{i}(xp{args})")
        node_at_line[len(lines)] = node
        if not node.outputs:  # an update: its effect is the point
            pass
        elif len(node.outputs) == 1 and (node.op.n_out == 1):
            v = node.outputs[0].id
            lines.append(f"    v{v} = r if r.__class__ is ND else AS1(xp, r)")
        else:
            for k, value in enumerate(node.outputs):
                lines.append(f"    v{value.id} = r[{k}] if r[{k}].__class__ is ND else "
                             f"AS(xp, r[{k}])")
        _free(lines, dead_after.get(i), ref, alive)
    state_ids = {id(v.source) for v in program.states} \
        if program.writebacks else ()
    for i, (tensor, value) in enumerate(program.writebacks.items()):
        scope[f"w{i}"], scope["BUMP"] = tensor, bump_version
        lines.append(f"    w{i}._data[...] = {expr(value)}  # in-place write to "
                     f"{'state' if id(tensor) in state_ids else 'a tensor'}")
        lines.append(f"    BUMP(w{i})")
    for position, value in program.input_writes.items():
        lines.append(f"    args[{position}][...] = {expr(value)}  # in-place write to an input")
    _views_of_written_state(program, lines)
    results = ", ".join(expr(v) for v in program.results())
    lines.append(f"    return [{results}]")
    prologue = []
    if constants:
        prologue.append(f"    {', '.join(constants)}, = CONSTS(xp)")
        scope["CONSTS"] = _constants_on(tuple(constants.values()))
    if ufuncs:  # a local read instead of an attribute lookup per ufunc call
        prologue.append(f"    {', '.join(f'xp_{n}' for n in ufuncs)}, = UFUNCS(xp)")
        scope["UFUNCS"] = _functions_of(tuple(ufuncs))
    if prologue:
        lines[1:1] = prologue
        node_at_line = {line + len(prologue): node for line, node in node_at_line.items()}
    source = "\n".join(lines)
    exec(compile(source, _FILENAME, "exec"), scope)  # our own generated code
    return Plan(source, scope["plan"], node_at_line)


def _as_array(xp, result):
    """A kernel's result as an array of its device: a registered array as it is, anything
    else (a NumPy scalar from a reduction) through the plan's array module."""
    return result if result.__class__ in ARRAY_MODULES else xp.asarray(result)


def _first_as_array(xp, result):
    """The result of a one-output op's kernel, as `_as_array`; of a tuple (the kernel also
    returns aux arrays), its first item."""
    return _as_array(xp, result[0] if result.__class__ is tuple else result)


def _per_array_module(make, made=None):
    """`of(xp)`: `make(xp)`, made once per array module (a plan calls it at every run)."""
    made = {} if made is None else made

    def of(xp):
        got = made.get(xp)
        if got is None:
            got = made[xp] = make(xp)
        return got
    return of


def _constants_on(host):
    """`CONSTS(xp)`: the plan's constants as arrays of xp's device (NumPy: as they are)."""
    return _per_array_module(lambda xp: tuple(xp.asarray(a) for a in host), {np: host})


def _plan_function(xp, name):
    """`xp.<name>` for a plan; a non-ufunc such as `where` without NumPy's
    __array_function__ dispatch (a plan holds plain arrays, and the dispatch was a sixth of a
    where on 100 values)."""
    function = getattr(xp, name)
    return function if isinstance(function, np.ufunc) else \
        getattr(function, "_implementation", function)


def _functions_of(names):
    """`UFUNCS(xp)`: the array module's functions of these names (`_plan_function`)."""
    return _per_array_module(lambda xp: tuple(_plan_function(xp, n) for n in names))


def _free(lines, dead, ref, alive):
    """Free intermediates once nothing reads them (a lower peak memory): `del` their names; an
    item of a loop's list is dropped from it, the whole list once none is left to read."""
    if not dead:
        return
    names, items = [], {}
    for vid in dead:
        item = ref.get(vid)
        if item is None:
            names.append(f"v{vid}")
        else:
            items.setdefault(item.split("[")[0], []).append(item)
    for base, dying in items.items():
        alive[base] -= len(dying)
        if alive[base]:
            lines += [f"    {item} = None" for item in dying]
        else:
            names.append(base)
    if names:
        lines.append(f"    del {', '.join(names)}")
