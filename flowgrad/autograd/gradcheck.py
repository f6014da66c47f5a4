"""`autograd.gradcheck` / `gradgradcheck`: backward checked against finite differences, with
torch's signatures.

The slow mode compares the whole Jacobian column by column (one central difference per input
element); `fast_mode=True` compares one random projection `u^T J v` instead, as torch's fast
mode, which costs two function calls and one backward per output. Use float64 inputs.
`check_forward_ad` checks forward-mode JVPs the same way (one JVP per input element, or `J u`
per input in fast mode; complex inputs split into real and imaginary parts as torch's);
`check_batched_grad` / `check_batched_forward_grad` compare `func.vmap` of the vjp / jvp over
two random cotangents / tangents with a loop, as torch's.

>>> import flowgrad as flow
>>> x = flow.randn(3, dtype=flow.float64, requires_grad=True)
>>> flow.autograd.gradcheck(lambda t: (t.sin() * t).sum(), (x,))
True
"""
from __future__ import annotations

import numpy as np

from .._warn import warn
from ..device import new_array, new_zeros, to_host
from ..func import vmap
from ..ops.creation import zeros_like
from ..ops.shape import stack
from ..tensor import Tensor
from . import forward_ad as fwAD
from . import grad_mode
from . import levels as _levels
from .engine import grad as _grad
from .function import Function


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when a gradient does not match."""


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func, inputs):
    return tuple(o for o in _tuple(func(*inputs)) if isinstance(o, Tensor))


def _check_inputs(inputs):
    """The inputs requiring grad (torch's checks: at least one; each not of float64 or
    complex128 warns; one with a stride-0 dimension, whose elements share memory, is refused)."""
    diff = []
    for idx, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        if t.dtype.itemsize < 8 or t.dtype.is_complex and t.dtype.itemsize < 16:
            warn(f"Input #{idx} requires gradient and is not a double precision floating point "
                 f"or complex ({t.dtype}). This check will likely fail if all the inputs are not "
                 f"of double precision floating point or complex: use float64 or complex128 "
                 f"inputs", stacklevel=3)
        if not t.is_sparse and any(st == 0 and sz > 1 for st, sz in zip(t.stride(), t.shape)):
            raise RuntimeError(f"The {idx}th input has a dimension with stride 0 (shape "
                               f"{tuple(t.shape)}, strides {t.stride()}). gradcheck only "
                               f"supports inputs that are non-overlapping to be able to compute "
                               f"the numerical gradients correctly. You should call .contiguous "
                               f"on the input before passing it to gradcheck.")
        diff.append(t)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    return diff


def _as_vector(t, keep_complex=False):
    """The values of `t` as a flat float64 array (complex128 for a complex one when kept)."""
    kind = np.complex128 if keep_complex and t._data.dtype.kind == "c" else np.float64
    return to_host(t._data).astype(kind).reshape(-1)


def _central(func, inputs, data, idx, step, keep_complex):
    """(f(x + step) - f(x - step)) / 2|step| per output, x = data[idx] moved in place."""
    orig = data[idx]
    ends = []
    for shift in (step, -step):
        data[idx] = orig + shift
        try:
            with grad_mode.no_grad():
                ends.append([_as_vector(o, keep_complex) for o in _outputs(func, inputs)])
        finally:
            data[idx] = orig
    return [(p - m) / (2 * abs(step)) for p, m in zip(*ends)]


def _numeric_jacobian_columns(func, inputs, diff, eps, keep_complex=False):
    """d outputs / d input element, one central difference per element: [input][output].
    For a complex input element z = x + iy the entry is d/dx + i d/dy, the gradient
    convention of the reverse rules (outputs are real there: complex ones are split)."""
    cols = []
    for t in diff:
        data = t._data  # perturbed in place, element by element (C order, as reshape(-1))
        per_out = None
        for k, idx in enumerate(np.ndindex(data.shape)):
            diffs = _central(func, inputs, data, idx, eps, keep_complex)
            if data.dtype.kind == "c":
                diffs = [dx + 1j * dy for dx, dy in
                         zip(diffs, _central(func, inputs, data, idx, 1j * eps, keep_complex))]
            if per_out is None:
                per_out = [np.zeros((data.size, d.size), d.dtype) for d in diffs]
            for j, d in enumerate(diffs):
                per_out[j][k] = d
        cols.append(per_out or [])
    return cols


def _vjp_rows(out, diff):
    """d out / d inputs by one backward per element of `out`: an array per input, and whether
    every gradient had its input's dtype."""
    rows = [np.zeros((t._data.size, out._data.size),
                     np.complex128 if t._data.dtype.kind == "c" else np.float64) for t in diff]
    types_ok = True
    for k in range(out._data.size):
        seed = np.zeros(out._data.size, out._data.dtype)
        seed[k] = 1
        gs = _grad(out, diff, Tensor._wrap(new_array(out._data, seed.reshape(out._data.shape))),
                   retain_graph=True, allow_unused=True)
        for i, (g, t) in enumerate(zip(gs, diff)):
            if g is not None:
                types_ok = types_ok and g.dtype == t.dtype
                rows[i][:, k] = _as_vector(g, True)
    return rows, types_ok


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def _checked_vjps(vjps, nondet_tol, check_grad_dtypes, raise_exception):
    """`vjps()` ((arrays, types ok)) run twice, as torch's: a gradient of another dtype than
    its input (with check_grad_dtypes) and two runs differing by more than nondet_tol fail;
    else the first run's arrays (None after a failure that does not raise)."""
    first, types_ok = vjps()
    second, _ = vjps()
    if not types_ok and check_grad_dtypes:
        return _fail("Gradient has dtype mismatch", raise_exception) or None
    if any(np.abs(a - b).max(initial=0.0) > nondet_tol for a, b in zip(first, second)):
        return _fail("Backward is not reentrant, i.e., running backward with same input and "
                     "grad_output multiple times gives different values, although analytical "
                     f"gradient matches numerical gradient. The tolerance for nondeterminism "
                     f"was {nondet_tol}.", raise_exception) or None
    return first


def _no_differentiable_outputs(numeric, raise_exception):
    """No output requires grad: the numerical Jacobians must be exactly zero (torch's)."""
    if any(np.any(n != 0) for per_out in numeric for n in per_out):
        return _fail("Numerical gradient for function expected to be zero", raise_exception)
    return True


def _slow_check(func, inputs, diff, outputs, eps, atol, rtol, raise_exception,
                nondet_tol=0.0, check_grad_dtypes=False):
    numeric = _numeric_jacobian_columns(func, inputs, diff, eps)
    positions = [j for j, o in enumerate(outputs) if o.requires_grad]
    if not positions:
        return _no_differentiable_outputs(numeric, raise_exception)
    for j in positions:  # the outputs that do not require grad are not compared (torch's)
        analytic = _checked_vjps(lambda j=j: _vjp_rows(outputs[j], diff), nondet_tol,
                                 check_grad_dtypes, raise_exception)
        if analytic is None:
            return False
        for i, a in enumerate(analytic):
            n = numeric[i][j]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return _fail(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:{n}\nanalytical:{a}\n", raise_exception)
    return True


def _unit_rand(rng, shape):
    """A random non-negative unit vector (torch's fast-mode draw: rand, then normalised)."""
    v = rng.random(shape)
    return v / max(np.linalg.norm(v), 1e-12)


def _fast_check(func, inputs, diff, outputs, eps, atol, rtol, raise_exception, seed=0,
                nondet_tol=0.0, check_grad_dtypes=False):
    """v^T J u per (input, output) for random non-negative unit u (per input; a complex input:
    u_r + i u_i) and v (per output), numerically (a directional difference along u) and
    analytically (the vjp with v, dotted with u), atol scaled by sum(u) sum(v) (torch's)."""
    rng = np.random.default_rng(seed)
    us = [_unit_rand(rng, t._data.shape) + (1j * _unit_rand(rng, t._data.shape)
                                            if t._data.dtype.kind == "c" else 0)
          for t in diff]
    vs = [_unit_rand(rng, o._data.shape) for o in outputs]
    numeric = []  # [input][output]
    for t, u in zip(diff, us):
        saved = t._data.copy()
        u_on_device = new_array(saved, u)

        def shifted(step, t=t, saved=saved, u_on_device=u_on_device):
            t._data[...] = saved + step * u_on_device
            try:
                with grad_mode.no_grad():
                    return [to_host(o._data).astype(np.float64) for o in _outputs(func, inputs)]
            finally:
                t._data[...] = saved

        plus, minus = shifted(eps), shifted(-eps)
        numeric.append([float(np.sum(v * (p - m) / (2 * eps)))
                        for v, p, m in zip(vs, plus, minus)])
    positions = [j for j, o in enumerate(outputs) if o.requires_grad]
    if not positions:
        if any(abs(n) > nondet_tol for per_out in numeric for n in per_out):
            return _fail("Numerical gradient for function expected to be zero",
                         raise_exception)
        return True
    for j in positions:
        out = outputs[j]

        def vjps(out=out, v=vs[j]):
            gs = _grad(out, diff, Tensor._wrap(new_array(out._data, v, out._data.dtype)),
                       retain_graph=True, allow_unused=True)
            # <g, u> as real vectors: a complex gradient is d/dx + i d/dy (a real one, d/dx)
            dots = [np.array(0.0 if g is None else
                             float(np.sum((np.conj(to_host(g._data)) * u).real)))
                    for g, u in zip(gs, us)]
            return dots, all(g is None or g.dtype == t.dtype for g, t in zip(gs, diff))

        analytic = _checked_vjps(vjps, nondet_tol, check_grad_dtypes, raise_exception)
        if analytic is None:
            return False
        for i, (a, u) in enumerate(zip(analytic, us)):
            n = numeric[i][j]
            tol = atol * float(np.sum(u.real) + np.sum(u.imag)) * float(np.sum(vs[j]))
            if not abs(float(a) - n) <= tol + rtol * abs(n):
                return _fail(
                    f"Jacobian mismatch for output {j} with respect to input {i} (fast mode: "
                    f"v^T J u with random u, v):\nnumerical:{n}\nanalytical:{float(a)}\n",
                    raise_exception)
    return True


def _real_outputs(func, outputs):
    """torch's treatment of complex outputs in reverse mode: the check runs on the functions
    giving their imaginary and their real parts (just `func` when all are real)."""
    if all(o._data.dtype.kind != "c" for o in outputs):
        return [func]
    return [lambda *args, part=part: tuple(getattr(o, part) if o.is_complex() else o
                                           for o in _outputs(func, args))
            for part in ("imag", "real")]


def _diff_positions(func, inputs):
    """Indices (among the Tensor outputs) of the outputs that require grad."""
    return [j for j, o in enumerate(_outputs(func, inputs)) if o.requires_grad]


def _jvp_outputs(func, inputs, tangents, positions):
    """The output tangents of `func` (as float64 arrays, zeros where none) with the diff
    inputs made dual with `tangents` (an index -> tangent array map; zeros elsewhere)."""
    with fwAD.dual_level():
        duals = tuple(
            fwAD.make_dual(t.detach(), Tensor._wrap(new_array(t._data, tangents[i], t._data.dtype)
                                                    if i in tangents else new_zeros(t._data)))
            if isinstance(t, Tensor) and t.requires_grad else t
            for i, t in enumerate(inputs))
        outs = _outputs(func, duals)
        res = []
        for j in positions:
            primal, tangent = fwAD.unpack_dual(outs[j])
            res.append(_as_vector(zeros_like(primal) if tangent is None else tangent, True))
    return res


def _forward_slow_check(func, inputs, diff, eps, atol, rtol, raise_exception):
    """The Jacobian by forward mode, one JVP per input element, against the numerical one."""
    positions = _diff_positions(func, inputs)
    numeric = _numeric_jacobian_columns(func, inputs, diff, eps, keep_complex=True)
    diff_idx = [i for i, t in enumerate(inputs) if any(t is d for d in diff)]
    for i, (t, k_in) in enumerate(zip(diff, diff_idx)):
        analytic = [np.zeros_like(numeric[i][j]) for j in positions]
        for k in range(t._data.size):
            basis = np.zeros(t._data.size)
            basis[k] = 1
            for col, res in zip(analytic, _jvp_outputs(func, inputs,
                                                       {k_in: basis.reshape(t._data.shape)},
                                                       positions)):
                col[k] = res
        for a, j in zip(analytic, positions):
            n = numeric[i][j]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                return _fail(
                    f"Jacobian computed with forward mode mismatch for output {j} with "
                    f"respect to input {i},\nnumerical:{n}\nanalytical:{a}\n", raise_exception)
    return True


def _forward_fast_check(func, inputs, diff, eps, atol, rtol, raise_exception, seed=0):
    """J u per input for a random positive unit u (torch's fast mode): a directional
    difference along u against the JVP with tangent u, with atol scaled by sum(u)."""
    positions = _diff_positions(func, inputs)
    rng = np.random.default_rng(seed)
    diff_idx = [i for i, t in enumerate(inputs) if any(t is d for d in diff)]
    for i, (t, k_in) in enumerate(zip(diff, diff_idx)):
        u = rng.random(t._data.shape)
        u /= max(np.linalg.norm(u), 1e-12)
        saved = t._data.copy()
        u_on_device = new_array(saved, u)

        def shifted(step):
            t._data[...] = saved + step * u_on_device
            try:
                with grad_mode.no_grad():
                    outs = _outputs(func, inputs)
                    return [_as_vector(outs[j], True) for j in positions]
            finally:
                t._data[...] = saved

        plus, minus = shifted(eps), shifted(-eps)
        analytic = _jvp_outputs(func, inputs, {k_in: u}, positions)
        for a, p, m, j in zip(analytic, plus, minus, positions):
            n = (p - m) / (2 * eps)
            if not np.allclose(a, n, rtol=rtol, atol=atol * float(u.sum())):
                return _fail(
                    f"Jacobian computed with forward mode mismatch for output {j} with "
                    f"respect to input {i} (fast mode: J u with random u):\nnumerical:{n}\n"
                    f"analytical:{a}\n", raise_exception)
    return True


def _forward_undefined_check(func, inputs, raise_exception):
    """A zero tangent and no tangent at all must give the same output tangents."""
    idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    rng = np.random.default_rng(1)
    with fwAD.dual_level():
        duals = list(inputs)
        for i in idx:
            t = inputs[i]
            duals[i] = fwAD.make_dual(t.detach(), Tensor._wrap(
                new_array(t._data, rng.random(t._data.shape), t._data.dtype)))
        for i in idx:
            kept = duals[i]
            duals[i] = fwAD.make_dual(inputs[i].detach(), zeros_like(inputs[i]))
            zero = [fwAD.unpack_dual(o).tangent for o in _outputs(func, duals)]
            duals[i] = inputs[i].detach()
            none = [fwAD.unpack_dual(o).tangent for o in _outputs(func, duals)]
            duals[i] = kept
            for j, (a, b) in enumerate(zip(zero, none)):
                if a is not None and b is not None and not np.allclose(to_host(a._data),
                                                                       to_host(b._data)):
                    return _fail(f"Mismatch in tangent values for output with index {j} when "
                                 f"input {i} has an undefined tangent: got {a} with a zero "
                                 f"tangent but {b} with none", raise_exception)
    return True


def _split_complex(func, inputs, complex_idx, part):
    """torch's treatment of complex inputs in forward mode: `func` of real leaves standing for
    the real (or imaginary) parts of the complex inputs, the other part held fixed."""
    leaves = list(inputs)
    for i in complex_idx:
        leaves[i] = Tensor._wrap(getattr(inputs[i]._data, part).copy()).requires_grad_()

    def wrapped(*args):
        args = list(args)
        for i in complex_idx:
            orig = inputs[i]
            args[i] = (args[i] + orig.imag * 1j if part == "real"
                       else orig.real + args[i] * 1j)
        return _tuple(func(*args))
    return wrapped, tuple(leaves)


def _forward_checks(func, inputs, eps, atol, rtol, raise_exception, fast_mode, undefined):
    """check_forward_ad: the JVPs against finite differences, complex inputs split into
    their imaginary and real parts as torch's (a complex tangent flowgrad's forward mode
    cannot carry raises its NotImplementedError)."""
    complex_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and
                   t.requires_grad and t._data.dtype.kind == "c"]
    cases = [(func, inputs)] if not complex_idx else [
        _split_complex(func, inputs, complex_idx, part) for part in ("imag", "real")]
    check = _forward_fast_check if fast_mode else _forward_slow_check
    for fn, ins in cases:
        diff = [t for t in ins if isinstance(t, Tensor) and t.requires_grad]
        if not check(fn, ins, diff, eps, atol, rtol, raise_exception):
            return False
        if undefined and not _forward_undefined_check(fn, ins, raise_exception):
            return False
    return True


def _batched(fn, stacked, what, raise_exception):
    """vmap(fn)(stacked), its errors reported as a failed check (as torch's)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with _levels.legacy_scope(True):  # (torch's checks use its legacy vmap)
                return vmap(fn)(stacked)
        except NotImplementedError:
            raise  # a transform flowgrad lacks, not a wrong rule
        except (RuntimeError, ValueError) as ex:  # flowgrad's kernels may raise either
            _fail(f"While computing batched gradients ({what}), got: {ex}\nvmap of the "
                  f"{what} must give what a loop gives; a backward or jvp rule that is not "
                  f"vmap-compatible (in-place writes into fresh tensors, .item(), data-"
                  f"dependent control flow) or a wrong Function.vmap rule causes this",
                  raise_exception)
            return None


def _compare_batched(result, expected, what, out_idx, raise_exception):
    for i, (r, e) in enumerate(zip(result, expected)):
        if not np.allclose(to_host(r._data), to_host(e._data)):
            return _fail(f"For output {out_idx} and input {i}: batched {what} computed using "
                         f"vmap does not match the one computed in a loop:\nvmap: {r}\n"
                         f"loop: {e}\n", raise_exception)
    return True


def _batched_grad_check(inputs, diff, output, out_idx, raise_exception):
    """vmap over two random cotangents of the vjp of `output` against a loop (torch's
    check_batched_grad)."""
    def vjp(v):
        gs = _grad(output, diff, v, retain_graph=True, allow_unused=True)
        return tuple(g if g is not None else zeros_like(t) for g, t in zip(gs, diff))

    rng = np.random.default_rng(2)
    cots = [Tensor._wrap(new_array(output._data, rng.standard_normal(output._data.shape),
                                   output._data.dtype)) for _ in range(2)]
    expected = [stack(list(parts)) for parts in zip(*[vjp(c) for c in cots])]
    result = _batched(vjp, stack(cots), "vjp", raise_exception)
    if result is None:
        return False
    return _compare_batched(result, expected, "grad", out_idx, raise_exception)


def _batched_forward_grad_check(func, inputs, raise_exception):
    """vmap over two random tangents of each input's jvp against a loop (torch's
    check_batched_forward_grad)."""
    rng = np.random.default_rng(3)
    for k, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad and x._data.dtype.kind in "fc"):
            continue

        def jvp(tangent, k=k, x=x):
            with fwAD.dual_level():
                duals = tuple(fwAD.make_dual(x.detach(), tangent) if i == k
                              else (t.detach() if isinstance(t, Tensor) else t)
                              for i, t in enumerate(inputs))
                res = []
                for o in _outputs(func, duals):
                    primal, tan = fwAD.unpack_dual(o)
                    res.append(tan if tan is not None else zeros_like(primal))
                return tuple(res)

        tans = [Tensor._wrap(new_array(x._data, rng.standard_normal(x._data.shape),
                                       x._data.dtype)) for _ in range(2)]
        expected = [stack(list(parts)) for parts in zip(*[jvp(t) for t in tans])]
        result = _batched(jvp, stack(tans), "jvp", raise_exception)
        if result is None or not _compare_batched(result, expected, "forward grad", k,
                                                  raise_exception):
            return False
    return True


def _zero_cotangent_check(outputs, diff, raise_exception, masked=False):
    """Zero cotangents must give zero gradients of each input's dtype and shape (torch's
    check that a backward multiplies by grad_output, which a Jacobian check of a scalar
    output misses); `masked`: zero to allclose's default tolerance, as torch's."""
    outs = [o for o in outputs if o.requires_grad]
    if not outs:
        return True
    zeros = [Tensor._wrap(new_zeros(o._data)) for o in outs]
    for g, t in zip(_grad(outs, diff, zeros, retain_graph=True, allow_unused=True), diff):
        if g is None:
            continue
        data = to_host(g._data)
        if np.any(np.abs(data) > 1e-8) if masked else np.any(data != 0):
            return _fail("backward not multiplied by grad_output", raise_exception)
        if g.dtype != t.dtype or tuple(g.shape) != tuple(t.shape):
            return _fail(f"grad is incorrect type or size: {g.dtype} {tuple(g.shape)} for an "
                         f"input of {t.dtype} {tuple(t.shape)}", raise_exception)
    return True


class _UndefinedGrad(Function):
    """Identity whose backward sends no gradient (torch's UndefinedGrad node): the Function
    before it sees None with set_materialize_grads(False), zeros otherwise."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return None


def _undefined_grad_check(func, inputs, diff, raise_exception):
    """Backward with undefined output gradients (all of them; then, with several outputs,
    one at a time, the others zero) must run and give None or zero gradients (torch's
    check_undefined_grad in backward mode)."""
    def fails(message):
        warn("Backwards compatibility: New undefined gradient support checking feature is "
             "enabled by default, but it may break existing callers of this function. If this "
             "is true for you, you can call this function with \"check_undefined_grad=False\" "
             "to disable the feature", stacklevel=4)
        return _fail(message, raise_exception)

    n = len(_diff_positions(func, inputs))
    for undefined in [None] + (list(range(n)) if n > 1 else []):
        outs = [o for o in _outputs(func, inputs) if o.requires_grad]
        outs = [_UndefinedGrad.apply(o) if undefined in (None, k) else o
                for k, o in enumerate(outs)]
        try:
            gs = _grad(outs, diff, [Tensor._wrap(new_zeros(o._data)) for o in outs],
                       allow_unused=True)
        except RuntimeError as e:
            try:
                return fails(f"Expected backward function to handle undefined output grads "
                             f"(got: {e}); a custom Function with "
                             f"set_materialize_grads(False) receives None for them")
            except GradcheckError as err:
                raise err from e
        if any(g is not None and np.any(to_host(g._data) != 0) for g in gs):
            return fails("Expected all input grads to be undefined or zero when all output "
                         "grads are undefined or zero; a custom Function with "
                         "set_materialize_grads(False) receives None for them")
    return True


def _check_options(options, *requires):
    """torch's refusals: the first two options (the modes) must not both be off, and each
    (option, needed) pair of names may be set only with `needed` set."""
    first, second = list(options)[:2]
    if not (options[first] or options[second]):
        raise AssertionError(f"Expected at least one of {first} or {second} to be True")
    for name, needed in requires:
        if options[name] and not options[needed]:
            raise AssertionError(f"Setting {name}=True requires {needed} to be True")


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Check the gradients of `func` at `inputs` against finite differences (torch's
    signature). `check_forward_ad` compares forward-mode JVPs with the numerical Jacobian
    too (skip the reverse check with `check_backward_ad=False`); `check_batched_grad` /
    `check_batched_forward_grad` compare vmapped vjps / jvps with a loop. Returns True, or
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
    >>> flow.autograd.gradcheck(lambda t: t.exp() * t, (x,), check_forward_ad=True,
    ...                         check_batched_grad=True)
    True
    """
    _check_options(dict(check_forward_ad=check_forward_ad, check_backward_ad=check_backward_ad,
                        check_batched_grad=check_batched_grad,
                        check_batched_forward_grad=check_batched_forward_grad),
                   ("check_batched_grad", "check_backward_ad"),
                   ("check_batched_forward_grad", "check_forward_ad"))
    inputs = _tuple(inputs)
    diff = _check_inputs(inputs)
    outputs = _outputs(func, inputs)
    if check_backward_ad:
        check = _fast_check if fast_mode else _slow_check
        for fn in _real_outputs(func, outputs):
            if not check(fn, inputs, diff, _outputs(fn, inputs), eps, atol, rtol,
                         raise_exception, nondet_tol=nondet_tol,
                         check_grad_dtypes=check_grad_dtypes):
                return False
    if check_forward_ad and not _forward_checks(func, inputs, eps, atol, rtol, raise_exception,
                                                fast_mode, check_undefined_grad):
        return False
    if check_batched_forward_grad and not _batched_forward_grad_check(func, inputs,
                                                                      raise_exception):
        return False
    if not check_backward_ad:
        return True
    if check_batched_grad:
        for j, o in enumerate(outputs):
            if o.requires_grad and not _batched_grad_check(inputs, diff, o, j,
                                                           raise_exception):
                return False
    if not _zero_cotangent_check(outputs, diff, raise_exception, bool(masked)):
        return False
    return not check_undefined_grad or _undefined_grad_check(func, inputs, diff,
                                                             raise_exception)


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
    _check_options(dict(check_fwd_over_rev=check_fwd_over_rev,
                        check_rev_over_rev=check_rev_over_rev,
                        check_undefined_grad=check_undefined_grad,
                        check_batched_grad=check_batched_grad),
                   ("check_undefined_grad", "check_rev_over_rev"),
                   ("check_batched_grad", "check_rev_over_rev"))
    inputs = _tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if grad_outputs is None:
        outs = _outputs(func, inputs)
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor._wrap(new_array(o._data, rng.standard_normal(o._data.shape),
                                   o._data.dtype)).requires_grad_()
            for o in outs if o.requires_grad)
    grad_outputs = _tuple(grad_outputs)
    go_diff = [i for i, g in enumerate(grad_outputs) if g.requires_grad]
    n_in = len(inputs)

    def first_derivative(*args):
        # the checks pass detached (dual) copies: restore which ones require grad, as torch's
        xs = tuple(x.requires_grad_() if i in diff_idx else x for i, x in enumerate(args[:n_in]))
        gos = tuple(g.requires_grad_() if i in go_diff else g
                    for i, g in enumerate(args[n_in:]))
        with grad_mode.enable_grad():  # also while gradcheck differences it under no_grad
            outs = [o for o in _outputs(func, xs) if o.requires_grad]
            diff = [xs[i] for i in diff_idx]
            gs = _grad(outs, diff, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, masked=masked)
