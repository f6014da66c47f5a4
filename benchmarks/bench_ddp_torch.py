"""The reference for bench_ddp.py's overlap figure: torch's DistributedDataParallel (gloo, the
CPU backend) on the same MLP, 2 processes, one thread each, same batch per rank.

It runs torch only (never beside flowgrad in one process). It tells what the issue's goal,
"a DDP step no more than 1.1x a step without communication", means on this machine: with 2
ranks on 2 cores the all-reduce cannot run on an idle core, so it adds its CPU time to the
step, overlapped or not.

Run: .venv/bin/python benchmarks/bench_ddp_torch.py
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp import seeded_mlp  # noqa: E402 - the same model (bench_ddp imports no framework)


def run_rank(rank, world=2, batch=64, width=1024, depth=4, rounds=9, steps=40):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)

    def mlp():
        return seeded_mlp(torch, width, depth)

    rng = np.random.default_rng(rank)
    x = torch.tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 10, batch))

    def stepper(net):
        opt = torch.optim.SGD(net.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
        return step

    fns = [stepper(mlp()), stepper(DDP(mlp())), stepper(DDP(mlp(), gradient_as_bucket_view=True))]
    for fn in fns:
        for _ in range(5):
            fn()
    samples = [[] for _ in fns]
    for _ in range(rounds):  # the variants take turns, so a burst of load hits them alike
        for fn, out in zip(fns, samples):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            out.append((time.perf_counter() - t0) / steps)
    worst = torch.tensor([statistics.median(s) for s in samples], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # the slowest rank's figure, as bench_ddp's
    if rank == 0:
        plain, ddp, view = worst.tolist()
        print(f"torch {torch.__version__}, gloo, 2 ranks x 1 thread: MLP 784-{width}x"
              f"{depth - 1}-10, batch {batch} per rank")
        print(f"step without communication: {1e3 * plain:8.2f} ms")
        print(f"DDP step:                   {1e3 * ddp:8.2f} ms   ratio {ddp / plain:.3f}")
        print(f"DDP, grads as bucket views: {1e3 * view:8.2f} ms   ratio {view / plain:.3f}")
    dist.destroy_process_group()


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        run_rank(int(sys.argv[2]))
        return
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=os.environ.get("MASTER_PORT", "29533"))
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(r)], env=env)
             for r in range(2)]
    sys.exit(max(p.wait() for p in ranks))


if __name__ == "__main__":
    main()
