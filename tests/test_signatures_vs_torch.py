"""Every keyword a torch script may pass to a torch.* function or Tensor method written in
Python (torch.nn.functional, linalg, special, fft, autograd, nn.init, nn.utils included), or to
the constructor of a torch.nn module, optimizer, LR scheduler or torch.utils.data class that
flowgrad has, flowgrad's takes too (by name): a script written for torch does not stop on a
TypeError for `bias=` or `label_smoothing=`."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import flowgrad as flow


def _named(function):
    """The parameter names of `function` a caller can pass by keyword, or None when it takes
    any keyword (**kwargs) or has no readable signature."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        return None
    names = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return names | {"out"} if getattr(function, "_takes_out", False) else names


def _pairs():
    for label, theirs_ns, ours_ns in (("torch", torch, flow), ("Tensor", torch.Tensor, flow.Tensor),
                                      ("linalg", torch.linalg, flow.linalg),
                                      ("special", torch.special, flow.special),
                                      ("fft", torch.fft, flow.fft),
                                      ("autograd", torch.autograd, flow.autograd),
                                      ("nn.init", torch.nn.init, flow.nn.init),
                                      ("nn.utils", torch.nn.utils, flow.nn.utils)):
        for name in dir(theirs_ns):
            theirs, ours = getattr(theirs_ns, name, None), getattr(ours_ns, name, None)
            if not name.startswith("_") and ours is not None and inspect.isfunction(theirs):
                yield f"{label}.{name}", theirs, ours
    for name in dir(torch.nn.functional):
        ours = getattr(flow.nn.functional, name, None)
        theirs = getattr(torch.nn.functional, name)
        if not name.startswith("_") and ours is not None and inspect.isfunction(theirs):
            yield f"F.{name}", theirs, ours
    for space in ("nn", "optim", "optim.lr_scheduler", "utils.data"):
        theirs_ns, ours_ns = torch, flow
        for part in space.split("."):
            theirs_ns, ours_ns = getattr(theirs_ns, part), getattr(ours_ns, part)
        for name in dir(theirs_ns):
            theirs, ours = getattr(theirs_ns, name), getattr(ours_ns, name, None)
            if isinstance(theirs, type) and isinstance(ours, type) and not name.startswith("_"):
                yield f"{space}.{name}", theirs.__init__, ours.__init__


def test_flowgrad_takes_every_keyword_torch_takes():
    missing = []
    for name, theirs, ours in _pairs():
        theirs_names, ours_names = _named(theirs), _named(ours)
        if theirs_names is None or ours_names is None:
            continue
        gap = sorted(theirs_names - ours_names - {"self"})
        if gap:
            missing.append(f"{name}: {gap}")
    assert not missing, "keywords torch takes and flowgrad does not:\n" + "\n".join(missing)


@pytest.mark.parametrize("module", [torch, flow])
def test_hardtanh_deprecated_keywords(module):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = module.nn.Hardtanh(min_value=-2.0, max_value=0.5)
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert layer(module.tensor([-3.0, 0.0, 3.0])).tolist() == [-2.0, 0.0, 0.5]
    assert [n for n, _ in module.nn.SyncBatchNorm(3, bias=False).named_parameters()] == ["weight"]


@pytest.mark.parametrize("module", [torch, flow])
def test_autograd_deprecated_keywords(module):
    x = module.tensor([1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.autograd.backward((x * x).sum(), grad_variables=module.tensor(2.0))
        g, = module.autograd.grad((x * x).sum(), x, only_inputs=False)
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert x.grad.tolist() == [4.0, 8.0] and g.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="grad_variables"):
        module.autograd.backward((x * x).sum(), x, grad_variables=x)


@pytest.mark.parametrize("module", [torch, flow])
def test_accelerator_error_classes_and_distributed_flag(module):
    assert issubclass(module.OutOfMemoryError, RuntimeError)
    assert issubclass(module.AcceleratorError, RuntimeError)
    assert module.is_distributed(module.ones(1)) is False
    try:
        raise module.OutOfMemoryError("x")
    except RuntimeError as error:
        assert str(error) == "x"
