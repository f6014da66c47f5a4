"""Gradient hooks against torch: what a tensor, node or module hook may return (the same
shape, dtype and device, or torch raises), hooks removed while backward runs, retained grads,
and module full backward hooks under double backward. Snippets run unchanged by torch and by
flowgrad through the programs' import shim (the harness of test_torch_function_vs_torch)."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

import flowgrad as flow

_A = "a = torch.ones(3, dtype=torch.float64, requires_grad=True)\n"

CASES = {
    "tensor_hook_shrinks_a_nonleaf_grad": _A + """
b = a.exp(); b.register_hook(lambda g: g[:1]); b.sum().backward()
""",
    "tensor_hook_shrinks_a_leaf_grad": _A + """
a.register_hook(lambda g: g[:1]); (a * 2).sum().backward()
""",
    "tensor_hook_returns_an_expandable_grad": _A + """
b = a.exp(); b.register_hook(lambda g: g.sum().reshape(1)); b.sum().backward()
""",
    "tensor_hook_returns_a_broadcast_grad": _A + """
b = a.exp(); b.register_hook(lambda g: g.expand(2, 3)); b.sum().backward()
""",
    "tensor_hook_changes_the_dtype": _A + """
b = a.exp(); b.register_hook(lambda g: g.float()); b.sum().backward()
""",
    "leaf_hook_changes_the_dtype": _A + """
a.register_hook(lambda g: g.float()); (a * 2).sum().backward()
""",
    "tensor_hook_returns_a_number": _A + """
b = a.exp(); b.register_hook(lambda g: 5); b.sum().backward()
""",
    "tensor_hook_in_autograd_grad": _A + """
b = a.exp(); b.register_hook(lambda g: g[:1]); torch.autograd.grad(b.sum(), b)
""",
    "node_prehook_changes_the_shape": _A + """
b = a.exp(); b.grad_fn.register_prehook(lambda go: (go[0][:1],)); b.sum().backward()
""",
    "node_prehook_changes_the_dtype": _A + """
b = a.exp(); b.grad_fn.register_prehook(lambda go: (go[0].float(),)); b.sum().backward()
""",
    "node_hook_changes_the_dtype": _A + """
b = a.exp(); b.grad_fn.register_hook(lambda gi, go: (gi[0].float(),)); b.sum().backward()
""",
    "module_hook_returns_an_expandable_grad": _A + """
m = torch.nn.Tanh(); m.register_full_backward_hook(lambda mod, gi, go: (gi[0].sum().reshape(1),))
m(a).sum().backward()
""",
    "module_prehook_changes_the_dtype": _A + """
m = torch.nn.Tanh(); m.register_full_backward_pre_hook(lambda mod, go: (go[0].float(),))
m(a).sum().backward()
""",
    "hooks_returning_same_shaped_grads_still_apply": _A + """
b = a.exp(); b.register_hook(lambda g: torch.ones(6, dtype=torch.float64)[::2] * 3)
b.grad_fn.register_prehook(lambda go: (go[0] * 2,))
b.sum().backward()
out = [a.grad]
""",
    "a_hook_removing_a_later_one_still_runs_it_this_pass": _A + """
b = a * 2; hs = []
def h1(g):
    hs[1].remove(); return g
hs.append(b.register_hook(h1)); hs.append(b.register_hook(lambda g: g * 100))
b.sum().backward(retain_graph=True); first = a.grad.clone()
b.sum().backward()
out = [first, a.grad]
""",
    "module_hook_change_counts_once_in_double_backward": """
m = torch.nn.Tanh(); m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
a = torch.tensor([.5, -1.], dtype=torch.float64, requires_grad=True)
g, = torch.autograd.grad(m(a).sum(), a, create_graph=True); g.sum().backward()
out = [g, a.grad]
""",
    "module_hooks_run_once_per_retained_backward": """
m = torch.nn.Tanh(); n = []
m.register_full_backward_hook(lambda mod, gi, go: n.append(1))
a = torch.tensor([.5, -1.], dtype=torch.float64, requires_grad=True)
y = m(a); y.sum().backward(retain_graph=True); y.sum().backward()
out = [len(n), a.grad]
""",
    "module_hook_none_entries": """
class Two(torch.nn.Module):
    def forward(self, x, y, k):
        return x * y, x + y, k, (x * 3).detach()
log = []
def show(gs):
    return [None if g is None else g for g in gs]
m = Two()
m.register_full_backward_hook(lambda mod, gi, go: log.append([show(gi), show(go)]))
m.register_full_backward_pre_hook(lambda mod, go: log.append(show(go)))
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
m(a, torch.full((2,), 3., dtype=torch.float64), 7)[0].sum().backward()
out = [log, a.grad]
""",
    "module_hooks_skip_a_list_output_and_keep_a_namedtuple": """
import warnings
from collections import namedtuple
P = namedtuple("P", "u v")
class L(torch.nn.Module):
    def forward(self, x): return [x * 2]
class N(torch.nn.Module):
    def forward(self, x): return P(x * 2, x * 3)
res = []
for M in (L, N):
    m = M(); log = []
    m.register_full_backward_hook(lambda mod, gi, go: log.append(len(go)))
    a = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = m(a)
    r[0].sum().backward()
    res.append([type(r).__name__, log, a.grad, len(w)])
out = res
""",
    "a_retained_grad_read_before_is_not_added_to": _A + """
b = a * 1; b.retain_grad()
b.sum().backward(retain_graph=True); g0 = b.grad
b.sum().backward(retain_graph=True)
c = a * 1
c.sum().backward(retain_graph=True, inputs=[c]); c0 = c.grad
c.sum().backward(inputs=[c])
(a * 2).sum().backward(); a0 = a.grad
(a * 2).sum().backward()
out = [g0, b.grad, g0 is b.grad, c0, c.grad, a0, a0 is a.grad]
""",
    "backward_into_an_expanded_grad": _A + """
a.grad = torch.ones(1, dtype=torch.float64).expand(3)
(a * 2).sum().backward()
""",
    "inplace_relu_in_a_hooked_module": _A + """
m = torch.nn.ReLU(inplace=True)
m.register_full_backward_hook(lambda mod, gi, go: None)
m(a * 1).sum().backward()
""",
    "inplace_on_a_hooked_modules_output": _A + """
lin = torch.nn.Linear(3, 2).double(); lin.register_full_backward_hook(lambda mod, gi, go: None)
y = lin(a); y.relu_()
""",
    "inplace_relu_after_a_hooked_layer": _A + """
m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(inplace=True), torch.nn.Linear(3, 1))
m = m.double(); m[0].register_full_backward_hook(lambda mod, gi, go: None)
m(a).sum().backward()
""",
    "hooked_module_outputs_written_under_no_grad_or_cloned": _A + """
m = torch.nn.ReLU(inplace=True); log = []
m.register_full_backward_hook(lambda mod, gi, go: log.append(1))
with torch.no_grad():
    r = m(a * -1)
lin = torch.nn.Linear(3, 2).double()
lin.register_full_backward_pre_hook(lambda mod, go: log.append(2))
y = lin(a); z = y.clone(); z.relu_(); z.sum().backward()
out = [r, log, a.grad is not None]
""",
    "custom_function_input_returned_as_is_written_in_place": _A + """
class I(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x
    @staticmethod
    def backward(ctx, g): return g
res = []
for f in (lambda y: y.mul_(2), lambda y: y[1:].mul_(2), lambda y: y.clone().mul_(2)):
    try:
        f(I.apply(a * 1)); res.append("ok")
    except RuntimeError:
        res.append("RuntimeError")
out = res
""",
    "multi_grad_hook_over_leaves_under_autograd_grad": """
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
b = torch.ones(2, dtype=torch.float64, requires_grad=True)
res = []
def record(gs):
    res.append([g is None for g in gs])
torch.autograd.graph.register_multi_grad_hook((a, b), record)
for f in (lambda: torch.autograd.grad((a * b).sum(), [a]),
          lambda: torch.autograd.grad((a * b).sum(), [a, b]),
          lambda: (a * b).sum().backward(inputs=[a]), lambda: (a * b).sum().backward()):
    try:
        f(); res.append("ok")
    except RuntimeError:
        res.append("RuntimeError")
c = a * 1; d = b * 1; res.append("nonleaf")
torch.autograd.graph.register_multi_grad_hook((c, d), record)
torch.autograd.grad((c * d).sum(), [c])
out = res
""",
    "a_target_hook_raising_in_autograd_grad_leaves_no_partial_grads": _A + """
b = torch.ones(3, dtype=torch.float64, requires_grad=True)
def boom(g):
    raise ValueError("boom")
h = a.register_hook(boom)
try:
    torch.autograd.grad((a * b).sum(), [a, b])
except ValueError:
    pass
h.remove()
out = list(torch.autograd.grad((a * b * 3).sum(), [a, b]))
""",
    "node_prehook_returning_none_grads": _A + """
b = a.exp(); b.grad_fn.register_prehook(lambda go: (None,)); b.sum().backward()
res = [a.grad]
x, y = (a * 2).split([1, 2])
x.grad_fn.register_prehook(lambda go: tuple(None if i == 0 else g for i, g in enumerate(go)))
(x.sum() + y.sum()).backward(); res.append(a.grad)
a.grad = None; n = []
b = a.exp(); b.grad_fn.register_prehook(lambda go: (None,))
b.grad_fn.register_hook(lambda gi, go: n.append([g is None for g in gi + go]))
(b.sum() + (a * 3).sum()).backward()
out = res + [a.grad, n]
""",
}


@pytest.mark.parametrize("name", list(CASES))
def test_hook_case_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])


def test_a_hook_of_the_wrong_shape_names_both_shapes_and_leaves_grad_as_it_was():
    a = flow.ones(3, requires_grad=True)
    (a * 2).sum().backward()

    def shrink(g):
        return g[:1]
    a.register_hook(shrink)
    with pytest.raises(RuntimeError, match=r"hook 'shrink' has changed the size.*\(3,\).*\(1,\)"):
        (a * 2).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
