"""torch.library.custom_op (flowgrad/library.py) against torch: each snippet defines custom
ops with torch's API, registers their gradients, fake kernels and kernels, and calls them
(directly, through torch.ops.<ns>.<name>, inside a module under an optimizer), and declares
ops by schema strings (Library, define, impl with dispatch keys); torch and
flowgrad must give the same values, gradients and raise/no-raise (the harness of
test_torch_function_vs_torch.py)."""
import pytest
from test_torch_function_vs_torch import assert_snippet_matches_torch

CASES = {
    "cop_basic": """
from torch import Tensor

@torch.library.custom_op('t1::nsin', mutates_args=())
def nsin(x: Tensor) -> Tensor:
    return torch.from_numpy(np.sin(x.detach().numpy()))
x = torch.arange(3.).requires_grad_()
y = nsin(x)
r = [y, y.requires_grad]
try:
    y.sum().backward(); r.append('noraise')
except RuntimeError as e: r.append('raise')
def setup_context(ctx, inputs, output): ctx.save_for_backward(inputs[0])
def backward(ctx, g):
    x, = ctx.saved_tensors
    return g * x.cos()
nsin.register_autograd(backward, setup_context=setup_context)
y = nsin(x); y.sum().backward()
out = r + [x.grad, torch.ops.t1.nsin(x.detach()), torch.ops.t1.nsin.default(x.detach()),
           nsin(torch.ones(2)).requires_grad]
""",
    "cop_mutates": """
from torch import Tensor

@torch.library.custom_op('t2::addin', mutates_args={'out'})
def addin(x: Tensor, out: Tensor) -> None:
    out.add_(x)
o = torch.zeros(3); v = o._version; r = addin(torch.ones(3), o)
out = [o, o._version > v, r is None]
""",
    "cop_alias_raises": """
from torch import Tensor

@torch.library.custom_op('t3::bad', mutates_args=())
def bad(x: Tensor) -> Tensor:
    return x
out = bad(torch.ones(2))
""",
    "cop_two_outputs": """
from torch import Tensor

@torch.library.custom_op('t4::two', mutates_args=())
def two(x: Tensor, k: float) -> tuple[Tensor, Tensor]:
    return x * k, x + k
def sc(ctx, inputs, output): ctx.k = inputs[1]
two.register_autograd(lambda ctx, g1, g2: (g1 * ctx.k + g2, None), setup_context=sc)
a = torch.ones(2, requires_grad=True); p, q = two(a, 3.0); (p.sum() + q.sum() * 2).backward()
out = [p, q, a.grad, type(two(a, 1.0)).__name__]
""",
    "cop_decorator_register": """
from torch import Tensor

@torch.library.custom_op('t5::mysq', mutates_args=())
def mysq(x: Tensor) -> Tensor:
    return x.detach() ** 2
@mysq.register_fake
def _(x): return torch.empty_like(x)
def sc(ctx, inputs, output): ctx.save_for_backward(inputs[0])
def bw(ctx, g):
    x, = ctx.saved_tensors
    return 2 * x * g
torch.library.register_autograd('t5::mysq', bw, setup_context=sc)
x = torch.tensor([1., 2., 3.], requires_grad=True)
y = mysq(x); g, = torch.autograd.grad(y.sum(), x)
m = mysq(torch.ones(2, 3, device='meta'))
out = [y, g, tuple(m.shape), str(m.device)]
""",
    "cop_in_module": """
from torch import Tensor

@torch.library.custom_op('t6::scale', mutates_args=())
def scale(x: Tensor, w: Tensor) -> Tensor:
    return x * w
def sc(ctx, inputs, output): ctx.save_for_backward(*inputs)
def bw(ctx, g):
    x, w = ctx.saved_tensors
    return g * w, (g * x).sum(0)
scale.register_autograd(bw, setup_context=sc)
class M(nn.Module):
    def __init__(self):
        super().__init__(); self.w = nn.Parameter(torch.linspace(0.5, 1.5, 3))
    def forward(self, x): return scale(x, self.w)
m = M(); opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.arange(6.).reshape(2, 3)
for _ in range(3):
    opt.zero_grad(); loss = (m(x) ** 2).mean(); loss.backward(); opt.step()
out = [loss, m.w]
""",
    "cop_kwonly_and_defaults": """
from torch import Tensor

@torch.library.custom_op('t7::clampish', mutates_args=())
def clampish(x: Tensor, lo: float = 0.0, *, hi: float = 1.0) -> Tensor:
    return x.clamp(lo, hi)
x = torch.linspace(-1, 2, 5)
out = [clampish(x), clampish(x, -0.5, hi=1.5)]
""",
    "cop_bad_name": """
from torch import Tensor

@torch.library.custom_op('noname', mutates_args=())
def f(x: Tensor) -> Tensor:
    return x * 2
out = f(torch.ones(1))
""",
    # the schema-string API: Library / define / impl
    "lib_define_impl": """
import warnings
warnings.simplefilter('ignore')
lib = torch.library.Library('oldlibA', 'DEF')
name = lib.define('scale(Tensor x, float k=2.0) -> Tensor')
def scale_cpu(x, k=2.0): return x * k
lib.impl('scale', scale_cpu, 'CPU')
x = torch.ones(2, requires_grad=True)
y = torch.ops.oldlibA.scale(x)
y.sum().backward()
g1 = x.grad.clone()
lib.define('twice(Tensor x) -> Tensor')
lib.impl('twice', lambda x: x * 2, 'CompositeImplicitAutograd')
x.grad = None; torch.ops.oldlibA.twice(x).sum().backward(); g2 = x.grad.clone()
def keep_k(ctx, inputs, output): ctx.k = inputs[1]
torch.library.register_autograd('oldlibA::scale', lambda ctx, g: (g * ctx.k * 10, None),
                                setup_context=keep_k)
x.grad = None; torch.ops.oldlibA.scale(x, 3.0).sum().backward(); g3 = x.grad.clone()
lib.define('inc_(Tensor(a!) x) -> ()')
def inc_(x): x.add_(1)
lib.impl('inc_', inc_, 'CPU')
z = torch.zeros(2); v = z._version; torch.ops.oldlibA.inc_(z)
out = [name, y, g1, g2, g3, z, z._version > v]
""",
    "lib_functional_define": """
torch.library.define('oldlibB::f', '(Tensor x, *, float a=1.5, int[] dims=[0]) -> Tensor')
@torch.library.impl('oldlibB::f', 'cpu')
def f(x, *, a=1.5, dims=[0]): return x + a
out = [torch.ops.oldlibB.f(torch.zeros(1)), torch.ops.oldlibB.f(torch.zeros(1), a=3.0)]
""",
    "lib_no_kernel": """
torch.library.define('oldlibC::g', '(Tensor x) -> Tensor')
out = torch.ops.oldlibC.g(torch.ones(1))
""",
    "lib_meta": """
lib = torch.library.Library('oldlibD', 'DEF')
lib.define('h(Tensor x) -> Tensor')
lib.impl('h', lambda x: x * 3, 'CPU')
torch.library.register_fake('oldlibD::h', lambda x: torch.empty_like(x))
m = torch.ops.oldlibD.h(torch.ones(2, 2, device='meta'))
out = [tuple(m.shape), str(m.device), torch.ops.oldlibD.h(torch.ones(2))]
""",
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_custom_op_case_matches_torch(name):
    assert_snippet_matches_torch(CASES[name])
