"""Random training programs (a model, an optimizer with parameter groups, a scheduler, a loss,
gradient accumulation, clipping, state_dict round trips, eval/no_grad steps, lr edits) run in
torch and in flowgrad must record the same losses, learning rates, parameters, grads, buffers
and optimizer/scheduler state_dicts, and raise at the same point: see tests/training_fuzz.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import training_fuzz as tf

import flowgrad as flow


def _verdicts(seeds):
    return {s: v for s in seeds if (v := tf.check(s)) is not None}


@pytest.mark.parametrize("chunk", range(4))
def test_training_programs_match_torch(chunk):
    bad = {s: v for s, v in _verdicts(range(chunk * 22, chunk * 22 + 22)).items()
           if not tf.known(v, tf.generate(s))}
    assert not bad, "\n".join(f"seed {s}: {v[:300]}" for s, v in bad.items())


@pytest.mark.slow
def test_many_training_programs_match_torch():
    bad = {s: v for s, v in _verdicts(range(88, 3000)).items() if not tf.known(v, tf.generate(s))}
    assert not bad, "\n".join(f"seed {s}: {v[:300]}" for s, v in bad.items())


@pytest.mark.parametrize("seed", sorted(tf.KNOWN_DIFFERENCES))
def test_known_differences_still_differ_as_listed(seed):
    text, _ = tf.KNOWN_DIFFERENCES[seed]
    verdict = tf.check(seed)
    assert verdict is not None and text in verdict, verdict


@pytest.mark.parametrize("t_mult", [1, 2])
@pytest.mark.parametrize("added_at", [0, 2])
def test_warm_restarts_refuses_a_param_group_added_after_it_as_torch(t_mult, added_at):
    # CosineAnnealingWarmRestarts.step set the lrs through a plain zip: with a group added by
    # add_param_group after the scheduler, flowgrad ran on (the new group kept its lr) where
    # torch's strict zip raises ValueError at the next step
    out = []
    for m in (torch, flow):
        a = m.nn.Parameter(m.ones(2, dtype=m.float64))
        b = m.nn.Parameter(m.ones(2, dtype=m.float64))
        opt = m.optim.SGD([a], lr=0.05, momentum=0.9)
        sched = m.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=t_mult)
        lrs, raised = [], None
        for i in range(4):
            if i == added_at:
                opt.add_param_group({"params": [b], "lr": 0.2})
            a.grad, b.grad = m.ones(2, dtype=m.float64), m.ones(2, dtype=m.float64)
            opt.step()
            try:
                sched.step()
            except ValueError:
                raised = i
                break
            lrs.append([g["lr"] for g in opt.param_groups])
        out.append((raised, lrs, a.detach().numpy().tolist()))
    assert out[1][:2] == out[0][:2]
    np.testing.assert_allclose(out[1][2], out[0][2], rtol=1e-12)
