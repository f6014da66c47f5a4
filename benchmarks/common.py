"""Helpers shared by the benchmark scripts that compare flowgrad with torch.

torch and NumPy each start their own BLAS thread pool; in one process on a few cores they fight
for the cores and both figures come out wrong. So, like ../shared/bench/ratio.py, a script here
never imports both: `run_workers` starts `python SCRIPT --worker FRAMEWORK ...` once per
framework per round (torch, flowgrad, torch, ...), each a fresh process that imports only that
framework (`load`), times its cases and prints them as one JSON line; the parent takes the
median of each case over the rounds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from importlib.metadata import version

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FRAMEWORKS = ("torch", "flowgrad")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_parser(doc, clock=True):
    """The options every two-process benchmark takes: --rounds, --threads, --clock (wall or
    process CPU time) and the hidden --worker a script passes to its own worker processes."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    if clock:
        parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser


def timeit(fn, repeat=7, warmup=2, number=1, clock=time.perf_counter):
    """Median seconds per call of fn() over `repeat` runs of `number` calls, read on `clock`."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - t0) / number)
    return statistics.median(samples)


def load(framework):
    """In a worker: import only `framework`; torch gets the thread count run_workers set."""
    if framework == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
        return torch
    sys.path.insert(0, ROOT)
    import flowgrad

    return flowgrad


def run_workers(script, args=(), rounds=3, threads=None):
    """Run `python script --worker FW *args` for FW in torch, flowgrad, alternating, `rounds`
    times, each in its own process with `threads` BLAS/OpenMP threads (default: all cores).
    Each worker prints a JSON dict {case: number} as its last line. Returns
    {FW: {case: median over rounds}}."""
    env = dict(os.environ, **dict.fromkeys(THREAD_VARS, str(threads or os.cpu_count() or 1)))
    runs = {fw: [] for fw in FRAMEWORKS}
    for _ in range(rounds):
        for fw in FRAMEWORKS:
            cmd = [sys.executable, script, "--worker", fw, *map(str, args)]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode:
                sys.exit(f"{fw} worker failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
            runs[fw].append(json.loads(p.stdout.strip().splitlines()[-1]))
    return {fw: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            for fw, rs in runs.items()}


def header(threads, rounds, what=""):
    print(f"flowgrad vs torch {version('torch')}, numpy {version('numpy')}, "
          f"threads {threads or os.cpu_count()} each, separate alternating processes, "
          f"median of {rounds} rounds{what}")


def report(name, ours, theirs, unit="ms", scale=1e3, what="torch"):
    ratio = ours / theirs
    print(f"{name:<46} flowgrad {ours * scale:9.3f} {unit}   {what} {theirs * scale:9.3f} {unit}"
          f"   ratio {ratio:5.2f}x")
    return ratio
