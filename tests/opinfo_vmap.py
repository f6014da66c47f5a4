"""torch's op database (OpInfo) under vmap: `flow.func.vmap` against `torch.func.vmap`.

torch's test_vmap_exhaustive idea: each OpInfo sample's tensor arguments are batched (a batch
of B=3 versions of each, stacked) in several combinations of in_dims (all at dim 0; each one
alone; all at the last dim, with out_dims=-1; all at dim 1 where their ndim allows) and the
vmapped call is compared with torch.func.vmap's: raise/no-raise, structure, shape, dtype and
values. "grad" cases vmap func.grad of a fixed linear functional of the outputs over the
sample (per-example gradients). Where torch's vmap refuses (data-dependent ops, `.item()`),
a loop over the batch in torch is the reference and flowgrad may refuse too.

The versions of a tensor keep its domain: floats are scaled elementwise by factors in
[0.9, 1.1] (signs, zeros and near-diagonal dominance survive), integers and bools are rolled
(index arguments stay in range).

Run as a script for a report: .venv/bin/python tests/opinfo_vmap.py [name ...]
(`--all`: every sample, not the first of each OpInfo; `--first=N`: the first N; `--shard=i/n`)
"""
from __future__ import annotations

import sys
import types
import warnings

import torch
from opinfo_vs_torch import (
    GAUGE,
    RANDOM,
    TIES,
    Converter,
    Unsupported,
    _has_ties,
    compare,
    describe,
    dtype_samples,
    flowgrad_wrapper,
    full_name,
    only_missing_names,
    op_db,
    report,
    resolve,
    shard_of,
    to_numpy,
)

import flowgrad as flow

B = 3
DTYPES = (torch.float64, torch.int64)


def _slots(sample):
    """Where the sample's batchable values are: ('input',), ('arg', i), ('kw', k) for each
    tensor or list of tensors among its input, args and kwargs."""
    def tensor(t):
        return isinstance(t, torch.Tensor) and t.layout == torch.strided

    def batchable(v):
        return tensor(v) or (isinstance(v, (list, tuple)) and v and all(tensor(t) for t in v))
    found = [("input",)] if batchable(sample.input) else []
    found += [("arg", i) for i, a in enumerate(sample.args) if batchable(a)]
    found += [("kw", k) for k, v in sample.kwargs.items() if batchable(v)]
    return found


def _get(sample, slot):
    if slot[0] == "input":
        return sample.input
    return sample.args[slot[1]] if slot[0] == "arg" else sample.kwargs[slot[1]]


def _versions(t, seed):
    """B versions of tensor t (the first is t) in its domain."""
    t = t.detach()
    if t.dtype.is_floating_point:
        gen = torch.Generator().manual_seed(seed)
        return [t] + [t * (1 + 0.1 * (2 * torch.rand(t.shape, generator=gen,
                                                     dtype=torch.float64) - 1)).to(t.dtype)
                      for _ in range(B - 1)]
    if t.numel() < 2:
        return [t] * B
    return [t.flatten().roll(k).reshape(t.shape) for k in range(B)]


def _tree(v, fn):
    return type(v)(fn(t) for t in v) if isinstance(v, (list, tuple)) else fn(v)


def _stack(versions, dim):
    """A batch of `versions` (tensors, or lists of tensors) stacked at dim."""
    if isinstance(versions[0], (list, tuple)):
        return type(versions[0])(_stack([v[i] for v in versions], dim)
                                 for i in range(len(versions[0])))
    return torch.stack(versions, dim)


def _ndim(v):
    return min(t.ndim for t in v) if isinstance(v, (list, tuple)) else v.ndim


def cases(sample, every=False):
    """(in_dims per slot, out_dims, label) combinations for one sample: all batched at 0 and
    at -1; with `every` also each one alone, and dim 1."""
    slots = _slots(sample)
    n = len(slots)
    if not n:
        return []
    out = [((0,) * n, 0, "all@0")]
    if n > 1 and every:
        out += [(tuple(0 if j == i else None for j in range(n)), 0, f"only{i}@0")
                for i in range(n)]
    out.append(((-1,) * n, -1, "all@-1,out-1"))
    if every:
        dims = tuple(1 if _ndim(_get(sample, s)) >= 1 else 0 for s in slots)
        if 1 in dims:
            out.append((dims, 1 if n == 1 else 0, "@1"))
    return out


def _rebuild(sample, slots, values, convert):
    """(input, args, kwargs) of the sample with each slot's value from `values`, everything
    else through `convert`."""
    chosen = dict(zip(slots, values))
    inp = chosen[("input",)] if ("input",) in chosen else convert(sample.input)
    args = [chosen.get(("arg", i), None) if ("arg", i) in chosen else convert(a)
            for i, a in enumerate(sample.args)]
    kwargs = {k: chosen[("kw", k)] if ("kw", k) in chosen else convert(v)
              for k, v in sample.kwargs.items()}
    return inp, args, kwargs


def _flowgrad_wrapper(wrap):
    """torch's gradcheck wrapper with `torch` bound to flowgrad (it calls torch.diag_embed and
    the like on the inputs; a batched tensor does not pass torch functions on)."""
    if isinstance(wrap, types.FunctionType) and wrap.__module__.startswith("torch.testing"):
        out = types.FunctionType(wrap.__code__, dict(wrap.__globals__, torch=flow),
                                 wrap.__name__, wrap.__defaults__, wrap.__closure__)
        out.__kwdefaults__ = wrap.__kwdefaults__
        return out
    return flowgrad_wrapper(wrap)


def _call(info, fn, sample, slots, side):
    """The function of the slots' values that calls the op (torch's or flowgrad's); the other
    arguments are converted here, outside any transform (Unsupported: flowgrad cannot take
    them)."""
    if side == "torch":
        wrap, op = info.gradcheck_wrapper, info.op
        fixed = _rebuild(sample, slots, [None] * len(slots), lambda v: v)
    else:
        wrap, op = _flowgrad_wrapper(info.gradcheck_wrapper), fn
        fixed = _rebuild(sample, slots, [None] * len(slots), Converter())

    def call(*values):
        inp, args, kwargs = _rebuild(sample, slots, values, lambda v: v)
        inp = fixed[0] if ("input",) not in slots else inp
        args = [fixed[1][i] if ("arg", i) not in slots else a for i, a in enumerate(args)]
        kwargs = {k: fixed[2][k] if ("kw", k) not in slots else v for k, v in kwargs.items()}
        return wrap(op, inp, *args, **kwargs)
    return call


def _flow(v):
    conv = Converter()
    return _tree(v, lambda t: conv.tensor(t.detach()))


def _attempt(thunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return thunk(), None
        except Exception as error:  # noqa: BLE001 - any raise is an outcome to compare
            return None, error


def _stack_outputs(outs, dim):
    if isinstance(outs[0], torch.Tensor):
        return torch.stack(outs, dim)
    return type(outs[0])(_stack_outputs([o[i] for o in outs], dim) for i in range(len(outs[0])))


def _loop(call, per_example, out_dims):
    """torch's reference where its vmap refuses: the op per example, stacked at out_dims."""
    return _stack_outputs([call(*[v[k] for v in per_example]) for k in range(B)], out_dims)


def _select(per_example, dims):
    """The versions per example: the batched slots' k-th version, the others the original."""
    return [vs if d is not None else [vs[0]] * B for vs, d in zip(per_example, dims)]


def _structure_only(info, sample):
    return info.name in RANDOM or info.name in GAUGE or (
        info.name in TIES and not sample.kwargs.get("stable") and any(
            _has_ties(_get(sample, s)) for s in _slots(sample)
            if isinstance(_get(sample, s), torch.Tensor)))


def run_case(info, fn, sample, dims, out_dims, seed=0):
    """Compare vmap of the op over one combination of in_dims; None (same) or a message."""
    slots = _slots(sample)
    per_example = []  # per slot: B versions (each a tensor or a list of tensors)
    for j, s in enumerate(slots):
        v = _get(sample, s)
        if isinstance(v, (list, tuple)):
            vs = [_versions(t, seed + 17 * j + i) for i, t in enumerate(v)]
            per_example.append([type(v)(x[k] for x in vs) for k in range(B)])
        else:
            per_example.append(_versions(v, seed + 17 * j))
    try:
        batched = [_stack(vs, d) if d is not None else vs[0]
                   for vs, d in zip(per_example, dims)]
        f_batched = [_flow(b) for b in batched]
        t_call = _call(info, fn, sample, slots, "torch")
        f_call = _call(info, fn, sample, slots, "flowgrad")
    except (Unsupported, RuntimeError) as reason:  # (a sparse layout torch cannot stack)
        return f"skip: {reason}"
    expected, t_error = _attempt(lambda: torch.func.vmap(t_call, in_dims=tuple(dims),
                                                         out_dims=out_dims)(*batched))
    actual, f_error = _attempt(lambda: flow.func.vmap(f_call, in_dims=tuple(dims),
                                                      out_dims=out_dims)(*f_batched))
    if t_error is not None:
        if f_error is not None:
            return None
        expected, l_error = _attempt(lambda: _loop(t_call, _select(per_example, dims),
                                                   out_dims))
        if l_error is not None:
            return f"no raise: torch's vmap raises {t_error!r:.150} (and its loop)"
    elif f_error is not None:
        return f"raise: torch's vmap works, flowgrad {f_error!r:.300}"
    values = not _structure_only(info, sample)
    return compare(to_numpy(expected), to_numpy(actual), values=values)


def _float_outputs(out, module):
    leaves = out if isinstance(out, (list, tuple)) else (out,)
    return [o for o in leaves if isinstance(o, module.Tensor) and o.dtype.is_floating_point]


def _autograd_grad(loss, xs):
    """torch's gradient by plain autograd (the loop's reference where torch.func refuses)."""
    xs = [x.detach().requires_grad_(True) for x in xs]
    grads = torch.autograd.grad(loss(*xs), xs, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, xs)]


def run_grad(info, fn, sample, seed=0):
    """vmap(func.grad) of sum(out * cotangent) over the sample's floating tensor slots."""
    slots = [s for s in _slots(sample) if isinstance(_get(sample, s), torch.Tensor)
             and _get(sample, s).dtype.is_floating_point]
    if not slots:
        return None
    t_one = _call(info, fn, sample, slots, "torch")
    out, error = _attempt(lambda: t_one(*[_get(sample, s).detach() for s in slots]))
    if error is not None:
        return None
    t_outs = _float_outputs(out, torch)
    if not t_outs:
        return None
    gen = torch.Generator().manual_seed(seed + 1)
    cots = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in t_outs]
    f_cots = [_flow(c) for c in cots]
    per_example = [_versions(_get(sample, s), seed + 17 * j) for j, s in enumerate(slots)]
    batched = [torch.stack(vs) for vs in per_example]
    f_batched = [_flow(b) for b in batched]
    argnums = tuple(range(len(slots)))

    def loss(module, call, cotangents):
        def scalar(*xs):
            outs = _float_outputs(call(*xs), module)
            return sum((o * c).sum() for o, c in zip(outs, cotangents))
        return scalar

    t_loss = loss(torch, t_one, cots)
    try:
        f_loss = loss(flow, _call(info, fn, sample, slots, "flowgrad"), f_cots)
    except Unsupported as reason:
        return f"skip: {reason}"
    expected, t_error = _attempt(
        lambda: torch.func.vmap(torch.func.grad(t_loss, argnums))(*batched))
    actual, f_error = _attempt(
        lambda: flow.func.vmap(flow.func.grad(f_loss, argnums))(*f_batched))
    if t_error is not None:
        if f_error is not None:
            return None
        expected, l_error = _attempt(lambda: tuple(torch.stack(g) for g in zip(
            *[_autograd_grad(t_loss, [vs[k] for vs in per_example]) for k in range(B)])))
        if l_error is not None:
            return f"grad no raise: torch raises {t_error!r:.150} (and its loop)"
    elif f_error is not None:
        return f"grad raise: torch's vmap(grad) works, flowgrad {f_error!r:.300}"
    return compare(to_numpy(expected), to_numpy(actual), "grad")


def probe(info, dtypes=DTYPES, every=False, first=None):
    """Every finding for one OpInfo: [(dtype/case, sample description, message)]; the first
    sample of each dtype, the first `first` with `every`, or all."""
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    for dtype, chosen in dtype_samples(info, dtypes, found, first if every else 1):
        name = str(dtype).split(".")[1]
        for sample in chosen:
            for dims, out_dims, label in cases(sample, every):
                message = run_case(info, fn, sample, dims, out_dims)
                if message:
                    found.append((f"{name} {label}", describe(sample), message))
            if dtype == torch.float64 and info.supports_autograd and \
                    info.name not in RANDOM and info.name not in GAUGE:
                message = run_grad(info, fn, sample)
                if message:
                    found.append((f"{name} grad", describe(sample), message))
    return [("", "", "missing")] if only_missing_names(found) else found


def main(names):
    every = "--all" in names
    if every:
        names.remove("--all")
    first = None
    for arg in list(names):
        if arg.startswith("--first="):
            every, first = True, int(arg[8:])
            names.remove(arg)
    shard, shards = shard_of(names)
    report(op_db(), lambda info: probe(info, every=every, first=first),
           lambda k, info: k % shards == shard and (
               not names or info.name in names or full_name(info) in names), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])
