"""Checkpoints: `flowgrad.save(obj, f)` / `flowgrad.load(f)` in the safetensors format.

`obj` is a nest of dicts, lists and tuples whose leaves are tensors, NumPy arrays, or plain
values (str, int, float, bool, None), e.g. {"model": model.state_dict(), "optim":
opt.state_dict(), "epoch": 3}. Tensors are stored flat under their path ("model.weight",
"optim.state.0.exp_avg"); the nesting and the plain values are JSON in the header's
metadata. Loading a safetensors file never runs code from it (there is no pickle): a file
whose header, sizes or metadata don't add up raises ValueError naming the file and the problem.
What safetensors cannot hold (complex or sparse tensors, sets, bytes...) is written in torch's
zip format instead (see `save`); `load` reads that, and torch's legacy format, through a
weights-only unpickler unless told `weights_only=False` (flowgrad/torch_format.py).

>>> import flowgrad as flow, io
>>> buf = io.BytesIO()
>>> flow.save({"w": flow.ones(2), "epoch": 3}, buf); _ = buf.seek(0)
>>> flow.load(buf)
{'w': tensor([1., 1.]), 'epoch': 3}
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import tempfile
from collections import OrderedDict

import numpy as np

from . import dtypes as _dt
from . import torch_format
from .autograd.interpreter import check_read
from .device import STORAGES, memory_owner
from .overrides import is_user_subclass
from .tensor import Tensor, attributes_of
from .torch_format import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals",
           "safe_globals"]

_FORMAT = "flowgrad-checkpoint-1"
_FORMAT_VIEWS = "flowgrad-checkpoint-2"  # the same, plus storages shared by several views
# safetensors' header dtype codes -> NumPy dtypes (bfloat16 when ml_dtypes is present)
_CODES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
if _dt.bfloat16 is not None:
    _CODES["BF16"] = _dt.bfloat16.np
_BY_NAME = {np.dtype(t).name: np.dtype(t) for t in _CODES.values()}
# How deeply dicts/lists/tuples may nest in a checkpoint. Each level is at most 3 JSON levels
# in the structure metadata; loading checks the JSON depth before parsing it, so a crafted
# file raises ValueError instead of RecursionError.
_MAX_DEPTH = 200
_MAX_JSON_DEPTH = 3 * _MAX_DEPTH + 8
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_CONTAINERS = (dict, OrderedDict, list, tuple)


def _where(path):
    return ".".join(path) or "the root"


def _bounds(a):
    """[first byte, last byte + 1) of a non-empty array's elements in memory."""
    ptr = a.__array_interface__["data"][0]
    lo = hi = ptr
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += s * (n - 1)
        else:
            hi += s * (n - 1)
    return lo, hi + a.itemsize


def _c_strides(a):
    """Whether `a` has C-contiguous strides, size-1 dimensions included (NumPy's flag ignores
    their strides; torch keeps them: x[::2] of 2 elements has stride (2,))."""
    step, want = a.itemsize, []
    for n in reversed(a.shape):
        want.append(step)
        step *= n
    return a.strides == tuple(reversed(want))


def _digest(structure, arrays):
    """sha256 over the structure metadata and every stored tensor (name, dtype, shape and
    bytes, in name order): independent of where safetensors places the data."""
    h = hashlib.sha256(structure.encode())
    for key in sorted(arrays):
        a = arrays[key]
        h.update(f"\0{key}\0{a.dtype.name}\0{list(a.shape)}\0".encode())
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
    return "sha256:" + h.hexdigest()


def _json_depth(text):
    """The deepest nesting of [ and { in JSON text (strings skipped), without recursing."""
    b = np.frombuffer(_JSON_STRING.sub('""', text).encode(), np.uint8)
    step = np.isin(b, (91, 123)).astype(np.int64) - np.isin(b, (93, 125))
    return int(np.cumsum(step).max(initial=0))


class _Writer:
    """Walks the object: collects the distinct tensors and arrays (leaves), then stores each
    as a flat array under a unique path key, or, where several of them overlap in memory
    (a tensor and its views), their common storage once plus each one's offset and strides.
    Returns the JSON tree of the nesting."""

    def __init__(self):
        self.arrays = {}
        self.leaves = []  # (array, path, node) per distinct tensor/array, in walk order
        self.seen = {}  # id(obj) -> node: an object referenced twice is stored once
        self.views = False

    def key(self, path):
        base = ".".join(path) or "_"
        key, n = base, 1
        while key in self.arrays:
            key, n = f"{base}#{n}", n + 1
        return key

    def leaf(self, obj, data, path, extra):
        if id(obj) in self.seen:
            return self.seen[id(obj)]
        if data.dtype.name != "bfloat16" and data.dtype.type not in _CODES.values():
            raise TypeError(f"flowgrad.save: cannot store an array of dtype {data.dtype} at "
                            f"{_where(path)} in the safetensors format; save to a .pt path "
                            f"(torch's format, which stores complex tensors) instead")
        node = dict(extra)
        self.seen[id(obj)] = node
        self.leaves.append((data, path, node))
        return node

    def node(self, obj, path):
        if isinstance(obj, Tensor):
            if is_user_subclass(obj):  # (torch's format records its type)
                raise TypeError(f"flowgrad.save: safetensors cannot record the type of the "
                                f"{type(obj).__name__} tensor at {_where(path)}; save it in "
                                f"torch's format (format='torch', or a .pt path)")
            attributes = attributes_of(obj)
            if attributes:  # (and its attributes)
                raise TypeError(f"flowgrad.save: safetensors cannot record the attributes "
                                f"{sorted(attributes)} of the tensor at "
                                f"{_where(path)}; save it in torch's format (format='torch', "
                                f"or a .pt path)")
            check_read(obj, "flowgrad.save()")
            _check_materialized(obj, path)
            return self.leaf(obj, obj._data, path, self._flags(obj))
        if isinstance(obj, np.ndarray):
            return self.leaf(obj, obj, path, {"ndarray": True})
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return {"V": obj}
        if isinstance(obj, np.generic):
            return {"V": obj.item()}
        if isinstance(obj, _dt.dtype):
            return {"dtype_obj": obj.name}
        if isinstance(obj, (dict, list, tuple)) and len(path) >= _MAX_DEPTH:
            raise ValueError(f"flowgrad.save: the object nests dicts/lists/tuples more than "
                             f"{_MAX_DEPTH} levels deep (at {_where(path[:8])}...); "
                             "checkpoints allow at most that: flatten the structure")
        if isinstance(obj, (dict, list, tuple)) and type(obj) not in _CONTAINERS:
            # a Size, namedtuple, defaultdict...: kept only by torch's format (pickle), as
            # torch keeps its type; here it would come back as a plain dict/list/tuple
            raise TypeError(f"flowgrad.save: cannot store a {type(obj).__name__} (a "
                            f"{type(obj).__mro__[1].__name__} subclass) at {_where(path)} in "
                            "the safetensors format; save to a .pt path (torch's format)")
        if isinstance(obj, dict):
            attrs = vars(obj) if isinstance(obj, OrderedDict) else {}
            if attrs.keys() - {"_metadata"}:
                raise TypeError(f"flowgrad.save: the OrderedDict at {_where(path)} has "
                                f"attributes {sorted(attrs)}, which the safetensors format "
                                "cannot hold; save to a .pt path (torch's format)")
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (bool, int, float, str))):
                    raise TypeError(f"flowgrad.save: dict keys must be str, int, float, bool "
                                    f"or None; got {type(k).__name__} at {_where(path)}")
                items.append([k, self.node(v, path + [str(k)])])
            out = {"D": items}
            if isinstance(obj, OrderedDict):
                out["ordered"] = True
            if attrs:  # a state_dict's _metadata (module versions), kept as torch keeps it
                out["metadata"] = self.node(attrs["_metadata"], path + ["_metadata"])
            return out
        if isinstance(obj, (list, tuple)):
            tag = "L" if isinstance(obj, list) else "U"
            return {tag: [self.node(v, path + [str(i)]) for i, v in enumerate(obj)]}
        raise TypeError(
            f"flowgrad.save: cannot store an object of type {type(obj).__name__} at "
            f"{_where(path)}; checkpoints hold tensors, arrays, dicts, lists, "
            "tuples and str/int/float/bool/None (no pickle). Save its state_dict() instead")

    def finish(self):
        """Store the leaves: group those whose memory overlaps, each group once."""
        spans = sorted((*_bounds(a), i) for i, (a, _, _) in enumerate(self.leaves) if a.size)
        groups, end = [], None
        for lo, hi, i in spans:
            if groups and lo < end:
                groups[-1].append(i)
                end = max(end, hi)
            else:
                groups.append([i])
                end = hi
        shared = set()
        for members in groups:
            # a non-contiguous tensor is stored as its storage too: it loads with its strides
            # (an expanded one aliasing itself), as after torch.load
            if (len(members) > 1 or not _c_strides(self.leaves[members[0]][0])) and \
                    self.store_shared(sorted(members)):
                shared.update(members)
        for i, (a, path, node) in enumerate(self.leaves):
            if i not in shared:
                node.update(self.store(a, path))

    def store(self, data, path):
        if not data.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
            data = data.copy(order="C")
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        key = self.key(path)
        self.arrays[key] = data
        return {"T": key, "dtype": data.dtype.name, "shape": list(data.shape)}

    def store_shared(self, members):
        """Store the bytes that overlapping leaves span once; each leaf becomes a view of
        them (byte offset and byte strides), as torch.save keeps one storage per tensor
        family. Returns False (store them apart) for byte orders other than little."""
        arrays = [self.leaves[i][0] for i in members]
        if any(a.dtype.byteorder == ">" for a in arrays):
            return False
        spans = [_bounds(a) for a in arrays]
        lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
        # overlapping byte ranges of live arrays lie in one allocation, so all of [lo, hi)
        # is readable memory of that allocation
        raw = np.frombuffer(ctypes.string_at(lo, hi - lo), np.uint8)
        dtype = arrays[0].dtype
        if all(a.dtype == dtype for a in arrays) and raw.size % dtype.itemsize == 0:
            raw = raw.view(dtype)  # a typed storage reads well in other safetensors tools
        key = self.key(self.leaves[members[0]][1])
        self.arrays[key] = raw
        for i, a, (start, _) in zip(members, arrays, spans):
            offset = a.__array_interface__["data"][0] - lo
            self.leaves[i][2].update({"T": key, "dtype": a.dtype.name, "shape": list(a.shape),
                                      "view": {"offset": offset, "strides": list(a.strides)},
                                      "ref": i})
        self.views = True
        return True

    @staticmethod
    def _flags(t):
        from .nn.parameter import Parameter

        flags = {}
        if isinstance(t, Parameter):
            flags["param"] = True
        if t.requires_grad:
            flags["requires_grad"] = True
        return flags


def _check_materialized(t, path):
    from .nn.parameter import is_lazy

    if is_lazy(t):
        where = "a tensor" if path is None else _where(path)
        raise ValueError(f"flowgrad.save: {where} is an uninitialized parameter or "
                         f"buffer (a lazy module's, before its first forward): it has no "
                         f"values to save; run the module on a batch first")


def _umask():
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _write_atomic(path, blob):
    """Write to a fresh temporary file beside `path`, then rename it over `path`: readers
    see the old file or the new one, never a part; concurrent savers never share a file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _format_wanted(obj, f, format):
    """'torch' (asked for, a .pt/.pth path, or a whole nn.Module), 'safetensors' (asked for,
    or a .safetensors path), or None: safetensors where it holds the object, else torch's."""
    from .nn.module import Module

    if format not in (None, "torch", "safetensors"):
        raise ValueError(f"flowgrad.save: format must be 'torch' or 'safetensors', got "
                         f"{format!r}")
    if format is not None:
        return format
    if isinstance(obj, Module):
        return "torch"
    name = getattr(f, "name", f) if hasattr(f, "write") else f
    if isinstance(name, (str, os.PathLike)):
        name = os.fspath(name).lower()
        if name.endswith((".pt", ".pth")):
            return "torch"
        if name.endswith(".safetensors"):
            return "safetensors"
    return None


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False, format=None):
    """Write `obj` (tensors nested in dicts/lists/tuples, plus plain values) to the path or
    binary file object `f` in the safetensors format. Tensors that share memory (a tensor
    and its views) are stored once and share it again after `load`; a non-contiguous one
    keeps its strides (as torch.save's). A sha256 checksum of
    the data is stored and checked by `load`. Saving to a path writes a temporary file and
    renames it, so concurrent savers and loaders of one path never see a partial file.

    `format="torch"`, a path ending in `.pt`/`.pth`, an `nn.Module` as `obj` (a whole
    model), or (unless `format="safetensors"` or a `.safetensors` path asks for that) an
    object safetensors cannot hold (complex or sparse tensors, sets, bytes, a `Size`, a
    namedtuple...) write PyTorch's zip format instead (flowgrad/torch_format.py):
    `torch.load` reads it, with `weights_only=True` unless it holds objects other than data
    (a whole model, a namedtuple), which `load` then refuses as torch.load does.
    pickle_module, pickle_protocol, _use_new_zipfile_serialization and
    _disable_byteorder_record are accepted for torch.save's signature and ignored.

    >>> import flowgrad as flow, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> flow.save({"w": flow.zeros(2, 3), "step": 10}, path)
    >>> flow.load(path)["w"].shape
    flowgrad.Size([2, 3])
    """
    wanted = _format_wanted(obj, f, format)
    writer = None
    if wanted != "torch":
        writer = _Writer()
        try:
            tree = writer.node(obj, [])
        except TypeError:
            if wanted == "safetensors":
                raise
            writer = None  # torch.save stores it (complex tensors, sets, bytes, Size...)
    if writer is None:
        blob = torch_format.save_bytes(obj)
        if hasattr(f, "write"):
            f.write(blob)
        else:
            _write_atomic(os.fspath(f), blob)
        return
    from safetensors import TensorSpec, serialize

    writer.finish()  # fills the tree's tensor nodes
    structure = json.dumps(tree)
    specs = {k: TensorSpec(dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data,
                           data_len=a.nbytes) for k, a in writer.arrays.items()}
    metadata = {"format": _FORMAT_VIEWS if writer.views else _FORMAT, "structure": structure,
                "checksum": _digest(structure, writer.arrays)}
    blob = serialize(specs, metadata=metadata)
    del writer  # the arrays stayed alive until serialize copied them
    if hasattr(f, "write"):
        f.write(blob)
        return
    _write_atomic(os.fspath(f), blob)


class _Reader:
    def __init__(self, name, arrays):
        self.name, self.arrays, self.used = name, arrays, set()
        # (key, ref) -> object: a tensor saved once and referenced twice is one object again
        self.loaded = {}

    def bad(self, what):
        return ValueError(f"flowgrad.load: {self.name}: {what}; the file is corrupt or was not "
                          "written by flowgrad.save")

    def node(self, n, path="the root"):
        if not isinstance(n, dict) or len(n.keys() & {"T", "V", "D", "L", "U", "dtype_obj"}) != 1:
            raise self.bad(f"metadata entry at {path} is malformed")
        if "V" in n:
            v = n["V"]
            if not (v is None or isinstance(v, (bool, int, float, str))):
                raise self.bad(f"metadata value at {path} is not a plain value")
            return v
        if "T" in n:
            return self.tensor(n, path)
        if "dtype_obj" in n:
            try:
                return _dt.as_dtype(n["dtype_obj"])
            except Exception:
                raise self.bad(f"unknown dtype {n['dtype_obj']!r} at {path}") from None
        if "D" in n:
            items = n["D"]
            if not isinstance(items, list) or not all(
                    isinstance(it, list) and len(it) == 2 for it in items):
                raise self.bad(f"metadata dict at {path} is malformed")
            out = OrderedDict() if n.get("ordered") else {}
            for k, v in items:
                if not (k is None or isinstance(k, (bool, int, float, str))):
                    raise self.bad(f"metadata dict key at {path} is not a plain value")
                out[k] = self.node(v, f"{path}.{k}")
            if "metadata" in n and isinstance(out, OrderedDict):
                out._metadata = self.node(n["metadata"], f"{path}._metadata")
            return out
        seq = n["L"] if "L" in n else n["U"]
        if not isinstance(seq, list):
            raise self.bad(f"metadata list at {path} is malformed")
        out = [self.node(v, f"{path}.{i}") for i, v in enumerate(seq)]
        return out if "L" in n else tuple(out)

    def tensor(self, n, path):
        key = n["T"]
        if not isinstance(key, str) or key not in self.arrays:
            raise self.bad(f"metadata refers to tensor {key!r} (at {path}) that the file lacks")
        self.used.add(key)
        ref = (key, n.get("ref"))
        if ref in self.loaded:
            return self.loaded[ref]
        arr = self.arrays[key]
        if "view" in n:
            arr = self.view(arr, n, key, path)
        elif n.get("dtype") != arr.dtype.name or n.get("shape") != list(arr.shape):
            raise self.bad(f"tensor {key!r} is {arr.dtype.name}{list(arr.shape)} in the file "
                           f"but {n.get('dtype')}{n.get('shape')} in the metadata")
        self.loaded[ref] = out = self._build(arr, n)
        return out

    def view(self, storage, n, key, path):
        """A view into a shared storage: bounds are checked (np.ndarray refuses a view
        reaching outside its buffer), so a crafted file cannot read other memory."""
        v, shape, dtype = n["view"], n.get("shape"), _BY_NAME.get(n.get("dtype"))

        def ints(xs):
            return isinstance(xs, list) and all(
                isinstance(x, int) and not isinstance(x, bool) for x in xs)

        if dtype is None or not ints(shape) or any(d < 0 for d in shape) or \
                not isinstance(v, dict) or not ints(v.get("strides")) or \
                len(v["strides"]) != len(shape) or not ints([v.get("offset")]) or \
                v["offset"] < 0 or storage.ndim != 1:
            raise self.bad(f"view metadata at {path} (of storage {key!r}) is malformed")
        root = memory_owner(storage)
        STORAGES[id(root)] = root  # (its views report storage offsets from the saved span)
        try:
            return np.ndarray(tuple(shape), dtype, buffer=storage, offset=v["offset"],
                              strides=tuple(v["strides"]))
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.bad(f"view at {path}: {n.get('dtype')}{shape} at byte offset "
                           f"{v['offset']} with strides {v['strides']} does not fit in "
                           f"storage {key!r} of {storage.nbytes} bytes ({exc})") from None

    @staticmethod
    def _build(arr, n):
        if n.get("ndarray"):
            return arr
        t = Tensor._wrap(arr)
        if n.get("param"):
            from .nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(n.get("requires_grad")))
        if n.get("requires_grad"):
            t._set_requires_grad(True)
        return t


def _read(f):
    if hasattr(f, "read"):
        return f.read(), getattr(f, "name", repr(f))
    path = os.fspath(f)
    with open(path, "rb") as fh:
        return fh.read(), repr(path)


def _check_map_location(map_location, location="cpu"):
    """Accept what torch.load accepts for a storage saved at `location`; a device flowgrad
    lacks ('cuda') raises RuntimeError, as torch.load on a machine without it. Tensors
    always load on the CPU. Called (as torch checks) when the first storage is read: a file
    without tensors loads whatever map_location says."""
    from .device import device

    if map_location is None or callable(map_location):
        return
    if isinstance(map_location, dict):
        target = map_location.get(location)  # what the file's storages would map to
        if target is not None:
            _check_map_location(target)
        return
    if type(map_location).__name__ == "device" and not isinstance(map_location, device):
        map_location = str(map_location)  # a torch.device
    if not isinstance(map_location, (str, device)):
        raise TypeError(f"flowgrad.load: map_location must be a device, a str, a dict or a "
                        f"callable (as torch.load), got {type(map_location).__name__} "
                        f"{map_location!r}")
    device(map_location)  # RuntimeError naming the device, for any but the CPU


def load(f, map_location=None, weights_only=None, mmap=None):
    """Read a checkpoint written by `save` (from a path or binary file object). A plain
    safetensors file (no flowgrad metadata) loads as a flat {name: tensor} dict. A PyTorch
    checkpoint (`torch.save`'s zip format) is read without torch: with `weights_only`
    (the default, as torch's) only tensors, containers and plain values are rebuilt and any
    other pickled global is refused, naming it; `weights_only=False` also rebuilds whole
    modules, optimizers and objects of your own classes (flowgrad's, `__main__`'s or your
    imported modules' classes, never a function or a library class a file names: torch's
    unpickles anything), still only for files you trust. `map_location` and `mmap` are
    accepted and checked as torch checks them (a device other than the CPU raises
    RuntimeError; mmap needs a path); the tensors are always read into memory on the CPU.

    >>> import flowgrad as flow
    >>> import io
    >>> buf = io.BytesIO()
    >>> flow.save({"w": flow.tensor([1.0, 2.0]), "step": 3}, buf)
    >>> _ = buf.seek(0)
    >>> flow.load(buf)
    {'w': tensor([1., 2.]), 'step': 3}
    """
    from safetensors import deserialize

    data, name = _read(f)
    is_path = not hasattr(f, "read") and isinstance(f, (str, os.PathLike))
    # (torch.load: mmap of anything but a zip raises RuntimeError; flowgrad's own format
    # loads from a path and, as a torch zip, raises ValueError from a file object)
    if mmap and data[:4] != torch_format._ZIP_MAGIC and (torch_format.is_torch_file(data) or
                                                         data[8:9] != b"{"):
        raise RuntimeError(f"flowgrad.load: {name}: mmap can only be used with files saved "
                           "with torch.save(_use_new_zipfile_serialization=True) (as torch.load; "
                           "flowgrad's own format from a path too); load it without mmap")
    if mmap and not is_path:
        if data[:4] == torch_format._ZIP_MAGIC:
            torch_format.open_zip(data, name)  # (torch opens the zip first: a damaged one
            # raises RuntimeError)
        raise ValueError(f"flowgrad.load: mmap=True needs a file path, got {type(f).__name__}"
                         "; pass the path (as torch.load) or leave mmap unset")

    def check_map_location(location):
        _check_map_location(map_location, location)

    if torch_format.is_torch_file(data):
        return torch_format.load_bytes(data, name, weights_only is not False,
                                       check_map_location)
    try:
        entries = deserialize(data)
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
    except Exception as exc:
        raise ValueError(f"flowgrad.load: {name} is not a valid safetensors file ({exc})") \
            from None
    arrays = {}
    for key, e in entries:
        if e["dtype"] not in _CODES:
            raise ValueError(f"flowgrad.load: {name}: tensor {key!r} has dtype {e['dtype']}, "
                             "which flowgrad cannot hold")
        arrays[key] = np.frombuffer(e["data"], _CODES[e["dtype"]]).reshape(e["shape"])
    if arrays:
        check_map_location("cpu")
    meta = header.get("__metadata__") or {}
    reader = _Reader(name, arrays)
    if meta.get("format") not in (_FORMAT, _FORMAT_VIEWS):
        if "structure" in meta:
            raise reader.bad(f"unknown checkpoint format {meta.get('format')!r}")
        return {k: Tensor._wrap(a) for k, a in arrays.items()}
    structure = meta.get("structure")
    if not isinstance(structure, str):
        raise reader.bad("its structure metadata is missing")
    if "checksum" in meta and meta["checksum"] != _digest(structure, arrays):
        raise ValueError(
            f"flowgrad.load: {name}: checksum mismatch: the tensor data or structure differs "
            f"from what was saved (recorded {meta['checksum'][:20]}...); the file was "
            "corrupted or altered after flowgrad.save wrote it. Restore a good copy or "
            "save it again")
    depth = _json_depth(structure)
    if depth > _MAX_JSON_DEPTH:
        raise reader.bad(f"its structure metadata nests {depth} levels deep, more than a "
                         f"checkpoint may ({_MAX_JSON_DEPTH}, i.e. {_MAX_DEPTH} levels of "
                         "dicts/lists/tuples)")
    try:
        tree = json.loads(structure)
        obj = reader.node(tree)
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            raise reader.bad(f"its structure metadata is not valid JSON ({exc})") from None
        raise
    except RecursionError:
        raise reader.bad("its structure metadata nests too deeply for the current "
                         "recursion limit") from None
    unused = sorted(arrays.keys() - reader.used)
    if unused:
        raise reader.bad(f"tensors {unused} are not referenced by the metadata")
    return obj
