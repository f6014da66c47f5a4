"""Random optimizer programs (every optimizer and flag, foreach on and off, parameter groups
with overrides, None gradients, lr edits, every scheduler, a state_dict reload mid-run) in torch
and in flowgrad must give the same parameters, state and learning rates after every step: see
tests/optim_fuzz.py."""
from __future__ import annotations

import fuzz_common
import numpy as np
import optim_fuzz as of
import pytest
import torch

import flowgrad as flow


@pytest.mark.parametrize("seed", range(200))
def test_optimizer_program_matches_torch(seed):
    verdict = of.check(seed)
    assert verdict is None, f"{of.Program(seed).describe()}\n{verdict}"


@pytest.mark.slow
def test_many_optimizer_programs_match_torch():
    fuzz_common.assert_seeds_agree(of.check, range(200, 5000))


@pytest.mark.parametrize("shape", [(3,), (2, 2), (0,)])
def test_asgd_reloads_its_own_state_and_rounds_eta_and_mu_as_torch(shape):
    # ASGD keeps eta and mu as 0-d tensors: load_state_dict refused them as "saved for other
    # parameters"; after a reload into float64 torch still writes float32-rounded values
    out = []
    for m in (torch, flow):
        p = m.nn.Parameter(m.ones(shape, dtype=m.float64))
        opt = m.optim.ASGD([p], lr=0.1, t0=1.0)
        for step in range(5):
            p.grad = m.full(shape, 0.5, dtype=m.float64)
            opt.step()
            if step == 1:
                again = m.optim.ASGD([p], lr=0.1, t0=1.0)
                again.load_state_dict(opt.state_dict())
                opt = again
        state = opt.state[p]
        out.append([float(state["eta"]), float(state["mu"]), p.detach().numpy().copy()])
    (eta_t, mu_t, p_t), (eta_f, mu_f, p_f) = out
    assert (eta_f, mu_f) == (eta_t, mu_t)
    np.testing.assert_array_equal(p_f, p_t)
