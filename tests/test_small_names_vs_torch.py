"""torch's smaller names flowgrad gained in session 35, each against torch: process switches,
CPU-only Tensor predicates, map2_, as_subclass, is_set_to, the autograd multithreading flag."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def test_process_switches_as_torch():
    for lib in (torch, flow):
        assert lib.is_warn_always_enabled() is False
        lib.set_warn_always(True)
        assert lib.is_warn_always_enabled() is True
        lib.set_warn_always(False)
        assert lib.set_flush_denormal(False) is True
        assert lib.init_num_threads() is None
        assert lib.get_device_module() is lib.cpu and lib.get_device_module("cpu") is lib.cpu
        assert lib.get_device_module(lib.device("cpu")) is lib.cpu
        lib.set_anomaly_enabled(True)
        assert lib.is_anomaly_enabled()
        lib.set_anomaly_enabled(False)
        assert not lib.is_anomaly_enabled()
    # (NumPy cannot flush denormals: flowgrad says so, torch on x86 can)
    assert flow.set_flush_denormal(True) is False
    assert flow.set_flush_denormal(False) is True


def test_cpu_tensor_predicates_as_torch():
    for lib in (torch, flow):
        x = lib.ones(2, 3)
        assert x.is_pinned() is False and x.is_distributed() is False
        assert x.const_data_ptr() == x.data_ptr()
        with pytest.raises(RuntimeError, match="accelerator"):
            x.pin_memory()
        with pytest.raises(TypeError, match="deleting items"):
            del x[0]
        assert x.is_set_to(x) and not x.is_set_to(x.clone()) and not x[:1].is_set_to(x)
        assert x.t().is_set_to(x.t()) and not x.t().is_set_to(x)


def test_map2_as_torch():
    results = []
    for lib in (torch, flow):
        a, b, c = lib.ones(2, 3), lib.arange(3.0), lib.tensor([[2.0], [3.0]])
        assert a.map2_(b, c, lambda p, q, r: p + q * r) is a
        results.append(a.numpy())
        with pytest.raises(RuntimeError):
            lib.ones(2, requires_grad=True).map2_(lib.ones(2), lib.ones(2), lambda *v: 0.0)
    np.testing.assert_array_equal(*results)


def test_as_subclass_as_torch():
    grads = []
    for lib in (torch, flow):
        class Marked(lib.Tensor):
            pass

        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = (x * 3).as_subclass(Marked)
        assert type(y) is Marked and y.requires_grad
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
        with pytest.raises(TypeError):
            x.as_subclass(int)
    np.testing.assert_array_equal(*grads)


def test_multithreading_flag_as_torch():
    for lib in (torch, flow):
        assert lib.autograd.is_multithreading_enabled() is True
        with lib.autograd.set_multithreading_enabled(False):
            assert lib.autograd.is_multithreading_enabled() is False
        assert lib.autograd.is_multithreading_enabled() is True

        @lib.autograd.set_multithreading_enabled(False)
        def inside():
            return lib.autograd.is_multithreading_enabled()
        assert inside() is False
        lib.autograd.set_multithreading_enabled(True)  # (torch's decorator leaves it off)


def _reference_while_loop(cond_fn, body_fn, carried_inputs):
    """torch.while_loop's documented eager meaning (torch's own call traces the body with
    dynamo, seconds per call and process-wide state: not run here)."""
    values = carried_inputs
    while cond_fn(*values):
        values = body_fn(*values)
    return values


def test_while_loop_as_torch():
    results = []
    for lib, loop in ((torch, _reference_while_loop), (flow, flow.while_loop)):
        x = lib.tensor([1.0, -2.0], requires_grad=True)
        i, y = loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * v.tanh() + 1),
                    (lib.tensor(0), x))
        y.sum().backward()
        results.append((int(i), y.detach().numpy(), x.grad.numpy()))
    with pytest.raises(RuntimeError, match="returned 2 values for 1"):
        flow.while_loop(lambda v: v.sum() < 5, lambda v: (v + 1, v), (flow.zeros(2),))
    assert results[0][0] == results[1][0] == 4
    for want, got in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(got, want, rtol=1e-6)
