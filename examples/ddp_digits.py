"""Data-parallel training of the digits CNN with DistributedDataParallel, as a torch DDP
script (with `import flowgrad as flow`). Each rank reads its share of every batch through a
DistributedSampler; SyncBatchNorm normalises over the whole batch; DDP averages the
gradients. So 2 processes train exactly the model 1 process trains (float64 keeps the
sums' order from showing), and print the same accuracy:

    .venv/bin/python -m flowgrad.distributed.run --nproc-per-node 2 examples/ddp_digits.py
    .venv/bin/python -m flowgrad.distributed.run --nproc-per-node 1 examples/ddp_digits.py

Rank 0 alone evaluates, prints and writes the checkpoint (--out).
"""
from __future__ import annotations

import argparse
import os
import time

from digits_demo import load_data  # the same data and split as the 1-process demo

import flowgrad as flow
import flowgrad.distributed as dist
import flowgrad.nn as nn
import flowgrad.nn.functional as F
from flowgrad.nn.parallel import DistributedDataParallel as DDP
from flowgrad.utils.data import DataLoader, TensorDataset
from flowgrad.utils.data.distributed import DistributedSampler


def cnn():
    # no dropout: its masks depend on how the batch is split, the rest does not
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64, help="global batch (all ranks)")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-size", type=int, default=None,
                        help="train on the first N training images only (a quick run)")
    parser.add_argument("--out", default=None, help="checkpoint folder (rank 0 writes)")
    args = parser.parse_args()

    dist.init_process_group()  # rank and world size from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must divide by the world size {world}")
    flow.set_default_dtype(flow.float64)
    (x_train, y_train), (x_test, y_test) = load_data(args.seed)
    n = len(y_train) if args.train_size is None else args.train_size
    train_set = TensorDataset(x_train[:n].double(), y_train[:n])
    sampler = DistributedSampler(train_set, shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch // world, sampler=sampler)

    flow.manual_seed(args.seed)
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(cnn()))
    optimizer = flow.optim.Adam(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)  # a new order each epoch, the same on every rank
        model.train()
        t0, total, count = time.perf_counter(), flow.zeros(2), 0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += flow.stack([loss.detach() * len(yb), flow.tensor(float(len(yb)))])
            count += 1
        dist.all_reduce(total)  # the epoch's mean loss over every rank's samples
        if rank == 0:
            print(f"epoch {epoch}: train loss {(total[0] / total[1]).item():.10f} "
                  f"({count} steps of {args.batch // world} x {world} ranks, "
                  f"{time.perf_counter() - t0:.2f} s)", flush=True)

    if rank == 0:
        model.eval()
        with flow.no_grad():
            logits = model.module(x_test.double())
        correct = int((logits.argmax(dim=1) == y_test).sum().item())
        print(f"test accuracy: {100 * correct / len(y_test):.2f}% ({correct}/{len(y_test)}), "
              f"world size {world}")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            path = os.path.join(args.out, "ddp_digits_cnn.safetensors")
            flow.save(model.module.state_dict(), path)  # rank 0 only: one writer
            print(f"checkpoint: {path}")
    dist.barrier()  # nobody leaves while rank 0 still evaluates and writes
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
