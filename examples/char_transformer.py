"""A character-level Transformer language model trained on the Python standard library's own
source files (found through `sysconfig`), written as a torch script would be.

After a few minutes on 2 cores it prints Python-like text, with its loss falling.

Run: .venv/bin/python examples/char_transformer.py [--minutes 3] [--steps N]
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import sysconfig
import time

import numpy as np

import flowgrad as flow
import flowgrad.nn as nn
import flowgrad.nn.functional as F


def load_corpus(max_chars=2_000_000):
    stdlib = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(stdlib, "*.py")))
    chunks, total = [], 0
    for path in files:
        with open(path, encoding="utf-8", errors="ignore") as f:
            text = f.read()
        chunks.append(text)
        total += len(text)
        if total >= max_chars:
            break
    text = "".join(chunks)
    text = "".join(c if (c.isascii() and (c.isprintable() or c == "\n")) else " " for c in text)
    chars = sorted(set(text))
    return text, chars, len(files)


class CharTransformer(nn.Module):
    def __init__(self, vocab, d_model=128, n_head=4, n_layers=3, context=64):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_head, 4 * d_model, dropout=0.0,
                                           batch_first=True, norm_first=True,
                                           activation="gelu")
        self.blocks = nn.TransformerEncoder(layer, n_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        mask = np.triu(np.full((context, context), -np.inf, np.float32), 1)
        self.register_buffer("causal_mask", flow.tensor(mask), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.tok(idx) + self.pos(flow.arange(t))
        h = self.blocks(h, mask=self.causal_mask[:t, :t])
        return self.head(self.norm(h))


@flow.no_grad()
def sample(model, stoi, itos, prompt, n_chars, temperature=0.7):
    model.eval()
    idx = [stoi.get(c, 0) for c in prompt]
    for _ in range(n_chars):
        x = flow.tensor([idx[-model.context:]])
        logits = model(x)[0, -1] / temperature
        probs = F.softmax(logits, dim=-1)
        idx.append(int(flow.multinomial(probs, 1).item()))
    model.train()
    return "".join(itos[i] for i in idx)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-chars", type=int, default=400)
    args = parser.parse_args()
    flow.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text, chars, n_files = load_corpus()
    stoi = {c: i for i, c in enumerate(chars)}
    itos = dict(enumerate(chars))
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    print(f"corpus: {len(text):,} characters from {n_files} stdlib files, vocab {len(chars)}")

    model = CharTransformer(len(chars), context=args.context)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")
    base_lr = 3e-3
    opt = flow.optim.AdamW(model.parameters(), lr=base_lr, weight_decay=0.01)
    budget = 60 * args.minutes
    start, running = time.perf_counter(), None
    step = 0
    while step < args.steps and time.perf_counter() - start < budget:
        # cosine decay over the time budget: the last minutes refine instead of bouncing
        progress = max((time.perf_counter() - start) / budget, step / args.steps)
        opt.param_groups[0]["lr"] = base_lr * 0.5 * (1 + math.cos(math.pi * progress))
        starts = rng.integers(0, len(data) - args.context - 1, args.batch)
        window = data[starts[:, None] + np.arange(args.context + 1)]
        x, y = flow.tensor(window[:, :-1]), flow.tensor(window[:, 1:])
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if step % 50 == 0 or step == 1:
            print(f"step {step:5d}  loss {running:.3f}  ({running / math.log(2):.2f} bits/char)"
                  f"  {time.perf_counter() - start:6.1f}s", flush=True)
    print("\n--- sample ---")
    print(sample(model, stoi, itos, "def ", args.sample_chars))


if __name__ == "__main__":
    main()
