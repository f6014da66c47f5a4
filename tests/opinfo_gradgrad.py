"""Second derivatives of torch's OpInfo samples against torch's (double backward).

For each OpInfo with `supports_gradgrad`, each float64 sample is called in torch and in
flowgrad (opinfo_vs_torch's Converter: same numbers, same requires_grad). With a fixed random
cotangent v (requiring grad) the first gradients g = grad(outputs, inputs, v,
create_graph=True) are compared, then grad(g, inputs + v, u) with a fixed random u: values,
which entries are None (unused), raise/no-raise. A flowgrad None where torch's entry is zero
is only a note (`unused:`); None where torch's entry is nonzero is a finding.

Run as a script for a report: .venv/bin/python tests/opinfo_gradgrad.py [name ...]
(`--all`: every sample, not the first few; `--rounded`: inputs rounded to halves;
`--complex`: complex128 samples; `--shard=i/n`)
"""
from __future__ import annotations

import itertools
import sys
import warnings

import numpy as np
import torch
from opinfo_vs_torch import (
    RANDOM,
    Converter,
    Unsupported,
    _differentiable,
    compare,
    convert_sample,
    describe,
    flowgrad_wrapper,
    full_name,
    op_db,
    report,
    resolve,
    samples,
    shard_of,
    to_numpy,
)
from vs_torch import ERRORS

import flowgrad as flow

# ops whose value depends on a sign or phase choice (their raw gradients are not comparable)
# or on random draws: skipped here
SKIP = RANDOM | frozenset((
    "linalg.svd", "svd", "linalg.eig", "linalg.eigh", "svd_lowrank", "pca_lowrank", "lobpcg",
    "nn.functional.multi_head_attention_forward",
))
FIRST = 3  # samples per OpInfo by default


def _random_like(rng, shape, dtype):
    """The same random numbers as a torch tensor and a flowgrad tensor (requiring grad)."""
    data = rng.standard_normal(shape)
    if dtype.is_complex:
        data = data + 1j * rng.standard_normal(shape)
    t = torch.tensor(data).to(dtype)
    f = Converter().tensor(t)
    return t.requires_grad_(True), f.requires_grad_(True)


def _grad(module, outputs, inputs, cotangents, create_graph):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return module.autograd.grad(outputs, inputs, cotangents, create_graph=create_graph,
                                        allow_unused=True), None
        except Exception as error:  # noqa: BLE001 - flowgrad's other raises are findings too
            if module is torch and not isinstance(error, ERRORS):
                raise
            return None, error


def both_grads(t_call, f_call, create_graph, what):
    """`_grad` in torch and in flowgrad, each given its (outputs, inputs, cotangents):
    (torch's, flowgrad's, None), or (None, None, findings) where either raises (a finding
    when only one does; none when both do)."""
    t_g, t_error = _grad(torch, *t_call, create_graph)
    f_g, f_error = _grad(flow, *f_call, create_graph)
    if t_error is None and f_error is None:
        return t_g, f_g, None
    if (t_error is None) != (f_error is None):
        return None, None, [f"{what} raise: torch {t_error!r:.200}, flowgrad {f_error!r:.300}"]
    return None, None, []


def _none_pattern(t_grads, f_grads, where):
    """Findings and notes about entries one side gives as None."""
    for i, (t, f) in enumerate(zip(t_grads, f_grads)):
        if (t is None) == (f is None):
            continue
        other = to_numpy(t if f is None else f)[2]
        if not np.any(np.abs(other) > 1e-12):  # (rounding noise counts as zeros)
            yield (f"unused: {where}[{i}] torch {'None' if t is None else 'zeros'}, "
                   f"flowgrad {'None' if f is None else 'zeros'}")
        else:
            side = "flowgrad" if f is None else "torch"
            yield f"{where}[{i}]: {side} None, the other nonzero"


def gradgrad_sample(info, fn, sample, seed=0):
    """Findings for one sample: a list of messages (notes start with 'unused:'/'skip:')."""
    if sample.kwargs.get("dropout_p", 0) or sample.kwargs.get("p", 0) and "dropout" in info.name:
        return ["skip: random draws (dropout)"]
    convert = Converter()
    try:
        f_input, f_args, f_kwargs = convert_sample(sample, convert)
    except Unsupported as reason:
        return ["skip: " + str(reason)]
    wrap = info.gradcheck_wrapper
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = wrap(info.op, sample.input, *sample.args, **sample.kwargs)
        except ERRORS:
            return []
        try:
            actual = flowgrad_wrapper(wrap)(fn, f_input, *f_args, **f_kwargs)
        except Exception as error:  # noqa: BLE001
            return [f"skip: the call raises in flowgrad: {error!r:.100}"]
    process = sample.output_process_fn_grad
    try:
        t_out = _differentiable(process(expected), torch)
        f_out = _differentiable(process(actual), flow)
    except Exception as error:  # noqa: BLE001 - the processing lambda is torch-written
        return [f"skip: output_process_fn_grad: {error!r:.100}"]
    t_leaves = [t for t, _ in convert.pairs]
    f_leaves = [f for _, f in convert.pairs]
    if not t_out or not t_leaves or len(t_out) != len(f_out):
        return [] if len(t_out) == len(f_out) else ["skip: differentiable outputs differ"]
    rng = np.random.default_rng(seed)
    vs = [_random_like(rng, tuple(o.shape), o.dtype) for o in t_out]
    t_v, f_v = [t for t, _ in vs], [f for _, f in vs]
    t_g, f_g, stop = both_grads((t_out, t_leaves, t_v), (f_out, f_leaves, f_v), True, "grad")
    if stop is not None:
        return stop
    found = list(_none_pattern(t_g, f_g, "grad"))
    if any(not m.startswith("unused") for m in found):
        return found
    zero = [torch.zeros_like(x) if g is None else g for g, x in zip(t_g, t_leaves)]
    fzero = [flow.zeros_like(x) if g is None else g for g, x in zip(f_g, f_leaves)]
    message = compare(to_numpy(tuple(zero)), to_numpy(tuple(fzero)), "grad")
    if message:
        return found + [message]
    # the second step: through the first gradients torch can differentiate
    pick = [i for i, g in enumerate(t_g) if g is not None and g.requires_grad]
    if not pick:
        return found
    flat = [i for i in pick if f_g[i] is None or not f_g[i].requires_grad]
    if flat:
        return found + [f"gradgrad: flowgrad's first gradient {flat} does not require grad "
                        "(torch's does)"]
    us = [_random_like(rng, tuple(t_g[i].shape), t_g[i].dtype) for i in pick]
    t_gg, f_gg, stop = both_grads(
        ([t_g[i] for i in pick], t_leaves + t_v, [t.detach() for t, _ in us]),
        ([f_g[i] for i in pick], f_leaves + f_v, [f.detach() for _, f in us]), False, "gradgrad")
    if stop is not None:
        return found + stop
    found += _none_pattern(t_gg, f_gg, "gradgrad")
    both = t_leaves + t_v
    fboth = f_leaves + f_v
    zero = [torch.zeros_like(x) if g is None else g for g, x in zip(t_gg, both)]
    fzero = [flow.zeros_like(x) if g is None else g for g, x in zip(f_gg, fboth)]
    message = compare(to_numpy(tuple(zero)), to_numpy(tuple(fzero)), "gradgrad")
    if message:
        found.append(message)
    return found


def candidate(info, dtype=torch.float64):
    """An OpInfo this sweep runs: gradgrad supported, `dtype`, not random or gauge-dependent."""
    return (info.supports_autograd and info.supports_gradgrad and info.name not in SKIP
            and dtype in info.supported_dtypes("cpu"))


def gradgrad_samples(info, first=FIRST, dtype=torch.float64):
    """`dtype` samples that require grad (the first `first`, or all for first=None)."""
    if not candidate(info, dtype):
        return []

    def wanted(s):
        return isinstance(s.input, (list, tuple)) or any(
            isinstance(t, torch.Tensor) and t.requires_grad
            for t in [s.input, *s.args, *s.kwargs.values()])
    try:  # (lazily: some OpInfos' generators are slow, max_unpool's)
        return list(itertools.islice(filter(wanted, samples(info, dtype)), first))
    except Exception:  # noqa: BLE001 - torch's generator needs something missing
        return []


def quantize(sample):
    """The sample with its float tensors rounded to halves, in place: ties (max, sort), zeros
    (abs, relu) and equal operands (maximum, clamp's tensor bounds) where the derivatives
    take a convention."""
    def one(value):
        if isinstance(value, torch.Tensor) and value.dtype.is_floating_point and (
                value.layout == torch.strided):
            with torch.no_grad():
                value.data.copy_((value.data * 2).round() / 2)
        elif isinstance(value, (list, tuple)):
            for v in value:
                one(v)
    one([sample.input, *sample.args, *sample.kwargs.values()])
    return sample


def probe(info, first=FIRST, rounded=False, dtype=torch.float64):
    """Every finding for one OpInfo: [(dtype, sample description, message)]."""
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    for k, sample in enumerate(gradgrad_samples(info, first, dtype)):
        if rounded:
            sample = quantize(sample)
        for message in gradgrad_sample(info, fn, sample, seed=k):
            found.append((str(dtype)[6:], describe(sample), message))
    return found


def main(names):
    first = None if "--all" in names else FIRST
    rounded = "--rounded" in names
    dtype = torch.complex128 if "--complex" in names else torch.float64
    names = [n for n in names if n not in ("--all", "--rounded", "--complex")]
    shard, shards = shard_of(names)
    report(op_db(), lambda info: probe(info, first, rounded, dtype),
           lambda k, info: k % shards == shard and (
               not names or info.name in names or full_name(info) in names),
           "OpInfos (gradgrad)")


if __name__ == "__main__":
    main(sys.argv[1:])
