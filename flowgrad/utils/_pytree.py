"""torch.utils._pytree: nested containers (tuples, lists, dicts, OrderedDicts, defaultdicts,
deques, namedtuples, and classes registered with `register_pytree_node`) taken apart into
their leaves and a `TreeSpec` that puts them back, and the maps over leaves built on that.

>>> from flowgrad.utils._pytree import tree_flatten, tree_map, tree_unflatten
>>> leaves, spec = tree_flatten({"w": [1, 2], "b": (3,)})
>>> leaves, spec.num_leaves
([1, 2, 3], 3)
>>> tree_unflatten([x * 10 for x in leaves], spec)
{'w': [10, 20], 'b': (30,)}
>>> tree_map(lambda x: -x, ([1], {"k": 2}))
([-1], {'k': -2})
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_is_leaf", "tree_flatten",
           "tree_unflatten", "tree_iter", "tree_leaves", "tree_structure", "tree_map",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any",
           "tree_all_only", "tree_any_only", "is_namedtuple", "is_namedtuple_class",
           "is_namedtuple_instance", "SUPPORTED_NODES"]

PyTree = Any
Context = Any


@dataclasses.dataclass(frozen=True)
class NodeDef:
    """How a node type comes apart: flatten(node) -> (children, context), and back."""

    type: type
    flatten_fn: Callable
    unflatten_fn: Callable


SUPPORTED_NODES: dict = {}


def register_pytree_node(cls, flatten_fn, unflatten_fn, *, serialized_type_name=None,
                         to_dumpable_context=None, from_dumpable_context=None,
                         flatten_with_keys_fn=None):
    """Make instances of `cls` nodes: `flatten_fn(node) -> (children, context)` and
    `unflatten_fn(children, context) -> node`.

    >>> from flowgrad.utils._pytree import register_pytree_node, tree_leaves
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda c, _: Pair(*c))
    >>> tree_leaves([Pair(1, 2), 3])
    [1, 2, 3]
    """
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn)


def is_namedtuple_class(cls):
    return isinstance(cls, type) and issubclass(cls, tuple) and \
        isinstance(getattr(cls, "_fields", None), tuple)


def is_namedtuple_instance(obj):
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj):
    """Whether obj is a namedtuple class or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


register_pytree_node(tuple, lambda t: (list(t), None), lambda c, _: tuple(c))
register_pytree_node(list, lambda t: (list(t), None), lambda c, _: list(c))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: dict(zip(keys, c)))
register_pytree_node(OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                     lambda c, keys: OrderedDict(zip(keys, c)))
register_pytree_node(defaultdict,
                     lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
                     lambda c, ctx: defaultdict(ctx[0], zip(ctx[1], c)))
register_pytree_node(deque, lambda d: (list(d), d.maxlen), lambda c, maxlen: deque(c, maxlen))
_NAMEDTUPLE = NodeDef(tuple, lambda t: (list(t), type(t)), lambda c, cls: cls(*c))


def _node_def(tree):
    node = SUPPORTED_NODES.get(type(tree))
    if node is None and is_namedtuple_instance(tree):
        return _NAMEDTUPLE
    return node


class TreeSpec:
    """A tree's structure: its node type, context (dict keys, namedtuple class, ...) and
    the specs of its children; a leaf's is `LeafSpec()`."""

    def __init__(self, type, context, children_specs):
        self.type, self.context, self.children_specs = type, context, list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)
        self.num_leaves = sum(c.num_leaves for c in self.children_specs)
        self.num_children = len(self.children_specs)

    def is_leaf(self):
        return False

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and type(other) is type(self) and \
            (self.type, self.context, self.children_specs) == \
            (other.type, other.context, other.children_specs)

    def __hash__(self):
        return hash((self.type, self.num_nodes, self.num_leaves))

    def __repr__(self):
        if self.is_leaf():
            return "*"
        name = "namedtuple" if self.type is _namedtuple_marker else self.type.__name__
        return f"TreeSpec({name}, {self.context!r}, {self.children_specs!r})"


class _namedtuple_marker:  # noqa: N801 - the type a namedtuple node's spec records
    pass


class LeafSpec(TreeSpec):
    def __init__(self):
        self.type, self.context, self.children_specs = None, None, []
        self.num_nodes, self.num_leaves, self.num_children = 1, 1, 0

    def is_leaf(self):
        return True


def tree_is_leaf(tree, is_leaf=None):
    """Whether `tree` is a leaf: no registered node type (or `is_leaf(tree)` says so)."""
    return (is_leaf is not None and is_leaf(tree)) or _node_def(tree) is None


def tree_flatten(tree, is_leaf=None):
    """(the leaves of `tree` in order, its TreeSpec)."""
    leaves = []

    def walk(node):
        if tree_is_leaf(node, is_leaf):
            leaves.append(node)
            return LeafSpec()
        nd = _node_def(node)
        children, context = nd.flatten_fn(node)
        kind = _namedtuple_marker if nd is _NAMEDTUPLE else nd.type
        return TreeSpec(kind, context, [walk(c) for c in children])
    return leaves, walk(tree)


def tree_unflatten(leaves, treespec):
    """The tree of `treespec` with `leaves` (as many as it has) in its leaves' places."""
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but "
                         f"the spec refers to a pytree that holds {treespec.num_leaves} items "
                         f"({treespec}).")
    it = iter(leaves)

    def build(spec):
        if spec.is_leaf():
            return next(it)
        children = [build(c) for c in spec.children_specs]
        if spec.type is _namedtuple_marker:
            return _NAMEDTUPLE.unflatten_fn(children, spec.context)
        return SUPPORTED_NODES[spec.type].unflatten_fn(children, spec.context)
    return build(treespec)


def tree_iter(tree, is_leaf=None):
    return iter(tree_flatten(tree, is_leaf)[0])


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(spec, tree, is_leaf):
    """tree's parts at spec's leaves (tree must have spec's structure down to them)."""
    if spec.is_leaf():
        return [tree]
    nd = _node_def(tree)
    kind = None if nd is None else _namedtuple_marker if nd is _NAMEDTUPLE else nd.type
    if kind is not spec.type:
        raise ValueError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    children, context = nd.flatten_fn(tree)
    if len(children) != spec.num_children or (
            spec.type in (dict, OrderedDict) and set(context) != set(spec.context)):
        raise ValueError(f"Node arity or keys mismatch: expected {spec.context} with "
                         f"{spec.num_children} children, got {context}")
    if spec.type in (dict, OrderedDict):  # the other tree's values in this one's key order
        children = [tree[k] for k in spec.context]
    out = []
    for child_spec, child in zip(spec.children_specs, children):
        out.extend(_flatten_up_to(child_spec, child, is_leaf))
    return out


def tree_map(func, tree, *rests, is_leaf=None):
    """`tree` with func(leaf, *the leaves at the same place in `rests`) at each leaf."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func, tree, *rests, is_leaf=None):
    """func on each leaf (for its side effects, in place); returns `tree`."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r, is_leaf) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _only(types, func):
    def apply(x):
        return func(x) if isinstance(x, types) else x
    return apply


def tree_map_only(type_or_types, func, tree, is_leaf=None):
    """tree_map of func over the leaves of the given type(s); the others stay."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func, tree, is_leaf=None):
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred, tree, is_leaf=None):
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred, tree, is_leaf=None):
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred, tree, is_leaf=None):
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred, tree, is_leaf=None):
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))
