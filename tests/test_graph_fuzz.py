"""Random training steps compiled by nn.Graph must train as the same steps run eagerly: see
tests/graph_fuzz.py for the generator and the check. A failure prints the step's code.

The three cases below are the families the fuzzer found (each fixed in the compiler), kept as
direct tests: a result that shares storage with state, or with another result, exactly where
the eager step's does.
"""
from __future__ import annotations

import fuzz_common
import graph_fuzz as gf
import numpy as np
import pytest

import flowgrad as flow

pytestmark = pytest.mark.usefixtures("keep_global_random_streams")


FAST_SEEDS = range(300)
SLOW_SEEDS = range(300, 5000)


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_compiled_step_matches_eager(seed):
    verdict = gf.check(seed)
    assert verdict is None, f"{verdict}\nstep:\n{gf.source(gf.generate(seed))}"


@pytest.mark.slow
def test_many_compiled_steps_match_eager():
    fuzz_common.assert_seeds_agree(gf.check, SLOW_SEEDS)


def test_generation_is_deterministic():
    assert gf.generate(77).lines == gf.generate(77).lines


class _Step(flow.nn.Graph):
    def __init__(self, fn, module=None, optimizer=None):
        super().__init__()
        if module is not None:
            self.module = module
        if optimizer is not None:
            self.add_optimizer(optimizer)
        self.fn = fn

    def build(self, *args):
        return self.fn(*args)


def test_a_view_of_an_identity_on_a_parameter_is_not_the_parameter():
    # w / 1.0 is a new tensor eagerly; simplified to w, its expand would show the update
    holder = flow.nn.Module()
    holder.w = flow.nn.Parameter(flow.tensor([1.0, 2.0]))
    opt = flow.optim.SGD([holder.w], lr=0.5, momentum=0.9)

    def step():
        seen = (holder.w / 1.0).expand(2, 2)
        (holder.w * holder.w).sum().backward()
        return seen

    graph = _Step(step, holder, opt)
    for _ in range(3):
        before = holder.w.detach().numpy().copy()
        np.testing.assert_array_equal(graph().numpy(), np.broadcast_to(before, (2, 2)))


def test_a_reshape_chain_that_copied_eagerly_owns_its_storage():
    c = flow.tensor(np.arange(6.0).reshape(2, 3))
    graph = _Step(lambda x: (c.t() + x, c.t().reshape(-1).reshape(3, 2)))
    for _ in range(2):  # the traced first call and the compiled plan
        _, chained = graph(flow.zeros(3, 2))
        assert not np.shares_memory(chained.numpy(), c.numpy())


def test_a_tensor_written_in_place_and_its_view_share_storage_as_eagerly():
    graph = _Step(lambda x: (lambda t: (t, t.expand(2, 3)))(x.clone().clamp_(-1.0, 1.0)))
    for _ in range(2):
        t, view = graph(flow.tensor([0.5, 2.0, -3.0]))
        assert np.shares_memory(t.numpy(), view.numpy())
        t.mul_(2.0)
        np.testing.assert_array_equal(view.numpy()[1], t.numpy())


def _decaying_step(module, x):
    """A step that writes its parameter in place (twice, under no_grad) between two reads."""
    y = (module.w * x).sum()
    with flow.no_grad():
        module.w.mul_(0.5)
        module.w.add_(1.0)
    return y + (module.w * x * x).sum(), module.w.expand(2, 2)


def test_a_parameter_written_inside_build_gets_its_gradient_and_its_update():
    # before: the reads after the write sent their gradient nowhere, the optimizer skipped
    # the parameter, and the second write was lost; the returned view missed the update
    def make():
        module = flow.nn.Module()
        module.w = flow.nn.Parameter(flow.tensor([1.0, 2.0]))
        return module, flow.optim.SGD(module.parameters(), lr=0.1, momentum=0.5)

    (eager, opt_e), (compiled, opt_g) = make(), make()

    def step(x):
        loss, view = _decaying_step(compiled, x)
        loss.backward()
        return loss, view

    graph = _Step(step, compiled, opt_g)
    for call in range(3):
        x = flow.tensor([1.0, 3.0 + call])
        opt_e.zero_grad()
        loss_e, view_e = _decaying_step(eager, x)
        loss_e.backward()
        opt_e.step()
        loss_g, view_g = graph(x)
        assert loss_g.item() == loss_e.item()
        np.testing.assert_array_equal(compiled.w.detach().numpy(), eager.w.detach().numpy())
        np.testing.assert_array_equal(view_g.numpy(), view_e.detach().numpy())  # the update


def test_equal_subexpressions_under_two_results_stay_two_tensors():
    w = flow.tensor([[1.0, 2.0], [3.0, 4.0]])
    graph = _Step(lambda x: ((w + x).exp().t(), (w + x).exp()))
    for _ in range(2):
        viewed, plain = graph(flow.zeros(2, 2))
        assert not np.shares_memory(viewed.numpy(), plain.numpy())


def test_autograd_grad_reaches_a_parameter_read_before_its_in_place_write():
    holder = flow.nn.Module()
    holder.w = flow.nn.Parameter(flow.tensor([0.5, -1.0]))

    def step():
        before = holder.w / 1.0
        with flow.no_grad():
            holder.w.mul_(0.5)
        (g,) = flow.autograd.grad((before * before).sum() + holder.w.sum(), holder.w)
        return g

    want = [2 * 0.5 + 1, 2 * -1.0 + 1]  # the leaf's gradient from both reads
    assert _Step(step, holder)().tolist() == want


def test_an_in_place_write_of_another_dtype_keeps_the_targets_in_a_plan():
    """Seed 11205141: t6.clone().mul_(t8.sigmoid()) with t6 float32 and t8 float64 came
    back float64 from the plan (the trace recorded the float64 product as the tensor's new
    value, without the cast back the write into float32 storage makes); a half tensor's
    add_ of a float64 one kept float64 values too."""
    b = flow.rand(3, dtype=flow.float64)
    for fn in (lambda a: a.clone().mul_(b.sigmoid()), lambda a: a.clone().addcmul_(b, b),
               lambda a: a.half().clone().add_(b).float()):
        graph, a = flow.nn.Graph.trace(fn), flow.rand(4, 3)
        graph(a)
        got, want = graph(a), fn(a)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
