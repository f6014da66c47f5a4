"""torch's OpInfo method, operator and in-place variants run through flowgrad.

opinfo_vs_torch.py checks each OpInfo's function; torch's test_ops also checks the variants
users call as often: `x.add(y)` (method_variant), `x + y` (operator_variant), `x.add_(y)`
(inplace_variant) and `x += y` (inplace_operator_variant). For each OpInfo's samples:

- method and operator variants: run_sample's checks (values, dtype, shape, float64 gradients);
- in-place variants on a clone of the input (a non-leaf, so gradients flow through the in-place
  node): raise/no-raise, the returned object is the input itself, the version counter moved,
  the input's new values and dtype, and the gradients to the original leaf and the operands;
- in-place on a leaf that requires grad: torch refuses, flowgrad must too;
- in-place on a non-contiguous view of a base (input.t() of a transposed copy, or a stride-2
  slice): the base's values and the gradients through the base.

Run as a script for a report: .venv/bin/python tests/opinfo_variants.py [name ...] [--shard=i/n]
(`--first`: each OpInfo's first sample per dtype; `--reference`: torch's reference inputs)
"""
from __future__ import annotations

import functools
import sys
import types
import warnings

import opinfo_vs_torch
import torch
from opinfo_vs_torch import (
    DTYPES,
    RANDOM,
    Converter,
    Unsupported,
    compare,
    compare_grads,
    convert_sample,
    cotangents,
    describe,
    dtype_samples,
    full_name,
    one_thread,
    op_db,
    report,
    run_sample,
    shard_of,
    to_numpy,
)

import flowgrad as flow

KINDS = ("method", "operator", "inplace", "inplace_operator")


def flow_variant(variant):
    """flowgrad's callable for one of torch's variant callables, or None when it has none."""
    if variant is None:
        return None
    if isinstance(variant, functools.partial):  # F.mish with inplace=True
        func = variant.func
        target = flow
        for part in func.__module__.split(".")[1:] + [func.__name__]:
            target = getattr(target, part, None)
            if target is None:
                return None
        return functools.partial(target, *variant.args, **variant.keywords)
    if isinstance(variant, types.FunctionType) and variant.__module__.startswith("torch.testing"):
        return types.FunctionType(variant.__code__, dict(variant.__globals__, torch=flow),
                                  variant.__name__, variant.__defaults__, variant.__closure__)
    if getattr(variant, "__module__", None) in ("_operator", "operator"):
        return variant  # operator.add, operator.iadd: Python's protocol on flowgrad tensors
    name = variant.__name__
    if getattr(flow.Tensor, name, None) is None:
        return None
    return lambda x, *args, **kwargs: getattr(x, name)(*args, **kwargs)


def _call(fn, x, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(x, *args, **kwargs), None
        except Exception as error:  # noqa: BLE001 - any raise is compared with torch's
            return None, error


def _grads(t_out, f_out, pairs):
    """Gradients of t_out / f_out (with the same cotangent) to every leaf pair, compared."""
    if not pairs or not (t_out.requires_grad or f_out.requires_grad):
        return None
    if t_out.requires_grad != f_out.requires_grad:
        return f"requires_grad: torch {t_out.requires_grad}, flowgrad {f_out.requires_grad}"
    if not (t_out.dtype.is_floating_point or t_out.dtype.is_complex):
        return None
    return compare_grads([t_out], [f_out], pairs, cotangents([t_out]))


def _convert(sample):
    convert = Converter()
    return (convert, *convert_sample(sample, convert))


def run_inplace(t_fn, f_fn, sample, check_grad=True, values=True):
    """In-place on a clone of the sample's input; None (same) or a message."""
    if not isinstance(sample.input, torch.Tensor):
        return "skip: the input is not a tensor"
    try:
        convert, f_input, f_args, f_kwargs = _convert(sample)
    except Unsupported as reason:
        return "skip: " + str(reason)
    t_x, f_x = sample.input.clone(), f_input.clone()
    t_version, f_version = t_x._version, f_x._version
    t_r, t_error = _call(t_fn, t_x, sample.args, sample.kwargs)
    f_r, f_error = _call(f_fn, f_x, f_args, f_kwargs)
    if t_error is not None or f_error is not None:
        if (t_error is None) != (f_error is None):
            return f"raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
        return None
    if t_r is t_x and f_r is not f_x:
        return f"identity: flowgrad returns {type(f_r).__name__}, not its input"
    if (t_x._version > t_version) != (f_x._version > f_version):
        return (f"version: torch {t_version} -> {t_x._version}, "
                f"flowgrad {f_version} -> {f_x._version}")
    message = compare(to_numpy(t_x), to_numpy(f_x), "input after", values)
    if message or not check_grad or not values:
        return message
    return _grads(t_x, f_x, convert.pairs)


def run_inplace_leaf(t_fn, f_fn, sample):
    """In-place on a leaf that requires grad: raise/no-raise as torch's."""
    if not isinstance(sample.input, torch.Tensor) or not sample.input.requires_grad:
        return None
    try:
        _, f_input, f_args, f_kwargs = _convert(sample)
    except Unsupported as reason:
        return "skip: " + str(reason)
    t_x = sample.input.detach().clone().requires_grad_()
    f_x = f_input.detach().clone().requires_grad_()
    _, t_error = _call(t_fn, t_x, sample.args, sample.kwargs)
    _, f_error = _call(f_fn, f_x, f_args, f_kwargs)
    if (t_error is None) != (f_error is None):
        return f"leaf raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
    return None


def _view_of(base, ndim, module):
    return base.transpose(-1, -2) if ndim >= 2 else base[::2]


def run_inplace_view(t_fn, f_fn, sample, check_grad=True, values=True):
    """In-place on a non-contiguous view of a base (a clone of a leaf): the base's values and
    the gradients through it."""
    if not isinstance(sample.input, torch.Tensor) or sample.input.ndim == 0:
        return None
    try:
        convert, _, f_args, f_kwargs = _convert(sample)
    except Unsupported as reason:
        return "skip: " + str(reason)
    data = sample.input.detach()
    ndim = data.ndim
    if ndim >= 2:
        t_leaf = data.transpose(-1, -2).contiguous()
    else:
        t_leaf = torch.zeros(2 * data.shape[0], dtype=data.dtype)
        t_leaf[::2] = data
    f_leaf = Converter().tensor(t_leaf)
    pairs = list(convert.pairs)
    if sample.input.requires_grad:
        t_leaf.requires_grad_()
        f_leaf.requires_grad_()
        pairs.append((t_leaf, f_leaf))
    t_base, f_base = t_leaf.clone(), f_leaf.clone()
    t_view, f_view = _view_of(t_base, ndim, torch), _view_of(f_base, ndim, flow)
    t_r, t_error = _call(t_fn, t_view, sample.args, sample.kwargs)
    f_r, f_error = _call(f_fn, f_view, f_args, f_kwargs)
    if t_error is not None or f_error is not None:
        if (t_error is None) != (f_error is None):
            return f"view raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
        return None
    message = compare(to_numpy(t_base), to_numpy(f_base), "base after", values) or compare(
        to_numpy(t_view), to_numpy(f_view), "view after", values)
    if message or not check_grad or not values:
        return message
    message = _grads(t_base, f_base, pairs)
    return message and "view " + message


class _Proxy(types.SimpleNamespace):
    """An OpInfo with another callable as its op, for run_sample."""


def probe(info, dtypes=DTYPES, kinds=KINDS, first_only=False):
    """Every finding for one OpInfo's variants: [(kind/dtype, sample, message)]."""
    found = []
    variants = {}
    for kind in kinds:
        t_fn = getattr(info, kind + "_variant", None)
        if t_fn is None:
            continue
        f_fn = flow_variant(t_fn)
        if f_fn is None:
            found.append((kind, "", f"missing: flowgrad has no {getattr(t_fn, '__name__', t_fn)}"))
            continue
        variants[kind] = (t_fn, f_fn)
    if not variants:
        return found
    for dtype, all_samples in dtype_samples(info, dtypes, found, 1 if first_only else None):
        grad = dtype in (torch.float64, torch.complex128)
        name = str(dtype).split(".")[1]
        values = info.name not in RANDOM
        for sample in all_samples:
            for kind, (t_fn, f_fn) in variants.items():
                if kind in ("method", "operator"):
                    proxy = _Proxy(op=t_fn, gradcheck_wrapper=info.gradcheck_wrapper,
                                   name=info.name)
                    messages = [run_sample(proxy, f_fn, sample, check_grad=grad,
                                           values=values)]
                else:
                    messages = [run_inplace(t_fn, f_fn, sample, grad, values),
                                run_inplace_leaf(t_fn, f_fn, sample),
                                run_inplace_view(t_fn, f_fn, sample, grad, values)]
                found.extend((f"{kind}/{name}", describe(sample), m) for m in messages if m)
    return found


def main(names):
    if "--reference" in names:  # torch's reference inputs (extremal values, number operands)
        names.remove("--reference")
        opinfo_vs_torch.REFERENCE = True
    shard, shards = shard_of(names)
    first = "--first" in names
    if first:
        names.remove("--first")
    with one_thread():
        report(op_db(), lambda info: probe(info, first_only=first),
               lambda k, info: k % shards == shard and (
                   not names or info.name in names or full_name(info) in names), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])
