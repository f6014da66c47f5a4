"""flowgrad.distributed on 2 MPI ranks: all-reduce bandwidth against mpi4py called directly,
and DDP's overlap of gradient all-reduces with backward.

1. `dist.all_reduce` of float32 tensors, 1 KiB .. 64 MiB, beside `comm.Allreduce` of the
   same NumPy array (in place, SUM): algorithm bandwidth (bytes / time) and the ratio.
   flowgrad's call adds the agreement check (one 80-byte all-reduce) and Python overhead;
   "unchecked" is the same call under dist.set_debug_level(DebugLevel.OFF) (set around the
   timed loop, not per call).
2. One training step (forward, backward, SGD) of an MLP at batch B per rank: plain (no
   communication; both ranks run it at once, so the cores are shared alike) against DDP
   (the same B per rank, gradients averaged; also with gradient_as_bucket_view=True), and
   against all-reducing the gradients after backward (no overlap). Ratio DDP / plain: 1.0
   would hide all communication.

Run: .venv/bin/python benchmarks/bench_ddp.py   (starts its own 2-rank job)
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def best_of(fns, seconds=0.3, rounds=7, around=None):
    """Seconds per call of each of `fns`: the median over `rounds` of the mean over about
    seconds / rounds of calls, the fns taking turns within each round (so a burst of load
    from elsewhere hits them alike); the slowest rank's figure. The ranks agree on the
    number of calls (rank 0's estimate), so their collectives pair up. `around[i]`, if
    given, is a context manager factory entered around fn i's untimed-setup and timed loop."""
    from contextlib import nullcontext

    import numpy as np

    import flowgrad.distributed as dist

    around = around or [nullcontext] * len(fns)
    counts = []
    for fn, ctx in zip(fns, around):
        with ctx():
            fn()
            t0 = time.perf_counter()
            fn()
        once = max(time.perf_counter() - t0, 1e-7)
        counts.append(max(3, int(seconds / rounds / once)))
    dist.broadcast_object_list(counts, src=0)
    samples = [[] for _ in fns]
    for _ in range(rounds):
        for fn, n, out, ctx in zip(fns, counts, samples, around):
            dist.barrier()
            with ctx():
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                out.append((time.perf_counter() - t0) / n)
    worst = np.array([statistics.median(s) for s in samples])
    dist.all_reduce(flow_tensor(worst), op=dist.ReduceOp.MAX)
    return worst.tolist()


def flow_tensor(array):
    import flowgrad as flow

    return flow.from_numpy(array)


@contextmanager
def unchecked():
    """The agreement check off (DebugLevel.OFF) for the timed calls."""
    import flowgrad.distributed as dist

    dist.set_debug_level(dist.DebugLevel.OFF)
    try:
        yield
    finally:
        dist.set_debug_level(dist.DebugLevel.DETAIL)


def bandwidth(rank):
    import numpy as np
    from mpi4py import MPI

    import flowgrad as flow
    import flowgrad.distributed as dist

    comm = MPI.COMM_WORLD
    if rank == 0:
        print(f"{'size':>8} {'mpi4py GB/s':>12} {'flowgrad GB/s':>14} {'ratio':>6}"
              f" {'unchecked GB/s':>15} {'ratio':>6}")
    ratios = []
    for kib in (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536):
        n = kib * 256
        array = np.ones(n, np.float32)
        tensor = flow.ones(n)
        seconds = 0.6 if kib < 4096 else 2.0
        direct, ours, bare = best_of(
            [lambda: comm.Allreduce(MPI.IN_PLACE, array, op=MPI.SUM),
             lambda: dist.all_reduce(tensor), lambda: dist.all_reduce(tensor)],
            seconds, rounds=9, around=[nullcontext, nullcontext, unchecked])
        ratios.append(direct / ours)
        if rank == 0:
            size = f"{kib} KiB" if kib < 1024 else f"{kib // 1024} MiB"
            print(f"{size:>8} {n * 4 / direct / 1e9:>12.3f} {n * 4 / ours / 1e9:>14.3f} "
                  f"{direct / ours:>6.2f} {n * 4 / bare / 1e9:>15.3f} {direct / bare:>6.2f}",
                  flush=True)
    return ratios


def seeded_mlp(m, width, depth):
    """The overlap part's MLP 784-width x (depth-1)-10, seed 0, in framework `m` (flowgrad, or
    torch for bench_ddp_torch.py's reference)."""
    m.manual_seed(0)
    nn = m.nn
    layers = [nn.Linear(784, width), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def overlap(rank, batch=64, width=1024, depth=4):
    import numpy as np

    import flowgrad as flow
    import flowgrad.distributed as dist
    import flowgrad.nn.functional as F
    from flowgrad.nn.parallel import DistributedDataParallel as DDP

    def mlp():
        return seeded_mlp(flow, width, depth)

    rng = np.random.default_rng(rank)
    x = flow.tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 10, batch))

    def stepper(net, after_backward=None):
        opt = flow.optim.SGD(net.parameters(), lr=0.01)

        def step():
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            if after_backward is not None:
                after_backward()
            opt.step()
        return step

    plain = mlp()
    ddp_model = DDP(mlp())
    view_model = DDP(mlp(), gradient_as_bucket_view=True)
    late_model = mlp()

    def all_reduce_after_backward():  # the no-overlap baseline: one bucket, after backward
        grads = [p.grad for p in late_model.parameters()]
        flat = flow.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.AVG)
        start = 0
        for g in grads:
            g.copy_(flat[start:start + g.numel()].reshape(g.shape))
            start += g.numel()

    t_plain, t_ddp, t_view, t_late = best_of(
        [stepper(plain), stepper(ddp_model), stepper(view_model),
         stepper(late_model, all_reduce_after_backward)], 6.0, rounds=9)
    params = sum(p.numel() for p in plain.parameters())
    if rank == 0:
        print(f"\nMLP 784-{width}x{depth - 1}-10 ({params / 1e6:.2f} M parameters, "
              f"{params * 4 / 2 ** 20:.1f} MiB of gradients), batch {batch} per rank")
        print(f"step without communication: {1e3 * t_plain:8.2f} ms")
        print(f"DDP step (overlapped):      {1e3 * t_ddp:8.2f} ms   ratio {t_ddp / t_plain:.3f}")
        print(f"DDP, grads as bucket views: {1e3 * t_view:8.2f} ms   ratio "
              f"{t_view / t_plain:.3f}")
        print(f"all-reduce after backward:  {1e3 * t_late:8.2f} ms   ratio {t_late / t_plain:.3f}")
    return t_ddp / t_plain


def main():
    if not os.environ.get("OMPI_COMM_WORLD_RANK"):  # start the 2-rank job running this file
        cmd = [sys.executable, "-m", "flowgrad.distributed.run", "--nproc-per-node", "2",
               os.path.abspath(__file__), *sys.argv[1:]]
        sys.exit(subprocess.call(cmd, cwd=ROOT))
    sys.path.insert(0, ROOT)
    import argparse

    import flowgrad.distributed as dist

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "bandwidth", "overlap"], default="all")
    args = parser.parse_args()
    dist.init_process_group()
    rank = dist.get_rank()
    if rank == 0:
        print(f"2 ranks, {os.cpu_count()} cores, OMP_NUM_THREADS="
              f"{os.environ.get('OMP_NUM_THREADS')}\n", flush=True)
    if args.part in ("all", "bandwidth"):
        bandwidth(rank)
    if args.part in ("all", "overlap"):
        overlap(rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
