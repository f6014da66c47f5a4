"""Differential fuzzing of the autograd API surface: random programs of hooks and gradient calls
run in torch and in flowgrad (float64, tiny shapes).

Where tests/program_fuzz.py draws views, in-place writes and ops and checks the gradients they
give, these programs draw what the autograd API itself does: tensor hooks that return None, a
new gradient or raise; grad_fn hooks and prehooks (both returning None or new gradients);
post-accumulate-grad hooks; handles removed; retain_grad on leaves, results and views;
backward with `inputs=`, twice with and without retain_graph, create_graph, several roots;
autograd.grad with allow_unused, materialize_grads, grad_outputs (none, right, wrong shape,
batched with is_grads_batched), create_graph and a second grad of the first, only_inputs;
no_grad / enable_grad / set_grad_enabled / inference_mode nesting and inference tensors used
later; requires_grad_ toggles, detach and detach_; saved_tensors_hooks and save_on_cpu;
grad_fn.name() and next_functions; .grad set, zeroed and accumulated; detect_anomaly.

A program is a list of one-line steps over the module name `m`, the pool names, `log` (which
records a tag and a snapshot of tensors in the program's log) and `H` (hook handles). The
generator picks each step while running the program in torch and keeps now and then a step
torch rejects; the runner runs the steps in torch and flowgrad and, after every step, demands
the same raise / no-raise (and exception type), the same log (hook calls: order, counts and the
gradients they saw), and for every pool tensor the same value, requires_grad, is_leaf,
grad_fn is None, grad_fn's name, retains_grad, is_inference and .grad (None vs a tensor).

    .venv/bin/python tests/autograd_api_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/autograd_api_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import random
import re
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

HEADER = "import torch as m  # or: import flowgrad as m; log, H: see autograd_api_fuzz.py"
SHAPES = [(3,), (2, 3), (2,), ()]
KEEP_RAISING = 0.3
# ops whose node flowgrad names as torch does (tests/test_grad_fn_introspection_vs_torch.py)
UNARY = ["{a}.sin()", "{a}.exp()", "{a}.tanh()", "{a}.sigmoid()", "{a}.pow(3)", "{a} * 2",
         "{a}.abs()", "{a}.sqrt()", "{a}.log()", "{a}.clone()", "{a}.relu()", "{a}.square()",
         "-{a}", "{a}.cos()", "{a}.double()"]
# (not sum(dim) over every dim: flowgrad's node reads SumBackward0, torch's SumBackward1, as
# that test's DIFFERENT table lists)
REDUCE = ["{a}.sum()", "{a}.mean()", "{a}.prod()", "{a}.max()", "{a}.sum(-1, keepdim=True)"]
VIEW = ["{a}[0]", "{a}.view(-1)", "{a}[None]", "{a}.expand(2, *{a}.shape)", "{a}.detach()"]
BINARY = ["{a} * {b}", "{a} + {b}", "{a} / {b}", "m.maximum({a}, {b})", "{a} - {b}",
          "{a} ** {b}", "{a}.atan2({b})"]
# with a number for b (x - 2 is AddBackward0 in flowgrad: DIFFERENT there)
SCALAR_BINARY = ["{a} * {b}", "{a} + {b}", "{a} / {b}", "{a} ** {b}"]
# grad_fn names torch gives where flowgrad's differ by design: a view whose base was written in
# place since reads AsStridedBackward0 in torch, its own op's node in flowgrad (documented in
# tests/test_grad_fn_introspection_vs_torch.py)
TORCH_ONLY_NAMES = {"AsStridedBackward0"}
LOSS = ["{a}.sum()", "({a} * {a}).sum()", "{a}.sin().sum()", "({a}.exp() * 0.5).sum()"]
# tensor hooks: what a hook on tensor `{a}` tagged {k} does with the gradient it gets
TENSOR_HOOKS = ["lambda g: log('{k}', g)", "lambda g: log('{k}', g) or g * 2",
                "lambda g: log('{k}', g) or g + 1", "lambda g: log('{k}', g) or m.zeros_like(g)",
                "lambda g: log('{k}', g) or boom()", "lambda g: g.sum()"]
NODE_HOOKS = ["lambda gi, go: log('{k}', (gi, go))",
              "lambda gi, go: log('{k}', (gi, go)) or tuple(None if x is None else x * 3 "
              "for x in gi)",
              "lambda gi, go: boom()"]
PRE_HOOKS = ["lambda go: log('{k}', go)",
             "lambda go: log('{k}', go) or tuple(None if x is None else x * 0.5 for x in go)",
             "lambda go: boom()"]
POST_HOOKS = ["lambda p: log('{k}', p.grad)",
              "lambda p: log('{k}', p.grad) or p.grad.mul_(2) and None",
              "lambda p: boom()", "lambda p: p.grad", "lambda p: 5"]
PACK = {"log": ("lambda t: log('pack', t.shape) or t", "lambda t: log('unpack', t.shape) or t"),
        "scale": ("lambda t: t * 2", "lambda t: t"),
        "clone": ("lambda t: t.clone()", "lambda t: t.clone()")}
MODES = ["m.no_grad()", "m.enable_grad()", "m.set_grad_enabled(False)",
         "m.set_grad_enabled(True)", "m.inference_mode()", "m.inference_mode(False)",
         "m.no_grad(), m.enable_grad()", "m.inference_mode(), m.inference_mode(False)",
         "m.autograd.graph.save_on_cpu()", "m.autograd.set_detect_anomaly(True)"]


def _r(x):
    return repr(round(float(x), 3))


def _literal(vals):
    if vals.ndim == 0:
        return _r(vals)
    return "[" + ", ".join(_literal(v) for v in vals) + "]"


class Boom(Exception):
    """What the programs' raising hooks raise (a type neither framework raises itself)."""


def namespace(m):
    """The names a program runs with under module `m`: `m`, `log`, `boom`, `H` and `LOG`."""
    log_list = []

    def log(tag, value):
        log_list.append((tag, _snap(value)))

    def boom():
        raise Boom("a hook raised")
    return {"m": m, "log": log, "boom": boom, "H": {}, "LOG": log_list, "Boom": Boom}


def _snap(v):
    """A framework-free copy of a value a hook saw."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_snap(x) for x in v)
    if hasattr(v, "detach") and hasattr(v, "shape"):
        # (force: torch hands some hooks an efficient ZeroTensor, which numpy() refuses)
        return ("T", tuple(v.shape), bool(v.requires_grad),
                v.detach().numpy(force=True).copy())
    if type(v).__name__ == "Size":
        return tuple(v)
    return repr(v)


def _exec(code, ns):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            exec(code, ns)
        except Exception as e:  # noqa: BLE001 - an exception is an outcome to compare
            return e
    return None


def _reset(m):
    m.set_grad_enabled(True)
    m.autograd.set_detect_anomaly(False)


class _Gen:
    """A program drawn from a seed, each step kept after running it in torch."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.vals = np.random.default_rng(seed)
        self.steps: list[str] = []
        self.ns = namespace(torch)
        self.count = 0
        _reset(torch)

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}{self.count}"

    def tensors(self, pred=lambda t: True):
        return [k for k, v in self.ns.items() if len(k) < 5 and k[0] in "xtlgv" and
                isinstance(v, torch.Tensor) and _read(v, pred) is True]

    def pick(self, pred=lambda t: True):
        names = self.tensors(pred)
        return self.rng.choice(names) if names else None

    def commit(self, code):
        err = _exec(code, self.ns)
        _reset(torch)
        if err is not None and self.rng.random() >= KEEP_RAISING:
            self.ns = namespace(torch)
            for s in self.steps:
                _exec(s, self.ns)
                _reset(torch)
            return False
        self.steps.append(code)
        return True

    # ---- step builders ------------------------------------------------------------------
    def leaf(self):
        shape = self.rng.choice(SHAPES)
        vals = self.vals.standard_normal(shape)
        if self.rng.random() < 0.5:
            vals = np.abs(vals) + 0.1
        rg = self.rng.random() < 0.85
        x = self.fresh("x")
        make = "m.nn.Parameter(m.tensor({}, dtype=m.float64))" if rg and \
            self.rng.random() < 0.15 else "m.tensor({}, dtype=m.float64, requires_grad=%s)" % rg
        return self.commit(f"{x} = " + make.format(_literal(vals)))

    def op(self):
        a = self.pick()
        if a is None:
            return False
        t = self.ns[a]
        r = self.rng.random()
        if r < 0.4:
            code = self.rng.choice(UNARY).format(a=a)
        elif r < 0.55:
            code = self.rng.choice(REDUCE if t.dim() else REDUCE[:3]).format(a=a)
        elif r < 0.7:
            code = self.rng.choice(VIEW if t.dim() else VIEW[1:]).format(a=a)
        else:
            b = self.pick(lambda u: _broadcasts(u.shape, t.shape)) if self.rng.random() < 0.8 \
                else None
            code = self.rng.choice(BINARY if b else SCALAR_BINARY).format(a=a, b=b or "1.5")
        t = self.fresh("v" if code in [v.format(a=a) for v in VIEW] else "t")
        code = f"{t} = {code}"
        if self.rng.random() < 0.3:
            code = f"with {self.rng.choice(MODES)}: {code}"
        elif self.rng.random() < 0.15:
            pack, unpack = PACK[self.rng.choice(sorted(PACK))]
            code = f"with m.autograd.graph.saved_tensors_hooks({pack}, {unpack}): {code}"
        return self.commit(code)

    def loss(self):
        a = self.pick(lambda u: u.requires_grad)
        if a is None:
            return False
        code = f"{self.fresh('l')} = {self.rng.choice(LOSS).format(a=a)}"
        if self.rng.random() < 0.1:
            code = f"with {self.rng.choice(MODES)}: {code}"
        return self.commit(code)

    def hook(self):
        r = self.rng.random()
        k = self.fresh("h")
        if r < 0.45:
            a = self.pick(lambda u: u.requires_grad) if self.rng.random() < 0.9 else self.pick()
            fn = self.rng.choice(TENSOR_HOOKS)
            code = f"H['{k}'] = {a}.register_hook({fn.format(k=k)})"
            if a is not None and self.ns[a]._backward_hooks is None:
                # torch's register_hook reads grad_fn just after it makes _backward_hooks, which
                # crashes torch 2.13 on a view whose base was written under no_grad (seeds
                # 7000798, 7002944); read it first, as register_hook would, and nothing else
                code = f"{a}.grad_fn; {code}"
        elif r < 0.75:
            a = self.pick(lambda u: u.grad_fn is not None) if self.rng.random() < 0.9 \
                else self.pick()
            if self.rng.random() < 0.5:
                code = f"H['{k}'] = {a}.grad_fn.register_hook(" \
                       f"{self.rng.choice(NODE_HOOKS).format(k=k)})"
            else:
                code = f"H['{k}'] = {a}.grad_fn.register_prehook(" \
                       f"{self.rng.choice(PRE_HOOKS).format(k=k)})"
        elif r < 0.9:
            a = self.pick(lambda u: u.is_leaf and u.requires_grad) if self.rng.random() < 0.9 \
                else self.pick()
            code = f"H['{k}'] = {a}.register_post_accumulate_grad_hook(" \
                   f"{self.rng.choice(POST_HOOKS).format(k=k)})"
        else:
            handles = list(self.ns["H"])
            if not handles:
                return False
            code = f"H[{self.rng.choice(handles)!r}].remove()"
        if "None." in code:
            return False
        return self.commit(code)

    def backward(self):
        rng = self.rng
        root = self.pick(lambda u: u.requires_grad and u.dim() == 0) if rng.random() < 0.8 \
            else self.pick()
        if root is None:
            return False
        args = []
        if self.ns[root].dim():
            args.append(rng.choice([f"m.ones_like({root})", f"m.full_like({root}, 0.5)",
                                    "m.ones(())"]))
        if rng.random() < 0.4:
            args.append(f"retain_graph={rng.choice([True, False])}")
        if rng.random() < 0.12:
            args.append("create_graph=True")
        if rng.random() < 0.3:
            args.append(f"inputs={self._inputs()}")
        call = f"{root}.backward({', '.join(args)})"
        r = rng.random()
        if r < 0.1:
            other = self.pick(lambda u: u.requires_grad and u.dim() == 0) or root
            call = f"m.autograd.backward([{root}, {other}], " \
                   f"grad_tensors=[None, m.tensor(2., dtype=m.float64)])"
        elif r < 0.2:
            call = f"{call}; {call}"
        elif r < 0.27:
            call = f"with m.autograd.detect_anomaly(): {call}"
        elif r < 0.33:
            call = f"with m.no_grad(): {call}"
        return self.commit(call)

    def _inputs(self):
        k = self.rng.randint(1, 3) if self.rng.random() < 0.95 else 0
        names = self.tensors()
        picks = self.rng.sample(names, min(k, len(names)))
        return "[" + ", ".join(picks) + "]" if self.rng.random() < 0.85 or len(picks) != 1 \
            else picks[0]

    def grad(self):
        rng = self.rng
        out = self.pick(lambda u: u.requires_grad)
        if out is None:
            return False
        shape = tuple(self.ns[out].shape)
        kw = []
        r = rng.random()
        if r < 0.25:
            kw.append(f"grad_outputs=m.full_like({out}, 2.0)")
        elif r < 0.33:
            kw.append("grad_outputs=m.ones(())" if shape else "grad_outputs=m.ones(1)")
        elif r < 0.4:
            kw.append("grad_outputs=[None]")
        elif r < 0.5:
            kw.append(f"grad_outputs=m.stack([m.ones_like({out}), m.full_like({out}, -1.)])")
            kw.append("is_grads_batched=True")
        if rng.random() < 0.3:
            kw.append(f"retain_graph={rng.choice([True, False])}")
        if rng.random() < 0.3:
            kw.append("create_graph=True")
        if rng.random() < 0.4:
            kw.append("allow_unused=True")
        if rng.random() < 0.25:
            kw.append("materialize_grads=True")
        if rng.random() < 0.1:
            kw.append(f"only_inputs={rng.choice([True, False])}")
        inputs = self._inputs()
        t = self.fresh("r")
        code = f"{t} = m.autograd.grad({out}, {inputs}, {', '.join(kw)})"
        if not self.commit(code):
            return False
        res = self.ns.get(t)
        if isinstance(res, tuple) and res and isinstance(res[0], torch.Tensor) and \
                rng.random() < 0.7:
            self.commit(f"g{t[1:]} = {t}[0]")
        return True

    def version(self, a):
        """What the 'leaf' log reads of `a`'s version: `a._version`, or None where torch's
        counts writes its own kernels made, which flowgrad's does not: a gradient's (the
        engine's in-place accumulation, maximum's tie formula), or a tensor no step wrote in
        place that torch gives a version anyway (sum/mean/clone of an inference tensor outside
        inference mode write their result through an out= kernel)"""
        if a[0] == "g":
            return "None"
        try:
            count = self.ns[a]._version
        except RuntimeError:  # (an inference tensor's: raised in both)
            return f"{a}._version"
        written = re.compile(rf"(with [^:]*: )?{a}\.[a-z_]+_\(")
        if count and not any(written.match(c) for c in self.steps):
            return "None"
        return f"{a}._version"

    def state(self):
        rng = self.rng
        a = self.pick()
        if a is None:
            return False
        # (not a gradient's node: see _READS)
        # (nor a CopySlices: torch's holds the written view's node inside, flowgrad's has an
        # edge to it, as tests/test_grad_fn_introspection_vs_torch.py documents; nor a node
        # named as TORCH_ONLY_NAMES; nor the node of a recorded mul_, whose edge goes to the
        # clone flowgrad writes into, that test's DIFFERENT "x.exp().mul_(2)")
        written = {c[:-len(".mul_(2)")] for c in self.steps if c.endswith(".mul_(2)")
                   and not c.startswith("with ")}
        fn = self.rng.choice([n for n in self.tensors(lambda u: u.grad_fn is None or all(
            s not in u.grad_fn.name() for s in ("CopySlices", *TORCH_ONLY_NAMES)))
                              if n[0] != "g" and n not in written] or [a])
        choices = [f"{a}.requires_grad_({rng.choice([True, False])})", f"{a}.retain_grad()",
                   f"{a}.retain_grad()", f"{a}.detach_()", f"{a}.grad = None",
                   f"{a}.grad.zero_()", f"{a}.grad = m.ones_like({a})",
                   f"log('fn', ({fn}.grad_fn.name(), [(None if f is None else f.name(), i) "
                   f"for f, i in {fn}.grad_fn.next_functions]))",
                   f"log('leaf', ({a}.is_leaf, {a}.requires_grad, {a}.grad_fn is None, "
                   f"{a}.retains_grad, {self.version(a)}))",
                   f"with m.no_grad(): {a}.mul_(2)", f"{a}.mul_(2)",
                   f"{self.fresh('t')} = {a} * 1"]
        return self.commit(rng.choice(choices))


BUILDERS = [(3, "leaf"), (8, "op"), (3, "loss"), (6, "hook"), (4, "backward"), (3, "grad"),
            (3, "state")]


def _broadcasts(a, b):
    try:
        return np.broadcast_shapes(tuple(a), tuple(b)) == tuple(b)
    except ValueError:
        return False


def generate(seed):
    """The steps of `seed`'s program (a deterministic function of the seed and torch)."""
    g = _Gen(seed)
    for _ in range(g.rng.randint(1, 3)):
        g.leaf()
    length = g.rng.randint(6, 22)
    weights = [w for w, _ in BUILDERS]
    tries = 0
    while len(g.steps) < length and tries < 200:
        tries += 1
        getattr(g, g.rng.choices([b for _, b in BUILDERS], weights=weights)[0])()
    _reset(torch)
    return g.steps


def source(seed):
    return "\n".join([HEADER, *generate(seed)])


# ---- running both -------------------------------------------------------------------------
def _observe(ns):
    """Every pool tensor's state and the log, framework-free."""
    seen = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, v in ns.items():
            if k in ("m", "log", "boom", "H", "LOG", "Boom", "__builtins__"):
                continue
            if isinstance(v, (tuple, list)):
                seen[k] = _snap(v)
                continue
            if not hasattr(v, "requires_grad"):
                continue
            seen[k] = tuple(_read(v, f) for f in _READS) + (
                "(a gradient's node)" if k[0] == "g" else _read(v, _node_name),)
    return seen, list(ns["LOG"])


def _node_name(v):
    return None if v.grad_fn is None else v.grad_fn.name()


# what is read of each pool tensor (grad_fn's name last: not of autograd.grad's results, whose
# nodes are the engine's own rules in flowgrad, torch's derivative formulas' in torch)
_READS = [_snap, lambda v: v.is_leaf, lambda v: v.grad_fn is None, lambda v: v.retains_grad,
          lambda v: v.is_inference(), lambda v: _snap(v.grad)]


def _read(v, what):
    """what(v), or the exception reading it raised (a no_grad view's grad_fn after its base was
    written in place raises in torch)."""
    try:
        return what(v)
    except Exception as e:  # noqa: BLE001 - an exception is an outcome to compare
        return f"raises {type(e).__name__}"


def _differ(a, b, where):
    """A message where framework-free values `a` (flowgrad) and `b` (torch) differ."""
    if isinstance(b, tuple) and b and b[0] == "T":
        if not (isinstance(a, tuple) and a and a[0] == "T"):
            return f"{where}: flowgrad {a!r}, torch a tensor"
        if a[1:3] != b[1:3]:
            return f"{where}: shape/requires_grad flowgrad {a[1:3]}, torch {b[1:3]}"
        return fuzz_common.first_difference([(where, a[3], b[3])], rtol=1e-9)
    if isinstance(b, tuple) and isinstance(a, tuple) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            msg = _differ(x, y, f"{where}[{i}]")
            if msg:
                return msg
        return None
    if a != b:
        return f"{where}: flowgrad {a!r}, torch {b!r}"
    return None


_RUNS_BACKWARD = re.compile(r"backward\(|autograd\.grad\(")
FIELDS = ["value", "is_leaf", "grad_fn is None", "retains_grad", "is_inference", ".grad",
          "grad_fn.name()"]
# the errors flowgrad's backward raises before anything runs (a node's saved tensors freed,
# written or detached in place since), where torch's raises on reaching the node, after the
# hooks before it ran (which may raise first)
_UPFRONT = re.compile("backward through the graph a second time|modified by an in-place "
                      "operation|detached in-place")


# flowgrad refuses a write into a tensor saved through a pack hook that kept it, where torch
# skips its version check and computes the gradient of the values written (seed 6000309)
_KEPT_BY_PACK = "pack hook that kept the tensor itself"


def check(seed):
    """None when flowgrad runs `seed`'s program as torch does, else a message."""
    steps = generate(seed)
    nt, nf = namespace(torch), namespace(flow)
    seen = 0
    try:
        for i, code in enumerate(steps):
            et = _exec(code, nt)
            _reset(torch)
            ef = _exec(code, nf)
            _reset(flow)
            if et is not None and ef is not None and _RUNS_BACKWARD.search(code) and \
                    _UPFRONT.search(str(ef)):
                return None
            if et is None and ef is not None and _KEPT_BY_PACK in str(ef):
                return None  # (deliberate: torch reads the written values without a word)
            if (et is None) != (ef is None) or et is not None and \
                    type(et).__name__ != type(ef).__name__:
                return f"step {i} `{code}`: torch {_err(et)}, flowgrad {_err(ef)}"
            if et is not None and _RUNS_BACKWARD.search(code):
                # both raised in a backward run: torch's stops half-way (gradients accumulated
                # and hooks run before the failing node), flowgrad checks saved tensors before
                # anything runs and orders sibling nodes its own way: the programs end here
                return None
            (pt, lt), (pf, lf) = _observe(nt), _observe(nf)
            lt, lf = _canonical(lt[seen:], et), _canonical(lf[seen:], ef)
            seen = len(nt["LOG"])
            if len(lt) != len(lf) or [t for t, _ in lt] != [t for t, _ in lf]:
                return f"step {i} `{code}`: log tags flowgrad {[t for t, _ in lf]}, torch " \
                       f"{[t for t, _ in lt]}"
            msg = _differ(tuple(v for _, v in lf), tuple(v for _, v in lt), "log")
            if msg:
                return f"step {i} `{code}`: {msg}"
            if sorted(pt) != sorted(pf):
                return f"step {i} `{code}`: names flowgrad {sorted(pf)}, torch {sorted(pt)}"
            for k in pt:
                a, b = pf[k], pt[k]
                if isinstance(b, tuple) and len(b) == len(FIELDS) and isinstance(b[0], tuple) \
                        and b[0][0] == "T":
                    for f, x, y in zip(FIELDS, a, b):
                        if f == "grad_fn.name()" and y in TORCH_ONLY_NAMES:
                            continue
                        msg = _differ(x, y, f"{k} {f}")
                        if msg:
                            return f"step {i} `{code}`: {msg}"
                else:
                    msg = _differ(a, b, k)
                    if msg:
                        return f"step {i} `{code}`: {msg}"
    finally:
        _reset(torch)
        _reset(flow)
    return None


def _canonical(entries, raised=None):
    """One step's log entries: the hooks' in their order, then the saved-tensor hooks' sorted
    (which tensors an op saves is compared, not the order it packs them in: torch's follows
    its generated code, mul packs `other` before `self`). In a step that raised (in both)
    the saved-tensor hooks' entries are left out: which tensors were packed before the refusal
    is that order too (torch's atan2 of an inference tensor and a tensor requiring grad packs
    `other` first, then refuses `self`; flowgrad checks before packing: seed 11500058)."""
    saved = [e for e in entries if e[0] in ("pack", "unpack")]
    return [e for e in entries if e[0] not in ("pack", "unpack")] + \
        ([] if raised is not None else sorted(saved, key=repr))


def _err(e):
    return "ran" if e is None else f"raised {type(e).__name__}: {str(e)[:150]}"


def report(seed):
    """The program of `seed` and where it differs from torch, or None when it runs alike."""
    verdict = check(seed)
    return None if verdict is None else f"{source(seed)}\n# differs: {verdict}"


def main():
    return fuzz_common.report_main(__doc__, source, report)


if __name__ == "__main__":
    raise SystemExit(main())
