"""`out=`: every function that accepts it writes into it (as torch), or raises as torch does;
none accepts it and ignores it (a silent wrong result: the caller reads `out`)."""
import ast
import pathlib
import warnings

import numpy as np
import out_arg_fuzz
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


@pytest.mark.parametrize("seed", [10546541, 10758561])
def test_ldexp_of_a_smaller_float_input_and_integer_exponent_warns_as_torch(seed):
    # torch's kernel writes into an empty_like(input) that it resizes (with its deprecation
    # warning) to the broadcast shape, without out= and not with an out that fits
    assert out_arg_fuzz.check(seed) is None


def test_binomial_of_a_smaller_count_warns_as_torch():
    warned = []
    for m in (torch, flow):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.binomial(m.full((3,), 5.0, dtype=m.float64), m.full((2, 1), 0.5, dtype=m.float64))
        warned.append(sum("was resized" in str(w.message) for w in caught))
    assert warned == [1, 1]


@pytest.mark.parametrize("dtype", ["float32", "float16", "complex64"])
def test_complex_logsumexp_into_an_out_of_another_dtype_as_torch(dtype):
    # torch sums the shifted exponentials into out (a real out: their real parts, in its
    # dtype) and takes the log there; flowgrad refused a real out (seed 10766327)
    x = np.array([[0.3 + 2.0j, -1.0 + 0.5j, 0.2 - 1.0j], [1.0 + 3.0j, 0.0 + 0.0j, -2.0 + 1.0j]])
    got = []
    for m in (torch, flow):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got.append(m.logsumexp(m.tensor(x), 1, out=m.empty(2, dtype=getattr(m, dtype))).numpy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-3, equal_nan=True)
    assert got[1].dtype == got[0].dtype
