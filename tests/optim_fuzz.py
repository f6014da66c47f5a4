"""Differential fuzzing of optimizers: random optimizer programs run in torch and in flowgrad.

A program draws an optimizer class and a point of its hyperparameter space (every flag:
momentum, nesterov, dampening, amsgrad, maximize, centered, decoupled weight decay, foreach,
...), one or two parameter groups with their own overrides, parameters of several shapes (a
0-d one, an empty one), then runs steps with the same gradients in both frameworks: some
steps leave a parameter's grad None, one may change a group's lr by hand, most run a
scheduler (every one flowgrad has), and once the optimizer and its scheduler are rebuilt
from their state_dicts (saved, then loaded into new ones). After every step the parameters,
the state and the groups' learning rates must agree with torch's.

    .venv/bin/python tests/optim_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/optim_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import random

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

STEPS = 6
SHAPES = [(3,), (2, 3), (), (4, 1), (0,), (5,)]
TOL = {"float64": 1e-10, "float32": 2e-5}


def _space(r):
    """(class name, kwargs) drawn from the class's hyperparameters."""
    lr = r.choice([0.1, 0.01, 1e-3])
    wd = r.choice([0.0, 0.0, 1e-2, 0.1])
    name = r.choice(["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
                     "Adadelta", "Rprop", "ASGD"])
    maximize = r.random() < 0.2
    if name == "SGD":
        momentum = r.choice([0.0, 0.9, 0.5])
        nesterov = momentum > 0 and r.random() < 0.5
        return name, dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=wd,
                          dampening=0.0 if nesterov else r.choice([0.0, 0.1]),
                          maximize=maximize)
    if name in ("Adam", "AdamW"):
        kw = dict(lr=lr, betas=r.choice([(0.9, 0.999), (0.8, 0.9)]), eps=r.choice([1e-8, 1e-6]),
                  weight_decay=wd, amsgrad=r.random() < 0.4, maximize=maximize)
        if name == "Adam" and r.random() < 0.3:
            kw["decoupled_weight_decay"] = True
        return name, kw
    if name == "Adamax":
        return name, dict(lr=lr, weight_decay=wd, maximize=maximize)
    if name == "NAdam":
        return name, dict(lr=lr, weight_decay=wd, momentum_decay=r.choice([4e-3, 1e-2]),
                          decoupled_weight_decay=r.random() < 0.4, maximize=maximize)
    if name == "RAdam":
        return name, dict(lr=lr, weight_decay=wd, decoupled_weight_decay=r.random() < 0.4,
                          maximize=maximize)
    if name == "RMSprop":
        return name, dict(lr=lr, alpha=r.choice([0.99, 0.9]), weight_decay=wd,
                          momentum=r.choice([0.0, 0.5]), centered=r.random() < 0.5,
                          maximize=maximize)
    if name == "Adagrad":
        return name, dict(lr=lr, lr_decay=r.choice([0.0, 0.01]), weight_decay=wd,
                          initial_accumulator_value=r.choice([0.0, 0.1]), maximize=maximize)
    if name == "Adadelta":
        return name, dict(lr=r.choice([1.0, 0.5]), rho=r.choice([0.9, 0.95]), weight_decay=wd,
                          maximize=maximize)
    if name == "Rprop":
        return name, dict(lr=lr, etas=r.choice([(0.5, 1.2), (0.3, 1.5)]),
                          step_sizes=r.choice([(1e-6, 50), (1e-3, 1.0)]), maximize=maximize)
    return name, dict(lr=lr, lambd=r.choice([1e-4, 1e-2]), alpha=0.75, t0=r.choice([1.0, 3.0]),
                      weight_decay=wd, maximize=maximize)


def _plateau(s, opt):
    sched = s.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    metrics = iter([1.0, 0.9, 0.95, 0.97, 0.99, 1.1, 0.5, 0.6])
    sched.step = (lambda step: lambda: step(next(metrics)))(sched.step)
    return sched


# a scheduler over the optimizer (module `s`: torch's or flowgrad's lr_scheduler)
SCHEDULERS = {
    "StepLR": lambda s, o: s.StepLR(o, 2, gamma=0.5),
    "MultiStepLR": lambda s, o: s.MultiStepLR(o, [1, 3], gamma=0.3),
    "ExponentialLR": lambda s, o: s.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, T_max=4, eta_min=1e-4),
    "CosineAnnealingWarmRestarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, 2, T_mult=2),
    "LinearLR": lambda s, o: s.LinearLR(o, start_factor=0.25, total_iters=3),
    "ConstantLR": lambda s, o: s.ConstantLR(o, factor=0.5, total_iters=2),
    "PolynomialLR": lambda s, o: s.PolynomialLR(o, total_iters=4, power=2.0),
    "OneCycleLR": lambda s, o: s.OneCycleLR(o, max_lr=0.05, total_steps=STEPS + 2,
                                            cycle_momentum=False),
    "CyclicLR": lambda s, o: s.CyclicLR(o, 1e-3, 0.05, step_size_up=2, cycle_momentum=False),
    "LambdaLR": lambda s, o: s.LambdaLR(o, lambda epoch: 0.8 ** epoch),
    "MultiplicativeLR": lambda s, o: s.MultiplicativeLR(o, lambda epoch: 0.9),
    "SequentialLR": lambda s, o: s.SequentialLR(o, [s.ConstantLR(o, factor=0.5, total_iters=2),
                                                    s.ExponentialLR(o, gamma=0.9)], [2]),
    "ChainedScheduler": lambda s, o: s.ChainedScheduler([s.StepLR(o, 2, gamma=0.5),
                                                         s.ExponentialLR(o, gamma=0.9)]),
    "ReduceLROnPlateau": _plateau,
}


class Program:
    """One optimizer program, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.dtype = "float32" if r.random() < 0.25 else "float64"
        self.name, self.kwargs = _space(r)
        n = r.randint(1, 4)
        shapes = [r.choice(SHAPES) for _ in range(n)]
        self.init = [rng.standard_normal(s).astype(self.dtype) for s in shapes]
        self.grads = [[None if r.random() < 0.15 else rng.standard_normal(s).astype(self.dtype)
                       for s in shapes] for _ in range(STEPS)]
        self.split = r.randrange(n + 1) if n > 1 and r.random() < 0.5 else n  # two groups
        self.override = {"lr": self.kwargs["lr"] * 0.5} if r.random() < 0.5 else {}
        if "weight_decay" in self.kwargs and r.random() < 0.3:
            self.override["weight_decay"] = 0.05
        self.edit_at = r.randrange(STEPS) if r.random() < 0.3 else None  # lr changed by hand
        self.reload_at = r.randrange(1, STEPS) if r.random() < 0.5 else None
        self.scheduler = r.choice([None, None] + sorted(SCHEDULERS))
        if r.random() < 0.3:
            # (not ASGD's foreach=True: torch's computes eta there in float32 tensor arithmetic,
            # one float32 ulp from its own per-parameter loop, which flowgrad follows)
            self.kwargs["foreach"] = r.choice([True, False]) if self.name != "ASGD" else False

    def describe(self):
        return (f"{self.dtype} {self.name}({self.kwargs}) shapes={[a.shape for a in self.init]} "
                f"groups split at {self.split} override {self.override} edit_at {self.edit_at} "
                f"reload_at {self.reload_at} scheduler {self.scheduler}")

    def run(self, m):
        """Parameters and state after each step, as NumPy arrays, under module `m`."""
        params = [m.nn.Parameter(m.tensor(a.copy())) for a in self.init]
        groups = [{"params": params[:self.split]}]
        if self.split < len(params):
            groups.append({"params": params[self.split:], **self.override})
        groups = [g for g in groups if g["params"]]
        opt = self._make(m, groups)
        sched = self._scheduler(m, opt)
        history = []
        for step in range(STEPS):
            for p, g in zip(params, self.grads[step]):
                p.grad = None if g is None else m.tensor(g.copy())
            if step == self.edit_at:
                opt.param_groups[-1]["lr"] = opt.param_groups[-1]["lr"] * 0.3
            opt.step()
            if sched is not None:
                sched.step()
            if step == self.reload_at:
                saved = opt.state_dict()
                opt = self._make(m, [dict(g, params=g["params"]) for g in opt.param_groups])
                opt.load_state_dict(saved)
                if sched is not None:  # the scheduler too, from its state_dict
                    saved = sched.state_dict()
                    sched = self._scheduler(m, opt)
                    sched.load_state_dict(saved)
            lrs = [float(g["lr"]) for g in opt.param_groups]
            history.append(([p.detach().numpy().copy() for p in params], _state(opt), lrs))
        return history

    def _make(self, m, groups):
        return getattr(m.optim, self.name)(groups, **self.kwargs)

    def _scheduler(self, m, opt):
        if self.scheduler is None:
            return None
        return SCHEDULERS[self.scheduler](m.optim.lr_scheduler, opt)


def _state(opt):
    """The optimizer's per-parameter state as NumPy arrays and numbers, in parameter order."""
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            entry = {}
            for k, v in opt.state.get(p, {}).items():
                entry[k] = np.array(v.detach().numpy() if hasattr(v, "detach") else v,
                                    dtype=np.float64)  # a copy: the state changes in place
            out.append(entry)
    return out


def check(seed):
    """None when flowgrad's optimizer program equals torch's, else a message."""
    prog = Program(seed)
    try:
        want = prog.run(torch)
        torch_error = None
    except (RuntimeError, ValueError) as e:
        torch_error = e
    try:
        got = prog.run(flow)
    except (RuntimeError, ValueError) as e:
        if torch_error is not None:
            return None
        return f"flowgrad raised {type(e).__name__}: {e}"
    if torch_error is not None:
        return f"torch raised {type(torch_error).__name__}: {torch_error}; flowgrad ran"
    tol = TOL[prog.dtype]
    for step, ((pw, sw, lw), (pg, sg, lg)) in enumerate(zip(want, got)):
        if not np.allclose(lg, lw, rtol=1e-12, atol=0):
            return f"step {step}: group lrs {lg}, torch {lw}"
        for i, (a, b) in enumerate(zip(pg, pw)):
            if a.shape != b.shape or a.dtype != b.dtype or \
                    not np.allclose(a, b, rtol=tol, atol=tol):
                return f"step {step}: parameter {i} differs: flowgrad {a!r}, torch {b!r}"
        for i, (a, b) in enumerate(zip(sg, sw)):
            if sorted(a) != sorted(b):
                return f"step {step}: state keys of parameter {i}: {sorted(a)} vs {sorted(b)}"
            for k in a:
                if a[k].shape != b[k].shape or not np.allclose(a[k], b[k], rtol=tol, atol=tol):
                    return (f"step {step}: state {k!r} of parameter {i} differs: flowgrad "
                            f"{a[k]!r}, torch {b[k]!r}")
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
