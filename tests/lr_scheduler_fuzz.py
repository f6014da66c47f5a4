"""Differential fuzzing of lr schedulers: random hyperparameters and random usage sequences.

A program draws an optimizer (SGD with or without momentum, Adam, AdamW, RMSprop; now and
then Adagrad, which has no momentum to cycle) with one to three param groups of their own
lr / momentum / betas, and one scheduler of any class torch has, with random hyperparameters
(sometimes invalid ones: the constructor must raise as torch's does): per-group lists,
unsorted and repeated milestones, fractional and deprecated `step(epoch)` forms, CyclicLR's
modes, custom scale functions and momentum cycling (SGD's momentum, Adam's beta1),
OneCycleLR's phases, ReduceLROnPlateau on metric sequences with nan and infinities,
SequentialLR and ChainedScheduler of random children. Then a random sequence of
`optimizer.step()`, `scheduler.step(...)`, an lr changed by hand, `add_param_group`, and a
`state_dict()` loaded into a freshly built scheduler (and sometimes a fresh optimizer; in
flowgrad's run sometimes the state_dict torch saved at that point).

After every call both frameworks must agree on: raise/no-raise and the exception type, the
UserWarnings torch gives (step order, the deprecated epoch), every group's lr (exactly; a
difference of one ulp is reported as such), momentum, betas and the keys the schedulers add
to the groups, `get_last_lr()`, what a direct `get_lr()` returned, `last_epoch`, the
scheduler's `state_dict()` (keys and values, callables left out), the parameters, and the
caller's tensors given as hyperparameters (which no scheduler may write into).

    .venv/bin/python tests/lr_scheduler_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/lr_scheduler_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import copy
import math
import random
import types
import warnings
from collections import Counter

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

# group keys a scheduler reads or writes
GROUP_KEYS = ("lr", "initial_lr", "momentum", "betas", "max_lr", "min_lr", "base_momentum",
              "max_momentum")
# state_dict entries only one framework has, by design: torch's bookkeeping flag, and the
# OneFlow options flowgrad's PolynomialLR / CosineAnnealingWarmRestarts also take
STATE_ONLY_TORCH = set()
STATE_ONLY_FLOWGRAD = {"_oneflow", "cycle", "end_learning_rate", "decay_rate", "restart_limit"}
# what flowgrad refuses on purpose where torch loads anything: a state_dict that does not fit
# the scheduler (see test_lr_scheduler's load_state_dict tests)
KNOWN_REFUSAL = "load_state_dict: "


class Fn:
    """A callable drawn by the program, made afresh for each framework."""

    def __init__(self, kind, arg):
        self.kind, self.arg = kind, arg

    def __repr__(self):
        return f"{self.kind}({self.arg})"

    def make(self):
        a = self.arg
        if self.kind == "pow":
            return lambda e: a ** e
        if self.kind == "const":
            return lambda e: a
        if self.kind == "warm":
            return Warm(a)
        if self.kind == "half":
            return lambda x: a ** x
        if self.kind == "scale":
            return Scale(a)
        return a  # "bad": not callable


class Warm:
    """A callable object: its __dict__ goes into the state_dict."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


class Scale:
    def __init__(self, g):
        self.g = g

    def __call__(self, x):
        return 1.0 / (1.0 + self.g * x)


class Spec:
    """A scheduler: its class name, positional and keyword arguments (Fn and Spec inside)."""

    def __init__(self, name, args=(), kwargs=None):
        self.name, self.args, self.kwargs = name, tuple(args), dict(kwargs or {})

    def __repr__(self):
        inner = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(inner)})"


class Tn:
    """A float64 tensor argument (base_lr, max_lr, momentum), made afresh for each framework;
    the program watches it: a scheduler must not write into its caller's tensor."""

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"tensor({self.value})"


MADE = []  # the tensors Tn made in the current run


def _resolve(m, opt, v):
    if isinstance(v, Fn):
        return v.make()
    if isinstance(v, Tn):
        MADE.append(m.tensor(v.value, dtype=m.float64))
        return MADE[-1]
    if isinstance(v, Spec):
        return build(m, opt, v)
    if isinstance(v, list):
        return [_resolve(m, opt, x) for x in v]
    return v


def build(m, opt, spec):
    cls = getattr(m.optim.lr_scheduler, spec.name)
    args = [_resolve(m, opt, a) for a in spec.args]
    kwargs = {k: opt if v == "the optimizer" else _resolve(m, opt, v)
              for k, v in spec.kwargs.items()}
    if spec.name == "ChainedScheduler":
        return cls(*args, **kwargs)
    return cls(opt, *args, **kwargs)


def _per_group(r, n, draw, tensors=False):
    """One value, or (sometimes) a list of one per group (rarely of the wrong length); with
    `tensors`, now and then a tensor."""
    if tensors:
        plain = draw
        draw = lambda: Tn(plain()) if r.random() < 0.15 else plain()  # noqa: E731
    if r.random() < 0.3:
        k = n if r.random() < 0.9 else r.choice([k for k in (1, 2, 3, 4) if k != n])
        return [draw() for _ in range(k)]
    return draw()


def _lambda(r, bad, n, multiplicative=False):
    def one():
        if bad and r.random() < 0.5:
            return Fn("bad", 0.5)
        kind = r.choice(["pow", "const", "warm"])
        if kind == "pow":
            return Fn("pow", r.choice([0.9, 0.5, 1.1, 0.99]))
        if kind == "const":
            return Fn("const", r.choice([0.9, 1.0, 0.5, 2.0] if multiplicative else [0.5, 1.0]))
        return Fn("warm", r.randint(1, 5))
    if r.random() < 0.4:
        k = n if not bad or r.random() < 0.5 else n + 1
        return [one() for _ in range(k)]
    return one()


def _simple(r, n, bad, name=None):
    """A scheduler that can be a child of SequentialLR / ChainedScheduler; now and then with
    its integer arguments (step_size, total_iters, T_max, milestones) given as floats."""
    spec = _simple_spec(r, n, bad, name)
    if r.random() < 0.1:
        def floats(v):
            if isinstance(v, list):
                return [floats(x) for x in v]
            return float(v) if type(v) is int else v
        spec.args = tuple(floats(a) for a in spec.args)
        spec.kwargs = {k: floats(v) for k, v in spec.kwargs.items()}
    return spec


def _simple_spec(r, n, bad, name=None):
    name = name or r.choice(["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
                             "ConstantLR", "LinearLR", "ExponentialLR", "PolynomialLR",
                             "CosineAnnealingLR"])
    if name in ("LambdaLR", "MultiplicativeLR"):
        return Spec(name, [_lambda(r, bad, n, name == "MultiplicativeLR")])
    if name == "StepLR":
        return Spec(name, [r.choice([1, 2, 3, 5] + ([0] if bad else []))],
                    {"gamma": r.choice([0.1, 0.5, 0.9, 1.5])})
    if name == "MultiStepLR":
        ms = [r.randint(0 if bad else 1, 10) for _ in range(r.randint(0, 5))]
        return Spec(name, [ms], {"gamma": r.choice([0.1, 0.5, 0.3])})
    if name == "ConstantLR":
        lo = -0.5 if bad else 0.05
        return Spec(name, [], {"factor": r.choice([lo, 0.5, 1 / 3, 1.0, 1.5 if bad else 0.25]),
                               "total_iters": r.choice([0, 1, 2, 4, 6])})
    if name == "LinearLR":
        return Spec(name, [], {"start_factor": r.choice([0.1, 0.25, 1 / 3, 1.0]
                                                        + ([0.0, 1.2] if bad else [])),
                               "end_factor": r.choice([1.0, 0.5, 0.0, 0.9]
                                                      + ([1.5] if bad else [])),
                               "total_iters": r.choice([1, 2, 3, 5] + ([0] if bad else []))})
    if name == "ExponentialLR":
        return Spec(name, [r.choice([0.9, 0.5, 0.99, 1.0])])
    if name == "PolynomialLR":
        return Spec(name, [], {"total_iters": r.choice([1, 2, 4, 6] + ([0] if bad else [])),
                               "power": r.choice([1.0, 2.0, 0.5, 3])})
    return Spec("CosineAnnealingLR", [r.choice([1, 2, 3, 5] + ([0] if bad else []))],
                {"eta_min": r.choice([0.0, 1e-4, 0.01])})


def _scheduler(r, n, bad):
    name = r.choice(["LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
                     "LinearLR", "ExponentialLR", "PolynomialLR", "CosineAnnealingLR",
                     "CosineAnnealingWarmRestarts", "CyclicLR", "CyclicLR", "OneCycleLR",
                     "OneCycleLR", "ReduceLROnPlateau", "ReduceLROnPlateau", "SequentialLR",
                     "ChainedScheduler"])
    if name == "CosineAnnealingWarmRestarts":
        kw = {**_last_epoch(r), "T_mult": r.choice([1, 1, 2, 3] + ([0, 1.5] if bad else [])),
              "eta_min": r.choice([0.0, 1e-3, 0] + (["x"] if bad else []))}
        return Spec(name, [r.choice([1, 2, 3, 4] + ([0, 2.0] if bad else []))], kw)
    if name == "CyclicLR":
        kw = {**_last_epoch(r), "step_size_up": r.randint(1, 5), "mode": r.choice(
            ["triangular", "triangular2", "exp_range"] + (["bogus"] if bad else []))}
        if r.random() < 0.5:
            kw["step_size_down"] = r.randint(1, 5)
        if r.random() < 0.5:
            kw["gamma"] = r.choice([0.9, 0.5, 0.99])
        if r.random() < 0.25:
            kw["scale_fn"] = r.choice([Fn("half", 0.5), Fn("scale", 0.3)])
            kw["scale_mode"] = r.choice(["cycle", "iterations"])
        kw["cycle_momentum"] = r.random() < 0.7
        if r.random() < 0.5:
            kw["base_momentum"] = _per_group(r, n, lambda: r.choice([0.8, 0.7, 0.85]), True)
        if r.random() < 0.5:
            kw["max_momentum"] = _per_group(r, n, lambda: r.choice([0.9, 0.95]), True)
        return Spec(name, [_per_group(r, n, lambda: r.choice([1e-3, 0.01, 0.02]), True),
                           _per_group(r, n, lambda: r.choice([0.1, 0.05, 0.2]), True)], kw)
    if name == "OneCycleLR":
        kw = _last_epoch(r)
        if r.random() < 0.6:
            kw["total_steps"] = r.choice([2, 3, 5, 8, 12] + ([0, 5.0] if bad else []))
        if "total_steps" not in kw or r.random() < 0.2:
            if not bad or r.random() < 0.7:
                kw["epochs"] = r.choice([1, 2, 3] + ([0] if bad else []))
            kw["steps_per_epoch"] = r.choice([1, 2, 4])
        if r.random() < 0.6:
            kw["pct_start"] = r.choice([0.3, 0.25, 0.5, 0.1, 0.0, 1.0]
                                       + ([1, 1.5, -0.1] if bad else []))
        if r.random() < 0.5:
            kw["anneal_strategy"] = r.choice(["cos", "linear"] + (["quad"] if bad else []))
        kw["three_phase"] = r.random() < 0.3
        kw["cycle_momentum"] = r.random() < 0.7
        if r.random() < 0.5:
            kw["div_factor"] = r.choice([25.0, 10.0, 4])
        if r.random() < 0.5:
            kw["final_div_factor"] = r.choice([1e4, 100.0, 10])
        if r.random() < 0.4:
            kw["base_momentum"] = _per_group(r, n, lambda: r.choice([0.85, 0.8]), True)
        if r.random() < 0.4:
            kw["max_momentum"] = _per_group(r, n, lambda: r.choice([0.95, 0.9]), True)
        return Spec(name, [_per_group(r, n, lambda: r.choice([0.1, 1.0, 0.05]), True)], kw)
    if name == "ReduceLROnPlateau":
        kw = {"mode": r.choice(["min", "max"] + (["middle", None] if bad else [])),
              "factor": r.choice([0.1, 0.5, 0.9] + ([1.0] if bad else [])),
              "patience": r.choice([0, 1, 2, 3]),
              "threshold": r.choice([1e-4, 0.0, 0.1, 1.0]),
              "threshold_mode": r.choice(["rel", "abs"] + (["both"] if bad else [])),
              "cooldown": r.choice([0, 0, 1, 2]),
              "eps": r.choice([1e-8, 1e-3, 0.0])}
        if r.random() < 0.6:
            kw["min_lr"] = _per_group(r, n, lambda: r.choice([0.0, 1e-3, 0.02]))
        return Spec(name, [], kw)
    if name == "SequentialLR":
        k = r.randint(1 if bad else 2, 3)
        children = [_child(r, n) for _ in range(k)]
        ms = [r.randint(0, 8) for _ in range(k - 1 + (r.random() < 0.1 if bad else 0))]
        if r.random() < 0.7:
            ms.sort()
        return Spec(name, [children, ms], _last_epoch(r))
    if name == "ChainedScheduler":
        kw = {"optimizer": "the optimizer"} if r.random() < 0.3 else {}
        return Spec(name, [[_child(r, n) for _ in range(r.randint(1, 3))]], kw)
    spec = _simple(r, n, bad, name)
    spec.kwargs.update(_last_epoch(r))
    return spec


def _child(r, n):
    """A child of SequentialLR / ChainedScheduler: now and then one of those itself."""
    if r.random() < 0.1:
        return Spec("ChainedScheduler", [[_simple(r, n, False) for _ in range(2)]])
    if r.random() < 0.1:
        return Spec("SequentialLR", [[_simple(r, n, False) for _ in range(2)],
                                     [r.randint(1, 4)]])
    return _simple(r, n, False)


def _last_epoch(r):
    """Now and then a resumed scheduler's last_epoch (the groups need initial_lr)."""
    return {"last_epoch": r.choice([0, 2, 5])} if r.random() < 0.12 else {}


def _optimizer(r):
    name = r.choice(["SGD", "SGDm", "Adam", "AdamW", "RMSprop"] * 4 + ["Adagrad"])
    n = r.randint(1, 3)
    initial = r.random() < 0.15  # the groups carry initial_lr (a resumed run)
    groups = []
    for _ in range(n):
        g = {}
        if r.random() < 0.5:
            g["lr"] = r.choice([0.1, 0.05, 0.01, 1])
        if name == "SGDm" and r.random() < 0.4:
            g["momentum"] = r.choice([0.5, 0.8])
        if name in ("Adam", "AdamW") and r.random() < 0.4:
            g["betas"] = r.choice([(0.8, 0.99), (0.5, 0.9)])
        if initial:
            g["initial_lr"] = r.choice([0.1, 0.2, 0.05])
        groups.append(g)
    kw = {"lr": r.choice([0.1, 0.01, 0.5])}
    if r.random() < 0.12:
        # an lr kept as a tensor (float64: with a float32 one torch's Adam and AdamW round
        # their step in float32, an optimizer matter outside this fuzzer)
        kw["lr"] = ("tensor", kw["lr"])
    if name == "SGDm":
        kw["momentum"] = r.choice([0.9, 0.0])
    if name in ("Adam", "AdamW") and r.random() < 0.5:
        kw["betas"] = (0.9, 0.999)
    return name, groups, kw


def _ops(r, plateau, epoch_ok):
    ops, metric = [], 1.0
    for _ in range(r.randint(6, 24)):
        x = r.random()
        if x < 0.3:
            ops.append(("opt_step",))
        elif x < 0.75:
            if plateau:
                u = r.random()
                metric = (metric if u < 0.3 else metric * r.choice([0.5, 0.99, 1.01, 2.0])
                          if u < 0.9 else r.choice([math.nan, math.inf, -math.inf, 0.0]))
                epoch = r.choice([None] * 6 + [r.randint(0, 9)])
                ops.append(("plateau", metric, epoch, r.random() < 0.2))
            elif epoch_ok and r.random() < 0.15:
                ops.append(("step_epoch", r.choice([0, 1, 2, 3, 5, 7, 1.5, 2.5, -1, 0.5])))
            else:
                ops.append(("step",))
        elif x < 0.8:
            ops.append(("reload", r.random() < 0.3, r.random() < 0.5, r.random() < 0.4))
        elif x < 0.84:
            ops.append(("get_lr",))
        elif x < 0.85:
            ops.append(("override",))
        elif x < 0.945:
            ops.append(("set_lr", r.random(), r.choice([0.5, 2.0, 0.1])))
        elif x < 0.96:
            ops.append(("add_group", r.choice([None, 0.3])))
        else:
            ops.append(("step_epoch", r.choice([1, 2, 4])))
    return ops


class Program:
    """One scheduler program, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        self.opt_name, self.groups, self.opt_kw = _optimizer(r)
        self.bad = r.random() < 0.15
        self.spec = _scheduler(r, len(self.groups), self.bad)
        self.ops = _ops(r, self.spec.name == "ReduceLROnPlateau",
                        self.spec.name not in ("SequentialLR", "ChainedScheduler")
                        or r.random() < 0.1)
        self.grads = np.random.default_rng(seed).standard_normal((len(self.ops) + 1, 4, 2))

    def describe(self):
        return (f"{self.opt_name}({self.groups}, {self.opt_kw}) {self.spec!r} "
                f"ops {self.ops}")

    def _make_opt(self, m, params, groups):
        name = "SGD" if self.opt_name == "SGDm" else self.opt_name
        kw = dict(self.opt_kw)
        if isinstance(kw["lr"], tuple):
            kw["lr"] = m.tensor(kw["lr"][1], dtype=m.float64)
            if name != "SGD":
                kw["foreach"] = False
        return getattr(m.optim, name)(
            [dict(g, params=[p]) for g, p in zip(groups, params)], **kw)

    def run(self, m):
        """A record per call: (what it raised, the warnings, the state after it)."""
        if m is torch:
            self.torch_states = {}  # the state_dict torch saved at each reload
        MADE.clear()
        params = [m.nn.Parameter(m.tensor(np.linspace(-1.0, 1.0, 2) * (i + 1)))
                  for i in range(len(self.groups))]
        opt = self._make_opt(m, params, self.groups)
        records = []
        sched, ok = _call(records, lambda: build(m, opt, self.spec))
        if not ok:
            return records
        records[-1][2] = _snapshot(opt, sched, params)
        for i, op in enumerate(self.ops):
            state = {"sched": sched, "opt": opt}

            def call(op=op, state=state, i=i):
                _apply(m, self, op, state, params, i)
            _call(records, call)
            sched, opt = state["sched"], state["opt"]
            records[-1][2] = _snapshot(opt, sched, params)
            if records[-1][2] is not None and "got" in state:
                records[-1][2]["get_lr"] = state["got"]
        return records


def _apply(m, prog, op, state, params, i):
    sched, opt = state["sched"], state["opt"]
    kind = op[0]
    if kind == "opt_step":
        for k, p in enumerate(params):
            p.grad = m.tensor(prog.grads[i, k % 4].copy())
        opt.step()
    elif kind == "step":
        sched.step()
    elif kind == "step_epoch":
        sched.step(op[1])
    elif kind == "plateau":
        metric = m.tensor(op[1]) if op[3] else op[1]
        if op[2] is None:
            sched.step(metric)
        else:
            sched.step(metric, op[2])
    elif kind == "get_lr":  # torch warns: get_last_lr() is the way to read the lrs
        state["got"] = _norm(sched.get_lr())
    elif kind == "override":  # optimizer.step replaced after the scheduler wrapped it
        opt.step = type(opt).step.__get__(opt)
    elif kind == "set_lr":
        g = opt.param_groups[int(op[1] * len(opt.param_groups))]
        g["lr"] = g["lr"] * op[2]
    elif kind == "add_group":
        p = m.nn.Parameter(m.tensor(np.full(2, 0.5)))
        params.append(p)
        opt.add_param_group({"params": [p]} if op[1] is None else {"params": [p], "lr": op[1]})
    elif kind == "reload":
        saved = sched.state_dict()
        if op[2]:
            saved = copy.deepcopy(saved)
        if m is torch:
            prog.torch_states[i] = copy.deepcopy(saved)
        elif op[3] and not _has_tensor(prog.torch_states[i]):  # (torch's tensors: not ours)
            saved = copy.deepcopy(prog.torch_states[i])  # torch's own state_dict, loaded
        if op[1]:  # a fresh optimizer too, from its own state_dict
            osd = opt.state_dict()
            groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
            opt = prog._make_opt(m, params, groups)
            opt.load_state_dict(osd)
        fresh = build(m, opt, prog.spec)
        fresh.load_state_dict(saved)
        state["sched"], state["opt"] = fresh, opt  # (a failed reload keeps the old ones)


def _has_tensor(v):
    if isinstance(v, dict):
        return any(_has_tensor(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    return isinstance(v, torch.Tensor)


def _call(records, fn):
    """Run fn, appending [exception or None, warnings, None] to records; (result, ok)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out, err = fn(), None
        except Exception as e:  # noqa: BLE001 - compared with torch's
            out, err = None, e
    records.append([err, [_warning_kind(w) for w in caught
                          if issubclass(w.category, UserWarning)], None])
    return out, err is None


def _warning_kind(w):
    msg = str(w.message)
    for key, kind in (("before `optimizer.step()`", "order"), ("overridden", "overridden"),
                      ("epoch parameter", "epoch"), ("get_last_lr", "get_lr")):
        if key in msg:
            return kind
    return f"{w.category.__name__}: {msg[:80]}"


def _snapshot(opt, sched, params):
    if sched is None:
        return None
    groups = [{k: _norm(g[k]) for k in GROUP_KEYS if k in g} for g in opt.param_groups]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sd = sched.state_dict()
    return {"groups": groups, "get_last_lr": _norm(sched.get_last_lr()),
            "caller's tensors": [_norm(t) for t in MADE],
            "last_epoch": _norm(getattr(sched, "last_epoch", None)),
            "state_dict": _norm_state(sd),
            "params": [p.detach().numpy().copy() for p in params]}


def _norm(v):
    """Plain comparable values: numbers keep their type, tensors become ('tensor', value)."""
    if hasattr(v, "detach") and hasattr(v, "numel"):
        return ("tensor", str(v.dtype).rsplit(".", 1)[-1], _norm(v.detach().numpy().tolist()))
    if isinstance(v, Counter):
        return ("Counter", sorted(v.items()))
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items() if not callable(x)}
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_norm(x) for x in v])
    return v


def _norm_state(sd):
    out = {}
    for k, v in sd.items():
        if k in STATE_ONLY_TORCH or k in STATE_ONLY_FLOWGRAD or isinstance(
                v, (types.FunctionType, types.MethodType)) or callable(v):
            continue
        if k == "_schedulers":
            v = [_norm_state(s) for s in v]
        out[k] = _norm(v)
    return out


def _ulps(a, b):
    """How many float64 steps apart two finite floats are."""
    ia, ib = (np.array([x], dtype=np.float64).view(np.int64)[0] for x in (a, b))
    return abs(int(ia) - int(ib)) if (a >= 0) == (b >= 0) else None


def diff(got, want, path="", in_params=False):
    """The first difference between two normalized values, as a message, else None."""
    if isinstance(want, np.ndarray):
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-10, atol=1e-12,
                                                      equal_nan=True):
            return f"{path}: flowgrad {got!r}, torch {want!r}"
        return None
    if type(got) is not type(want):
        return f"{path}: flowgrad {got!r} ({type(got).__name__}), torch {want!r} " \
               f"({type(want).__name__})"
    if isinstance(want, dict):
        if set(got) != set(want):
            return (f"{path}: keys only in flowgrad {sorted(set(got) - set(want), key=str)}, "
                    f"only in torch {sorted(set(want) - set(got), key=str)}")
        for k in want:
            d = diff(got[k], want[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: flowgrad {got!r}, torch {want!r}"
        for i, (a, b) in enumerate(zip(got, want)):
            d = diff(a, b, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(want, float):
        if got == want or (math.isnan(got) and math.isnan(want)):
            return None
        ulp = _ulps(got, want) if math.isfinite(got) and math.isfinite(want) else None
        note = f" ({ulp} ulp apart)" if ulp is not None and ulp <= 4 else ""
        return f"{path}: flowgrad {got!r}, torch {want!r}{note}"
    if got != want:
        return f"{path}: flowgrad {got!r}, torch {want!r}"
    return None


# how many programs ended early on a KNOWN difference, by kind (the --seeds summary shows it)
STOPPED = Counter()


def check(seed):
    """None when flowgrad's scheduler program behaves as torch's, else a message."""
    prog = Program(seed)
    want = prog.run(torch)
    got = prog.run(flow)
    for i, ((eg, wg, sg), (et, wt, st)) in enumerate(zip(got, want)):
        what = "construction" if i == 0 else f"op {i - 1} {prog.ops[i - 1]}"
        if (eg is None) != (et is None):
            if et is None and isinstance(eg, ValueError) and KNOWN_REFUSAL in str(eg):
                STOPPED["flowgrad refused a state_dict that does not fit"] += 1
                return None  # (KNOWN)
            return (f"{what}: flowgrad raised {type(eg).__name__}: {eg}" if eg is not None
                    else f"{what}: torch raised {type(et).__name__}: {et}; flowgrad ran")
        if eg is not None and type(eg) is not type(et):
            return (f"{what}: flowgrad raised {type(eg).__name__}: {eg}; torch "
                    f"{type(et).__name__}: {et}")
        if wg != wt:
            return f"{what}: warnings flowgrad {wg}, torch {wt}"
        if (sg is None) != (st is None):
            return f"{what}: scheduler kept by one framework only"
        if sg is not None:
            d = diff(sg, st)
            if d and et is not None and "zip()" in str(et):  # (KNOWN)
                STOPPED["both raised, torch's strict zip had set some groups"] += 1
                return None
            if d and et is not None and i > 0 and prog.ops[i - 1][0] == "opt_step":
                STOPPED["both optimizers raised, torch's after its weight decay"] += 1
                return None  # (KNOWN: AdamW with beta1 = 1 divides by 1 - beta1^t = 0)
            if d:
                return f"{what}: {d}"
    if len(got) != len(want):
        return f"flowgrad made {len(got)} calls, torch {len(want)}"
    return None


def main():
    import atexit
    atexit.register(lambda: print("ended early (KNOWN):", dict(STOPPED)))
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
