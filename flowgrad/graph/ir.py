"""The traced job: values (arrays with a shape and dtype) and nodes (an op, its input values,
its attributes, its output values), in the order they ran.

A value comes from a graph input, from module state (a parameter or buffer, read by
reference at every run), from a captured constant (an eager tensor the step used, also read by
reference), or from a node. Passes (`passes.py`) rewrite a Program; `codegen.py` turns one
into a plan.
"""
from __future__ import annotations

INPUT, STATE, CONST, NODE = "input", "state", "const", "node"


class StalePlanError(RuntimeError):
    """The model changed after the graph compiled (a parameter replaced, a setting, a hook, a
    dtype, requires_grad, the optimizer's groups), or a size that depends on values did:
    the plan no longer computes what build would. `flow.compile` catches it and traces anew
    (torch.compile's recompilation); a graph raises it, naming the change."""


class Value:
    """One array of the job: where it comes from, and its shape and dtype at trace time."""

    __slots__ = ("id", "kind", "shape", "dtype", "source")

    def __init__(self, vid, kind, shape, dtype, source=None):
        self.id = vid
        self.kind = kind      # INPUT, STATE, CONST or NODE
        self.shape = shape
        self.dtype = dtype
        self.source = source  # INPUT: arg index; STATE/CONST: the tensor; NODE: the Node

    def __repr__(self):
        return f"v{self.id}"


class Node:
    """One op call: `outputs = op.kernel(xp, *inputs, **attrs)`; `outputs` lists every array
    the kernel returns (aux arrays included, as backward rules may read them). (`Tracer.apply`
    makes its nodes without a call to __init__, setting each slot itself: a new slot goes
    there too; so does `Value`'s.)"""

    __slots__ = ("op", "inputs", "attrs", "outputs", "n_results", "phase", "where")

    def __init__(self, op, inputs, attrs, outputs, phase):
        self.op = op
        self.inputs = inputs
        self.attrs = attrs
        self.outputs = outputs
        self.n_results = len(outputs)  # the op's outputs; the rest are its aux arrays
        self.phase = phase  # "forward", "backward", "update" (an optimizer's step), or
        #                     "function" (a custom Function's link, never run: its
        #                     forward's own ops compute its outputs)
        self.where = None   # the user_site (tracer.py) of the user's code that called the op

    def __repr__(self):
        ins = ", ".join(map(repr, self.inputs))
        outs = ", ".join(map(repr, self.outputs))
        attrs = "".join(f", {k}={v!r}" for k, v in self.attrs.items())
        name = getattr(self.op, "name", None) or self.op.node_name  # a custom Function's
        call = f"{name}({ins}{attrs})"
        return f"{outs} = {call}" if outs else call  # an update returns nothing


class Program:
    """A traced job: its values, its nodes in execution order, and what it returns."""

    def __init__(self):
        self.values = []    # every Value, at the position that is its id (passes rely on it;
        #                     after codegen, None where no node or result names it: `compact`)
        self.nodes = []
        self.states = []    # the STATE Values (module state, the optimizers' parameters)
        self.inputs = []    # Values of the graph's tensor arguments, by position
        self.outputs = []   # Values the step returns (its flattened result)
        self.grads = {}     # parameter tensor -> the Value of its gradient
        self.writebacks = {}  # parameter/buffer tensor -> the Value written into it in place
        self.input_writes = {}  # graph input's position -> the Value written into it in place
        self.leaf_values = {}  # value id -> the parameter's STATE Value it was written into
        self.read_guards = []  # (captured tensor, its values build read): the plan assumes them
        self.attribute_sets = []  # (store, name) bound to each of the last outputs per call
        self.leaf_grads = {}  # graph input's position, or a captured tensor -> the Value of its
        #                       gradient (a leaf that requires grad): added into its .grad
        self.differentiated = False  # build ran an autograd pass (backward, autograd.grad)
        self.inputs_requiring_grad = ()  # the positions of the inputs that did when traced
        self.value_roots = []  # nodes whose output size depends on values (nonzero, x[mask])

    def new_value(self, kind, array, source=None):
        value = Value(len(self.values), kind, array.shape, array.dtype, source)
        self.values.append(value)
        if kind == STATE:
            self.states.append(value)
        return value

    def compact(self):
        """After codegen: forget the values no node and no result names any longer (computed
        inside a fused chain, or by nodes a pass removed), and with them the traced nodes
        that made them. A compiled graph keeps its program (its repr, the nodes errors name),
        and the cycle collector would walk thousands of objects it holds for nothing."""
        used = {v.id for node in self.nodes for v in node.inputs}
        used.update(v.id for node in self.nodes for v in node.outputs)
        used.update(v.id for v in self.results())
        values = self.values
        for i in set(range(len(values))).difference(used):
            v = values[i]
            if v is not None and v.kind == NODE:
                values[i] = v.source = None  # (a value and its node refer to each other: freed
                #                                 now, not left to the collector)

    def state_values(self, kind):
        return [v for v in self.values if v is not None and v.kind == kind]

    def results(self):
        """Every Value the plan must produce: the outputs, the parameters' gradients, the
        values written back into parameters, buffers and inputs, then the gradients of the
        other leaves (last: `Graph` reads them from the end)."""
        return list(self.outputs) + list(self.grads.values()) + \
            list(self.writebacks.values()) + list(self.input_writes.values()) + \
            list(self.leaf_grads.values())

    def __repr__(self):
        lines = [f"inputs: {self.inputs}"]
        lines += [f"  [{n.phase}] {n!r}" for n in self.nodes]
        lines.append(f"outputs: {self.outputs}")
        lines += [f"grad of {tuple(p.shape)} parameter: {v!r}" for p, v in self.grads.items()]
        lines += [f"write back into {tuple(t.shape)} state: {v!r}"
                  for t, v in self.writebacks.items()]
        return "\n".join(lines)
