"""More of torch's ways to make a tensor: `asarray` (shares memory where it can), `frombuffer`,
`empty_strided`, `empty_permuted`, the deprecated inclusive `range`, functional `fill`, the
default device, and the CPU-only Python-callable methods `Tensor.apply_` / `map_`.

>>> import flowgrad as flow
>>> import numpy as np
>>> a = np.arange(3.0)
>>> t = flow.asarray(a); a[0] = 9.0
>>> t
tensor([9., 1., 2.], dtype=flowgrad.float64)
>>> flow.empty_strided((2, 3), (1, 2)).stride()
(1, 2)
"""
from __future__ import annotations

import math
import os

import numpy as np

from .. import dtypes as _dt
from .._warn import warn, warn_once
from ..autograd.inplace import run_inplace
from ..device import ARRAY_MODULES, CPU, DEFAULT_DEVICE, array_module, device_of, resolve_device
from ..device import device as _device_class
from ..tensor import Size, Tensor
from .creation import FACTORY_HINTS, _finish, _size, as_tensor, check_hints, empty, tensor
from .elementwise_more import _fill_value, _filled

__all__ = ["asarray", "frombuffer", "from_file", "empty_strided", "empty_permuted", "range", "fill",
           "get_default_device", "set_default_device"]


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """`obj` as a tensor: a tensor or an array of the same dtype is shared (copy=None or
    False), anything else is converted; copy=True always copies, copy=False raises where it
    cannot share. A tensor converted or copied keeps its history (`to`, `clone`), and
    requires_grad follows it unless given, as torch 2.13's.

    >>> import flowgrad as flow
    >>> x = flow.ones(2)
    >>> flow.asarray(x) is x, flow.asarray([1, 2.5]).dtype
    (True, flowgrad.float32)
    """
    target = None if dtype is None else _dt.as_dtype(dtype)
    if isinstance(obj, Tensor):
        if requires_grad is None and obj.requires_grad:
            requires_grad = True  # (so an integer dtype= refuses it, as torch's)
            warn_once("asarray: unspecified requires_grad now defaults to "
                      "obj.requires_grad instead of False. Pass requires_grad=False explicitly "
                      "to get the old behavior and silence this warning.")
        place = obj.device if device is None else resolve_device(device, "asarray")
        same = (target is None or target is obj.dtype) and place == obj.device
        if copy is False and not same:
            raise ValueError(f"asarray: can't alias a tensor with dtype {obj.dtype.name} on "
                             f"{obj.device} into dtype {target.name if target else ''} on "
                             f"{place}; pass copy=None to allow a copy")
        out = obj if same else obj.to(dtype=target or obj.dtype, device=place)
        if copy is True and out is obj:
            out = obj.clone()
        if requires_grad is False and out.requires_grad:
            if out is obj and obj.is_leaf:  # torch 2.13 hands back the leaf itself, flag off
                return obj.requires_grad_(False)
            return out.detach()
        return out._set_requires_grad(True) if requires_grad and not out.requires_grad else out
    if isinstance(obj, np.ndarray) or type(obj) in ARRAY_MODULES:
        same = (target is None or target is _dt.from_numpy_dtype(obj.dtype)) and (
            device is None or resolve_device(device, "asarray") == device_of(obj))
        if same and copy is not True:
            out = as_tensor(obj)
            return out._set_requires_grad(True) if requires_grad else out
        if copy is False:
            raise ValueError(f"asarray: can't alias an array of dtype {obj.dtype} into dtype "
                             f"{target.name if target else obj.dtype} on device {device}; "
                             f"pass copy=None to allow a copy")
    elif _is_buffer(obj):  # torch reads a buffer's bytes in the dtype (default float)
        out = frombuffer(obj, dtype=target or _dt.get_default_dtype())
        out = out.clone() if copy else out
        if device is not None:
            out = out.to(device=resolve_device(device, "asarray"))
        return out._set_requires_grad(True) if requires_grad else out
    elif copy is False:
        error = RuntimeError if isinstance(obj, np.generic) else ValueError  # (torch's types)
        raise error(f"asarray: can't alias a {type(obj).__name__} (it holds no tensor "
                    f"storage); pass copy=None to allow a copy")
    if isinstance(obj, np.generic):  # torch's asarray casts a NumPy scalar as an array
        obj = np.asarray(obj)  # (wrapping: -1.0 into uint8 is 255), where tensor() checks
    return tensor(obj, dtype=target, device=device, requires_grad=bool(requires_grad))


def _is_buffer(obj):
    """Whether asarray reads `obj` as raw bytes: an object with the buffer protocol
    (bytes, bytearray, memoryview, array.array) other than NumPy's scalars, which are numbers."""
    if isinstance(obj, (np.generic, str)):
        return False
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-D tensor sharing memory with a Python buffer (bytes, bytearray, memoryview, ...):
    `count` elements (-1: all) starting `offset` bytes in.

    >>> import flowgrad as flow
    >>> flow.frombuffer(bytearray(b"\\x01\\x02\\x03"), dtype=flow.uint8)
    tensor([1, 2, 3], dtype=flowgrad.uint8)
    """
    d = _dt.as_dtype(dtype)
    size = memoryview(buffer).nbytes
    if offset < 0 or offset >= size and size:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and "
                         f"smaller than the buffer's length ({size} bytes)")
    if count == 0:
        raise ValueError("frombuffer: count must be positive, or negative for all elements")
    count = -1 if count < 0 else count  # (torch takes any negative count as 'all')
    item = np.dtype(d.np).itemsize
    if count == -1 and (size - offset) % item:
        raise ValueError(f"frombuffer: the buffer's length after the offset ({size - offset} "
                         f"bytes) is not a multiple of the element size ({item} bytes)")
    if count > 0 and offset + count * item > size:
        raise ValueError(f"frombuffer: {count} elements of {item} bytes from offset {offset} "
                         f"run past the buffer's {size} bytes")
    array = np.frombuffer(buffer, dtype=d.np, count=count, offset=offset)
    if not array.flags.writeable:
        warn("frombuffer: the buffer is not writable; writing to the tensor fails "
             "(copy it with .clone() to write)", UserWarning, stacklevel=2)
    return _finish(array, requires_grad)


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False, requires_grad=False):
    """A 1-D tensor of `size` elements whose storage is the file `filename`, memory-mapped
    (raw bytes in the machine's order, as torch's): with `shared` writes to the tensor go to
    the file (created, or grown, to fit), else they stay in memory and the file must hold
    the elements already. Nothing in the file is run: it is read as numbers only.

    >>> import flowgrad as flow, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> t = flow.from_file(path, shared=True, size=3, dtype=flow.int32)
    >>> t += 7; flow.from_file(path, size=3, dtype=flow.int32)
    tensor([7, 7, 7], dtype=flowgrad.int32)
    """
    check_hints("from_file", {"layout": layout, "pin_memory": pin_memory}, FACTORY_HINTS)
    if resolve_device(device, "from_file").type != "cpu":
        raise RuntimeError(f"from_file: only CPU tensors can be mapped to files, not "
                           f"device={device}; map it, then move it with .to(device)")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    size = int(size)
    if size < 0:
        raise RuntimeError(f"from_file: size must be non-negative, got {size}")
    need = size * np.dtype(d.np).itemsize
    try:
        exists = os.path.getsize(filename)
    except OSError as error:
        if not shared:
            raise RuntimeError(f"from_file: unable to open file <{filename}> in read-only "
                               f"mode: {error.strerror}") from None
        exists = None
    if not shared and exists < need:
        raise RuntimeError(f"from_file: file <{filename}> size <{exists}> is smaller than the "
                           f"required mapping size <{need}>; pass a smaller size, or "
                           f"shared=True to grow the file")
    if need == 0:
        return _finish(np.empty(0, d.np), requires_grad)
    if shared and (exists is None or exists < need):
        with open(filename, "ab") as f:  # (grown with zeros, as torch's ftruncate)
            f.truncate(need)
    mapped = np.memmap(filename, dtype=d.np, mode="r+" if shared else "c", shape=(size,))
    return _finish(mapped.view(np.ndarray), requires_grad)


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False, **options):
    """A tensor of `size` whose elements lie `stride` elements apart per dim (zeros here).

    >>> import flowgrad as flow
    >>> flow.empty_strided((2, 2), (1, 2)).is_contiguous()
    False
    """
    check_hints("empty_strided", options, FACTORY_HINTS)
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: mismatch in length of strides and shape: size "
                           f"{size} has {len(size)} dims, stride {stride} {len(stride)}")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: sizes and strides must be non-negative, got size "
                           f"{size} and stride {stride}")
    dev = resolve_device(device, "empty_strided")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    extent = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    storage = dev.xp.zeros(extent, d.np)
    item = storage.itemsize
    array = np.lib.stride_tricks.as_strided(storage, size, tuple(s * item for s in stride))
    return _finish(array, requires_grad, dev)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """A tensor of `size` whose dims lie in memory in the order `physical_layout` (outermost
    first), zeros here: empty(size permuted to that order), permuted back, so its strides
    are torch's.

    >>> import flowgrad as flow
    >>> flow.empty_permuted((2, 3, 4), (0, 2, 1)).stride()
    (12, 1, 3)
    """
    check_hints("empty_permuted", {"layout": layout, "pin_memory": pin_memory})
    size = _size((size,), "empty_permuted")
    order = tuple(int(p) for p in physical_layout)
    n = len(size)
    if len(order) != n:
        raise RuntimeError(f"empty_permuted: Number of dimensions in size does not match the "
                           f"length of the physical_layout; i.e. len(size) = {n} is not equal "
                           f"to len(physical_layout) = {len(order)}")
    for i, p in enumerate(order):
        if not 0 <= p < n:  # (torch takes no negative dims here)
            raise RuntimeError(f"empty_permuted: Dimension out of range (expected to be "
                               f"between 0 and {n - 1}, but got {p} at index {i}).  NB: "
                               f"negative dims not currently supported")
    if len(set(order)) != n:
        raise RuntimeError(f"empty_permuted: Duplicate dim not allowed in physical_layout "
                           f"{order}; pass a permutation of range({n})")
    # the row-major strides of the physical order (a dim of size 0 or 1 counts as 1, as
    # torch's, where NumPy would give a zero-size array zero strides), read back per dim
    physical_stride, step = [0] * n, 1
    for p in reversed(order):
        physical_stride[p], step = step, step * max(size[p], 1)
    return empty_strided(size, physical_stride, dtype=dtype, device=device,
                         requires_grad=requires_grad)


def _new_empty_strided(self, size, stride, *, dtype=None, device=None, requires_grad=False,
                       **_):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype,
                         device=self.device if device is None else device,
                         requires_grad=requires_grad)


def range(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False, **options):
    """Deprecated in torch: values from start to end *inclusive* by step, in the default
    float dtype. Use `arange` (end exclusive)."""
    check_hints("range", options, frozenset(("layout",)))
    warn("torch.range is deprecated and will be removed in a future release because "
         "its behavior is inconsistent with Python's range builtin. Instead, use "
         "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        raise TypeError("range() missing required argument 'end'")
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0 or (end - start) * step < 0:
        raise RuntimeError(f"range: upper bound and larger bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if d.category in (0, 3):  # (bool, complex: as arange)
        raise NotImplementedError(f"range(): not implemented for dtype {d.name} (as torch); "
                                  f"make an integer or floating range and convert it")
    count = math.floor((end - start) / step) + 1
    values = (start + step * np.arange(count, dtype=np.float64)).astype(d.np)
    return _finish(values, requires_grad, resolve_device(device, "range"))


def fill(input, value):
    """A new tensor of input's shape and dtype filled with `value` (a number or a 0-d
    tensor, whose gradient is the sum of the output's)."""
    value_tensor = _fill_value(input, value, "fill")
    return run_inplace("fill", _filled, input.clone(), value_tensor)


def get_default_device():
    """The device factories use when none is named: the CPU unless set_default_device (or a
    device context) chose another ('meta', or a registered device)."""
    return resolve_device(None, "get_default_device")


def set_default_device(device):
    """Make `device` (the CPU, 'meta', or a registered device; None: the CPU) the one
    factories use when none is named."""
    dev = None if device is None else resolve_device(device, "set_default_device")
    DEFAULT_DEVICE[0] = None if dev == CPU else dev


_DEFAULT_STACK = []  # the defaults the open device contexts replaced


def _enter_default(self):
    """`with flowgrad.device(d):` makes d the factories' default device inside the block, as
    torch's device context."""
    _DEFAULT_STACK.append(DEFAULT_DEVICE[0])
    set_default_device(self)
    return self


def _exit_default(self, *exc):
    DEFAULT_DEVICE[0] = _DEFAULT_STACK.pop()
    return False


_device_class.__enter__, _device_class.__exit__ = _enter_default, _exit_default


def _apply(self, callable):
    """Apply a Python callable to every element, in place (CPU, no autograd), as torch's."""
    _refuse_grad(self, "apply_")
    return _write_elementwise(self, "apply_", callable, self._data)


def _map(self, tensor, callable):
    """self[i] = callable(self[i], tensor[i]) for every element (tensor broadcast), in place."""
    _refuse_grad(self, "map_")
    _refuse_grad(tensor, "map_")
    xp = array_module(self._data)
    return _write_elementwise(self, "map_", callable, self._data,
                              xp.broadcast_to(tensor._data, self._data.shape))


def _map2(self, x, y, callable):
    """self[i] = callable(self[i], x[i], y[i]) for every element (x, y broadcast), in place."""
    for t in (self, x, y):
        _refuse_grad(t, "map2_")
    xp = array_module(self._data)
    return _write_elementwise(self, "map2_", callable, self._data,
                              xp.broadcast_to(x._data, self._data.shape),
                              xp.broadcast_to(y._data, self._data.shape))


def _write_elementwise(self, name, fn, *arrays):
    xp = array_module(self._data)
    values = xp.vectorize(fn, otypes=[self._data.dtype])(*arrays) if self._data.size \
        else self._data.copy()
    return run_inplace(name, _filled, self, Tensor._wrap(xp.asarray(values, self._data.dtype)))


def _refuse_grad(t, name):
    if t.requires_grad:
        raise RuntimeError(f"Can't call {name}() on a tensor that requires grad (shape "
                           f"{tuple(t.shape)}): a Python callable has no gradient; use "
                           f"t.detach().{name}() instead")


Tensor.apply_, Tensor.map_, Tensor.map2_ = _apply, _map, _map2
Tensor.new_empty_strided = _new_empty_strided


def new(self, *args, device=None):
    """torch's legacy `x.new(...)`, common in older code (`h = w.new(b, n).zero_()`):
    sizes (or a Size) give an uninitialised tensor of x's dtype, a list/tuple/array of data a
    tensor of x's dtype, a tensor of x's dtype an alias of it, nothing an empty tensor."""
    dev = self.device if device is None else device
    if not args:
        return empty(0, dtype=self.dtype, device=dev)
    first = args[0]
    if len(args) == 1 and isinstance(first, Tensor):
        if first.dtype != self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype}, got {first.dtype} "
                            f"(convert it with .to({self.dtype}))")
        return first.view_as(first)
    if len(args) == 1 and isinstance(first, Size):
        return empty(*first, dtype=self.dtype, device=dev)
    if len(args) == 1 and isinstance(first, (list, tuple, np.ndarray)):
        return tensor(first, dtype=self.dtype, device=dev)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return empty(*args, dtype=self.dtype, device=dev)
    if len(args) == 1:
        raise TypeError(f"new(): data must be a sequence (got {type(first).__name__})")
    raise TypeError(f"new() received an invalid combination of arguments - got "
                    f"({', '.join(type(a).__name__ for a in args)}): pass sizes as ints, or "
                    f"one sequence of data")


Tensor.new = new
