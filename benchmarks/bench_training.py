"""Issue 4 benchmarks, flowgrad against torch: one epoch of the digits CNN (the demo's model,
Adam, batch 64) and one Transformer-encoder training step. Ratios printed.

Run: .venv/bin/python benchmarks/bench_training.py [--rounds 3] [--threads N] [--clock cpu]

How it measures: never both frameworks in one process (their BLAS pools would fight for the
cores). Each round runs a torch worker process, then a flowgrad one (`--worker FW`, importing
only that framework), each timing both workloads as the median of its repeats; the table shows
the median over --rounds rounds and the flowgrad/torch ratio. Both frameworks get --threads
BLAS/OpenMP threads (default: all cores). On a busy machine `--threads 1 --clock cpu`
(process CPU time, one thread each) is the steadier comparison: it doesn't count time spent
waiting for a core.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import header, load, report, run_workers, timeit, worker_parser  # noqa: E402

TRANSFORMER = dict(batch=32, seq=64, d_model=128, nhead=4, layers=2)


def digits_cnn(m):
    nn = m.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(1024, 128), nn.ReLU(),
        nn.Dropout(0.25), nn.Linear(128, 10))


def cnn_epoch(m, clock):
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None][:1437]
    y = d.target.astype(np.int64)[:1437]

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
    return timeit(epoch, repeat=5, warmup=1, clock=clock)


def transformer_step(m, clock, batch, seq, d_model, nhead, layers):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, seq, d_model)).astype(np.float32)
    target = rng.standard_normal((batch, seq, d_model)).astype(np.float32)
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
    return timeit(step, repeat=7, clock=clock)


def main():
    ap = worker_parser(__doc__)
    args = ap.parse_args()
    if args.worker:
        m = load(args.worker)
        clock = time.perf_counter if args.clock == "wall" else time.process_time
        print(json.dumps({"cnn": cnn_epoch(m, clock),
                          "transformer": transformer_step(m, clock, **TRANSFORMER)}))
        return
    header(args.threads, args.rounds, f", {args.clock} clock")
    r = run_workers(__file__, ["--clock", args.clock], args.rounds, args.threads)
    f, t = r["flowgrad"], r["torch"]
    report("digits CNN, one epoch (1437 images, b64, Adam)", f["cnn"], t["cnn"])
    c = TRANSFORMER
    report(f"Transformer encoder step ({c['layers']}x d{c['d_model']} b{c['batch']} "
           f"L{c['seq']})", f["transformer"], t["transformer"])


if __name__ == "__main__":
    main()
