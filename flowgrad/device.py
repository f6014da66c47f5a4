"""Devices and their array modules: the one boundary between tensors and array libraries.

Kernels take `xp` from here, never `import numpy` themselves, and code outside kernels makes
arrays through the helpers below (`new_zeros(like, ...)`, `to_device`), so a device is one
`register_device` call: its array type, its array module, and how to copy to the host. NumPy
(the 'cpu' device) is registered here; a CuPy device would register `cupy.ndarray`, `cupy`
and `cupy.asnumpy`, and every kernel would run on it unchanged.

>>> import flowgrad as flow
>>> flow.device("cpu")
device(type='cpu')
"""
from __future__ import annotations

import types
import weakref

import numpy as np

from . import blas
from .errors import check_int64


def _host_module():
    """The CPU's array module: NumPy, its `matmul` on MKL's GEMM where flowgrad loaded MKL
    (`blas.matmul`, which hands NumPy whatever BLAS cannot take); NumPy itself otherwise."""
    if blas.BACKEND != "mkl":
        return np
    module = types.ModuleType("flowgrad.numpy_mkl", np.__doc__)
    module.__dict__.update({k: v for k, v in np.__dict__.items() if not k.startswith("__")})
    module.__getattr__ = np.__getattr__  # NumPy's lazily imported submodules
    module.matmul = blas.matmul
    return module


# what kernels of CPU tensors get as `xp` (`np`, or NumPy with MKL's matmul)
HOST_XP = _host_module()
# array type -> the module whose kernels handle it (the interpreter reads this once per op)
ARRAY_MODULES = {np.ndarray: HOST_XP}
# array type -> the device its arrays live on; device type -> (array type, module, to_host)
ARRAY_DEVICES = {}
_DEVICES = {}


class device:  # noqa: N801 - torch's name
    """Where a tensor's storage lives; `xp` is the array module its kernels use."""

    __slots__ = ("type", "index", "xp")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        spec = str(spec)
        if ":" in spec:
            spec, idx = spec.split(":")
            index = int(idx)
        entry = _DEVICES.get(spec)
        if entry is None:
            others = "".join(f", '{d}'" for d in _DEVICES if d != "cpu")
            raise RuntimeError(
                f"device {spec!r} is not available: flowgrad runs on the 'cpu' device (NumPy)"
                f"{others}; use device='cpu'")
        self.type, self.index, self.xp = spec, index, entry[1]

    def __eq__(self, other):
        try:
            other = device(other)
        except RuntimeError:
            return False
        return self.type == other.type

    def __hash__(self):
        return hash(self.type)

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type

    def __reduce__(self):  # (by its name: `xp` is a module, which pickle refuses)
        return device, (self.type, self.index)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def register_device(type_name, array_type, xp, to_host=np.asarray):
    """Plug in a device: tensors whose storage is an `array_type` live on `type_name`, their
    kernels get `xp`, and `to_host(array)` copies one into a NumPy array. Returns the device.

    >>> import numpy as np
    >>> class Pinned(np.ndarray): pass
    >>> register_device("pinned", Pinned, np)
    device(type='pinned')
    >>> device_of(np.zeros(2).view(Pinned)), device("pinned").xp is np
    (device(type='pinned'), True)
    >>> unregister_device("pinned")
    """
    if type_name in _DEVICES and _DEVICES[type_name][0] is not array_type:
        raise ValueError(f"register_device: {type_name!r} is already registered for "
                         f"{_DEVICES[type_name][0].__name__}; unregister it first")
    _DEVICES[type_name] = (array_type, xp, to_host)
    ARRAY_MODULES[array_type] = xp
    ARRAY_DEVICES[array_type] = dev = device(type_name)
    return dev


def unregister_device(type_name):
    """Remove a device added by `register_device` (the CPU stays)."""
    if type_name == "cpu":
        raise ValueError("unregister_device: the 'cpu' device cannot be removed")
    array_type = _DEVICES.pop(type_name)[0]
    ARRAY_MODULES.pop(array_type, None)
    ARRAY_DEVICES.pop(array_type, None)


CPU = register_device("cpu", np.ndarray, HOST_XP)


def array_module(array):
    """The array module that owns `array` (NumPy for CPU tensors).

    >>> import numpy as np
    >>> array_module(np.zeros(2)).matmul is HOST_XP.matmul
    True
    """
    return ARRAY_MODULES.get(type(array), HOST_XP)


def device_of(array):
    """The device an array lives on (host data such as NumPy scalars: the CPU).

    >>> import numpy as np
    >>> device_of(np.zeros(2))
    device(type='cpu')
    """
    return ARRAY_DEVICES.get(type(array), CPU)


def to_host(array):
    """The values of any registered array (or host data) as a NumPy array, copied only when
    they live elsewhere.

    >>> to_host([1, 2])
    array([1, 2])
    """
    entry = _DEVICES.get(device_of(array).type)
    return np.asarray(array) if entry is None else entry[2](array)


def to_device(array, dev):
    """`array` (any registered array, or host data: numbers, lists, NumPy arrays) on device
    `dev`; the array itself when it is there already.

    >>> import numpy as np
    >>> a = np.zeros(2)
    >>> to_device(a, "cpu") is a
    True
    """
    dev = dev if isinstance(dev, device) else device(dev)
    array_type, xp, _ = _DEVICES[dev.type]
    if type(array) is array_type:
        return array
    return xp.asarray(to_host(array))


# ---- arrays on the device of another: what code outside kernels makes instead of np.zeros --
def memory_owner(array):
    """The array owning `array`'s memory: the root of the NumPy views it is one of, through
    the array-interface holders that as_strided views are made over (their `base` is the
    array they view)."""
    while True:
        base = array.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)
            if not isinstance(base, np.ndarray):
                return array
        array = base


# arrays that stand for a torch storage (a deep copy's, a loaded checkpoint's): a tensor over
# one that is no view of another tensor counts its storage offset from the array's start
STORAGES = weakref.WeakValueDictionary()  # id(array) -> array


def storage_start_offset(array):
    """Elements from the start of the storage array `array` lies in to its first element,
    when that array is one of STORAGES; else 0."""
    if type(array) is not np.ndarray:
        return 0
    root = memory_owner(array)
    if STORAGES.get(id(root)) is not root:
        return 0
    start = np.lib.array_utils.byte_bounds(root)[0]
    return (array.__array_interface__["data"][0] - start) // array.itemsize


def new_zeros(like, shape=None, dtype=None):
    """Zeros on the device of array `like` (its shape and dtype unless given).

    >>> import numpy as np
    >>> new_zeros(np.ones(2, np.float32), (3,))
    array([0., 0., 0.], dtype=float32)
    """
    return array_module(like).zeros(like.shape if shape is None else shape,
                                    like.dtype if dtype is None else dtype)


def new_full(like, fill_value, shape=None, dtype=None):
    """`fill_value` everywhere, on the device of array `like` (its shape and dtype unless
    given).

    >>> import numpy as np
    >>> new_full(np.zeros(2), 0.5)
    array([0.5, 0.5])
    """
    return array_module(like).full(like.shape if shape is None else shape, fill_value,
                                   like.dtype if dtype is None else dtype)


def new_empty(like, shape=None, dtype=None):
    """Uninitialised storage on the device of array `like` (its shape and dtype unless given).

    >>> import numpy as np
    >>> new_empty(np.zeros(2), (2, 3)).shape
    (2, 3)
    """
    return array_module(like).empty(like.shape if shape is None else shape,
                                    like.dtype if dtype is None else dtype)


def new_array(like, values, dtype=None):
    """Host values (numbers, lists, NumPy arrays) as an array on the device of `like` (an
    array, or None for the CPU), in `dtype` (inferred from the values when None).

    >>> import numpy as np
    >>> new_array(np.zeros(2), [1, 2], np.float32)
    array([1., 2.], dtype=float32)
    """
    xp = HOST_XP if like is None else array_module(like)
    return xp.asarray(values if xp is HOST_XP else to_host(values), dtype)


_CONSTANTS = {}  # (array module, dtype, value) -> a shared 0-d array


def constant(xp, value, dtype):
    """`value` as a 0-d array of `dtype` on xp's device, shared (an operand, never written)
    and made once: a ufunc converts a Python number on every call, which costs about as much
    as the ufunc on 100 values. Not for nan or -0.0 (the key compares 0.0 == -0.0).

    >>> import numpy as np
    >>> constant(np, 0, np.dtype(np.float32))
    array(0., dtype=float32)
    """
    key = (xp, dtype, value)
    c = _CONSTANTS.get(key)
    if c is None:
        if len(_CONSTANTS) >= 4096:
            _CONSTANTS.clear()
        c = _CONSTANTS[key] = xp.asarray(value, dtype)
        if type(c) is np.ndarray:
            c.flags.writeable = False  # shared by every caller: a write would be a wrong number
    return c


_UNDISPATCHED = {}  # (array module, name) -> the function without __array_function__


def undispatched(xp, name):
    """`xp.<name>` without NumPy's `__array_function__` dispatch, which costs about 0.6 us a
    call (as long as `where` itself takes on 100 values); kernels hold plain arrays, so no
    override is skipped. Other array modules get their function as it is.

    >>> import numpy as np
    >>> undispatched(np, "where")(np.array([True, False]), 1.0, 2.0)
    array([1., 2.])
    """
    fn = _UNDISPATCHED.get((xp, name))
    if fn is None:
        fn = getattr(xp, name)
        fn = _UNDISPATCHED[(xp, name)] = getattr(fn, "_implementation", fn)
    return fn


def scalar_operand(xp, value, dtype):
    """A scalar op's Python number as `constant` where that gives the same bits (an array of
    float32/64 and a float neither nan nor zero, or an int float32 holds exactly: NumPy casts
    a Python number to the array's dtype, NEP 50), else the value itself.

    >>> import numpy as np
    >>> f32 = np.dtype(np.float32)
    >>> scalar_operand(np, 0.5, f32).dtype, scalar_operand(np, 3, f32).dtype
    (dtype('float32'), dtype('float32'))
    >>> scalar_operand(np, -0.0, f32), scalar_operand(np, 2 ** 30, f32)
    (-0.0, 1073741824)
    """
    kind = type(value)
    if (kind is float and value == value and value != 0.0 or
            kind is int and -16777216 <= value <= 16777216) and dtype.char in "fd":
        c = _CONSTANTS.get((xp, dtype, value))  # (constant's lookup inline: a hot path)
        return c if c is not None else constant(xp, value, dtype)
    if kind is int:  # (beyond 64 bits: torch's Scalar refuses it)
        check_int64("a scalar op", value, "operand")
    return value


def broadcast_view(array, shape):
    """`xp.broadcast_to(array, shape)`: a read-only view repeating size-1 and missing leading
    dims. A C-contiguous NumPy array's view is made directly: NumPy's broadcast_to builds an
    nditer each call (2.2 us against 0.3), which a gradient's expand pays on every backward.

    >>> import numpy as np
    >>> broadcast_view(np.array([1.0, 2.0]), (2, 2))
    array([[1., 2.],
           [1., 2.]])
    """
    xp = array_module(array)
    lead = len(shape) - array.ndim
    if xp is not HOST_XP or lead < 0 or not array.flags.c_contiguous or array.size == 0 \
            or array.dtype.hasobject:
        return xp.broadcast_to(array, shape)
    strides = [0] * lead
    for n, size, stride in zip(array.shape, shape[lead:], array.strides):
        if n != size:
            if n != 1:
                return xp.broadcast_to(array, shape)  # raises NumPy's error
            stride = 0
        strides.append(stride)
    view = np.ndarray(shape, array.dtype, array, 0, tuple(strides))
    view.flags.writeable = False
    return view


def check_device(spec, op_name):
    """Nothing for None or a registered device; else the RuntimeError naming `op_name` for a
    device flowgrad cannot honour (e.g. 'cuda': there is no CUDA backend).

    >>> check_device("cpu:0", "zeros")
    >>> check_device("cuda", "zeros")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: zeros(): device 'cuda' is not available: flowgrad runs on the 'cpu' ...
    """
    if spec is None or spec is CPU or spec == "cpu":
        return
    try:
        device(spec)
    except RuntimeError as error:
        raise RuntimeError(f"{op_name}(): {error}") from None


DEFAULT_DEVICE = [None]  # set_default_device's (and a device context's) device; None: CPU


def resolve_device(spec, op_name):
    """The device a creation function's `device=` names (None: the default device, the CPU
    unless set_default_device or a device context chose another), or check_device's error.

    >>> resolve_device(None, "zeros")
    device(type='cpu')
    """
    if spec is None:
        default = DEFAULT_DEVICE[0]
        return CPU if default is None else default
    if spec is CPU:
        return CPU
    check_device(spec, op_name)
    dev = spec if isinstance(spec, device) else device(spec)
    return CPU if dev.type == "cpu" else dev
