"""An LSTM sequence example: predict the next value of noisy sine waves of random frequency
and phase, as a torch script would. Prints the test error falling below a naive baseline.

Run: .venv/bin/python examples/lstm_sequence.py [--epochs 30]
"""
from __future__ import annotations

import argparse

import numpy as np

import flowgrad as flow
import flowgrad.nn as nn
import flowgrad.nn.functional as F


def make_waves(n, length, rng):
    t = np.arange(length + 1, dtype=np.float32)
    freq = rng.uniform(0.05, 0.25, (n, 1)).astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, (n, 1)).astype(np.float32)
    waves = np.sin(freq * t + phase) + 0.05 * rng.standard_normal((n, length + 1))
    waves = waves.astype(np.float32)[..., None]
    return flow.tensor(waves[:, :-1]), flow.tensor(waves[:, 1:])


class Forecaster(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.lstm(x)
        return self.out(h)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    flow.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_waves(256, 40, rng)
    x_test, y_test = make_waves(64, 40, rng)
    baseline = F.mse_loss(x_test, y_test).item()  # "tomorrow equals today"
    model = Forecaster()
    opt = flow.optim.Adam(model.parameters(), lr=1e-2)
    print(f"naive baseline test MSE: {baseline:.4f}")
    for epoch in range(1, args.epochs + 1):
        perm = flow.randperm(len(x_train))
        for i in range(0, len(x_train), 32):
            idx = perm[i:i + 32]
            loss = F.mse_loss(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with flow.no_grad():
            test = F.mse_loss(model(x_test), y_test).item()
        if epoch % 5 == 0 or epoch == 1:
            print(f"epoch {epoch:3d}  train MSE {loss.item():.4f}  test MSE {test:.4f}")
    print(f"final test MSE {test:.4f} vs naive {baseline:.4f}")


if __name__ == "__main__":
    main()
