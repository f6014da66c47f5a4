"""Peak memory and time of one training step of a deep MLP, with and without activation
checkpointing (flowgrad.utils.checkpoint), and the cost of anomaly mode.

usage: python benchmarks/bench_checkpoint.py [--layers 32] [--width 256] [--batch 2048]
Peak memory is tracemalloc's (NumPy reports its buffers to it), over one step, model and
input excluded; it includes the parameters' gradients (zero_grad sets them to None), so the
batch is large against the width, as when activations dominate. The input requires grad
(reentrant checkpointing needs one that does). Times are the best of 5 steps.
"""
from __future__ import annotations

import argparse
import time
import tracemalloc
import warnings

import flowgrad as flow
from flowgrad.utils.checkpoint import checkpoint_sequential


def deep_mlp(layers, width):
    mods = []
    for _ in range(layers):
        mods += [flow.nn.Linear(width, width), flow.nn.Tanh()]
    return flow.nn.Sequential(*mods)


def step_fn(model, x, segments, use_reentrant):
    def step():
        model.zero_grad(set_to_none=True)
        x.grad = None
        y = model(x) if segments is None else checkpoint_sequential(
            model, segments, x, use_reentrant=use_reentrant)
        y.pow(2).mean().backward()
    return step


def peak_bytes(step):
    step()  # warm: .grad buffers exist before measuring, as in training
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def seconds(step, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=2048)
    args = parser.parse_args()
    flow.manual_seed(0)
    model = deep_mlp(args.layers, args.width)
    x = flow.randn(args.batch, args.width, requires_grad=True)
    plain = step_fn(model, x, None, False)
    base_peak, base_time = peak_bytes(plain), seconds(plain)
    print(f"MLP {args.layers}x(Linear {args.width} + Tanh), batch {args.batch}")
    print(f"{'':28} {'peak MiB':>9} {'ratio':>6} {'step ms':>8} {'ratio':>6}")
    print(f"{'no checkpointing':28} {base_peak / 2**20:9.1f} {1:6.2f} {base_time * 1e3:8.1f} "
          f"{1:6.2f}")
    for reentrant in (False, True):
        for segments in (4, 8):
            step = step_fn(model, x, segments, reentrant)
            peak, t = peak_bytes(step), seconds(step)
            name = f"{segments} segments, reentrant={reentrant}"
            print(f"{name:28} {peak / 2**20:9.1f} {peak / base_peak:6.2f} {t * 1e3:8.1f} "
                  f"{t / base_time:6.2f}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with flow.autograd.detect_anomaly():
            t = seconds(plain)
    print(f"{'anomaly mode':28} {'':9} {'':6} {t * 1e3:8.1f} {t / base_time:6.2f}")


if __name__ == "__main__":
    main()
