"""The executor: a Program becomes one straight-line Python function over arrays.

Each node is a direct call of its op's kernel (`op.kernel(xp, *arrays, **attrs)`, attributes
bound once with functools.partial): no Tensor objects, no autograd bookkeeping. The function
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

import numpy as np

from ..autograd.interpreter import bump_version
from .ir import CONST, INPUT, STATE


class Plan:
    """A compiled step: `run(xp, input_arrays)` returns the result arrays in Program order."""

    def __init__(self, source, function):
        self.source = source
        self.function = function

    def run(self, xp, arrays):
        return self.function(xp, arrays)


def generate(program):
    """Python source for the program, compiled; state and constants are read by reference."""
    scope = {"ND": np.ndarray, "AS": np.asarray}
    lines = ["def plan(xp, args):"]
    used = {v.id for node in program.nodes for v in node.inputs}
    used.update(v.id for v in program.results())
    for value in program.values:
        if value.id not in used:
            continue
        name = f"v{value.id}"
        if value.kind == INPUT:
            lines.append(f"    {name} = args[{value.source}]")
        elif value.kind in (STATE, CONST):
            scope[f"t{value.id}"] = value.source
            lines.append(f"    {name} = t{value.id}._data")
    for i, node in enumerate(program.nodes):
        kernel = node.op.kernel
        scope[f"k{i}"] = functools.partial(kernel, **node.attrs) if node.attrs else kernel
        args = "".join(f", v{v.id}" for v in node.inputs)
        lines.append(f"    r = k{i}(xp{args})")
        if len(node.outputs) == 1 and (node.op.n_out == 1):
            v = node.outputs[0].id
            lines.append(f"    v{v} = r if r.__class__ is ND else AS(r[0] if r.__class__ is "
                         f"tuple else r)")
        else:
            for k, value in enumerate(node.outputs):
                lines.append(f"    v{value.id} = r[{k}] if r[{k}].__class__ is ND else "
                             f"AS(r[{k}])")
    state_value = {id(v.source): v for v in program.values if v.kind == STATE}
    for i, (tensor, value) in enumerate(program.writebacks.items()):
        scope[f"w{i}"], scope["BUMP"] = tensor, bump_version
        lines.append(f"    w{i}._data[...] = v{value.id}  # in-place write to "
                     f"{'state' if id(tensor) in state_value else 'a tensor'}")
        lines.append(f"    BUMP(w{i})")
    results = ", ".join(f"v{v.id}" for v in program.results())
    lines.append(f"    return [{results}]")
    source = "\n".join(lines)
    exec(compile(source, "<nn.Graph plan>", "exec"), scope)  # our own generated code
    return Plan(source, scope["plan"])
