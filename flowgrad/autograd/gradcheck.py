"""`autograd.gradcheck` / `gradgradcheck`: backward checked against finite differences, with
torch's signatures.

The slow mode compares the whole Jacobian column by column (one central difference per input
element); `fast_mode=True` compares one random projection `u^T J v` instead, as torch's fast
mode, which costs two function calls and one backward per output. Use float64 inputs.

>>> import flowgrad as flow
>>> x = flow.randn(3, dtype=flow.float64, requires_grad=True)
>>> flow.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
True
"""
from __future__ import annotations

import numpy as np

from . import grad_mode
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when a gradient does not match."""


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func, inputs):
    from ..tensor import Tensor

    return tuple(o for o in _tuple(func(*inputs)) if isinstance(o, Tensor))


def _check_inputs(inputs):
    from ..tensor import Tensor

    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True")
    for t in diff:
        if t.dtype.itemsize < 8:
            import warnings

            warnings.warn(f"gradcheck: input of shape {tuple(t.shape)} is {t.dtype}, not "
                          f"double precision; the check may fail from rounding alone. Use "
                          f"float64 inputs", stacklevel=3)
    return diff


def _numeric_jacobian_columns(func, inputs, diff, eps):
    """d outputs / d input element, one central difference per element: [input][output]."""
    cols = []
    for t in diff:
        data = t._data  # perturbed in place, element by element (C order, as reshape(-1))
        per_out = None
        for k, idx in enumerate(np.ndindex(data.shape)):
            orig = data[idx]
            data[idx] = orig + eps
            with grad_mode.no_grad():
                plus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
            data[idx] = orig - eps
            with grad_mode.no_grad():
                minus = [o._data.astype(np.float64).reshape(-1) for o in _outputs(func, inputs)]
            data[idx] = orig
            if per_out is None:
                per_out = [np.zeros((data.size, p.size)) for p in plus]
            for j, (p, m) in enumerate(zip(plus, minus)):
                per_out[j][k] = (p - m) / (2 * eps)
        cols.append(per_out or [])
    return cols


def _analytic_rows(outputs, diff):
    """d output_j / d inputs by one backward per output element: [input][output]."""
    from ..tensor import Tensor

    rows = [[np.zeros((t._data.size, o._data.size)) for o in outputs] for t in diff]
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        for k in range(out._data.size):
            seed = np.zeros(out._data.size, out._data.dtype)
            seed[k] = 1
            gs = _grad(out, diff, Tensor._wrap(seed.reshape(out._data.shape)),
                       retain_graph=True, allow_unused=True)
            for i, g in enumerate(gs):
                if g is not None:
                    rows[i][j][:, k] = g._data.astype(np.float64).reshape(-1)
    return rows


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def _slow_check(func, inputs, diff, outputs, eps, atol, rtol, raise_exception):
    analytic = _analytic_rows(outputs, diff)
    numeric = _numeric_jacobian_columns(func, inputs, diff, eps)
    for i, (a_in, n_in) in enumerate(zip(analytic, numeric)):
        for j, (a, n) in enumerate(zip(a_in, n_in)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return _fail(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:{n}\nanalytical:{a}\n", raise_exception)
    return True


def _fast_check(func, inputs, diff, outputs, eps, atol, rtol, raise_exception, seed=0):
    """u^T J v for random unit u (per output) and v (per input), numerically (directional
    difference along v) and analytically (vjp with u, dotted with v)."""
    from ..tensor import Tensor

    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(t._data.shape) for t in diff]
    vs = [v / max(np.linalg.norm(v), 1e-12) for v in vs]
    saved = [t._data.copy() for t in diff]

    def shifted(step):
        for t, s, v in zip(diff, saved, vs):
            t._data[...] = s + step * v
        with grad_mode.no_grad():
            out = [o._data.astype(np.float64) for o in _outputs(func, inputs)]
        for t, s in zip(diff, saved):
            t._data[...] = s
        return out

    plus, minus = shifted(eps), shifted(-eps)
    for j, out in enumerate(outputs):
        u = rng.standard_normal(out._data.shape)
        u /= max(np.linalg.norm(u), 1e-12)
        numeric = float(np.sum(u * (plus[j] - minus[j]) / (2 * eps)))
        analytic = 0.0
        if out.requires_grad:
            gs = _grad(out, diff, Tensor._wrap(u.astype(out._data.dtype)), retain_graph=True,
                       allow_unused=True)
            analytic = sum(float(np.sum(g._data * v)) for g, v in zip(gs, vs) if g is not None)
        if not abs(analytic - numeric) <= atol + rtol * abs(numeric):
            return _fail(
                f"Jacobian mismatch for output {j} (fast mode: u^T J v with random u, v):\n"
                f"numerical:{numeric}\nanalytical:{analytic}\n", raise_exception)
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check the gradients of `func` at `inputs` against finite differences (torch's
    signature; the batched and forward-mode checks are not done here). Returns True, or
    raises GradcheckError (False with raise_exception=False).

    >>> import flowgrad as flow
    >>> class BadSquare(flow.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, dy):
    ...         return dy          # wrong: should be 2 * x * dy
    >>> x = flow.ones(2, dtype=flow.float64, requires_grad=True)
    >>> flow.autograd.gradcheck(BadSquare.apply, (x,), raise_exception=False)
    False
    """
    if check_forward_ad or check_batched_grad or check_batched_forward_grad:
        raise NotImplementedError("gradcheck: forward-mode and batched checks are not "
                                  "available here; pass check_forward_ad=False, "
                                  "check_batched_grad=False")
    inputs = _tuple(inputs)
    diff = _check_inputs(inputs)
    if not check_backward_ad:
        return True
    outputs = _outputs(func, inputs)
    check = _fast_check if fast_mode else _slow_check
    ok = check(func, inputs, diff, outputs, eps, atol, rtol, raise_exception)
    if ok and check_grad_dtypes:
        for t in diff:
            gs = [_grad(o.sum(), t, allow_unused=True)[0] for o in outputs if o.requires_grad]
            for g in gs:
                if g is not None and g.dtype != t.dtype:
                    return _fail(f"Gradient has dtype mismatch: {g.dtype} for an input of "
                                 f"{t.dtype}", raise_exception)
    return ok


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of (inputs, grad_outputs) -> the vjp of `func`.
    Random float64 grad_outputs are made when not given (requiring grad, as torch's).

    >>> import flowgrad as flow
    >>> x = flow.randn(3, dtype=flow.float64, requires_grad=True)
    >>> flow.autograd.gradgradcheck(lambda t: t.tanh() * t, (x,))
    True
    """
    from ..tensor import Tensor

    if check_fwd_over_rev:
        raise NotImplementedError("gradgradcheck: check_fwd_over_rev needs forward mode; pass "
                                  "check_fwd_over_rev=False")
    inputs = _tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if grad_outputs is None:
        outs = _outputs(func, inputs)
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._wrap(rng.standard_normal(o._data.shape).astype(o._data.dtype)).requires_grad_()
            for o in outs if o.requires_grad)
    grad_outputs = _tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivative(*args):
        xs, gos = args[:n_in], args[n_in:]
        with grad_mode.enable_grad():  # also while gradcheck differences it under no_grad
            outs = [o for o in _outputs(func, xs) if o.requires_grad]
            diff = [xs[i] for i in diff_idx]
            gs = _grad(outs, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    if not check_rev_over_rev:
        return True
    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode)
