"""Per-sample gradients of an MLP: flowgrad.func.vmap(grad(loss)) against a Python loop of
grad(loss), one example at a time (results checked equal). Prints the median times and the
ratio.

    .venv/bin/python benchmarks/bench_per_sample_grads.py [batch]
"""
import statistics
import sys
import time

import numpy as np

import flowgrad as flow
from flowgrad.func import functional_call, grad, vmap


def main(batch=64):
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(32, 128), flow.nn.Tanh(), flow.nn.Linear(128, 10))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = flow.randn(batch, 32), flow.randint(0, 10, (batch,))

    def loss(p, xb, yb):
        out = functional_call(model, p, (xb.unsqueeze(0),))
        return flow.nn.functional.cross_entropy(out, yb.unsqueeze(0))

    def vmapped():
        return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)

    def loop():
        per = [grad(loss)(params, x[b], y[b]) for b in range(batch)]
        return {k: flow.stack([g[k] for g in per]) for k in params}

    a, b = vmapped(), loop()
    for k in params:
        np.testing.assert_allclose(a[k].numpy(), b[k].numpy(), atol=1e-5)
    times = {}
    for name, fn in (("vmap(grad)", vmapped), ("loop of grad", loop)):
        runs = []
        for _ in range(7):
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        times[name] = statistics.median(runs)
        print(f"{name:14s} {times[name] * 1e3:8.2f} ms  (batch {batch})")
    print(f"loop / vmap = {times['loop of grad'] / times['vmap(grad)']:.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
