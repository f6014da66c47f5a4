"""inference_mode against no_grad, in one flowgrad process (no torch: nothing to compare across
frameworks, so no BLAS pools to fight), as the ratio inference_mode / no_grad per case.

Cases: entering and leaving the block; a chain of views of an inference tensor (what
inference mode skips: view tracking, version counters); an elementwise chain (nothing to
skip: flowgrad's no_grad keeps no per-op bookkeeping); a transformer block forward (views,
GEMMs, softmax, layer norm). Each figure is the best of 7 runs, the cases interleaved.

usage: python benchmarks/bench_inference.py
"""
from __future__ import annotations

import time

import numpy as np

import flowgrad as flow
import flowgrad.nn as nn


def best(fn, context, number, repeat=7):
    times = []
    for _ in range(repeat):
        with context():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times.append((time.perf_counter() - t0) / number)
    return min(times)


def cases():
    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((4, 16, 64)).astype(np.float32))
    small = flow.tensor(rng.standard_normal((4, 6)).astype(np.float32))

    def views():  # from a fresh result: an inference tensor under inference_mode
        t = small * 1.0
        for _ in range(30):
            t = t.t().reshape(4, 6).unsqueeze(0).squeeze(0)

    def elementwise():
        t = small
        for _ in range(30):
            t = (t * 0.5 + 1.0).relu()

    B, T, C, H = 4, 16, 64, 4
    qkv, proj, ln = nn.Linear(C, 3 * C), nn.Linear(C, C), nn.LayerNorm(C)
    mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def block():
        q, k, v = qkv(ln(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (C // H) ** 0.5)
        y = (att.softmax(-1) @ v).transpose(1, 2).contiguous().view(B, T, C)
        y = x + proj(y)
        return y + mlp(ln(y))

    return [("with-block enter + leave", None, 20000), ("30 x 4 views of a result", views, 300),
            ("30 x 3 elementwise ops", elementwise, 300), ("transformer block forward", block, 300)]


def main():
    print(f"flowgrad {flow.__version__}: inference_mode / no_grad, best of 7 runs each")
    for name, fn, number in cases():
        if fn is None:  # the block itself: time it outside any block
            times = {}
            for context in (flow.no_grad, flow.inference_mode):
                def run(context=context):
                    with context():
                        pass
                times[context] = best(run, _NoContext, number)
        else:
            times = {c: best(fn, c, number) for c in (flow.no_grad, flow.inference_mode)}
        ng, inf = times[flow.no_grad], times[flow.inference_mode]
        print(f"{name:28s} no_grad {ng * 1e6:9.2f} us   inference_mode {inf * 1e6:9.2f} us   "
              f"ratio {inf / ng:.2f}")


class _NoContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    main()
