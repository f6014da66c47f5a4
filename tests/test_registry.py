"""Every registered op declares a gradient rule or is explicitly marked non-differentiable."""
import flowgrad  # noqa: F401 - importing fills the registry
from flowgrad.ops import REGISTRY


def test_every_op_has_a_rule_or_a_mark():
    missing = [name for name, op in REGISTRY.items()
               if op.differentiable and op.backward is None]
    assert not missing, f"ops with neither a gradient rule nor differentiable=False: {missing}"


def test_non_differentiable_ops_have_no_rule():
    both = [name for name, op in REGISTRY.items() if not op.differentiable and op.backward]
    assert not both, f"ops marked non-differentiable yet given a rule: {both}"


def test_registry_is_keyed_by_op_name():
    assert all(op.name == name for name, op in REGISTRY.items())
    assert REGISTRY["relu"].node_name == "relu_backward"


def test_kernels_take_their_array_module_from_xp():
    """Kernels use the `xp` they are given (the device's array module), never `np` directly,
    so a GPU array module can run every op unchanged."""
    import ast
    import pathlib

    ops_dir = pathlib.Path(flowgrad.__file__).parent / "ops"
    offenders = []
    for path in sorted(ops_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", "") == "op"
                    for d in node.decorator_list):
                uses_np = any(isinstance(n, ast.Name) and n.id == "np" for n in ast.walk(node))
                if uses_np:
                    offenders.append(f"{path.name}:{node.name}")
    assert not offenders, f"kernels that use numpy directly instead of xp: {offenders}"


def test_op_calls_go_to_the_current_interpreter():
    """Op.__call__ dispatches to the interpreter in use, so a tracer needs no op changed."""
    from flowgrad.autograd.interpreter import AutogradInterpreter, using_interpreter

    seen = []

    class Recording:
        @staticmethod
        def apply(op, inputs, attrs):
            seen.append(op.name)
            return AutogradInterpreter.apply(op, inputs, attrs)

    x = flowgrad.ones(2, requires_grad=True)
    with using_interpreter(Recording):
        y = (x * 3).relu().sum()
    y.backward()
    assert seen[:3] == ["scalar_mul", "relu", "sum"], seen
    assert x.grad.tolist() == [3.0, 3.0]
    assert flowgrad.ones(1).relu() is not None and len(seen) == 3  # eager again after the with
