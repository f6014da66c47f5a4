"""The MLP training step of ../shared/bench/mlp_train.py (nn.Linear 784-512-512-10, batch 128,
F.cross_entropy, SGD), flowgrad only: ms per step (best of several runs) and, with --profile,
a cProfile of 50 steps (the top lines by total time).

Run: .venv/bin/python benchmarks/bench_linear.py [--profile] [--steps N]
Compare with torch through `../shared/bench/ratio.py . mlp_train` (separate processes).
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import flowgrad as flow  # noqa: E402
import flowgrad.nn.functional as F  # noqa: E402

SIZES = [784, 512, 512, 10]
B = 128


def make_step():
    r = np.random.default_rng(0)
    layers = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(flow.nn.Linear(n_in, n_out))
        if i < len(SIZES) - 2:
            layers.append(flow.nn.ReLU())
    model = flow.nn.Sequential(*layers)
    opt = flow.optim.SGD(model.parameters(), lr=0.01)
    x = flow.tensor(r.standard_normal((B, SIZES[0])).astype(np.float32))
    y = flow.tensor(r.integers(0, SIZES[-1], B))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--profile", action="store_true")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lines", type=int, default=25)
    args = p.parse_args()
    step = make_step()
    for _ in range(5):
        step()
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.lines)
        return
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        best.append((time.perf_counter() - t0) / args.steps)
    print(f"mlp step: best {min(best) * 1e3:.3f} ms, median {sorted(best)[2] * 1e3:.3f} ms "
          f"over 5 x {args.steps} steps")


if __name__ == "__main__":
    main()
