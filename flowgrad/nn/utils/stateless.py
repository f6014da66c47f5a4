"""torch.nn.utils.stateless: call a module with some of its parameters and buffers swapped
for other tensors, as torch's `functional_call` (torch.func's is the same function).

Tied tensors (one Parameter under several names) all take the value given for any of their
names (`tie_weights=True`); a parametrized tensor is assigned through its parametrization's
right_inverse, as torch does; everything is restored afterwards, even when the call raises.

>>> import flowgrad as flow
>>> from flowgrad.nn.utils.stateless import functional_call
>>> m = flow.nn.Linear(2, 1, bias=False)
>>> import warnings
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     functional_call(m, {"weight": flow.ones(1, 2)}, (flow.tensor([[1.0, 2.0]]),))
tensor([[3.]])
"""
from __future__ import annotations

import contextlib

from ..._warn import warn
from ...tensor import Tensor

__all__ = ["functional_call"]

_MISSING = object()


def _named_tensors(module):
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def _untie(module, values):
    """`values` with every name tied to a given one (same tensor object in the module)
    added, holding the given value; several different values for one tied group raise."""
    groups = {}
    for name, t in _named_tensors(module).items():
        groups.setdefault(id(t), set()).add(name)
    tied = {name: names for names in groups.values() if len(names) > 1 for name in names}
    given = [name for name in values if name in tied]
    for name in given:
        names = tied[name]
        if len({id(values[n]) for n in names if n in values}) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, "
                             f"which are tied. Consider using tie_weights=False")
    untied = dict(values)
    for name in given:
        for other in tied[name]:
            untied[other] = values[name]
    return untied


def _swap(module, name, value):
    """Put `value` (or _MISSING: remove) at the dotted `name`; returns what was there."""
    prefix, _, attr = name.rpartition(".")
    sub = module.get_submodule(prefix)
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise TypeError(f"functional_call: the value for {name!r} is a "
                        f"{type(value).__name__}, not a Tensor")
    for store in (sub._parameters, sub._buffers):
        if attr in store:
            old = store[attr]
            if value is _MISSING:
                del store[attr]
            else:
                store[attr] = value
            return old
    old = getattr(sub, attr) if hasattr(sub, attr) else _MISSING
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise TypeError(f"functional_call: attribute {name!r} is a {type(old).__name__}, "
                        f"not a Tensor, and cannot be swapped")
    if value is not _MISSING:
        setattr(sub, attr, value)  # a parametrized name goes through right_inverse
    elif hasattr(sub, attr):
        delattr(sub, attr)
    return old


@contextlib.contextmanager
def _reparametrize_module(module, parameters_and_buffers, tie_weights=False, strict=False):
    values = _untie(module, parameters_and_buffers) if tie_weights else parameters_and_buffers
    if strict:
        valid = set(_named_tensors(module))
        missing, unexpected = sorted(valid - set(values)), sorted(set(values) - valid)
        msgs = []
        if unexpected:
            msgs.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            msgs.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if msgs:
            raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(
                module._get_name(), "\n\t".join(msgs)))
    originals = {}
    try:
        for name, value in values.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        current = {name: _swap(module, name, old) for name, old in originals.items()}
        # as torch: the caller's dict sees tensors the call replaced (not ones it mutated)
        parameters_and_buffers.update({k: current[k] for k in parameters_and_buffers
                                       if k in current})


def _functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                     tie_weights=True, strict=False):
    """functional_call without the deprecation warning (torch.func's implementation)."""
    if isinstance(parameters_and_buffers, (tuple, list)):
        merged = {}
        for d in parameters_and_buffers:
            repeated = sorted(set(merged) & set(d))
            if repeated:
                raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                                 f"functional call is ambiguous")
            merged.update(d)
        parameters_and_buffers = merged
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _reparametrize_module(module, parameters_and_buffers, tie_weights=tie_weights,
                               strict=strict):
        return module(*args, **(kwargs or {}))


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """Call `module(*args, **kwargs)` with the tensors of `parameters_and_buffers` (dotted
    names to tensors) in place of the module's own, then restore them (deprecated: use
    flowgrad.func.functional_call)."""
    warn("This API is deprecated as of PyTorch 2.0 and will be removed in a future "
         "version of PyTorch. Please use torch.func.functional_call instead which is "
         "a drop-in replacement.", FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
