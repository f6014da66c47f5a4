"""Custom autograd.Function under the func transforms and forward AD, against torch: snippets
run unchanged by torch and by flowgrad through the programs' import shim (the harness of
test_torch_function_vs_torch): values, gradients, raise/no-raise."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

PRELUDE = """
import torch
import torch.autograd.forward_ad as fwAD
X = torch.tensor([[0.5, 1.0], [2.0, -1.0]], dtype=torch.float64)
class Exp(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x.exp()
    @staticmethod
    def setup_context(ctx, inputs, output): ctx.save_for_backward(output)
    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y
class ExpRule(Exp):
    generate_vmap_rule = False
    @staticmethod
    def vmap(info, in_dims, x): return ExpRule.apply(x), in_dims[0]
class Sq(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x * x
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.save_for_forward(inputs[0])
    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * g * x
    @staticmethod
    def jvp(ctx, t):
        x, = ctx.saved_tensors
        return 2 * x * t
class Mm(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x, w): return x @ w
    @staticmethod
    def setup_context(ctx, inputs, output): ctx.save_for_backward(*inputs)
    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w.T, torch.outer(x, g)
class Double_(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    @staticmethod
    def backward(ctx, g): return g * 2
W = torch.tensor([[1., 2., 3.], [0.5, -1., 2.]], dtype=torch.float64)
"""

CASES = {
    # a saved output of a Function recorded per example was read back as zeros
    "vmap_of_grad_reads_a_saved_output": """
out = [torch.func.vmap(torch.func.grad(lambda x: Exp.apply(x).sum()))(X),
       torch.func.vmap(lambda x: torch.func.vjp(Exp.apply, x)[1](torch.ones_like(x))[0])(X)]
""",
    # a vmap staticmethod inside vmap(grad(f)): the per-example graph was lost (zeros)
    "vmap_of_grad_through_a_vmap_staticmethod": """
out = [torch.func.vmap(torch.func.grad(lambda x: ExpRule.apply(x).sum()))(X)]
""",
    # the generated rule ran forward's ops under no_grad: nothing outside the vmap could
    # differentiate through it (zeros, requires_grad False)
    "grad_of_vmap_of_a_generated_rule": """
a = X.clone().requires_grad_()
y = torch.func.vmap(Sq.apply)(a)
y.sum().backward()
out = [torch.func.grad(lambda x: torch.func.vmap(Sq.apply)(x).sum())(X), y.requires_grad,
       a.grad, torch.func.vmap(lambda x: Sq.apply(x) * 2)(X)]
""",
    "jacrev_of_vmap_with_an_unbatched_input": """
out = [torch.func.jacrev(lambda x: torch.func.vmap(Mm.apply, in_dims=(0, None))(x, W))(X),
       torch.func.jacrev(lambda w: torch.func.vmap(Mm.apply, in_dims=(0, None))(X, w))(W)]
""",
    "grad_of_grad_and_nested_vmaps_of_a_generated_rule": """
a = X.clone().requires_grad_()
torch.func.vmap(torch.func.vmap(Sq.apply))(a.unsqueeze(0)).sum().backward()
out = [torch.func.grad(lambda x: torch.func.grad(
           lambda y: torch.func.vmap(Sq.apply)(y).pow(2).sum())(x).sum())(X), a.grad]
""",
    # the jvp staticmethod ran on the physical tangents against per-example outputs (raised)
    "jvp_of_vmap_of_a_generated_rule": """
class Triple(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x * 3
    @staticmethod
    def setup_context(ctx, inputs, output): pass
    @staticmethod
    def backward(ctx, g): return g * 3
    @staticmethod
    def jvp(ctx, t): return t * 3
out = [torch.func.jvp(torch.func.vmap(Sq.apply), (X,), (torch.ones_like(X),))[1],
       torch.func.jacfwd(torch.func.vmap(Sq.apply))(X),
       torch.func.jvp(torch.func.vmap(Triple.apply), (X,), (X,))[1]]
""",
    # a view written in place by forward (mark_dirty): its base did not take the write into
    # its history (torch's CopySlices): the gradient missed the Function's
    "mark_dirty_on_a_view_rebases_its_base": """
a = torch.arange(6., dtype=torch.float64).requires_grad_()
b = a.clone().view(2, 3)
v = b[:, 1]
r = Double_.apply(v)
(b ** 2).sum().backward()
out = [a.grad, b, r is v, b._version, v._version]
""",
    "mark_dirty_bumps_the_version_once_more": """
a = torch.ones(3, dtype=torch.float64, requires_grad=True)
b = a * 1
Double_.apply(b)
v1 = b._version
with torch.no_grad():
    Double_.apply(b)
c = torch.ones(2)
Double_.apply(c)
b.sum().backward()
out = [v1, b._version, c._version, a.grad]
""",
    "mark_dirty_on_a_view_of_a_leaf_that_requires_grad_raises": """
a = torch.ones(3, dtype=torch.float64, requires_grad=True)
Double_.apply(a[1:])
""",
    "mark_dirty_on_a_view_with_two_outputs_raises": """
class Two(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x, x * 3
    @staticmethod
    def backward(ctx, g, h): return g * 2 + h * 6
a = torch.ones(3, dtype=torch.float64, requires_grad=True)
Two.apply(a.clone()[1:])
""",
    "backward_may_return_trailing_nones": """
class T(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k): return x * k
    @staticmethod
    def backward(ctx, g): return g * 2, None, None
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
T.apply(a, 2).sum().backward()
out = [a.grad]
""",
    "backward_returning_an_extra_gradient_raises": """
class T(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x * 2
    @staticmethod
    def backward(ctx, g): return g, g
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
T.apply(a).sum().backward()
""",
    "an_input_returned_as_non_differentiable": """
class ND(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_non_differentiable(x)
        return x, x * 2
    @staticmethod
    def backward(ctx, g, h): return h * 2
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
y, z = ND.apply(a * 1)
z.sum().backward()
out = [y.requires_grad, y.grad_fn is None, z.requires_grad, a.grad]
""",
    # forward AD is off inside forward, as torch's: the input's tangent was visible there and
    # a dirty input's tangent was updated by forward's write and again by jvp (doubled)
    "forward_sees_no_tangent_and_jvp_updates_a_dirty_input": """
seen = []
class J(torch.autograd.Function):
    @staticmethod
    def forward(x):
        seen.append(fwAD.unpack_dual(x).tangent is None)
        y = x * 3
        seen.append(fwAD.unpack_dual(y).tangent is None)
        return y
    @staticmethod
    def setup_context(ctx, inputs, output): pass
    @staticmethod
    def backward(ctx, g): return g
    @staticmethod
    def jvp(ctx, t): return t * 2
class D(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    @staticmethod
    def backward(ctx, g): return g * 2
    @staticmethod
    def jvp(ctx, t): return t.mul_(2)
one = torch.ones(2, dtype=torch.float64)
with fwAD.dual_level():
    d = fwAD.make_dual(one.clone(), one.clone())
    r = J.apply(d)
    e = fwAD.make_dual(one.clone(), one.clone())
    D.apply(e)
    tangents = [fwAD.unpack_dual(r).tangent, fwAD.unpack_dual(e).tangent]
out = [seen, tangents, torch.func.jvp(J.apply, (one,), (one,))]
""",
    "jvp_of_a_dirty_input_that_returns_a_new_tangent_raises": """
class D(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    @staticmethod
    def backward(ctx, g): return g * 2
    @staticmethod
    def jvp(ctx, t): return t * 2
with fwAD.dual_level():
    D.apply(fwAD.make_dual(torch.ones(2), torch.ones(2)))
""",
    "jvp_of_a_dirty_input_that_returns_a_view_of_its_tangent_raises": """
class D(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x
    @staticmethod
    def backward(ctx, g): return g * 2
    @staticmethod
    def jvp(ctx, t): return t.mul_(2).view_as(t)
with fwAD.dual_level():
    D.apply(fwAD.make_dual(torch.ones(2), torch.ones(2)))
""",
    "func_jvp_inside_forward_sees_its_tangents": """
class J(torch.autograd.Function):
    @staticmethod
    def forward(x): return torch.func.jvp(torch.sin, (x,), (torch.ones_like(x),))[1]
    @staticmethod
    def setup_context(ctx, inputs, output): pass
    @staticmethod
    def backward(ctx, g): return g
    @staticmethod
    def jvp(ctx, t): return t
x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
out = [J.apply(x)]
""",
    # what jvp returns was not checked: a missing, extra, None or wrongly shaped tangent was
    # taken (broadcast, or left the output without one)
    "jvp_results_are_checked": """
def make(fw, jvp):
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x): return fw(ctx, x)
        @staticmethod
        def backward(ctx, *g): return g[0]
    F.jvp = staticmethod(jvp)
    return F
long = torch.ones(2, dtype=torch.long)
cases = [
    (lambda c, x: (x * 2, x * 3), lambda c, t: t * 2),
    (lambda c, x: x * 2, lambda c, t: (t * 2, t)),
    (lambda c, x: x * 2, lambda c, t: None),
    (lambda c, x: (x * 2, x * 3), lambda c, t: (t, None)),
    (lambda c, x: x * 2, lambda c, t: t[:1]),
    (lambda c, x: x * 2, lambda c, t: t.sum()),
    (lambda c, x: (c.mark_non_differentiable(y := x * 2), y)[1], lambda c, t: None),
    (lambda c, x: (x * 2, long), lambda c, t: (t, None)),
    (lambda c, x: (x * 2, long), lambda c, t: (t, t)),
    (lambda c, x: (x * 2, 3), lambda c, t: (t, None)),
    (lambda c, x: (x * 2, 3), lambda c, t: t),
    (lambda c, x: x * 2, lambda c, t: (t * 2,)),
]
out = []
for fw, jvp in cases:
    with fwAD.dual_level():
        d = fwAD.make_dual(torch.ones(3, 4, dtype=torch.float64),
                           torch.ones(3, 4, dtype=torch.float64))
        try:
            r = make(fw, jvp).apply(d)
            out.append([fwAD.unpack_dual(o).tangent if isinstance(o, torch.Tensor) else o
                        for o in (r if isinstance(r, tuple) else (r,))])
        except RuntimeError:
            out.append("RuntimeError")
""",
    # a Function without setup_context under torch.func's transforms: torch refuses it
    # (flowgrad ran it); autograd.functional's and plain autograd take it
    "old_style_function_under_func_transforms": """
class Old(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x * 2
    @staticmethod
    def backward(ctx, g): return g * 2
    @staticmethod
    def vmap(info, in_dims, x): return x * 2, in_dims[0]
    @staticmethod
    def jvp(ctx, t): return t * 2
x = torch.ones(2, dtype=torch.float64)
out = []
for f in [lambda: torch.func.grad(lambda x: Old.apply(x).sum())(x),
          lambda: torch.func.vmap(Old.apply)(x),
          lambda: torch.func.jvp(Old.apply, (x,), (x,)),
          lambda: torch.func.grad(lambda y: (y * Old.apply(x)).sum())(x),
          lambda: torch.autograd.functional.jacobian(Old.apply, x),
          lambda: torch.autograd.functional.jacobian(Old.apply, x, vectorize=True),
          lambda: torch.autograd.functional.hvp(lambda y: Old.apply(y).pow(2).sum(), x, x),
          lambda: Old.apply(x.clone().requires_grad_())]:
    try:
        out.append(f())
    except RuntimeError:
        out.append("RuntimeError")
""",
    # the generated rule with outputs not batched, an input returned as-is, None gradients
    # (set_materialize_grads(False)) and nothing saved; a backward that reads saved_tensors
    # of a Function that saved nothing (it raised 'freed')
    "generated_rule_edge_cases": """
w0 = torch.tensor([1.5, -2.0], dtype=torch.float64)
class Two(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x, w): return x * w, w * 2, 7
    @staticmethod
    def setup_context(ctx, inputs, output): ctx.save_for_backward(*inputs)
    @staticmethod
    def backward(ctx, g, h, _):
        x, w = ctx.saved_tensors
        return g * w, g * x + 2 * h
class Id(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x
    @staticmethod
    def setup_context(ctx, inputs, output): pass
    @staticmethod
    def backward(ctx, g): return g * 5 + len(ctx.saved_tensors)
class NoneGrads(torch.autograd.Function):
    generate_vmap_rule = True
    @staticmethod
    def forward(x): return x * 2, x * 3
    @staticmethod
    def setup_context(ctx, inputs, output): ctx.set_materialize_grads(False)
    @staticmethod
    def backward(ctx, g, h): return g * 2 if h is None else g * 2 + h * 3
a, w = X.clone().requires_grad_(), w0.clone().requires_grad_()
y, z, k = torch.func.vmap(Two.apply, in_dims=(1, None), out_dims=(0, None, None))(a, w)
(y.sum() + z.sum()).backward()
out = [y, z, k, a.grad, w.grad]
for f in (Id, NoneGrads):
    a = X.clone().requires_grad_()
    torch.func.vmap(f.apply)(a)[0].sum().backward()
    out.append(a.grad)
a = X.clone().requires_grad_()
Id.apply(a).sum().backward()
out.append(a.grad)
""",
    # grad(vmap(grad(f))) and a backward of vmap(grad(f)): the levels outside the vmap saw
    # no graph of the forward (it ran under no_grad per example): zeros
    "grad_of_vmap_of_grad_of_a_function_saving_its_output": """
out = []
for f in (Exp, ExpRule):
    per_example = torch.func.vmap(torch.func.grad(lambda y: f.apply(y).sum()))
    out.append(torch.func.grad(lambda x: per_example(x).sum())(X))
    a = X.clone().requires_grad_()
    per_example(a).sum().backward()
    out.append(a.grad)
""",
    "forward_and_reverse_compositions_of_a_generated_rule": """
x0 = X[0]
out = [torch.func.jacfwd(Sq.apply)(x0), torch.func.jacrev(Sq.apply)(x0),
       torch.func.hessian(lambda x: Sq.apply(x).sum())(x0),
       torch.func.vmap(lambda x: torch.func.jvp(Sq.apply, (x,), (torch.ones_like(x),))[1])(X),
       torch.func.vmap(torch.func.vmap(torch.func.grad(Sq.apply)))(X),
       torch.func.jvp(torch.func.vmap(torch.func.vmap(Sq.apply)), (X,), (torch.ones_like(X),))]
""",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_function_matches_torch(name):
    assert_snippet_matches_torch(PRELUDE + CASES[name])


def test_jvp_of_vmap_of_a_function_without_jvp_names_it():
    import flowgrad as flow

    class NoJvp(flow.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = flow.ones(2, 3)
    with pytest.raises(NotImplementedError, match=r"\(NoJvp has none"):
        flow.func.jvp(flow.func.vmap(NoJvp.apply), (x,), (x,))
