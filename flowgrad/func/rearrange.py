"""`flow.func.rearrange`: einops-style reordering of a tensor's elements by a pattern
(torch.func.rearrange), composed of reshape and permute, so it differentiates as they do.

>>> import flowgrad as flow
>>> from flowgrad.func import rearrange
>>> rearrange(flow.arange(6.0).reshape(2, 3), "h w -> w h")
tensor([[0., 3.],
        [1., 4.],
        [2., 5.]])
>>> rearrange(flow.arange(6.0), "(h w) -> w h", h=2).shape
flowgrad.Size([3, 2])
"""
from __future__ import annotations

import math
import re

from ..ops.shape import stack
from ..tensor import Tensor

__all__ = ["rearrange"]

_ELLIPSIS = "..."
_TOKEN = re.compile(r"\.\.\.|\(|\)|[^\s()]+")


def rearrange(tensor, pattern, **axes_lengths):
    """Reorder `tensor`'s elements as `pattern` ("left -> right") says: each side names the
    axes, `(a b)` is one dimension made of two axes, `...` stands for the dimensions not
    named, `1` and `()` are dimensions of size 1. A group on the left may leave one axis's
    length out (the tensor's dimension gives it); the others come from `axes_lengths`. A
    list or tuple of tensors is stacked first (its own leading axis).

    >>> import flowgrad as flow
    >>> images = flow.zeros(8, 6, 4, 3)
    >>> rearrange(images, "b (h h1) (w w1) c -> b h w (c h1 w1)", h1=2, w1=2).shape
    flowgrad.Size([8, 3, 2, 12])
    >>> rearrange([flow.ones(2), flow.zeros(2)], "n d -> d n").tolist()
    [[1.0, 0.0], [1.0, 0.0]]
    """
    if isinstance(tensor, (list, tuple)):
        tensor = stack(list(tensor))
    if not isinstance(tensor, Tensor):
        raise TypeError(f"rearrange: expected a tensor or a sequence of tensors, got "
                        f"{type(tensor).__name__}")
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise ValueError(f"rearrange: the pattern must be one 'left -> right' string, got "
                         f"{pattern!r}")
    left_text, right_text = pattern.split("->")
    left, right = _parse(left_text, "left"), _parse(right_text, "right")
    _validate(left, right, axes_lengths, pattern)
    count = tensor.ndim - len(left) + 1 if _ELLIPSIS in left else 0  # (what '...' is)
    if count < 0:
        raise ValueError(f"rearrange: the left side of {pattern!r} has {len(left) - 1} "
                         f"dimensions besides '...', the tensor {tensor.ndim} (shape "
                         f"{list(tensor.shape)})")
    left, right = _expand_ellipsis(left, count), _expand_ellipsis(right, count)
    sizes = _axis_sizes(left, tuple(tensor.shape), axes_lengths, pattern)
    order = [name for name in _flat(left) if name != "1"]
    elementary = tensor.reshape([sizes[name] for name in order])
    wanted = [name for name in _flat(right) if name != "1"]
    moved = elementary.permute([order.index(name) for name in wanted])
    return moved.reshape([math.prod(sizes.get(name, 1) for name in group) for group in right])


def _parse(text, side):
    """The groups of one side: a list of lists of axis names ('1' included); a name outside
    parentheses is a group of one, and '...' outside them the string itself (the dimensions
    it stands for stay dimensions; inside parentheses they are one)."""
    groups, current = [], None
    for token in _TOKEN.findall(text):
        if token == "(":
            if current is not None:
                raise ValueError(f"rearrange: nested parentheses in the {side} side "
                                 f"{text.strip()!r}")
            current = []
        elif token == ")":
            if current is None:
                raise ValueError(f"rearrange: unbalanced ')' in the {side} side "
                                 f"{text.strip()!r}")
            groups.append(current)
            current = None
        else:
            if token != _ELLIPSIS and not (token.isidentifier() or token.isdecimal()):
                raise ValueError(f"rearrange: invalid axis name {token!r} in the {side} side "
                                 f"{text.strip()!r}; use identifiers, '...', '1' or '()'")
            if token.isdecimal() and token != "1":
                raise ValueError(f"rearrange: anonymous axis {token} in the {side} side: only "
                                 f"axes of length 1 may be unnamed; name it and give its length")
            if current is None:
                groups.append(token if token == _ELLIPSIS else [token])
            else:
                current.append(token)
    if current is not None:
        raise ValueError(f"rearrange: unbalanced '(' in the {side} side {text.strip()!r}")
    return groups


def _flat(groups):
    return [name for group in groups for name in ([group] if group == _ELLIPSIS else group)]


def _validate(left, right, axes_lengths, pattern):
    for side, groups in (("left", left), ("right", right)):
        named = [n for n in _flat(groups) if n != "1"]
        if len(named) != len(set(named)):
            raise ValueError(f"rearrange: an axis is named twice in the {side} side of "
                             f"{pattern!r}")
    if any(group != _ELLIPSIS and _ELLIPSIS in group for group in left):
        raise ValueError(f"rearrange: '...' inside parentheses on the left side of {pattern!r}")
    names = [set(_flat(g)) - {"1"} for g in (left, right)]
    if names[0] != names[1]:
        raise ValueError(f"rearrange: identifiers only on one side of {pattern!r} (each must "
                         f"be on both): {sorted(names[0] ^ names[1])}")
    for name, length in axes_lengths.items():
        if name not in names[0] or name == _ELLIPSIS:
            raise ValueError(f"rearrange: axis {name!r} given a length is not in {pattern!r}")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ValueError(f"rearrange: the length of axis {name!r} must be a non-negative "
                             f"int, got {length!r}")


def _expand_ellipsis(groups, count):
    """groups with '...' replaced by `count` axes named '...0', '...1', ..."""
    names = [f"{_ELLIPSIS}{i}" for i in range(count)]
    out = []
    for group in groups:
        if group == _ELLIPSIS:  # (dimensions of their own, not one group)
            out += [[n] for n in names]
        else:
            out.append([m for name in group for m in (names if name == _ELLIPSIS else [name])])
    return out


def _axis_sizes(left, shape, axes_lengths, pattern):
    """The length of each elementary axis of the left side, checked against the shape."""
    if len(left) != len(shape):
        raise ValueError(f"rearrange: the left side of {pattern!r} has {len(left)} dimensions, "
                         f"the tensor {len(shape)} (shape {list(shape)})")
    sizes = {}
    for group, size in zip(left, shape):
        unknown = [n for n in group if n != "1" and n not in axes_lengths]
        known = math.prod(axes_lengths[n] for n in group if n in axes_lengths)
        if len(group) == 1 and unknown:  # (one named dimension: its size)
            sizes[unknown[0]] = size
            continue
        if len(unknown) > 1:
            raise ValueError(f"rearrange: could not infer the sizes of {unknown} in "
                             f"{pattern!r}; give all but one of them as keyword lengths")
        if unknown:
            if known == 0 or size % known:
                raise ValueError(f"rearrange: dimension of size {size} cannot be split as "
                                 f"{group} with the lengths given in {pattern!r}")
            sizes[unknown[0]] = size // known
        elif known != size:
            raise ValueError(f"rearrange: dimension of size {size} does not match {group} "
                             f"(product {known}) in {pattern!r}")
        for n in group:
            if n in axes_lengths:
                sizes[n] = axes_lengths[n]
    return sizes
