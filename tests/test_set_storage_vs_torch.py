"""Tensor.set_ (and the legacy out-of-place resize_as) against torch: snippets run unchanged
by torch and by flowgrad through the programs' import shim (the harness of
test_torch_function_vs_torch): results, shared writes, storage offsets, raise/no-raise."""
import pytest
import torch
from test_torch_function_vs_torch import assert_snippet_matches_torch

import flowgrad as flow

CASES = {
    "set_to_a_tensor_shares_its_elements": """
a = torch.arange(6.)
t = torch.zeros(2)
r = t.set_(a)
a[0] = 100.
t[5] = -1.
out = [r is t, t, a, t.data_ptr() == a.data_ptr(), t.is_set_to(a), t._version, a._version]
""",
    "set_to_nothing": """
t = torch.zeros(2, 3)
t.set_()
out = [t, list(t.shape), t.numel(), str(t.dtype).split(".")[-1]]
""",
    "set_to_a_storage_with_offset_size_stride": """
a = torch.arange(6.)
t = torch.zeros(2)
t.set_(a.untyped_storage(), 2, (2, 2), (1, 2))
a[3] = 30.
out = [t, t.stride(), t.storage_offset(), t.is_contiguous()]
""",
    "set_to_a_tensor_with_offset_size_stride": """
a = torch.arange(6.)
t = torch.zeros(2).set_(a, 1, (2,), (2,))
u = torch.zeros(1).set_(a, 4, (2,))
out = [t, t.storage_offset(), u, u.stride()]
""",
    "set_to_a_view_keeps_its_offset": """
b = torch.arange(4.)
q = torch.zeros(2)
q.set_(b[1:3])
b[1] = -1.
out = [q, q.storage_offset()]
""",
    # an as_strided view's storage is its base's whole storage (a copy of its elements was
    # taken: a write to the base no longer showed, at the wrong offsets)
    "set_to_the_storage_of_an_as_strided_view": """
a = torch.arange(6.)
s = a.as_strided((3,), (2,))
u = torch.zeros(1).set_(s.untyped_storage(), 3, (2,))
a[4] = -1.
out = [u, s.untyped_storage().nbytes(), u.storage_offset()]
""",
    "set_to_a_non_contiguous_tensor_with_a_size_raises": """
torch.zeros(1).set_(torch.arange(6.).as_strided((3,), (2,)), 1, (2,))
""",
    "set_to_another_dtype_raises": "torch.zeros(2, dtype=torch.int64).set_(torch.arange(6.))",
    "set_an_offset_without_a_size_raises": "torch.zeros(2).set_(torch.arange(6.), 3)",
    "set_with_no_source_but_an_offset_raises": "torch.zeros(2).set_(None, 1)",
    "set_on_a_leaf_that_requires_grad_raises": """
x = torch.ones(2, requires_grad=True)
x.set_(torch.arange(3.))
""",
    "set_under_no_grad_then_differentiate": """
with torch.no_grad():
    x = torch.ones(2, requires_grad=True)
    x.set_(torch.arange(2.))
(x * x).sum().backward()
out = [x, x.requires_grad, x.is_leaf, x.grad]
""",
    "set_through_data_leaves_the_tensor": """
x = torch.ones(2, requires_grad=True)
x.data.set_(torch.arange(3.))
out = [x, list(x.shape)]
""",
    "set_a_module_parameter": """
m = nn.Linear(3, 2)
with torch.no_grad():
    m.weight.set_(torch.ones(2, 3))
    m.bias.zero_()
y = m(torch.arange(3.).reshape(1, 3))
y.sum().backward()
out = [y, type(m.weight).__name__, m.weight.grad]
""",
    # a view made before its base's set_ (or `.data =`) keeps the old memory, as torch's: a
    # recorded write through it went through the base to the base's new elements
    "a_view_made_before_set_keeps_the_old_memory_in_a_recorded_write": """
x = torch.ones(4, requires_grad=True)
base = torch.zeros(4)
v = base[:2]
base.set_(torch.arange(6.))
v.mul_(x[:2])
v.sum().backward()
out = [v, base, x.grad, v.storage_offset()]
""",
    "a_view_made_before_data_assignment_keeps_the_old_memory": """
x = torch.ones(2, requires_grad=True)
base = torch.zeros(2, 2)
v, w = base[0], base[1]
base.data = torch.arange(4.).reshape(2, 2)
v.copy_(x * 2)
(v * v).sum().backward()
out = [v, w, base, x.grad]
""",
    "setitem_on_a_view_made_before_set_": """
x = torch.ones(2, requires_grad=True)
base = torch.zeros(4)
v = base[:2]
base.set_(torch.arange(6.))
v[0] = x[0] * 3
v.sum().backward()
out = [v, base, x.grad]
""",
    # torch regenerates such a view by as_strided at its place in its own storage, over the
    # base's new history (elements the view does not hold: torch's semantics, kept)
    "a_view_made_before_set_read_after_the_base_is_written": """
x = torch.ones(6, requires_grad=True)
base = torch.zeros(4)
v = base.view(2, 2)
u = base[1:3]
base.set_(torch.arange(6.))
base.mul_(x)
(v * 2).sum().backward()
g = x.grad.clone()
x.grad = None
(u * u).sum().backward()
out = [v, u, g, x.grad, u.storage_offset()]
""",
    "legacy_resize_as": """
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    x = torch.arange(4., requires_grad=True)
    y = x.resize_as(torch.ones(2, 2))
y.pow(2).sum().backward()
out = [y, x.grad]
""",
    "legacy_resize_as_to_another_count_raises": """
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    torch.ones(2, 2).resize_as(torch.ones(3))
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_set_case_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])


def test_set_beyond_the_storage_is_refused_with_sizes():
    """torch grows the storage; flowgrad refuses, naming the sizes, and leaves the tensor."""
    t = flow.zeros(2)
    with pytest.raises(RuntimeError, match=r"size \[10\].*needs 40 bytes.*has 24"):
        t.set_(flow.arange(6.0), 0, (10,))
    assert t.tolist() == [0.0, 0.0]


def test_a_recorded_write_through_a_view_whose_base_moved_and_requires_grad_raises():
    """torch records such a write into the base's graph at the view's old offsets, where other
    elements now are; flowgrad raises, naming what to do, and writes nothing."""
    x = flow.ones(4, requires_grad=True)
    base = flow.zeros(4)
    view = base[:2]
    base.set_(flow.arange(4.0))
    base.mul_(x)
    with pytest.raises(RuntimeError, match=r"add_: .*base was given other memory.*clone"):
        view.add_(x[:2])
    assert view.tolist() == [0.0, 0.0] and base.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_set_refuses_where_the_gradient_would_not_describe_the_tensor():
    """Where torch lets no_grad code set_ a tensor whose autograd history then describes
    other elements (a result, a view of a tensor that requires grad), flowgrad raises, naming
    what to do, and leaves the tensor as it was."""
    x = flow.ones(3, requires_grad=True)
    y = x * 2
    with flow.no_grad():
        view = x[1:]  # (made without grad: no history of its own)
        with pytest.raises(RuntimeError, match="autograd history.*detach"):
            y.set_(flow.zeros(3))
        with pytest.raises(RuntimeError, match="view of a tensor that requires grad"):
            view.set_(flow.zeros(2))
        x.set_(flow.zeros(3))  # the same shape: torch's parameter swap
    assert y.tolist() == [2.0, 2.0, 2.0] and view.tolist() == [1.0, 1.0]
    assert x.tolist() == [0.0, 0.0, 0.0] and x.requires_grad and x.is_leaf


def _leaf_of_a_new_shape(m):
    got = []
    for step in ("new graph", "graph before", "graph before, 2-d", "grad before"):
        x = m.ones(1, 2, dtype=m.float64, requires_grad=True)
        try:
            y = x * 3
            if step == "grad before":
                y.sum().backward()
            with m.no_grad():
                x.set_(m.arange(6.0, dtype=m.float64).view(3, 2) if "2-d" in step
                       else m.arange(3.0, dtype=m.float64))
            (y if "graph before" in step else x * x).sum().backward()
            got.append((tuple(x.shape), x.is_leaf, x.requires_grad, x.grad.tolist()))
        except RuntimeError:
            got.append("raised")
    return got


def test_set_gives_a_leaf_that_requires_grad_a_new_shape_under_no_grad_as_torch():
    """torch's leaf takes the new shape, a later graph's gradient too, and a graph built
    before hands it its old-shaped gradient; flowgrad refused (RuntimeError)."""
    assert _leaf_of_a_new_shape(flow) == _leaf_of_a_new_shape(torch)
