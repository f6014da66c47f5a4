"""Differential fuzzing of nn.Graph: random training steps compiled by the lazy mode against the
same steps run eagerly, in float64 (and float32).

A program is a list of one-line steps over a pool of named tensors: the two graph inputs
`x0`, `x1` (a new batch on every call), the parameters `P.w0`, `P.w1`, `P.w2` of a module,
a free tensor `c0` captured by reference (written eagerly between calls), constants made
inside the step, and results of ops. The families are chosen to reach every compiler pass:
elementwise chains (fusion), repeated subexpressions (common-subexpression elimination),
constants (folding), `* 1.0`, transposes of transposes and reshape chains (simplification),
views, in-place writes into clones and their views, reductions, matmul, cat/stack, where,
softmax, gather by a fixed index tensor. A step ends in a scalar loss over the live results,
its backward, and an SGD-with-momentum update (or, for an eval program, no optimizer).

The generator picks each step while running the program eagerly, so every kept step runs;
the check then trains an eager copy and a compiled copy (`flow.nn.Graph`) for three calls
with different inputs and demands, after every call, the same loss, the same returned
values and the same parameters, to 1e-10 of each array's scale (the plan may hand BLAS another
layout, which sums a product in another order; never other arithmetic).

    .venv/bin/python tests/graph_fuzz.py --seeds 0:500       # summary + reproducers
    .venv/bin/python tests/graph_fuzz.py --show 17           # one program and its verdict
"""
from __future__ import annotations

import random

import fuzz_common
import numpy as np

import flowgrad as flow

RTOL, RTOL32 = 1e-9, 1e-5  # float64 programs, float32 ones (and float64 ones casting)
CALLS = 3
INPUTS, PARAMS = ("x0", "x1"), ("w0", "w1", "w2")


def _shapes(rows, cols):
    """Shapes of x0, x1, w0, w1, w2 and c0 for a program: x0 (rows, cols) @ w1 (cols, rows)."""
    return dict(x0=(rows, cols), x1=(cols,), w0=(cols,), w1=(cols, rows), w2=(rows, cols),
                c0=(rows, cols))


# small programs, and some whose arrays pass the size where kernels and fused steps switch
# from one `where` to a product (ops.rules._SMALL: 2048 values)
SIZES = [(3, 4), (2, 5), (48, 64)]


# ---- one step of a program: a line of Python and the shapes of the names it binds ---------
def _unary(r, a):
    return r.choice([
        f"{a}.tanh()", f"{a}.relu()", f"{a}.sigmoid()", f"({a}.tanh()).exp()", f"-{a}",
        f"{a} * 1.0", f"{a} + 0.0", f"{a} / 1.0", f"{a} * {a}", f"{a}.pow(2)", f"{a}.abs()",
        f"{a}.clamp(-0.5, 0.5)", f"F.softplus({a})", f"F.gelu({a})", f"{a}.sin()",
        f"({a} * {a} + 1.0).sqrt()", f"({a} * {a} + 1.0).log()", f"{a} * 0.5 + 0.25",
        f"F.leaky_relu({a}, 0.1)", f"{a}.square().neg().exp()",
    ])


def _binary(r, a, b):
    return r.choice([
        f"{a} + {b}", f"{a} - {b}", f"{a} * {b}", f"{a} / ({b}.abs() + 1.0)",
        f"m.maximum({a}, {b})", f"m.minimum({a}, {b})", f"m.where({a} > {b}, {a}, {b})",
        f"{a} * {b} + {a}", f"({a} - {b}).tanh() * {b}", f"m.atan2({a}, {b}.abs() + 1.0)",
    ])


def _broadcastable(sa, sb):
    try:
        return np.broadcast_shapes(sa, sb)
    except ValueError:
        return None


class Generator:
    """Builds a program step by step, running each candidate eagerly and keeping it only if it
    runs; `self.env` holds the eager values (the first call's)."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.train = self.r.random() < 0.8  # else an eval step: no backward, no optimizer
        self.optimizer = self.r.randrange(len(OPTIMIZERS))
        self.clip = self.r.choice([None, None, 1.0, 0.1])
        rng = np.random.default_rng(seed)
        shapes = _shapes(*self.r.choice(SIZES))
        self.dtype = np.float32 if self.r.random() < 0.25 else np.float64
        draw = lambda shape: rng.standard_normal(shape).astype(self.dtype)  # noqa: E731
        self.init = {n: draw(shapes[n]) for n in PARAMS}
        self.const = draw(shapes["c0"])
        self.inputs = [{n: draw(shapes[n]) for n in INPUTS} for _ in range(CALLS)]
        self.lines, self.n = [], 0
        self.env = _environment(self.init, self.const)
        for n, v in self.inputs[0].items():
            self.env[n] = flow.tensor(v)
        self.pool = list(INPUTS) + [f"P.{n}" for n in PARAMS] + ["c0"]

    def _shape(self, name):
        return tuple(eval(name, {}, self.env).shape)

    def _try(self, code):
        out = f"t{self.n}"
        line = f"{out} = {code}"
        env = dict(self.env)
        try:
            exec(line, env)
        except Exception:
            return False
        value = env[out]
        if not isinstance(value, flow.Tensor) or value.dim() == 0 and self.r.random() < 0.5:
            return False
        if not np.isfinite(value.detach().numpy()).all():
            return False
        self.env[out] = value
        self.lines.append(line)
        self.pool.append(out)
        self.n += 1
        return True

    def pick(self):
        return self.r.choice(self.pool[-4:] if self.r.random() < 0.6 else self.pool)

    def step(self):
        r, a = self.r, self.pick()
        sa = self._shape(a)
        kind = r.random()
        if kind < 0.3:
            return self._try(_unary(r, a))
        if kind < 0.5:
            b = self.pick()
            if _broadcastable(sa, self._shape(b)) is None:
                return False
            return self._try(_binary(r, a, b))
        if kind < 0.58:  # a repeated subexpression, computed twice
            u = _unary(r, a)
            return self._try(f"({u}) + ({u}) * 0.5")
        if kind < 0.66:  # constants made inside the step: folded by the compiler
            return self._try(r.choice([
                f"{a} + m.ones({sa}, dtype=DT) * 2.0",
                f"{a} * m.full({sa}, 0.5, dtype=DT).exp()",
                f"{a} - m.arange({sa[-1] if sa else 1}, dtype=DT) * 0.1",
                f"{a} + c0.sum() * 0.1",
            ]))
        if kind < 0.76:
            return self._try(self._view(a, sa))
        if kind < 0.82:
            return self._try(self._reduce(a, sa))
        if kind < 0.88:
            return self._try(self._inplace(a, sa))
        if kind < 0.94:
            return self._try(self._combine(a, sa))
        if kind < 0.97:
            return self._try(self._other(a, sa))
        return self._try(self._state(a, sa))

    def _state(self, a, sa):
        """Module state: BatchNorm (running statistics), a parameter written in place, and a
        long repeated chain."""
        r = self.r
        w = r.choice([f"P.{n}" for n in PARAMS])
        ops = [f"chain({a}, {r.randint(3, 9)})", f"decay({w}, 0.99) * 1.0 + {a}.sum()",
               f"Cube.apply({a}.tanh())"]
        if len(sa) == 2 and sa[1] == self._shape("P.w0")[0]:
            ops.append(f"P.bn({a})")
        return r.choice(ops)

    def _other(self, a, sa):
        """Randomness, a gradient penalty, detach, dtypes, integers and masks."""
        r = self.r
        w = r.choice([f"P.{n}" for n in PARAMS])
        penalties = [  # a gradient inside the step, differentiated again by its backward
            f"m.autograd.grad(({a}.tanh() * {a}).sum(), {w}, create_graph=True)[0]",
            "(lambda gs: next(g for g in gs if g is not None))(m.autograd.grad("
            f"({a}.tanh() * {a}).sum(), [P.w0, P.w1, P.w2], create_graph=True, "
            "allow_unused=True))"] if self.train else []
        return r.choice(penalties + [
            f"F.dropout({a}, 0.3, True)", f"F.dropout({a}.tanh(), 0.5, True) * {a}",
            f"{a} + m.rand({sa}, dtype=DT) * 0.1",
            f"{a}.detach() * {a}", f"{a}.float().tanh().double()",
            f"{a}.masked_fill({a} > 0.5, 0.0)", f"({a} > 0).sum() * 1.0 + {a}",
            f"{a}.gather(-1, {a}.argmax(-1, keepdim=True))" if sa else f"{a}.exp()",
            f"m.where({a} > 0, {a}.sqrt(), m.zeros_like({a}))",
        ])

    def _view(self, a, sa):
        r = self.r
        if len(sa) == 2:
            return r.choice([f"{a}.t()", f"{a}.t().t()", f"{a}.transpose(0, 1).contiguous()",
                             f"{a}.reshape(-1).reshape({sa})", f"{a}[1:]", f"{a}[:, ::2]",
                             f"{a}.unsqueeze(0).expand(2, {sa[0]}, {sa[1]})",
                             f"{a}.flip(0)", f"{a}[m.tensor([0, 0, 1])]",
                             f"{a}.gather(1, m.zeros({sa[0]}, 1, dtype=m.int64))"])
        if len(sa) == 1:
            return r.choice([f"{a}.unsqueeze(1)", f"{a}.flip(0)", f"{a}[1:]",
                             f"{a}.reshape(1, -1)",
                             f"{a}.expand(2, {sa[0]})"])
        if len(sa) == 3:
            return r.choice([f"{a}.permute(2, 0, 1)", f"{a}.sum(0)", f"{a}[0]",
                             f"{a}.reshape({sa[0] * sa[1]}, {sa[2]})"])
        return f"{a}.reshape(1)"

    def _reduce(self, a, sa):
        r = self.r
        if not sa:
            return f"{a} * 2.0"
        d = r.randrange(len(sa))
        return r.choice([f"{a}.sum({d}, keepdim=True)", f"{a}.mean({d})",
                         f"{a}.softmax({d})", f"{a}.logsumexp({d})", f"{a}.sum()",
                         f"{a}.norm()", f"F.log_softmax({a}, {d})", f"{a}.cumsum({d})",
                         f"{a}.var({d})" if sa[d] > 1 else f"{a}.mean()"])

    def _inplace(self, a, sa):
        r = self.r
        b = self.pick()
        sb = self._shape(b)
        ops = [f"{a}.clone().mul_(2.0)", f"{a}.clone().add_({a}.tanh())",
               f"{a}.clone().tanh_()",
               f"{a}.clone().clamp_(-1.0, 1.0)"]
        if _broadcastable(sa, sb) == sa:
            ops.append(f"{a}.clone().add_({b})")
            ops.append(f"{a}.clone().mul_({b}.sigmoid())")
        if len(sa) >= 1 and sa[0] > 1:
            ops.append(f"(lambda t: (t[0].mul_(3.0), t)[1])({a}.clone())")
            ops.append(f"(lambda t: (t.__setitem__(0, {a}[-1] * 2.0), t)[1])({a}.clone())")
        return r.choice(ops)

    def _combine(self, a, sa):
        r = self.r
        b = self.pick()
        sb = self._shape(b)
        if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0]:
            return f"{a} @ {b}"
        if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[1]:
            return f"{a} @ {b}.t()"
        if len(sa) == 2 and len(sb) == 1 and sa[1] == sb[0]:
            return f"{a} @ {b}"
        if sa == sb:
            return r.choice([f"m.cat([{a}, {b}], 0)", f"m.stack([{a}, {b}]).sum(0)",
                             f"m.stack([{a}, {b}], -1).amax(-1)"])
        return f"{a} + {b}.sum()"

    def finish(self):
        """The loss: a weighted sum over the last results; also 2 of them returned."""
        r = self.r
        used = self.pool[len(INPUTS) + len(PARAMS) + 1:]
        terms = [f"({t}.tanh() * {r.uniform(-1, 1):.3f}).sum()" for t in used[-4:]]
        terms.append("(P.w0 * x0).sum() * 0.1")  # every parameter gets a gradient
        terms.append("(x0 @ P.w1).sum() * 0.1 + (P.w2 * c0).sum() * 0.1")
        self.lines.append("loss = " + " + ".join(terms))
        self.returned = used[-2:]


def _chain(t, n):
    """n repetitions of one stretch of elementwise ops: the plan runs such stretches as loops."""
    for _ in range(n):
        t = (t * 1.01 + 0.01).tanh().relu() + t * 0.1
    return t


class _Cube(flow.autograd.Function):
    """A custom Function: the graph runs its forward's ops and, in backward, its backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3.0 * x * x


def _decay(t, factor):
    """An in-place write to a parameter inside the step, outside autograd (a write-back)."""
    with flow.no_grad():
        t.mul_(factor)
    return t


def _environment(init, const):
    """Eager objects of a program: the module (parameters, a BatchNorm over x0's columns),
    the captured constant, `m`, `F` and two helpers."""
    module = flow.nn.Module()
    for n, v in init.items():
        setattr(module, n, flow.nn.Parameter(flow.tensor(v)))
    dtype = flow.float32 if const.dtype == np.float32 else flow.float64
    module.bn = flow.nn.BatchNorm1d(init["w0"].shape[0], dtype=dtype)
    return {"m": flow, "F": flow.nn.functional, "P": module, "c0": flow.tensor(const),
            "np": np, "chain": _chain, "decay": _decay, "Cube": _Cube, "DT": dtype}


# Adaptive optimizers divide by a gradient's own magnitude: a gradient that is 0 but for
# rounding (a BatchNorm bias under a softmax over the batch) moves its parameter by up to
# lr * noise / (noise + eps); parameters after their updates are compared to this much more
# (float32: a gradient of 1e-6 summed from terms of 5 is all noise, and Adam's step is lr)
ADAPTIVE_ATOL = {np.float64: 1e-7, np.float32: 1e-3}

# the optimizer of a training program: a factory of (optimizer, scheduler or None)
OPTIMIZERS = [
    lambda ps: (flow.optim.SGD(ps, lr=0.05, momentum=0.9), None),
    lambda ps: (flow.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
                None),
    lambda ps: (flow.optim.Adam(ps, lr=1e-2), None),
    lambda ps: (lambda o: (o, flow.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4)))(
        flow.optim.AdamW(ps, lr=1e-2, weight_decay=0.1)),
    lambda ps: (lambda o: (o, flow.optim.lr_scheduler.StepLR(o, 1, gamma=0.5)))(
        flow.optim.RMSprop(ps, lr=1e-2, momentum=0.5)),
    lambda ps: (flow.optim.Adagrad(ps, lr=0.1), None),
    lambda ps: (flow.optim.Adamax(ps, lr=1e-2), None),
    lambda ps: (flow.optim.NAdam(ps, lr=1e-2), None),
    lambda ps: (flow.optim.RAdam(ps, lr=1e-2), None),
    lambda ps: (flow.optim.Adadelta(ps, lr=1.0), None),
]


def generate(seed, n_steps=None):
    g = Generator(seed)
    target = n_steps if n_steps is not None else g.r.randint(3, 14)
    tries = 0
    while g.n < target and tries < 200:
        g.step()
        tries += 1
    g.finish()
    return g


def source(g):
    """The step as a function body (printed for reproducers)."""
    return "\n".join(g.lines)


_CASTS = [False]  # the program rounds to float32 somewhere: a last-bit difference before a
#                   cast can become one float32 ulp after it


def _close(a, b, atol=0.0):
    """Equal to RTOL of the array's scale: a GEMM summed in another order (the plan may hand
    BLAS another layout) moves each element by a few ulps of the terms, not of the sum."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    finite = np.isfinite(b)
    if not (np.isfinite(a) == finite).all() or (a[~finite] != b[~finite]).any():
        return np.array_equal(a, b, equal_nan=True)
    scale = max(1.0, float(np.abs(b[finite]).max(initial=0.0)))
    rtol = RTOL if b.dtype == np.float64 and not _CASTS[0] else RTOL32
    return bool((np.abs(a[finite] - b[finite]) <= rtol * scale + atol).all())


def _state(module):
    """(name, tensor) of the parameters and floating buffers (running statistics)."""
    return [(n, t) for n, t in [*module.named_parameters(), *module.named_buffers()]
            if t.is_floating_point()] + [(n, t.double()) for n, t in module.named_buffers()
                                         if not t.is_floating_point()]


def _run_step(code, env, x0, x1, backward):
    scope = dict(env, x0=x0, x1=x1)
    exec(code, scope)
    loss = scope["loss"]
    if backward:
        loss.backward()
    return loss, [scope[n] for n in scope["__returned__"]]


def check(seed, g=None):
    """None when the compiled step equals the eager one on every call, else a message.
    `g`: the generated program, or an edited one (to shrink a reproducer)."""
    g = g or generate(seed)
    _CASTS[0] = ".float()" in source(g) or g.dtype == np.float32
    code = source(g) + f"\n__returned__ = {g.returned!r}"
    eager_env = _environment(g.init, g.const)
    graph_env = _environment(g.init, g.const)
    module, env = graph_env["P"], graph_env
    opt_e = opt_g = None
    sch_e = None
    if g.train:
        opt_e, sch_e = OPTIMIZERS[g.optimizer](list(eager_env["P"].parameters()))
        opt_g, sch_g = OPTIMIZERS[g.optimizer](list(module.parameters()))
        if g.clip is not None:
            for group in opt_g.param_groups:
                group["clip_grad_max_norm"] = g.clip
    else:
        for env_ in (eager_env, graph_env):
            env_["P"].eval()

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.P = module
            if opt_g is not None:
                self.add_optimizer(opt_g, lr_sch=sch_g)

        def build(self, x0, x1):
            scope = dict(env, P=self.P)
            loss, outs = _run_step(code, scope, x0, x1, opt_g is not None)
            return (loss, *outs)

    graph = Step()
    for call, inputs in enumerate(g.inputs):
        x0, x1 = (flow.tensor(inputs[n]) for n in INPUTS)
        flow.manual_seed(seed * 10 + call)  # the same draws eagerly and compiled
        try:
            if opt_e is not None:
                opt_e.zero_grad()
                loss_e, outs_e = _run_step(code, eager_env, x0, x1, True)
                if g.clip is not None:
                    flow.nn.utils.clip_grad_norm_(eager_env["P"].parameters(), g.clip)
                opt_e.step()
                if sch_e is not None:
                    sch_e.step()
            else:
                with flow.no_grad():
                    loss_e, outs_e = _run_step(code, eager_env, x0, x1, False)
            eager_error = None
        except RuntimeError as e:  # (the generator runs the forward only: backward may raise)
            eager_error = e
        flow.manual_seed(seed * 10 + call)
        try:
            got = graph(x0, x1)
        except Exception as e:
            if eager_error is not None:
                return None  # both refuse the step
            if isinstance(e, NotImplementedError) and "through another tensor" in str(e):
                return None  # a documented limit of the trace: it refuses, never miscomputes
            return f"call {call}: nn.Graph raised {type(e).__name__}: {e}"
        if eager_error is not None:
            return f"call {call}: eager raised {eager_error}; nn.Graph ran"
        want = (loss_e, *outs_e)
        for i, (a, b) in enumerate(zip(got, want)):
            a, b = a.detach().numpy(), b.detach().numpy()
            if not _close(a, b):
                what = "loss" if i == 0 else f"returned {g.returned[i - 1]}"
                err = np.abs(a - b).max() if a.shape == b.shape else "shapes"
                return (f"call {call}: {what} differs (max abs difference {err}): graph {a!r} "
                        f"eager {b!r}")
        atol = ADAPTIVE_ATOL[g.dtype] if g.train and g.optimizer >= 2 else 0.0
        for n, p in _state(module):
            q = dict(_state(eager_env["P"]))[n]
            a, b = p.detach().numpy(), q.detach().numpy()
            if not _close(a, b, atol):
                return (f"call {call}: {n} differs after the update (max abs "
                        f"difference {np.abs(a - b).max()})")
        # the user writes into what the step returned: where eagerly that is a view of a
        # parameter or of the captured constant the write reaches them, else it reaches nothing
        # (a result must not share storage with state or another result where eagerly it did
        # not); then an eager write to the captured constant, which the graph reads by reference
        with flow.no_grad():
            for i, (a, b) in enumerate(zip(got[1:], want[1:])):
                raised = []
                for t in (a, b):
                    try:
                        t.mul_(0.5)
                        raised.append(None)
                    except RuntimeError as e:
                        raised.append(type(e).__name__)
                if raised[0] != raised[1]:
                    return (f"call {call}: writing into returned {g.returned[i]}: graph "
                            f"{raised[0] or 'ran'}, eager {raised[1] or 'ran'}")
            eager_env["c0"].mul_(0.9)
            graph_env["c0"].mul_(0.9)
        for i, (a, b) in enumerate(zip(got[1:], want[1:])):
            if not _close(a.detach().numpy(), b.detach().numpy()):
                return f"call {call}: after the writes, returned {g.returned[i]} differs"
        for n, p in _state(module):
            q = dict(_state(eager_env["P"]))[n]
            if not _close(p.detach().numpy(), q.detach().numpy(), atol):
                return f"call {call}: after writing into the results, {n} differs"
        _sync(eager_env["P"], module, opt_e, opt_g)
    return None


def _sync(eager, compiled, opt_e, opt_g):
    """Eager writes between calls, which the compiled plan must see: the eager copy's
    parameters, buffers and optimizer state into the compiled copy's, in place. Each call
    then starts from the same state, so rounding differences of one call (a sum taken in
    another order) do not grow over the next."""
    with flow.no_grad():
        for (_, p), (_, q) in zip(_state(compiled), _state(eager)):
            p.copy_(q.to(p.dtype))
        if opt_e is None:
            return
        for pg, pe in zip(opt_g.param_groups, opt_e.param_groups):
            for a, b in zip(pg["params"], pe["params"]):
                for key, value in opt_g.state.get(a, {}).items():
                    if isinstance(value, flow.Tensor):
                        value.copy_(opt_e.state[b][key])


def describe(seed):
    """The step of a seed as it prints: its kind, optimizer and code."""
    g = generate(seed)
    return (f"train step (optimizer {g.optimizer}, clip {g.clip})" if g.train else
            "eval step") + ":\n" + source(g)


def main():
    fuzz_common.main(__doc__, describe, check, seeds="0:200")


if __name__ == "__main__":
    main()
