"""Checkpoints: `flowgrad.save(obj, f)` / `flowgrad.load(f)` in the safetensors format.

`obj` is a nest of dicts, lists and tuples whose leaves are tensors, NumPy arrays, or plain
values (str, int, float, bool, None), e.g. {"model": model.state_dict(), "optim":
opt.state_dict(), "epoch": 3}. Tensors are stored flat under their path ("model.weight",
"optim.state.0.exp_avg"); the nesting and the plain values are JSON in the header's
metadata. Loading never runs code from the file (there is no pickle): a file whose header,
sizes or metadata don't add up raises ValueError naming the file and the problem.

>>> import flowgrad as flow, io
>>> buf = io.BytesIO()
>>> flow.save({"w": flow.ones(2), "epoch": 3}, buf); _ = buf.seek(0)
>>> flow.load(buf)
{'w': tensor([1., 1.]), 'epoch': 3}
"""
from __future__ import annotations

import json
import os
from collections import OrderedDict

import numpy as np

from . import dtypes as _dt
from .tensor import Tensor

__all__ = ["save", "load"]

_FORMAT = "flowgrad-checkpoint-1"
# safetensors' header dtype codes -> NumPy dtypes (bfloat16 when ml_dtypes is present)
_CODES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
if _dt.bfloat16 is not None:
    _CODES["BF16"] = _dt.bfloat16.np


class _Writer:
    """Walks the object: collects arrays under unique path keys, returns the JSON tree."""

    def __init__(self):
        self.arrays = {}
        self.seen = {}  # id(tensor) -> key: a tensor referenced twice is stored once

    def key(self, path):
        base = ".".join(path) or "_"
        key, n = base, 1
        while key in self.arrays:
            key, n = f"{base}#{n}", n + 1
        return key

    def tensor(self, data, path, extra):
        if not data.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
            data = data.copy(order="C")
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        if data.dtype.name not in ("bfloat16",) and data.dtype.type not in _CODES.values():
            raise TypeError(f"flowgrad.save: cannot store an array of dtype {data.dtype} at "
                            f"{'.'.join(path) or 'the root'}")
        key = self.key(path)
        self.arrays[key] = data
        return {"T": key, "dtype": data.dtype.name, "shape": list(data.shape), **extra}

    def node(self, obj, path):
        if isinstance(obj, Tensor):
            if id(obj) in self.seen:
                key = self.seen[id(obj)]
                arr = self.arrays[key]
                return {"T": key, "dtype": arr.dtype.name, "shape": list(arr.shape),
                        **self._flags(obj)}
            out = self.tensor(obj._data, path, self._flags(obj))
            self.seen[id(obj)] = out["T"]
            return out
        if isinstance(obj, np.ndarray):
            return self.tensor(obj, path, {"ndarray": True})
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return {"V": obj}
        if isinstance(obj, np.generic):
            return {"V": obj.item()}
        if isinstance(obj, _dt.dtype):
            return {"dtype_obj": obj.name}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (bool, int, float, str))):
                    raise TypeError(f"flowgrad.save: dict keys must be str, int, float, bool "
                                    f"or None; got {type(k).__name__} at "
                                    f"{'.'.join(path) or 'the root'}")
                items.append([k, self.node(v, path + [str(k)])])
            out = {"D": items}
            if isinstance(obj, OrderedDict):
                out["ordered"] = True
            return out
        if isinstance(obj, (list, tuple)):
            tag = "L" if isinstance(obj, list) else "U"
            return {tag: [self.node(v, path + [str(i)]) for i, v in enumerate(obj)]}
        raise TypeError(
            f"flowgrad.save: cannot store an object of type {type(obj).__name__} at "
            f"{'.'.join(path) or 'the root'}; checkpoints hold tensors, arrays, dicts, lists, "
            "tuples and str/int/float/bool/None (no pickle). Save its state_dict() instead")

    @staticmethod
    def _flags(t):
        from .nn.parameter import Parameter

        flags = {}
        if isinstance(t, Parameter):
            flags["param"] = True
        if t.requires_grad:
            flags["requires_grad"] = True
        return flags


def save(obj, f):
    """Write `obj` (tensors nested in dicts/lists/tuples, plus plain values) to the path or
    binary file object `f` in the safetensors format.

    >>> import flowgrad as flow, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "ckpt.safetensors")
    >>> flow.save({"w": flow.zeros(2, 3), "step": 10}, path)
    >>> flow.load(path)["w"].shape
    flowgrad.Size([2, 3])
    """
    from safetensors import TensorSpec, serialize

    writer = _Writer()
    tree = writer.node(obj, [])
    specs = {k: TensorSpec(dtype=a.dtype.name, shape=list(a.shape), data_ptr=a.ctypes.data,
                           data_len=a.nbytes) for k, a in writer.arrays.items()}
    metadata = {"format": _FORMAT, "structure": json.dumps(tree)}
    blob = serialize(specs, metadata=metadata)
    del writer  # the arrays stayed alive until serialize copied them
    if hasattr(f, "write"):
        f.write(blob)
        return
    path = os.fspath(f)
    tmp = f"{path}.tmp{os.getpid()}"
    try:  # write then rename: an interrupted save leaves any old checkpoint intact
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class _Reader:
    def __init__(self, name, arrays):
        self.name, self.arrays, self.used = name, arrays, set()
        self.loaded = {}  # key -> object: a tensor saved once and referenced twice is shared

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
        arr = self.arrays[key]
        if n.get("dtype") != arr.dtype.name or n.get("shape") != list(arr.shape):
            raise self.bad(f"tensor {key!r} is {arr.dtype.name}{list(arr.shape)} in the file "
                           f"but {n.get('dtype')}{n.get('shape')} in the metadata")
        self.used.add(key)
        if key in self.loaded:
            return self.loaded[key]
        self.loaded[key] = out = self._build(arr, n)
        return out

    @staticmethod
    def _build(arr, n):
        if n.get("ndarray"):
            return arr
        t = Tensor._wrap(arr)
        if n.get("param"):
            from .nn.parameter import Parameter

            return Parameter(t, requires_grad=bool(n.get("requires_grad")))
        if n.get("requires_grad"):
            t.requires_grad_(True)
        return t


def _read(f):
    if hasattr(f, "read"):
        return f.read(), getattr(f, "name", repr(f))
    path = os.fspath(f)
    with open(path, "rb") as fh:
        return fh.read(), repr(path)


def load(f, map_location=None, weights_only=True, mmap=None):
    """Read a checkpoint written by `save` (from a path or binary file object). A plain
    safetensors file (no flowgrad metadata) loads as a flat {name: tensor} dict.
    `map_location`, `weights_only` and `mmap` are accepted for torch compatibility: there
    is only the CPU, and nothing but data is ever read.

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
    meta = header.get("__metadata__") or {}
    reader = _Reader(name, arrays)
    if meta.get("format") != _FORMAT:
        if "structure" in meta:
            raise reader.bad(f"unknown checkpoint format {meta.get('format')!r}")
        return {k: Tensor._wrap(a) for k, a in arrays.items()}
    try:
        tree = json.loads(meta["structure"])
    except (KeyError, TypeError, ValueError) as exc:
        raise reader.bad(f"its structure metadata is not valid JSON ({exc})") from None
    obj = reader.node(tree)
    unused = sorted(arrays.keys() - reader.used)
    if unused:
        raise reader.bad(f"tensors {unused} are not referenced by the metadata")
    return obj
