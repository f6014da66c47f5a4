"""Differential fuzzing of whole autograd PROGRAMS: flowgrad against torch, in float64
(and, from MIXED_SEEDS on, float32 and float64 mixed; from AUTOGRAD_SEEDS on, also autograd's
own features: grad modes, inference_mode, hook handles, post-accumulate hooks, backward's
inputs= and gradient=, allow_unused, checkpoint, custom Functions: `program_steps2.py`; from
AUTOGRAD3_SEEDS on, also views of views written in place under a hook on their base, graphs
freed by autograd.grad then asked again, create_graph through in-place writes).

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
from program_steps import (
    _r,
    b_data,
    b_grad,
    b_inplace,
    b_inplace_more,
    b_leaf,
    b_op,
    b_op_more,
    b_storage,
    b_view,
)
from program_steps2 import PRELUDE, b_autograd3, b_backward2, b_hook2, b_leafgrad, b_mode

import flowgrad as flow

RTOL, ATOL = 1e-7, 1e-9
# a float32 value is compared to float32 precision: NumPy's and torch's kernels round
# differently, and the programs chain up to twenty steps
RTOL32, ATOL32 = 2e-5, 1e-5
_FLOAT32_SEEN = False   # in a mixed program float64 values carry float32 roundings too
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
    prelude: str = ""                           # run first by both (custom Functions)

    def source(self, final=(), mark=None, note=""):
        uses = any(".apply(" in s.code for s in self.steps)
        lines = [HEADER] + self.prelude.splitlines() * uses
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


def _namespace(module, prelude):
    ns = {"m": module}
    if prelude:
        exec(prelude, ns)
    return ns


def _reset_modes():
    torch.set_grad_enabled(True)
    flow.set_grad_enabled(True)


# ---- generation, guided by running the program in torch ------------------------------------
class _Gen:
    KEEP_RAISING = 0.08   # probability of keeping a step that torch rejects (it ends the program)

    def __init__(self, seed):
        self.seed = seed
        mixed = MIXED_SEEDS <= seed < MORE_SEEDS
        self.dtypes = ("float64", "float32") if mixed else ("float64",)
        self.rng = random.Random(seed)
        self.vals = np.random.default_rng(seed)
        self.steps: list[Step] = []
        self.names: list[str] = []
        self.made_by: dict[str, str] = {}
        self.prelude = PRELUDE if seed >= AUTOGRAD_SEEDS else ""
        self.ns = _namespace(torch, self.prelude)
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
        self.ns = _namespace(torch, self.prelude)
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
        # drawn only when there is a choice: the float64 programs keep their seeds' programs
        dtype = self.rng.choice(self.dtypes) if len(self.dtypes) > 1 else self.dtypes[0]
        self.commit("leaf", f"{n} = m.tensor({lit}, dtype=m.{dtype}{rg})", (n,))

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


BUILDERS = [(3, b_leaf), (30, b_view), (33, b_inplace), (16, b_op), (6, b_data), (12, b_grad)]
# seeds from STORAGE_SEEDS on also draw b_storage (the seeds below keep their programs)
STORAGE_SEEDS = 1_000_000
STORAGE_BUILDERS = BUILDERS + [(8, b_storage)]
# seeds from MIXED_SEEDS on draw the storage builders over float32 and float64 leaves: type
# promotion, in-place writes that cast, and the dtype of every value and gradient
MIXED_SEEDS = 2_000_000
# seeds from MORE_SEEDS on (float64) also draw more ops: softmax, cumprod, sort, cat, norm, ...
# (ops saving their output, or giving a view or a copy by case) and more in-place writes:
# t_, squeeze_ (a tensor's shape changed in place), index_copy_, scatter_, masked_scatter_, ...
MORE_SEEDS = 3_000_000
MORE_BUILDERS = STORAGE_BUILDERS + [(14, b_op_more), (16, b_inplace_more)]
# seeds from AUTOGRAD_SEEDS on (float64) also draw autograd's own features (program_steps2):
# grad-mode regions and switches, inference_mode, requires_grad toggles, .grad reset and
# written, .data replaced, hook handles removed, post-accumulate hooks, backward(inputs=,
# gradient=), autograd.grad(allow_unused=), autograd.backward, losses backwarded later,
# checkpoint, and the custom Functions of program_steps2.PRELUDE, which both runs define first
AUTOGRAD_SEEDS = 11_400_000
AUTOGRAD_BUILDERS = MORE_BUILDERS + [(10, b_mode), (10, b_leafgrad), (8, b_hook2),
                                     (14, b_backward2)]
# seeds from AUTOGRAD3_SEEDS on also draw program_steps2.b_autograd3: a view of a view written
# in place under a hook or retain_grad on its base, a graph freed by autograd.grad
# (retain_graph=False) then asked again, and create_graph=True through an in-place write
AUTOGRAD3_SEEDS = 11_550_000
AUTOGRAD3_BUILDERS = AUTOGRAD_BUILDERS + [(8, b_autograd3)]


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
    builders = AUTOGRAD3_BUILDERS if seed >= AUTOGRAD3_SEEDS else \
        AUTOGRAD_BUILDERS if seed >= AUTOGRAD_SEEDS else \
        MORE_BUILDERS if seed >= MORE_SEEDS else \
        STORAGE_BUILDERS if seed >= STORAGE_SEEDS else BUILDERS
    grow(g, builders, first_grad=True)
    names = [n for s in g.steps for n in s.outs]
    coef = {n: round(g.rng.uniform(-1.5, 1.5), 2) or 0.5 for n in names}
    _reset_modes()
    return Program(seed, g.steps, coef, prelude=g.prelude)


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
    da, db = _dtype_name(a), _dtype_name(b)
    if da != db:
        return "dtype", f"{label}: dtype {db} vs torch {da}"
    rtol, atol = (RTOL, ATOL) if da == "float64" and not _FLOAT32_SEEN else (RTOL32, ATOL32)
    if not np.array_equal(np.isnan(x), np.isnan(y)) or not np.allclose(
            y, x, rtol=rtol, atol=atol, equal_nan=True):
        return "values", f"{label}: flowgrad {y.tolist()} vs torch {x.tolist()}"
    return None


def _dtype_name(t):
    return str(t.dtype).rpartition(".")[2]


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
_SIN_WELL_CONDITIONED = {"float64": 1e6, "float32": 32.0}


def _loss_ill_conditioned(program, names, nt):
    for n in _live(program, names, nt):
        try:
            values = nt[n].detach()
            bound = _SIN_WELL_CONDITIONED.get(_dtype_name(values), 1e6)
            if bool((values.isfinite() & (values.abs() > bound)).any()):
                return True
        except RuntimeError:  # a stale multi-output view: its reading raises elsewhere
            continue
    return False


def execute(program, upto=None):
    """Run `program.steps[:upto]` in both frameworks; the first difference, if any."""
    steps = program.steps if upto is None else program.steps[:upto]
    nt, nf = _namespace(torch, program.prelude), _namespace(flow, program.prelude)
    names: list[str] = []
    _reset_modes()
    global _FLOAT32_SEEN
    _FLOAT32_SEEN = MIXED_SEEDS <= program.seed < MORE_SEEDS
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
        # a backward both refuse part way leaves the .grad it had accumulated by then (an
        # alias of it in the pool included) in an engine-order-dependent state, as a step
        d = (None if both_raised and "backward" in line else
             _compare_pool(names + ["loss"] * (bool(final) and not ill), nt, nf)) or \
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
