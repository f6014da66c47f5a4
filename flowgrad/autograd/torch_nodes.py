"""torch's face of backward nodes: `type(y.grad_fn).__name__`, `name()`, `next_functions`
and the `_saved_*` attributes, as torch.autograd shows them (MulBackward0, SumBackward1,
AccumulateGrad, ...).

Nothing here runs while ops are recorded: a node is recorded as a plain FunctionNode and
becomes an instance of its torch-named class (a subclass of its own class, `__slots__ = ()`,
made once per name) only when user code reaches it, through `Tensor.grad_fn`,
`next_functions` or `get_gradient_edge` (`named`). The names, edges and saved attributes
come from the op layer's table (`ops/node_names.py` fills NAMES, EDGES and SAVED).

>>> import flowgrad as flow
>>> x = flow.ones(2, 3, requires_grad=True)
>>> g = x.sum(1).grad_fn
>>> type(g).__name__, g.name(), g._saved_dim, g._saved_keepdim
('SumBackward1', 'SumBackward1', (1,), False)
"""
from __future__ import annotations

import re

from . import graph as _graph
from . import node_hooks as _node_hooks
from .node import AccumulateGrad, FunctionNode, InertNode, NodeName
from .node_hooks import HookedNode

# op name -> torch's node name, or a function of the node giving it (an op whose torch
# counterpart has overloads: sum() SumBackward0, sum(dim) SumBackward1); ops not listed are
# named by torch's rule for its derivatives (exp -> ExpBackward0, log1p -> Log1PBackward0)
NAMES: dict = {}
# op name -> the inputs torch's node has edges for, in its order (or a function of the node
# giving them): an index or condition input torch does not count is left out, None adds
# torch's (None, 0) for a scalar operand or an optional input not given
EDGES: dict = {}
# torch name -> {attribute: function(node) -> value} for `_saved_*` (ops/node_names.py)
SAVED: dict = {}
# torch's nodes written in C++ by hand answer name() with their namespace
_CALLED = {"CopySlices": "torch::autograd::CopySlices"}

_PLAIN = frozenset((FunctionNode, InertNode, HookedNode))
_CLASSES: dict = {}  # (behaviour class, torch name) -> the named class
_DEFAULT: dict = {}  # op name -> torch's name by the default rule (made once per op)
_PART = re.compile(r"[a-z]+|[0-9]+|[A-Z][a-z]*")


def torch_style(op_name: str) -> str:
    """torch's node name for a derivative named `op_name` (torch capitalises each part of
    the name, a letter after a digit too: log1p -> Log1PBackward0, i0e -> I0EBackward0)."""
    name = _DEFAULT.get(op_name)
    if name is None:
        parts = [p for chunk in op_name.split("_") for p in _PART.findall(chunk)]
        name = _DEFAULT[op_name] = "".join(p[:1].upper() + p[1:] for p in parts) + \
            "Backward0"
    return name


def torch_name(node) -> str:
    """The name torch gives the node that an op like `node`'s records."""
    op = node.op
    if op is None or not hasattr(op, "name"):  # a custom Function's node: <Class>Backward
        return str(op.node_name) if op is not None else type(node).__name__
    entry = NAMES.get(op.name)
    if entry is None:
        return torch_style(op.name)
    return entry if entry.__class__ is str else entry(node)


def named(node):
    """`node`, its class switched to its torch-named one if it is still a plain node."""
    cls = node.__class__
    if cls in _PLAIN:
        node.__class__ = named_class(cls, torch_name(node))
    return node


def named_class(behaviour, name):
    """The class named `name` whose instances behave as `behaviour`'s (made once)."""
    cls = _CLASSES.get((behaviour, name))
    if cls is None:
        cls = _CLASSES[(behaviour, name)] = type(name, (_TorchNamed, behaviour), {
            "__slots__": (), "__module__": "flowgrad.autograd.graph", "_saved": None})
    return cls


def hooked_variant(cls):
    """The class a node of class `cls` takes when it gets hooks (or anomaly checks)."""
    return HookedNode if cls in _PLAIN else named_class(HookedNode, cls.__name__)


_NAME_CACHE: dict = {}


class _TorchNamed:
    """Mixed into each named class: torch's name(), repr and `_saved_*` attributes."""

    __slots__ = ()

    @property
    def name(self):
        """`node.name` stays the seed's name (`sum_backward`, which flowgrad's messages
        use); calling it, as torch code does, gives torch's."""
        own = self.op.node_name if self.op is not None else type(self).__name__
        key = (own, type(self).__name__)
        name = _NAME_CACHE.get(key)
        if name is None:
            name = _NAME_CACHE[key] = NodeName(own)
            name.torch = _CALLED.get(type(self).__name__, type(self).__name__)
        return name

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    @property
    def next_functions(self):
        """torch's ((node, input_nr), ...): one pair per input torch's node has an edge for
        ((None, 0) where it needs no grad), each node torch-named."""
        pairs = self.next_functions_pairs()
        keep = torch_edges(self)
        if keep is not None:
            pairs = tuple((None, 0) if i is None else pairs[i] for i in keep
                          if i is None or i < len(pairs))
        return tuple((None if n is None else named(n), k) for n, k in pairs)

    def __getattr__(self, attr):
        if attr.startswith(("_saved_", "_raw_saved_")):
            table = SAVED.get(type(self).__name__)
            raw = attr.startswith("_raw_")
            get = table.get("_saved_" + attr[len("_raw_saved_"):] if raw else attr) \
                if table else None
            if get is not None:
                value = get(self)
                return RawSaved(value) if raw else value
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")


class RawSaved:
    """What `_raw_saved_<name>` gives: torch's SavedTensor view of one saved tensor."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor):
        self._tensor = tensor

    @property
    def data(self):
        return None if self._tensor is None else self._tensor.detach()

    def unpack(self):
        return self._tensor

    def register_hooks(self, pack_hook, unpack_hook):
        raise NotImplementedError("SavedTensor.register_hooks: flowgrad saves tensors "
                                  "through torch.autograd.graph.saved_tensors_hooks only")


def _accumulate_name():
    name = NodeName("accumulate_grad")
    name.torch = "torch::autograd::AccumulateGrad"
    return name


AccumulateGrad.name = _accumulate_name()
_graph._named = named  # get_gradient_edge hands out named nodes
_node_hooks.hooked_variant = hooked_variant


def torch_edges(node):
    """Which of node's inputs torch's node has its edges for (EDGES), or None."""
    keep = EDGES.get(getattr(node.op, "name", None))
    return keep(node) if callable(keep) else keep


_node_hooks.torch_edges = torch_edges
