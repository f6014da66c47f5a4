"""torch.func's transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian,
linearize, functional_call.

Reverse mode runs the eager engine on fresh aliases of the differentiated inputs (inside a
`reverse_scope`, so the vmap levels around it record per-example); forward mode enters a
forward-AD level. Transforms nest: the aliases keep their inputs' history and tangents, and
gradients keep their graph when an outer transform differentiates them.
"""
from __future__ import annotations

import functools

from ..autograd import engine, forward_ad, grad_mode, levels
from ..autograd import interpreter as _interpreter
from ..autograd.function import FORWARD_AD_OFF
from ..autograd.levels import (
    ReverseLevel,
    computing,
    entered,
    reverse_scope,
)
from ..ops.creation import zeros_like
from ..return_types import sequence_of
from ..tensor import Tensor
from .batched import BatchedTensor
from .inputs import (
    _DETACHED_INPUTS,
    _detached,
    _differentiated,
    _fresh,
    _handed_out,
    _made_at,
    _meta_before_detach,
    _normal,
    _reaches_inputs,
)
from .vmap import vmap


def _flatten(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _flatten(t)]
    if isinstance(tree, dict):
        return [leaf for v in tree.values() for leaf in _flatten(v)]
    return [tree]


def _unflatten(tree, leaves):
    return _build(tree, iter(leaves))


def _build(tree, leaves):
    """`tree`'s structure with the next items of the iterator `leaves` in its leaves' places
    (a function of its own: a recursive closure is a reference cycle holding the leaves)."""
    if isinstance(tree, (tuple, list)):
        return sequence_of(type(tree), [_build(x, leaves) for x in tree])
    if isinstance(tree, dict):
        return {k: _build(v, leaves) for k, v in tree.items()}
    return next(leaves)


def _argnums(argnums, n, what):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise RuntimeError(f"{what}: argnums {argnums!r} out of range for {n} positional "
                               f"arguments; pass int(s) in [-{n}, {n - 1}]")
    return tuple(a % n for a in nums)


class _level_owns:
    """torch.func's grad, jacrev and jacfwd wrap every tensor of their positional arguments
    at their level, the differentiated ones and the others: while the function runs, the
    others are the level's own (writable in place, the caller seeing the write; `.data` and
    detach_() strip that level), not captures. Their stamp is the innermost level's for
    the block, and their own again after it."""

    def __init__(self, args, nums):
        self.tensors = [t for i, a in enumerate(args) if i not in nums
                        for t in _flatten(a) if isinstance(t, Tensor)]

    def __enter__(self):
        self.stamps = [getattr(t, "_lvl", None) for t in self.tensors]
        self.owned = [levels.OWNED.get(id(t)) for t in self.tensors]
        for t in self.tensors:
            levels.stamp(t, levels.TOKENS[-1])
            levels.OWNED[id(t)] = t

    def __exit__(self, *exc):
        for t, token, owned in reversed(list(zip(self.tensors, self.stamps, self.owned))):
            levels.stamp(t, token)
            if owned is None:
                levels.OWNED.pop(id(t), None)


def _of_argnums(func, args, argnums, what):
    """The arguments selected by `argnums`, and func as a function of those alone (the
    others the level's own while it runs: `_level_owns`)."""
    nums = _argnums(argnums, len(args), what)

    def of_selected(*selected):
        full = list(args)
        for i, v in zip(nums, selected):
            full[i] = v
        with _level_owns(args, nums):
            return func(*full)
    return [args[i] for i in nums], of_selected


def _grad_of(outputs, inputs, cotangents, keep, level):
    """Gradients (zeros where unused) of the transform `level`; with their graph when
    `keep`, else detached with their tangents (the engine keeps tangents only when creating
    the graph)."""
    detached = _DETACHED_INPUTS and [
        i for i, x in enumerate(inputs) if _meta_before_detach(x) is not None
        and not _reaches_inputs([x], inputs, level)]  # (a write since that gave x a history
    # at this level again (x.mul_(y) of a y made from x): torch differentiates x as it is)
    if detached:  # (torch.func's grad of an input its function detach_()ed: zeros when the
        # output requires grad at no level inside, else torch.autograd.grad's error)
        if not _reaches_inputs(outputs, inputs, level):
            return [zeros_like(x) for x in inputs]
        raise RuntimeError(
            f"grad: input {detached[0]} (shape {tuple(inputs[detached[0]].shape)}) does not "
            f"require grad: the function detach_()ed it; use detach() instead")
    create_graph = keep or bool(forward_ad.active_levels())
    if create_graph and _inside_a_trace():
        _refuse_traced_second_order()
    with computing(level):
        grads = engine.grad(outputs, inputs, cotangents, retain_graph=True,
                            create_graph=create_graph, allow_unused=True)
    result = []
    for g, x in zip(grads, inputs):
        if g is None:  # torch's zeros_like (x * 0 would be nan where x is inf)
            g = zeros_like(x) if type(x) is BatchedTensor else \
                Tensor._zeros(x._data.shape, x._data.dtype, x)
        result.append(g if keep else _detached(g))
    return result


def _inside_a_trace():
    """Whether nn.Graph's tracer is under the current interpreter (the transforms' levels
    wrap it: each level's `inner` is the one below)."""
    interp = _interpreter.current
    while interp is not None and interp is not _interpreter.AutogradInterpreter:
        if hasattr(interp, "program") and hasattr(interp, "value_of"):
            return True
        interp = getattr(interp, "inner", None)
    return False


def _refuse_traced_second_order():
    """A gradient a transform differentiates again (grad of grad, jvp or jacfwd of grad,
    hessian) inside nn.Graph's build: the traced gradient does not carry the transforms'
    levels, and the result was wrong (zeros, or the first call's values) with no error."""
    raise NotImplementedError(
        "nn.Graph: a function transform differentiating a gradient (grad of grad, jvp or "
        "jacfwd of grad, hessian) inside build() is not supported: the traced gradient does "
        "not carry the transform's levels, and its result would be wrong. Compute it outside "
        "build, or with flow.autograd.grad(..., create_graph=True) inside build "
        "(flow.compile runs such a function eagerly)")


def grad_and_value(func, argnums=0, has_aux=False):
    """(gradient of func's scalar output w.r.t. args[argnums], output) as torch.func.

    >>> import flowgrad as flow
    >>> from flowgrad.func import grad_and_value
    >>> grad_and_value(lambda x: (x * x).sum())(flow.tensor([1.0, 2.0]))
    (tensor([2., 4.]), tensor(5.))
    """
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad")
        with reverse_scope(), grad_mode.enable_grad():
            args = list(args)
            keep = any(_differentiated(x) for i in nums for x in _flatten(args[i]))
            for i in nums:
                args[i] = _unflatten(args[i], [_fresh(x) for x in _flatten(args[i])])
            leaves = [x for i in nums for x in _flatten(args[i])]
            with entered(ReverseLevel(keep)) as level, _level_owns(args, nums):
                _made_at(level, leaves)
                out = func(*args, **kwargs)
            aux = None
            if has_aux:
                if not (isinstance(out, tuple) and len(out) == 2):
                    raise RuntimeError("grad(f, has_aux=True): f must return a (output, aux) "
                                       "tuple")
                out, aux = out
            if not isinstance(out, Tensor) or out.numel() != 1:
                raise RuntimeError(
                    f"grad(f): expected f to return a scalar (one-element) tensor, got "
                    f"{'shape ' + str(tuple(out.shape)) if isinstance(out, Tensor) else type(out)}"
                    f"; use vjp or jacrev for non-scalar outputs")
            keep = level.keep = keep or levels.reaches_live_leaf([out])
            if out.requires_grad:
                grads = _grad_of((out,), leaves, None, keep, level)
            else:
                grads = [zeros_like(x) for x in leaves]  # torch's: no graph, no tangent
        it = iter(grads)
        g = tuple(_unflatten(args[i], [next(it) for _ in _flatten(args[i])]) for i in nums)
        g = g if isinstance(argnums, tuple) else g[0]
        value = out if keep else _detached(out)
        if has_aux:
            aux = _unflatten(aux, _handed_out(_flatten(aux)))
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The function computing func's gradient w.r.t. args[argnums] (torch.func.grad).

    >>> import flowgrad as flow
    >>> from flowgrad.func import grad
    >>> grad(grad(lambda x: x ** 3))(flow.tensor(2.0))
    tensor(12.)
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn): vjp_fn(cotangents) gives the cotangents of the primals.

    >>> import flowgrad as flow
    >>> from flowgrad.func import vjp
    >>> out, fn = vjp(lambda x: x * 3, flow.tensor([1.0, 2.0]))
    >>> fn(flow.tensor([1.0, 1.0]))
    (tensor([3., 3.]),)
    """
    scope = reverse_scope()
    with scope, grad_mode.enable_grad():
        keep = any(_differentiated(x) for x in _flatten(primals))
        fresh = _unflatten(list(primals), [_fresh(x) for x in _flatten(primals)])
        leaves = [x for x in _flatten(fresh) if isinstance(x, Tensor)]
        with entered(ReverseLevel(keep)) as level:
            _made_at(level, leaves)
            out = func(*fresh)
        aux = None
        if has_aux:
            out, aux = out
            aux = _unflatten(aux, _handed_out(_flatten(aux)))
    outs = _flatten(out)
    keep = level.keep = keep or levels.reaches_live_leaf(outs)

    def vjp_fn(*cotangents):
        cots = _flatten(cotangents[0] if len(cotangents) == 1 and not isinstance(out, Tensor)
                        else cotangents)
        if len(cots) != len(outs):
            raise RuntimeError(f"vjp_fn: expected {len(outs)} cotangents (one per output), "
                               f"got {len(cots)}")
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        with reverse_scope(scope.levels):
            if not pairs:
                grads = [zeros_like(x) for x in leaves]  # torch's: no graph, no tangent
            else:
                grads = _grad_of([o for o, _ in pairs], leaves, [c for _, c in pairs],
                                 keep or any(_differentiated(c) for _, c in pairs), level)
        return tuple(_unflatten(list(primals), grads))

    value = out if keep else _unflatten(out, [_detached(o) for o in outs])
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def _vmap_levels(t):
    levels_ = set()
    while type(t) is BatchedTensor:
        levels_.add(id(t._level))
        t = t._phys
    return levels_


def _batched_like(tangent, primal):
    """tangent batched at every vmap level the primal is (an expanded copy where it is not),
    so a write through a view of jvp's input writes per example into its tangent as into the
    primal (vmap(jacfwd(f)): jacfwd's basis is the same for every example of the outer vmap;
    the write reached the view's tangent alone, and the Jacobian missed it, silently)."""
    if not isinstance(tangent, Tensor) or not isinstance(primal, Tensor) or \
            _vmap_levels(primal) <= _vmap_levels(tangent):
        return tangent
    zeros = primal.detach().isnan().to(tangent.dtype) * 0  # (batched where the primal is:
    return tangent + zeros  # zeros_like is not; finite where the primal is not)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents) by forward-mode AD (torch.func.jvp).

    >>> import flowgrad as flow
    >>> from flowgrad.func import jvp
    >>> jvp(lambda x: x.sin(), (flow.tensor(0.0),), (flow.tensor(2.0),))
    (tensor(0.), tensor(2.))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise RuntimeError("jvp(f, primals, tangents): primals and tangents must be tuples")
    if len(primals) != len(tangents):
        raise RuntimeError(f"jvp: got {len(primals)} primals but {len(tangents)} tangents; "
                           f"give one tangent per primal")
    flat_primals, flat_tangents = _flatten(list(primals)), _flatten(list(tangents))
    if len(flat_primals) != len(flat_tangents):  # (pytrees of tensors: dicts, lists, ...)
        raise RuntimeError(f"jvp: the primals hold {len(flat_primals)} tensors and the "
                           f"tangents {len(flat_tangents)}; give tangents of the primals' "
                           f"structure")
    flat_tangents = [_batched_like(t, p) for p, t in zip(flat_primals, flat_tangents)]
    off, FORWARD_AD_OFF[0] = FORWARD_AD_OFF[0], 0  # (on again inside a Function's forward,
    try:  # as torch's)
        return _jvp(func, primals, flat_primals, flat_tangents, has_aux)
    finally:
        FORWARD_AD_OFF[0] = off


def _jvp(func, primals, flat_primals, flat_tangents, has_aux):
    with forward_ad.transform_level(), entered(forward_ad._LEVELS[-1]):
        # the level's own inputs, which in-place ops may write (torch's), not the frozen
        # views of captured primals that Op.__call__ stamps them as
        duals = _unflatten(list(primals), [
            levels.stamp(forward_ad.make_dual(_normal(p), t), levels.TOKENS[-1])
            for p, t in zip(flat_primals, flat_tangents)])
        out = func(*duals)
        aux = None
        if has_aux:
            out, aux = out
        flat = _flatten(out)
        for o in flat:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"jvp(f, primals, tangents): expected f(*primals) to return "
                                   f"only tensors, got unsupported type {type(o)}")
        pairs = [forward_ad.unpack_dual(o) for o in flat]
        prim = [p for p, _ in pairs]
        tang = [t if t is not None else zeros_like(p) for p, t in pairs]
    prim, tang = _handed_out(prim), _handed_out(tang)
    if has_aux:
        aux = _unflatten(aux, _handed_out(_flatten(aux)))
    result = (_unflatten(out, prim), _unflatten(out, tang))
    return result + (aux,) if has_aux else result


def linearize(func, *primals):
    """(func(*primals), jvp_fn) with jvp_fn(*tangents) = J tangents."""
    out = func(*primals)
    return out, lambda *tangents: jvp(func, primals, tangents)[1]


def _bases(xs):
    """A basis of all of xs together: per x, a batch of `total` tangents (in x's dtype) that
    are zero except for x's own block of rows, the identity."""
    from ..ops.creation import eye, zeros
    from ..ops.shape import cat

    total, offset, out = sum(x.numel() for x in xs), 0, []
    for x in xs:
        n = x.numel()
        spec = dict(dtype=x.dtype, device=x.device)
        block = eye(n, **spec) if n == total else cat(
            [zeros(offset, n, **spec), eye(n, **spec), zeros(total - offset - n, n, **spec)])
        out.append(block.reshape(total, *x.shape))
        offset += n
    return out


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of func w.r.t. args[argnums] by reverse mode: one vmapped vjp.

    >>> import flowgrad as flow
    >>> from flowgrad.func import jacrev
    >>> jacrev(lambda x: x ** 2)(flow.tensor([1.0, 3.0]))
    tensor([[2., 0.],
            [0., 6.]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        diff, f = _of_argnums(func, args, argnums, "jacrev")
        res = vjp(f, *diff, has_aux=has_aux)
        out, fn = res[:2]
        outs = _flatten(out)
        total = sum(o.numel() for o in outs)
        if total:  # one vmapped vjp over a basis of every output together, as torch's
            # (one per output ran backward once per output)
            per_in = vmap(lambda *cots: fn(_unflatten(out, list(cots))
                                           if not isinstance(out, Tensor) else cots[0]))(
                *_bases(outs))
        jacs, offset = [], 0
        for o in outs:
            n = o.numel()
            if n == 0:  # (its rows of the Jacobian are empty)
                jacs.append(tuple(_unflatten(x, [leaf.new_zeros((*o.shape, *leaf.shape))
                                                 for leaf in _flatten(x)]) for x in diff))
                continue
            jacs.append(tuple(  # (each argument a pytree of tensors: a dict of parameters)
                _unflatten(x, [g[offset:offset + n].reshape((*o.shape, *leaf.shape))
                               for g, leaf in zip(_flatten(per), _flatten(x))])
                for per, x in zip(per_in, diff)))
            offset += n
        jac = [j if isinstance(argnums, tuple) else j[0] for j in jacs]
        jac = jac[0] if isinstance(out, Tensor) else _unflatten(out, jac)
        return (jac, res[2]) if has_aux else jac
    return wrapper


def _real_only(tensors, what):
    for i, t in enumerate(tensors):
        if isinstance(t, Tensor) and t.is_complex():
            raise RuntimeError(
                f"jacfwd: Expected all {what} to be real but received complex tensor at "
                f"flattened input idx: {i} (as torch.func.jacfwd); use jvp with complex "
                f"tangents, or jacrev")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of func w.r.t. args[argnums] by forward mode: one vmapped jvp.

    >>> import flowgrad as flow
    >>> from flowgrad.func import jacfwd
    >>> jacfwd(lambda x: x.sum() * x)(flow.tensor([1.0, 2.0]))
    tensor([[4., 1.],
            [2., 5.]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        diff, f = _of_argnums(func, args, argnums, "jacfwd")
        leaves = [_flatten(x) for x in diff]  # (each argument a pytree of tensors)
        flat = [leaf for ls in leaves for leaf in ls]
        _real_only(flat, "inputs")  # (a basis of real tangents misses imaginary directions)

        def push(*tangents):
            it = iter(tangents)
            tans = [_unflatten(y, [next(it) for _ in leaves[n]]) for n, y in enumerate(diff)]
            r = jvp(f, tuple(diff), tuple(tans), has_aux=has_aux)
            return (r[1], r[2]) if has_aux else r[1]
        # one vmapped jvp over a basis of every input together, so func runs once, as
        # torch's (run once per input, a write into an input was seen by the later runs)
        r = vmap(push, randomness=randomness)(*_bases(flat))
        tang, aux = (r[0], r[1]) if has_aux else (r, None)
        _real_only(_flatten(tang), "outputs")
        if has_aux:  # (the same per basis vector: keep the first)
            aux = _unflatten(r[1], [a[0] if isinstance(a, Tensor) else a
                                    for a in _flatten(r[1])])
        template, per_arg, offset = tang, [], 0
        for ls in leaves:
            per_leaf = []
            for leaf in ls:
                n = leaf.numel()
                per_leaf.append([t[offset:offset + n].movedim(0, -1).reshape(
                    (*t.shape[1:], *leaf.shape)) for t in _flatten(tang)])
                offset += n
            per_arg.append(per_leaf)
        outs = [tuple(_unflatten(x, [jac[j] for jac in per_leaf])
                      for x, per_leaf in zip(diff, per_arg))
                for j in range(len(per_arg[0][0]))]
        outs = [o if isinstance(argnums, tuple) else o[0] for o in outs]
        jac = outs[0] if isinstance(template, Tensor) else _unflatten(template, outs)
        return (jac, aux) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """The Hessian: jacfwd(jacrev(func)) (forward over reverse), as torch.func.

    >>> import flowgrad as flow
    >>> from flowgrad.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(flow.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call `module` with its parameters and buffers replaced by the given tensors.

    >>> import flowgrad as flow
    >>> from flowgrad.func import functional_call
    >>> m = flow.nn.Linear(2, 1, bias=False)
    >>> functional_call(m, {"weight": flow.ones(1, 2)}, (flow.tensor([[1.0, 2.0]]),))
    tensor([[3.]])
    """
    # one implementation with nn.utils.stateless's, as torch's: tied weights take the given
    # value under every name, a parametrized name goes through its right_inverse
    from ..nn.utils.stateless import _functional_call

    return _functional_call(module, parameter_and_buffer_dicts, args, kwargs,
                            tie_weights=tie_weights, strict=strict)




def batched_grad(grad_fn, outputs, inputs, grad_outputs, retain_graph, create_graph,
                 allow_unused, materialize_grads):
    """autograd.grad(..., is_grads_batched=True): one backward vmapped over dim 0 of the
    grad_outputs (the graph, recorded outside, runs its rules on batched cotangents)."""
    gos = grad_outputs if isinstance(grad_outputs, (tuple, list)) else (grad_outputs,)
    if any(g is None for g in gos):
        raise RuntimeError("grad(is_grads_batched=True): every grad_output must be a tensor "
                           "whose dim 0 is the batch")
    inputs_t = inputs if isinstance(inputs, (tuple, list)) else (inputs,)

    unused = []  # per input, whether it got no gradient (the same for every batch entry)

    def one(*g):
        res = grad_fn(outputs, inputs, g, retain_graph=retain_graph, create_graph=create_graph,
                      allow_unused=True)
        unused[:] = [r is None for r in res]
        for r, x in zip(res, inputs_t):
            if r is None:
                _missing(x, allow_unused or materialize_grads)
        return tuple(r for r in res if r is not None)  # (vmap returns tensors only)
    used = iter(vmap(one)(*gos))
    # (materialized as torch's: zeros of the input's shape, without the batch dim)
    return tuple((zeros_like(x).requires_grad_(bool(create_graph)) if materialize_grads
                  else None) if u else next(used) for u, x in zip(unused, inputs_t))


engine.batched_grad = batched_grad  # autograd.grad(is_grads_batched=True) calls it


def _missing(x, allow_unused):
    if not allow_unused:
        raise RuntimeError(f"One of the differentiated Tensors (shape {tuple(x.shape)}) appears "
                           f"to not have been used in the graph. Set allow_unused=True if this "
                           f"is the desired behavior.")
