"""torch.tensor's reading of Python data (nested lists and tuples of numbers, NumPy scalars and
arrays, tensors) into a fresh array: the dtype it infers, the values it refuses (numbers out of
an integer dtype's range, complex into a real dtype, NumPy floats read by __index__), and data
that contains itself or nests too deep, all without recursion. The ragged-nest error path, in
torch's order, is creation_nest.py.

>>> import flowgrad as flow
>>> flow.tensor([[1, 2], [3, 4.5]]).dtype
flowgrad.float32
"""
from __future__ import annotations

import builtins
import itertools

import numpy as np

from .. import dtypes as _dt
from .._warn import warn
from ..autograd import interpreter as _interpreter
from ..device import ARRAY_MODULES
from ..tensor import Tensor, bind_late
from .creation_nest import torch_reading

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
        with np.errstate(over="ignore"):
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
