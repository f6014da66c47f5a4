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


def test_rules_are_named_after_their_op():
    """Tracebacks and profiles say `tanh_backward`, not `_`."""
    misnamed = [(name, op.backward.__code__.co_name) for name, op in REGISTRY.items()
                if op.backward is not None and op.backward.__code__.co_name != f"{name}_backward"]
    assert not misnamed, f"rules whose code is not named <op>_backward: {misnamed}"


def test_op_attributes_do_not_shadow_the_nodes_own_names():
    """A rule reads an op call's attributes as `ctx.<name>` on the recorded node; an attribute
    named like one of the node's own fields (`out`, `inputs`, `name`...) would read the field."""
    import inspect

    from flowgrad.autograd.node import FunctionNode

    reserved = {n for n in dir(FunctionNode) if not n.startswith("__")}
    clashes = [f"{name}.{p}" for name, op in REGISTRY.items()
               for p in inspect.signature(op.kernel).parameters if p in reserved]
    assert not clashes, f"kernel keywords that the node's own attributes shadow: {clashes}"


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


def test_op_call_is_the_eager_entry_unless_another_interpreter_is_installed():
    """While eager, Op.__call__ is interpreter.eager_call itself (no dispatching call); every
    way of switching interpreters (using_interpreter, nested, inference mode, autocast, a
    raising block) puts it back."""
    from flowgrad.autograd import interpreter
    from flowgrad.ops.registry import Op

    class Passing:
        @staticmethod
        def apply(op, inputs, attrs):
            return interpreter.AutogradInterpreter.apply(op, inputs, attrs)

    assert Op.__call__ is interpreter.eager_call
    with interpreter.using_interpreter(Passing):
        assert Op.__call__ is not interpreter.eager_call
        with interpreter.using_interpreter(interpreter.AutogradInterpreter):
            assert Op.__call__ is interpreter.eager_call
        assert interpreter.current is Passing and Op.__call__ is not interpreter.eager_call
    assert Op.__call__ is interpreter.eager_call
    with flowgrad.inference_mode():
        assert interpreter.current is not interpreter.AutogradInterpreter
        assert Op.__call__ is not interpreter.eager_call
    with flowgrad.autocast("cpu"):
        assert Op.__call__ is not interpreter.eager_call
    try:
        with interpreter.using_interpreter(Passing):
            raise ValueError("inside")
    except ValueError:
        pass
    assert interpreter.current is interpreter.AutogradInterpreter
    assert Op.__call__ is interpreter.eager_call


# Rules allowed to read arrays directly while being converted, keyed "file.py:<op the rule
# belongs to>" (the decorator's or the `<op>.grad(fn)` call's base name); none are left. The
# test fails while a listed rule is already pure, so the set only shrinks.
_PENDING = set()


def _array_uses(fn):
    """["line N uses np", "line M uses ._data", ...] for a function's (or lambda's) body."""
    import ast

    return sorted({f"line {n.lineno} uses {'np' if isinstance(n, ast.Name) else '._data'}"
                   for n in ast.walk(fn)
                   if (isinstance(n, ast.Name) and n.id == "np")
                   or (isinstance(n, ast.Attribute) and n.attr == "_data")})


def _walk_rules(name, source):
    """Yield (op base name, rule node) for every gradient rule of one ops file: a function
    decorated `@<op>.grad`, and the argument of a call `<op>.grad(fn)` where fn is a function
    defined at the module's top level (resolved by name) or a lambda. A call whose argument
    resolves to neither raises, so a rule cannot slip past unchecked."""
    import ast

    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                if isinstance(d, ast.Attribute) and d.attr == "grad":
                    yield ast.unparse(d.value), node
                    break
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "grad" and len(node.args) == 1 and not node.keywords):
            arg = node.args[0]
            if isinstance(arg, ast.Name) and arg.id in defs:
                yield ast.unparse(node.func.value), defs[arg.id]
            elif isinstance(arg, ast.Lambda):
                yield ast.unparse(node.func.value), arg
            else:
                raise AssertionError(f"{name} line {node.lineno}: {ast.unparse(node)} attaches "
                                     f"a rule that is not a function defined in this file")


def _impure_rules(files=None):
    """({"file.py:op": ["line N uses np", ...]}, number of rules, number attached by a call)
    over `files` ((name, source) pairs; default: flowgrad/ops/*.py). A rule that reads `np` or
    `._data` anywhere in its body is listed under every op it is attached to; a function
    attached to several ops counts as one rule."""
    import ast
    import pathlib

    if files is None:
        ops_dir = pathlib.Path(flowgrad.__file__).parent / "ops"
        files = [(path.name, path.read_text()) for path in sorted(ops_dir.glob("*.py"))]
    impure, rules, called = {}, set(), set()
    for name, source in files:
        for base, fn in _walk_rules(name, source):
            rules.add((name, fn.lineno, fn.col_offset))
            if isinstance(fn, ast.Lambda) or not any(
                    isinstance(d, ast.Attribute) and d.attr == "grad"
                    for d in fn.decorator_list):
                called.add((name, fn.lineno, fn.col_offset))
            uses = _array_uses(fn)
            if uses:
                entry = impure.setdefault(f"{name}:{base}", [])
                entry.extend(u for u in uses if u not in entry)
    return impure, len(rules), len(called)


def test_gradient_rules_are_pure_flowgrad_code():
    """A gradient rule is flowgrad ops and Python on metadata only: no `np`, no `._data`, so a
    graph-mode tracer can record every rule as ops (masks and constants come from ops too)."""
    impure, n_rules, n_called = _impure_rules()
    assert n_rules > 100, f"the walk found only {n_rules} gradient rules: is it still looking?"
    assert n_called >= 5, f"the walk found only {n_called} rules attached by `<op>.grad(fn)`"
    new = {key: uses for key, uses in impure.items() if key not in _PENDING}
    assert not new, "gradient rules that use np or ._data (write them with flowgrad ops):\n" + \
        "\n".join(f"  {key}: {', '.join(uses)}" for key, uses in sorted(new.items()))
    done = sorted(_PENDING - impure.keys())
    assert not done, f"rules in _PENDING that are pure now: remove them from _PENDING: {done}"


_SAMPLE_OPS_FILE = """
import numpy as np


def _shared(ctx, dy):
    return dy * Tensor._wrap(np.sign(ctx.inputs[0]._data))


def _clean(ctx, dy):
    return dy * 2


_a.grad(_shared)
_b.grad(_shared)
_c.grad(_clean)


def _make(name):
    k = op(name)(None)
    k.grad(lambda ctx, dy: dy * np.pi)
    return k


@_d.grad
def _(ctx, dy):
    return dy._data
"""


def test_the_walk_checks_rules_attached_by_a_call():
    """`<op>.grad(fn)` rules are found through fn's definition in the same file (and lambdas
    in place), reported under each op they are attached to, and counted once each."""
    impure, n_rules, n_called = _impure_rules([("sample.py", _SAMPLE_OPS_FILE)])
    assert impure == {
        "sample.py:_a": ["line 6 uses ._data", "line 6 uses np"],
        "sample.py:_b": ["line 6 uses ._data", "line 6 uses np"],
        "sample.py:k": ["line 20 uses np"],
        "sample.py:_d": ["line 26 uses ._data"],
    }
    assert (n_rules, n_called) == (4, 3)


def test_the_walk_refuses_a_rule_it_cannot_resolve():
    import pytest

    with pytest.raises(AssertionError, match=r"sample.py line 2: _a.grad\(helpers.rule\)"):
        _impure_rules([("sample.py", "import helpers\n_a.grad(helpers.rule)\n")])


def test_an_op_attached_as_a_tensor_method_binds_the_tensor():
    """`Tensor.m = some_op` (an Op, as a user may attach one): `x.m()` passes x as the op's
    input. flowgrad's own methods are functions calling their op (tracer._CALLER_SKIP): the
    four that were ops still agree with torch."""
    import torch

    from flowgrad.ops.registry import REGISTRY, Op

    twice = Op("test_registry_twice", lambda xp, x: x * 2, differentiable=False)
    try:
        flowgrad.Tensor.test_twice = twice
        assert flowgrad.tensor([1.0, 2.0]).test_twice().tolist() == [2.0, 4.0]
    finally:
        del flowgrad.Tensor.test_twice
        REGISTRY.pop("test_registry_twice")
    data = [1.0, float("nan"), float("inf"), 0.0]
    x, t = flowgrad.tensor(data), torch.tensor(data)
    for name in ("isnan", "isinf", "isfinite", "logical_not"):
        assert getattr(x, name)().tolist() == getattr(t, name)().tolist(), name


def test_forward_rules_declared_beside_the_op():
    """`@op(..., jvp="linear" | "multilinear" | "diagonal")` gives the op its forward-mode
    rule (no hand-kept list of names elsewhere); ops with no gradient declare none."""
    from flowgrad.autograd.forward_ad import JVP_KINDS

    assert set(JVP_KINDS) == {"linear", "multilinear", "diagonal"}
    declared = {name for name, op in REGISTRY.items() if op.jvp}
    assert {"reshape", "sum", "mul", "matmul", "exp", "tanh", "floor"} <= declared
    assert not [name for name in declared if not REGISTRY[name].differentiable]
