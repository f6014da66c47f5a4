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
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_custom_function_matches_torch(name):
    assert_snippet_matches_torch(PRELUDE + CASES[name])
