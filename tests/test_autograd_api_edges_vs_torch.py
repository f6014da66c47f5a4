"""Edges of the autograd API against torch (checkpoint's saved arguments, autograd.grad's
inputs, the functional Jacobians, grad-mode decorators, forward AD): snippets run unchanged
by torch and by flowgrad through the programs' import shim (the harness of
test_torch_function_vs_torch): results, raise/no-raise."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

CASES = {
    # the argument saved at the call was written in place by the function: the version
    # error, not a gradient recomputed from the written values
    "checkpoint_of_a_function_writing_its_input": """
from torch.utils.checkpoint import checkpoint
def g(x):
    x.mul_(2)
    return x.sin()
a = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
out = []
for reentrant in (False, True):
    try:
        checkpoint(g, a * 1, use_reentrant=reentrant).sum().backward()
        out.append(a.grad)
    except RuntimeError as e:
        out.append(["modified by an in" in str(e), "leaf" in str(e)])
""",
    "checkpoint_argument_written_after_the_call": """
from torch.utils.checkpoint import checkpoint
a = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
c = torch.ones(2, dtype=torch.float64)
y = checkpoint(lambda x, c: (x * 2).sin() * c.sum(), a, c, use_reentrant=False)
c.add_(1)
try:
    y.sum().backward()
    out = [a.grad]
except RuntimeError as e:
    out = ["modified by an in" in str(e)]
""",
    "checkpoint_arguments_go_through_outer_saved_tensor_hooks": """
from torch.autograd.graph import saved_tensors_hooks
from torch.utils.checkpoint import checkpoint
a = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
packed, unpacked = [], []
def pack(t):
    packed.append(list(t.shape))
    return t * 1
def unpack(t):
    unpacked.append(list(t.shape))
    return t
with saved_tensors_hooks(pack, unpack):
    y = checkpoint(lambda x, w, n, k=None: (x.sin() * x * w).sum() * n, a,
                   torch.ones(1, dtype=torch.float64), 3, k=torch.ones(3),
                   use_reentrant=False)
n_forward = len(packed)
y.backward()
with torch.no_grad(), saved_tensors_hooks(pack, unpack):
    checkpoint(lambda x: (x.sin() * x).sum(), a, use_reentrant=False)
out = [n_forward, packed, unpacked, a.grad]
""",
    "checkpoint_under_no_grad_enters_no_context": """
import contextlib
from torch.utils.checkpoint import checkpoint
calls = []
@contextlib.contextmanager
def forward_context():
    calls.append("in"); yield; calls.append("out")
x = torch.ones(2, requires_grad=True)
with torch.no_grad():
    y = checkpoint(lambda t: t * 2, x, use_reentrant=False,
                   context_fn=lambda: (forward_context(), contextlib.nullcontext()))
z = checkpoint(lambda t: t * 3, x, use_reentrant=False,
               context_fn=lambda: (forward_context(), contextlib.nullcontext()))
out = [" ".join(calls), y, y.requires_grad, z]
""",
    "checkpoint_of_an_inference_tensor": """
from torch.utils.checkpoint import checkpoint
with torch.inference_mode():
    t = torch.ones(2)
a = torch.ones(2, requires_grad=True)
try:
    checkpoint(lambda x: (x.sin() * a).sum(), t, use_reentrant=False).backward()
    out = [a.grad]
except RuntimeError as e:
    out = ["Inference tensors cannot be saved" in str(e)]
""",
}


CASES.update({
    # an input passed twice gets its gradient twice, as torch's
    "grad_of_an_input_passed_twice": """
a = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
b = a.exp()
out = [torch.autograd.grad((a * a).sum(), [a, a]),
       [g.requires_grad for g in torch.autograd.grad((a * a).sum(), (a, a), create_graph=True)],
       torch.autograd.grad((b * a).sum(), [b, a, b]),
       torch.autograd.grad((a * 2).sum(), [a, b, b], allow_unused=True)]
""",
    # GradientEdges as inputs and outputs: the gradient flowing into the edge
    "grad_through_gradient_edges": """
from torch.autograd.graph import get_gradient_edge
a = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
b = a.exp()
x, y = (a * 2).split(1)
out = [torch.autograd.grad((b * 2).sum(), get_gradient_edge(b)),
       torch.autograd.grad((a * 3).sum(), [get_gradient_edge(a), a]),
       torch.autograd.grad((y * 5).sum(), [get_gradient_edge(y), get_gradient_edge(x)],
                           allow_unused=True),
       torch.autograd.grad(get_gradient_edge(b), a, torch.ones(2, dtype=torch.float64))]
try:
    torch.autograd.grad((a * 2).sum(), [get_gradient_edge(b)])
except RuntimeError:
    out.append("unused edge raises")
try:
    out.append(torch.autograd.grad((y * 5).sum(), [get_gradient_edge(y)],
                                   materialize_grads=True))
    torch.autograd.grad((y * 5).sum(), [get_gradient_edge(x)], materialize_grads=True)
except RuntimeError:
    out.append("materialize_grads with an unused edge raises")
""",
    # an input that gets no gradient in a vmapped backward: a zero block (jacobian,
    # hessian), None (is_grads_batched with allow_unused), the error without it
    "vectorized_jacobians_with_an_unused_input": """
AF = torch.autograd.functional
x = torch.tensor([1., 2.], dtype=torch.float64)
a = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
b = torch.ones(2, dtype=torch.float64, requires_grad=True)
go = torch.ones(2, 2, dtype=torch.float64)
out = [AF.jacobian(lambda a, b: a * 2, (x, x), vectorize=True),
       AF.jacobian(lambda a, b: (a * 2, a.sum()), (x, x), vectorize=True),
       AF.hessian(lambda a, b: (a ** 3).sum(), (x, x), vectorize=True),
       torch.autograd.grad(a.exp(), [a, b], go, is_grads_batched=True, allow_unused=True),
       torch.autograd.grad(a.exp(), [b], go, is_grads_batched=True, allow_unused=True)]
try:
    torch.autograd.grad(a.exp(), [a, b], go, is_grads_batched=True)
except RuntimeError:
    out.append("unused raises")
""",
    # torch's forward-mode jacobian of tuple inputs hands its blocks back in lists
    "forward_mode_jacobian_containers": """
AF = torch.autograd.functional
x = torch.tensor([1., 2.], dtype=torch.float64)
out = []
for f, inp in [(lambda a, b: a * 2, (x, x)), (lambda a, b: (a * 2, b), (x, x)),
               (lambda a: a * 2, x), (lambda a: (a * 2, a), x), (lambda a: (a * 2, a), (x,))]:
    r = AF.jacobian(f, inp, vectorize=True, strategy="forward-mode")
    out.append([type(r).__name__, r])
    if isinstance(r, (tuple, list)):
        out.append([type(t).__name__ for t in r])
""",
    # a decorated generator runs each step in the decorator's mode
    "inference_mode_decorating_a_generator": """
@torch.inference_mode()
def ig():
    x = yield torch.is_inference_mode_enabled()
    yield [x, torch.is_inference_mode_enabled(), torch.is_grad_enabled(),
           (torch.ones(1) * 2).is_inference()]
g = ig()
out = [next(g), g.send(5), torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
@torch.inference_mode(False)
def ig2():
    yield [torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
with torch.inference_mode():
    out += [list(ig2()), torch.is_inference_mode_enabled()]
@torch.inference_mode
def ig3():
    yield torch.is_inference_mode_enabled()
    return 7
def outer():
    r = yield from ig3()
    yield r
out.append(list(outer()))
""",
    # one forward-AD level at a time, as torch's; func.jvp nests inside func.jvp only
    "nested_forward_ad_levels": """
import torch.autograd.forward_ad as fwAD
x = torch.tensor([1., 2.], dtype=torch.float64)
out = []
def attempt(f):
    try:
        out.append(f())
    except RuntimeError as e:
        out.append("Nested forward mode AD is not supported" in str(e))
def nested():
    with fwAD.dual_level():
        with fwAD.dual_level():
            return "entered"
def dual_in_jvp(y):
    with fwAD.dual_level():
        return fwAD.unpack_dual(fwAD.make_dual(y, torch.ones_like(y)).sin()).tangent
def jvp_in_dual():
    with fwAD.dual_level():
        return torch.func.jvp(torch.sin, (x,), (x,))
attempt(nested)
attempt(jvp_in_dual)
attempt(lambda: torch.func.jvp(dual_in_jvp, (x,), (x,)))
attempt(lambda: torch.func.jvp(lambda y: torch.func.jvp(torch.sin, (y,), (y,))[1], (x,), (x,)))
with fwAD.dual_level():
    out.append(fwAD.unpack_dual(fwAD.make_dual(x, x).sin()).tangent)
""",
    # make_dual keeps a tangent of another floating dtype (ops' tangents take their outputs'
    # dtype) and copies one laid out otherwise than the primal to the primal's strides
    "make_dual_tangent_dtype_and_layout": """
import torch.autograd.forward_ad as fwAD
p = torch.tensor([0.5, 1.0], dtype=torch.float64)
out = []
with fwAD.dual_level():
    d = fwAD.make_dual(p, torch.tensor([1., 2.]))
    out += [fwAD.unpack_dual(d).tangent, fwAD.unpack_dual(d * 3).tangent,
            fwAD.unpack_dual(d.sin()).tangent]
    P, T = torch.ones(2, 3), torch.arange(6.).reshape(3, 2).t()
    t = fwAD.unpack_dual(fwAD.make_dual(P, T)).tangent
    out += [list(t.stride()), t, t.data_ptr() == T.data_ptr()]
    T2 = torch.arange(6.).reshape(2, 3)
    t2 = fwAD.unpack_dual(fwAD.make_dual(P, T2)).tangent
    out.append(t2.data_ptr() == T2.data_ptr())
    t3 = fwAD.unpack_dual(fwAD.make_dual(torch.ones(3, 2).t(), T2)).tangent
    out += [list(t3.stride()), t3]
    try:
        fwAD.make_dual(P, torch.ones(2, 3, dtype=torch.int64))
    except ValueError:
        out.append("integer tangent refused")
r = torch.func.jvp(torch.sin, (p,), (torch.ones(2),))
out.append(r)
""",
    # torch.func differentiates inference tensors (inputs or captured) through normal
    # tensors wrapping them; plain autograd still refuses to save one
    "func_transforms_of_inference_tensors": """
with torch.inference_mode():
    t = torch.tensor([1., 2.], dtype=torch.float64)
one = torch.ones(2, dtype=torch.float64)
g = torch.func.grad(lambda x: (x * x).sum())(t)
out = [g, g.is_inference(), torch.func.grad(lambda x: (x * t).sum())(one),
       torch.func.vjp(lambda x: x.sin(), t)[1](one), torch.func.jacrev(torch.sin)(t),
       torch.func.jvp(torch.sin, (t,), (t,)), torch.func.hessian(lambda x: (x ** 3).sum())(t)]
w = torch.ones(2, dtype=torch.float64, requires_grad=True)
for f in [lambda: (one.clone().requires_grad_() * t).sum().backward(),
          lambda: torch.func.vmap(lambda x: (x * w * t).sum())(torch.ones(3, 2)).sum().backward(),
          lambda: torch.func.jvp(lambda x: (x * w * t).sum(), (one,), (one,))[0].backward()]:
    try:
        f()
        out.append(w.grad)
    except RuntimeError as e:  # (a graph outside torch.func's: the inference tensor itself)
        out.append("Inference tensors cannot be saved" in str(e))
""",
    # backward(inputs=...): a tensor given twice counts once; GradientEdges are accepted
    # (a leaf's edge fills its .grad, a non-leaf's fills nothing)
    "backward_inputs_twice_and_gradient_edges": """
from torch.autograd.graph import get_gradient_edge
import warnings
warnings.simplefilter("ignore")
a = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
(a * a).sum().backward(inputs=[a, a])
out = [a.grad.clone()]
a.grad = None
b = a.exp()
b.retain_grad()
(b * a).sum().backward(inputs=[b, b, a], retain_graph=True)
out += [a.grad.clone(), b.grad.clone()]
a.grad = b.grad = None
c = b * 2
(c * a).sum().backward(inputs=[get_gradient_edge(a)], retain_graph=True)
out.append(a.grad.clone())
(c * a).sum().backward(inputs=[get_gradient_edge(b)], retain_graph=True)
out += [a.grad.clone(), b.grad.clone()]
(c * a).sum().backward(inputs=[get_gradient_edge(c), b])
out += [a.grad.clone(), b.grad.clone(), c.grad]
try:
    (a * 2).sum().backward(inputs=[a.detach()])
except RuntimeError:
    out.append("an input that does not require grad raises")
""",
    # a dict of inputs: the gradients under the same keys (other Mappings refused);
    # materialized gradients of a batched grad: torch's zeros of the input's shape
    "grad_of_a_dict_of_inputs_and_batched_materialized": """
import collections
a = torch.tensor([1., 2.], dtype=torch.float64, requires_grad=True)
b = torch.tensor([3., 4.], dtype=torch.float64, requires_grad=True)
go = torch.ones(2, 2, dtype=torch.float64)
r = torch.autograd.grad((a * b).sum(), {"x": a, "y": b})
out = [type(r).__name__, list(r), r["x"], r["y"],
       list(torch.autograd.grad((a * 2).sum(), {"x": a, "y": b}, allow_unused=True).values()),
       torch.autograd.grad(a.exp(), {"x": a}, go, is_grads_batched=True)["x"]]
m = torch.autograd.grad(a.exp(), [a, b], go, is_grads_batched=True, materialize_grads=True)
out += [m, m[1].requires_grad]
try:
    torch.autograd.grad((a * b).sum(), collections.OrderedDict(x=a))
except TypeError:
    out.append("OrderedDict refused")
""",
})

# program_fuzz seed 11401350: a `.grad` set by hand on a tensor that then gets a history from
# an in-place write (itself or through a view) stays its `.grad` (torch keeps it on the
# TensorImpl): a later retained gradient adds to it
CASES["grad_set_by_hand_survives_an_in_place_write"] = """
w = torch.tensor([2.0, 3.0], dtype=torch.float64, requires_grad=True)
out = []
for through_view in (False, True):
    x = torch.tensor([1.0, -1.0], dtype=torch.float64)
    x.grad = torch.ones_like(x) * 0.5
    (x[:1] if through_view else x).mul_(w[:1] if through_view else w)
    out.append(x.grad.clone())
    (x * 3.0).sum().backward(inputs=[x])
    out += [x.grad, x.retains_grad]
"""

# program_fuzz seed 11401152: autograd.grad of an input no gradient reaches, made by a node the
# output reaches (an unbind sibling), runs (and without retain_graph frees) every node on the
# way to that node, as torch's engine, whose target is the edge (node, output number): hooks
# on the way run, and a second backward through them raises
CASES["grad_of_an_unreached_sibling_runs_the_nodes_on_the_way"] = """
seen = []
for retain in (True, False):
    x = torch.tensor([[0.9, 1.7], [-0.8, 0.5]], dtype=torch.float64, requires_grad=True)
    a, b = x.unbind(0)
    y = a.norm()
    y.register_hook(lambda g: seen.append(float(g)))
    z = y.sin() * y
    out = [torch.autograd.grad(z, [b], allow_unused=True, retain_graph=retain), list(seen)]
    try:
        z.backward()
        out.append(x.grad)
    except RuntimeError as e:
        out.append("second time" in str(e))
"""

# program_fuzz seed 11401422: a reentrant checkpoint's inner backward is a run of its own: a
# leaf the function closes over gets the inner gradient alone (its hook is called with it, not
# with what the outer run has summed so far), and a non-leaf's node the inner run frees
# raises when the outer run gets to it
CASES["reentrant_checkpoint_inner_run_keeps_its_own_gradients"] = """
from torch.utils.checkpoint import checkpoint
x = torch.tensor([-1.36, 1.51, 1.42], dtype=torch.float64, requires_grad=True)
seen = []
x.register_hook(lambda g: (seen.append(g.clone()), g.clamp(-0.5, 0.5))[1])
y = checkpoint(lambda u: u.tanh() * x, x, use_reentrant=True)
(y.sum() + (x.sin() * 2.0).sum()).backward()
out = [x.grad, seen]
w = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
v = w.exp()
seen2 = []
v.register_hook(lambda g: seen2.append(g.clone()))
z = checkpoint(lambda u: u.sin() * v, w, use_reentrant=True)
try:
    (z.sum() + (v * 3.0).sum()).backward()
except RuntimeError as e:
    out.append("second time" in str(e))
out += [seen2, w.grad]
# (seed 11405795: a node that saved no tensor, only its recorded shape: sort of a 0-d tensor)
s = torch.tensor(-1.2, dtype=torch.float64, requires_grad=True)
t = s.sort(0, descending=True)[0]
try:
    checkpoint(lambda u: u.sin() * t, t, use_reentrant=True).sin().backward()
    out.append(s.grad)
except RuntimeError as e:
    out.append("second time" in str(e))
"""

# program_fuzz seed 11402744: an output of a multi-output node (an unbind/iteration sibling)
# that no gradient reached has no gradient, though the node runs (its rule gets zeros for it):
# autograd.grad gives None for it and retain_grad leaves its .grad None, as torch's
CASES["unreached_sibling_of_a_run_node_has_no_gradient"] = """
x = torch.tensor([[1., 2.], [3., 4.]], dtype=torch.float64, requires_grad=True)
a, b = x.unbind(0)
out = [torch.autograd.grad((a * a).sum(), [b, x], allow_unused=True, retain_graph=True)]
c, d = x.unsqueeze(1)
d.retain_grad()
(c.tanh() * c).sum().backward(inputs=[b, x])
out += [b.grad, d.grad, x.grad]
"""

# program_fuzz seed 11409717: autograd.grad of one output of a node that does not run (an
# iteration/unbind sibling of a used output): torch's engine calls that node's tensor
# pre-hooks for every output, so a sibling's retain_grad and hooks see its gradient; and a
# hook of an output no gradient reached, in a node that runs, is called with None
CASES["capturing_node_runs_its_outputs_hooks_and_unreached_hooks_see_none"] = """
x = torch.tensor([[1.72], [-0.88], [-1.91]], dtype=torch.float64, requires_grad=True)
a, b, c = x
b.retain_grad()
seen = []
a.register_hook(lambda g: seen.append(None if g is None else g.clone()))
out = [torch.autograd.grad((b.tanh() * b + a).sum(), [c], allow_unused=True,
                           retain_graph=True), b.grad, list(seen)]
(b.sin() * 1.12).sum().backward()
out += [b.grad, x.grad, seen]
"""


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_autograd_api_edge_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])
