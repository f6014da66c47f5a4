"""Random checkpointed programs (torch.utils.checkpoint's checkpoint and checkpoint_sequential,
reentrant or not, every flag, under saved-tensor hooks, differentiated every way) in torch and
in flowgrad must agree: see tests/checkpoint_fuzz.py (its KNOWN table lists the differences
kept, each with its reason). Then one test per difference the fuzz found."""
from __future__ import annotations

import contextlib

import checkpoint_fuzz as cf
import fuzz_common
import numpy as np
import pytest
import torch
import torch.utils.checkpoint  # noqa: F401

import flowgrad as flow
import flowgrad.utils.checkpoint  # noqa: F401


@pytest.mark.parametrize("start", range(0, 400, 40))
def test_checkpoint_programs_match_torch(start):
    fuzz_common.assert_seeds_agree(cf.check, range(start, start + 40))


@pytest.mark.slow
def test_many_checkpoint_programs_match_torch():
    fuzz_common.assert_seeds_agree(cf.check, range(400, 6000))


class _Logged:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def __enter__(self):
        self.log.append(f"enter {self.name}")

    def __exit__(self, *exc):
        self.log.append(f"exit {self.name}")


def _context_fn_run(m, grad=True):
    log = []

    def context_fn():
        log.append("context_fn")
        return _Logged(log, "forward"), _Logged(log, "recompute")
    x = m.tensor([0.5, -1.0], dtype=m.float64, requires_grad=True)
    with contextlib.nullcontext() if grad else m.no_grad():
        y = m.utils.checkpoint.checkpoint(lambda t: t.sin().exp(), x, use_reentrant=False,
                                          context_fn=context_fn)
    if grad:
        y.sum().backward(retain_graph=True)
        y.sum().backward()
    return log


@pytest.mark.parametrize("grad", [True, False])
def test_context_fn_is_called_once_and_its_recompute_context_entered_each_time(grad):
    # flowgrad called context_fn again for each recomputation (and not at all under no_grad);
    # torch calls it once, at forward, and enters the same recompute context every time
    assert _context_fn_run(flow, grad) == _context_fn_run(torch, grad)


def test_debug_with_a_context_fn_raises_value_error_as_torch():
    for m in (torch, flow):
        x = m.ones(2, requires_grad=True)
        with pytest.raises(ValueError, match="debug=True is incompatible with non-default "
                                             "context_fn"):
            m.utils.checkpoint.checkpoint(
                lambda t: t * 2, x, use_reentrant=False, debug=True,
                context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()))


def _write_after_save(m, more):
    x = m.tensor([0.5, 1.0], dtype=m.float64, requires_grad=True)

    def f(t):
        h = (t * 0.3).exp()
        h.add_(1)  # into exp's saved output
        return h.sin() if more else h
    y = m.utils.checkpoint.checkpoint(f, x, use_reentrant=False)
    y.sum().backward()
    return x.grad.numpy()


def test_write_into_a_saved_intermediate_after_the_recomputation_stops_runs_as_torch():
    # the forward's write does not matter (backward reads the recomputed value, which early
    # stop takes before the write): torch runs, flowgrad raised its version error
    np.testing.assert_allclose(_write_after_save(flow, False), _write_after_save(torch, False),
                               rtol=1e-12)
    np.testing.assert_allclose(_write_after_save(flow, False), 0.3 * np.exp([0.15, 0.3]),
                               rtol=1e-12)


def test_write_into_a_value_the_recomputation_saved_raises_where_torch_is_wrong():
    # the recomputation goes on past the write (sin saves after it): torch's backward reads
    # exp's output + 1 for exp's output, a wrong gradient; flowgrad says so
    e = np.exp([0.15, 0.3])
    assert not np.allclose(_write_after_save(torch, True), np.cos(e + 1) * 0.3 * e)
    with pytest.raises(RuntimeError, match="modified by an in-place operation later in the "
                                           "recomputation"):
        _write_after_save(flow, True)


def _hooked_events(m):
    log = []
    x = m.tensor([0.5, -1.0], dtype=m.float64, requires_grad=True)
    with m.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                              lambda t: (log.append("unpack"), t)[1]):
        y = m.utils.checkpoint.checkpoint(
            lambda t: t.sin(), x, use_reentrant=False,
            context_fn=lambda: (_Logged(log, "forward"), _Logged(log, "recompute")))
    y.sum().backward()
    return log


def test_saved_arguments_are_unpacked_before_the_recompute_context_is_entered():
    assert _hooked_events(flow) == _hooked_events(torch)


def test_a_gradient_that_cancels_to_zero_is_measured_at_its_siblings_scale():
    # seed 9002778: bn.bias's double-backward gradient is 0 by cancellation of terms of the
    # other gradients' size (4e6): flowgrad's 1.5e-10 and torch's -1.3e-10 are both roundings
    assert cf._kin_scale(".grad b", np.array([1e-10]), {".grad w": np.array([4e6]),
                                                          ".grad b": np.array([1e-10])}) == 4e6
    assert cf._kin_scale(".grad b", np.array([1e-3]), {".grad w": np.array([4e6])}) == 1.0
    assert cf.check(9002778) is None
