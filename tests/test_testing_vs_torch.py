"""flowgrad.testing.assert_close against torch.testing.assert_close: pass/fail, the kind of
failure and its first line; and flowgrad.random.fork_rng, optim's _LRScheduler."""
from __future__ import annotations

import pytest
import torch

import flowgrad as flow

PAIRS = {
    "float within": ("m.tensor([1., 2.])", "m.tensor([1., 2. + 1e-6])", {}),
    "float beyond": ("m.tensor([1., 2.])", "m.tensor([1., 2. + 1e-4])", {}),
    "dtypes": ("m.tensor([1., 2.])", "m.tensor([1., 2.], dtype=m.float64)", {}),
    "dtypes unchecked": ("m.tensor([1., 2.])", "m.tensor([1., 2.], dtype=m.float64)",
                         {"check_dtype": False}),
    "ints differ": ("m.tensor([1, 2])", "m.tensor([1, 3])", {}),
    "ints equal": ("m.tensor([1, 2])", "m.tensor([1, 2])", {}),
    "nan": ("m.tensor([float('nan')])", "m.tensor([float('nan')])", {}),
    "nan equal": ("m.tensor([float('nan')])", "m.tensor([float('nan')])", {"equal_nan": True}),
    "given tolerances": ("m.tensor([1., 2.])", "m.tensor([1.1, 2.])", {"rtol": 0.2, "atol": 0.0}),
    "rtol alone": ("m.tensor([1., 2.])", "m.tensor([1.1, 2.])", {"rtol": 0.2}),
    "half": ("m.tensor([1., 2.]).half()", "m.tensor([1.0005, 2.]).half()", {}),
    "bools": ("m.tensor([True])", "m.tensor([False])", {}),
    "floats": ("1.0", "1.0 + 1e-9", {}),
    "floats beyond": ("1.0", "1.1", {}),
    "int and float": ("1", "1.0", {}),
    "lists": ("[m.ones(2), 3]", "[m.ones(2), 3]", {}),
    "lists shapes": ("[m.ones(2)]", "[m.ones(3)]", {}),
    "dicts": ("{'a': m.ones(2)}", "{'a': m.ones(2) * 1.1}", {}),
    "dict keys": ("{'a': m.ones(2)}", "{'b': m.ones(2)}", {}),
    "tensor and number": ("m.ones(2)", "1.0", {}),
    "complex": ("m.tensor([1+1j])", "m.tensor([1+1.0000001j])", {}),
    "inf": ("m.tensor(float('inf'))", "m.tensor(float('inf'))", {}),
    "atol": ("m.tensor([1e-7])", "m.tensor([0.])", {}),
    "beyond atol": ("m.tensor([1e-4])", "m.tensor([0.])", {}),
}


def _verdict(m, name):
    a, e, kw = PAIRS[name]
    try:
        m.testing.assert_close(eval(a), eval(e), **kw)
        return "ok"
    except AssertionError as error:
        first = str(error).split("\n")[0]
        return "AssertionError", first.replace("torch.", "").replace("flowgrad.", "")
    except (TypeError, ValueError) as error:
        return type(error).__name__


@pytest.mark.parametrize("name", list(PAIRS))
def test_assert_close_as_torch(name):
    assert _verdict(flow, name) == _verdict(torch, name)


def test_fork_rng_restores_the_stream():
    flow.manual_seed(0)
    with flow.random.fork_rng():
        flow.rand(3)
    x = flow.rand(2)
    flow.manual_seed(0)
    assert flow.equal(x, flow.rand(2))


@pytest.mark.parametrize("m", [torch, flow], ids=["torch", "flowgrad"])
def test_lr_scheduler_subclass_of_the_old_name(m):
    class Halving(m.optim.lr_scheduler._LRScheduler):
        def get_lr(self):
            return [g["lr"] * 0.5 for g in self.optimizer.param_groups]

    p = m.nn.Parameter(m.ones(1))
    opt = m.optim.SGD([p], lr=1.0)
    sched = Halving(opt)
    for _ in range(2):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.125
