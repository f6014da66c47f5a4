"""inference_mode against torch's: which tensors are inference tensors, what autograd refuses."""
import pytest
import torch

import flowgrad as flow


def _facts(m):
    """The observable behaviour of inference tensors, as a list to compare across modules."""
    out = []
    w = m.ones(2, requires_grad=True)
    normal = m.ones(2)
    with m.inference_mode():
        a = m.ones(2)                 # factory
        b = w * 2                     # op on a tensor that requires grad
        v = normal[0]                 # view of a normal tensor: stays normal
        normal.add_(1)                # in-place on a normal tensor is fine
        a.add_(1)                     # and on an inference tensor, inside
        out += [m.is_inference_mode_enabled(), m.is_grad_enabled(), a.is_inference(),
                b.is_inference(), b.requires_grad, v.is_inference(), a[0].is_inference()]
        with m.inference_mode(False):
            c = w * 2
            out += [m.is_inference_mode_enabled(), c.requires_grad, c.is_inference()]
    out += [m.is_inference_mode_enabled(), (a + 1).is_inference(), a[0].is_inference(),
            normal.is_inference()]
    for action in (lambda: (a * w).sum().backward(),   # a saved for backward
                   lambda: a.add_(1),                  # in-place outside
                   lambda: a.requires_grad_(),
                   lambda: a[0].add_(1)):
        try:
            action()
            out.append("ok")
        except RuntimeError as e:
            out.append(str(e).split(" ")[0:3])
    out.append((a + w).requires_grad)  # used in autograd without being saved: allowed
    return out


def test_behaviour_matches_torch():
    assert _facts(flow) == _facts(torch)


def test_decorator_threads_and_model_forward():
    model = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.ReLU(), flow.nn.Linear(4, 2))
    x = flow.randn(5, 3)

    @flow.inference_mode()
    def predict(t):
        return model(t)

    y = predict(x)
    assert y.is_inference() and not y.requires_grad and not flow.is_inference_mode_enabled()
    assert flow.equal(y, model(x).detach())
    z = model(x)  # after the block, training works again
    z.sum().backward()
    assert model[0].weight.grad is not None
    with pytest.raises(RuntimeError, match="cannot be saved for backward"):
        (model(x) * y).sum()  # y saved by mul


def test_views_of_inference_tensors_skip_view_tracking():
    """What makes inference_mode cheaper than no_grad (benchmarks/bench_inference.py: a chain
    of views 0.77x, a transformer block 0.97x): views of inference tensors carry no ViewInfo
    and no version counter of their own; under no_grad the same views are tracked."""
    from flowgrad.autograd.inference import INFERENCE_COUNTER

    base = flow.randn(4, 6)
    with flow.no_grad():
        tracked = (base * 1.0).t().unsqueeze(0)
    with flow.inference_mode():
        result = base * 1.0
        untracked = result.t().unsqueeze(0)
        normal_view = base.t()  # a view of a normal tensor stays a tracked normal view
    assert tracked._view is not None and tracked._counter is not None
    assert untracked._view is None and untracked._counter is INFERENCE_COUNTER
    assert normal_view._view is not None and not normal_view.is_inference()
    assert normal_view._counter is base._counter


@pytest.mark.parametrize("m", [flow, torch], ids=["flowgrad", "torch"])
def test_views_of_an_inference_tensor_made_outside_are_not_tracked(m):
    # program_fuzz seed 11409578: a view of an inference tensor made outside inference_mode
    # (iteration, select, split, t) was a tracked view, so detach_() on it raised; torch
    # tracks none: it is no view, and detach_() works
    with m.inference_mode():
        a = m.ones(2, 3)
    for v in (list(a)[1], a.unbind(0)[1], a[1], a.split(1)[1], a.t()):
        assert not v._is_view() and v.is_inference()
        v.detach_()
