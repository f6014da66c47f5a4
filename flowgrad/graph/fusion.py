"""Elementwise fusion: a chain of elementwise nodes, each feeding only the next, runs as one
generated kernel. The first step allocates a fresh array; every later step writes into it
with the ufunc's `out=` (NumPy has no numexpr here), so the chain costs one Python call and
one allocation instead of one of each per op, with the same ufunc loops, in the same
operand order: bitwise the values the separate kernels give.

A step is fused only when its array is float, of the chain's shape and dtype (no
broadcast, no cast, not 0-d), and the value between two steps is read by nothing else: not
a result, not another node's input (forward or backward).

>>> import numpy as np
>>> import flowgrad as flow
>>> from flowgrad.graph.passes import trace
>>> p = fuse_elementwise(trace(lambda x: (x * 2.0 + 1.0).tanh(), flow.ones(3)))
>>> p.nodes[0].op.name
'fused[scalar_mul+scalar_add+tanh]'
>>> p.nodes[0].op.kernel(np, np.zeros(3, np.float32))
array([0.7615942, 0.7615942, 0.7615942], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from .ir import Node

# op name -> (the input the chain runs through, the step's source; {x} is the chain array,
# {i0}, {i1} the node's inputs, {c} its `value` attribute, {o} is "" for the first step and
# ", out=b" after; each step leaves its result in `b`)
STEPS = {
    "scalar_mul": (0, "b = xp.multiply({x}, {c}{o})"),
    "scalar_add": (0, "b = xp.add({x}, {c}{o})"),
    "scalar_div": (0, "b = xp.true_divide({x}, {c}{o})"),
    "neg": (0, "b = xp.negative({x}{o})"),
    "tanh": (0, "b = xp.tanh({x}{o})"),
    "exp": (0, "b = xp.exp({x}{o})"),
    "sqrt": (0, "b = xp.sqrt({x}{o})"),
    "relu": (0, "b = xp.maximum({x}, 0{o})"),
    "add": (None, "b = xp.add({i0}, {i1}{o})"),
    "sub": (None, "b = xp.subtract({i0}, {i1}{o})"),
    "mul": (None, "b = xp.multiply({i0}, {i1}{o})"),
    "div": (None, "b = xp.true_divide({i0}, {i1}{o})"),
    # dy * (1 - y * y), as _tanh_grad
    "tanh_grad": (1, "t = {i0} * {i0}\n"
                     "t = xp.subtract(1, t, out=t)\n"
                     "b = xp.multiply({x}, t{o})"),
    # masked_product(xp, y > 0, dy), as _relu_grad
    "relu_grad": (1, "m = {i0} > 0\n"
                     "b = xp.multiply(m, {x}, dtype={x}.dtype{o})\n"
                     "if xp.isnan(b).any():\n"
                     "    b = xp.where(m != 0, b, xp.zeros((), b.dtype))"),
}


class FusedOp:
    """The op of a fused node: what codegen reads of an op (name, kernel, n_out)."""

    def __init__(self, name, kernel, source):
        self.name, self.kernel, self.source = name, kernel, source
        self.n_out = 1

    def __repr__(self):
        return f"<fused op {self.name}>"


def _fusable(node, chain_value=None):
    """The index of the input the chain runs through, or None if the node cannot be a step."""
    step = STEPS.get(node.op.name)
    if step is None or len(node.outputs) != 1 or node.n_results != 1:
        return None
    out = node.outputs[0]
    if np.dtype(out.dtype).kind != "f" or not out.shape:
        return None
    if any(tuple(v.shape) != tuple(out.shape) or v.dtype != out.dtype for v in node.inputs):
        return None
    if node.op.name.startswith("scalar_") and type(node.attrs.get("value")) not in (int, float):
        return None
    if step[0] is not None:
        return step[0]
    if chain_value is None:
        return 0
    hits = [i for i, v in enumerate(node.inputs) if v.id == chain_value.id]
    return hits[0] if len(hits) == 1 else None


def _compile(chain):
    """One kernel for the chain of nodes: `kernel(xp, x, *others)`."""
    args, scope, lines = ["x"], {}, []
    x = "x"
    for k, (node, pos) in enumerate(chain):
        names = {}
        for i, v in enumerate(node.inputs):
            if i == pos:
                names[f"i{i}"] = x
            else:
                names[f"i{i}"] = f"a{len(args)}"
                args.append(names[f"i{i}"])
        if "value" in node.attrs:
            scope[f"c{k}"] = node.attrs["value"]
        source = STEPS[node.op.name][1].format(x=x, c=f"c{k}", o=", out=b" if k else "",
                                               **names)
        lines += ["    " + line for line in source.split("\n")]
        x = "b"
    source = "\n".join([f"def fused(xp, {', '.join(args)}):"] + lines + ["    return b"])
    exec(compile(source, "<fused kernel>", "exec"), scope)  # our own generated code
    return scope["fused"], source


def _uses(program):
    count = {}
    for node in program.nodes:
        for v in node.inputs:
            count[v.id] = count.get(v.id, 0) + 1
    for v in program.results():
        count[v.id] = count.get(v.id, 0) + 1
    return count


def fuse_elementwise(program):
    """Replace each chain of two or more fusable elementwise nodes by one fused node (at the
    place of the chain's last node, where every input is ready)."""
    uses = _uses(program)
    consumer = {}  # value id -> the one node reading it
    for node in program.nodes:
        for v in node.inputs:
            consumer[v.id] = node
    order = {id(node): i for i, node in enumerate(program.nodes)}
    taken, new_at = set(), {}
    for node in program.nodes:
        pos = _fusable(node)
        if id(node) in taken or pos is None:
            continue
        chain = [(node, pos)]
        while True:
            out = chain[-1][0].outputs[0]
            nxt = consumer.get(out.id) if uses.get(out.id) == 1 else None
            if nxt is not None and id(nxt) in taken:  # a binary op joins one chain only:
                nxt = None                            # the chain of its other operand has it
            pos = _fusable(nxt, out) if nxt is not None else None
            if pos is None or nxt.inputs[pos].id != out.id or out.dtype != nxt.outputs[0].dtype:
                break
            chain.append((nxt, pos))
        if len(chain) < 2:
            continue
        kernel, source = _compile(chain)
        inputs = [node.inputs[chain[0][1]]]
        for n, p in chain:
            inputs += [v for i, v in enumerate(n.inputs) if i != p]
        name = "fused[" + "+".join(n.op.name for n, _ in chain) + "]"
        last = chain[-1][0]
        fused = Node(FusedOp(name, kernel, source), inputs, {}, [last.outputs[0]], last.phase)
        fused.where = getattr(last, "where", None)  # a failing plan names the user's line
        last.outputs[0].source = fused
        taken.update(id(n) for n, _ in chain)
        new_at[order[id(last)]] = fused
    program.nodes = [new_at.get(i, n) for i, n in enumerate(program.nodes)
                     if id(n) not in taken or i in new_at]
    return program


__all__ = ["fuse_elementwise", "FusedOp", "STEPS"]
