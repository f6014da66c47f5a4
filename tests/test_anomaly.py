"""Anomaly mode against torch's: the node named, the forward line shown, the mode's state."""
import warnings

import pytest
import torch

import flowgrad as flow


def _nan_backward(m):
    """x / x at 0: the backward of div is 0/0 for the divisor (torch: 'returned nan values
    in its 1th output')."""
    x = m.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with m.autograd.detect_anomaly():
            y = x / x  # the line the traceback must show
            with pytest.raises(RuntimeError) as info:
                y.sum().backward()
    return str(info.value), [str(w.message) for w in caught]


def test_nan_names_node_and_forward_line_like_torch():
    ours, our_warnings = _nan_backward(flow)
    theirs, their_warnings = _nan_backward(torch)
    assert "returned nan values in its 1th output" in theirs
    assert ours == "Function 'div_backward' returned nan values in its 1th output."
    assert any("Anomaly Detection has been enabled" in w for w in our_warnings)
    for found in (our_warnings, their_warnings):
        traced = [w for w in found if "Traceback of forward call" in w]
        assert len(traced) == 1 and "y = x / x  # the line the traceback must show" in traced[0]
    assert "flowgrad" not in traced[0].split("caused the error:")[1]  # the user's frames only


def test_inf_passes_as_torch_and_state_restored():
    # torch's anomaly check looks for NaN only: an inf gradient is computed, not refused
    # (flowgrad raised 'returned inf values': autograd_api_fuzz seed 10775324)
    grads = []
    for m in (torch, flow):
        x = m.tensor([0.0, 4.0], requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.set_detect_anomaly(True):
                assert m.is_anomaly_enabled()
                x.sqrt().sum().backward()
        assert not m.is_anomaly_enabled()
        grads.append(x.grad.tolist())
    assert grads[1] == grads[0] == [float("inf"), 0.25]
    x = flow.tensor([0.0, 4.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with flow.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="returned nan values"):
                (x / x).sum().backward()  # (0 / 0 in div's rule: nan)
    assert x.grad is None  # the failed run left nothing behind


def test_check_nan_false_and_mode_off_do_not_raise():
    x = flow.tensor([0.0, 1.0], requires_grad=True)
    with flow.autograd.set_detect_anomaly(True, check_nan=False):
        assert not flow.is_anomaly_check_nan_enabled()
        (x / x).sum().backward()
    (x / x).sum().backward()  # anomaly mode off: torch's plain NaN
    assert torch.isnan(torch.tensor(x.grad.numpy())).any()


def test_error_in_custom_backward_prints_forward_traceback():
    class Bad(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            raise ValueError("broken rule")

    x = flow.ones(2, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with flow.autograd.detect_anomaly():
            y = Bad.apply(x).sum()  # made here
            with pytest.raises(ValueError, match="broken rule"):
                y.backward()
    text = [str(w.message) for w in caught if "Error detected in BadBackward" in str(w.message)]
    assert len(text) == 1 and "y = Bad.apply(x).sum()  # made here" in text[0]


def test_node_without_forward_record_says_so():
    x = flow.tensor([0.0, 1.0], requires_grad=True)
    y = (x / x).sum()  # recorded outside anomaly mode: no traceback kept
    assert "traceback_" not in y.grad_fn.metadata
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with flow.autograd.set_detect_anomaly(True):
            with pytest.raises(RuntimeError, match="nan"):
                y.backward()
    assert any("No forward pass information" in str(w.message) for w in caught)


def test_decorator_form_and_training_step_gives_same_grads():
    model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.Tanh(), flow.nn.Linear(8, 1))
    x = flow.randn(5, 4)

    def step():
        model.zero_grad()
        model(x).pow(2).mean().backward()
        return [p.grad.numpy().copy() for p in model.parameters()]

    plain = step()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checked = flow.autograd.detect_anomaly()(step)()
    for a, b in zip(plain, checked):
        assert (a == b).all()
