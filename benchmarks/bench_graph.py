"""Lazy mode (nn.Graph) beside eager flowgrad, in one flowgrad-only process.

torch is never imported here: for ratios against torch use the shared yardstick, which runs
each framework in its own process (`../shared/bench/ratio.py . --graph`). This script adds
what that one does not: eager flowgrad on the same steps, the first call's cost (trace +
passes + codegen) against one eager step, and the peak memory of a step (tracemalloc).

Run: .venv/bin/python benchmarks/bench_graph.py [--repeats N]
"""
from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import flowgrad as flow
import flowgrad.nn.functional as F


def training_step(loss_of, module, optimizer, graph, *inputs):
    """One optimizer step on `loss_of(*inputs)`: eager, or compiled once by nn.Graph."""
    if not graph:
        def step():
            optimizer.zero_grad()
            loss = loss_of(*inputs)
            loss.backward()
            optimizer.step()
            return loss
        return step

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.module = module  # registers its parameters as the graph's state
            self.add_optimizer(optimizer)

        def build(self, *args):
            loss = loss_of(*args)
            loss.backward()
            return loss

    compiled = Step()
    return lambda: compiled(*inputs)


def chain_step(graph):
    holder = flow.nn.Module()
    holder.x = flow.nn.Parameter(flow.tensor(np.random.default_rng(0).uniform(0.1, 1, 100)
                                             .astype(np.float32)))

    def forward():
        y = holder.x
        for _ in range(50):
            y = flow.relu(flow.tanh(y * 1.0001 + 0.0001))
        return y.sum()

    return training_step(forward, holder, flow.optim.SGD([holder.x], lr=0.0), graph)


def model_step(graph, model, make_batch):
    opt = flow.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return training_step(lambda x, y: F.cross_entropy(model(x), y), model, opt, graph,
                         *make_batch())


def mlp(graph):
    flow.manual_seed(0)
    model = flow.nn.Sequential(flow.nn.Linear(784, 512), flow.nn.ReLU(), flow.nn.Linear(512, 512),
                               flow.nn.ReLU(), flow.nn.Linear(512, 10))
    rng = np.random.default_rng(0)
    return model_step(graph, model, lambda: (
        flow.tensor(rng.standard_normal((128, 784)).astype(np.float32)),
        flow.tensor(rng.integers(0, 10, 128))))


def lenet(graph):
    flow.manual_seed(0)
    nn = flow.nn
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                          nn.Linear(84, 10))
    rng = np.random.default_rng(0)
    return model_step(graph, model, lambda: (
        flow.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32)),
        flow.tensor(rng.integers(0, 10, 64))))


def best_time(step, repeats, calls):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def peak_memory(step):
    tracemalloc.start()
    step()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--graphs", type=int, default=7,
                        help="fresh graphs whose first calls give the median first call")
    args = parser.parse_args()
    print("1st call: the median over fresh graphs of the same step (each traced, optimised and "
          "generated anew);\nin brackets, the process's first graph of that workload, which "
          "also pays one-time warm-up")
    print(f"{'workload':<10} {'eager':>10} {'nn.Graph':>10} {'graph/eager':>12} "
          f"{'1st call/eager step':>20} {'peak MB eager':>14} {'peak MB graph':>14}")
    for name, make, calls in (("chain", chain_step, 50), ("mlp", mlp, 10),
                              ("lenet", lenet, 5)):
        eager = make(False)
        eager()  # warm up
        firsts = []
        for _ in range(1 + args.graphs):
            graph = make(True)
            start = time.perf_counter()
            graph()
            firsts.append(time.perf_counter() - start)
        cold, first = firsts[0], sorted(firsts[1:])[len(firsts[1:]) // 2]
        t_eager = best_time(eager, args.repeats, calls)
        t_graph = best_time(graph, args.repeats, calls)
        per = " us/op" if name == "chain" else " ms"
        scale = 1e6 / 200 if name == "chain" else 1e3
        print(f"{name:<10} {t_eager * scale:>7.2f}{per[:3]} {t_graph * scale:>7.2f}{per[:3]} "
              f"{t_graph / t_eager:>12.2f} {first / t_eager:>12.1f} ({cold / t_eager:.1f}) "
              f"{peak_memory(eager) / 2**20:>14.1f} {peak_memory(graph) / 2**20:>14.1f}")


if __name__ == "__main__":
    main()
