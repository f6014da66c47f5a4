"""The rule-shape helpers of flowgrad/ops/rules.py: `unary` and `step` rows register an op
whose generated rule is named after it, saves what f' reads, differentiates again, and is
pure flowgrad code (the rows' kernels use xp, their f' functions flowgrad ops only)."""
import ast
import pathlib

import numpy as np
import pytest

import flowgrad as flow
from flowgrad.ops import REGISTRY
from flowgrad.ops.rules import step, unary


@pytest.fixture
def registered():
    """Names of ops a test registers, removed from the registry afterwards."""
    names = []
    yield names
    for name in names:
        REGISTRY.pop(name, None)


def _x():
    return flow.tensor(np.linspace(0.3, 2.0, 5), dtype=flow.float64, requires_grad=True)


@pytest.mark.parametrize("kind, save", [("d_of_x", 1), ("d_of_y", 2), ("d_of_xy", 3)])
def test_unary_saves_what_its_derivative_reads(registered, kind, save):
    name = f"_test_cube_{kind}"
    registered.append(name)
    d = {"d_of_x": lambda x: x * x * 3.0, "d_of_y": lambda y: y.pow(2.0 / 3.0) * 3.0,
         "d_of_xy": lambda x, y: y / x * 3.0}[kind]
    k = unary(name, lambda xp, x: x * x * x, **{kind: d})
    assert k.save == save and k.backward.__name__ == f"{name}_backward"
    assert flow.autograd.gradcheck(k, (_x(),))
    assert flow.autograd.gradgradcheck(k, (_x(),))


@pytest.mark.parametrize("masked", [False, True])
def test_unary_divide_masked_and_scale(registered, masked):
    """dy / d(x) * scale; masked: exactly 0 where dy is 0 even though d(x) is 0 there."""
    name = f"_test_log_{masked}"
    registered.append(name)
    k = unary(name, lambda xp, x: xp.log(x), d_of_x=lambda x: x, divide=True, masked=masked,
              scale=-2.0)
    x = flow.tensor([0.0, 2.0], requires_grad=True)
    with np.errstate(divide="ignore"):  # log(0) in the test's own kernel
        y = k(x)
    (g,) = flow.autograd.grad(y, x, flow.tensor([0.0, 1.0]))
    assert g[1].item() == -1.0
    assert (g[0].item() == 0.0) if masked else np.isnan(g[0].item())
    assert flow.autograd.gradgradcheck(lambda t: k(t) * 1.0, (_x(),))


def test_unary_complex_conjugates_the_derivative(registered):
    """complex=True: torch's convention for holomorphic f, dy * conj(f'(z))."""
    registered.append("_test_csquare")
    k = unary("_test_csquare", lambda xp, x: x * x, d_of_x=lambda x: x * 2.0, complex=True)
    z = flow.tensor([1.0 + 2.0j], requires_grad=True)
    (g,) = flow.autograd.grad(k(z), z, flow.tensor([1.0 + 0.0j]))
    assert g.tolist() == [2.0 - 4.0j]


def test_unary_refuses_a_row_without_exactly_one_derivative():
    with pytest.raises(TypeError, match="exactly one of d_of_x"):
        unary("_test_bad", lambda xp, x: x)
    with pytest.raises(TypeError, match="exactly one of d_of_x"):
        unary("_test_bad", lambda xp, x: x, d_of_x=lambda x: x, d_of_y=lambda y: y)
    assert "_test_bad" not in REGISTRY
    registered_no_grad = unary("_test_nograd", lambda xp, x: x, differentiable=False)
    try:
        assert not registered_no_grad.differentiable and registered_no_grad.backward is None
    finally:
        REGISTRY.pop("_test_nograd")


def test_step_gives_a_constant_zero_gradient(registered):
    registered.append("_test_floor")
    k = step("_test_floor", lambda xp, x: xp.floor(x))
    x = flow.tensor([1.5, -0.5], requires_grad=True)
    (g,) = flow.autograd.grad(k(x), x, flow.tensor([float("inf"), 1.0]))
    assert g.tolist() == [0.0, 0.0] and g.dtype == x.dtype and not g.requires_grad


def _row_functions(source):
    """(line, role, function node) for each kernel and f' of the unary/step rows of a file:
    lambdas in place, and top-level functions passed by name."""
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("unary", "step"):
            args = [("kernel", a) for a in node.args[1:2]]
            args += [(kw.arg, kw.value) for kw in node.keywords if kw.arg.startswith("d_of")]
            for role, a in args:
                fn = defs.get(a.id) if isinstance(a, ast.Name) else a
                if isinstance(fn, (ast.Lambda, ast.FunctionDef)):
                    yield node.lineno, role, fn


def test_rows_use_xp_in_kernels_and_flowgrad_ops_in_derivatives():
    """What test_registry checks of `@op` kernels and `@<op>.grad` rules, for the rows."""
    ops_dir = pathlib.Path(flow.__file__).parent / "ops"
    seen, offenders = 0, []
    for path in sorted(ops_dir.glob("*.py")):
        for line, role, fn in _row_functions(path.read_text()):
            seen += 1
            bad = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == "np"
                   or role != "kernel" and isinstance(n, ast.Attribute) and n.attr == "_data"]
            if bad:
                offenders.append(f"{path.name}:{line} {role}")
    assert seen > 60, f"the walk found only {seen} row functions: is it still looking?"
    assert not offenders, f"row functions reading numpy or ._data: {offenders}"
