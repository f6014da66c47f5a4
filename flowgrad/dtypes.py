"""Data types and torch's type-promotion rules.

A flowgrad dtype wraps a NumPy dtype and knows its category (bool < integer < floating <
complex). `promote_types` and `result_type` follow torch: within a category the wider type
wins; a higher category wins across categories (a complex one keeps the wider float's
precision: float64 with complex64 gives complex128); dimensioned tensors outrank zero-dim
tensors, which outrank Python scalars, but only inside one category.

>>> import flowgrad as flow
>>> flow.promote_types(flow.int32, flow.float16)
flowgrad.float16
"""
from __future__ import annotations

import builtins

import numpy as np

# torch's scalar-type names (its errors say 'Long'; its classes and storages are named
# LongTensor, LongStorage), by NumPy dtype name
TORCH_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
                      "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
                      "int8": "Char", "uint8": "Byte", "bool": "Bool",
                      "complex64": "ComplexFloat", "complex128": "ComplexDouble"}

__all__ = [
    "dtype", "float16", "half", "float32", "float", "float64", "double", "bfloat16",
    "int8", "int16", "short", "int32", "int", "int64", "long", "uint8", "bool",
    "complex64", "cfloat", "complex128", "cdouble",
    "promote_types", "result_type", "get_default_dtype", "set_default_dtype", "finfo", "iinfo",
    "is_floating_point",
]


class dtype:  # noqa: N801 - named like torch.dtype
    """A tensor element type: its NumPy dtype plus torch's category and name."""

    __slots__ = ("name", "np", "category", "itemsize")

    def __init__(self, name: str, np_dtype, category: int):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self.itemsize = self.np.itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.category == 2

    @property
    def is_complex(self) -> bool:
        return self.category == 3

    @property
    def is_signed(self) -> bool:
        return self.name != "uint8" and self.category > 0

    def __repr__(self) -> str:
        return f"flowgrad.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


def _by_name(name):
    return _BY_NAME[name]


bool = dtype("bool", np.bool_, 0)  # noqa: A001 - torch's name
uint8 = dtype("uint8", np.uint8, 1)
int8 = dtype("int8", np.int8, 1)
int16 = dtype("int16", np.int16, 1)
int32 = dtype("int32", np.int32, 1)
int64 = dtype("int64", np.int64, 1)
float16 = dtype("float16", np.float16, 2)
float32 = dtype("float32", np.float32, 2)
float64 = dtype("float64", np.float64, 2)
complex64 = dtype("complex64", np.complex64, 3)
complex128 = dtype("complex128", np.complex128, 3)
half, float, double, int, long = float16, float32, float64, int32, int64  # noqa: A001
short = int16
cfloat, cdouble = complex64, complex128

_ALL = [bool, uint8, int8, int16, int32, int64, float16, float32, float64, complex64, complex128]
try:  # bfloat16 is optional: it needs the ml_dtypes package
    import ml_dtypes

    bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2)
    _ALL.append(bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    bfloat16 = None

_BY_NAME = {d.name: d for d in _ALL}
_FROM_NP = {d.np: d for d in _ALL}


def from_numpy_dtype(np_dtype) -> dtype:
    """The flowgrad dtype of a NumPy dtype; raises TypeError for unsupported ones."""
    try:
        d = _FROM_NP[np_dtype]
    except (KeyError, TypeError):  # (TypeError: an unhashable value)
        try:
            d = _FROM_NP.get(np.dtype(np_dtype))
        except (TypeError, ValueError):  # (a tensor, a list ... where a dtype belongs)
            raise TypeError(f"expected a dtype (such as flowgrad.float32), got "
                            f"{type(np_dtype).__name__} {str(np_dtype)[:40]!r}") from None
        if d is None:
            raise TypeError(
                f"flowgrad does not support NumPy dtype {np.dtype(np_dtype)}; "
                f"supported: {', '.join(x.name for x in _ALL)}") from None
    if d.category == 3:
        complex_in_use()
    return d


_complex_seen = [False]


def complex_in_use():
    """Called where a complex dtype enters (factories, casts, tensor data, promotion): from
    then on the interpreter refuses complex inputs to ops not audited for them. Until then
    real-only programs pay nothing for the check."""
    if not _complex_seen[0]:
        _complex_seen[0] = True
        from .autograd import interpreter

        interpreter.complex_checks = True


def to_complex(d: dtype) -> dtype:
    """The complex dtype with `d`'s precision: complex128 for float64, complex64 otherwise
    (torch's complex32 for float16 does not exist here)."""
    if d.category == 3:
        return d
    return complex128 if d is float64 else complex64


def to_real(d: dtype) -> dtype:
    """The real dtype of a complex dtype's parts (float32 for complex64); others unchanged."""
    return {complex64: float32, complex128: float64}.get(d, d)


def default_complex() -> dtype:
    """complex64, or complex128 when the default float dtype is float64 (torch's)."""
    return to_complex(get_default_dtype())


def as_dtype(d) -> dtype:
    """Accept a flowgrad dtype, a NumPy dtype or type, a Python type, a torch dtype or a name."""
    if type(d) is dtype:
        if d.category == 3:
            complex_in_use()
        return d
    if d is builtins.float:  # as torch: Python's float is a double, whatever the default
        return float64
    if d is builtins.complex:
        return as_dtype(complex128)
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool
    if isinstance(d, str) or type(d).__module__ == "torch":
        name = str(d).replace("torch.", "").replace("flowgrad.", "")
        name = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                "int": "int32", "cfloat": "complex64", "cdouble": "complex128"}.get(name, name)
        if name in _BY_NAME:
            return as_dtype(_BY_NAME[name])
        raise TypeError(f"unknown dtype {d!r}; supported: {', '.join(_BY_NAME)}")
    return from_numpy_dtype(d)


# Promotion lattice among types of one category, as torch defines it.
_ORDER = {"bool": 0, "uint8": 1, "int8": 1, "int16": 2, "int32": 3, "int64": 4,
          "float16": 5, "bfloat16": 5, "float32": 6, "float64": 7}


def can_cast(from_: dtype, to: dtype) -> bool:
    """Whether torch's type promotion allows a cast from `from_` to `to`: never to a lower
    category (complex > floating > integer > bool), and to bool only from bool.

    >>> import flowgrad as flow
    >>> flow.can_cast(flow.int32, flow.float16), flow.can_cast(flow.float32, flow.int64)
    (True, False)
    """
    for name, d in (("from_", from_), ("to", to)):
        if not isinstance(d, dtype):
            raise TypeError(f"can_cast(): argument '{name}' must be flowgrad.dtype, not "
                            f"{type(d).__name__}")
    return from_.category <= to.category and (to.category > 0 or from_.category == 0)


def can_cast_array(from_np, to_np) -> bool:
    """`can_cast` for two NumPy dtypes of flowgrad arrays: whether a result of `from_np` may be
    written into an array of `to_np` (in-place ops, `out=`). Any integer fits any integer, as
    in torch (uint8 += int32 wraps); NumPy's "same_kind" refuses that, and takes complex into
    bfloat16 (a 'V' kind), dropping the imaginary part."""
    return from_np == to_np or can_cast(from_numpy_dtype(from_np), from_numpy_dtype(to_np))


def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype both `a` and `b` convert to without loss, by torch's table.

    >>> import flowgrad as flow
    >>> flow.promote_types(flow.float64, flow.complex64)
    flowgrad.complex128
    """
    if a is b:
        return a
    for name, d in (("type1", a), ("type2", b)):
        if not isinstance(d, dtype):
            raise TypeError(f"promote_types(): argument '{name}' must be flowgrad.dtype, not "
                            f"{type(d).__name__}")
    if a.category == 3 or b.category == 3:
        ra, rb = to_real(a), to_real(b)
        if ra.category < 2 or rb.category < 2:
            return a if a.category == 3 else b
        return to_complex(promote_types(ra, rb))
    na, nb = a.name, b.name
    if {na, nb} == {"uint8", "int8"}:
        return int16
    if {na, nb} == {"float16", "bfloat16"}:
        return float32
    return a if _ORDER[na] >= _ORDER[nb] else b


_default_float = [float32]


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats (float32 unless changed)."""
    return _default_float[0]


def set_default_dtype(d) -> None:
    """Set the dtype used for Python floats and float factories.

    >>> import flowgrad as flow
    >>> flow.set_default_dtype(flow.float64); flow.tensor(1.5).dtype
    flowgrad.float64
    >>> flow.set_default_dtype(flow.float32)
    """
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating dtypes can be the default, got {d}")
    _default_float[0] = d


def result_type(*operands) -> dtype:
    """torch.result_type over tensors and Python scalars.

    Dimensioned tensors decide first; zero-dim tensors and then Python scalars only
    raise the result when they belong to a higher category.
    """
    from .tensor import Tensor

    tiers = [None, None, None]  # dimensioned tensors, zero-dim tensors, Python scalars
    for x in operands:
        if isinstance(x, Tensor):
            d, tier = x.dtype, (0 if x._data.ndim else 1)
        elif isinstance(x, builtins.bool):
            d, tier = bool, 2
        elif isinstance(x, (builtins.int, np.integer)):
            d, tier = int64, 2
        elif isinstance(x, (builtins.float, np.floating, np.bool_)):  # (see scalar_value)
            d, tier = get_default_dtype(), 2
        elif isinstance(x, (builtins.complex, np.complexfloating)):
            d, tier = default_complex(), 2
        else:
            d, tier = as_dtype(x), 0
        cur = tiers[tier]
        tiers[tier] = d if cur is None else promote_types(cur, d)
    return _combine(tiers[0], _combine(tiers[1], tiers[2]))


def scalar_value(x):
    """A NumPy scalar as the Python number torch's Scalar arguments read it: its value, except
    that a `np.bool_` is a float (torch's parser takes a Python bool as a bool, a NumPy
    integer as an int and anything else with __float__ as a double): torch.full((2,),
    np.True_) and int32 + np.True_ are float32, arange(np.True_) is arange(1.0).

    >>> import numpy as np
    >>> scalar_value(np.True_), scalar_value(np.int32(3))
    (1.0, 3)
    """
    return builtins.float(x) if isinstance(x, np.bool_) else x.item()


def _combine(higher, lower):
    """torch's combine_categories: `higher` (a higher tier) wins unless `lower` has a higher
    category; a complex lower tier keeps a floating higher tier's precision."""
    if higher is None:
        return lower
    if lower is None or lower.category <= higher.category:
        return higher
    if lower.category == 3 and higher.category == 2:
        return to_complex(higher)
    return lower if lower.category == 3 else promote_types(higher, lower)


class finfo:  # noqa: N801 - torch's name
    """Machine limits of a floating dtype (default: the default dtype), as torch.finfo.

    >>> import flowgrad as flow
    >>> flow.finfo(flow.float16).max, flow.finfo().eps
    (65504.0, 1.1920928955078125e-07)
    """

    def __init__(self, type=None):
        d = to_real(as_dtype(type)) if type is not None else get_default_dtype()
        if not d.is_floating_point:
            raise TypeError(f"finfo: {d} is not a floating point dtype; use iinfo for integers")
        info = ml_dtypes.finfo(d.np) if d.name == "bfloat16" else np.finfo(d.np)
        self.dtype = d.name
        self.bits = d.itemsize * 8
        self.eps = builtins.float(info.eps)
        self.max = builtins.float(info.max)
        self.min = builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.tiny)
        self.resolution = 10.0 ** -builtins.int(info.precision)  # as torch: a power of ten

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"eps={self.eps}, smallest_normal={self.tiny}, dtype={self.dtype})")


class iinfo:  # noqa: N801 - torch's name
    """Machine limits of an integer dtype, as torch.iinfo.

    >>> import flowgrad as flow
    >>> flow.iinfo(flow.int8).min, flow.iinfo(flow.uint8).max
    (-128, 255)
    """

    def __init__(self, type):
        d = as_dtype(type)
        if d.category != 1:
            raise TypeError(f"iinfo: {d} is not an integer dtype; use finfo for floats")
        info = np.iinfo(d.np)
        self.dtype, self.bits = d.name, d.itemsize * 8
        self.min, self.max = builtins.int(info.min), builtins.int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def is_floating_point(input) -> builtins.bool:
    """True when the tensor's dtype is a floating point type."""
    return input.dtype.is_floating_point
