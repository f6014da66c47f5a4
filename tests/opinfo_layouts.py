"""torch's OpInfo samples on strided memory: the same ops as opinfo_vs_torch.py, with every
tensor of a sample re-laid-out before the call, in torch and, with the same strides, in
flowgrad.

Layouts (LAYOUTS): torch's own `sample.noncontiguous()` (each tensor a stride-2 view into
a nan-padded buffer); `transposed` (ndim >= 2: `t.mT.contiguous().mT`, column-major
strides); `sliced` (`big[..., 1::2]`: a stride-2 last dim at storage offset 1); `expanded`
(the first dim of size > 1 a stride-0 `expand` of the first row: the values change to that
row repeated, the same in both libraries); opt-in (`--layout=channels_last`, not in the
default LAYOUTS): `channels_last` (4-d and 5-d tensors NHWC / NDHWC), `permuted` (3 dims or
more, all reversed in memory: strides increasing). A flowgrad tensor is
built on a copy of the torch tensor's storage with `as_strided`, so both see the same
strides; a tensor whose strides
flowgrad does not keep is a finding of its own ("layout: ..."). Outputs, dtypes, shapes and
gradients are compared as opinfo_vs_torch.run_sample does; for elementwise ops
(ELEMENTWISE) the output's strides too, which torch keeps from the input.

Run as a script for a report: .venv/bin/python tests/opinfo_layouts.py [name ...]
(`--layout=transposed`: one layout; `--strides`: elementwise ops' output strides too,
`--strides=all`: every op's outputs' dim order (the strides of dims of size > 1);
`--shard=i/n`)
"""
from __future__ import annotations

import contextlib
import math
import sys
import warnings

import numpy as np
import opinfo_vs_torch
import torch
from opinfo_vs_torch import (
    RANDOM,
    Converter,
    convert_sample,
    describe,
    dtype_samples,
    full_name,
    only_missing_names,
    op_db,
    report,
    resolve,
    run_sample,
    shard_of,
    torch_test_internals,
)

with torch_test_internals():  # (its import freezes torch.backends' flags: put back)
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, UnaryUfuncInfo

import flowgrad as flow

DTYPES = (torch.float64, torch.int64, torch.complex128)
LAYOUTS = ("noncontiguous", "transposed", "sliced", "expanded")


def _filler(dtype):
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    return True if dtype == torch.bool else 12


def _leaf(t, like):
    """`t` (a view made under no_grad) as a leaf that is no view, requiring grad as `like`."""
    out = t.detach()
    if like.requires_grad:
        out.requires_grad_(True)
    return out


def relayout(t, layout):
    """The torch tensor `t` in `layout` (same values but for `expanded`), a leaf that is no
    view; as it is where the layout does not apply (too few dims, no dim to expand)."""
    if t.layout != torch.strided or t.numel() == 0:
        return t
    data = t.detach()
    if layout == "transposed":
        if t.ndim < 2:
            return _leaf(data, t)
        return _leaf(data.mT.contiguous().mT, t)
    if layout == "sliced":
        if t.ndim < 1:
            return _leaf(data, t)
        big = torch.full(t.shape[:-1] + (2 * t.shape[-1] + 1,), _filler(t.dtype), dtype=t.dtype)
        big[..., 1::2] = data
        return _leaf(big[..., 1::2], t)
    if layout == "expanded":
        dims = [d for d in range(t.ndim) if t.shape[d] > 1]
        if not dims:
            return _leaf(data, t)
        d = dims[0]
        return _leaf(data.narrow(d, 0, 1).clone().expand(t.shape), t)
    if layout == "permuted":  # (3 dims or more: every dim's order reversed in memory)
        if t.ndim < 3:
            return _leaf(data, t)
        rev = tuple(range(t.ndim))[::-1]
        return _leaf(data.permute(rev).contiguous().permute(rev), t)
    if layout == "channels_last":  # (4-d and 5-d tensors; others as they are)
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(t.ndim)
        return _leaf(data if fmt is None else data.contiguous(memory_format=fmt), t)
    raise ValueError(layout)


def relaid(sample, layout):
    """`sample` with each of its tensors in `layout`."""
    if layout == "noncontiguous":
        return sample.noncontiguous().transform(
            lambda t: _leaf(t, t) if isinstance(t, torch.Tensor) and t._base is not None else t)
    return sample.transform(lambda t: relayout(t, layout) if isinstance(t, torch.Tensor) else t)


class LayoutMismatch(Exception):
    """flowgrad's copy of a tensor does not have the torch tensor's strides."""


class StridedConverter(Converter):
    """Converter whose flowgrad tensors have the torch tensors' strides: each is an
    `as_strided` view of a copy of the torch tensor's storage (a leaf that requires grad: that
    view detached, which keeps its strides)."""

    def __call__(self, value):
        if isinstance(value, torch.Tensor):
            made = self.made.get(id(value))
            if made is not None:
                return made[1]
            out = self.tensor(value)
            self.made[id(value)] = (value, out)
            return out
        return super().__call__(value)

    def tensor(self, t):
        if t.layout != torch.strided or t.device.type != "cpu" or t.dtype == torch.bfloat16 or (
                t._is_zerotensor()) or t.numel() == 0 or (
                t.is_contiguous() and t.storage_offset() == 0
                and t.untyped_storage().nbytes() == t.numel() * t.element_size()):
            return super().tensor(t)
        data = t.detach().resolve_conj().resolve_neg()
        span = data.storage_offset() + sum((n - 1) * s for n, s in zip(
            data.shape, data.stride())) + 1
        storage = torch.as_strided(data, (span,), (1,), 0).numpy().copy()
        out = flow.tensor(storage).as_strided(tuple(t.shape), t.stride(), t.storage_offset())
        if t.requires_grad:
            out = out.detach().requires_grad_(True)
            self.pairs.append((t, out))
        if tuple(out.stride()) != tuple(t.stride()):
            raise LayoutMismatch(f"layout: flowgrad's copy has strides {tuple(out.stride())}, "
                                 f"torch's {tuple(t.stride())}")
        if not np.array_equal(out.detach().numpy(), data.numpy(), equal_nan=True):
            raise LayoutMismatch("layout: flowgrad's strided copy holds other values")
        return out


@contextlib.contextmanager
def strided_conversion():
    """run_sample's copies of torch tensors, made by StridedConverter meanwhile."""
    saved = opinfo_vs_torch.Converter
    opinfo_vs_torch.Converter = StridedConverter
    try:
        yield
    finally:
        opinfo_vs_torch.Converter = saved


ELEMENTWISE = (UnaryUfuncInfo, BinaryUfuncInfo)


def _dim_order(t):
    return tuple(s for s, n in zip(t.stride(), t.shape) if n != 1)


def output_strides(info, fn, sample, all_ops=False):
    """For an elementwise op: a message where flowgrad's output strides are not torch's.
    `all_ops`: for any op, where the dim order of an output (the strides of its dims of size
    > 1, what a later view()/flatten() depends on) is not torch's."""
    if not isinstance(sample.input, torch.Tensor) or not (
            all_ops or isinstance(info, ELEMENTWISE)):
        return None
    convert = StridedConverter()
    try:
        f_input, f_args, f_kwargs = convert_sample(sample, convert)
        with warnings.catch_warnings(), torch.no_grad(), flow.no_grad():
            warnings.simplefilter("ignore")
            expected = info.op(sample.input, *sample.args, **sample.kwargs)
            actual = fn(f_input, *f_args, **f_kwargs)
    except Exception:  # noqa: BLE001 - raises are run_sample's to compare
        return None
    if all_ops:
        pairs = zip(*(r if isinstance(r, (tuple, list)) else (r,) for r in (expected, actual)))
        return next((f"output {i} dim order: torch strides {tuple(e.stride())}, flowgrad "
                     f"{tuple(a.stride())} (input {tuple(sample.input.stride())})"
                     for i, (e, a) in enumerate(pairs) if isinstance(e, torch.Tensor) and
                     isinstance(a, flow.Tensor) and not e.is_sparse and e.numel() > 1 and
                     e.shape == tuple(a.shape) and _dim_order(e) != _dim_order(a)), None)
    if not isinstance(expected, torch.Tensor) or not isinstance(actual, flow.Tensor):
        return None
    if expected.numel() <= 1 or tuple(expected.stride()) == tuple(actual.stride()):
        return None
    return (f"strides: torch {tuple(expected.stride())}, flowgrad {tuple(actual.stride())} "
            f"(input {tuple(sample.input.stride())})")


def probe(info, dtypes=DTYPES, layouts=LAYOUTS, first_only=False, strides=False):
    """Every finding for one OpInfo on re-laid-out samples: [(where, sample, message)]."""
    fn = resolve(info)
    if fn is None:
        return [("", "", "missing")]
    found = []
    for dtype, all_samples in dtype_samples(info, dtypes, found, 1 if first_only else None):
        for sample in all_samples:
            for layout in layouts:
                where = f"{str(dtype).split('.')[1]} {layout}"
                try:
                    moved = relaid(sample, layout)
                except Exception as error:  # noqa: BLE001 - torch's transform refuses it
                    found.append((where, describe(sample), f"skip: relayout: {error!r:.100}"))
                    continue
                try:
                    with strided_conversion():
                        message = run_sample(info, fn, moved, check_grad=dtype in (
                            torch.float64, torch.complex128), values=info.name not in RANDOM)
                    if not message and strides:
                        message = output_strides(info, fn, moved, all_ops=strides == "all")
                except LayoutMismatch as error:
                    message = str(error)
                if message:
                    found.append((where, describe(sample), message))
    return [("", "", "missing")] if only_missing_names(found) else found


def main(names):
    strides = "--strides" in names or "--strides=all" in names and "all"
    for flag in ("--strides", "--strides=all"):
        if flag in names:
            names.remove(flag)
    layouts = LAYOUTS
    for arg in list(names):
        if arg.startswith("--layout="):
            layouts = tuple(arg[9:].split(","))
            names.remove(arg)
    shard, shards = shard_of(names)
    report(op_db(), lambda info: probe(info, layouts=layouts, strides=strides),
           lambda k, info: k % shards == shard and (
               not names or info.name in names or full_name(info) in names), "OpInfos")


if __name__ == "__main__":
    main(sys.argv[1:])
