"""PyTorch's checkpoint format (`torch.save`'s zip: a pickled structure plus one raw record
per storage), read and written without torch.

Reading goes through a restricted unpickler, as `torch.load(weights_only=True)`: only tensor
and storage rebuilds, containers (dict, OrderedDict, list, tuple, set), plain values, dtypes,
`Size` and `device` are allowed, plus what `add_safe_globals` / `safe_globals` name; any other
global is refused (`pickle.UnpicklingError` naming it) before anything from it runs.
`weights_only=False` also rebuilds whole modules, optimizers and your own objects: any class
of flowgrad's, of `__main__` or of your own modules already imported (not the standard
library's nor an installed package's), plus plain containers and flowgrad.nn.functional's
functions (a module's activation; tensor math only); never another function or a library
class the file names (torch's unpickles anything, so a file can run code: `os.system`).

Writing emits the same opcodes torch writes (`torch._utils._rebuild_tensor_v2` over a
persistent storage id), so `torch.load(path, weights_only=True)` reads flowgrad's files.

>>> import flowgrad as flow, io
>>> buf = io.BytesIO()
>>> flow.save({"w": flow.arange(3.0)}, buf, format="torch"); _ = buf.seek(0)
>>> flow.load(buf)
{'w': tensor([0., 1., 2.])}
"""
from __future__ import annotations

import _compat_pickle
import collections
import contextlib
import datetime
import decimal
import fractions
import importlib
import io
import pickle
import re
import struct
import sys
import sysconfig
import types
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from . import dtypes as _dt
from .device import STORAGES, memory_owner
from .overrides import is_user_subclass
from .tensor import Size, Tensor, attributes_of

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals"]

# torch's legacy storage class names <-> flowgrad dtype names
_STORAGES = {f"{torch_name}Storage": name for name, torch_name in _dt.TORCH_SCALAR_NAMES.items()}
_STORAGE_OF = {v: k for k, v in _STORAGES.items()}
# the names `torch.<dtype>` pickles as (GLOBAL 'torch float32'), aliases included
_TORCH_DTYPES = {"float32": "float32", "float": "float32", "float64": "float64",
                 "double": "float64", "float16": "float16", "half": "float16",
                 "bfloat16": "bfloat16", "int64": "int64", "long": "int64", "int32": "int32",
                 "int": "int32", "int16": "int16", "short": "int16", "int8": "int8",
                 "uint8": "uint8", "bool": "bool", "complex64": "complex64",
                 "cfloat": "complex64", "complex128": "complex128", "cdouble": "complex128"}
_ZIP_MAGIC = b"PK\x03\x04"
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a"  # torch.save before 1.6: a pickled magic number
_USER_SAFE_GLOBALS = {}  # "module.name" -> object, from add_safe_globals
# torch dtypes (and their storages) flowgrad has no counterpart for: refused with a message that
# says so, not with weights_only's "re-run with weights_only=False", which would fail as well
_FOREIGN_DTYPE = re.compile(r"(u?int[0-9]+|float8_\w+|float4_\w+|complex32|chalf|q\w*int\w*|"
                            r"bits\w+|\w*Storage)")


class _StorageType:
    """What `torch.FloatStorage` etc. unpickle to: only its dtype matters here."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGES[name]


class _Storage:
    """A storage being written: a 1-d array and its record key."""

    def __init__(self, key, array):
        self.key, self.array = key, array


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
    """torch._utils._rebuild_tensor_v2: a view of `storage` (a 1-d array). Bounds are
    checked by NumPy (an ndarray refuses a view reaching outside its buffer), so a crafted
    file cannot read other memory."""
    if not isinstance(storage, np.ndarray) or storage.ndim != 1:
        raise pickle.UnpicklingError("flowgrad.load: _rebuild_tensor_v2: the storage argument "
                                     "is not a storage record of the file")
    size, stride = tuple(size), tuple(stride)
    if not all(isinstance(v, int) and v >= 0 for v in (storage_offset, *size, *stride)) \
            or len(size) != len(stride):
        raise pickle.UnpicklingError(
            f"flowgrad.load: _rebuild_tensor_v2: malformed view (offset {storage_offset}, "
            f"size {size}, stride {stride})")
    item = storage.itemsize
    try:
        arr = np.ndarray(size, storage.dtype, buffer=storage, offset=storage_offset * item,
                         strides=tuple(s * item for s in stride))
    except (ValueError, TypeError) as exc:
        raise pickle.UnpicklingError(
            f"flowgrad.load: _rebuild_tensor_v2: a tensor of size {list(size)}, stride "
            f"{list(stride)} at offset {storage_offset} does not fit in its storage of "
            f"{storage.size} elements ({exc}); the file is corrupt") from None
    t = Tensor._wrap(arr)
    if requires_grad:
        t._set_requires_grad(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks=None, state=None):
    from .nn.parameter import Parameter

    p = Parameter(data, requires_grad)
    for k, v in (state or {}).items():
        setattr(p, k, v)
    return p


def _rebuild_from_type_v2(func, new_type, args, state):
    """torch._tensor._rebuild_from_type_v2 (tensors with attributes, Parameters, tensors of a
    Tensor subclass: an alias of that type, its __new__/__init__ not run, as torch's)."""
    from .nn.parameter import Parameter

    t = func(*args)
    if new_type is not Tensor and not isinstance(t, new_type):
        t = new_type(t) if issubclass(new_type, Parameter) else t.as_subclass(new_type)
    for k, v in (state or {}).items():
        try:
            setattr(t, k, v)
        except AttributeError:
            raise pickle.UnpicklingError(
                f"flowgrad.load: a tensor of the checkpoint carries the attribute {k!r}, which "
                f"a flowgrad {type(t).__name__} cannot hold; delete it in torch (del t.{k}) "
                "and save again") from None
    return t


def _get_layout(name):
    """torch.serialization._get_layout: 'torch.strided' / 'torch.sparse_coo' to flowgrad's."""
    from . import sparse

    layouts = {"torch.strided": sparse.strided, "torch.sparse_coo": sparse.sparse_coo}
    if name not in layouts:
        raise pickle.UnpicklingError(f"flowgrad.load: the checkpoint holds the layout {name!r}; "
                                     "flowgrad has only torch.strided and torch.sparse_coo")
    return layouts[name]


def _rebuild_sparse_tensor(layout, data):
    """torch._utils._rebuild_sparse_tensor (COO only); sparse_coo_tensor checks the indices
    against the size, as torch validates loaded sparse tensors."""
    from . import sparse

    if layout is not sparse.sparse_coo or not isinstance(data, tuple) or \
            len(data) not in (3, 4):
        raise pickle.UnpicklingError(f"flowgrad.load: cannot rebuild a sparse tensor of "
                                     f"layout {layout!r}; flowgrad has sparse COO tensors only")
    indices, values, size = data[:3]
    try:
        return sparse.sparse_coo_tensor(indices, values, size,
                                        is_coalesced=data[3] if len(data) == 4 else None)
    except RuntimeError as exc:
        raise pickle.UnpicklingError(f"flowgrad.load: a sparse tensor of the file is "
                                     f"invalid ({exc}); the file is corrupt") from None


def _encode(obj, encoding="latin1"):
    """_codecs.encode, as protocol 2 pickles bytes; only str to bytes."""
    if not isinstance(obj, str) or encoding != "latin1":
        raise pickle.UnpicklingError("flowgrad.load: _codecs.encode is allowed only for bytes "
                                     "(str, latin1)")
    return obj.encode("latin1")


def _device(spec="cpu", index=None):
    from .device import device

    try:
        return device(spec, index)
    except RuntimeError:  # a 'cuda:0' in a checkpoint: flowgrad loads everything on the CPU
        return device("cpu")


def _allowed_globals():
    from .nn.parameter import Parameter

    allowed = {"collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
               "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
               "torch._utils._rebuild_parameter": _rebuild_parameter,
               "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
               "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
               "torch._utils._rebuild_sparse_tensor": _rebuild_sparse_tensor,
               "torch.serialization._get_layout": _get_layout,
               "torch.nn.parameter.Parameter": Parameter, "torch.Tensor": Tensor,
               "torch.Size": Size, "torch.device": _device, "_codecs.encode": _encode,
               "builtins.set": set,
               "builtins.bytearray": bytearray, "builtins.complex": complex}
    allowed.update({f"torch.{k}": _dt._BY_NAME[v] for k, v in _TORCH_DTYPES.items()
                    if v in _dt._BY_NAME})
    allowed.update({f"torch.{k}": _StorageType(k) for k in _STORAGES})
    return allowed


# what weights_only=False rebuilds beyond the weights-only list (see the module docstring)
_PLAIN_CLASSES = frozenset((dict, list, tuple, set, frozenset, bytearray, bytes, str, int,
                            float, complex, bool, slice, range, object, type(None),
                            collections.OrderedDict, collections.defaultdict,
                            collections.deque, collections.Counter, types.SimpleNamespace,
                            datetime.date, datetime.datetime, datetime.time,
                            datetime.timedelta, datetime.timezone, decimal.Decimal,
                            fractions.Fraction, np.ndarray, np.dtype))
_REBUILD_FUNCTIONS = frozenset(("copyreg._reconstructor", "numpy.core.multiarray._reconstruct",
                                "numpy._core.multiarray._reconstruct",
                                "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
                                "numpy._core.numeric._frombuffer", "_codecs.encode"))
# the bases of flowgrad's classes weights_only=False rebuilds, each registered by the module
# defining it (`loadable`); flowgrad's other classes are library classes to a file (a
# SummaryWriter's constructor writes files, a benchmark Timer's runs its setup string)
_LOADABLE = [Tensor, Size, _dt.dtype]


def loadable(cls):
    """Class decorator: `load(weights_only=False)` may rebuild `cls` and its subclasses."""
    _LOADABLE.append(cls)
    return cls


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                          "platlib")})


def _trusted_global(module, name, where):
    """The class (or rebuild function) `module.name` for weights_only=False, looked up among
    the modules already imported (nothing is imported for the file), or a refusal."""
    qualname = f"{module}.{name}"
    owner = sys.modules.get(module)
    if owner is None and qualname in _REBUILD_FUNCTIONS:  # (NumPy's own shims)
        owner = importlib.import_module(module)
    obj = owner
    for part in name.split(".") if owner is not None else ():
        obj = getattr(obj, part, None)
    if owner is None or obj is None:
        raise pickle.UnpicklingError(
            f"flowgrad.load: {where} names {qualname}, which is not loaded; import the module "
            "that defines it before loading (flowgrad.load imports nothing a file names)")
    if qualname in _REBUILD_FUNCTIONS or isinstance(obj, type) and (
            obj in _PLAIN_CLASSES or _trusted_class(obj) or issubclass(obj, np.generic) or
            isinstance(obj, type(np.dtype))):
        return obj  # (NumPy's scalar types and dtype classes: data, no behaviour)
    if module == "flowgrad.nn.functional" and "." not in name and isinstance(
            obj, types.FunctionType):  # (no dotted name: nothing reached through attributes)
        return obj  # (a module's activation, F.relu by default: tensor math, no effects)
    raise pickle.UnpicklingError(
        f"flowgrad.load: {where} names {qualname}, which weights_only=False does not rebuild: "
        "it rebuilds flowgrad's classes, your own and plain containers, never a function or a "
        "library class a file names (that would run code from the file). If you trust it, "
        f"allow it with flowgrad.serialization.add_safe_globals([{qualname}])")


def _trusted_class(cls):
    """flowgrad's data classes (`loadable` bases, named results) and the user's own:
    `__main__`'s or a module imported from outside the standard library and the installed
    packages."""
    name = cls.__module__
    if name == "flowgrad" or name.startswith("flowgrad."):
        return issubclass(cls, tuple(_LOADABLE)) or name == "flowgrad.return_types"
    if name == "__main__":
        return True
    path = getattr(sys.modules.get(name), "__file__", None)
    return path is not None and not path.startswith(_LIBRARY_DIRS)


def _refusal(qualname):
    return pickle.UnpicklingError(
        "Weights only load failed. This file can still be loaded, to do so you have two "
        "options, do those steps only if you trust the source of the checkpoint.\n\t(1) "
        "Re-running `flowgrad.load` with `weights_only` set to `False` will likely succeed, "
        "rebuilding flowgrad's classes and your own too (never a function or a library class "
        "the file names). Do it only if you got the file from a trusted source.\n\t(2) "
        "Alternatively, to load with `weights_only=True` please "
        "check the recommended steps in the following error message.\n\tWeightsUnpickler "
        f"error: Unsupported global: GLOBAL {qualname} was not an allowed global by default. "
        f"Please use `flowgrad.serialization.add_safe_globals([{qualname}])` or the "
        f"`flowgrad.serialization.safe_globals([{qualname}])` context manager to allowlist "
        "this global if you trust this class/function.")


def _qualname(obj):
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def add_safe_globals(safe_globals):
    """Allow these classes/functions in `load(weights_only=True)`; entries are objects or
    `(object, "module.name")` pairs, as torch.serialization.add_safe_globals.

    >>> import flowgrad as flow
    >>> class Config: pass
    >>> flow.serialization.add_safe_globals([Config])
    >>> Config in flow.serialization.get_safe_globals()
    True
    >>> flow.serialization.clear_safe_globals()
    """
    for entry in safe_globals:
        if isinstance(entry, tuple):
            obj, name = entry
        else:
            obj, name = entry, _qualname(entry)
        _USER_SAFE_GLOBALS[name] = obj


def get_safe_globals():
    """The objects `add_safe_globals` allowed (torch's function of the same name)."""
    return list(_USER_SAFE_GLOBALS.values())


def clear_safe_globals():
    """Forget every `add_safe_globals` entry."""
    _USER_SAFE_GLOBALS.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """Context manager: `add_safe_globals(safe_globals)` for the `with` block only.

    >>> import flowgrad as flow
    >>> with flow.serialization.safe_globals([Counter]):
    ...     len(flow.serialization.get_safe_globals())
    1
    """
    saved = dict(_USER_SAFE_GLOBALS)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        _USER_SAFE_GLOBALS.clear()
        _USER_SAFE_GLOBALS.update(saved)


class _Unpickler(pickle.Unpickler):
    """Resolves torch's names to flowgrad's; with `restricted` (weights_only) nothing but
    the allow-list: find_class is the only way a pickle reaches a callable."""

    def __init__(self, file, zf, prefix, restricted, name="the file"):
        super().__init__(file)
        self.zf, self.prefix, self.restricted, self.name = zf, prefix, restricted, name
        self.allowed = _allowed_globals()
        self.storages = {}
        self.on_storage = None  # called with each storage's location before it is read

    def find_class(self, module, name):
        # protocol 2 spells Python 3 names the Python 2 way (__builtin__.set)
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        qualname = f"{module}.{name}"
        if qualname in self.allowed:
            return self.allowed[qualname]
        if qualname in _USER_SAFE_GLOBALS:
            return _USER_SAFE_GLOBALS[qualname]
        # torch writes uint16/32/64 and float8 tensors through _rebuild_tensor_v3
        if module == "torch" and _FOREIGN_DTYPE.fullmatch(name) or qualname in (
                "torch._utils._rebuild_tensor_v3", "torch.storage.UntypedStorage"):
            what = f"torch.{name}" if module == "torch" else "uint16/32/64, float8 or complex32"
            raise pickle.UnpicklingError(
                f"flowgrad.load: {self.name} holds tensors of dtype {what}, which flowgrad "
                f"does not have (it has {', '.join(sorted(_dt.TORCH_SCALAR_NAMES))}); "
                "convert them in torch (e.g. t.to(torch.int64) or t.float()) and save again")
        if self.restricted:
            raise _refusal(qualname)
        if module == "torch" or module.startswith("torch."):
            raise pickle.UnpicklingError(
                f"flowgrad.load: the checkpoint pickles the torch object {qualname}, which "
                "flowgrad cannot rebuild; save its state_dict() with torch and load that")
        return _trusted_global(module, name, self.name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[2], str)):
            raise pickle.UnpicklingError(f"flowgrad.load: unsupported persistent id {pid!r}; "
                                         "only torch tensor storages are read: the file is "
                                         "corrupt or was not written by torch.save")
        _, stype, key, _location, numel = pid
        if self.zf is None:
            raise pickle.UnpicklingError(f"flowgrad.load: {self.name}: a storage in the header "
                                         "of a legacy torch checkpoint; the file is corrupt")
        if key not in self.storages:
            dtype = _dt._BY_NAME.get(stype.dtype)
            if dtype is None:
                raise pickle.UnpicklingError(f"flowgrad.load: {stype.name} needs the "
                                             "ml_dtypes package (bfloat16)")
            name = f"{self.prefix}data/{key}"
            raw = _read_record(self.zf, name, self.name)
            if self.on_storage is not None:  # (torch maps a storage once it has read it)
                self.on_storage(_location)
            if not isinstance(numel, int) or len(raw) < numel * dtype.itemsize:
                raise pickle.UnpicklingError(
                    f"flowgrad.load: storage {key!r} holds {len(raw)} bytes, fewer than "
                    f"{numel} {dtype.name} elements; the file is corrupt")
            # a bytearray buffer: the loaded tensors are writable, as torch's
            arr = np.frombuffer(bytearray(raw[:numel * dtype.itemsize]), dtype.np)
            self.storages[key] = storage = arr.astype(arr.dtype.newbyteorder("<"), copy=False)
            STORAGES[id(storage)] = storage  # (tensors over it: torch's storage offsets)
        return self.storages[key]


def _read_record(zf, record, name):
    """The bytes of a zip record; a missing or damaged one raises RuntimeError naming the
    file, as torch's zip reader."""
    try:
        return zf.read(record)
    except KeyError:
        raise RuntimeError(f"flowgrad.load: {name}: the record {record!r} is missing; the file "
                           "is corrupt") from None
    except (zipfile.BadZipFile, ValueError, EOFError, NotImplementedError) as exc:
        raise RuntimeError(f"flowgrad.load: {name}: the record {record!r} is damaged ({exc}); "
                           "the file is corrupt") from None


def is_torch_file(data):
    """True for torch.save's zip format (and its legacy pickle format)."""
    return data[:4] == _ZIP_MAGIC or data[:4] == _LEGACY_MAGIC


class _LegacyUnpickler(_Unpickler):
    """torch.save(_use_new_zipfile_serialization=False): storages are read after the main
    pickle, from the same stream; here each is a zeroed buffer filled then."""

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"
                and isinstance(pid[1], _StorageType) and isinstance(pid[4], int)
                and pid[5] is None):
            raise pickle.UnpicklingError(f"flowgrad.load: {self.name}: unsupported persistent "
                                         f"id {pid!r}; only torch tensor storages are read: "
                                         "the file is corrupt or was not written by torch.save")
        _, stype, key, _location, numel, _view = pid
        if key not in self.storages:
            if self.on_storage is not None:
                self.on_storage(_location)
            dtype = _dt._BY_NAME[stype.dtype]
            # (zf: the bytes the file has left for storages, so a crafted count cannot make
            # it allocate more memory than the file's size)
            self.zf -= numel * dtype.itemsize
            if numel < 0 or self.zf < 0:
                raise RuntimeError(f"flowgrad.load: {self.name}: storage {key!r} claims "
                                   f"{numel} elements, more than the file holds; the file is "
                                   "corrupt")  # (torch's RuntimeError, when it reads them)
            self.storages[key] = storage = np.frombuffer(bytearray(numel * dtype.itemsize),
                                                         dtype.np)
            STORAGES[id(storage)] = storage  # (tensors over it: torch's storage offsets)
        elif self.storages[key].size != numel:
            raise pickle.UnpicklingError(f"flowgrad.load: {self.name}: storage {key!r} is "
                                         "referenced with two sizes; the file is corrupt")
        return self.storages[key]


_LEGACY_MAGIC_NUMBER = 0x1950A86A20F9469CFC6C


def _load_legacy(data, name, weights_only, on_storage=None):
    """Read torch's legacy (non-zip) format: magic number, protocol version, system info,
    the pickled object, the list of storage keys, then each storage as an int64 element
    count and its bytes (little-endian)."""
    f = io.BytesIO(data)

    def header():
        return _Unpickler(f, None, "", True, name).load()

    if header() != _LEGACY_MAGIC_NUMBER or header() != 1001:
        raise RuntimeError(f"flowgrad.load: {name} has a bad magic number or protocol version "
                           "for torch's legacy format; the file is corrupt")
    info = header()  # (torch reads no more of it than flowgrad: a damaged one loads)
    if isinstance(info, dict) and info.get("little_endian") is False:
        raise ValueError(f"flowgrad.load: {name} was written on a big-endian machine; "
                         "flowgrad reads little-endian checkpoints")
    unpickler = _LegacyUnpickler(f, len(data) - f.tell(), "", weights_only, name)
    unpickler.on_storage = on_storage
    result = unpickler.load()
    keys = header()
    if not isinstance(keys, list) or set(keys) != set(unpickler.storages):
        raise pickle.UnpicklingError(f"flowgrad.load: {name}: the list of storage records "
                                     "does not match the storages the object uses; the file "
                                     "is corrupt")
    for key in keys:
        arr = unpickler.storages[key]
        raw = f.read(8 + arr.nbytes)
        if len(raw) < 8 + arr.nbytes or int.from_bytes(raw[:8], "little") != arr.size:
            raise RuntimeError(f"flowgrad.load: {name}: storage {key!r} of {arr.size} elements "
                               "is truncated or has the wrong size; the file is corrupt")
        arr.view(np.uint8)[:] = np.frombuffer(raw, np.uint8, offset=8)
    return result


@contextlib.contextmanager
def _corrupt_pickle_errors(name):
    """What a damaged pickle stream raises (EOFError, struct.error, a bare UnpicklingError...)
    becomes an UnpicklingError naming the file; flowgrad's own errors already name it."""
    try:
        yield
    except pickle.UnpicklingError as exc:
        msg = str(exc)
        if msg.startswith("Weights only load failed") or name in msg:
            raise
        if msg.startswith("flowgrad.load: "):  # a rebuild function's: add the file's name
            raise pickle.UnpicklingError(f"flowgrad.load: {name}: {msg[15:]}") from None
        raise pickle.UnpicklingError(f"flowgrad.load: {name} is a truncated or corrupt torch "
                                     f"checkpoint ({exc})") from exc
    except RecursionError:
        raise pickle.UnpicklingError(f"flowgrad.load: {name} nests too deeply") from None
    except (EOFError, IndexError, KeyError, struct.error, UnicodeDecodeError) as exc:
        raise pickle.UnpicklingError(f"flowgrad.load: {name} is a truncated or corrupt torch "
                                     f"checkpoint ({type(exc).__name__}: {exc})") from exc


def load_bytes(data, name, weights_only=True, on_storage=None):
    """Read the bytes of a torch checkpoint (see the module docstring); `on_storage(location)`
    is called before each storage is read (torch.load checks map_location there: a file
    without tensors loads whatever map_location says)."""
    if data[:4] == _LEGACY_MAGIC:
        with _corrupt_pickle_errors(name):
            return _load_legacy(data, name, weights_only, on_storage)
    zf, prefix, names = open_zip(data, name)
    byteorder = f"{prefix}byteorder"
    if byteorder in names and _read_record(zf, byteorder, name).strip() not in (b"little", b""):
        raise ValueError(f"flowgrad.load: {name} was written on a big-endian machine; "
                         "flowgrad reads little-endian checkpoints")
    unpickler = _Unpickler(io.BytesIO(_read_record(zf, f"{prefix}data.pkl", name)), zf, prefix,
                           weights_only, name)
    unpickler.on_storage = on_storage
    with _corrupt_pickle_errors(name):
        return unpickler.load()


def open_zip(data, name):
    """(zip file, record prefix, record names) of a torch zip checkpoint's bytes; a damaged
    zip raises RuntimeError, as torch's reader."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = zf.namelist()
    except (zipfile.BadZipFile, ValueError, NotImplementedError) as exc:  # (torch's reader
        # raises RuntimeError)
        raise RuntimeError(f"flowgrad.load: {name} is not a valid torch zip checkpoint ({exc});"
                           " the file is truncated or corrupt") from None
    pkl = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pkl) != 1:
        raise RuntimeError(f"flowgrad.load: {name} is a zip file without the data.pkl record "
                           "of a torch checkpoint; the file is corrupt")
    prefix = pkl[0][:-len("data.pkl")]
    if f"{prefix}version" not in names and f"{prefix}.data/version" not in names:
        raise RuntimeError(f"flowgrad.load: {name} lacks the version record every torch "
                           "checkpoint has; the file is corrupt")
    return zf, prefix, names


class _Pickler(pickle._Pickler):
    """The pure-Python pickler, with tensors, dtypes, sizes and devices written as torch
    writes them (GLOBAL torch names that cannot be imported here, hence emitted by hand)."""

    def __init__(self, file):
        super().__init__(file, protocol=2)
        self.storages = {}  # id(root array) -> _Storage
        self.retyped = {}  # (id(root array), dtype) -> the root viewed as that dtype
        self.viewed_as = {}  # id(root array) -> the dtype its storage is saved as

    def global_name(self, module, name):
        self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode())

    def save(self, obj, save_persistent_id=True):
        from .device import device
        from .nn.parameter import Parameter
        from .sparse import SparseTensor, layout

        kind = type(obj)
        if not (isinstance(obj, (Tensor, _dt.dtype, _StorageType, device, SparseTensor, layout))
                or kind is Size):
            return super().save(obj, save_persistent_id)
        memo = self.memo.get(id(obj))
        if memo is not None:
            self.write(self.get(memo[0]))
            return
        if isinstance(obj, _StorageType):
            self.global_name("torch", obj.name)
            return  # a marker made per storage: not memoised
        if isinstance(obj, Tensor):
            from .serialization import _check_materialized

            _check_materialized(obj, None)
        if isinstance(obj, _dt.dtype):
            self.global_name("torch", obj.name)
        elif kind is Size:
            self.global_name("torch", "Size")
            self.save((tuple(int(s) for s in obj),))
            self.write(pickle.REDUCE)
        elif isinstance(obj, layout):
            self.global_name("torch.serialization", "_get_layout")
            self.save((f"torch.{obj.name}",))
            self.write(pickle.REDUCE)
        elif isinstance(obj, SparseTensor):
            self.global_name("torch._utils", "_rebuild_sparse_tensor")
            self.save((obj.layout, (obj._indices(), obj._values(), Size(obj.shape),
                                    obj.is_coalesced())))
            self.write(pickle.REDUCE)
        elif isinstance(obj, device):
            self.global_name("torch", "device")
            self.save((obj.type,))
            self.write(pickle.REDUCE)
        elif is_user_subclass(obj) or type(obj) is Tensor and attributes_of(obj):
            # (torch's reduction of a subclass's tensor, or of one with attributes)
            self.global_name("torch._tensor", "_rebuild_from_type_v2")
            self.write(pickle.MARK)
            self.global_name("torch._utils", "_rebuild_tensor_v2")
            if type(obj) is Tensor:
                self.global_name("torch", "Tensor")
            else:
                self.save(type(obj))
            storage, offset, strides = self.storage_of(obj._data)
            self.save((storage, offset, tuple(obj._data.shape), strides, obj.requires_grad,
                       OrderedDict()))
            self.save(attributes_of(obj) or {})
            self.write(pickle.TUPLE + pickle.REDUCE)
        elif isinstance(obj, Parameter):
            state = attributes_of(obj)
            self.global_name("torch._utils", "_rebuild_parameter_with_state" if state else
                             "_rebuild_parameter")
            self.write(pickle.MARK)
            self.save_tensor(obj, False)
            self.save(obj.requires_grad)
            self.save(OrderedDict())
            if state:
                self.save(state)
            self.write(pickle.TUPLE + pickle.REDUCE)
        else:
            self.save_tensor(obj, obj.requires_grad)
        self.memoize(obj)

    def save_tensor(self, t, requires_grad):
        storage, offset, strides = self.storage_of(t._data)
        self.global_name("torch._utils", "_rebuild_tensor_v2")
        self.save((storage, offset, tuple(t._data.shape), strides, requires_grad,
                   OrderedDict()))
        self.write(pickle.REDUCE)

    def storage_of(self, data):
        """(storage, element offset, element strides): the root array the data views when
        it is one contiguous allocation (views then share it, as torch's), else a copy."""
        root = owner = memory_owner(data)
        item = data.itemsize
        if root.dtype != data.dtype and root.flags.c_contiguous and root.nbytes % item == 0:
            # a view as another dtype (t.view(torch.bfloat16) of an int16 tensor): torch's
            # storage is untyped, so it is saved as one storage of the view's dtype, strides kept
            root = self.retyped.setdefault((id(root), data.dtype.str),
                                           root.reshape(-1).view(data.dtype))
        ptr, rptr = data.__array_interface__["data"][0], root.__array_interface__["data"][0]
        if root.flags.c_contiguous and root.dtype == data.dtype and \
                data.dtype.byteorder != ">" and (ptr - rptr) % item == 0 and \
                all(s >= 0 and s % item == 0 for s in data.strides) and \
                rptr <= ptr and ptr + sum((n - 1) * s for n, s in zip(data.shape, data.strides)
                                          if n) + item <= rptr + root.nbytes:
            if self.viewed_as.setdefault(id(owner), data.dtype) != data.dtype:
                raise RuntimeError(
                    f"flowgrad.save: cannot save multiple tensors that view the same data as "
                    f"different types ({self.viewed_as[id(owner)]} and {data.dtype}), as "
                    "torch.save cannot: save a copy of one (t.clone()), or use flowgrad's own "
                    "format (format='safetensors'), which keeps them sharing")
            return self.storage(root), (ptr - rptr) // item, tuple(s // item
                                                                  for s in data.strides)
        flat = np.ascontiguousarray(data.reshape(-1)).astype(data.dtype.newbyteorder("<"))
        contiguous = tuple(int(np.prod(data.shape[i + 1:])) for i in range(data.ndim))
        return self.storage(flat), 0, contiguous

    def storage(self, root):
        s = self.storages.get(id(root))
        if s is None:
            name = _dt.from_numpy_dtype(root.dtype).name
            if name not in _STORAGE_OF:
                raise TypeError(f"flowgrad.save: torch has no storage for dtype {name}")
            s = self.storages[id(root)] = _Storage(str(len(self.storages)), root)
        return s

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            name = _STORAGE_OF[_dt.from_numpy_dtype(obj.array.dtype).name]
            return ("storage", _StorageType(name), obj.key, "cpu", int(obj.array.size))
        return None


def _write_aligned(zf, out, name, data):
    """A stored zip record whose data starts at a multiple of 64 bytes, as torch.save pads
    its records (an "FB" extra field): torch.load(mmap=True) maps the storages in place, and
    SIMD code crashes on complex128 data at an unaligned address."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    pad = -(out.tell() + 30 + len(name.encode()) + 4) % 64
    info.extra = b"FB" + pad.to_bytes(2, "little") + b"Z" * pad
    zf.writestr(info, data)


def save_bytes(obj):
    """`obj` in torch's zip format (the bytes of a .pt file)."""
    buf = io.BytesIO()
    pickler = _Pickler(buf)
    pickler.dump(obj)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        _write_aligned(zf, out, "archive/data.pkl", buf.getvalue())
        _write_aligned(zf, out, "archive/byteorder", b"little")
        for s in pickler.storages.values():
            _write_aligned(zf, out, f"archive/data/{s.key}",
                           np.ascontiguousarray(s.array).tobytes())
        _write_aligned(zf, out, "archive/version", b"3\n")
    return out.getvalue()
