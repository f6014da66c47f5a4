"""torch's autograd.Function database run through flowgrad: the same custom Functions, written
once against torch, re-bound to flowgrad, called on the same samples.

`torch.testing._internal.autograd_function_db` holds 14 custom Functions (NumPy kernels inside
forward, setup_context, save_for_backward/save_for_forward, mark_dirty,
mark_non_differentiable, once_differentiable, jvp, vmap and generate_vmap_rule) written as
OpInfos. Here each Function class is rebuilt on flowgrad's `autograd.Function` with every
method's `torch` (and the module's other names, the other Functions included) bound to
flowgrad, and each sample is compared: outputs and the gradients of a fixed cotangent
(`opinfo_vs_torch.run_sample`), the gradient of that gradient (create_graph through the
Function's own backward), forward-mode derivatives (`func.jvp`), and `func.vmap` over a batch
of inputs.

Run as a script for a report: .venv/bin/python -W ignore tests/autograd_function_db_vs_torch.py
"""
from __future__ import annotations

import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opinfo_vs_torch import (  # noqa: E402, I001
    Converter, compare, report, run_sample, to_numpy, torch_test_internals)

import flowgrad as flow  # noqa: E402


def function_db():
    """(torch's OpInfo list of autograd.Functions, its module)."""
    with torch_test_internals():
        from torch.testing._internal import autograd_function_db as module
    return module.autograd_function_db, module


def _rebind(fn, scope):
    inner = getattr(fn, "__wrapped__", None)
    if inner is not None and fn.__code__.co_filename.endswith(  # torch's once_differentiable
            os.path.join("autograd", "function.py")):
        return flow.autograd.function.once_differentiable(_rebind(inner, scope))
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def flow_namespace(module):
    """The database module's names with torch -> flowgrad and each Function class rebuilt on
    flowgrad's autograd.Function (its methods see this namespace)."""
    scope = dict(vars(module), torch=flow)
    for name, value in vars(module).items():
        if isinstance(value, type) and issubclass(value, torch.autograd.Function) and \
                value.__module__ == module.__name__:
            body = {}
            for key, member in vars(value).items():
                if isinstance(member, staticmethod):
                    body[key] = staticmethod(_rebind(member.__func__, scope))
                elif isinstance(member, classmethod):
                    body[key] = classmethod(_rebind(member.__func__, scope))
                elif isinstance(member, types.FunctionType):
                    body[key] = _rebind(member, scope)
                elif not key.startswith("__"):  # (class attributes: generate_vmap_rule, ...)
                    body[key] = member
            scope[name] = type(name, (flow.autograd.Function,), body)
    for name, value in vars(module).items():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            scope[name] = _rebind(value, scope)
    return scope


def flow_op(info, scope):
    """The flowgrad callable for an OpInfo of the database."""
    op = info.op
    if isinstance(op, types.MethodType):  # Function.apply of a class
        return getattr(scope[op.__self__.__name__], op.__name__)
    return _rebind(op, scope)


def _second_order(info, fn, sample):
    """Gradient of sum(grad * fixed) wrt the input through the Functions' own backward."""
    convert = Converter()
    f_input = convert(sample.input)
    f_args, f_kwargs = convert(list(sample.args)), convert(dict(sample.kwargs))
    results = []
    for m, call, x, args, kwargs in ((torch, info.op, sample.input, sample.args, sample.kwargs),
                                     (flow, fn, f_input, f_args, f_kwargs)):
        if not (isinstance(x, m.Tensor) and x.requires_grad):
            return None
        out = call(x, *args, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        if not out.requires_grad:
            return None
        try:
            (g,) = m.autograd.grad(out.sum(), [x], create_graph=True)
            if not g.requires_grad:
                results.append(("no graph", None))
                continue
            (gg,) = m.autograd.grad((g * g).sum(), [x], allow_unused=True)
            results.append(("ok", gg))
        except Exception as error:  # noqa: BLE001 - compared below
            results.append(("raise", type(error).__name__))
    (t_kind, t_val), (f_kind, f_val) = results
    if t_kind != f_kind:
        return f"second order: torch {t_kind} {t_val!r:.80}, flowgrad {f_kind} {f_val!r:.120}"
    if t_kind == "ok":
        t_val = torch.zeros_like(sample.input) if t_val is None else t_val
        f_val = flow.zeros_like(f_input) if f_val is None else f_val
        return compare(to_numpy(t_val), to_numpy(f_val), "second order grad")
    return None


def _jvp(info, fn, sample):
    """func.jvp with a fixed tangent for the sample's input (other arguments held)."""
    if not isinstance(sample.input, torch.Tensor) or not sample.input.dtype.is_floating_point:
        return None
    tangent = torch.randn(sample.input.shape, dtype=sample.input.dtype,
                          generator=torch.Generator().manual_seed(1))
    convert = Converter()
    f_args, f_kwargs = convert(list(sample.args)), convert(dict(sample.kwargs))
    return _both("jvp", lambda: torch.func.jvp(
        lambda v: info.op(v, *sample.args, **sample.kwargs), (sample.input.detach(),),
        (tangent,)), lambda: flow.func.jvp(
        lambda v: fn(v, *f_args, **f_kwargs), (Converter().tensor(sample.input.detach()),),
        (Converter().tensor(tangent),)))


def _both(what, in_torch, in_flowgrad):
    """Compare two calls: the same raise/no-raise, then the same results."""
    outcomes = []
    for call in (in_torch, in_flowgrad):
        try:
            outcomes.append(call())
        except Exception as error:  # noqa: BLE001 - compared below
            outcomes.append(error)
    t_out, f_out = outcomes
    if isinstance(t_out, Exception) or isinstance(f_out, Exception):
        if isinstance(t_out, Exception) != isinstance(f_out, Exception):
            return f"{what} raise: torch {t_out!r:.120}, flowgrad {f_out!r:.200}"
        return f"skip: {what} raises in both: {t_out!r:.80}"
    return compare(to_numpy(t_out), to_numpy(f_out), what)


def _vmap(info, fn, sample):
    """func.vmap over a batch of 3 copies of the input (scaled), other arguments held."""
    if not isinstance(sample.input, torch.Tensor) or not sample.input.dtype.is_floating_point:
        return None
    batch = torch.stack([sample.input.detach() * (k + 1) for k in range(3)])
    convert = Converter()
    f_args, f_kwargs = convert(list(sample.args)), convert(dict(sample.kwargs))
    return _both("vmap", lambda: torch.func.vmap(
        lambda v: info.op(v, *sample.args, **sample.kwargs))(batch), lambda: flow.func.vmap(
        lambda v: fn(v, *f_args, **f_kwargs))(Converter().tensor(batch)))


def probe(info, scope):
    """Findings (dtype, sample, message) for one Function of the database."""
    fn = flow_op(info, scope)
    findings = []
    for dtype in (torch.float64, torch.float32):
        for sample in info.sample_inputs("cpu", dtype, requires_grad=True):
            where = f"{tuple(sample.input.shape)} args={len(sample.args)}"
            for check in (lambda: run_sample(info, fn, sample),
                          lambda: _second_order(info, fn, sample),
                          lambda: _jvp(info, fn, sample), lambda: _vmap(info, fn, sample)):
                try:
                    message = check()
                except Exception as error:  # noqa: BLE001 - the probe's own failure
                    message = f"probe raised {error!r:.200}"
                if message:
                    findings.append((str(dtype).split(".")[1], where, message))
    return findings


def main(names):
    db, module = function_db()
    scope = flow_namespace(module)
    report(db, lambda info: probe(info, scope),
           lambda k, info: not names or info.name in names, "Functions")


if __name__ == "__main__":
    main(sys.argv[1:])
