"""`out=`: every function that accepts it writes into it (as torch), or raises as torch does;
none accepts it and ignores it (a silent wrong result: the caller reads `out`)."""
import ast
import pathlib

import numpy as np
import pytest
import torch

import flowgrad as flow

CASES = [
    ("add", lambda m, a, b, out: m.add(a, b, alpha=2, out=out)),
    ("sub", lambda m, a, b, out: m.sub(a, b, out=out)),
    ("mul", lambda m, a, b, out: m.mul(a, b, out=out)),
    ("div", lambda m, a, b, out: m.div(a, b, out=out)),
    ("div_floor", lambda m, a, b, out: m.div(a, b, rounding_mode="floor", out=out)),
    ("pow", lambda m, a, b, out: m.pow(a, 2, out=out)),
    ("clamp", lambda m, a, b, out: m.clamp(a, min=-0.5, max=0.5, out=out)),
    ("cat", lambda m, a, b, out: m.cat([a, b], 1, out=out)),
    ("stack", lambda m, a, b, out: m.stack([a, b], out=out)),
    ("hstack", lambda m, a, b, out: m.hstack([a, b], out=out)),
    ("vstack", lambda m, a, b, out: m.vstack([a, b], out=out)),
    ("dstack", lambda m, a, b, out: m.dstack([a, b], out=out)),
    ("column_stack", lambda m, a, b, out: m.column_stack([a, b], out=out)),
    ("normalize", lambda m, a, b, out: m.nn.functional.normalize(a, out=out)),
]


def _run(m, fn, out_dtype, requires_grad, out_shape):
    rng = np.random.default_rng(0)
    a = m.tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=requires_grad)
    b = m.tensor(rng.uniform(0.5, 2.0, (2, 3)).astype(np.float32))
    out = m.zeros(out_shape, dtype=getattr(m, out_dtype))
    try:
        r = fn(m, a, b, out)
    except (RuntimeError, TypeError) as error:
        return type(error).__name__
    return r is out, out.dtype == getattr(m, out_dtype), out.detach().numpy().copy()


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("out_dtype,requires_grad,out_shape", [
    ("float32", False, (0,)), ("float64", False, (0,)), ("int64", False, (0,)),
    ("float32", True, (0,))])
def test_out_as_torch(name, fn, out_dtype, requires_grad, out_shape):
    ours = _run(flow, fn, out_dtype, requires_grad, out_shape)
    theirs = _run(torch, fn, out_dtype, requires_grad, out_shape)
    if isinstance(theirs, str) or isinstance(ours, str):  # raised: the same exception type
        assert ours == theirs
        return
    assert ours[:2] == theirs[:2] == (True, True)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-6, atol=1e-6)


def test_no_function_accepts_out_and_ignores_it():
    root = pathlib.Path(flow.__file__).parent
    ignored = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and "out" in [
                    a.arg for a in node.args.args + node.args.kwonlyargs]:
                if not any(isinstance(n, ast.Name) and n.id == "out" for n in ast.walk(node)):
                    ignored.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not ignored, f"functions that take out= and never use it: {ignored}"
