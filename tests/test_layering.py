"""The core's layering: tensor <- autograd <- ops <- nn/optim/graph, without import knots.

A module of a lower layer never imports an upper one at module level, and no module of the
core imports flowgrad code inside a function to dodge a cycle: what a lower layer needs from
an upper one is handed down at import (`tensor.bind_late`, the hooks named in each module,
e.g. `engine.sum_to`, `forward_ad.JVP_RULES`). The few function-level imports left are listed
below with the reason each stays.
"""
import ast
import sys
from pathlib import Path

import flowgrad

ROOT = Path(flowgrad.__file__).parent
CORE = [ROOT / "tensor.py", *sorted((ROOT / "autograd").glob("*.py")),
        *sorted((ROOT / "ops").glob("*.py"))]

# (file, module as written, name) -> why it stays a function-level import
ALLOWED: dict = {}  # (file, module, name) -> why it cannot be a module-level import

# torch.autograd's tools built on the op library and the func transforms: autograd/__init__
# loads them last (`_load_tools`), so they may import those layers at module level
AUTOGRAD_TOOLS = {"functional.py", "gradcheck.py", "variable.py", "profiler.py"}
ABOVE_OPS = ("nn", "optim", "graph")


def _is_module(name):
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _imports(path):
    """(module as written, imported module, name, inside a function) per flowgrad import."""
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                base = package.rsplit(".", child.level - 1)[0] if child.level > 1 else package
                module = (base + ("." + child.module if child.module else "")
                          if child.level else child.module or "")
                if module.startswith("flowgrad"):
                    written = "." * child.level + (child.module or "")
                    for a in child.names:  # `from . import x`: x is the module imported
                        target = f"{module}.{a.name}" if _is_module(f"{module}.{a.name}") \
                            else module
                        out.append((written, target, a.name, in_function))
            elif isinstance(child, ast.Import):
                out.extend((a.name, a.name, a.name, in_function) for a in child.names
                           if a.name.startswith("flowgrad"))
            walk(child, inside)
    walk(ast.parse(path.read_text()), False)
    return out


def _rel(path):
    return path.relative_to(ROOT).as_posix()


def _in(target, *packages):
    return any(target == f"flowgrad.{p}" or target.startswith(f"flowgrad.{p}.")
               for p in packages)


def test_no_function_level_imports_in_the_core_beyond_the_list():
    found = {(_rel(p), written, name) for p in CORE for written, _, name, inside in _imports(p)
             if inside}
    unexpected = sorted(found - set(ALLOWED))
    assert not unexpected, (
        f"function-level imports of flowgrad code in the core: {unexpected}. Import at module "
        f"level, move the helper to the lower module that needs it, or have the upper layer "
        f"hand it down at import (see this file's docstring)")
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"allowed imports no longer there: drop them from ALLOWED: {stale}"


def test_tensor_imports_no_op_or_upper_layer():
    bad = [(t, n) for _, t, n, _ in _imports(ROOT / "tensor.py")
           if _in(t, "ops", "func", *ABOVE_OPS)]
    assert not bad, f"flowgrad/tensor.py imports from a layer above it: {bad}"


def test_autograd_imports_no_op_or_upper_layer_at_module_level():
    bad = []
    for path in sorted((ROOT / "autograd").glob("*.py")):
        if path.name in AUTOGRAD_TOOLS:
            continue
        bad += [(path.name, t, n) for _, t, n, inside in _imports(path)
                if not inside and (_in(t, "ops", *ABOVE_OPS)
                                   or t in {f"flowgrad.autograd.{m[:-3]}" for m in AUTOGRAD_TOOLS})]
    assert not bad, f"autograd modules import from the layers above at module level: {bad}"


def test_ops_import_no_upper_layer_at_module_level():
    bad = [(_rel(p), t, n) for p in sorted((ROOT / "ops").glob("*.py"))
           for _, t, n, inside in _imports(p) if not inside and _in(t, *ABOVE_OPS)]
    assert not bad, f"op modules import nn/optim/graph at module level: {bad}"


def test_autograd_tools_are_bound_once_flowgrad_is_imported():
    import flowgrad.autograd.gradcheck  # noqa: F401 - the submodule, imported again

    autograd, checks = flowgrad.autograd, sys.modules["flowgrad.autograd.gradcheck"]
    assert autograd.gradcheck is checks.gradcheck  # the function, not its module
    assert autograd.GradcheckError is checks.GradcheckError
    assert autograd.functional is sys.modules["flowgrad.autograd.functional"]


def test_import_flowgrad_leaves_scipy_for_first_use():
    """SciPy (0.35 s of a 0.7 s `import flowgrad`) loads when a flow.special kernel runs."""
    import subprocess

    code = ("import sys, flowgrad as flow; before = 'scipy' in sys.modules; "
            "flow.special.gammaln(flow.tensor([3.0])); print(before, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT.parent)
    assert out.stdout.split() == ["False", "True"], out.stderr
