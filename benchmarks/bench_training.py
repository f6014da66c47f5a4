"""Issue 4 benchmarks, flowgrad beside torch in one run: one epoch of the digits CNN (the
demo's model, Adam, batch 64) and one Transformer-encoder training step. Ratios printed.

Run: .venv/bin/python benchmarks/bench_training.py
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import report, timeit  # noqa: E402

import flowgrad as flow  # noqa: E402


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

    ours, theirs = timeit(make(flow), repeat=3, warmup=1), timeit(make(torch), repeat=3,
                                                                   warmup=1)
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

    ours, theirs = timeit(make(flow), repeat=7), timeit(make(torch), repeat=7)
    return report(f"Transformer encoder step ({layers}x d{d_model} b{batch} L{seq})", ours,
                  theirs)


if __name__ == "__main__":
    print(f"flowgrad vs torch {torch.__version__}, {torch.get_num_threads()} torch threads")
    bench_cnn_epoch()
    bench_transformer_step()
