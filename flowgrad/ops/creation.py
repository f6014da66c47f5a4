"""Tensor factories: tensor, zeros, ones, full, eye (the ranges, arange, linspace and logspace,
are in ranges.py, and the random ones, rand, randn, ..., in random_factories.py; both are
named here too).

Factories set requires_grad last, so making a tensor records nothing.

>>> import flowgrad as flow
>>> flow.zeros(2, 3).shape
flowgrad.Size([2, 3])
"""
from __future__ import annotations

import builtins
import itertools
import math
import numbers
import operator

import numpy as np

from .. import dtypes as _dt
from .._warn import called_by_user, warn
from ..autograd import inference
from ..autograd import interpreter as _interpreter
from ..device import (
    ARRAY_MODULES,
    CPU,
    DEFAULT_DEVICE,
    array_module,
    device_of,
    resolve_device,
    to_device,
)
from ..errors import check_number, fill_checks_overflow, fill_scalar
from ..tensor import Size, Tensor, bind_late
from ..typed_tensors import format_rank, preserve_format
from .creation_nest import torch_reading
from .layout import empty_preserving, fresh_in_format, row_major

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like",
    "ones_like", "full_like", "empty_like", "arange", "linspace", "logspace", "eye", "rand",
    "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "normal",
    "bernoulli", "multinomial", "scalar_tensor",
]


_MAX_DIMS = 64  # NumPy's limit on an array's dims
_SEQ = (list, tuple, range)  # torch.tensor(range(n)) is a list of ints, as torch
_SEQ_TYPES = frozenset(_SEQ)


def _contains_itself(data):
    """Whether a list/tuple in `data` is nested inside itself (depth-first, explicit stack;
    each sublist is entered once)."""
    done, path = set(), set()
    stack = [(data, iter(data))]
    path.add(id(data))
    while stack:
        seq, items = stack[-1]
        for x in items:
            if isinstance(x, _SEQ) and id(x) not in done:
                if id(x) in path:
                    return True
                path.add(id(x))
                stack.append((x, iter(x)))
                break
        else:
            stack.pop()
            path.discard(id(seq))
            done.add(id(seq))
    return False


class _NestingError(ValueError):
    """Data that contains itself or nests too deep: no shape for torch's reading to take."""


def _nesting_error(data):
    if _contains_itself(data):
        return _NestingError("flow.tensor(): the data contains itself (a list or tuple nested "
                          "inside itself), so it has no finite shape; pass nested lists of "
                          "numbers")
    return _NestingError(f"flow.tensor(): the data is nested more than {_MAX_DIMS} lists/tuples "
                      f"deep, but a tensor has at most {_MAX_DIMS} dims")


def _scan(data):
    """Walk nested lists/tuples level by level, with no recursion: ({leaf type: one leaf of
    that type}, the Tensor and ndarray leaves). A sublist repeated at one level is visited
    once, so `[[1.0] * 100] * 100` visits one inner list. Data that contains itself or nests
    more than 64 deep raises a ValueError saying so."""
    examples, arrays = {}, []
    level = [data]
    depth = 0
    while level:
        types = set(map(type, level))
        if not types <= _SEQ_TYPES:
            leaf = {t for t in types if not issubclass(t, _SEQ)}
            for t in leaf - examples.keys():
                examples[t] = next(x for x in level if type(x) is t)
            if any(issubclass(t, (Tensor, np.ndarray)) for t in leaf):
                arrays.extend(x for x in level if isinstance(x, (Tensor, np.ndarray)))
            if len(leaf) == len(types):
                break
            level = [x for x in level if type(x) not in leaf]
        depth += 1
        if depth > _MAX_DIMS:
            raise _nesting_error(data)
        level = list(itertools.chain.from_iterable(dict(zip(map(id, level), level)).values()))
    return examples, arrays


def _dtype_of(examples, arrays, typed_numpy_scalars=True):
    """torch.tensor's dtype inference from _scan's leaves: a Python bool, int, float or complex
    counts as bool, int64, the default float or complex; a NumPy scalar, array or tensor with
    its own dtype (`[np.float64(1.0), 2]` is float64, `[np.int32(1)]` int32; an integer
    scalar of a dtype flowgrad lacks, uint16 to uint64, as int64); then promoted. Without
    `typed_numpy_scalars` a NumPy scalar counts as the Python number it is, a np.bool_ as a
    float (torch.full's and arange's inference: see dtypes.scalar_value)."""
    kinds = {x.dtype if isinstance(x, Tensor) else _dt.from_numpy_dtype(x.dtype)
             for x in arrays}
    for t, x in examples.items():
        if issubclass(t, (Tensor, np.ndarray)):
            continue
        if typed_numpy_scalars and issubclass(t, np.generic) and t is not np.object_:
            if issubclass(t, np.unsignedinteger) and np.dtype(t).itemsize > 1:
                kinds.add(_dt.int64)
            else:
                kinds.add(_dt.from_numpy_dtype(np.dtype(t)))
        elif issubclass(t, bool):
            kinds.add(_dt.bool)
        elif issubclass(t, (int, np.integer)):
            kinds.add(_dt.int64)
        elif issubclass(t, (float, np.floating, np.bool_)):  # (np.bool_: dtypes.scalar_value)
            kinds.add(_dt.get_default_dtype())
        elif issubclass(t, (complex, np.complexfloating)):
            kinds.add(_dt.as_dtype(_dt.default_complex()))
        else:
            raise TypeError(f"tensor(): element {x!r} of type {t.__name__} is not a number; "
                            f"pass numbers, lists, arrays or tensors")
    result = None
    for d in kinds:
        result = d if result is None else _dt.promote_types(result, d)
    return result or _dt.get_default_dtype()


def _infer_dtype(data):
    """torch's dtype inference for a fill value or range bounds (full, arange): Python
    numbers, NumPy scalars among them, bool < int64 < default float < complex."""
    return _dtype_of(*_scan(data), typed_numpy_scalars=False)


def _unwrap(data):
    """`data` (acyclic: _scan checked) with each Tensor leaf replaced by its one value, as
    torch reads a tensor inside a list (`[t([1.0]), t([2.0])]` has shape (2,); a tensor of
    several values raises); the lists/tuples are copied as lists, iteratively (each shared
    sublist once)."""
    copies = {}
    root = [data]
    stack = [root]
    while stack:
        seq = stack.pop()
        for i, x in enumerate(seq):
            if isinstance(x, Tensor):
                if x._data.size != 1:
                    raise ValueError(
                        f"tensor(): a tensor of shape {tuple(x.shape)} inside a list: only "
                        f"one element tensors can be converted to Python scalars (as torch); "
                        f"use flow.stack to stack tensors")
                seq[i] = x._data.reshape(())
            elif isinstance(x, _SEQ):
                copy = copies.get(id(x))
                if copy is None:
                    copy = copies[id(x)] = list(x)
                    stack.append(copy)
                seq[i] = copy
    return root[0]


def as_array(data, dtype=None):
    """A fresh NumPy array from Python data, an array or a tensor, as torch would type it."""
    if isinstance(data, Tensor):
        _interpreter.check_read(data, "tensor(a tensor)")  # a copy of its values: a graph refuses
        arr = data._data
        return _cast_array(arr, dtype) if dtype is not None else arr.copy()
    if isinstance(data, np.ndarray) or type(data) in ARRAY_MODULES:  # any device's array
        if dtype is None:
            _dt.from_numpy_dtype(data.dtype)  # raises for unsupported dtypes
            return data.copy()
        return _cast_array(data, dtype)
    if np.isscalar(data) and isinstance(data, np.generic):
        d = dtype or _dt.from_numpy_dtype(data.dtype)
        if d.category < 2:
            _check_index_leaves({type(data): data}, (), d)
        if d.category == 1:  # checked as a nest's numbers are (np.float64(-1.0) wrapped to 255)
            info = np.iinfo(d.np)
            _check_fits(data, data, d, info, -info.max if d.np == np.uint8 else info.min)
        return _cast_array(np.asarray(data), d)
    try:
        return _from_nest(data, dtype)
    except (ValueError, TypeError, RuntimeError) as error:
        if not isinstance(data, (list, tuple)) or isinstance(error, _NestingError):
            raise
        try:  # (the error path only: torch's reading of a ragged nest, in its order)
            d = dtype or _dtype_of(*_scan(data))
        except Exception:  # noqa: BLE001 (no dtype: the nest's own error stands)
            raise error from None
        return torch_reading(data, d, dtype is None, error, _check_leaf)


def _check_index_leaves(examples, arrays, dtype):
    """torch stores numbers into an integer or bool dtype through __index__ (a Python float,
    and NumPy's float64, its subclass, by value; bool takes complex128, a Python complex, by
    its truth): NumPy's other float and complex scalars, a NumPy bool into an integer dtype
    and a 0-d float or complex tensor are refused (TypeError), where NumPy converts them."""
    for t, x in examples.items():
        if (issubclass(t, (np.floating, np.complexfloating)) and t is not np.float64 and
                not (t is np.complex128 and dtype.category == 0)) or \
                (t is np.bool_ and dtype.category == 1):
            raise TypeError(f"tensor(): '{type(x).__module__}.{t.__name__}' object cannot be "
                            f"interpreted as an integer (torch reads NumPy scalars into "
                            f"{dtype.name} by __index__); convert it with int() or float() "
                            f"first")
    for a in arrays:
        if isinstance(a, Tensor) and a._data.ndim == 0 and a._data.dtype.kind in "fcV":
            raise TypeError(f"tensor(): only integer tensors of a single element can be "
                            f"converted to an index: a 0-d {a.dtype.name} tensor in a list "
                            f"going to {dtype.name}; convert it with .item() or .to() first")


def _check_leaf(x, dtype):
    if dtype.category < 2:
        _check_index_leaves({type(x): x}, [x], dtype)
    if dtype.category == 1:  # (a 0-d tensor's value too: int32 2**31 - 1 into int8)
        _check_range(*(([], [x]) if isinstance(x, Tensor) else (x, [])), dtype)


def _from_nest(data, dtype):
    examples, arrays = _scan(data)
    inferred = _dtype_of(examples, arrays)  # raises for leaves that are no numbers (None, str)
    dtype = dtype or inferred
    if dtype.category < 2:
        _check_index_leaves(examples, arrays, dtype)
    if inferred.category == 3 and dtype.category in (1, 2):  # (bool takes the truth value)
        _check_real(data, arrays, dtype)
    if hasattr(data, "__array__") and not isinstance(data, _SEQ):
        return np.array(data, dtype=dtype.np)
    has_tensors = False
    for a in arrays:
        if isinstance(a, Tensor):
            _interpreter.check_read(a, "tensor(a list of tensors)")
            has_tensors = True
    data = _unwrap(data) if has_tensors else data
    if dtype.category == 1:
        _check_range(data, arrays, dtype)
    if inferred.category == 3 and dtype.category in (1, 2):
        data = np.array(data, np.complex128).real  # _check_real allowed (and warned of) this
    try:
        with np.errstate(over="ignore"):  # (a float beyond float16/32 is inf, as in torch)
            return np.array(data, dtype=dtype.np)
    except TypeError:
        if dtype.np.kind != "V":
            raise
        # (ml_dtypes' bfloat16 refuses a Python int beyond int64, a uint64: by float64)
        return np.array(data, dtype=np.float64).astype(dtype.np)
    except OverflowError as error:  # torch's uint8 takes -255..-1 modulo 256; the rest raise
        if dtype.np == np.uint8:
            wide = np.array(data, dtype=np.int64)
            if wide.min() >= -255 and wide.max() <= 255:
                return (wide % 256).astype(np.uint8)
        if _beyond_int64(data):  # torch's ValueError, from reading the int as a long long
            raise ValueError(f"tensor(): Overflow when unpacking long long: a Python int "
                             f"beyond int64 cannot become a {dtype.name} tensor; pass "
                             f"dtype=float64 (or a float) for a value this large") from None
        raise RuntimeError(f"tensor(): a value cannot be converted to type {dtype.name} without "
                           f"overflow ({error}); pass a dtype that holds it (float64 beyond "
                           f"int64)") from None


def _beyond_int64(data):
    """Whether `data` (nested Python numbers) holds an int beyond int64 (not a float)."""
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, int) and not -2 ** 63 <= x < 2 ** 63:
            return True
    return False


def _check_range(data, arrays, dtype):
    """torch's checked conversion of a nest's numbers and 0-d tensors into an integer dtype:
    nan, inf and values beyond the dtype's range raise (NumPy would wrap -1.0 into uint8's 255
    and a 0-d int64 tensor's -2**63 into int8's 0), an int beyond int64 with torch's
    ValueError; uint8 takes ints -255..-1 modulo 256. The first that does not fit is named."""
    info = np.iinfo(dtype.np)
    low = -info.max if dtype.np == np.uint8 else info.min
    if not arrays and _all_fit(data, info, low):
        return
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
            continue
        if isinstance(x, builtins.int) and not isinstance(x, bool) and \
                not -2 ** 63 <= x < 2 ** 63:
            raise ValueError(f"tensor(): Overflow when unpacking long long: a Python int "
                             f"beyond int64 ({x}) cannot become a {dtype.name} tensor; pass "
                             f"dtype=float64 (or a float) for a value this large")
        if x.__class__ is builtins.int:  # (the common leaves: no NumPy call)
            if not low <= x <= info.max:
                _overflow(x, dtype)
        elif x.__class__ is float:
            if not float(info.min) <= x <= float(info.max):
                _overflow(x, dtype)
        elif isinstance(x, (np.floating, np.integer)):
            _check_fits(x, x, dtype, info, low)
    for a in arrays:
        if isinstance(a, Tensor):
            _check_fits(a._data, a._data.item() if a._data.size == 1 else a._data, dtype, info,
                        low)


def _all_fit(data, info, low):
    """The fast path of `_check_range`: a nest that NumPy reads as int64 or float64 values,
    all of them in the dtype's range (a negative float for uint8 is looked at one by one)."""
    try:
        with np.errstate(all="ignore"):
            flat = np.array(data)
    except (ValueError, OverflowError, TypeError):
        return False
    if flat.size == 0:
        return True
    if flat.dtype == np.int64:
        return low <= flat.min() and flat.max() <= info.max
    return flat.dtype == np.float64 and bool(np.isfinite(flat).all()) and \
        float(info.min) <= flat.min() and flat.max() <= float(info.max)


def _overflow(x, dtype):
    raise RuntimeError(f"tensor(): value {x} cannot be converted to type {dtype.name} without "
                       f"overflow; pass a floating dtype or round and clamp the values into the "
                       f"dtype's range first")


def _check_fits(x, shown, dtype, info, low):
    v = np.asarray(x)
    v = v.real if v.dtype.kind == "c" else v  # (_check_real refuses an imaginary part)
    if v.size == 0 or v.dtype.kind == "b":
        return
    if v.dtype.kind in "iu":
        bad = v.min() < low or v.max() > info.max
    else:
        bad = not np.all((float(info.min) <= v) & (v <= float(info.max)))
    if bad:
        _overflow(shown, dtype)

def _cast_array(array, dtype):
    """A whole array or tensor cast to `dtype`: complex into a real dtype keeps the real part
    with torch's warning."""
    if array.dtype.kind == "c" and dtype.category in (1, 2):  # (bool: nonzero, as torch)
        warn("Casting complex values to real discards the imaginary part",
             UserWarning, stacklevel=4)
        array = array.real
    with np.errstate(over="ignore", invalid="ignore"):  # torch casts inf/nan silently too
        return array.astype(dtype.np)


def _check_real(data, arrays, dtype):
    """Complex numbers in a list going into a real dtype, as torch: a complex tensor with an
    imaginary part raises, and so does a Python complex number; NumPy's complex scalars and
    arrays keep their real part with the warning."""
    examples = _scan(data)[0]
    stack = [data]  # the first refused in the nest's order, as torch stores them
    while (arrays or complex in examples) and stack:
        x = stack.pop()
        if isinstance(x, _SEQ):
            stack.extend(reversed(x))
        elif isinstance(x, Tensor) and x._data.dtype.kind == "c" and np.any(x._data.imag != 0):
            raise RuntimeError(f"tensor(): a complex tensor ({x.item()}) cannot be converted "
                               f"to type {dtype.name} without overflow; pass a complex dtype "
                               f"or take .real first")
        elif type(x) is complex:
            raise TypeError(f"tensor(): a Python complex number ({x!r}) cannot be converted "
                            f"to type {dtype.name}; pass a complex dtype or real numbers")
    if arrays or any(issubclass(t, np.complexfloating) for t in examples):
        warn("Casting complex values to real discards the imaginary part",
             UserWarning, stacklevel=4)


bind_late(as_array=as_array)  # Tensor(data), the legacy constructor, calls it


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of `data`, with torch's dtype inference.

    >>> import flowgrad as flow
    >>> flow.tensor([1, 2]).dtype, flow.tensor([1.0, 2]).dtype
    (flowgrad.int64, flowgrad.float32)
    """
    if pin_memory:
        check_hints("tensor", {"pin_memory": pin_memory}, FACTORY_HINTS)
    if isinstance(data, Tensor) and called_by_user():
        warn("To copy construct from a tensor, it is recommended to use "
             "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
             "rather than torch.tensor(sourceTensor).")
    if device is not None or (DEFAULT_DEVICE[0] is not None and not isinstance(data, Tensor)):
        dev = resolve_device(device, "tensor")  # (host data: the default device's)
    else:
        dev = None  # the data's own
    return _finish(as_array(data, _dt.as_dtype(dtype) if dtype is not None else None),
                   requires_grad, dev)


def as_tensor(data, dtype=None, device=None):
    """Like `tensor`, but shares memory with a tensor or array of the same dtype.

    >>> import flowgrad as flow
    >>> x = flow.tensor([1.0, 2.0])
    >>> flow.as_tensor(x) is x, flow.as_tensor([1, 2]).dtype
    (True, flowgrad.int64)
    """
    dev = resolve_device(device, "as_tensor")
    if isinstance(data, Tensor):  # itself, or a conversion that stays in the graph (as torch)
        if (dtype is None or _dt.as_dtype(dtype) is data.dtype) and \
                (device is None or data.device == dev):
            return data
        return data.to(dtype=data.dtype if dtype is None else _dt.as_dtype(dtype),
                       device=data.device if device is None else dev)
    if (isinstance(data, np.ndarray) or type(data) in ARRAY_MODULES) and \
            (dtype is None or _dt.as_dtype(dtype).np == data.dtype) and \
            (device is None or device_of(data) == dev):
        _dt.from_numpy_dtype(data.dtype)
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array):
    """A tensor sharing memory with a NumPy array.

    >>> import flowgrad as flow
    >>> import numpy as np
    >>> a = np.array([1.0, 2.0])
    >>> t = flow.from_numpy(a)
    >>> a[0] = 5.0
    >>> t
    tensor([5., 2.], dtype=flowgrad.float64)
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    _dt.from_numpy_dtype(array.dtype)
    return Tensor._wrap(array)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False, **options):
    """A 0-dim tensor holding `s` (default float dtype), as torch.scalar_tensor.

    >>> import flowgrad as flow
    >>> flow.scalar_tensor(3)
    tensor(3.)
    """
    check_hints("scalar_tensor", options, FACTORY_HINTS)
    if isinstance(s, Tensor):
        s = s.item()
    if not isinstance(s, (numbers.Number, np.generic)) or isinstance(s, np.str_):
        raise TypeError(f"scalar_tensor(): argument 's' must be a number, not "
                        f"{type(s).__name__} ({s!r})")
    d = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
    if d.category == 2 and isinstance(s, int) and not isinstance(s, bool):
        s = float(s)  # a Python int beyond int64 goes through a float, as torch's Scalar
    return tensor(s, dtype=d, device=device, requires_grad=requires_grad)


def _as_int(value, op_name, arg):
    """`value` as a Python int; TypeError naming the op and argument for floats, strings,
    bools and anything else without __index__ (torch refuses them too)."""
    if value.__class__ is builtins.int:
        return value
    try:
        if isinstance(value, (bool, np.bool_)):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{op_name}(): argument '{arg}' must be an int, not "
                        f"{type(value).__name__} ({value!r}); pass a whole number") from None


def _size(size, op_name):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    try:
        size = tuple(s if s.__class__ is builtins.int else _as_int(s, op_name, "size")
                     for s in size)
    except TypeError:
        raise TypeError(f"{op_name}(): argument 'size' must be ints or one tuple of ints, got "
                        f"{size!r}; pass whole numbers such as (2, 3)") from None
    if any(s < 0 for s in size):
        raise RuntimeError(f"{op_name}(): Trying to create tensor with negative dimension "
                           f"in size {size}; sizes must be >= 0")
    return size


def _size_arg(size_args, size, op_name):
    """The sizes given positionally (`zeros(2, 3)`) or as torch's `size=(2, 3)` keyword."""
    if size is None:
        return size_args
    if size_args:
        raise TypeError(f"{op_name}(): got 'size' both positionally and as a keyword")
    return (size,)


def _alloc(op_name, shape, dtype, make):
    """`make()`, with NumPy's size and memory failures turned into torch's RuntimeError."""
    try:
        return make()
    except (ValueError, MemoryError, OverflowError) as error:
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if nbytes < 2 ** 63 and not isinstance(error, MemoryError):
            raise
        what = ("Storage size calculation overflowed" if nbytes >= 2 ** 63 else
                "not enough memory")
        raise RuntimeError(f"{op_name}(): {what} with sizes={list(shape)} and dtype "
                           f"{np.dtype(dtype)} ({nbytes} bytes); ask for a smaller "
                           f"tensor") from None


def _finish(array, requires_grad, dev=None):
    """`array` as a new tensor, on device `dev` (None: where it is)."""
    t = Tensor._wrap(array if dev is None or dev is CPU and type(array) is np.ndarray else
                     to_device(array, dev))
    if _interpreter.current is not _interpreter.AutogradInterpreter:
        made_here = getattr(_interpreter.current, "made_here", None)
        if made_here is not None:  # made while nn.Graph traces build: a constant it may fold
            made_here.append(t)
        if inference.state.enabled:  # a factory in inference mode makes an inference tensor
            t._counter = inference.INFERENCE_COUNTER
    if requires_grad:
        t._set_requires_grad(True)
    return t


def _float_dtype(dtype):
    return _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()


def zeros(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """A tensor of zeros (default float dtype).

    >>> import flowgrad as flow
    >>> flow.zeros(2, 3)
    tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> flow.zeros(2, dtype=flow.int64)
    tensor([0, 0])
    """
    check_hints("zeros", options, FACTORY_HINTS)
    dev = resolve_device(device, "zeros")
    shape, d = _size(_size_arg(size_args, size, "zeros"), "zeros"), _float_dtype(dtype).np
    return _finish(_alloc("zeros", shape, d, lambda: dev.xp.zeros(shape, d)), requires_grad, dev)


def ones(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """A tensor of ones (default float dtype).

    >>> import flowgrad as flow
    >>> flow.ones(2, 2)
    tensor([[1., 1.],
            [1., 1.]])
    """
    check_hints("ones", options, FACTORY_HINTS)
    dev = resolve_device(device, "ones")
    shape, d = _size(_size_arg(size_args, size, "ones"), "ones"), _float_dtype(dtype).np
    return _finish(_alloc("ones", shape, d, lambda: dev.xp.ones(shape, d)), requires_grad, dev)


def empty(*size_args, size=None, dtype=None, device=None, requires_grad=False, **options):
    """An uninitialised tensor (zeros here, so results never depend on stale memory).

    >>> import flowgrad as flow
    >>> flow.empty(2, 3).shape
    flowgrad.Size([2, 3])
    """
    check_hints("empty", options)
    if options.get("memory_format") is preserve_format:
        raise RuntimeError("empty(): unsupported memory format preserve_format (there is no "
                           "input to preserve); pass contiguous_format or channels_last")
    dev = resolve_device(device, "empty")
    shape, d = _size(_size_arg(size_args, size, "empty"), "empty"), _float_dtype(dtype).np
    return _laid_out(_finish(_alloc("empty", shape, d, lambda: dev.xp.zeros(shape, d)),
                             requires_grad, dev), None, options)


def full(size, fill_value, dtype=None, device=None, requires_grad=False, **options):
    """A tensor filled with `fill_value`; dtype inferred from it as torch does.

    >>> import flowgrad as flow
    >>> flow.full((2, 2), 7)
    tensor([[7, 7],
            [7, 7]])
    >>> flow.full((2,), 0.5)
    tensor([0.5000, 0.5000])
    """
    check_hints("full", options, FACTORY_HINTS)
    dev = resolve_device(device, "full")
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    elif not isinstance(fill_value, (numbers.Number, np.generic)):
        raise TypeError(f"full(): argument 'fill_value' must be a number, not "
                        f"{type(fill_value).__name__} ({fill_value!r})")
    if dtype is None:
        dtype = _infer_dtype(fill_value)
    if not isinstance(size, (tuple, list)):  # (torch.Size is a tuple)
        raise TypeError(f"full(): argument 'size' must be a tuple of ints, not "
                        f"{type(size).__name__} ({size!r}); pass ({size!r},) for a 1-D tensor")
    shape, d = _size((size,), "full"), _dt.as_dtype(dtype).np
    fill_value = _bool_fill(fill_scalar("full", fill_value, d, fill_checks_overflow(
        d, math.prod(shape))), d)
    return _finish(_alloc("full", shape, d, lambda: dev.xp.full(shape, fill_value, d)),
                   requires_grad, dev)


def _laid_out(out, source, options):
    """`out`, a fresh tensor, in the memory format `options` ask for (channels_last: NHWC;
    ops/layout.py); preserve_format, the default, leaves `source`'s layout (made by the
    caller). A format for the wrong rank raises, as torch."""
    rank = format_rank(options.get("memory_format"), out.ndim, "empty")
    if rank:
        out._data = fresh_in_format(array_module(out._data), out._data, rank)
    return out


def _bool_fill(value, np_dtype):
    """A fill for a bool dtype as its truth value (NumPy refuses ints beyond int64 there)."""
    return bool(value) if np_dtype.kind == "b" else value


def _keeps_layout(source, options):
    """Whether a tensor made like `source` (`*_like`) takes a layout other than row-major:
    preserve_format (the default) asked for, and source's array not row-major
    (ops/layout.py); a format asked for is given by _laid_out."""
    fmt, data = options.get("memory_format"), source._data
    return (fmt is None or fmt is preserve_format) and not row_major(data)


def _filled_like(dev, x, np_dtype, fill, options):
    """An array of x's shape filled with `fill`, laid out as torch's `*_like` lay it out: as
    x (preserve_format, the default), else row-major (a format asked for: _laid_out)."""
    data = x._data
    if _keeps_layout(x, options):
        out = empty_preserving(dev.xp, data, np_dtype)
        out[...] = fill
        return out
    if type(fill) is int and fill == 0:  # (allocated zeroed)
        return dev.xp.zeros(data.shape, np_dtype)
    return dev.xp.full(data.shape, fill, np_dtype)


def _like(x, dtype):
    return _dt.as_dtype(dtype) if dtype is not None else x.dtype


def _device_like(x, device, op_name):
    """torch's `*_like`: x's device unless `device` names another."""
    return x.device if device is None else resolve_device(device, op_name)


def zeros_like(x, dtype=None, device=None, requires_grad=False, **options):
    """Zeros with the shape of `x` and its dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.zeros_like(flow.tensor([[1, 2], [3, 4]]))
    tensor([[0, 0],
            [0, 0]])
    """
    check_hints("zeros_like", options)
    dev = _device_like(x, device, "zeros_like")
    return _laid_out(_finish(_filled_like(dev, x, _like(x, dtype).np, 0, options),
                             requires_grad, dev), x, options)


def ones_like(x, dtype=None, device=None, requires_grad=False, **options):
    """Ones with the shape of `x` and its dtype unless `dtype` is given."""
    check_hints("ones_like", options)
    dev = _device_like(x, device, "ones_like")
    return _laid_out(_finish(_filled_like(dev, x, _like(x, dtype).np, 1, options),
                             requires_grad, dev), x, options)


def empty_like(x, dtype=None, device=None, requires_grad=False, **options):
    """An uninitialised tensor shaped like `x`; flowgrad fills it with zeros."""
    check_hints("empty_like", options)
    return zeros_like(x, dtype, device, requires_grad=requires_grad, **options)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False, **options):
    """A tensor shaped like `x` filled with `fill_value`, in x's dtype unless `dtype` is given.

    >>> import flowgrad as flow
    >>> flow.full_like(flow.ones(3), 2.5)
    tensor([2.5000, 2.5000, 2.5000])
    """
    check_hints("full_like", options)
    dev = _device_like(x, device, "full_like")
    check_number("full_like", fill_value, "fill_value")
    if isinstance(fill_value, Tensor):  # torch's Scalar: a one-element tensor's value
        fill_value = fill_value.item()
    d = _like(x, dtype).np
    fill_value = _bool_fill(fill_scalar("full_like", fill_value, d, fill_checks_overflow(
        d, x._data.size)), d)
    return _laid_out(_finish(_filled_like(dev, x, d, fill_value, options), requires_grad, dev),
                     x, options)


def eye(n, m=None, dtype=None, device=None, requires_grad=False, **options):
    """An n x m identity matrix.

    >>> import flowgrad as flow
    >>> flow.eye(2, 3)
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    check_hints("eye", options, FACTORY_HINTS)
    dev = resolve_device(device, "eye")
    n = _as_int(n, "eye", "n")
    m = n if m is None else _as_int(m, "eye", "m")
    for arg, v in (("n", n), ("m", m)):
        if v < 0:
            raise RuntimeError(f"eye(): {arg} must be greater or equal to 0, got {v}")
    d = _float_dtype(dtype).np
    return _finish(_alloc("eye", (n, m), d, lambda: dev.xp.eye(n, m, dtype=d)), requires_grad,
                   dev)


_HINTS = frozenset(("layout", "pin_memory", "memory_format"))
FACTORY_HINTS = frozenset(("layout", "pin_memory"))  # (torch.zeros takes no memory_format)


def check_hints(op_name, options, allowed=_HINTS):
    """Raise torch's TypeError for a keyword that is none of the `allowed` layout hints (a
    catch-all would drop a misspelt or unsupported argument silently), and refuse the values
    flowgrad cannot honour: a layout other than strided, pinned memory (no accelerator)."""
    if not options:
        return
    if not allowed.issuperset(options):
        unknown = sorted(set(options) - allowed)[0]
        raise TypeError(f"{op_name}() got an unexpected keyword argument {unknown!r}")
    layout = options.get("layout")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise NotImplementedError(f"{op_name}(): flowgrad's factories make strided tensors "
                                  f"only, not layout={layout}; call .to_sparse() on the result")
    if options.get("pin_memory"):
        raise RuntimeError(f"{op_name}(): pin_memory=True requires a CUDA or other accelerator "
                           f"backend; no pinned memory allocator is available here (pass "
                           f"pin_memory=False)")


def _new(name, factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False, **options):
        if "size" in options:  # x.new_zeros(size=(2, 3)): torch's keyword (it was dropped)
            if size:
                raise TypeError(f"{name}() got 'size' both positionally and as a keyword")
            size = (options.pop("size"),)
        if not size:  # (as torch: no size is a mistake, not a 0-d tensor; () asks for one)
            raise TypeError(f'{name}() missing 1 required positional arguments: "size"')
        check_hints(name, options)
        return factory(*size, dtype=dtype or self.dtype,
                       device=self.device if device is None else device,
                       requires_grad=requires_grad)
    method.__name__ = name
    setattr(Tensor, name, method)


_new("new_zeros", zeros)
_new("new_ones", ones)
_new("new_empty", empty)


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or self.dtype,
                device=self.device if device is None else device, requires_grad=requires_grad)


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, Tensor):
        warn("To copy construct from a tensor, it is recommended to use "
             "sourceTensor.detach().clone() or sourceTensor.detach().clone().requires_grad_(True), "
             "rather than tensor.new_tensor(sourceTensor).")
    return tensor(data, dtype=dtype or self.dtype,
                  device=self.device if device is None else device, requires_grad=requires_grad)


Tensor.new_full = _new_full
Tensor.new_tensor = _new_tensor


# the random factories live beside (random_factories.py); named here too, where they were
from .random_factories import (  # noqa: E402
    _bernoulli,  # noqa: F401
    _normal,  # noqa: F401
    _uniform,  # noqa: F401
    bernoulli,
    multinomial,
    normal,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
)
from .ranges import arange, linspace, logspace  # noqa: E402  (ranges.py's, named here too)
