"""torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp on functions of tensors.

>>> import flowgrad as flow
>>> from flowgrad.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, flow.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])

Inputs are tensors or tuples of tensors (outputs likewise), as torch's. Each function makes
fresh leaves of the inputs, runs the function with grad enabled and differentiates it with
the engine; `create_graph=True` keeps the result differentiable, `strict=True` raises where
an output does not depend on an input (torch's check).
"""
from __future__ import annotations

from ..func import jacfwd, vmap
from ..ops.creation import eye
from ..ops.shape import stack
from ..tensor import Tensor
from . import engine, grad_mode

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _tuple(x, what, arg):
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: the {arg} must be a Tensor or a tuple of Tensors, but "
                            f"element {i} is {type(t).__name__}")
    return is_tuple, xs


def _grad_inputs(inputs, create_graph):
    return tuple(x.reshape(x.shape) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(True) for x in inputs)


def _undo(is_tuple, xs):
    return tuple(xs) if is_tuple else xs[0]


def _grads(outputs, inputs, grad_outputs, create_graph, strict, what):
    outs = [o for o in outputs if o.requires_grad]
    gos = None
    if grad_outputs is not None:
        gos = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if outs:
        grads = engine.grad(outs, inputs, gos, retain_graph=True, create_graph=create_graph,
                            allow_unused=True)
    else:
        grads = (None,) * len(inputs)
    result = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"{what}: the output of the user-provided function is independent of "
                    f"input {i}. This is not allowed in strict mode.")
            g = x.detach() * 0
        elif strict and create_graph and not g.requires_grad:
            raise RuntimeError(
                f"{what}: the gradient with respect to input {i} is independent of the "
                f"inputs. This is not allowed in strict mode when create_graph=True.")
        result.append(g if create_graph else g.detach())
    return tuple(result)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import vjp
    >>> vjp(lambda x: x * 2, flow.tensor([1.0, 2.0]), flow.tensor([1.0, 1.0]))
    (tensor([2., 4.]), tensor([2., 2.]))
    """
    in_tuple, xs = _tuple(inputs, "vjp", "inputs")
    with grad_mode.enable_grad():
        xs = _grad_inputs(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "vjp", "outputs of the user-provided function")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("vjp: the vector v can only be None if the user-provided "
                                   "function returns a single Tensor with a single element")
            vs = None
        else:
            _, vs = _tuple(v, "vjp", "v")
            _check_shapes(vs, outs, "vjp", "v", "outputs")
        grads = _grads(outs, xs, vs, create_graph, strict, "vjp")
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _undo(out_tuple, outs), _undo(in_tuple, grads)


def _check_shapes(vs, ts, what, vname, tname):
    if len(vs) != len(ts):
        raise RuntimeError(f"{what}: {vname} has {len(vs)} tensors but there are {len(ts)} "
                           f"{tname}; give one per {tname[:-1]}")
    for i, (a, b) in enumerate(zip(vs, ts)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"{what}: mismatch in shape: {vname}[{i}] has shape "
                               f"{tuple(a.shape)} but the {tname[:-1]} has shape "
                               f"{tuple(b.shape)}")


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product (by the double-vjp trick, as torch).

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import jvp
    >>> jvp(lambda x: x ** 2, flow.tensor([1.0, 3.0]), flow.tensor([1.0, 1.0]))
    (tensor([1., 9.]), tensor([2., 6.]))
    """
    in_tuple, xs = _tuple(inputs, "jvp", "inputs")
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("jvp: the vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single element")
        vs = (xs[0].detach() * 0 + 1,)
    else:
        _, vs = _tuple(v, "jvp", "v")
        _check_shapes(vs, xs, "jvp", "v", "inputs")
    with grad_mode.enable_grad():
        xs = _grad_inputs(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "jvp", "outputs of the user-provided function")
        us = tuple((o.detach() * 0).requires_grad_(True) for o in outs)
        gs = _grads(outs, xs, us, True, strict, "jvp")
        total = None
        for g, t in zip(gs, vs):
            if g.requires_grad:
                term = (g * t).sum()
                total = term if total is None else total + term
        if total is None:
            if strict:
                raise RuntimeError("jvp: the output of the user-provided function is "
                                   "independent of the inputs. This is not allowed in strict "
                                   "mode.")
            res = tuple(o.detach() * 0 for o in outs)
        else:
            res = _grads((total,), us, None, create_graph, False, "jvp")
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _undo(out_tuple, outs), _undo(out_tuple, res)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs: shape output.shape + input.shape, nested in tuples
    when inputs or outputs are tuples. `vectorize=True` computes all rows at once with vmap
    (`strategy='forward-mode'`: all columns with vmapped forward-mode AD).

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import jacobian
    >>> jacobian(lambda x: x.sum() * x, flow.tensor([1.0, 2.0]), vectorize=True,
    ...          strategy="forward-mode")
    tensor([[4., 1.],
            [2., 5.]])
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"jacobian: strategy must be 'reverse-mode' or 'forward-mode', got "
                         f"{strategy!r}")
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("jacobian: computing the Jacobian in forward-mode is only "
                                  "implemented with vectorize=True")
    in_tuple, xs = _tuple(inputs, "jacobian", "inputs")
    if strategy == "forward-mode":
        return _jacobian_forward(func, xs, in_tuple, create_graph, strict)
    with grad_mode.enable_grad():
        xs = _grad_inputs(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "jacobian", "outputs of the user-provided function")
        rows = []
        for i, o in enumerate(outs):
            n = o.numel()
            if vectorize and len(outs) == 1:
                basis = _eye(n, o).reshape(n, *o.shape)
                gs = vmap(lambda c: _grads(outs, xs, (c,), create_graph, strict, "jacobian"))(
                    basis)
            else:
                gs = _loop_rows(outs, xs, i, create_graph, strict)
            rows.append(tuple(g.reshape(*o.shape, *x.shape) for g, x in zip(gs, xs)))
    return _nest(rows, out_tuple, in_tuple)


def _eye(n, like):
    return eye(n, dtype=like.dtype, device=like.device)


def _loop_rows(outs, xs, i, create_graph, strict):
    """One vjp per element of output i, stacked: (numel, *input.shape) per input."""
    o = outs[i]
    per_row = []
    for k in range(o.numel()):
        e = (o.detach() * 0).reshape(-1)
        e = e + _eye(o.numel(), o)[k]
        cot = [e.reshape(o.shape) if j == i else q.detach() * 0 for j, q in enumerate(outs)]
        per_row.append(_grads(outs, xs, cot, create_graph, strict, "jacobian"))
    if not per_row:
        return tuple(x.detach().reshape(0, *x.shape) for x in xs)
    return tuple(stack([r[j] for r in per_row]) for j in range(len(xs)))


def _nest(rows, out_tuple, in_tuple):
    if out_tuple:
        return tuple(r if in_tuple else r[0] for r in rows)
    return rows[0] if in_tuple else rows[0][0]


def _jacobian_forward(func, xs, in_tuple, create_graph, strict):
    nums = tuple(range(len(xs)))
    out = jacfwd(func, argnums=nums)(*[x if create_graph else x.detach() for x in xs])
    if isinstance(out, tuple) and out and isinstance(out[0], tuple):
        return tuple(r if in_tuple else r[0] for r in out)
    return out if in_tuple else out[0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function: the Jacobian of its gradient.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import hessian
    >>> hessian(lambda x: (x ** 3).sum(), flow.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    in_tuple, xs = _tuple(inputs, "hessian", "inputs")

    def gradient(*ys):
        out = func(*ys)
        _, outs = _tuple(out, "hessian", "outputs of the user-provided function")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("hessian: the function given to hessian should return a "
                               "single Tensor with a single element")
        return _grads(outs, ys, None, True, strict, "hessian")
    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    if in_tuple:
        return res
    return res[0][0]


def _second(func, inputs, v, create_graph, strict, what, transpose):
    in_tuple, xs = _tuple(inputs, what, "inputs")
    _, vs = _tuple(v, what, "v")
    _check_shapes(vs, xs, what, "v", "inputs")
    with grad_mode.enable_grad():
        xs = _grad_inputs(xs, True)
        out = func(*xs)
        _, outs = _tuple(out, what, "outputs of the user-provided function")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"{what}: the function given to {what} should return a single "
                               f"Tensor with a single element")
        gs = _grads(outs, xs, None, True, strict, what)
        total = None
        for g, t in zip(gs, vs):
            if g.requires_grad:
                term = (g * t).sum()
                total = term if total is None else total + term
        if total is None:
            res = tuple(x.detach() * 0 for x in xs)
        else:
            res = _grads((total,), xs, None, create_graph, strict, what)
    value = outs[0] if create_graph else outs[0].detach()
    return value, _undo(in_tuple, res)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): vector-Hessian product of a scalar function.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import vhp
    >>> vhp(lambda x: (x ** 3).sum(), flow.tensor([1.0, 2.0]), flow.tensor([1.0, 1.0]))[1]
    tensor([ 6., 12.])
    """
    return _second(func, inputs, v, create_graph, strict, "vhp", False)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): Hessian-vector product (H is symmetric: the same as vhp).

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import hvp
    >>> hvp(lambda x: (x ** 3).sum(), flow.tensor([1.0, 2.0]), flow.tensor([1.0, 0.0]))[1]
    tensor([6., 0.])
    """
    return _second(func, inputs, v, create_graph, strict, "hvp", True)
