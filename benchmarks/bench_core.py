"""Issue 2 benchmarks, flowgrad against torch, printed as ratios.

(a) small-op overhead: a 200-op chain of mul/add/tanh on 100 floats, forward+backward, per op
(b) MLP training step 784-512-512-10, batch 128, cross-entropy, SGD
(c) 1024x1024 matmul forward+backward against NumPy's own GEMM rate (flowgrad's process, NumPy
    timed before flowgrad is imported)
(d) a 1,000,000-op chain forward+backward: time and peak memory per node

How it measures: never both frameworks in one process (their BLAS pools would fight for the
cores). Each round runs a torch worker process, then a flowgrad one (`--worker FW`, importing
only that framework), each timing (a)-(c) as the median of its repeats; the table shows the
median over --rounds rounds and the flowgrad/torch ratio. (d) runs once per framework, in
its own pair of processes. Both get --threads BLAS/OpenMP threads (default: all cores); torch
runs (a) on one thread.

Run: .venv/bin/python benchmarks/bench_core.py [--skip-million] [--rounds 3] [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import header, load, report, run_workers, timeit, worker_parser  # noqa: E402

N_OPS = 3 * (200 // 3)


def chain(m, x, n_ops=200):
    y = x
    for i in range(n_ops // 3):
        y = m.tanh(y * 0.9 + 0.1)
    return y


def small_ops(m):
    x0 = np.random.default_rng(0).standard_normal(100).astype(np.float32)

    def run():
        chain(m, m.tensor(x0, requires_grad=True)).sum().backward()

    if m.__name__ != "torch":
        return timeit(run, repeat=15) / N_OPS
    threads = m.get_num_threads()
    m.set_num_threads(1)  # 100 floats: threads only add contention to torch's overhead
    t = timeit(run, repeat=15) / N_OPS
    m.set_num_threads(threads)
    return t


def mlp(m):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    sizes = [(784, 512), (512, 512), (512, 10)]
    ws = [(rng.standard_normal(s) * 0.05).astype(np.float32) for s in sizes]
    bs = [np.zeros(s[1], np.float32) for s in sizes]
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
    return timeit(step, repeat=11)


def _gemm_operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((1024, 1024)).astype(np.float32),
            rng.standard_normal((1024, 1024)).astype(np.float32))


def numpy_gemm():
    """The three GEMMs of a 1024^2 matmul's forward and backward in straight NumPy, timed
    before flowgrad is imported: with MKL loaded, flowgrad holds NumPy's own OpenBLAS at one
    thread (blas.py), which would halve this yardstick."""
    a, b = _gemm_operands()
    g = np.ones_like(a)

    def numpy_step():
        a @ b
        g @ b.T
        a.T @ g

    return timeit(numpy_step, repeat=7)


def matmul(flow):
    """flowgrad's 1024^2 matmul fwd+bwd."""
    a, b = _gemm_operands()
    at, bt = flow.tensor(a, requires_grad=True), flow.tensor(b, requires_grad=True)
    g = flow.ones(1024, 1024)

    def ours_step():
        (at @ bt).backward(g)
        at.grad = bt.grad = None

    return timeit(ours_step, repeat=7)


def million(m, n=1_000_000, n_mem=100_000):
    """Seconds for an n-op chain's forward, backward and free; flowgrad also bytes per node."""
    def build(x, k):
        y = x
        for _ in range(k):
            y = y * 1.0000001
        return y

    x = m.tensor([1.0], requires_grad=True)
    t0 = time.perf_counter()
    y = build(x, n)
    t1 = time.perf_counter()
    y.sum().backward()
    t2 = time.perf_counter()
    del y
    out = {"forward": t1 - t0, "backward": t2 - t1, "free": time.perf_counter() - t2,
           "grad": x.grad.item()}
    if m.__name__ != "torch":  # memory on a shorter chain: tracemalloc slows everything down
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        y = build(m.tensor([1.0], requires_grad=True), n_mem)
        out["bytes_per_node"] = (tracemalloc.get_traced_memory()[0] - base) / n_mem
        tracemalloc.stop()
        del y
    return out


def worker(fw, job):
    gemm = numpy_gemm() if fw == "flowgrad" and job != "million" else None
    m = load(fw)
    if job == "million":
        return million(m)
    out = {"small_ops": small_ops(m), "mlp": mlp(m)}
    if fw == "flowgrad":
        out["matmul"], out["numpy_gemm"] = matmul(m), gemm
    return out


def main():
    parser = worker_parser(__doc__, clock=False)
    parser.add_argument("--skip-million", action="store_true")
    parser.add_argument("--job", default="ops", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.job)))
        return
    header(args.threads, args.rounds)
    r = run_workers(__file__, rounds=args.rounds, threads=args.threads)
    f, t = r["flowgrad"], r["torch"]
    report("(a) 200-op chain fwd+bwd, per op", f["small_ops"], t["small_ops"], "us", 1e6)
    report("(b) MLP 784-512-512-10 b128 SGD step", f["mlp"], t["mlp"])
    rate = 1.0 / report("(c) 1024^2 matmul fwd+bwd (3 GEMMs)", f["matmul"], f["numpy_gemm"],
                        what="numpy")
    print(f"    flowgrad reaches {100 * rate:.0f}% of NumPy's GEMM rate "
          f"({3 * 2 * 1024 ** 3 / f['matmul'] / 1e9:.1f} GFLOP/s)")
    if args.skip_million:
        return
    r = run_workers(__file__, ["--job", "million"], rounds=1, threads=args.threads)
    f, t = r["flowgrad"], r["torch"]
    print(f"(d) 1,000,000-op chain: forward {f['forward']:.1f} s, backward {f['backward']:.1f} s,"
          f" free {f['free']:.1f} s (no RecursionError); x.grad = {f['grad']:.6f}")
    print(f"    graph memory held: {f['bytes_per_node']:.0f} bytes per node "
          f"(tracemalloc, 100,000 ops)")
    print(f"    torch: forward {t['forward']:.1f} s, backward {t['backward']:.1f} s; forward "
          f"ratio {f['forward'] / t['forward']:.2f}x")


if __name__ == "__main__":
    main()
