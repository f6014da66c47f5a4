"""Timing helpers shared by the benchmark scripts: median of repeats, side by side."""
from __future__ import annotations

import statistics
import time


def timeit(fn, repeat=7, warmup=2, number=1):
    """Median seconds per call of fn() over `repeat` runs of `number` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def report(name, ours, theirs, unit="ms", scale=1e3, what="torch"):
    ratio = ours / theirs
    print(f"{name:<46} flowgrad {ours * scale:9.3f} {unit}   {what} {theirs * scale:9.3f} {unit}"
          f"   ratio {ratio:5.2f}x")
    return ratio
