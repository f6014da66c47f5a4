"""Moving a tensor to another device (`x.to(device)`, `x.cpu()`): a recorded op, so the
gradient goes back to the device the input lives on, as torch's `to` does; and the casts
(`x.to(dtype)`, `x.float()`, `x.type(...)`, `x.type_as(other)`).

>>> import flowgrad as flow
>>> x = flow.ones(2, requires_grad=True)
>>> x.to("cpu") is x, x.cpu() is x
(True, True)
"""
from __future__ import annotations

from .. import dtypes as _dt
from .._warn import warn_once
from ..device import resolve_device, to_device
from ..tensor import Tensor, tensor_method
from ..typed_tensors import as_tensor_dtype, format_rank, type_name
from .layout import empty_in_format, empty_preserving, row_major, suggested_format
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


def _real_if_cast_drops(xp, x, dtype):
    # torch warns (once) that a complex cast to a real dtype drops the imaginary part, where
    # NumPy gives its own ComplexWarning
    if x.dtype.kind == "c" and xp.dtype(dtype).kind not in "cb":
        warn_once("Casting complex values to real discards the imaginary part")
        return x.real
    return x


def cast_values(xp, x, dtype):
    """The array x as `dtype`, cast as torch casts (copy_, fill_ with a tensor): inf, nan and
    out-of-range values without a word (NumPy's RuntimeWarning), a complex one's real part
    with torch's warning."""
    if x.dtype == dtype:  # (the usual copy_: nothing to quiet)
        return x.astype(dtype)
    x = _real_if_cast_drops(xp, x, dtype)
    with xp.errstate(over="ignore", invalid="ignore"):
        return x.astype(dtype)


@op("cast", jvp="linear")
def _cast(xp, x, *, dtype, rank=None):
    # (torch casts inf, nan and out-of-range values without a word: NumPy would warn)
    like = x
    x = _real_if_cast_drops(xp, x, dtype)
    with xp.errstate(over="ignore", invalid="ignore"):
        if rank is not None:  # a memory format asked for (0: C order; 4, 5: channels_last)
            out = empty_in_format(xp, like.shape, dtype, rank)
        elif row_major(like):
            return x.astype(dtype)
        else:
            out = empty_preserving(xp, like, dtype)  # (torch's preserve_format layout)
        xp.copyto(out, x, casting="unsafe")
        return out


@_cast.grad
def cast_backward(ctx, dy):
    return dy  # the engine casts the grad back to the input's dtype


def _is_dtype(a):
    return isinstance(a, (_dt.dtype, type)) or (
        type(a).__module__ == "torch" and "dtype" in type(a).__name__) or (
        isinstance(a, str) and a.replace("torch.", "") in _dt._BY_NAME)


def _to_args(args, dtype, device, non_blocking, copy):
    """torch's positional forms of Tensor.to: (dtype, non_blocking, copy),
    (device, dtype, non_blocking, copy) and (other, non_blocking, copy)."""
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        other = rest.pop(0)
        dtype, device = other.dtype, other.device
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
    elif rest and not isinstance(rest[0], bool):
        device = rest.pop(0)  # a device or its name: move() raises for unavailable ones
        if rest and (rest[0] is None or _is_dtype(rest[0])):
            dtype = rest.pop(0)
    if len(rest) > 2 or not all(isinstance(a, bool) for a in rest):
        raise TypeError(f"to() received an invalid combination of arguments: "
                        f"{tuple(type(a).__name__ for a in args)}; expected (dtype, "
                        f"non_blocking, copy), (device, dtype, non_blocking, copy) or "
                        f"(tensor, non_blocking, copy)")
    non_blocking, copy = (rest + [non_blocking, copy][len(rest):])[:2]
    return dtype, device, copy


@tensor_method("to")
def to(input, *args, dtype=None, device=None, copy=False, non_blocking=False,
       memory_format=None, **_):
    """Convert dtype (`x.to(flow.float64)`, `x.to(other)`) and move to a device (the CPU or
    a registered one); torch's positional forms (`x.to("cpu", flow.float64, False, True)`)
    too. A memory_format lays the result out so (channels_last: NHWC), a copy unless the
    input's strides suggest that format already (torch's); copy=True always copies.

    >>> import flowgrad as flow
    >>> flow.ones(2).to("cpu", flow.float64, False, True)
    tensor([1., 1.], dtype=flowgrad.float64)
    """
    dtype, device, copy = _to_args(args, dtype, device, non_blocking, copy)
    rank = None if memory_format is None else format_rank(memory_format, input.ndim, "to")
    np_dtype = None if dtype is None else _dt.as_dtype(dtype).np
    if np_dtype == input._data.dtype:
        np_dtype = None
    if rank is not None and not copy and np_dtype is None and \
            suggested_format(input._data) == rank:
        rank = None  # (torch's to_will_alias: the input itself where it suggests that format)
    out = input
    if rank is not None:  # one copy (torch's _to_copy) in the layout asked
        out = _cast(input, dtype=input._data.dtype if np_dtype is None else np_dtype, rank=rank)
    elif np_dtype is not None:
        out = _cast(input, dtype=np_dtype)
    if device is not None:
        out = move(out, device)
    if copy and out is input:
        out = input.clone()
    return out


def _caster(d):
    return lambda self, memory_format=None: to(self, d, memory_format=memory_format)


for _name, _d in (("float", _dt.float32), ("double", _dt.float64), ("half", _dt.float16),
                  ("long", _dt.int64), ("int", _dt.int32), ("short", _dt.int16),
                  ("bool", _dt.bool), ("byte", _dt.uint8), ("char", _dt.int8)):
    setattr(Tensor, _name, _caster(_d))
if _dt.bfloat16 is not None:
    Tensor.bfloat16 = _caster(_dt.bfloat16)


@tensor_method()
def type_as(input, other):
    """`input` converted to other's dtype."""
    return to(input, other.dtype)


@tensor_method("type")
def _type(input, dtype=None, non_blocking=False, **kwargs):
    """Without an argument the type's name ('flowgrad.FloatTensor'); with a dtype, a typed
    class (flow.DoubleTensor) or a name ('torch.LongTensor'), `input` converted to it."""
    if dtype is None:
        return type_name(input.dtype)
    return to(input, as_tensor_dtype(dtype))


@tensor_method()
def cpu(input, memory_format=None):
    """`input` on the CPU: itself when it lives there (memory_format is ignored)."""
    return move(input, "cpu", "cpu")


@tensor_method()
def cuda(input, *args, **kwargs):
    """Always raises: flowgrad has no CUDA device."""
    raise RuntimeError("flowgrad has no CUDA device yet: tensors live on 'cpu' (NumPy)")
