"""Differential fuzzing of whole autograd PROGRAMS: flowgrad against torch, in float64.

A program is generated once, from a seed, as a list of `Step`s over a small pool of named
tensors: leaves, results of ops, views (slicing, select, unbind, expand, iteration, ...),
in-place writes (add_, setitem, index_add_, detach_, `.data` writes, ...), sometimes under
`no_grad`, hooks, retain_grad, repeated backward and double backward with autograd.grad.
Every step is ONE line of Python over the module name `m` and the pool names, so a program
prints as a script that runs unchanged under `import torch as m` and `import flowgrad as m`.

The generator picks each step while running the program in torch (the oracle), so shapes and
requires_grad fit and most programs run to their end; now and then it keeps a step that torch
rejects, which then ends the program.  The runner interprets the steps with m=torch and
m=flowgrad in lockstep from the same initial values and, after every step, demands the same
raise / no-raise (the exception, not its message) and the same value, shape and requires_grad
for every live pool tensor.  Both stop at the first step that raises.  At the end it builds a
scalar loss from the live tensors that require grad (in torch), calls backward, and compares
values, the .grad of every leaf and every tensor that retained its grad (None vs zeros is a
difference), and the results of autograd.grad, which live in the pool.

    .venv/bin/python tests/program_fuzz.py --seeds 0:2000      # summary + reproducers
    .venv/bin/python tests/program_fuzz.py --show 17           # one program and its verdict
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import torch

import flowgrad as flow

RTOL, ATOL = 1e-7, 1e-9
LEAF_SHAPES = [(), (3,), (4,), (2, 3), (3, 3), (3, 2), (1, 3), (3, 1), (2, 3, 4), (2, 2, 3)]
HEADER = "import torch as m  # or: import flowgrad as m"


# ---- the program: a list of one-line steps --------------------------------------------------
@dataclass
class Step:
    kind: str            # family of the step, e.g. "inplace:add_@view:unbind", "view:select"
    code: str            # one line of Python over `m` and pool names
    outs: tuple = ()     # the pool names this step binds


@dataclass
class Program:
    seed: int
    steps: list
    coef: dict = field(default_factory=dict)   # name -> loss coefficient
    loss_skip: frozenset = frozenset()          # names left out of the final loss

    def source(self, final=(), mark=None, note=""):
        lines = [HEADER]
        for i, s in enumerate(self.steps):
            lines.append(s.code + (f"  # <-- {note}" if i == mark else ""))
        lines += [c + (f"  # <-- {note}" if mark == "final" and c.startswith("loss.")
                       else "") for c in final]
        return "\n".join(lines)


_COMPILED: dict = {}


def _exec(code, ns):
    """Run one line in namespace `ns`; return the exception it raised, or None."""
    obj = _COMPILED.get(code)
    if obj is None:
        obj = _COMPILED[code] = compile(code, "<step>", "exec")
    try:
        exec(obj, ns)
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return e
    return None


def _reset_modes():
    torch.set_grad_enabled(True)
    flow.set_grad_enabled(True)


# ---- generation, guided by running the program in torch ------------------------------------
def _r(x):
    return repr(float(x))


class _Gen:
    KEEP_RAISING = 0.08   # probability of keeping a step that torch rejects (it ends the program)

    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        self.vals = np.random.default_rng(seed)
        self.steps: list[Step] = []
        self.names: list[str] = []
        self.made_by: dict[str, str] = {}
        self.ns = {"m": torch}
        self.count = 0
        self.stopped = False

    # pool queries
    def fresh(self, prefix="t"):
        self.count += 1
        return f"{prefix}{self.count}"

    def tensors(self, min_dim=0, grad=None):
        out = []
        for n in self.names:
            v = self.ns.get(n)
            if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dim() >= min_dim:
                if grad is None or v.requires_grad == grad:
                    out.append(n)
        return out

    def pick(self, names, view_bias=3.0):
        if not names:
            return None
        w = [view_bias if self.ns[n]._is_view() else 1.0 for n in names]
        return self.rng.choices(names, weights=w)[0]

    def shape(self, n):
        return tuple(self.ns[n].shape)

    def partner(self, target_shape, exact=True):
        """A pool tensor broadcastable to target_shape (to exactly it when `exact`)."""
        c = []
        for n in self.tensors():
            try:
                b = np.broadcast_shapes(self.shape(n), target_shape)
            except ValueError:
                continue
            if not exact or b == tuple(target_shape):
                c.append(n)
        return self.rng.choice(c) if c else None

    def operand(self, target_shape, scalar=0.3):
        p = self.partner(target_shape)
        if p is None or self.rng.random() < scalar:
            return _r(self.rng.choice([1.5, -0.5, 2.0, 0.25, 0.75]))
        return p

    def where(self, n):
        """Qualifier of an in-place target: which view made it, or what else it is."""
        v = self.ns[n]
        if v._is_view():
            return self.made_by.get(n, "view")
        if any(isinstance(self.ns.get(o), torch.Tensor) and self.ns[o]._base is v
               for o in self.names):
            return "base" + ("-leaf" if v.is_leaf else "")
        if v.is_leaf:
            return "leaf-rg" if v.requires_grad else "leaf"
        return "result"

    def peek(self, expr):
        """The value of `expr` in the torch run, or None when it raises."""
        try:
            return eval(expr, self.ns)
        except Exception:  # noqa: BLE001
            return None

    # committing a step
    def _replay(self):
        self.ns = {"m": torch}
        _reset_modes()
        for s in self.steps:
            _exec(s.code, self.ns)

    def commit(self, kind, code, outs=()):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            err = _exec(code, self.ns)
        if err is not None:
            _reset_modes()
            if self.rng.random() >= self.KEEP_RAISING:
                self._replay()
                return False
            self.stopped = True
        self.steps.append(Step(kind, code, tuple(outs)))
        for o in outs:
            if o not in self.names:
                self.names.append(o)
            self.made_by[o] = kind
        return True

    # building blocks
    def leaf(self, grad=None):
        shape = self.rng.choice(LEAF_SHAPES)
        v = np.round(self.vals.uniform(-2, 2, shape), 2)
        v = np.where(np.abs(v) < 0.05, 0.55, v)
        grad = self.rng.random() < 0.7 if grad is None else grad
        n = self.fresh("x")
        lit = _r(v) if v.ndim == 0 else repr(v.tolist())
        rg = ", requires_grad=True" if grad else ""
        self.commit("leaf", f"{n} = m.tensor({lit}, dtype=m.float64{rg})", (n,))

    def index(self, shape, basic=True):
        rng = self.rng
        if not shape:
            return rng.choice(["[...]", "[None]", "[()]"])
        if not basic:
            k = shape[0]
            return f"[[{rng.randrange(k)}, {rng.randrange(k)}]]" if k else "[[]]"
        parts = []
        for d in range(rng.randint(1, len(shape))):
            n, r = shape[d], rng.random()
            if n and r < 0.45:
                parts.append(str(rng.randrange(-n, n)))
            elif r < 0.6:
                parts.append(":")
            elif r < 0.72:
                parts.append("::2")
            else:
                a = rng.randrange(0, max(n, 1))
                parts.append(rng.choice([f"{a}:", f":{a + 1}", f"{a}:{a + 2}"]))
        if rng.random() < 0.12:
            parts.insert(rng.randrange(len(parts) + 1), "None")
        if rng.random() < 0.1 and len(shape) >= 2:
            parts = ["...", parts[-1]]
        return "[" + ", ".join(parts) + "]"


def _multi(g, kind, a, call):
    """`p, q = a.unbind(0)`-style steps: bind each output to a pool name."""
    r = g.peek(call)
    k = len(r) if isinstance(r, (tuple, list)) else 0
    if isinstance(r, torch.Tensor):      # `p, q = a` unpacks by iterating over a
        k = r.shape[0] if r.dim() else 0
    if not 1 <= k <= 4:
        return False
    outs = [g.fresh() for _ in range(k)]
    lhs = ", ".join(outs) + ("," if k == 1 else "")
    return g.commit(kind, f"{lhs} = {call}", outs)


def b_view(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    v, rng, t = g.ns[a], g.rng, g.fresh()
    nd, sh = v.dim(), g.shape(a)
    d = rng.randrange(nd) if nd else 0
    choices = ["index", "index", "index0d", "unsqueeze", "squeeze", "detach", "data",
               "expand", "view", "reshape"]
    if nd:
        choices += ["select", "unbind", "split", "chunk", "narrow", "iter", "expand_as"]
    if nd >= 2:
        choices += ["transpose", "t", "permute", "diagonal"]
    if nd == 1:
        choices += ["t"]
    op = rng.choice(choices)
    kind = "view:" + op
    if op == "index":
        idx = g.index(sh)
        r = g.peek(f"{a}{idx}")
        return g.commit(kind + ("0d" if r is not None and r.dim() == 0 else ""),
                        f"{t} = {a}{idx}", (t,))
    if op == "index0d":
        idx = "[" + ", ".join(str(rng.randrange(-n, n)) if n else "0" for n in sh) + "]"
        return g.commit(kind, f"{t} = {a}{idx if sh else '[()]'}", (t,))
    if op in ("unbind", "split", "chunk", "iter"):
        call = {"unbind": f"{a}.unbind({d})", "iter": f"{a}",
                "split": f"{a}.split({rng.randint(1, 2)}, {d})",
                "chunk": f"{a}.chunk({rng.randint(2, 3)}, {d})"}[op]
        if op == "iter" and rng.random() < 0.3:
            return g.commit("op:iter-stack", f"{t} = m.stack([e * 2.0 for e in {a}])", (t,))
        return _multi(g, kind, a, call)
    if op == "expand":
        new = [3 if s == 1 else s for s in sh]
        if rng.random() < 0.6:
            new = [2] + new
        code = f"{a}.expand({', '.join(map(str, new))})" if new else f"{a}.expand(2)"
    elif op == "expand_as":
        c = [n for n in g.tensors() if len(g.shape(n)) >= nd and g.partner(g.shape(n))
             and _bcast(sh, g.shape(n)) == g.shape(n)]
        if not c:
            return False
        code = f"{a}.expand_as({rng.choice(c)})"
    elif op == "view" or op == "reshape":
        n = int(np.prod(sh)) if sh else 1
        opts = ["-1"] + [f"{k}, -1" for k in (2, 3, 4) if n % k == 0 and n] + ["1, -1"]
        code = f"{a}.{op}({rng.choice(opts)})"
    elif op == "select":
        code = f"{a}.select({d}, {rng.randrange(-sh[d], sh[d]) if sh[d] else 0})"
    elif op == "narrow":
        s = rng.randrange(sh[d]) if sh[d] else 0
        code = f"{a}.narrow({d}, {s}, {rng.randint(0, sh[d] - s) if sh[d] else 0})"
    elif op == "transpose":
        code = f"{a}.transpose({d}, {rng.randrange(-nd, nd)})"
    elif op == "permute":
        p = list(range(nd))
        rng.shuffle(p)
        code = f"{a}.permute({', '.join(map(str, p))})"
    elif op == "diagonal":
        code = rng.choice([f"{a}.diagonal()", f"{a}.diagonal(1)", f"{a}.diagonal(0, -2, -1)"])
    elif op == "unsqueeze":
        code = f"{a}.unsqueeze({rng.randint(-nd - 1, nd)})"
    elif op == "squeeze":
        code = f"{a}.squeeze({rng.randrange(nd)})" if nd and rng.random() < 0.5 \
            else f"{a}.squeeze()"
    elif op == "t":
        code = f"{a}.t()"
    elif op == "detach":
        code = f"{a}.detach()"
    else:
        code = f"{a}.data"
    return _maybe_no_grad(g, kind, f"{t} = {code}", (t,), p=0.05)


def _bcast(a, b):
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        return None


def _maybe_no_grad(g, kind, code, outs=(), p=0.15):
    if g.rng.random() < p:
        return g.commit("no_grad:" + kind, f"with m.no_grad(): {code}", outs)
    return g.commit(kind, code, outs)


def b_op(g):
    a = g.pick(g.tensors(), view_bias=2.0)
    if a is None:
        return False
    rng, t, sh = g.rng, g.fresh(), g.shape(a)
    op = rng.choice(["exp", "tanh", "sigmoid", "relu", "clone", "neg", "sin", "scale", "sum",
                     "sumdim", "mul", "mul", "add", "sub", "div", "matmul", "where", "advindex"])
    if op in ("exp", "tanh", "sigmoid", "relu", "clone", "neg", "sin"):
        code = f"{a}.{op}()"
    elif op == "scale":
        code = f"{a} * {_r(rng.choice([1.5, -0.5, 3.0]))}"
    elif op == "sum":
        code = f"{a}.sum()"
    elif op == "sumdim":
        if not sh:
            return False
        code = f"{a}.sum({rng.randrange(len(sh))}{', keepdim=True' * (rng.random() < 0.3)})"
    elif op in ("mul", "add", "sub", "div"):
        c = [n for n in g.tensors() if _bcast(sh, g.shape(n)) is not None]
        b = rng.choice(c)
        sym = {"mul": "*", "add": "+", "sub": "-"}.get(op)
        code = f"{a} / ({b} * {b} + 1.0)" if op == "div" else f"{a} {sym} {b}"
    elif op == "matmul":
        c = [n for n in g.tensors(min_dim=1) if sh and g.shape(n)[0 if len(g.shape(n)) == 1
                                                                  else -2] == sh[-1]]
        if not c:
            return False
        code = f"{a} @ {rng.choice(c)}"
    elif op == "where":
        b = g.partner(sh, exact=False) or a
        code = f"m.where({b} > 0, {a}, {g.partner(sh, exact=False) or a})"
    else:
        if not sh:
            return False
        code = f"{a}{g.index(sh, basic=False)}"
    return _maybe_no_grad(g, "op:" + op, f"{t} = {code}", (t,), p=0.05)


def b_inplace(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    rng, sh = g.rng, g.shape(a)
    op = rng.choice(["add_", "mul_", "sub_", "div_", "copy_", "iadd", "setitem", "setitem",
                     "index_add_", "relu_", "sigmoid_", "tanh_", "exp_", "zero_", "fill_",
                     "clamp_", "detach_", "requires_grad_", "masked_fill_", "for", "add_",
                     "mul_", "iadd"])
    kind = f"inplace:{op}@{g.where(a)}"
    if op in ("add_", "mul_", "sub_", "div_"):
        b = g.operand(sh)
        if op == "div_" and not b[0].isdigit() and not b.startswith("-"):
            b = f"{b} * {b} + 1.0"
        code = f"{a}.{op}({b})"
    elif op == "copy_":
        b = g.partner(sh)
        if b is None:
            return False
        code = f"{a}.copy_({b})"
    elif op in ("iadd", "setitem"):
        idx = g.index(sh, basic=rng.random() < 0.85)
        r = g.peek(f"{a}{idx}")
        if r is None:
            return False
        tsh = tuple(r.shape)
        code = f"{a}{idx} {'+=' if op == 'iadd' else '='} {g.operand(tsh, scalar=0.4)}"
    elif op == "index_add_":
        if not sh or sh[0] < 2:
            return False
        need = (2,) + sh[1:]
        b = g.partner(need)
        # a fresh source: one aliasing the destination makes torch's result depend on the
        # order of its writes (flowgrad refuses it), and torch saves the source only for its
        # shape, so a later write to it fails torch's backward (flowgrad saves nothing)
        src = f"({b} * 1.0).expand({', '.join(map(str, need))})" if b else \
            f"m.ones({', '.join(map(str, need))}, dtype=m.float64)"
        i, j = rng.randrange(sh[0]), rng.randrange(sh[0])
        code = f"{a}.index_add_(0, m.tensor([{i}, {j}]), {src})"
    elif op in ("relu_", "sigmoid_", "tanh_", "exp_", "zero_", "detach_"):
        code = f"{a}.{op}()"
    elif op == "fill_":
        code = f"{a}.fill_(0.3)"
    elif op == "clamp_":
        code = f"{a}.clamp_(-0.777, 0.833)"
    elif op == "requires_grad_":
        code = f"{a}.requires_grad_({'False' if rng.random() < 0.3 else ''})"
    elif op == "masked_fill_":
        b = g.partner(sh) or a
        code = f"{a}.masked_fill_({b} > 0, {_r(rng.choice([0.0, 1.5]))})"
    else:
        if not sh:
            return False
        body = rng.choice(["e.mul_(2.0)", "e.add_(1.0)", "e.zero_()"])
        return g.commit(kind, f"for e in {a}: {body}")
    return _maybe_no_grad(g, kind, code)


def b_data(g):
    a = g.pick(g.tensors())
    if a is None:
        return False
    op = g.rng.choice(["mul_", "setitem", "zero_", "add_"])
    kind = f"data:{op}@{g.where(a)}"
    if op == "setitem":
        return g.commit(kind, f"{a}.data{g.index(g.shape(a))} = 0.5")
    arg = {"mul_": "1.5", "zero_": "", "add_": "0.25"}[op]
    return g.commit(kind, f"{a}.data.{op}({arg})")


_HOOK_NOTE = """Hooks go on non-views only: torch 2.13 crashes (SIGSEGV) on
    x = torch.ones(3, requires_grad=True); v = x[:1]
    with torch.no_grad(): x.add_(1.5)
    v.register_hook(lambda g: g)"""


def b_grad(g):
    rng = g.rng
    rg = g.tensors(grad=True)
    a = g.pick(rg, view_bias=2.0)
    if a is None:
        return False
    op = rng.choice(["hook", "hook", "retain_grad", "backward2", "backward2", "backward",
                     "agrad", "agrad", "agrad2"])
    if op == "hook":
        if g.ns[a]._is_view():
            a = g.pick([n for n in rg if not g.ns[n]._is_view()])
            if a is None:   # torch 2.13 segfaults on a hook on some views: see _HOOK_NOTE
                return False
        s = _r(rng.choice([2.0, 0.5, -1.0]))
        return g.commit(f"hook@{g.where(a)}", f"{a}.register_hook(lambda g: g * {s})")
    if op == "retain_grad":
        return g.commit(f"retain_grad@{g.where(a)}", f"{a}.retain_grad()")
    if op == "backward2":
        return g.commit("backward_twice", f"_l = ({a}.sin() * 0.5).sum(); "
                        "_l.backward(retain_graph=True); _l.backward(retain_graph=True)")
    if op == "backward":
        return g.commit("backward", f"({a}.sin() * 0.5).sum().backward()")
    t = g.fresh("g")
    if op == "agrad2":
        prev = [n for n in rg if n.startswith("g")]
        if not prev:
            return False
        a = rng.choice(prev)
    for _ in range(3):
        x = rng.choice(rg)
        code = (f"{t}, = m.autograd.grad(({a}.tanh() * {a}).sum(), [{x}], create_graph=True)"
                if op == "agrad" else f"{t}, = m.autograd.grad(({a} * {a}).sum(), [{x}], "
                "create_graph=True)")
        if g.commit("autograd.grad" + "2" * (op == "agrad2"), code, (t,)):
            return True
    return False


def b_leaf(g):
    g.leaf()
    return True


def b_storage(g):
    """Storage shared or copied outside views: copy.deepcopy of one pool tensor or of two
    together (views of one storage stay views of one copy), copy.copy (the same storage),
    and set_ to another pool tensor under no_grad (the two then share their elements)."""
    names = g.tensors()
    a = g.pick(names)
    if a is None:
        return False
    op = g.rng.choice(["deepcopy", "deepcopy2", "copy", "set_", "set_"])
    if op == "set_":
        # on a tensor that does not require grad, is no view and has none in the pool:
        # flowgrad refuses set_ on a tensor with history or on a view of one that requires
        # grad (torch replays a view's history at its new place), and a leaf that requires
        # grad keeps its place in the graphs built before (torch's leaves a graph built
        # before: autograd.grad calls the leaf unused there)
        a = g.pick([n for n in names if g.peek(f"not {n}.requires_grad and not {n}._is_view()")
                    and not g.where(n).startswith("base")])
        b = g.pick([n for n in names if n != a])
        return None not in (a, b) and g.commit(f"storage:set_@{g.where(a)}",
                                               f"with m.no_grad(): {a}.set_({b})")
    t = g.fresh()
    if op == "deepcopy2":
        u = g.fresh()
        return g.commit("storage:deepcopy2", f"import copy; {t}, {u} = copy.deepcopy([{a}, "
                        f"{g.pick(names)}])", (t, u))
    return g.commit(f"storage:{op}@{g.where(a)}", f"import copy; {t} = copy.{op}({a})", (t,))


BUILDERS = [(3, b_leaf), (30, b_view), (33, b_inplace), (16, b_op), (6, b_data), (12, b_grad)]
# seeds from STORAGE_SEEDS on also draw b_storage (the seeds below keep their programs)
STORAGE_SEEDS = 1_000_000
STORAGE_BUILDERS = BUILDERS + [(8, b_storage)]


def grow(g, builders, first_grad):
    """Give generator `g` one to three leaves (the first requiring grad as `first_grad` says),
    then 4 to 20 steps drawn from `builders` ((weight, builder) pairs)."""
    for i in range(g.rng.randint(1, 3)):
        g.leaf(grad=first_grad if i == 0 else None)
    length = g.rng.randint(4, 20)
    weights = [w for w, _ in builders]
    tries = 0
    while len(g.steps) < length and not g.stopped and tries < 200:
        tries += 1
        build = g.rng.choices([b for _, b in builders], weights=weights)[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build(g)


def generate(seed):
    """The program of `seed`: a deterministic function of the seed (and torch's behaviour)."""
    g = _Gen(seed)
    _reset_modes()
    grow(g, STORAGE_BUILDERS if seed >= STORAGE_SEEDS else BUILDERS, first_grad=True)
    names = [n for s in g.steps for n in s.outs]
    coef = {n: round(g.rng.uniform(-1.5, 1.5), 2) or 0.5 for n in names}
    _reset_modes()
    return Program(seed, g.steps, coef)


# ---- running both frameworks in lockstep ----------------------------------------------------
@dataclass
class Verdict:
    ok: bool
    step: object = None      # index of the first diverging step, or "final"
    what: str = ""           # category of the difference
    detail: str = ""
    final: tuple = ()        # the loss/backward lines that were run
    steps_run: int = 0


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _read(t):
    """(shape, requires_grad, values) of a tensor, or the exception that reading it raised."""
    try:
        return tuple(t.shape), bool(t.requires_grad), _np(t)
    except Exception as e:  # noqa: BLE001
        return e


def _same_tensor(a, b, label):
    """None when torch tensor `a` and flowgrad tensor `b` agree, else (category, detail)."""
    if not isinstance(b, flow.Tensor):
        return "binding", f"{label}: torch has a tensor, flowgrad has {type(b).__name__}"
    ra, rb = _read(a), _read(b)
    if isinstance(ra, Exception) or isinstance(rb, Exception):
        if isinstance(ra, Exception) and isinstance(rb, Exception):
            return None
        side, e = ("torch", ra) if isinstance(ra, Exception) else ("flowgrad", rb)
        return f"reading a tensor raises only in {side}", f"{label}: {_first_line(e)}"
    (sa, ga, x), (sb, gb, y) = ra, rb
    if sa != sb:
        return "shape", f"{label}: shape {sb} vs torch {sa}"
    if ga != gb:
        return "requires_grad", f"{label}: requires_grad {gb} vs torch {ga}"
    if not np.array_equal(np.isnan(x), np.isnan(y)) or not np.allclose(
            y, x, rtol=RTOL, atol=ATOL, equal_nan=True):
        return "values", f"{label}: flowgrad {y.tolist()} vs torch {x.tolist()}"
    return None


def _same_binding(a, b, label):
    if isinstance(a, torch.Tensor):
        return _same_tensor(a, b, label)
    if isinstance(b, flow.Tensor):
        return "binding", f"{label}: flowgrad has a tensor, torch has {type(a).__name__}"
    return None


def _compare_pool(names, nt, nf):
    for n in names:
        d = _same_binding(nt.get(n), nf.get(n), n)
        if d:
            return d
    return None


def _compare_grads(names, nt, nf):
    for n in names:
        a, b = nt.get(n), nf.get(n)
        if not isinstance(a, torch.Tensor) or not isinstance(b, flow.Tensor):
            continue
        try:  # is_leaf regenerates a stale view, which may raise (a multi-output view)
            if not (a.is_leaf or a.retains_grad):
                continue
        except RuntimeError:
            continue
        ga = a.grad
        try:
            gb = b.grad
        except Exception as e:  # noqa: BLE001
            return "reading .grad raises only in flowgrad", f"{n}.grad: {type(e).__name__}: {e}"
        if (ga is None) != (gb is None):
            return "grad None vs tensor", f"{n}.grad: flowgrad {_show(gb)} vs torch {_show(ga)}"
        if ga is not None:
            d = _same_tensor(ga.detach(), gb.detach(), f"{n}.grad")
            if d:
                return ("grad " + d[0]) if d[0] != "values" else "grad", d[1]
    return None


def _raise_what(et, ef, where):
    side = "torch" if et is not None else "flowgrad"
    err = et if et is not None else ef
    return f"raise only in {side}{where}", f"{side} raised {_first_line(err)}"


def _first_line(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def _show(t):
    return "None" if t is None else _np(t).tolist()


def _live(program, names, nt):
    return [n for n in names if isinstance(nt.get(n), torch.Tensor) and n not in
            program.loss_skip and nt[n].is_floating_point() and nt[n].requires_grad]


def _final_lines(program, names, nt):
    live = _live(program, names, nt)
    if not live:
        return ()
    terms = " + ".join(f"({n}.sin() * {program.coef.get(n, 0.5)}).sum()" for n in live)
    return (f"loss = {terms}", "loss.backward()")


# the loss is sin of every live tensor: past this magnitude a one-ulp difference in a value
# (NumPy's SIMD exp and torch's round differently, per CPU) moves sin by more than the
# tolerance, so the loss and the gradients through it measure rounding, not autograd
_SIN_WELL_CONDITIONED = 1e6


def _loss_ill_conditioned(program, names, nt):
    for n in _live(program, names, nt):
        try:
            values = nt[n].detach()
            if bool((values.isfinite() & (values.abs() > _SIN_WELL_CONDITIONED)).any()):
                return True
        except RuntimeError:  # a stale multi-output view: its reading raises elsewhere
            continue
    return False


def execute(program, upto=None):
    """Run `program.steps[:upto]` in both frameworks; the first difference, if any."""
    steps = program.steps if upto is None else program.steps[:upto]
    nt, nf = {"m": torch}, {"m": flow}
    names: list[str] = []
    _reset_modes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ran = 0
        for i, s in enumerate(steps):
            et, ef = _exec(s.code, nt), _exec(s.code, nf)
            ran = i + 1
            names += [o for o in s.outs if o not in names]
            if (et is None) != (ef is None):
                _reset_modes()
                return Verdict(False, i, *_raise_what(et, ef, ""), steps_run=ran)
            d = _compare_pool(names, nt, nf)
            if d:
                _reset_modes()
                return Verdict(False, i, *d, steps_run=ran)
            if et is not None:   # both raised: stop here; a half-done step leaves grads
                _reset_modes()   # in an engine-order-dependent state, so no final phase
                return Verdict(True, steps_run=ran)
        _reset_modes()
        final = _final_lines(program, names, nt)
        ill = bool(final) and _loss_ill_conditioned(program, names, nt)
        both_raised = False
        for line in final:
            et, ef = _exec(line, nt), _exec(line, nf)
            if (et is None) != (ef is None):
                where = " at loss.backward()" if "backward" in line else " building the loss"
                return Verdict(False, "final", *_raise_what(et, ef, where), final, ran)
            if et is not None:
                both_raised = True
                break
        d = _compare_pool(names + ["loss"] * (bool(final) and not ill), nt, nf) or \
            (None if both_raised or ill else _compare_grads(names, nt, nf))
        _reset_modes()
        if d:
            return Verdict(False, "final", d[0] + " after backward" * (d[0] == "values"),
                           d[1], final, ran)
    return Verdict(True, final=final, steps_run=ran)


def coarse(kind):
    """The group of a step kind: views made under no_grad together, and in-place writes by
    their target (which view made it, or leaf / base / result) rather than by op."""
    ng = "no_grad:" if kind.startswith("no_grad:") else ""
    fam, _, rest = kind[len(ng):].partition(":")
    if fam == "view" and ng:
        return "no_grad:view:*"
    if fam in ("inplace", "data"):
        target = rest.partition("@")[2].replace("no_grad:view:", "view(no_grad):")
        return f"{ng}{fam}@{target}"
    return kind


@dataclass
class Result:
    """A verdict on a program; a failing program is cut to the shortest failing prefix, whose
    last step (`culprit`) is the step the difference is blamed on."""
    program: Program
    verdict: Verdict
    culprit: int = -1

    @property
    def ok(self):
        return self.verdict.ok

    @property
    def raised_one_only(self):
        return self.verdict.what.startswith("raise only")

    @property
    def key(self):
        if self.ok:
            return None
        return f"{coarse(self.program.steps[self.culprit].kind)} | {self.verdict.what}"

    def report(self):
        v = self.verdict
        note = v.what if v.step != "final" else f"last step; then differs: {v.what}"
        src = self.program.source(v.final, mark=self.culprit, note=note)
        return (f"seed {self.program.seed}: {self.key}\n  {v.detail}\n"
                f"--- reproducer ---\n{src}\n")


def analyze(program):
    """Run the program.  A step-level difference cuts it after that step; a difference only
    after the final loss/backward cuts it to the shortest prefix whose own final phase already
    differs."""
    v = execute(program)
    if v.ok:
        return Result(program, v)
    if isinstance(v.step, int):
        return Result(replace(program, steps=program.steps[:v.step + 1]), v,
                      v.step)
    for k in range(1, v.steps_run + 1):
        pv = v if k == v.steps_run else execute(program, k)
        if not pv.ok:
            return Result(replace(program, steps=program.steps[:k]), pv, k - 1)
    raise AssertionError("unreachable: the whole program differs")


def run_seed(seed):
    return analyze(generate(seed))


def minimize(result, budget=300):
    """Greedily drop steps, then loss terms, while the program still fails with the same
    group key."""
    key, best, spent = result.key, result, 0

    def accept(prog):
        nonlocal best, spent
        spent += 1
        cand = analyze(prog)
        if not cand.ok and cand.key == key:
            best = cand
            return True
        return False

    changed = True
    while changed and spent < budget:
        changed = False
        p = best.program
        for i in range(len(p.steps) - 1, -1, -1):
            if spent >= budget:
                break
            if accept(replace(p, steps=p.steps[:i] + p.steps[i + 1:])):
                changed = True
                break
    for n in [n for s in best.program.steps for n in s.outs]:
        if spent < budget:
            accept(replace(best.program, loss_skip=best.program.loss_skip | {n}))
    return best


# ---- summary --------------------------------------------------------------------------------
def run_seeds(seeds, progress=False):
    results = []
    t0 = time.time()
    for k, s in enumerate(seeds):
        results.append(run_seed(s))
        if progress and (k + 1) % 250 == 0:
            print(f"  ... {k + 1} programs, {time.time() - t0:.0f} s", file=sys.stderr)
    return results


def summary(results, minimize_groups=True, max_groups=40):
    bad = [r for r in results if not r.ok]
    groups: dict[str, list[Result]] = {}
    for r in bad:
        groups.setdefault(r.key, []).append(r)
    lines = [f"programs compared:        {len(results)}",
             f"identical:                {len(results) - len(bad)}",
             f"differing:                {len(bad)}",
             f"raised in one only:       {sum(r.raised_one_only for r in bad)}",
             f"steps per program (mean): "
             f"{np.mean([len(r.program.steps) for r in results]) if results else 0:.1f}",
             f"failure groups:           {len(groups)}", ""]
    order = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    lines.append(f"{'count':>6}  first diverging step kind | difference")
    for key, rs in order:
        lines.append(f"{len(rs):>6}  {key}")
    lines.append("")
    for key, rs in order[:max_groups]:
        best = min(rs, key=lambda r: (len(r.program.steps), r.program.seed))
        if minimize_groups:
            best = minimize(best)
        lines.append(f"=== [{len(rs)}] {key}")
        lines.append(best.report())
    return "\n".join(lines)


def _seed_range(text):
    a, _, b = text.partition(":")
    return range(int(a), int(b)) if b else range(int(a), int(a) + 1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0:300", help="A:B, the half-open range of seeds")
    ap.add_argument("--show", type=int, help="print one program and its verdict")
    ap.add_argument("--no-minimize", action="store_true", help="keep reproducers as generated")
    ap.add_argument("--max-groups", type=int, default=40)
    args = ap.parse_args(argv)
    if args.show is not None:
        r = run_seed(args.show)
        print(r.report() if not r.ok else "OK\n" + r.program.source(r.verdict.final))
        return 0
    t0 = time.time()
    results = run_seeds(_seed_range(args.seeds), progress=True)
    print(summary(results, not args.no_minimize, args.max_groups))
    print(f"({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
