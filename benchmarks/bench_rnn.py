"""Word-level language-model training steps, flowgrad against torch: 2-layer LSTM, GRU and
tanh-RNN (embedding, recurrent layers, decoder, cross-entropy, clip_grad_norm_, SGD), as
in PyTorch's word_language_model example: PTB size (vocab 10000, 200 units, bptt 35,
batch 20), where the decoder GEMM is a large share, and a small-vocabulary one (vocab 1000,
256 units, batch 32) where the recurrent layers dominate. Ratios printed.

Run: .venv/bin/python benchmarks/bench_rnn.py [--rounds 3] [--threads N] [--clock cpu]

torch and flowgrad never share a process (common.run_workers): each round runs a torch worker,
then a flowgrad one, each timing every model as the median of its repeats; the table shows the
median over --rounds rounds. On a busy machine `--threads 1 --clock cpu` is the steadier
comparison.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import header, load, report, run_workers, timeit, worker_parser  # noqa: E402

CONFIGS = {"ptb": dict(vocab=10000, units=200, layers=2, bptt=35, batch=20),
           "small-vocab": dict(vocab=1000, units=256, layers=2, bptt=35, batch=32)}
MODES = ("LSTM", "GRU", "RNN")


def lm_step(m, clock, mode, vocab, units, layers, bptt, batch):
    nn = m.nn
    m.manual_seed(0)
    rng = np.random.default_rng(0)
    data = m.tensor(rng.integers(0, vocab, (bptt + 1, batch)).astype(np.int64))
    encoder = nn.Embedding(vocab, units)
    rnn = getattr(nn, mode)(units, units, layers)
    decoder = nn.Linear(units, vocab)
    params = [*encoder.parameters(), *rnn.parameters(), *decoder.parameters()]
    opt = m.optim.SGD(params, lr=1.0)
    zeros = m.zeros(layers, batch, units)
    hidden = (zeros, zeros) if mode == "LSTM" else zeros

    def step():
        opt.zero_grad()
        out, _ = rnn(encoder(data[:-1]), hidden)
        loss = nn.functional.cross_entropy(decoder(out).reshape(-1, vocab),
                                           data[1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.25)
        opt.step()
    return timeit(step, repeat=7, clock=clock)


def main():
    ap = worker_parser(__doc__)
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.worker:
        m = load(args.worker)
        clock = time.perf_counter if args.clock == "wall" else time.process_time
        print(json.dumps({f"{mode} {name}": lm_step(m, clock, mode, **c)
                          for name, c in CONFIGS.items() for mode in modes}))
        return
    header(args.threads, args.rounds, f", {args.clock} clock")
    r = run_workers(__file__, ["--clock", args.clock, "--modes", args.modes], args.rounds,
                    args.threads)
    f, t = r["flowgrad"], r["torch"]
    for name, c in CONFIGS.items():
        for mode in modes:
            key = f"{mode} {name}"
            report(f"{c['layers']}-layer {mode} LM step (v{c['vocab']} h{c['units']} "
                   f"L{c['bptt']} b{c['batch']})", f[key], t[key])


if __name__ == "__main__":
    main()
