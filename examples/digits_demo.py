"""The main job: train on scikit-learn's handwritten digits and report held-out accuracy.

Trains a small MLP baseline, then the CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Dropout,
Linear) with Adam, showing a progress bar and a per-epoch table; writes a checkpoint
(safetensors) and a loss-curve PNG beside it. Written exactly as a torch script would be,
with `import flowgrad as flow`. Then trains the same CNN again with its step compiled by
`flow.nn.Graph` (lazy mode) and compares the epoch times.

Run: make demo   (or: .venv/bin/python examples/digits_demo.py [--epochs N] [--out DIR])
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm

import flowgrad as flow
import flowgrad.nn as nn
import flowgrad.nn.functional as F
from flowgrad.utils.data import DataLoader, TensorDataset


def load_data(seed=0):
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8) in [0, 1]
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    return (flow.tensor(x[train]), flow.tensor(y[train])), (flow.tensor(x[test]),
                                                             flow.tensor(y[test]))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.25), nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(),
            nn.Dropout(0.25), nn.Linear(128, 10),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def evaluate(model, x, y):
    model.eval()
    with flow.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        acc = (logits.argmax(dim=1) == y).float().mean().item()
    return loss, acc


def make_step(model, optimizer, compiled):
    """One training step: eager, or compiled once by nn.Graph (two plans: the last batch of
    an epoch is smaller)."""
    if not compiled:
        def step(xb, yb):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            return loss
        return step

    @flow.nn.Graph.with_dynamic_input_shape(size=2)
    class TrainStep(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(optimizer)

        def build(self, xb, yb):
            loss = F.cross_entropy(self.model(xb), yb)
            loss.backward()
            return loss

    return TrainStep()


def train(name, model, train_set, test_set, epochs, lr, seed, compiled=False):
    loader = DataLoader(TensorDataset(*train_set), batch_size=64, shuffle=True,
                        generator=flow.Generator().manual_seed(seed))
    optimizer = flow.optim.Adam(model.parameters(), lr=lr)
    step = make_step(model, optimizer, compiled)
    scheduler = flow.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    history = []
    print(f"\n{name}: {sum(p.numel() for p in model.parameters()):,} parameters")
    print(f"{'epoch':>5} {'train loss':>11} {'test loss':>10} {'test acc':>9} {'time':>7}")
    for epoch in range(1, epochs + 1):
        model.train()
        t0, total, count = time.perf_counter(), 0.0, 0
        bar = tqdm(loader, desc=f"{name} epoch {epoch}/{epochs}", leave=False, ncols=80)
        for xb, yb in bar:
            loss = step(xb, yb)
            total += loss.item() * len(yb)
            count += len(yb)
            bar.set_postfix(loss=f"{loss.item():.3f}")
        scheduler.step()
        seconds = time.perf_counter() - t0
        test_loss, test_acc = evaluate(model, *test_set)
        history.append((total / count, test_loss, test_acc, seconds))
        print(f"{epoch:>5} {total / count:>11.4f} {test_loss:>10.4f} {100 * test_acc:>8.2f}% "
              f"{seconds:>6.2f}s")
    return history, optimizer


def save_outputs(out_dir, model, optimizer_state, history):
    os.makedirs(out_dir, exist_ok=True)
    ckpt = os.path.join(out_dir, "digits_cnn.safetensors")
    flow.save({"model": model.state_dict(), "optimizer": optimizer_state,
               "epoch": len(history)}, ckpt)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    epochs = range(1, len(history) + 1)
    ax.plot(epochs, [h[0] for h in history], label="train loss")
    ax.plot(epochs, [h[1] for h in history], label="test loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("cross-entropy")
    ax.set_title("flowgrad CNN on scikit-learn digits")
    ax.legend()
    png = os.path.join(out_dir, "digits_cnn_loss.png")
    fig.savefig(png, dpi=100, bbox_inches="tight")
    return ckpt, png


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--out", default="runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    flow.manual_seed(args.seed)
    start = time.perf_counter()
    train_set, test_set = load_data(args.seed)
    print(f"digits: {len(train_set[1])} train / {len(test_set[1])} test images, 8x8")

    mlp_hist, _ = train("MLP", MLP(), train_set, test_set, 10, 1e-2, args.seed)
    cnn = CNN()
    cnn_hist, optimizer = train("CNN", cnn, train_set, test_set, args.epochs, 2e-3, args.seed)
    ckpt, png = save_outputs(args.out, cnn, optimizer.state_dict(), cnn_hist)

    restored = CNN()
    restored.load_state_dict(flow.load(ckpt)["model"])
    _, restored_acc = evaluate(restored, *test_set)
    flow.manual_seed(args.seed)  # the same CNN again, its step compiled by nn.Graph
    graph_hist, _ = train("CNN (nn.Graph)", CNN(), train_set, test_set, args.epochs, 2e-3,
                          args.seed, compiled=True)

    def epoch_time(hist):  # the first epoch of the graph includes tracing and compiling
        return float(np.median([h[3] for h in hist]))

    print(f"\nMLP test accuracy: {100 * mlp_hist[-1][2]:.2f}%")
    print(f"CNN test accuracy: {100 * cnn_hist[-1][2]:.2f}% "
          f"(reloaded from checkpoint: {100 * restored_acc:.2f}%)")
    print(f"CNN through nn.Graph: {100 * graph_hist[-1][2]:.2f}%; median epoch time "
          f"{epoch_time(graph_hist):.2f} s (eager {epoch_time(cnn_hist):.2f} s)")
    print(f"checkpoint: {ckpt}\nloss curve: {png}")
    print(f"total time: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
