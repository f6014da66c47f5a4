"""Splitting: split, chunk, tensor_split, unbind, hsplit, vsplit, dsplit.

One op, `split`, returns every piece as a view of the input (shared storage, as torch's);
its gradient is the concatenation of the pieces' gradients (zeros for unused pieces), so
splitting into k pieces costs one backward node, not k.

>>> import flowgrad as flow
>>> [p.tolist() for p in flow.arange(5).split(2)]
[[0, 1], [2, 3], [4]]
"""
from __future__ import annotations

import itertools

import numpy as np

from ..autograd.interpreter import check_read
from ..errors import int_arg, int_args
from ..tensor import Tensor, _wrap_dim, tensor_method
from .registry import op
from .shape import cat, stack

__all__ = ["split", "chunk", "tensor_split", "unbind", "hsplit", "vsplit", "dsplit"]



@op("split", jvp="linear", n_out=None, is_view=True)
def _split(xp, x, *, dim, bounds, squeeze):
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        index = (slice(None),) * dim + ((lo if squeeze else slice(lo, hi)), Ellipsis)
        pieces.append(x[index])  # the Ellipsis keeps a 0-d piece a view, not a copy
    return tuple(pieces)


@_split.grad
def split_backward(ctx, *dys):
    return (stack if ctx.squeeze else cat)(list(dys), ctx.dim)


def _pieces(input, dim, bounds, squeeze=False):
    if len(bounds) == 1:
        return ()
    if len(bounds) == 2 and not squeeze:
        return (_split(input, dim=dim, bounds=tuple(bounds), squeeze=False)[0],)
    return _split(input, dim=dim, bounds=tuple(int(b) for b in bounds), squeeze=squeeze)


def _size(input, dim, name):
    if input._data.ndim == 0:
        raise RuntimeError(f"{name}(): expected at least a 1-dimensional tensor")
    d = _wrap_dim(dim, input._data.ndim, name)
    return d, input._data.shape[d]


@tensor_method()
def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the given sizes.

    >>> import flowgrad as flow
    >>> flow.arange(5).split([1, 4])
    (tensor([0]), tensor([1, 2, 3, 4]))
    """
    d, n = _size(tensor, dim, "split")
    s = split_size_or_sections
    if isinstance(s, (list, tuple)):
        sizes = list(int_args(s, "split_with_sizes", "split_sizes", 2))
        if sum(sizes) != n or any(v < 0 for v in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
        return _pieces(tensor, d, np.cumsum([0] + sizes))
    s = int_arg(s, "split", "split_size", 2)
    if s < 0 or (s == 0 and n):
        raise RuntimeError(f"split(): split_size can only be 0 if dimension size is 0, but got "
                           f"split_size={s} for dimension {d} of size {n}")
    if n == 0:
        return _pieces(tensor, d, [0, 0])
    return _pieces(tensor, d, list(range(0, n, s)) + [n])


def _split_method(self, split_size, dim=0):
    """Tensor.split: torch names the method's argument `split_size` (the function's
    `split_size_or_sections`); it takes a size or a list of sizes all the same.

    >>> import flowgrad as flow
    >>> flow.arange(5).split(split_size=3)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    return split(self, split_size, dim)


tensor_method("split")(_split_method)


@tensor_method()
def chunk(input, chunks, dim=0):
    """At most `chunks` equal pieces along `dim` (the last may be smaller).

    >>> import flowgrad as flow
    >>> flow.arange(5).chunk(2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    """
    chunks = int_arg(chunks, "chunk", "chunks", 2)
    if chunks <= 0:
        raise RuntimeError(f"chunk(): chunk expects `chunks` to be greater than 0, got: "
                           f"{chunks}")
    d, n = _size(input, dim, "chunk")
    if n == 0:  # torch: `chunks` empty pieces
        return _pieces(input, d, [0] * (chunks + 1))
    return split(input, -(-n // chunks), d)


# torch's keyword spellings of a split's pieces: (accepted types, what the message says)
_KINDS = {"sections": ((int, np.integer), "an int"),
          "indices": ((list, tuple), "a list or tuple of ints"),
          "tensor_indices_or_sections": (Tensor, "a Tensor")}


def _one_of(name, given):
    """The one value given among torch's keyword spellings {keyword: value or None}; a
    TypeError if none, several, or one of the wrong kind (sections=[1], indices=2) is."""
    named = [(k, v) for k, v in given.items() if v is not None]
    if len(named) != 1:
        got = ", ".join(k for k, _ in named) or "none"
        raise TypeError(f"{name}() takes exactly one of {', '.join(given)}; got {got}")
    key, value = named[0]
    if key in _KINDS:
        types, what = _KINDS[key]
        if not isinstance(value, types) or isinstance(value, bool):
            raise TypeError(f"{name}(): {key} must be {what}, got {type(value).__name__}")
    return value


@tensor_method()
def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None,
                 tensor_indices_or_sections=None):
    """`sections` nearly equal pieces (the first n % sections one longer), or pieces between
    the given indices; as torch, the keyword is `sections=`, `indices=` or
    `tensor_indices_or_sections=` (an int tensor: 0-d for sections, 1-d for indices).

    >>> import flowgrad as flow
    >>> flow.tensor_split(flow.arange(5), sections=2)
    (tensor([0, 1, 2]), tensor([3, 4]))
    >>> flow.arange(5).tensor_split(indices=[1, 4])
    (tensor([0]), tensor([1, 2, 3]), tensor([4]))
    """
    s = indices_or_sections
    if s is None or sections is not None or indices is not None or \
            tensor_indices_or_sections is not None:
        s = _one_of("tensor_split", {"indices_or_sections": s, "sections": sections,
                                     "indices": indices,
                                     "tensor_indices_or_sections": tensor_indices_or_sections})
    d, n = _size(input, dim, "tensor_split")
    if isinstance(s, Tensor):
        if s._data.dtype != np.int64:  # (int32 too: torch takes long only)
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have "
                               f"dtype of long, but got {s.dtype}")
        check_read(s, "tensor_split's tensor_indices_or_sections")  # (the pieces' sizes)
        s = s._data.item() if s._data.ndim == 0 else s._data.tolist()
    if isinstance(s, (list, tuple)):
        s = int_args(s, "tensor_split", "indices", 2)
        cuts = [min(max(i + (n if i < 0 else 0), 0), n) for i in s]
        bounds = [0] + cuts + [n]
    else:
        s = int_arg(s, "tensor_split", "sections", 2)
        if s <= 0:
            raise RuntimeError(f"tensor_split(): number of sections must be larger than 0, "
                               f"got {s}")
        q, r = divmod(n, s)
        bounds = list(itertools.accumulate([q + 1] * r + [q] * (s - r), initial=0))
    # one slice per piece, as torch's: plain views (not split's multi-output ones), so a piece
    # stays usable after an in-place write to its base; decreasing indices give overlapping
    # (empty-clamped) pieces as torch's
    return tuple(input.narrow(d, a, max(a, b) - a) for a, b in zip(bounds[:-1], bounds[1:]))


@tensor_method()
def unbind(input, dim=0):
    """The slices along `dim`, each without that dim (views).

    >>> import flowgrad as flow
    >>> flow.unbind(flow.tensor([[1, 2], [3, 4]]), dim=1)
    (tensor([1, 3]), tensor([2, 4]))
    """
    if input._data.ndim == 0:  # (torch's type: an IndexError, not split's RuntimeError)
        raise IndexError(f"unbind(): Dimension specified as {dim} but tensor has no "
                         f"dimensions")
    d, n = _size(input, dim, "unbind")
    return _pieces(input, d, list(range(n + 1)), squeeze=True) if n else ()


def _split_by(input, s, dim, name, need):
    if input._data.ndim < need:
        raise RuntimeError(f"{name}(): requires a tensor with at least {need} dimension, but "
                           f"got a tensor with {input._data.ndim} dimensions!")
    n = input._data.shape[dim]
    if isinstance(s, int) and (s == 0 or n % s):
        raise RuntimeError(f"{name}(): attempted to split along dimension {dim}, but the size "
                           f"of the dimension {n} is not divisible by the split_size {s}!")
    return tensor_split(input, s, dim)


@tensor_method()
def hsplit(input, sections=None, *more, indices=None):
    """split along dim 1 (dim 0 for 1-D input) into `sections` equal parts or at indices.
    torch's keywords: `sections=` (an int) or `indices=` (a list)."""
    if more:  # x.hsplit(1, 2): torch's int[] indices given as several ints
        sections = [sections, *more]
    if sections is None or indices is not None:
        sections = _one_of("hsplit", {"sections": sections, "indices": indices})
    return _split_by(input, sections, 1 if input._data.ndim > 1 else 0, "hsplit", 1)


@tensor_method()
def vsplit(input, sections=None, *more, indices=None):
    """split along dim 0 of a >= 2-D input into `sections` equal parts or at the given indices.
    torch's keywords: `sections=` (an int) or `indices=` (a list)."""
    if more:  # x.vsplit(1, 2): torch's int[] indices given as several ints
        sections = [sections, *more]
    if sections is None or indices is not None:
        sections = _one_of("vsplit", {"sections": sections, "indices": indices})
    return _split_by(input, sections, 0, "vsplit", 2)


@tensor_method()
def dsplit(input, sections=None, *more, indices=None):
    """split along dim 2 of a >= 3-D input into `sections` equal parts or at the given indices.
    torch's keywords: `sections=` (an int) or `indices=` (a list)."""
    if more:  # x.dsplit(1, 2): torch's int[] indices given as several ints
        sections = [sections, *more]
    if sections is None or indices is not None:
        sections = _one_of("dsplit", {"sections": sections, "indices": indices})
    return _split_by(input, sections, 2, "dsplit", 3)
