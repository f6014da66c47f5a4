"""More step builders of the program fuzzer (`program_fuzz.py`), drawn from
`program_fuzz.AUTOGRAD_SEEDS` on: autograd's own features rather than ops.

- grad-mode regions around one op: `with m.no_grad(), m.enable_grad(): ...`,
  `set_grad_enabled(False)`, `inference_mode()` (inference tensors), no_grad as a decorator,
  and bare `m.set_grad_enabled(False)` / `(True)` statements that last over later steps;
- leaves: requires_grad_ toggles, `.grad = None`, `.grad.zero_()`, `.grad` set or written,
  `x.data = ...` (another shape too), `.grad` of a non-leaf read into the pool, `detach()` or
  `clone()` then an in-place write;
- hooks: handles bound to pool names and removed later, hooks returning None or writing the
  gradient in place, `register_post_accumulate_grad_hook` on leaves;
- gradients: `backward(inputs=[...])`, `backward(gradient=...)` of a non-scalar,
  `autograd.grad(..., allow_unused=True, retain_graph=..., materialize_grads=...)`,
  `autograd.backward(tensors, grad_tensors)`, a loss bound to the pool and backwarded later
  (once, twice: a freed graph), `utils.checkpoint.checkpoint` of a lambda over pool tensors;
- the custom autograd.Functions of `PRELUDE` (saving an input, saving an output with a
  non-differentiable second output, an in-place one with mark_dirty), which both runs define
  before the first step.

From program_fuzz.AUTOGRAD3_SEEDS on, `b_autograd3` also draws a view of a view written in
place while a hook or retain_grad on its base waits, a second autograd.grad through a graph
part a first one freed (refused where a node there saved a tensor), and create_graph=True
through an in-place write (the final backward then differentiates that gradient).

Left out of the draw, as differences judged and kept: `x.data = y` with y of another shape
while a graph recorded x (torch checks each gradient against the shape recorded when the
node or the leaf's AccumulateGrad consuming it was made: it sums to that shape or refuses;
flowgrad fits a gradient to the producer's recorded input shape; seeds 11400045, 11400128,
11400145 as first drawn), `.data =` on a view (flowgrad then refuses an in-place write with
autograd through it, torch writes: seeds 11400488, 11400818), and `backward(gradient=v)` with
v sharing a live tensor's memory (see b_backward2).
"""
from __future__ import annotations

import torch

PRELUDE = (
    "class Cube(m.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        ctx.save_for_backward(x)\n"
    "        return x * x * x\n"
    "    @staticmethod\n"
    "    def backward(ctx, g):\n"
    "        x, = ctx.saved_tensors\n"
    "        return g * 3.0 * x * x\n"
    "class ExpTwo(m.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        y = x.exp()\n"
    "        s = (x > 0).to(x.dtype)\n"
    "        ctx.mark_non_differentiable(s)\n"
    "        ctx.save_for_backward(y)\n"
    "        return y, s\n"
    "    @staticmethod\n"
    "    def backward(ctx, gy, gs):\n"
    "        y, = ctx.saved_tensors\n"
    "        return gy * y\n"
    "class Double_(m.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x):\n"
    "        x.mul_(2.0)\n"
    "        ctx.mark_dirty(x)\n"
    "        return x\n"
    "    @staticmethod\n"
    "    def backward(ctx, g):\n"
    "        return g * 2.0\n"
)


def _non_view(g, names):
    """Hooks go on non-views only (program_steps._HOOK_NOTE: torch 2.13 crashes on some)."""
    return g.pick([n for n in names if not g.ns[n]._is_view()])


def _leaves(g, grad=None):
    return [n for n in g.tensors(grad=grad) if g.peek(f"{n}.is_leaf")]


def _handles(g):
    return [n for n in g.names if isinstance(g.ns.get(n), torch.utils.hooks.RemovableHandle)]


def _unary(g, a):
    return g.rng.choice([f"{a}.exp()", f"{a} * 2.0", f"{a}.sin()", f"{a} * {a}",
                         f"{a}.tanh()", f"{a}.sum()", f"{a}.clone()", f"{a}[...]"])


def b_mode(g):
    """One op in a grad-mode region, or a grad mode switched for the steps that follow."""
    a = g.pick(g.tensors(), view_bias=2.0)
    if a is None:
        return False
    rng, t = g.rng, g.fresh()
    op = rng.choice(["no_grad_enable", "set_false", "set_true", "inference", "inference",
                     "inference_false", "decorator", "enable", "switch_off", "switch_on",
                     "inplace_no_grad", "inplace_inference"])
    if op == "switch_off":
        return g.commit("mode:set_grad_enabled(False)", "m.set_grad_enabled(False)")
    if op == "switch_on":
        return g.commit("mode:set_grad_enabled(True)", "m.set_grad_enabled(True)")
    body = f"{t} = {_unary(g, a)}"
    region = {"no_grad_enable": "m.no_grad(), m.enable_grad()",
              "set_false": "m.set_grad_enabled(False)", "set_true": "m.set_grad_enabled(True)",
              "inference": "m.inference_mode()", "inference_false": "m.inference_mode(False)",
              "enable": "m.enable_grad()", "inplace_no_grad": "m.no_grad()",
              "inplace_inference": "m.inference_mode()"}.get(op)
    if op == "decorator":
        return g.commit("mode:decorator", f"{t} = m.no_grad()(lambda: {_unary(g, a)})()", (t,))
    if op.startswith("inplace"):
        w = rng.choice(["mul_(2.0)", "add_(0.5)", "zero_()", "sin_()"])
        return g.commit(f"mode:{op}@{g.where(a)}", f"with {region}: {a}.{w}")
    return g.commit(f"mode:{op}", f"with {region}: {body}", (t,))


def b_leafgrad(g):
    """requires_grad toggles, .grad reset, set and written, .data replaced, .grad of a
    non-leaf read, detach()/clone() then an in-place write."""
    rng = g.rng
    op = rng.choice(["rg_false", "rg_true", "rg_attr", "grad_none", "grad_zero", "grad_set",
                     "grad_add", "data_set", "data_set", "grad_read", "detach_write",
                     "clone_write"])
    names = g.tensors()
    if op in ("rg_false", "rg_true", "rg_attr", "grad_none", "grad_zero", "grad_set",
              "grad_add"):
        names = _leaves(g) if rng.random() < 0.85 else names
    a = g.pick(names)
    if a is None:
        return False
    kind = f"leafgrad:{op}@{g.where(a)}"
    t = g.fresh()
    if op in ("grad_zero", "grad_add") and g.peek(f"{a}.grad") is None:
        op = "grad_set"
        kind = f"leafgrad:{op}@{g.where(a)}"
    if op == "data_set":
        # same shape, on a non-view: see the module's note
        if g.ns[a]._is_view():
            return False
        b = g.pick([n for n in g.tensors() if g.shape(n) == g.shape(a)]) or a
        src = rng.choice([f"m.zeros_like({a})", f"{b}.detach() * 2.0", f"{b}.data",
                          f"{a}.detach().clone() + 1.0"])
        return g.commit(kind, f"{a}.data = {src}")
    if op == "grad_read":
        return g.commit(kind, f"{t} = {a}.grad", (t,))
    if op == "detach_write":
        w = rng.choice(["add_(1.0)", "mul_(0.5)", "zero_()"])
        return g.commit(kind, f"{t} = {a}.detach(); {t}.{w}", (t,))
    if op == "clone_write":
        b = g.partner(g.shape(a)) or "0.5"
        return g.commit(kind, f"{t} = {a}.clone(); {t}.mul_({b})", (t,))
    code = {"rg_false": f"{a}.requires_grad_(False)", "rg_true": f"{a}.requires_grad_()",
            "rg_attr": f"{a}.requires_grad = {rng.random() < 0.5}",
            "grad_none": f"{a}.grad = None", "grad_zero": f"{a}.grad.zero_()",
            "grad_set": f"{a}.grad = m.ones_like({a}) * 0.5",
            "grad_add": f"{a}.grad.add_({a}.detach())"}[op]
    return g.commit(kind, code)


def b_hook2(g):
    """Hooks bound to handles (removed later), hooks returning None or writing in place,
    post-accumulate-grad hooks on leaves."""
    rng = g.rng
    handles = _handles(g)
    if handles and rng.random() < 0.3:
        return g.commit("hook2:remove", f"{rng.choice(handles)}.remove()")
    rg = g.tensors(grad=True)
    h = g.fresh("h")
    if rng.random() < 0.35:
        a = g.pick(_leaves(g, grad=True) if rng.random() < 0.85 else rg)
        if a is None:
            return False
        body = rng.choice(["p.grad.mul_(0.5)", "None", "p.grad.clamp_(-1.0, 1.0)",
                           "p.grad.add_(p.detach())"])
        return g.commit(f"hook2:post_accumulate@{g.where(a)}",
                        f"{h} = {a}.register_post_accumulate_grad_hook(lambda p: {body})", (h,))
    a = _non_view(g, rg)
    if a is None:
        return False
    body = rng.choice(["None", "g.mul_(2.0)", "(g.add_(1.0), None)[1]", "g * 0.5",
                       "g.clamp(-0.5, 0.5)", "g + g.sum()"])
    return g.commit(f"hook2:hook@{g.where(a)}", f"{h} = {a}.register_hook(lambda g: {body})",
                    (h,))


def b_backward2(g):
    """backward(inputs=...), backward(gradient=...), autograd.grad(allow_unused, retain_graph,
    materialize_grads), autograd.backward, a loss kept and backwarded later, checkpoint, the
    prelude's custom Functions."""
    rng = g.rng
    rg = g.tensors(grad=True)
    op = rng.choice(["inputs", "gradient", "agrad", "agrad", "abackward", "loss", "loss_bw",
                     "checkpoint", "checkpoint", "cube", "exptwo", "double_"])
    if op in ("cube", "exptwo", "double_"):
        a = g.pick(g.tensors())
        if a is None:
            return False
        t, u = g.fresh(), g.fresh()
        if op == "exptwo":
            return g.commit("function:ExpTwo", f"{t}, {u} = ExpTwo.apply({a})", (t, u))
        if op == "double_":
            return g.commit(f"function:Double_@{g.where(a)}", f"{t} = Double_.apply({a})", (t,))
        return g.commit("function:Cube", f"{t} = Cube.apply({a})", (t,))
    if op == "checkpoint":
        a = g.pick(g.tensors(), view_bias=2.0)
        if a is None:
            return False
        sh, t = g.shape(a), g.fresh()
        b = g.partner(sh) or a
        fn = rng.choice([f"lambda u: u.sin() * {b}", "lambda u: (u * u).exp()",
                         f"lambda u: (u.tanh() + {b}).sum(0)" if sh else "lambda u: u.tanh()",
                         "lambda u: u.sigmoid() * u"])
        reentrant = rng.random() < 0.25
        return g.commit(f"checkpoint:reentrant={reentrant}",
                        f"{t} = m.utils.checkpoint.checkpoint({fn}, {a}, "
                        f"use_reentrant={reentrant})", (t,))
    a = g.pick(rg, view_bias=2.0)
    if a is None:
        return False
    retain = rng.random() < 0.7
    if op == "inputs":
        xs = sorted({rng.choice(rg) for _ in range(rng.randint(1, 2))})
        return g.commit("backward:inputs", f"({a}.sin() * 0.5).sum().backward(inputs=["
                        f"{', '.join(xs)}], retain_graph={retain})")
    if op == "gradient":
        grad = g.partner(g.shape(a))
        # a fresh tensor: torch's AccumulateGrad takes a gradient referenced nowhere else as
        # `.grad` even when its storage is a live tensor's (a.detach() through a view of a
        # leaf: the leaf's .grad aliases the leaf, and a second backward's in-place sum
        # writes the leaf); flowgrad copies such a gradient
        grad = f"{grad}.detach() * 0.5" if grad and rng.random() < 0.6 else \
            f"m.ones_like({a}) * 0.5"
        return g.commit("backward:gradient", f"{a}.backward(gradient={grad}, "
                        f"retain_graph={retain})")
    if op == "abackward":
        b = g.pick(rg)
        return g.commit("autograd.backward", f"m.autograd.backward([({a} * {a}).sum(), {b}], "
                        f"grad_tensors=[None, m.ones_like({b})], retain_graph={retain})")
    if op == "loss":
        t = g.fresh("l")
        return g.commit("loss", f"{t} = ({_unary(g, a)}).sum()", (t,))
    if op == "loss_bw":
        losses = [n for n in rg if n.startswith("l")]
        if not losses:
            return False
        return g.commit("loss:backward", f"{rng.choice(losses)}.backward("
                        f"{'retain_graph=True' if rng.random() < 0.3 else ''})")
    xs = sorted({rng.choice(g.tensors()) for _ in range(rng.randint(1, 3))})
    outs = [g.fresh("g") for _ in xs]
    mat = ", materialize_grads=True" if rng.random() < 0.3 else ""
    create = ", create_graph=True" if rng.random() < 0.3 else ""
    return g.commit("autograd.grad:allow_unused", f"{', '.join(outs)}, = m.autograd.grad(("
                    f"{a}.tanh() * {a}).sum(), [{', '.join(xs)}], allow_unused=True, "
                    f"retain_graph={retain}{mat}{create})", outs)


def b_autograd3(g):
    """From program_fuzz.AUTOGRAD3_SEEDS on: a view of a view written in place while a hook
    on the base (or a retained grad) waits for the gradient; a graph freed by a first
    backward (retain_graph=False) and then used again by autograd.grad; a gradient taken
    with create_graph=True through an in-place write, kept for the final (double) backward."""
    rng = g.rng
    op = rng.choice(["view_view_hook", "view_view_hook", "freed_second", "create_inplace",
                     "create_inplace"])
    rg = [n for n in g.tensors(grad=True) if not g.ns[n]._is_view()]
    a = g.pick(rg)
    if a is None:
        return False
    t, u = g.fresh(), g.fresh()
    if op == "view_view_hook":
        sh = g.shape(a)
        inner = g.index(sh) if sh else "[...]"
        outer = rng.choice(["[...]", ".unsqueeze(0)", ".view(-1)", ".t()" if len(sh) <= 2
                            else ".transpose(0, 1)", "[None]"])
        w = rng.choice(["mul_(2.0)", "add_(0.5)", "sin_()", "zero_()"])
        body = rng.choice(["g * 2.0", "g.mul_(0.5)", "None", "g + 1.0"])
        h = g.fresh("h")
        hook = rng.random() < 0.6
        hold = f"{h} = {t}.register_hook(lambda g: {body})" if hook else f"{t}.retain_grad()"
        src = f"{a}.clone()" if g.ns[a].is_leaf else f"{a} * 1.0"
        return g.commit(f"autograd3:view_view_hook@{g.where(a)}",
                        f"{t} = {src}; {hold}; {u} = {t}{inner}{outer}; {u}.{w}",
                        (t, u, h) if hook else (t, u))
    if op == "freed_second":
        # a second gradient through the part both losses share: torch refuses it where a
        # node there saved a tensor (exp), runs it where none did (neg, add, mul by a number)
        f = rng.choice(["exp()", "neg()", "add(1.0)", "mul(2.0)", "sin()", "view(-1)",
                        "sum()", "clone()"])
        # (not a bare sum: torch's gradient through it is an expand of the seed, a view)
        second = rng.choice([f"({t} * 3.0).sum()", f"{t}.sin().sum()", f"({t} * {t}).sum()"])
        return g.commit(f"autograd3:freed_second:{f.partition('(')[0]}",
                        f"{t} = {a}.{f}; m.autograd.grad(({t} * 2.0).sum(), [{a}], "
                        f"retain_graph=False); {u}, = m.autograd.grad({second}, [{a}])", (t, u))
    w = rng.choice([f"mul_({a})", "sin_()", "exp_()", f"addcmul_({a}, {a})", "pow_(2.0)"])
    return g.commit("autograd3:create_inplace", f"{t} = {a}.clone(); {t}.{w}; "
                    f"{u}, = m.autograd.grad(({t} * {t}).sum(), [{a}], create_graph=True)",
                    (t, u))
