"""Writing through a view with autograd: torch's CopySlices. An in-place op on a view of a
tensor that requires grad (`base[1:].mul_(2)`, `x.t().add_(1)`) is recorded as `view_scatter`:
the base with the region the view's chain of view ops selects replaced, differentiable in
both (`autograd/inplace.py` calls it through `inplace.view_scatter`).

>>> import flowgrad as flow
>>> base = flow.zeros(3, requires_grad=True).clone()
>>> _ = base[1:].add_(2.0)
>>> base
tensor([0., 2., 2.], grad_fn=<CopySlices>)
"""
from __future__ import annotations

from .. import dtypes as _dt
from ..autograd import inplace as _inplace
from ..autograd.inplace import assign
from ..autograd.views import replay_view
from .registry import op


# ---- writing through a view (the CopySlices of torch) -----------------------------------------
# torch's CopySlices: a second backward through it raises
@op("view_scatter", jvp="linear", save="attrs")
def _view_scatter(xp, base, region, *, chain, overlapping=False):
    """`base` with the region that `chain` (a view's ops from its base) selects replaced.
    `overlapping`: the view's elements share memory (an expand): its backward raises."""
    # in the base's memory order, so the chain replays as views of the copy as it did of the
    # base (a reshape of a transposed base's transpose is a view; of a C-order copy, a copy
    # that the write would miss: a wrong gradient, silently)
    out = xp.empty_like(base)
    out[...] = base
    view = _replayed(xp, out, chain)
    owner = view
    while owner is not None and owner is not out:  # (as_strided's view: through an interface)
        owner = getattr(owner, "base", None)
    if owner is out:
        assign(view, region, "setitem")  # an expand's aliases are written as in place
        return out
    # (a base whose memory has gaps or runs backwards) each view element's position in the
    # base, by replaying the chain on the positions themselves: views select elements by
    # position, except those that reinterpret the bytes
    if any(view_op.name in _BYTE_VIEWS for view_op, _, _ in chain):
        raise RuntimeError(
            f"an in-place write with autograd through a {chain[-1][0].name} view of a tensor "
            f"whose memory is not dense (shape {tuple(base.shape)}, strides {base.strides}) is "
            f"not supported; call .contiguous() on that tensor first, or write under no_grad")
    out = base.copy()
    at = _replayed(xp, xp.arange(base.size).reshape(base.shape), chain)
    out.reshape(-1)[at] = region
    return out


_BYTE_VIEWS = frozenset(("real", "imag", "view_as_real", "view_as_complex", "view_dtype"))


def _replayed(xp, array, chain):
    for view_op, attrs, index in chain:
        array = view_op.kernel(xp, array, **attrs)
        if index is not None:
            array = array[index]
    return array


@_view_scatter.grad
def view_scatter_backward(ctx, dy):
    if getattr(ctx, "overlapping", False):  # torch's CopySlices writes dy into such a view
        raise RuntimeError(
            "unsupported operation: more than one element of the written-to tensor refers to a "
            "single memory location (an in-place write, such as zero_() or fill_(), through an "
            "expanded view). Please clone() the tensor before performing the operation.")
    region_shape, region_dtype = ctx.input_infos[1]
    zeros = dy.new_zeros(region_shape, dtype=_dt.from_numpy_dtype(region_dtype))
    need = ctx.needs_input_grad
    return (_view_scatter(dy, zeros, chain=ctx.chain) if need[0] else None,
            replay_view(dy, ctx.chain) if need[1] else None)


_inplace.view_scatter = _view_scatter  # autograd's writes through views call it
