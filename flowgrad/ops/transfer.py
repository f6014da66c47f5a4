"""Moving a tensor to another device (`x.to(device)`, `x.cpu()`): a recorded op, so the
gradient goes back to the device the input lives on, as torch's `to` does.

>>> import flowgrad as flow
>>> x = flow.ones(2, requires_grad=True)
>>> x.to("cpu") is x, x.cpu() is x
(True, True)
"""
from __future__ import annotations

from ..device import resolve_device, to_device
from .registry import op


@op("to_device", complex=True)
def _to_device(xp, x, *, target, source):
    # a 1-tuple: the interpreter wraps it as it is, where a lone non-NumPy result would be
    # converted with the input's module (that check costs nothing on the usual path)
    return (to_device(x, target),)


@_to_device.grad
def to_device_backward(ctx, dy):
    return _to_device(dy, target=ctx.source, source=ctx.target)


def move(input, device, op_name="to"):
    """`input` on `device` (a device or its name), itself when it lives there already; an
    unavailable device raises naming `op_name`.

    >>> import flowgrad as flow
    >>> x = flow.ones(2)
    >>> move(x, "cpu") is x
    True
    """
    target, source = resolve_device(device, op_name), input.device
    if target == source:
        return input
    return _to_device(input, target=target, source=source)
