"""flowgrad.utils._pytree against torch.utils._pytree: the leaves, the structure (counts,
round trip, equality of specs), tree_map over several trees, the *_only and all/any forms,
custom registered nodes, and the errors of mismatched trees."""
from collections import OrderedDict, defaultdict, deque, namedtuple

import pytest
import torch.utils._pytree as tp

import flowgrad.utils._pytree as fp

Point = namedtuple("Point", "x y")

TREES = {
    "leaf": 1,
    "none": None,
    "tuple": (1, 2.5, "s"),
    "nested": {"b": [1, (2, None)], "a": OrderedDict(y=3, x=Point(4, 5))},
    "deque_defaultdict": {"c": deque([6, 7], maxlen=3), "d": defaultdict(int, k=7, j=8)},
    "empty": ([], {}, ()),
    "deep": [[[[1]], [2, [3, (4,)]]]],
}


@pytest.mark.parametrize("name", list(TREES))
def test_flatten_and_unflatten_as_torch(name):
    tree = TREES[name]
    (ours, our_spec), (theirs, their_spec) = fp.tree_flatten(tree), tp.tree_flatten(tree)
    assert ours == theirs
    assert (our_spec.num_leaves, our_spec.num_nodes) == (their_spec.num_leaves,
                                                         their_spec.num_nodes)
    assert our_spec.is_leaf() == their_spec.is_leaf()
    rebuilt = fp.tree_unflatten([("leaf", x) for x in ours], our_spec)
    expected = tp.tree_unflatten([("leaf", x) for x in theirs], their_spec)
    assert rebuilt == expected and type(rebuilt) is type(expected)
    assert fp.tree_structure(tree) == our_spec
    assert fp.tree_leaves(tree) == tp.tree_leaves(tree)


def test_maps_as_torch():
    tree = TREES["nested"]
    for fn in (lambda x: (x, "seen"), str):
        assert fp.tree_map(fn, tree) == tp.tree_map(fn, tree)
    other = {"a": OrderedDict(x=Point(40, 50), y=30), "b": [10, (20, 0)]}  # (keys in another
    # order: mapped by key)
    add = lambda x, y: (x, y)  # noqa: E731
    assert fp.tree_map(add, tree, other) == tp.tree_map(add, tree, other)
    neg = lambda x: -x  # noqa: E731
    assert fp.tree_map_only(int, neg, (1, "a", 2.0, [3])) == \
        tp.tree_map_only(int, neg, (1, "a", 2.0, [3]))
    whole = lambda x: x == [2]  # noqa: E731 - a list taken as one leaf
    assert fp.tree_leaves([1, [2]], is_leaf=whole) == tp.tree_leaves([1, [2]], is_leaf=whole)
    assert fp.tree_map(str, [1, [2]], is_leaf=lambda x: isinstance(x, list) and x == [2]) == \
        tp.tree_map(str, [1, [2]], is_leaf=lambda x: isinstance(x, list) and x == [2])
    seen_f, seen_t = [], []
    fp.tree_map_(seen_f.append, tree)
    tp.tree_map_(seen_t.append, tree)
    assert seen_f == seen_t
    for module in (fp, tp):
        assert module.tree_all(lambda x: x is None or x > 0, tree)
        assert module.tree_any(lambda x: x == 5, tree)
        assert module.tree_all_only(int, lambda x: x < 10, (1, "zz", 3))
        assert not module.tree_any_only(str, lambda x: x == "a", (1, "zz"))


def test_registered_nodes_and_mismatches_as_torch():
    results = {}
    for module in (fp, tp):
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

            def __eq__(self, other):
                return type(other) is type(self) and (self.a, self.b) == (other.a, other.b)
        module.register_pytree_node(Pair, lambda p: ([p.a, p.b], None),
                                    lambda c, _: Pair(*c))
        with pytest.raises(ValueError):
            module.register_pytree_node(Pair, lambda p: ([], None), lambda c, _: Pair())
        leaves, spec = module.tree_flatten([Pair(1, [2, 3]), 4])
        mapped = module.tree_map(lambda x: x * 2, [Pair(1, [2, 3]), 4])
        results[module] = (leaves, spec.num_leaves, [mapped[0].a, mapped[0].b, mapped[1]])
        with pytest.raises(ValueError):
            module.tree_unflatten([1, 2], spec)
        with pytest.raises(ValueError):
            module.tree_map(lambda x, y: x, (1, 2), (1, 2, 3))
        with pytest.raises(ValueError):
            module.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})
    assert results[fp] == results[tp]
