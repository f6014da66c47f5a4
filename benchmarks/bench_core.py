"""Issue 2 benchmarks, flowgrad beside torch in one run, printed as ratios.

(a) small-op overhead: a 200-op chain of mul/add/tanh on 100 floats, forward+backward, per op
(b) MLP training step 784-512-512-10, batch 128, cross-entropy, SGD
(c) 1024x1024 matmul forward+backward against NumPy's own GEMM rate
(d) a 1,000,000-op chain forward+backward: time and peak memory per node

Run: .venv/bin/python benchmarks/bench_core.py [--skip-million]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import report, timeit  # noqa: E402

import flowgrad as flow  # noqa: E402


def chain(m, x, n_ops=200):
    y = x
    for i in range(n_ops // 3):
        y = m.tanh(y * 0.9 + 0.1)
    return y


def bench_small_ops():
    x0 = np.random.default_rng(0).standard_normal(100).astype(np.float32)
    n_ops = 3 * (200 // 3)

    def run(m, make):
        x = make(x0)
        chain(m, x).sum().backward()

    ours = timeit(lambda: run(flow, lambda a: flow.tensor(a, requires_grad=True)), repeat=15)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 100 floats: threads only add contention to torch's overhead
    theirs = timeit(lambda: run(torch, lambda a: torch.tensor(a, requires_grad=True)),
                    repeat=15)
    torch.set_num_threads(threads)
    return report("(a) 200-op chain fwd+bwd, per op", ours / n_ops, theirs / n_ops,
                  "us", 1e6)


def bench_mlp():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    sizes = [(784, 512), (512, 512), (512, 10)]
    ws = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in sizes]
    bs = [np.zeros(s[1], np.float32) for s in sizes]

    def make(m):
        params = [m.tensor(a, requires_grad=True) for a in ws + bs]
        xt, yt = m.tensor(x), m.tensor(y)

        def step():
            h = xt
            for i in range(3):
                h = h @ params[i] + params[3 + i]
                if i < 2:
                    h = m.relu(h)
            loss = m.nn.functional.cross_entropy(h, yt)
            loss.backward()
            with m.no_grad():
                for p in params:
                    p -= 0.01 * p.grad
                    p.grad = None
        return step

    ours, theirs = timeit(make(flow), repeat=11), timeit(make(torch), repeat=11)
    return report("(b) MLP 784-512-512-10 b128 SGD step", ours, theirs)


def bench_matmul():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    at, bt = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    g = flow.ones(1024, 1024)

    def ours_step():
        (at @ bt).backward(g)
        at.grad = bt.grad = None

    def numpy_step():  # the same three GEMMs, straight NumPy
        a @ b
        g._data @ b.T
        a.T @ g._data

    ours, theirs = timeit(ours_step, repeat=7), timeit(numpy_step, repeat=7)
    rate = 1.0 / report("(c) 1024^2 matmul fwd+bwd (3 GEMMs)", ours, theirs, what="numpy")
    print(f"    flowgrad reaches {100 * rate:.0f}% of NumPy's GEMM rate "
          f"({3 * 2 * 1024 ** 3 / ours / 1e9:.1f} GFLOP/s)")
    return rate


def _chain(x, n):
    y = x
    for _ in range(n):
        y = y * 1.0000001
    return y


def bench_million(n=1_000_000, n_mem=100_000):
    x = flow.tensor([1.0], requires_grad=True)
    t0 = time.perf_counter()
    y = _chain(x, n)
    t1 = time.perf_counter()
    y.sum().backward()
    t2 = time.perf_counter()
    del y
    t3 = time.perf_counter()
    print(f"(d) {n:,}-op chain: forward {t1 - t0:.1f} s, backward {t2 - t1:.1f} s, free "
          f"{t3 - t2:.1f} s (no RecursionError); x.grad = {x.grad.item():.6f}")
    tracemalloc.start()  # memory on a shorter chain: tracemalloc slows everything down
    base = tracemalloc.get_traced_memory()[0]
    y = _chain(flow.tensor([1.0], requires_grad=True), n_mem)
    per_node = (tracemalloc.get_traced_memory()[0] - base) / n_mem
    tracemalloc.stop()
    del y
    print(f"    graph memory held: {per_node:.0f} bytes per node (tracemalloc, {n_mem:,} ops)")
    xt = torch.tensor([1.0], requires_grad=True)
    t0 = time.perf_counter()
    yt = xt
    for _ in range(n):
        yt = yt * 1.0000001
    yt.sum().backward()
    print(f"    torch: forward+backward {time.perf_counter() - t0:.1f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-million", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    print(f"flowgrad vs torch {torch.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores")
    bench_small_ops()
    bench_mlp()
    bench_matmul()
    if not args.skip_million:
        bench_million()


if __name__ == "__main__":
    main()
