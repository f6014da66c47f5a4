"""torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp on functions of tensors.

>>> import flowgrad as flow
>>> from flowgrad.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, flow.tensor([1.0, 2.0]))
tensor([[2., 0.],
        [0., 4.]])

Inputs are tensors or tuples of tensors (outputs and v likewise; a list is refused, as torch
refuses it). Each function makes fresh leaves of the inputs, runs the function with grad
enabled and differentiates it with the engine, step for step as torch's own: `create_graph=True`
keeps the result differentiable, `strict=True` raises where an output does not depend on an
input (or, with create_graph, where a derivative is constant), and the same argument checks
raise the same exception types.
"""
from __future__ import annotations

from ..func import jacfwd
from ..ops.creation import eye, zeros, zeros_like
from ..ops.shape import stack
from ..tensor import Tensor
from . import engine, grad_mode, levels

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _tuple(x, what, arg):
    """(was x a tuple, x as a tuple of Tensors); like torch, a list is not a tuple."""
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            where = f"element {i} is" if is_tuple else "it is"
            raise TypeError(f"{what}: the {arg} must be a Tensor or a tuple of Tensors, but "
                            f"{where} {type(t).__name__}")
    return is_tuple, xs


def _grad_inputs(inputs, create_graph, need_graph=True):
    """Fresh leaves (a view where create_graph keeps the caller's graph), as torch's."""
    if create_graph:
        return tuple(x.view_as(x) if x.requires_grad else
                     x.detach().requires_grad_(need_graph) for x in inputs)
    return tuple(x.detach().requires_grad_(need_graph) for x in inputs)


def _post(xs, create_graph):
    if isinstance(xs, Tensor):
        return xs if create_graph else xs.detach()
    return tuple(_post(x, create_graph) for x in xs)


def _undo(is_tuple, xs):
    return tuple(xs) if is_tuple else xs[0]


def _check_v(vs, ts, is_tuple, what, tname):
    if len(vs) != len(ts):
        if is_tuple:
            raise RuntimeError(f"{what}: v is a tuple of {len(vs)} tensors but there are "
                               f"{len(ts)} {tname}; give one per {tname[:-1]}")
        raise RuntimeError(f"{what}: v has {len(vs)} tensors but the {tname[:-1]} is a single "
                           f"Tensor; give a single Tensor")
    for i, (a, b) in enumerate(zip(vs, ts)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"{what}: v[{i}] has shape {tuple(a.shape)} but the "
                               f"{tname[:-1]} has shape {tuple(b.shape)}; they must match")


def _require_grad(ts, kind, strict, what):
    """torch's _check_requires_grad: strict-mode checks on outputs and first derivatives."""
    if not strict:
        return
    for i, t in enumerate(ts):
        if t is None:
            raise RuntimeError(f"{what}: the output of the user-provided function is "
                               f"independent of input {i}. This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "outputs":
            raise RuntimeError(f"{what}: output {i} of the user-provided function does not "
                               f"require gradients. The outputs must be computed in a "
                               f"differentiable manner from the input in strict mode.")
        if kind == "grad_inputs":
            raise RuntimeError(f"{what}: the gradient with respect to input {i} is independent "
                               f"of the inputs of the user-provided function. This is not "
                               f"allowed in strict mode.")
        raise RuntimeError(f"{what}: while computing the hessian, the jacobian of the "
                           f"user-provided function with respect to input {i} is independent "
                           f"of the input. This is not allowed in strict mode.")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False,
                   is_grads_batched=False):
    """engine.grad over the outputs that require grad (None per input when none does)."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    keep = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not keep:
        return (None,) * len(inputs)
    outs, gos = zip(*keep)
    return engine.grad(outs, inputs, gos, retain_graph=True, create_graph=create_graph,
                       allow_unused=True, is_grads_batched=is_grads_batched)


_FILL_MSG = {
    "back": "the output of the user-provided function is independent of input {i}",
    "back_trick": "the gradient with respect to the input is independent of entry {i} in "
                  "the grad_outputs when using the double backward trick to compute forward "
                  "mode gradients",
    "double_back": "the jacobian of the user-provided function is independent of input {i}",
    "double_back_trick": "the hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian",
}


def _fill(grads, refs, strict, create_graph, stage, what):
    """torch's _fill_in_zeros: zeros for None (or a strict-mode error)."""
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(f"{what}: {_FILL_MSG[stage].format(i=i)}. This is not "
                                   f"allowed in strict mode.")
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            which = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"{what}: the {which} of the user-provided function is "
                               f"independent of input {i}. This is not allowed in strict "
                               f"mode when create_graph=True.")
        res.append(g)
    return tuple(res)


def _prep_v(v, create_graph):
    return tuple(t.view_as(t) if create_graph and t.requires_grad else t.detach() for t in v)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import vjp
    >>> vjp(lambda x: x * 2, flow.tensor([1.0, 2.0]), flow.tensor([1.0, 1.0]))
    (tensor([2., 4.]), tensor([2., 2.]))
    """
    with grad_mode.enable_grad():
        in_tuple, xs = _tuple(inputs, "vjp", "inputs")
        xs = _grad_inputs(xs, create_graph)
        out_tuple, outs = _tuple(func(*xs), "vjp", "outputs of the user-provided function")
        _require_grad(outs, "outputs", strict, "vjp")
        if v is not None:
            _, vs = _tuple(v, "vjp", "v")
            vs = _prep_v(vs, create_graph)
            _check_v(vs, outs, out_tuple, "vjp", "outputs")
        else:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("vjp: the vector v can only be None if the user-provided "
                                   "function returns a single Tensor with a single element")
            vs = None
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        grads = _autograd_grad(outs, xs, vs, create_graph=create_graph)
        grads = _fill(grads, xs, strict, create_graph, "back", "vjp")
    return _undo(out_tuple, _post(outs, create_graph)), _undo(in_tuple, _post(grads, create_graph))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product (by the double-vjp trick, as torch).

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import jvp
    >>> jvp(lambda x: x ** 2, flow.tensor([1.0, 3.0]), flow.tensor([1.0, 1.0]))
    (tensor([1., 9.]), tensor([2., 6.]))
    """
    with grad_mode.enable_grad():
        in_tuple, xs = _tuple(inputs, "jvp", "inputs")
        xs = _grad_inputs(xs, create_graph)
        if v is not None:
            _, vs = _tuple(v, "jvp", "v")
            vs = _prep_v(vs, create_graph)
            _check_v(vs, xs, in_tuple, "jvp", "inputs")
        else:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("jvp: the vector v can only be None if the input to the "
                                   "user-provided function is a single Tensor with a single "
                                   "element")
            vs = None
        out_tuple, outs = _tuple(func(*xs), "jvp", "outputs of the user-provided function")
        _require_grad(outs, "outputs", strict, "jvp")
        us = tuple(zeros_like(o, requires_grad=True) for o in outs)
        grad_inputs = _autograd_grad(outs, xs, us, create_graph=True)
        _require_grad(grad_inputs, "grad_inputs", strict, "jvp")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _autograd_grad(grad_inputs, us, vs, create_graph=create_graph)
        res = _fill(res, outs, strict, create_graph, "back_trick", "jvp")
    return _undo(out_tuple, _post(outs, create_graph)), _undo(out_tuple, _post(res, create_graph))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs: shape output.shape + input.shape, nested in tuples
    when inputs or outputs are tuples. `vectorize=True` computes all rows at once as one
    batched backward (`strategy='forward-mode'`: all columns with vmapped forward-mode AD).

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import jacobian
    >>> jacobian(lambda x: x.sum() * x, flow.tensor([1.0, 2.0]), vectorize=True,
    ...          strategy="forward-mode")
    tensor([[4., 1.],
            [2., 5.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(f"jacobian: strategy must be 'forward-mode' or 'reverse-mode', "
                             f"got {strategy!r}")
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("jacobian: create_graph=True and "
                                      "strategy='forward-mode' are not supported together; set "
                                      "create_graph=False or strategy='reverse-mode'")
        if strict:
            raise RuntimeError("jacobian: strict=True and strategy='forward-mode' are not "
                               "supported together; set strict=False or "
                               "strategy='reverse-mode'")
        in_tuple, xs = _tuple(inputs, "jacobian", "inputs")
        if not vectorize:
            raise NotImplementedError("jacobian: computing the Jacobian in forward-mode is "
                                      "only implemented with vectorize=True")
        return _jacobian_forward(func, xs, in_tuple)
    with grad_mode.enable_grad():
        in_tuple, xs = _tuple(inputs, "jacobian", "inputs")
        xs = _grad_inputs(xs, create_graph)
        out_tuple, outs = _tuple(func(*xs), "jacobian", "outputs of the user-provided function")
        _require_grad(outs, "outputs", strict, "jacobian")
        if vectorize:
            if strict:
                raise RuntimeError("jacobian: strict=True and vectorize=True are not supported "
                                   "together; set strict=False or vectorize=False")
            rows = _jacobian_vectorized(outs, xs, create_graph)
        else:
            rows = tuple(_jacobian_rows(i, o, xs, create_graph, strict)
                         for i, o in enumerate(outs))
        rows = _post(rows, create_graph)
    return _nest(rows, out_tuple, in_tuple)


def _jacobian_vectorized(outs, xs, create_graph):
    """All rows as one batched backward: the standard basis of the flattened outputs, split."""
    numels = [o.numel() for o in outs]
    total = sum(numels)
    basis, start = [], 0
    for o, n in zip(outs, numels):
        b = zeros(total, n, dtype=o.dtype, device=o.device)
        if n:
            b[start:start + n] = _eye(n, o)
        basis.append(b)
        start += n
    flat = tuple(o.reshape(-1) for o in outs)
    gs = _autograd_grad(flat, xs, tuple(basis), create_graph=create_graph,
                        is_grads_batched=True)
    gs = [zeros_like(x).expand(total, *x.shape) if g is None else g for g, x in zip(gs, xs)]
    per_input = []
    for g, x in zip(gs, xs):
        parts, start = [], 0
        for o, n in zip(outs, numels):
            parts.append(g[start:start + n].reshape((*o.shape, *x.shape)))
            start += n
        per_input.append(parts)
    return tuple(zip(*per_input))


def _eye(n, like):
    return eye(n, dtype=like.dtype, device=like.device)


def _jacobian_rows(i, out, xs, create_graph, strict):
    """One backward per element of output i, stacked: out.shape + input.shape per input."""
    per_input = tuple([] for _ in xs)
    flat = out.reshape(-1)
    for k in range(out.numel()):
        gs = _autograd_grad((flat[k],), xs, create_graph=create_graph)
        for j, (g, x) in enumerate(zip(gs, xs)):
            if g is None:
                if strict:
                    raise RuntimeError(f"jacobian: output {i} of the user-provided function is "
                                       f"independent of input {j}. This is not allowed in "
                                       f"strict mode.")
                g = zeros_like(x)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(f"jacobian: the jacobian of the user-provided function is "
                                   f"independent of input {i}. This is not allowed in strict "
                                   f"mode when create_graph=True.")
            per_input[j].append(g)
    if not out.numel():
        raise RuntimeError(f"jacobian: output {i} of the user-provided function has no "
                           f"elements (shape {tuple(out.shape)}); torch's stack of its empty "
                           f"list of rows fails too, use vectorize=True")
    return tuple(stack(rows).reshape((*out.shape, *x.shape)) for rows, x in zip(per_input, xs))


def _nest(rows, out_tuple, in_tuple):
    if out_tuple:
        return tuple(r if in_tuple else r[0] for r in rows)
    return rows[0] if in_tuple else rows[0][0]


def _jacobian_forward(func, xs, in_tuple):
    """All columns by vmapped forward AD: jacfwd, whose levels are legacy ones here (torch's
    legacy vmap and plain dual level: no functorch transform around `func`)."""
    def plain(*ys):
        with levels.legacy_scope(False):
            return func(*ys)

    nums = tuple(range(len(xs)))
    with levels.legacy_scope(True):
        out = jacfwd(plain, argnums=nums)(*xs)  # not detached: torch keeps the graph to xs
    # torch's forward-mode jacobian hands tuple inputs' blocks back in lists
    if isinstance(out, tuple) and out and isinstance(out[0], tuple):
        return [list(r) for r in out] if in_tuple else tuple(r[0] for r in out)
    return list(out) if in_tuple else out[0]


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
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(f"hessian: outer_jacobian_strategy must be 'forward-mode' or "
                             f"'reverse-mode', got {outer_jacobian_strategy!r}")

    def single_output(*ys):
        out = func(*ys)
        out_tuple, outs = _tuple(out, "hessian", "outputs of the user-provided function")
        _require_grad(outs, "outputs", strict, "hessian")
        if out_tuple:
            raise RuntimeError("hessian: the function given to hessian should return a single "
                               "Tensor, not a tuple")
        if out.numel() != 1:
            raise RuntimeError(f"hessian: the Tensor returned by the function given to hessian "
                               f"should contain a single element, but has shape "
                               f"{tuple(out.shape)}")
        return out.squeeze()

    def gradient(*ys):
        if outer_jacobian_strategy == "forward-mode":
            ys = tuple(y.requires_grad_(True) for y in ys)
        jac = jacobian(single_output, ys, create_graph=True)
        _require_grad(jac, "jacobian", strict, "hessian")
        return jac

    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    if in_tuple:
        return res
    return res[0][0]


def _second(func, inputs, v, create_graph, strict, what):
    """vhp and hvp, step for step as torch's (hvp by the double-backward trick)."""
    with grad_mode.enable_grad():
        in_tuple, xs = _tuple(inputs, what, "inputs")
        xs = _grad_inputs(xs, create_graph)
        if v is not None:
            _, vs = _tuple(v, what, "v")
            vs = _prep_v(vs, create_graph)
            _check_v(vs, xs, in_tuple, what, "inputs")
        else:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError(f"{what}: the vector v can only be None if the input to the "
                                   f"user-provided function is a single Tensor with a single "
                                   f"element")
            vs = None
        out_tuple, outs = _tuple(func(*xs), what, "outputs of the user-provided function")
        _require_grad(outs, "outputs", strict, what)
        if out_tuple:
            raise RuntimeError(f"{what}: the function given to {what} should return a single "
                               f"Tensor, not a tuple")
        if outs[0].numel() != 1:
            raise RuntimeError(f"{what}: the Tensor returned by the function given to {what} "
                               f"should contain a single element, but has shape "
                               f"{tuple(outs[0].shape)}")
        jac = _autograd_grad(outs, xs, create_graph=True)
        _require_grad(jac, "jacobian", strict, what)
        if what == "hvp":
            grad_jac = tuple(zeros_like(x, requires_grad=True) for x in xs)
            double_back = _autograd_grad(jac, xs, grad_jac, create_graph=True)
            _require_grad(jac, "hessian", strict, what)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        if what == "hvp":
            res = _autograd_grad(double_back, grad_jac, vs, create_graph=create_graph)
            res = _fill(res, xs, strict, create_graph, "double_back_trick", what)
        else:
            res = _autograd_grad(jac, xs, vs, create_graph=create_graph)
            res = _fill(res, xs, strict, create_graph, "double_back", what)
    return _post(outs[0], create_graph), _undo(in_tuple, _post(res, create_graph))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): vector-Hessian product of a scalar function.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import vhp
    >>> vhp(lambda x: (x ** 3).sum(), flow.tensor([1.0, 2.0]), flow.tensor([1.0, 1.0]))[1]
    tensor([ 6., 12.])
    """
    return _second(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): Hessian-vector product, by the double-backward trick as torch's.

    >>> import flowgrad as flow
    >>> from flowgrad.autograd.functional import hvp
    >>> hvp(lambda x: (x ** 3).sum(), flow.tensor([1.0, 2.0]), flow.tensor([1.0, 0.0]))[1]
    tensor([6., 0.])
    """
    return _second(func, inputs, v, create_graph, strict, "hvp")
