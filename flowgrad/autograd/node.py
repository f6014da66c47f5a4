"""FunctionNode: one node of the backward graph, and the capture state its rule reads.

As in the seed, a node holds AutogradMeta of its inputs and outputs, not tensors; its
`backward_fn` is the op's registered gradient rule applied to its CaptureState.
"""
from __future__ import annotations

from ..errors import saved_tensor_error
from .graph import Node
from .meta import VersionCounter


class SavedTensor:
    """A tensor kept for backward, with the version it had when saved.

    An op's own outputs are stored as (array, meta) and rebuilt on unpack with the node as
    grad_fn; keeping the output tensor itself would make a reference cycle.
    """

    __slots__ = ("data", "meta", "grad_fn", "counter", "version", "is_output", "tensor")

    def __init__(self, tensor, is_output: bool):
        counter = tensor._version
        if counter is None:
            counter = tensor._version = VersionCounter()
        elif counter.__class__ is not VersionCounter:  # an inference tensor's
            from .inference import saved_error

            raise saved_error(tensor)
        self.counter = counter
        self.version = counter.value
        self.is_output = is_output
        if is_output:
            self.data, self.meta, self.tensor = tensor._data, tensor._meta, None
        else:
            self.tensor, self.grad_fn = tensor, tensor._grad_fn

    def check(self, node):
        """Raise if the tensor was written in place, or detach_()ed, since it was saved."""
        if self.counter.value != self.version:
            raise saved_tensor_error(node, self)
        tensor = self.tensor
        if tensor is not None and self.grad_fn is not None and tensor._grad_fn is None:
            raise RuntimeError(
                f"{node.name}: trying to use a saved tensor (shape "
                f"{tuple(tensor.shape)}) that has been detached in-place, i.e. with "
                f".detach_(). This is not supported; use the out-of-place .detach() instead")

    def unpack(self, node):
        tensor = self.tensor
        if self.counter.value != self.version or (
                tensor is not None and self.grad_fn is not None and tensor._grad_fn is None):
            self.check(node)  # raises, saying which
        if tensor is not None:
            return tensor
        from ..tensor import Tensor

        t = Tensor._wrap(self.data)
        t._meta, t._grad_fn, t._version = self.meta, node, self.counter
        return t


class CaptureState:
    """What an op's gradient rule reads: saved tensors, attributes, which inputs need grad.

    Attributes of the op call are readable as `ctx.<name>` (e.g. `ctx.dim`). `ctx.node` is
    the node being run; it is set only while the rule runs, so that node -> ctx -> node is
    never a reference cycle and a graph is freed by reference counting alone.
    """

    __slots__ = ("node", "_inputs", "_outputs", "attrs", "needs_input_grad", "aux")

    def __init__(self, attrs, needs_input_grad):
        self.node = None
        self.attrs = attrs
        self.needs_input_grad = needs_input_grad
        self._inputs = self._outputs = self.aux = None

    @property
    def input_shapes(self):
        """Shapes of the op's inputs at forward time."""
        return tuple(info[0] for info in self.node.input_infos)

    @property
    def inputs(self):
        """The op's inputs as saved at forward time (the op must declare save='inputs')."""
        return tuple(s.unpack(self.node) if s is not None else None for s in self._inputs)

    @property
    def outputs(self):
        """The op's outputs (the op must declare save='outputs')."""
        return tuple(s.unpack(self.node) for s in self._outputs)

    @property
    def out(self):
        """The op's single output."""
        return self._outputs[0].unpack(self.node)

    def __getattr__(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            where = self.node.name if self.node is not None else "capture state"
            raise AttributeError(f"{where}: no saved attribute {name!r}") from None


class FunctionNode(Node):
    """A node of the backward graph (the seed's GraphFunctionNode).

    `input_metas[i]` is the AutogradMeta the gradient for input i is added into (None when
    that input needs no grad); `next_nodes[i]` is the node that consumes it next.
    """

    __slots__ = ("name", "op", "ctx", "input_metas", "next_nodes", "output_metas",
                 "output_infos", "input_infos", "saved_something", "released", "__weakref__")

    def __init__(self, name, op, input_metas, next_nodes, input_infos):
        self.name = name
        self.op = op
        self.ctx = None
        self.input_metas = input_metas
        self.next_nodes = next_nodes
        self.input_infos = input_infos  # (shape, np dtype) per input, for un-broadcasting
        self.output_metas = ()
        self.output_infos = ()          # (shape, np dtype) per output, for zero grads
        self.saved_something = False
        self.released = False

    def backward_fn(self, out_grads):
        """Run the op's gradient rule: incoming output grads -> grads of the inputs."""
        ctx = self.ctx
        ctx.node = self
        try:
            return self.op.backward(ctx, *out_grads)
        finally:
            ctx.node = None

    def release(self):
        """Free saved tensors after a backward run without retain_graph."""
        ctx = self.ctx
        if ctx is not None:
            ctx._inputs = ctx._outputs = ctx.aux = None
        self.released = True

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
        return f"<{self.name} object at {id(self):#x}>"


class NodeName(str):
    """A str that can also be called: torch code calls `grad_fn.name()`, the seed reads
    `node.name`; both work. Made once per op, not per node."""

    __slots__ = ()

    def __call__(self):
        return str(self)


class AccumulateGrad(FunctionNode):
    """The accumulate_grad node of a leaf: its grad is written into the leaf's meta."""

    __slots__ = ()

    def __init__(self, meta):
        super().__init__(NodeName("accumulate_grad"), None, (), (), ())
        self.output_metas = (meta,)

    @property
    def variable_meta(self):
        return self.output_metas[0]
