"""Differential fuzzing of custom autograd.Functions and the functional transforms: random
small functions, built from a pool of ops and of custom Functions, differentiated by a random
driver in torch and in flowgrad.

A case draws one to three inputs of one shape, then a few steps, each an op of the pool or a
custom Function (declared in the ctx style, forward(ctx, ...), or with setup_context): one
that saves its input, its output or an intermediate; two outputs with one left unused (grads
arriving as None under set_materialize_grads(False)); mark_non_differentiable; mark_dirty on
a clone of an input or on a view of one; backward that reads needs_input_grad (the flags it
saw are compared too); once_differentiable; an input returned unchanged; non-tensor
arguments and outputs. The driver is then backward (with a double backward through the
Functions' own differentiable backward), torch.autograd.functional's jacobian / hessian /
vjp / jvp / hvp / vhp (create_graph, strict, vectorize, tuple inputs and outputs), or
torch.func's grad / grad_and_value (argnums, has_aux) / vjp / jvp / jacrev / jacfwd /
hessian / functional_call (tied parameters, buffers, strict) and their compositions
(jacrev of grad, vmap of grad). Values, gradients, raise/no-raise and the exception's type
must agree with torch's.

    .venv/bin/python tests/function_transform_fuzz.py --seeds 0:500   # summary
    .venv/bin/python tests/function_transform_fuzz.py --show 17       # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

RTOL = 1e-9
SHAPES = [(3,), (2, 3), ()]

# ops of the pool: (arity, fn(m, *tensors))
OPS = {
    "sin": (1, lambda m, x: x.sin()),
    "tanh": (1, lambda m, x: m.tanh(x)),
    "exp": (1, lambda m, x: (x * 0.3).exp()),
    "square": (1, lambda m, x: x * x),
    "sigmoid": (1, lambda m, x: m.sigmoid(x)),
    "cumsum": (1, lambda m, x: x.cumsum(-1) if x.dim() else x * 1.5),
    "flip": (1, lambda m, x: x.flip(-1) if x.dim() else -x),
    "add": (2, lambda m, x, y: x + y),
    "mul": (2, lambda m, x, y: x * y),
    "div": (2, lambda m, x, y: x / (1 + y * y)),
}


def _plus(a, b):
    return b if a is None else a if b is None else a + b


# forward-mode rules (tangents from the inputs saved by save_for_forward)
JVPS = {
    "ExpOut": lambda ctx, t: t * ctx.saved_tensors[0].exp(),
    "SinIn": lambda ctx, t: t * ctx.saved_tensors[0].cos(),
    "CubeIn": lambda ctx, t: 3 * ctx.saved_tensors[0] ** 2 * t,
    "SinSqMid": lambda ctx, t: t * (2 * ctx.saved_tensors[0]).sin(),
    "OnceSq": lambda ctx, t: 2 * ctx.saved_tensors[0] * t,
    "Needs": lambda ctx, tx, ty: _plus(None if tx is None else tx * ctx.saved_tensors[1],
                                       None if ty is None else ty * ctx.saved_tensors[0]),
}


def _functions(m, style, log, rules=False):
    """The custom Functions of the pool, under module `m`, declared in `style` ("ctx" or
    "setup"); `log` collects what backward saw (needs_input_grad, None grads). `rules`:
    generate_vmap_rule and, for some, a jvp staticmethod."""

    def make(name, compute, setup, backward, once=False, materialize=True):
        if once:
            backward = m.autograd.function.once_differentiable(backward)

        def _setup(ctx, inputs, output):
            if not materialize:
                ctx.set_materialize_grads(False)
            setup(ctx, inputs, output)
            if rules and name in JVPS:
                ctx.save_for_forward(*inputs)

        if style == "ctx":
            def forward(ctx, *args):
                out = compute(*args)
                _setup(ctx, args, out)
                return out
            body = {"forward": staticmethod(forward), "backward": staticmethod(backward)}
        else:
            body = {"forward": staticmethod(compute), "backward": staticmethod(backward),
                    "setup_context": staticmethod(_setup)}
        if rules:
            body["generate_vmap_rule"] = True
            if name in JVPS:
                body["jvp"] = staticmethod(JVPS[name])
        return type(name, (m.autograd.Function,), body)

    def save_in(ctx, inputs, out):
        ctx.save_for_backward(inputs[0])

    def save_out(ctx, inputs, out):
        ctx.save_for_backward(out)

    def save_mid(ctx, inputs, out):
        ctx.save_for_backward(inputs[0], inputs[0].sin())  # an intermediate

    def nothing(ctx, inputs, out):
        pass

    def two_setup(ctx, inputs, out):
        ctx.save_for_backward(inputs[0], out[1])

    def two_backward(ctx, ga, gb):
        log.append(("two", ga is None, gb is None))
        x, e = ctx.saved_tensors
        g = None
        if ga is not None:
            g = ga * 2 * x
        if gb is not None:
            g = gb * e if g is None else g + gb * e
        return g

    def nd_setup(ctx, inputs, out):
        ctx.mark_non_differentiable(out[1])

    def nd_backward(ctx, g, g_sign):
        log.append(("nd", g_sign is None or bool((g_sign == 0).all())))
        return g * 3

    def dirty_compute(x):
        x.mul_(2)
        return x

    def dirty_setup(ctx, inputs, out):
        ctx.mark_dirty(inputs[0])

    def needs_setup(ctx, inputs, out):
        ctx.save_for_backward(*inputs)

    def needs_backward(ctx, g):
        log.append(("needs", tuple(ctx.needs_input_grad)))
        x, y = ctx.saved_tensors
        return (g * y if ctx.needs_input_grad[0] else None,
                g * x if ctx.needs_input_grad[1] else None)

    def scale_setup(ctx, inputs, out):
        ctx.k = inputs[1]
        ctx.flag = inputs[2]

    def scale_backward(ctx, g, g_k):
        log.append(("scale", g_k is None))
        return g * ctx.k * (-1 if ctx.flag else 1), None, None

    def passthrough_backward(ctx, gx, gy):
        log.append(("pass", gx is None, gy is None))
        return gx, None if gy is None else gy * 2

    return {
        "ExpOut": make("ExpOut", lambda x: x.exp(), save_out,
                       lambda ctx, g: g * ctx.saved_tensors[0]),
        "SinIn": make("SinIn", lambda x: x.sin(), save_in,
                      lambda ctx, g: g * ctx.saved_tensors[0].cos()),
        "CubeIn": make("CubeIn", lambda x: x * x * x, save_in,
                       lambda ctx, g: 3 * g * ctx.saved_tensors[0] ** 2),
        "SinSqMid": make("SinSqMid", lambda x: x.sin() ** 2, save_mid,
                         lambda ctx, g: g * 2 * ctx.saved_tensors[1] * ctx.saved_tensors[0].cos()),
        "OnceSq": make("OnceSq", lambda x: x * x, save_in,
                       lambda ctx, g: 2 * g * ctx.saved_tensors[0], once=True),
        "Two": make("Two", lambda x: (x * x, x.exp()), two_setup, two_backward),
        "TwoLazy": make("TwoLazy", lambda x: (x * x, x.exp()), two_setup, two_backward,
                        materialize=False),
        "NonDiff": make("NonDiff", lambda x: (x * 3, x.sign()), nd_setup, nd_backward),
        "Dirty": make("Dirty", dirty_compute, dirty_setup, lambda ctx, g: g * 2),
        "Needs": make("Needs", lambda x, y: x * y, needs_setup, needs_backward),
        "Scale": make("Scale", lambda x, k, flag: (x * k * (-1 if flag else 1), k),
                      scale_setup, scale_backward),
        "Pass": make("Pass", lambda x, y: (x, y * 2), nothing, passthrough_backward),
        "PassLazy": make("PassLazy", lambda x, y: (x, y * 2), nothing, passthrough_backward,
                         materialize=False),
    }


FUNCTIONS = ["ExpOut", "SinIn", "CubeIn", "SinSqMid", "OnceSq", "Two", "TwoLazy", "NonDiff",
             "Dirty", "DirtyView", "Needs", "Scale", "Pass", "PassLazy"]
DRIVERS = ["backward", "double_backward", "af.jacobian", "af.hessian", "af.vjp", "af.jvp",
           "af.hvp", "af.vhp", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd",
           "hessian", "functional_call", "jacrev_of_grad", "vmap_of_grad"]


class Case:
    """One function and one driver, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.shape = r.choice(SHAPES)
        self.n = r.randint(1, 3)
        self.init = [rng.standard_normal(self.shape) for _ in range(self.n)]
        self.style = r.choice(["ctx", "setup"])
        self.rules = self.style == "setup" and r.random() < 0.6
        self.steps = []
        nodes = self.n
        for _ in range(r.randint(1, 4)):
            if r.random() < 0.5:
                name = r.choice(FUNCTIONS)
                arity = 2 if name in ("Needs", "Pass", "PassLazy") else 1
                extra = (r.choice([2, 0.5, -1.5]), r.random() < 0.5) if name == "Scale" else ()
                pick = r.choice([0, 1]) if name in ("Two", "TwoLazy", "NonDiff", "Scale",
                                                    "Pass", "PassLazy") else 0
            else:
                name = r.choice(sorted(OPS))
                arity, extra, pick = OPS[name][0], (), 0
            args = [r.randrange(nodes) for _ in range(arity)]
            self.steps.append((name, args, extra, pick))
            nodes += 1
        self.outputs = [nodes - 1] if r.random() < 0.7 else \
            sorted({nodes - 1, r.randrange(nodes - 1)})
        self.driver = r.choice(DRIVERS)
        self.flags = {k: r.random() < 0.5 for k in ("create_graph", "strict", "vectorize",
                                                    "tuple_in", "has_aux", "tied", "argtuple")}
        self.argnum = r.randrange(self.n)
        self.up = [rng.standard_normal(self.shape) for _ in range(4)]

    def describe(self):
        return (f"{self.style}{' rules' if self.rules else ''} shape={self.shape} n={self.n} "
                f"steps={self.steps} outputs={self.outputs} driver={self.driver} "
                f"flags={self.flags}")

    def function(self, m, log):
        """f(*inputs) -> a tensor, or a tuple when there are several outputs."""
        fns = _functions(m, self.style, log, self.rules)

        def f(*xs):
            nodes = list(xs)
            for name, args, extra, pick in self.steps:
                a = [nodes[i] for i in args]
                if name in OPS:
                    nodes.append(OPS[name][1](m, *a))
                    continue
                if name == "Dirty":
                    out = fns["Dirty"].apply(a[0].clone())
                elif name == "DirtyView":
                    base = a[0].clone().unsqueeze(0)
                    fns["Dirty"].apply(base[0])
                    out = base[0] + 0
                else:
                    out = fns[name].apply(*a, *extra)
                if isinstance(out, tuple):
                    out = out[pick]
                    if not isinstance(out, m.Tensor):  # Scale's k
                        out = a[0] * out
                nodes.append(out)
            outs = tuple(nodes[i] for i in self.outputs)
            return outs if len(outs) > 1 else outs[0]
        return f

    def scalar(self, m, f, k=0):
        """A scalar function of the inputs: the outputs weighted by fixed draws."""
        def g(*xs):
            out = f(*xs)
            outs = out if isinstance(out, tuple) else (out,)
            return sum((o * m.tensor(self.up[k + i])).sum() for i, o in enumerate(outs))
        return g

    def run(self, m):
        log = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = DRIVE[self.driver](self, m, self.function(m, log),
                                        [m.tensor(a.copy()) for a in self.init])
        return _flatten(result), log


def _flatten(x):
    """Arrays, numbers and the structure (tuple lengths) of a nested result, as a list."""
    if isinstance(x, (tuple, list)):
        return [("len", len(x))] + [y for e in x for y in _flatten(e)]
    if isinstance(x, dict):
        return [("keys", tuple(sorted(x)))] + [y for k in sorted(x) for y in _flatten(x[k])]
    if hasattr(x, "detach"):
        return [x.detach().numpy().copy()]
    return [x]


def _leaves(xs):
    return [x.requires_grad_() for x in xs]


def _backward(c, m, f, xs):
    xs = _leaves(xs)
    loss = c.scalar(m, f)(*xs)
    return m.autograd.grad(loss, xs, allow_unused=True)


def _double_backward(c, m, f, xs):
    xs = _leaves(xs)
    loss = c.scalar(m, f)(*xs)
    gs = m.autograd.grad(loss, xs, create_graph=True, allow_unused=True)
    terms = [(g * m.tensor(c.up[i])).sum() for i, g in enumerate(gs) if g is not None and
             g.requires_grad]
    if not terms:
        return gs
    return list(gs) + list(m.autograd.grad(sum(terms), xs, allow_unused=True))


def _af(name):
    def drive(c, m, f, xs):
        F = m.autograd.functional
        fl = c.flags
        ins = tuple(xs) if fl["tuple_in"] or c.n > 1 else xs[0]
        kw = dict(create_graph=fl["create_graph"], strict=fl["strict"])
        if name == "jacobian":
            return F.jacobian(f, ins, vectorize=fl["vectorize"], **kw)
        if name == "hessian":
            return F.hessian(c.scalar(m, f), ins, vectorize=fl["vectorize"], **kw)
        ups = tuple(m.tensor(u) for u in c.up[:c.n])
        v = ups if isinstance(ins, tuple) else ups[0]
        if name == "vjp":
            out = f(*xs)
            n_out = len(out) if isinstance(out, tuple) else 0
            cot = tuple(m.tensor(u) for u in c.up[:n_out]) if n_out else m.tensor(c.up[0])
            return F.vjp(f, ins, cot, **kw)
        if name == "jvp":
            return F.jvp(f, ins, v, **kw)
        return getattr(F, name)(c.scalar(m, f), ins, v, **kw)
    return drive


def _argnums(c):
    return tuple(range(c.n))[:c.argnum + 1] if c.flags["argtuple"] else c.argnum


def _grad(c, m, f, xs, and_value=False):
    s = c.scalar(m, f)
    fn = (lambda *a: (s(*a), a[0] * 2)) if c.flags["has_aux"] else s
    t = m.func.grad_and_value if and_value else m.func.grad
    return t(fn, argnums=_argnums(c), has_aux=c.flags["has_aux"])(*xs)


def _vjp(c, m, f, xs):
    out, pull = m.func.vjp(f, *xs)
    cot = tuple(m.tensor(c.up[i]) for i in range(len(out))) if isinstance(out, tuple) \
        else m.tensor(c.up[0])
    return out, pull(cot)


def _jvp(c, m, f, xs):
    return m.func.jvp(f, tuple(xs), tuple(m.tensor(u) for u in c.up[:c.n]))


def _functional_call(c, m, f, xs):
    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = m.nn.Parameter(m.ones(c.shape, dtype=m.float64))
            self.register_buffer("b", m.zeros(c.shape, dtype=m.float64))
            if c.flags["tied"]:
                self.v = self.w

        def forward(self, x):
            return c.scalar(m, f)(*([x * self.w + self.b] + [x] * (c.n - 1)))

    net = Net()
    params = {"w": xs[0].clone(), "b": xs[-1] * 0.5}
    if c.flags["strict"] and c.flags["has_aux"]:
        params.pop("b")  # strict: a missing key raises
    x = m.tensor(c.up[0])
    grads = m.func.grad(lambda p: m.func.functional_call(
        net, p, (x,), tie_weights=c.flags["tied"], strict=c.flags["strict"]))(params)
    return grads


DRIVE = {
    "backward": _backward,
    "double_backward": _double_backward,
    **{f"af.{n}": _af(n) for n in ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp")},
    "grad": _grad,
    "grad_and_value": lambda c, m, f, xs: _grad(c, m, f, xs, and_value=True),
    "vjp": _vjp,
    "jvp": _jvp,
    "jacrev": lambda c, m, f, xs: m.func.jacrev(f, argnums=_argnums(c))(*xs),
    "jacfwd": lambda c, m, f, xs: m.func.jacfwd(f, argnums=_argnums(c))(*xs),
    "hessian": lambda c, m, f, xs: m.func.hessian(c.scalar(m, f), argnums=_argnums(c))(*xs),
    "functional_call": _functional_call,
    "jacrev_of_grad": lambda c, m, f, xs: m.func.jacrev(
        m.func.grad(c.scalar(m, f), argnums=c.argnum), argnums=c.argnum)(*xs),
    "vmap_of_grad": lambda c, m, f, xs: m.func.vmap(
        m.func.grad(c.scalar(m, f), argnums=c.argnum))(*[x.unsqueeze(0).expand(2, *x.shape)
                                                         * m.tensor([1.0, -0.5]).reshape(
                                                             (2,) + (1,) * x.dim())
                                                         for x in xs]),
}


def _vmaps(case):
    """Whether the driver runs the function under vmap."""
    return case.driver in ("jacrev", "jacfwd", "hessian", "jacrev_of_grad", "vmap_of_grad") \
        or case.driver.startswith("af.") and case.flags["vectorize"]


# differences kept on purpose: (predicate on a case, what the verdict starts with, reason, a
# seed that shows it)
KNOWN = {
    "mark_dirty_under_a_generated_vmap_rule": (
        lambda c: c.rules and _vmaps(c) and any(s[0] in ("Dirty", "DirtyView")
                                                for s in c.steps),
        "torch raised RuntimeError: Some elements marked as dirty",
        "torch's generated vmap rule calls setup_context with the unbatched input, which "
        "is no output, and refuses; flowgrad batches the write and gives the values", 65),
}


def known(seed, verdict):
    """The KNOWN entry that explains the seed's verdict, or None."""
    case = Case(seed)
    return next((name for name, (hit, start, *_) in KNOWN.items()
                 if verdict.startswith(start) and hit(case)), None)


def check_unknown(seed):
    """check's verdict, None where KNOWN explains it."""
    verdict = check(seed)
    return None if verdict is None or known(seed, verdict) else verdict


def check(seed):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = Case(seed)
    try:
        want = case.run(torch)
        torch_error = None
    except fuzz_common.TORCH_REFUSALS as e:
        torch_error = e
    try:
        got = case.run(flow)
    except Exception as e:
        if torch_error is None:
            return f"flowgrad raised {type(e).__name__}: {e}"
        if not isinstance(e, type(torch_error)):
            return (f"flowgrad raised {type(e).__name__}: {e}; torch "
                    f"{type(torch_error).__name__}: {torch_error}")
        return None
    if torch_error is not None:
        return f"torch raised {type(torch_error).__name__}: {torch_error}; flowgrad ran"
    (vals_t, log_t), (vals_f, log_f) = want, got
    if log_f != log_t:
        if sorted(map(repr, log_f)) == sorted(map(repr, log_t)):
            return f"backward ran in another order: {log_f}, torch's {log_t}"
        return f"backward saw {log_f}, torch's {log_t}"
    if len(vals_f) != len(vals_t):
        return f"result has {len(vals_f)} parts, torch's {len(vals_t)}"
    pairs = []
    for i, (a, b) in enumerate(zip(vals_f, vals_t)):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            pairs.append((f"part {i}", a, b))
        elif type(a) is not type(b) or a != b:  # (None is no zeros: torch's grad is None)
            return f"part {i}: flowgrad {a!r}, torch {b!r}"
    return fuzz_common.first_difference(pairs, RTOL)


def main():
    fuzz_common.main(__doc__, lambda seed: Case(seed).describe(), check_unknown,
                     seeds="0:500")


if __name__ == "__main__":
    main()
