"""torch's generated vmap rule of a custom autograd.Function (generate_vmap_rule=True).

Under a vmap level the Function runs one level down as a Function of the whole batch
(`Vmapped<Name>`) whose forward, backward and jvp run the user's per example: autograd,
forward AD and an outer vmap below the level then see one Function of the physical tensors,
so a gradient taken outside the vmap goes through the user's backward (the per-example ops
of forward were run under no_grad: nothing outside could differentiate through them).
"""
from __future__ import annotations

from ..autograd import interpreter as _interpreter
from ..autograd.function import Function, FunctionCtx
from ..autograd.levels import VMAP_STACK
from ..tensor import Tensor
from .batched import batched_at, wrap, wrap_with_graph


def _phys(t, level):
    return (t._phys, 0) if batched_at(t, level) else (t, None)


def generated_apply(level, cls, args, kwargs):
    """The outputs (batched at `level`) of cls applied to `args` by the generated rule."""
    in_dims = [0 if batched_at(a, level) else None for a in args]
    inner = FunctionCtx()  # the user's ctx: per-example tensors, saved as (physical, dim)
    state = {}

    def forward(ctx, *phys):
        xs = [a if d is None or p is a._phys else wrap(p, level)  # (the caller's, as given)
              for a, p, d in zip(args, phys, in_dims)]
        with _interpreter.using_interpreter(level):
            if cls.setup_context is Function.setup_context:
                out = cls.forward(inner, *xs, **kwargs)
            else:
                out = cls.forward(*xs, **kwargs)
                cls.setup_context(inner, tuple(xs), out)
        single = not isinstance(out, tuple)
        pairs = [_phys(o, level) if isinstance(o, Tensor) else (o, None)
                 for o in ((out,) if single else out)]
        state["out_dims"] = [d for _, d in pairs]
        saved = [(None, None) if t is None else _phys(t, level) for t in inner._saved or ()]
        state["saved_dims"] = [d for _, d in saved]
        ctx.save_for_backward(*[t for t, _ in saved])
        outs = (out,) if single else out
        for o, (p, _) in zip(outs, pairs):
            if isinstance(o, Tensor) and id(o) in inner.non_differentiable:
                ctx.mark_non_differentiable(p)
            if isinstance(o, Tensor) and id(o) in inner.dirty:
                ctx.mark_dirty(p)
        ctx.set_materialize_grads(inner.materialize_grads)
        results = tuple(p for p, _ in pairs)
        return results[0] if single else results

    def backward(ctx, *grads):
        saved = ctx.saved_tensors
        g_dims = [None if g is None else d for g, d in zip(grads, state["out_dims"])]
        nones = []

        def per_example(*gs):
            lvl = VMAP_STACK[-1]
            inner._saved_forward = None
            inner._saved = tuple(t if d is None else wrap(t, lvl)
                                 for t, d in zip(saved, state["saved_dims"]))
            inner.needs_input_grad = ctx.needs_input_grad
            result = cls.backward(inner, *gs)
            result = result if isinstance(result, tuple) else (result,)
            nones[:] = [r is None for r in result]
            return tuple(r for r in result if r is not None)

        from .vmap import vmap
        got = iter(vmap(per_example, in_dims=tuple(g_dims), randomness=level.randomness)(
            *grads))
        result = []
        for k, none in enumerate(nones):
            g = None if none else next(got)
            if g is not None and k < len(in_dims) and in_dims[k] is None:
                g = g.sum(0)  # (an unbatched input: its examples' gradients add up)
            result.append(g)
        return tuple(result)

    def jvp(ctx, *tangents):
        tans = [None if t is None else wrap(t, level) if d == 0 else t
                for t, d in zip(tangents, in_dims)]
        with _interpreter.using_interpreter(level):
            out = cls.jvp(inner, *tans)
        single = not isinstance(out, tuple)
        result = []
        for t, d in zip((out,) if single else out, state["out_dims"]):
            if isinstance(t, Tensor) and batched_at(t, level):
                t = t._phys
            elif isinstance(t, Tensor) and d == 0:
                t = t.unsqueeze(0).expand(level.size, *t.shape)
            result.append(t)
        return result[0] if single else tuple(result)

    methods = {"forward": staticmethod(forward), "backward": staticmethod(backward),
               "generate_vmap_rule": True, "vmapped": cls}
    if getattr(cls, "jvp", Function.jvp) is not Function.jvp:
        methods["jvp"] = staticmethod(jvp)
    generated = type(f"Vmapped{cls.__name__}", (Function,), methods)
    phys = [_phys(a, level)[0] if isinstance(a, Tensor) else a for a in args]
    with _interpreter.using_interpreter(level.inner):
        out = generated.apply(*phys)
    single = not isinstance(out, tuple)
    result = []
    for o, d in zip((out,) if single else out, state["out_dims"]):
        if d is not None:
            o = wrap_with_graph(o, level)
        result.append(o)
    return result[0] if single else tuple(result)
