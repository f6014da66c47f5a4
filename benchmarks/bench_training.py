"""Issue 4 benchmarks, flowgrad beside torch in one run: one epoch of the digits CNN (the
demo's model, Adam, batch 64) and one Transformer-encoder training step. Ratios printed.

Run: .venv/bin/python benchmarks/bench_training.py [--threads N] [--clock cpu]

On a busy machine `--threads 1 --clock cpu` (process CPU time, one BLAS/torch thread each)
is the steadier comparison: it doesn't count time spent waiting for a core.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import report  # noqa: E402

import flowgrad as flow  # noqa: E402

CLOCK = time.perf_counter  # --clock cpu: time.process_time


def timeit_pair(ours, theirs, repeat=7, warmup=2):
    """Median seconds per call of ours() and theirs(), read on CLOCK, timed in alternation so
    that machine load hits both alike."""
    for _ in range(warmup):
        ours()
        theirs()
    a, b = [], []
    for _ in range(repeat):
        for fn, samples in ((ours, a), (theirs, b)):
            t0 = CLOCK()
            fn()
            samples.append(CLOCK() - t0)
    return float(np.median(a)), float(np.median(b))


def digits_cnn(m):
    nn = m.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(1024, 128), nn.ReLU(),
        nn.Dropout(0.25), nn.Linear(128, 10))


def bench_cnn_epoch():
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None][:1437]
    y = d.target.astype(np.int64)[:1437]

    def make(m):
        model = digits_cnn(m)
        opt = m.optim.Adam(model.parameters(), lr=1e-3)
        xs, ys = m.tensor(x), m.tensor(y)

        def epoch():
            model.train()
            for i in range(0, len(x), 64):
                opt.zero_grad()
                loss = m.nn.functional.cross_entropy(model(xs[i:i + 64]), ys[i:i + 64])
                loss.backward()
                opt.step()
        return epoch

    ours, theirs = timeit_pair(make(flow), make(torch), repeat=5, warmup=1)
    return report("digits CNN, one epoch (1437 images, b64, Adam)", ours, theirs)


def bench_transformer_step(batch=32, seq=64, d_model=128, nhead=4, layers=2):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, seq, d_model)).astype(np.float32)
    target = rng.standard_normal((batch, seq, d_model)).astype(np.float32)

    def make(m):
        layer = m.nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout=0.0,
                                             batch_first=True)
        model = m.nn.TransformerEncoder(layer, layers)
        opt = m.optim.AdamW(model.parameters(), lr=1e-3)
        xs, ts = m.tensor(x), m.tensor(target)

        def step():
            opt.zero_grad()
            loss = m.nn.functional.mse_loss(model(xs), ts)
            loss.backward()
            opt.step()
        return step

    ours, theirs = timeit_pair(make(flow), make(torch), repeat=7)
    return report(f"Transformer encoder step ({layers}x d{d_model} b{batch} L{seq})", ours,
                  theirs)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    args = ap.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads, user_api="blas")
        torch.set_num_threads(args.threads)
    if args.clock == "cpu":
        CLOCK = time.process_time
    print(f"flowgrad vs torch {torch.__version__}, {torch.get_num_threads()} torch threads")
    bench_cnn_epoch()
    bench_transformer_step()
