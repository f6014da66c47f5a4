"""Optimizer overhead: `opt.step(); opt.zero_grad()` in flowgrad and torch, each framework in
its own process (alternating), for (a) the MLP 784-512-512-10 (6 parameters) and (b) 100
Linear(32, 32) layers (200 parameters). Every iteration gives each parameter its gradient
back (`p.grad = g`, the same in both), steps and zeroes (set_to_none=True).

    .venv/bin/python benchmarks/bench_optim.py [--rounds 3] [--iters 300]
        [--opts SGD,SGD-momentum,Adam,AdamW] [--models mlp,deep]

Reported: the best per-iteration time in microseconds over the rounds, and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

OPTS = {
    "SGD": ("SGD", dict(lr=0.01)),
    "SGD-momentum": ("SGD", dict(lr=0.01, momentum=0.9, weight_decay=1e-4, nesterov=True)),
    "Adam": ("Adam", dict(lr=1e-3)),
    "AdamW": ("AdamW", dict(lr=1e-3, amsgrad=True)),
    "RMSprop": ("RMSprop", dict(lr=1e-3, momentum=0.9)),
}
MODELS = {"mlp": [(784, 512), (512, 512), (512, 10)], "deep": [(32, 32)] * 100}


def shapes(model):
    out = []
    for i, o in MODELS[model]:
        out += [(o, i), (o,)]
    return out


def worker(framework, model, opt_name, iters):
    if framework == "torch":
        import torch as m
        m.set_num_threads(1)
    else:
        sys.path.insert(0, ROOT)
        import flowgrad as m
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes(model)]
    grads_np = [rng.standard_normal(s).astype(np.float32) * 1e-3 for s in shapes(model)]
    params = [m.tensor(a, requires_grad=True) for a in arrays]
    grads = [m.tensor(g) for g in grads_np]
    name, kwargs = OPTS[opt_name]
    opt = getattr(m.optim, name)(params, **kwargs)

    def one():
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        opt.zero_grad()

    for _ in range(5):
        one()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            one()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--opts", default="SGD,SGD-momentum,Adam,AdamW")
    ap.add_argument("--models", default="mlp,deep")
    ap.add_argument("--worker", nargs=3)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker, args.iters)))
        return
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    print(f"{'model':6} {'optimizer':13} {'flowgrad us':>12} {'torch us':>10} {'ratio':>6}")
    for model in args.models.split(","):
        for opt in args.opts.split(","):
            best = {"flowgrad": float("inf"), "torch": float("inf")}
            for _ in range(args.rounds):
                for fw in best:
                    out = subprocess.run(
                        [sys.executable, __file__, "--iters", str(args.iters), "--worker",
                         fw, model, opt], capture_output=True, text=True, env=env, check=True)
                    best[fw] = min(best[fw], json.loads(out.stdout.strip().splitlines()[-1]))
            f, t = best["flowgrad"] * 1e6, best["torch"] * 1e6
            print(f"{model:6} {opt:13} {f:12.1f} {t:10.1f} {f / t:6.2f}", flush=True)


if __name__ == "__main__":
    main()
