"""FunctionNode: one node of the backward graph, and the capture state its rule reads.

As in the seed, a node holds AutogradMeta of its inputs and outputs, not tensors; its
`backward_fn` is the op's registered gradient rule applied to the node itself, which holds
the op's captured state (the seed's capture state: saved tensors and attributes).
"""
from __future__ import annotations

import itertools
import weakref

from ..errors import inference_saved_error, saved_tensor_error
from . import grad_mode
from . import meta as _meta
from . import saved_hooks as _saved_hooks
from .graph import Node
from .meta import VersionCounter

Tensor = None  # bound by flowgrad.tensor once the class exists (interpreter.bind_tensor_class)
_new = object.__new__
# nodes are numbered as they are made (torch's sequence_nr); a leaf's accumulate_grad node
# takes torch's UINT64_MAX, so the ready queue runs it as soon as it is ready
next_sequence_nr = itertools.count().__next__
LEAF_SEQUENCE_NR = 2 ** 64 - 1


class SavedTensor:
    """A tensor kept for backward, with the version it had when saved.

    An op's own outputs are stored as (array, meta) and rebuilt on unpack with the node as
    grad_fn; keeping the output tensor itself would make a reference cycle.
    """

    __slots__ = ("data", "meta", "grad_fn", "counter", "version", "is_output", "tensor")

    def __init__(self, tensor, is_output: bool):
        counter = tensor._counter
        if counter is None:
            counter = tensor._counter = VersionCounter()
        elif counter.__class__ is not VersionCounter:  # an inference tensor's
            levels = _saved_hooks.TRANSFORMS
            if not levels or type(levels[-1]) is not _saved_hooks.ReverseLevel:
                raise inference_saved_error(tensor)
            counter = VersionCounter()  # (func.grad/vjp see it through a normal tensor)
        self.counter = counter
        self.version = counter.value
        self.is_output = is_output
        if is_output:
            self.data, self.meta, self.tensor = tensor._data, tensor._meta, None
        else:
            self.tensor, self.grad_fn = tensor, tensor._grad_fn

    def check(self, node):
        """Raise if the tensor was written in place, or detach_()ed, since it was saved."""
        if self.counter.value != self.version and not _meta.writes_unseen(
                self.counter, self.version):
            raise saved_tensor_error(node, self)
        tensor = self.tensor
        if tensor is not None and self.grad_fn is not None and tensor._grad_fn is None:
            raise RuntimeError(
                f"{node.name}: trying to use a saved tensor (shape "
                f"{tuple(tensor.shape)}) that has been detached in-place, i.e. with "
                f".detach_(). This is not supported; use the out-of-place .detach() instead")

    def adopt(self, result, target):
        """If this is `result` saved as its op's output, it is now `target` (an in-place op
        wrote result into target's storage)."""
        if self.data is result._data:
            self.data, self.counter, self.version = target._data, target._counter, \
                target._counter.value

    def unpack(self, node):
        tensor = self.tensor
        if self.counter.value != self.version or (
                tensor is not None and self.grad_fn is not None and tensor._grad_fn is None):
            self.check(node)  # raises, saying which
        if tensor is not None:
            return tensor
        t = _new(Tensor)
        t._data, t._meta, t._grad_fn, t._counter, t._view = (
            self.data, self.meta, node, self.counter, None)
        return leading_to_node(t)


def leading_to_node(t):
    """An unpacked saved output `t`, as it is unless its tensor was detach_()ed since it was
    saved (its meta, shared, stopped requiring grad): torch's saved output still leads to its
    node in double backward, so under grad mode t is then handed on through a clone recorded
    on the meta (its gradient reaches the node; the detached tensor stays detached)."""
    meta = t._meta
    if meta is None or meta.requires_grad or not grad_mode._state.enabled:
        return t
    meta.requires_grad = True
    try:
        return t.clone()
    finally:
        meta.requires_grad = False


class FunctionNode(Node):
    """A node of the backward graph (the seed's GraphFunctionNode), and the capture state
    its op's gradient rule reads: the rule is called with the node as `ctx`.

    `input_metas[i]` is the AutogradMeta the gradient for input i is added into (None when
    that input needs no grad); `next_nodes[i]` is the node that consumes it next. The rule
    reads saved tensors (`ctx.inputs`, `ctx.outputs`, `ctx.out`), the op call's attributes as
    `ctx.<name>` (e.g. `ctx.dim`) and `ctx.needs_input_grad`. Node and state are one object
    (one allocation per op, no node <-> state cycle), and the node holds AutogradMeta, never
    tensors, so a graph is freed by reference counting alone.
    """

    # the op call's attributes are the node's instance __dict__: `ctx.dim` is a plain read
    __slots__ = ("op", "input_metas", "next_nodes", "input_infos", "output_metas",
                 "output_infos", "_inputs", "_outputs", "aux", "_needs", "saved_something",
                 "released", "sequence_nr", "__dict__", "__weakref__")

    def __init__(self, op, attrs, input_metas, next_nodes, input_infos):
        self.sequence_nr = next_sequence_nr()
        self.op = op
        if attrs:  # (none: the __dict__ is made only if something is ever set)
            self.__dict__ = attrs
        self.input_metas = input_metas
        self.next_nodes = next_nodes
        self.input_infos = input_infos  # (shape, np dtype) per input, for un-broadcasting
        self.output_metas = self.output_infos = ()  # output_infos: for zero grads
        self._inputs = self._outputs = self.aux = self._needs = None
        self.saved_something = self.released = False

    def _sequence_nr(self):
        """The node's place in creation order (torch's): the engine runs the ready node with
        the highest first; a leaf's accumulate_grad has the highest of all."""
        return self.sequence_nr

    def __lt__(self, other):  # (the ready queue's ties, leaves' nodes: equal priorities)
        return False

    @property
    def name(self):
        """The node's name, `<op>_backward` (callable too: torch code calls `name()`)."""
        return self.op.node_name

    @property
    def needs_input_grad(self):
        """Per input, whether its gradient is needed (made on first read)."""
        needs = self._needs
        if needs is None:
            needs = self._needs = tuple(m is not None for m in self.input_metas)
        return needs

    @needs_input_grad.setter
    def needs_input_grad(self, value):
        self._needs = tuple(value)

    @property
    def input_shapes(self):
        """Shapes of the op's inputs at forward time."""
        return tuple(info[0] for info in self.input_infos)

    @property
    def inputs(self):
        """The op's inputs as saved at forward time (the op must declare save='inputs')."""
        saved = self._inputs
        if saved is None:  # released after a backward: it had saved none of them
            return (None,) * len(self.input_infos)
        return tuple(s.unpack(self) if s is not None else None for s in saved)

    def saved_input(self, i):
        """Input i as saved at forward time, checked for in-place writes alone: a rule that
        reads an input on one path only leaves writes to it legal on the others."""
        saved = self._inputs[i] if self._inputs is not None else None
        return None if saved is None else saved.unpack(self)

    @property
    def outputs(self):
        """The op's outputs (the op must declare save='outputs')."""
        return tuple(s.unpack(self) for s in self._outputs)

    @property
    def out(self):
        """The op's single output."""
        saved = self._outputs[0]
        if saved.__class__ is SavedTensor and saved.tensor is None and \
                saved.counter.value == saved.version and \
                ((meta := saved.meta) is None or meta.requires_grad):
            t = _new(Tensor)  # (unpack, inline)
            t._data, t._meta, t._grad_fn, t._counter, t._view = (
                saved.data, meta, self, saved.counter, None)
            return t
        return saved.unpack(self)  # (raises: written in place since; detached since)

    @property
    def attrs(self):
        """The op call's attributes (keyword arguments of its kernel)."""
        return self.__dict__

    def backward_fn(self, out_grads):
        """Run the op's gradient rule: incoming output grads -> grads of the inputs (None for
        each when no input carries a history: see InertNode). A custom Function's backward
        runs all the same, as torch's, for what else it does (a reentrant checkpoint's inner
        backward reaches the tensors its function closes over)."""
        if not any(self.next_nodes) and hasattr(self.op, "name"):
            return (None,) * len(self.input_metas)
        return self.op.backward(self, *out_grads)

    def next_functions_pairs(self):
        out = []
        for meta, node in zip(self.input_metas, self.next_nodes):
            if node is None:
                out.append((None, 0))
            else:
                idx = next((k for k, m in enumerate(node.output_metas) if m is meta), 0)
                out.append((node, idx))
        return tuple(out)

    @property
    def next_functions(self):
        """torch-style ((node, output_index), ...) for each input; (None, 0) if no grad."""
        return self.next_functions_pairs()

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"


class NodeName(str):
    """A str that can also be called: torch code calls `grad_fn.name()`, the seed reads
    `node.name`; both work. Made once per op, not per node. Called, it gives torch's name
    where one was set (`torch`: autograd/torch_nodes.py), else itself."""

    def __call__(self):
        return self.__dict__.get("torch") or str(self)


class InertNode(FunctionNode):
    """A node none of whose inputs carries a history: an op on a view made under no_grad of a
    base that requires grad (the view reports requires_grad, as torch's, yet has no grad_fn
    and no accumulator). The output is recorded, as torch's; backward_fn hands every input
    None without running the rule (which may read inputs it never needed to save)."""

    __slots__ = ()  # the engine calls backward_fn for it, not the rule directly


class AccumulateGrad(FunctionNode):
    """The accumulate_grad node of a leaf: its grad is written into the leaf's meta. It
    holds the leaf weakly (`variable`), for the layout a first `.grad` takes."""

    __slots__ = ("_variable",)
    name = NodeName("accumulate_grad")
    accumulates = True

    def __init__(self, meta, tensor):
        super().__init__(None, {}, (), (), ())
        self.sequence_nr = LEAF_SEQUENCE_NR
        self.output_metas = (meta,)
        self._variable = weakref.ref(tensor)

    @property
    def variable(self):
        """The leaf (torch's `.variable`), held weakly: None once it is gone."""
        return self._variable()

    @property
    def variable_meta(self):
        return self.output_metas[0]


FunctionNode.behaviour = FunctionNode  # a class made for torch's name keeps its base's
InertNode.behaviour = InertNode
AccumulateGrad.behaviour = AccumulateGrad
_meta.AccumulateGrad = AccumulateGrad  # AutogradMeta.grad_accumulator makes them
