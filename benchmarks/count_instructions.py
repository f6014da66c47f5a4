"""Instructions per step of a bench_graph workload, counted by valgrind's callgrind: a figure
that does not move with the machine's load (wall-clock ratios here swing by 20% and more
between runs), for before/after comparisons of a change to the engine or the compiler.

Each count runs the workload twice in fresh processes, for `small` and `large` units after
the same warm-up, and reports (large - small) / (large - small units): start-up and warm-up
cancel. A unit is one eager step, one compiled step, or one first call of a fresh graph
(graphs are built beforehand in both runs, so only their first calls differ).

Run: .venv/bin/python benchmarks/count_instructions.py [chain_step|mlp|lenet] [--src DIR]
(needs `valgrind` on the PATH; a few minutes per workload)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

_CHILD = """
import sys
sys.path.insert(0, {src!r}); sys.path.insert(0, {src!r} + "/benchmarks")
import bench_graph
make = getattr(bench_graph, {workload!r})
eager, graph = make(False), make(True)
for _ in range(3):
    eager(); graph()
fresh = [make(True) for _ in range({large})]
for _ in range({n}):
    {body}
"""
BODIES = {"eager step": "eager()", "compiled step": "graph()",
          "first call": "fresh.pop()()"}


def count(src, workload, body, n, large):
    """Instructions callgrind collects for the child script doing `body` n times."""
    code = _CHILD.format(src=src, workload=workload, body=body, n=n, large=large)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    run = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", code], env=env, capture_output=True, text=True)
    found = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode or not found:
        raise RuntimeError(f"callgrind run failed:\n{run.stderr[-2000:]}")
    return int(found.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="chain_step",
                        choices=["chain_step", "mlp", "lenet"])
    parser.add_argument("--src", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), help="the flowgrad checkout to count (default: this one)")
    parser.add_argument("--small", type=int, default=2)
    parser.add_argument("--large", type=int, default=12)
    args = parser.parse_args()
    units = args.large - args.small
    results = {}
    for name, body in BODIES.items():
        low = count(args.src, args.workload, body, args.small, args.large)
        high = count(args.src, args.workload, body, args.large, args.large)
        results[name] = (high - low) / units
        print(f"{args.workload:<11} {name:<14} {results[name] / 1e6:9.3f}M instructions")
    print(f"{args.workload:<11} first call / eager step: "
          f"{results['first call'] / results['eager step']:.2f}")


if __name__ == "__main__":
    main()
