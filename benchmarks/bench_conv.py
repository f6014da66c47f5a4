"""Convolution and pooling speed, flowgrad against torch.

    .venv/bin/python benchmarks/bench_conv.py [--reps 15] [--rounds 3] [--threads N]
        [--clock cpu]

Each case runs forward + backward on the same inputs in both frameworks. How it measures:
never both frameworks in one process (their BLAS pools would fight for the cores). Each round
runs a torch worker process, then a flowgrad one (`--worker FW`, importing only that
framework), each timing every case as the median of --reps reps after two warm-ups; the table
shows the median over --rounds rounds and the flowgrad/torch ratio. Both frameworks get
--threads BLAS/OpenMP threads (default: all cores). On a busy machine
`--threads 1 --clock cpu` (process CPU time of one thread each) is the steadier comparison: it
doesn't count time spent waiting for a core.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import header, load, run_workers, timeit, worker_parser  # noqa: E402


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


def main():
    ap = worker_parser(__doc__)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    if args.worker:
        m = load(args.worker)
        print(json.dumps({name: timeit(make(m), args.reps, clock=clock) for name, make in CASES}))
        return
    header(args.threads, args.rounds, f", {args.clock} clock, each the median of {args.reps} "
           "reps (forward + backward)")
    r = run_workers(__file__, ["--reps", args.reps, "--clock", args.clock], args.rounds,
                    args.threads)
    print(f"{'case':36s} {'flowgrad ms':>12s} {'torch ms':>10s} {'ratio':>7s}")
    for name, _ in CASES:
        ma, mb = r["flowgrad"][name] * 1e3, r["torch"][name] * 1e3
        print(f"{name:36s} {ma:12.2f} {mb:10.2f} {ma / mb:7.2f}")


if __name__ == "__main__":
    main()
