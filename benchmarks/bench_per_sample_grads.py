"""Per-sample gradients of an MLP (64-128-10, batch 32) by vmap(grad(loss)) through
functional_call, the Opacus pattern: ms per call (best of 7 runs of 20 calls), flowgrad only.
With --penalty, the gradient of a penalty on them by func.grad (grad(vmap(grad))).

Run: .venv/bin/python benchmarks/bench_per_sample_grads.py [--penalty]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import flowgrad as flow  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--penalty", action="store_true")
    args = parser.parse_args()
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(64, 128), flow.nn.ReLU(), flow.nn.Linear(128, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = flow.randn(32, 64), flow.randint(0, 10, (32,))

    def loss(ps, xi, yi):
        out = flow.func.functional_call(model, ps, (xi.unsqueeze(0),))
        return flow.nn.functional.cross_entropy(out, yi.unsqueeze(0))
    per_sample = flow.func.vmap(flow.func.grad(loss), in_dims=(None, 0, 0))
    if args.penalty:
        def step():
            return flow.func.grad(lambda ps: sum(
                (g ** 2).sum() for g in per_sample(ps, x, y).values()))(params)
    else:
        def step():
            return per_sample(params, x, y)
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20):
            step()
        best = min(best, (time.perf_counter() - start) / 20)
    print(f"{'penalty gradient' if args.penalty else 'per-sample gradients'}: "
          f"{best * 1e3:.3f} ms per call")


if __name__ == "__main__":
    main()
