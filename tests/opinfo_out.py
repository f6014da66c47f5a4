"""torch's OpInfo `out=` variants run through flowgrad (torch test_ops' test_out family).

For every OpInfo with `supports_out`, each sample is called with `out=` in torch and, with the
same arguments and an `out` of the same shape, dtype and strides, in flowgrad. Cases (CASES):

- `fit`: out of the result's shape and dtype (nan-filled): out's values, the returned object IS
  out (each element of a tuple out), out's version counter moved;
- `strided` / `transposed`: out a stride-2 slice or a transposed view of a bigger nan-filled
  buffer: values written through the view, its strides kept, the rest of the buffer untouched;
- `empty`: out of shape (0,): resized silently; `resize`: out of a wrong non-empty shape:
  resized with torch's UserWarning ("An output with one or more elements was resized");
- `int64`, `float32`, `complex128`: out of another dtype: torch raises where the result cannot
  be cast safely into it and casts where it can;
- `grad`: inputs that require grad (grad mode on: torch refuses), the same under no_grad (no
  raise), and an `out` that requires grad with plain inputs;
- `alias`: out IS the input (a result of the input's shape and dtype): out's values.

Each case compares raise/no-raise, the exception type, the resize warning, the returned
identity, the version counter, out's shape, dtype, values and strides, the buffer around a
view `out`, and the inputs (unchanged unless out is one of them).

Run as a script for a report: .venv/bin/python tests/opinfo_out.py [name ...]
(`--first`: each OpInfo's first sample per dtype; `--case=fit`: one case; `--shard=i/n`)
"""
from __future__ import annotations

import itertools
import math
import sys
import warnings
from unittest import mock

import torch
from opinfo_vs_torch import (
    GAUGE,
    RANDOM,
    TIES,
    Converter,
    Unsupported,
    compare,
    convert_sample,
    describe,
    full_name,
    one_thread,
    op_db,
    report,
    resolve,
    shard_of,
    to_numpy,
    torch_test_internals,
)

with torch_test_internals():  # (its import freezes torch.backends' flags: put back)
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

import flowgrad as flow

DTYPES = (torch.float64, torch.int64, torch.bool, torch.complex128)
CASES = ("fit", "strided", "transposed", "empty", "resize", "int64", "float32", "complex128",
         "grad", "alias")
_RESIZED = "An output with one or more elements was resized"


def _filler(dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max


def _blank(shape, dtype, case):
    """A torch `out` for one result: (out, the buffer it views or None)."""
    fill = _filler(dtype)
    if case == "strided" and len(shape):
        base = torch.full((*shape[:-1], 2 * shape[-1] + 1), fill, dtype=dtype)
        return base[..., 1::2], base
    if case == "transposed" and len(shape) >= 2:
        base = torch.full((*shape[:-2], shape[-1], shape[-2]), fill, dtype=dtype)
        return base.mT, base
    if case == "empty":
        return torch.empty(0, dtype=dtype), None
    if case == "resize":
        return torch.full((math.prod(shape) + 1,), fill, dtype=dtype), None
    if case in ("int64", "float32", "complex128"):
        other = getattr(torch, case)
        return torch.full(shape, _filler(other), dtype=other), None
    return torch.full(shape, fill, dtype=dtype), None


def _flat(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _call(fn, sample_input, args, kwargs, out, grad=True):
    """fn(..., out=out): (returned, error, whether the resize warning came)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        context = torch.no_grad() if not grad else flow.no_grad() if grad == "flow-off" \
            else _nothing()
        try:
            with context:
                result = fn(sample_input, *args, **kwargs, out=out)
            error = None
        except Exception as exc:  # noqa: BLE001 - any raise is compared with torch's
            result, error = None, exc
    warned = any(_RESIZED in str(w.message) for w in caught)
    return result, error, warned


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _strides(t):
    return tuple(t.stride())


def run_case(info, fn, sample, expected, case, grad_inputs=None):
    """One case of one sample; None (same) or a message. `expected`: torch's out-of-place
    result (the shapes and dtypes of the outs); `grad_inputs`: the sample with inputs requiring
    grad (the `grad` case)."""
    results = _flat(expected)
    several = isinstance(expected, (tuple, list))
    if case == "alias":
        x = sample.input
        # (torch defines the values only for its elementwise kernels)
        if not isinstance(info, (UnaryUfuncInfo, BinaryUfuncInfo)) or several or \
                not isinstance(x, torch.Tensor) or x.shape != expected.shape or \
                x.dtype != expected.dtype:
            return None
        sample = sample.transform(lambda t: t.clone() if isinstance(t, torch.Tensor) else t)
    if case == "transposed" and not any(r.ndim >= 2 for r in results):
        return None
    if case == "strided" and not any(r.ndim for r in results):
        return None
    if case in ("int64", "float32", "complex128") and all(
            r.dtype == getattr(torch, case) for r in results):
        return None
    convert = Converter()
    try:
        f_input, f_args, f_kwargs = convert_sample(sample, convert)
    except Unsupported as reason:
        return "skip: " + str(reason)
    if case == "alias":
        t_outs, bases = [sample.input], [None]
    else:
        made = [_blank(tuple(r.shape), r.dtype, case) for r in results]
        t_outs, bases = [m[0] for m in made], [m[1] for m in made]
    # (flowgrad's from a twin: torch's .numpy() makes a storage not resizable)
    twins = Converter()
    twin = [_blank(tuple(r.shape), r.dtype, case) for r in results] if case != "alias" else []
    f_outs = [twins(m[0]) for m in twin] or [convert(t) for t in t_outs]
    f_bases = [None if m[1] is None else twins(m[1]) for m in twin] or [None]
    t_out = tuple(t_outs) if several else t_outs[0]
    f_out = tuple(f_outs) if several else f_outs[0]
    t_inputs = to_numpy((sample.input, list(sample.args), list(sample.kwargs.values())))
    f_inputs_before = to_numpy((f_input, f_args, list(f_kwargs.values())))
    t_versions = [t._version for t in t_outs]
    f_versions = [t._version for t in f_outs]
    t_r, t_error, t_warned = _call(info.op, sample.input, sample.args, sample.kwargs, t_out)
    f_r, f_error, f_warned = _call(fn, f_input, f_args, f_kwargs, f_out)
    if t_error is not None or f_error is not None:
        if (t_error is None) != (f_error is None):
            return f"{case}: raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"
        if type(t_error) is not type(f_error) and not isinstance(f_error, type(t_error)):
            return (f"{case}: raise type: torch {type(t_error).__name__} ({t_error!s:.120}), "
                    f"flowgrad {type(f_error).__name__} ({f_error!s:.200})")
        return None
    if t_warned != f_warned:
        return f"{case}: resize warning: torch {t_warned}, flowgrad {f_warned}"
    t_back, f_back = _flat(t_r), _flat(f_r)
    if len(t_back) != len(f_back):
        return f"{case}: torch returns {len(t_back)} tensors, flowgrad {len(f_back)}"
    for i, (t, f) in enumerate(zip(t_back, f_back)):
        if (t is t_outs[i]) and f is not f_outs[i]:
            return f"{case}: returned[{i}] is not the out tensor in flowgrad ({type(f).__name__})"
    for i, (t, f) in enumerate(zip(t_outs, f_outs)):
        if (t._version > t_versions[i]) != (f._version > f_versions[i]):
            return (f"{case}: out[{i}] version: torch {t_versions[i]} -> {t._version}, "
                    f"flowgrad {f_versions[i]} -> {f._version}")
    message = _compare_outs(info, sample, results, t_outs, f_outs, case)
    if message:
        return message
    values = info.name not in RANDOM
    if case in ("strided", "transposed", "fit"):
        for i, (t, f) in enumerate(zip(t_outs, f_outs)):
            if t.numel() > 1 and _strides(t) != _strides(f):
                return f"{case}: out[{i}] strides: torch {_strides(t)}, flowgrad {_strides(f)}"
        for i, (t, f) in enumerate(zip(bases, f_bases)):
            # (an index among ties or a singular vector's sign: out's own check decides)
            if t is not None and info.name not in GAUGE and not (info.name in TIES and i):
                message = compare(to_numpy(t), to_numpy(f), f"{case}: buffer[{i}]", values)
                if message:
                    return message
    if case != "alias":
        f_inputs = to_numpy((f_input, f_args, list(f_kwargs.values())))
        message = compare(t_inputs, f_inputs, f"{case}: inputs after") or compare(
            f_inputs_before, f_inputs, f"{case}: flowgrad's inputs changed")
        if message:
            return message
    return None


def _compare_outs(info, sample, results, t_outs, f_outs, case):
    """out's values as run_sample compares results: structure only for random draws and
    singular/eigen vectors, the values alone (not the indices) among ties; a result cast into
    an `out` of another dtype with the result's own dtype's tolerance."""
    t_np, f_np = list(to_numpy(tuple(t_outs))), list(to_numpy(tuple(f_outs)))
    values = info.name not in RANDOM and info.name not in GAUGE
    if info.name in TIES and not sample.kwargs.get("stable") and isinstance(
            sample.input, torch.Tensor) and sample.input.numel() > 1 and torch.unique(
            sample.input).numel() < sample.input.numel():
        t_np, f_np = t_np[:1], f_np[:1]
    for i, (t, f) in enumerate(zip(t_np, f_np)):
        own = str(results[i].dtype).split(".")[1]
        if t[1] == f[1] and own != t[1] and own in ("float32", "float16", "bfloat16", "complex64"):
            t_np[i], f_np[i] = (t[0], own, t[2]), (f[0], own, f[2])
    return compare(tuple(t_np), tuple(f_np), f"{case}: out", values)


def run_grad(info, fn, sample, expected):
    """torch's autograd check of out=: inputs that require grad with grad mode on (refused),
    the same under no_grad (written), and an out that requires grad (refused)."""
    results = _flat(expected)
    several = isinstance(expected, (tuple, list))
    found = []
    for mode in ("inputs", "no_grad", "out"):
        convert = Converter()
        try:
            f_input, f_args, f_kwargs = convert_sample(sample, convert)
        except Unsupported as reason:
            return ["skip: " + str(reason)]
        t_outs = [torch.full(r.shape, _filler(r.dtype), dtype=r.dtype) for r in results]
        if mode == "out":
            if not convert.pairs:
                continue
            t_input, t_args, t_kwargs = _detached(sample)
            convert = Converter()
            f_input, f_args, f_kwargs = convert_sample(
                type(sample)(t_input, args=t_args, kwargs=t_kwargs), convert)
            if not any(o.dtype.is_floating_point or o.dtype.is_complex for o in t_outs):
                continue
            for o in t_outs:
                if o.dtype.is_floating_point or o.dtype.is_complex:
                    o.requires_grad_()
        else:
            if not convert.pairs:
                return found
            t_input, t_args, t_kwargs = sample.input, sample.args, sample.kwargs
        f_outs = [Converter().tensor(o.detach().clone().requires_grad_(o.requires_grad))
                  for o in t_outs]
        t_out = tuple(t_outs) if several else t_outs[0]
        f_out = tuple(f_outs) if several else f_outs[0]
        grad = False if mode == "no_grad" else True
        _, t_error, _ = _call(info.op, t_input, t_args, t_kwargs, t_out, grad)
        _, f_error, _ = _call(fn, f_input, f_args, f_kwargs, f_out,
                              "flow-off" if mode == "no_grad" else True)
        if (t_error is None) != (f_error is None):
            found.append(f"grad/{mode}: raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}")
        elif mode == "no_grad" and t_error is None:
            message = _compare_outs(info, sample, results, t_outs, f_outs, f"grad/{mode}")
            if message:
                found.append(message)
    return found


def _detached(sample):
    def detach(t):
        return t.detach().clone() if isinstance(t, torch.Tensor) else t
    s = sample.transform(detach)
    return s.input, s.args, s.kwargs


def _samples(info, dtype, requires_grad, count):
    # (torch's sample iterator looks for its unittest caller with inspect.stack(), which reads
    # the source of every frame: under pytest's deep stack most of this sweep's CPU time)
    with warnings.catch_warnings(), mock.patch.object(common_utils, "extract_test_fn",
                                                      lambda: None):
        warnings.simplefilter("ignore")
        return list(itertools.islice(info.sample_inputs("cpu", dtype,
                                                        requires_grad=requires_grad), count))


def _outputs(info, sample):
    """torch's out-of-place result of a sample, or None where it is not a tensor or a tuple of
    tensors (nothing to write out into) or the call raises."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with torch.no_grad():
                result = info.op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # noqa: BLE001 - torch refuses the sample: no out= form to test
            return None
    if isinstance(result, torch.Tensor):
        return result
    if isinstance(result, (tuple, list)) and result and all(
            isinstance(r, torch.Tensor) for r in result):
        return tuple(result)
    return None


def probe(info, dtypes=DTYPES, cases=CASES, first_only=False):
    """Every finding for one OpInfo's out= forms: [(case/dtype, sample, message)]."""
    if not info.supports_out:
        return []
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    supported = info.supported_dtypes("cpu")
    count = 1 if first_only else None
    for dtype in dtypes:
        if dtype not in supported:
            continue
        name = str(dtype).split(".")[1]
        try:
            plain = _samples(info, dtype, False, count)
            grads = _samples(info, dtype, True, 1) if "grad" in cases and (
                dtype.is_floating_point or dtype.is_complex) and info.supports_autograd else []
        except Exception as error:  # noqa: BLE001 - torch's generator needs something missing
            found.append((name, "", f"skip: sample_inputs: {error!r:.100}"))
            continue
        for sample in plain:
            expected = _outputs(info, sample)
            if expected is None:
                continue
            for case in cases:
                if case == "grad":
                    continue
                message = run_case(info, fn, sample, expected, case)
                if message:
                    found.append((f"{case}/{name}", describe(sample), message))
        for sample in grads:
            expected = _outputs(info, sample)
            if expected is not None:
                found.extend((f"grad/{name}", describe(sample), m)
                             for m in run_grad(info, fn, sample, expected))
    return found


def main(names):
    shard, shards = shard_of(names)
    first = "--first" in names
    if first:
        names.remove("--first")
    cases = CASES
    for arg in list(names):
        if arg.startswith("--case="):
            cases = tuple(arg[7:].split(","))
            names.remove(arg)
    with one_thread():
        report(op_db(), lambda info: probe(info, cases=cases, first_only=first),
               lambda k, info: k % shards == shard and info.supports_out and (
                   not names or info.name in names or full_name(info) in names),
               "OpInfos with out=")


if __name__ == "__main__":
    main(sys.argv[1:])
