"""nn.Graph on the example models against torch eager: the digits CNN (the demo's model:
BatchNorm, dropout, Adam, batch 64) and the char-Transformer of examples/char_transformer.py
(3 pre-norm layers, d 128, context 64, batch 32, AdamW, gradient clipping at 1.0).

Each training step is written once, for a module `m` that is torch or flowgrad; flowgrad runs
it eagerly and compiled by `flow.nn.Graph` (the clipping as the param group's
`clip_grad_max_norm`, OneFlow's spelling). As every script here: torch and flowgrad never share
a process (`common.run_workers` alternates fresh processes and takes medians over rounds).

Run: .venv/bin/python benchmarks/bench_graph_models.py [--rounds 3] [--threads N]
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_training import digits_cnn  # noqa: E402 - the demo's model, as bench_training has it
from common import header, load, run_workers, timeit, worker_parser  # noqa: E402

VOCAB, CONTEXT, BATCH = 96, 64, 32


def char_transformer(m):
    nn = m.nn

    # examples/char_transformer.py's model, written for either framework (the example imports
    # flowgrad, as a user's script would)
    class CharTransformer(nn.Module):
        def __init__(self, d_model=128, n_head=4, n_layers=3):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, d_model)
            self.pos = nn.Embedding(CONTEXT, d_model)
            layer = nn.TransformerEncoderLayer(d_model, n_head, 4 * d_model, dropout=0.0,
                                               batch_first=True, norm_first=True,
                                               activation="gelu")
            self.blocks = nn.TransformerEncoder(layer, n_layers)
            self.norm = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, VOCAB)
            mask = np.triu(np.full((CONTEXT, CONTEXT), -np.inf, np.float32), 1)
            self.register_buffer("causal_mask", m.tensor(mask), persistent=False)

        def forward(self, idx):
            h = self.tok(idx) + self.pos(m.arange(idx.shape[1]))
            h = self.blocks(h, mask=self.causal_mask)
            return self.head(self.norm(h)).reshape(-1, VOCAB)

    return CharTransformer()


def workloads(m):
    """(name, model, optimizer, inputs, clip) for each step; fixed data, seed 0."""
    rng = np.random.default_rng(0)
    m.manual_seed(0)
    cnn = digits_cnn(m)
    images = m.tensor(rng.random((64, 1, 8, 8), dtype=np.float32))
    labels = m.tensor(rng.integers(0, 10, 64))
    lm = char_transformer(m)
    window = rng.integers(0, VOCAB, (BATCH, CONTEXT + 1))
    tokens, targets = m.tensor(window[:, :-1]), m.tensor(window[:, 1:].reshape(-1))
    return [("digits CNN step (b64, Adam)", cnn, m.optim.Adam(cnn.parameters(), lr=1e-3),
             (images, labels), None),
            ("char-Transformer step (b32, L64, AdamW, clip)", lm,
             m.optim.AdamW(lm.parameters(), lr=3e-3, weight_decay=0.01), (tokens, targets),
             1.0)]


def eager_step(m, model, opt, inputs, clip):
    def step():
        opt.zero_grad()
        loss = m.nn.functional.cross_entropy(model(inputs[0]), inputs[1])
        loss.backward()
        if clip is not None:
            m.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss
    return step


def graph_step(flow, model, opt, inputs, clip):
    if clip is not None:
        for group in opt.param_groups:
            group["clip_grad_max_norm"] = clip

    class TrainStep(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = flow.nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            return loss

    graph = TrainStep()
    return lambda: graph(*inputs)


def main():
    ap = worker_parser(__doc__, clock=False)
    args = ap.parse_args()
    if args.worker:
        m = load(args.worker)
        out = {}
        for name, model, opt, inputs, clip in workloads(m):
            out[name] = timeit(eager_step(m, model, opt, inputs, clip), repeat=9, warmup=3)
        if args.worker == "flowgrad":
            for name, model, opt, inputs, clip in workloads(m):
                out["graph " + name] = timeit(graph_step(m, model, opt, inputs, clip),
                                              repeat=9, warmup=3)
        print(json.dumps(out))
        return
    header(args.threads, args.rounds)
    r = run_workers(__file__, rounds=args.rounds, threads=args.threads)
    f, t = r["flowgrad"], r["torch"]
    print(f"{'step':<46} {'torch':>9} {'eager':>9} {'nn.Graph':>9}  eager/torch  graph/torch")
    for name, torch_s in t.items():
        eager, graph = f[name], f["graph " + name]
        print(f"{name:<46} {torch_s * 1e3:7.2f}ms {eager * 1e3:7.2f}ms {graph * 1e3:7.2f}ms"
              f"  {eager / torch_s:10.2f}x  {graph / torch_s:10.2f}x")


if __name__ == "__main__":
    main()
