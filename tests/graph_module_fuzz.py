"""The cases of tests/module_fuzz.py (nn modules over their constructor options) trained by
nn.Graph against the same module trained eagerly: two copies with the same parameters, three
SGD steps with new inputs each, the same outputs, parameters and buffers after every step
(running statistics, embedding renormalisation in place, recurrent states).

    .venv/bin/python tests/graph_module_fuzz.py --seeds 0:500     # summary
"""
from __future__ import annotations

import warnings

import fuzz_common
import module_fuzz as mf
import numpy as np
import torch

import flowgrad as flow

STEPS = 3
# A limit of nn.Graph that refuses (never miscomputes): a plan keeps the shapes of the first
# call's intermediates, so an EmbeddingBag whose offsets change the longest bag fails when the
# plan reshapes
REFUSALS = ("failed while running the compiled plan: cannot reshape",)


def _copies(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        ref = getattr(torch.nn, case["cls"])(*case["args"], **case["kwargs"]).double()
    params = {k: v.detach().numpy().copy() for k, v in ref.named_parameters()}
    layers = []
    for _ in range(2):
        layer = getattr(flow.nn, case["cls"])(*case["args"], **case["kwargs"]).double()
        with flow.no_grad():
            for name, p in layer.named_parameters():
                p.copy_(flow.tensor(params[name]))
        if not case.get("train", True):
            layer.eval()
        layers.append(layer)
    return layers


def _loss(outputs, rng):
    flat = []
    for o in outputs if isinstance(outputs, tuple) else (outputs,):
        flat.extend(o if isinstance(o, tuple) else [o])
    weights = [rng.standard_normal(tuple(o.shape)) for o in flat]
    return flat, weights


def check(seed, case=None):
    """None when the compiled module trains as the eager one, else a message."""
    case = case or mf.generate(seed)
    eager, compiled = _copies(case)
    has_params = bool(list(eager.parameters()))
    opt_e = flow.optim.SGD(eager.parameters(), lr=0.1) if has_params else None
    opt_g = flow.optim.SGD(compiled.parameters(), lr=0.1) if has_params else None
    rng_inputs = np.random.default_rng(case["seed"])
    batches = [mf._inputs(flow, case, rng_inputs) for _ in range(STEPS)]
    w_rng = np.random.default_rng(case["seed"] + 7)

    n_weights = []

    class Step(flow.nn.Graph):
        """A graph takes tensors, not tuples: weights and arguments come flat, an LSTM's
        (h, c) as two trailing tensors put back together here."""

        def __init__(self):
            super().__init__()
            self.layer = compiled
            if opt_g is not None:
                self.add_optimizer(opt_g)

        def build(self, *flat_args):
            k = n_weights[0]
            weights, args = flat_args[:k], list(flat_args[k:])
            if pair_state:
                args = args[:-2] + [tuple(args[-2:])]
            out = self.layer(*args)
            flat, _ = _loss(out, np.random.default_rng(0))
            total = sum((o * w).sum() for o, w in zip(flat, weights) if o.dtype.is_floating_point)
            if opt_g is not None and total.requires_grad:
                total.backward()
            return (total, *flat)

    pair_state = any(isinstance(e, tuple) for e in batches[0][1])
    graph = Step()
    for step, (inputs, extra) in enumerate(batches):
        args = list(inputs) + list(extra)
        out = eager(*args)
        flat, weights = _loss(out, w_rng)
        weights = [flow.tensor(w) for w in weights]
        total = sum((o * w).sum() for o, w in zip(flat, weights) if o.dtype.is_floating_point)
        if opt_e is not None:
            opt_e.zero_grad()
            if total.requires_grad:
                total.backward()
            opt_e.step()
        n_weights[:] = [len(weights)]
        flat_args = []
        for a in args:
            flat_args.extend(a if isinstance(a, tuple) else [a])
        try:
            got = graph(*weights, *[a.detach() for a in flat_args])
        except Exception as e:
            if any(m in str(e) for m in REFUSALS):
                return None  # a limit of the compiled plan, refused clearly
            return f"step {step}: nn.Graph raised {type(e).__name__}: {e}"
        want = (total, *flat)
        for i, (a, b) in enumerate(zip(got, want)):
            a, b = a.detach().numpy(), b.detach().numpy()
            if not mf._close(a, b):
                return f"step {step}: output {i} differs: graph {a!r}, eager {b!r}"
        for (n, p), (_, q) in zip(mf_state(compiled), mf_state(eager)):
            if not mf._close(p, q):
                return f"step {step}: {n} differs after the step: graph {p!r}, eager {q!r}"
    return None


def mf_state(layer):
    return [(k, v.detach().numpy()) for k, v in layer.named_parameters()] + \
        [(k, np.asarray(v.numpy(), float)) for k, v in layer.named_buffers()]


def main():
    fuzz_common.main(__doc__, mf.generate, check, seeds="0:300")


if __name__ == "__main__":
    main()
