"""Convolution and pooling speed, flowgrad beside torch in one run.

    .venv/bin/python benchmarks/bench_conv.py [--reps 15] [--threads N] [--clock cpu]

Each case runs forward + backward on the same inputs in both frameworks. The two are timed
in alternation (flowgrad rep, torch rep, ...) so machine load hits both alike; we report the
median of each and the flowgrad/torch ratio. torch gets as many threads as NumPy's BLAS
(--threads sets both). On a busy machine `--threads 1 --clock cpu` (process CPU time of one
thread each) is the steadier comparison: it doesn't count time spent waiting for a core.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import flowgrad as flow  # noqa: E402


def blas_threads():
    try:
        from threadpoolctl import threadpool_info

        return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")
    except Exception:
        return os.cpu_count() or 1


def conv_case(n, c_in, c_out, size, k, padding, bias, input_grad):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, c_in, size, size)).astype(np.float32),
              rng.standard_normal((c_out, c_in, k, k)).astype(np.float32) * 0.1,
              rng.standard_normal(c_out).astype(np.float32) if bias else None]

    def make(m):
        x = m.tensor(arrays[0], requires_grad=input_grad)
        w = m.tensor(arrays[1], requires_grad=True)
        b = m.tensor(arrays[2], requires_grad=True) if bias else None
        return lambda: m.nn.functional.conv2d(x, w, b, padding=padding).sum().backward()
    return make


def pool_case(shape):
    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)

    def make(m):
        x = m.tensor(a, requires_grad=True)
        return lambda: m.nn.functional.max_pool2d(x, 2).sum().backward()
    return make


def lenet_case(n=64):
    """LeNet-5's feature extractor: conv-relu-pool twice, forward and backward."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, 1, 28, 28)).astype(np.float32),
              rng.standard_normal((6, 1, 5, 5)).astype(np.float32) * 0.2,
              rng.standard_normal(6).astype(np.float32),
              rng.standard_normal((16, 6, 5, 5)).astype(np.float32) * 0.1,
              rng.standard_normal(16).astype(np.float32)]

    def make(m):
        x = m.tensor(arrays[0])
        w1, b1, w2, b2 = (m.tensor(a, requires_grad=True) for a in arrays[1:])
        F = m.nn.functional

        def step():
            h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2)), 2)
            h.sum().backward()
        return step
    return make


CASES = [
    ("resnet conv3x3 64->64 32x32 b32", conv_case(32, 64, 64, 32, 3, 1, False, True)),
    ("lenet conv1 1->6 5x5 28x28 b64", conv_case(64, 1, 6, 28, 5, 0, True, False)),
    ("lenet conv2 6->16 5x5 12x12 b64", conv_case(64, 6, 16, 12, 5, 0, True, True)),
    ("lenet maxpool 2x2 (64,6,24,24)", pool_case((64, 6, 24, 24))),
    ("lenet maxpool 2x2 (64,16,8,8)", pool_case((64, 16, 8, 8))),
    ("lenet features fwd+bwd b64", lenet_case()),
]


def timed(fn, clock):
    t = clock()
    fn()
    return clock() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    if args.threads:
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(args.threads, user_api="blas")
        except ImportError:
            print("threadpoolctl missing: NumPy's BLAS keeps its own thread count")
    threads = args.threads or blas_threads()
    torch.set_num_threads(threads)
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"numpy {np.__version__}, torch {torch.__version__}, {threads} threads, "
          f"{args.clock} clock, median of {args.reps} alternating reps (forward + backward)")
    print(f"{'case':36s} {'flowgrad ms':>12s} {'torch ms':>10s} {'ratio':>7s}")
    for name, make in CASES:
        ours, theirs = make(flow), make(torch)
        for _ in range(2):  # warm up caches and allocators
            ours()
            theirs()
        a, b = [], []
        for _ in range(args.reps):
            a.append(timed(ours, clock))
            b.append(timed(theirs, clock))
        ma, mb = np.median(a) * 1e3, np.median(b) * 1e3
        print(f"{name:36s} {ma:12.2f} {mb:10.2f} {ma / mb:7.2f}")


if __name__ == "__main__":
    main()
