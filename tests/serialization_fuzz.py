"""Differential fuzzing of checkpoints: random objects saved and loaded by flowgrad and torch.

A seed draws an object (nested dicts, lists, tuples and OrderedDicts of tensors of every
dtype, 0-d and empty ones, families of views sharing one storage: slices, transposes,
expands, as_strided, storage offsets; Parameters with and without requires_grad, tensors
that require grad, a module's state_dict, an optimizer's state_dict after a step, plain
values, sometimes an object weights_only refuses), built alike from torch and from flowgrad,
then one way to move it (flowgrad.save -> flowgrad.load against torch's round trip,
torch.save -> flowgrad.load, flowgrad.save -> torch.load), a file path or io.BytesIO,
load's arguments (weights_only True/False/left out, map_location, mmap) and sometimes a
damaged file. The loaded objects must agree: structure and types, dtypes, shapes, strides,
storage offsets, requires_grad, values bit for bit, which tensors share a storage (a write
through one loaded tensor is seen by another exactly when it is after torch.load), and
raise/no-raise with torch's exception type.

    .venv/bin/python tests/serialization_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/serialization_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import collections
import io
import os
import pickle
import random
import tempfile
import zipfile

import fuzz_common
import ml_dtypes
import numpy as np
import torch

import flowgrad as flow
from flowgrad import torch_format

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]
# a dtype of the same size for each, to view a storage as (none makes bools of other bytes)
SAME_SIZE = {"bool": "uint8", "uint8": "int8", "int8": "uint8", "int16": "float16",
             "float16": "bfloat16", "bfloat16": "int16", "int32": "float32", "float32": "int32",
             "int64": "float64", "float64": "complex64", "complex64": "int64",
             "complex128": "complex128"}
SHAPES = [(), (0,), (3,), (2, 3), (4, 1), (0, 2), (2, 3, 2), (1,)]
Pair = collections.namedtuple("Pair", "a b")
# differences the comparison leaves out, each with its reason
KNOWN = {
    "views as two dtypes in flowgrad's format": "torch.save refuses tensors that view one "
    "storage as different dtypes (RuntimeError); flowgrad's own (safetensors) format stores "
    "them, sharing their memory again after the load (its torch format refuses them too)",
    "safetensors storage offsets": "flowgrad.save's own (safetensors) format stores the span a "
    "view covers, not its whole storage (a slice of a big tensor stays small), so a loaded "
    "view's storage_offset counts from that span; torch's format (format='torch') keeps them",
    "empty tensors' strides": "flowgrad's empty tensors carry NumPy's strides (0 where torch "
    "computes contiguous ones: zeros(0, 2).t() is (0, 0), torch (1, 2)) before any save",
    "map_location meta": "flowgrad loads tensors on the CPU with their values whatever "
    "map_location names ('meta' included); torch gives data-less meta tensors there (the "
    "fuzz compares the rest)",
    # damaged files (the bytes torch.save wrote, damaged, read by both): torch's readers and
    # flowgrad's notice different damage and raise what they run into
    "damaged file, flowgrad refuses": "flowgrad refuses a damaged file torch reads when it "
    "checks what torch does not: the records' CRC-32 (torch loads a damaged storage's wrong "
    "values), zip fields Python's zipfile checks (the local header's name, the disk number), "
    "the pickle's protocol byte (torch's weights-only unpickler ignores it); the refusal says "
    "the file is corrupt, damaged or not a valid checkpoint",
    "damaged file, torch refuses": "torch refuses a damaged file whose damage lies in zip "
    "metadata only its reader checks (a central directory field); flowgrad reads the intact "
    "records, which must load (or raise: mmap of a file object) as the undamaged file does in "
    "torch",
    "damaged file, a damaged global": "a damaged name of a class or module, loaded with "
    "weights_only=False: torch imports it and raises AttributeError or ModuleNotFoundError "
    "(its legacy reader takes any name ending in Storage as a storage type, and goes on to "
    "load or fail later); flowgrad imports "
    "nothing a file names and refuses it (UnpicklingError: not loaded, a torch object it "
    "cannot rebuild, a storage type it does not have)",
    "damaged file, exception types": "where both refuse, torch raises what its pickle reader "
    "runs into (EOFError, struct.error, IndexError, UnicodeDecodeError, AttributeError, "
    "AssertionError, an OSError from mmap) or its zip reader's RuntimeError; flowgrad the "
    "same type, or the UnpicklingError / RuntimeError / ValueError (an empty file, no "
    "checkpoint of either format) saying the file is corrupt",
}


class Config:
    """A class of the user's own: weights_only refuses it."""

    def __init__(self, depth=2):
        self.depth = depth

    def __eq__(self, other):
        return type(other) is Config and other.depth == self.depth


def _array(rng, dtype, shape):
    """Random values of `dtype` (NumPy; bfloat16 through ml_dtypes), with specials."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)
    if dtype.startswith("complex"):
        return (_array(rng, "float64", shape) + 1j * _array(rng, "float64", shape)).astype(dtype)
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
    if a.size and rng.random() < 0.3:
        a.reshape(-1)[rng.integers(a.size)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    return a.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _tensor(m, a):
    """`a` as a tensor of module `m` (a copy)."""
    if a.dtype == ml_dtypes.bfloat16:
        return _tensor(m, a.view(np.int16)).view(m.bfloat16)
    src = m.tensor(np.asarray(a))  # (torch.tensor gives an empty array NumPy's strides)
    return m.zeros(tuple(src.shape), dtype=src.dtype).copy_(src)


def _numpy(t):
    """The values of a torch or flowgrad tensor as NumPy (bfloat16 through ml_dtypes)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return np.array(t.numpy())


# views of a family's base (a contiguous tensor of n elements): (name, f(m, base) or None when
# the base is too small)
def _views(r):
    def pick(base_n):
        ops = [("base", lambda m, b: b)]
        if base_n >= 2:
            lo = r.randrange(1, base_n)
            ops.append((f"[{lo}:]", lambda m, b: b[lo:]))
            ops.append(("[::2]", lambda m, b: b[::2]))
            ops.append(("[1]", lambda m, b: b[1]))
        if base_n >= 6:
            ops.append(("view(2,3).t()", lambda m, b: b[:6].view(2, 3).t()))
            ops.append(("view(3,2)[:, 1]", lambda m, b: b[:6].view(3, 2)[:, 1]))
            off = r.randrange(0, base_n - 5)
            ops.append((f"as_strided((2,2),(1,3),{off})",
                        lambda m, b: b.as_strided((2, 2), (1, 3), off)))
        ops.append(("[:1].expand(3)", lambda m, b: b[:1].expand(3)))
        if base_n >= 1 and r.random() < 0.5:  # the same memory as another dtype
            ops.append(("view(other dtype)",
                        lambda m, b: b.view(getattr(m, SAME_SIZE[str(b.dtype).split(".")[1]]))))
        ops.append(("[0:0]", lambda m, b: b[0:0]))
        return r.choice(ops)
    return pick


class Case:
    """One object and one way to save and load it, drawn from a seed."""

    def __init__(self, seed):
        r = self.r = random.Random(seed)
        self.rng = np.random.default_rng(seed)
        self.families = []  # (base array, [view op, ...])
        self.leaves = 0
        self.tree = self.draw(0)
        self.way = r.choice(["flow->flow", "flow(torch format)->flow", "torch->flow",
                             "torch legacy->flow", "flow(torch format)->torch"])
        self.to_path = r.random() < 0.5
        self.load_kw = {}
        if r.random() < 0.6:
            self.load_kw["weights_only"] = r.choice([True, False])
        if r.random() < 0.4:
            self.load_kw["map_location"] = r.choice(
                [None, "cpu", "device cpu", {"cpu": "cpu"}, {"cuda:0": "cpu"}, "callable",
                 "cuda", {"cpu": "cuda:0"}, 3, "meta"])
        if r.random() < 0.2:
            self.load_kw["mmap"] = True
        self.damage = None
        if r.random() < 0.3 and self.way.startswith("torch"):  # (both read the same bytes)
            self.damage = r.choice(["truncate", "flip", "empty", "zip record"])
            self.damage_at = r.random()

    def draw(self, depth):
        r = self.r
        p = r.random()
        if depth >= 3 or p < 0.45:
            return self.leaf()
        n = r.randrange(0, 4)
        kind = r.choice(["dict", "dict", "list", "tuple", "OrderedDict", "int keys", "odd keys"])
        items = [self.draw(depth + 1) for _ in range(n)]
        if kind in ("list", "tuple"):
            return (kind, items)
        keys = list(range(n)) if kind == "int keys" else [f"k{i}" for i in range(n)]
        if kind == "odd keys":
            keys = r.sample([None, True, 2.5, (1, "a"), -7, "k", b"b"], n)
        return (kind, list(zip(keys, items)))

    def leaf(self):
        r = self.r
        k = r.random()
        if self.leaves and k < 0.1:  # a tensor the object holds already: one object again
            return ("again", r.randrange(self.leaves))
        if k < 0.35:
            self.leaves += 1
            dtype, shape = r.choice(DTYPES), r.choice(SHAPES)
            flags = r.choice(["plain", "plain", "requires_grad", "Parameter",
                              "Parameter frozen", "non-contiguous", "attribute"])
            if flags in ("requires_grad", "Parameter") and not dtype.startswith(("float",
                                                                                 "complex")):
                flags = "plain"
            if flags == "non-contiguous" and len(shape) < 2:
                flags = "plain"
            return ("tensor", _array(self.rng, dtype, shape), flags)
        if k < 0.6:  # a view of a family sharing one storage
            if not self.families or r.random() < 0.4:
                n = r.randrange(1, 13)
                self.families.append((_array(self.rng, r.choice(DTYPES), (n,)), _views(r)))
            fam = r.randrange(len(self.families))
            name, fn = self.families[fam][1](self.families[fam][0].size)
            self.leaves += 1
            flags = "plain"
            if r.random() < 0.2 and self.families[fam][0].dtype.kind in "fcV":
                flags = r.choice(["Parameter", "Parameter frozen"])  # sharing the storage
            return ("view", fam, name, fn, flags)
        if k < 0.67:
            return ("module", r.choice(["Linear", "BatchNorm1d", "Conv1d"]), r.randrange(1000))
        if k < 0.72:
            return ("optimizer", r.choice(["SGD", "Adam", "RMSprop"]), r.randrange(1000))
        if k < 0.95:
            return ("value", r.choice([0, -3, 2 ** 70, 1.5, -0.0, float("inf"), float("nan"),
                                       True, False, None, "", "s\u00e9", 1 + 2j, b"ab"]))
        return ("other", r.choice(["set", "frozenset", "namedtuple", "Config", "defaultdict",
                                   "Counter", "Size", "dtype", "device", "bytearray", "slice"]))

    def build(self, m):
        """The object under module `m` (torch or flowgrad)."""
        bases, tensors = {}, []

        def go(node):
            out = build(node)
            if node[0] in ("tensor", "view"):
                tensors.append(out)
            return out

        def build(node):
            kind = node[0]
            if kind in ("list", "tuple"):
                out = [go(x) for x in node[1]]
                return out if kind == "list" else tuple(out)
            if kind in ("dict", "int keys", "OrderedDict", "odd keys"):
                cls = collections.OrderedDict if kind == "OrderedDict" else dict
                return cls((k, go(v)) for k, v in node[1])
            if kind == "tensor":
                return _flagged(m, _tensor(m, node[1]), node[2])
            if kind == "view":
                if node[1] not in bases:
                    bases[node[1]] = _tensor(m, self.families[node[1]][0])
                return _flagged(m, node[3](m, bases[node[1]]), node[4])
            if kind == "again":
                return tensors[node[1]]
            if kind == "module":
                return _module(m, node[1], node[2]).state_dict()
            if kind == "optimizer":
                return _optimizer(m, node[1], node[2]).state_dict()
            if kind == "value":
                return node[1]
            return _other(m, node[1])
        return go(self.tree)

    def describe(self):
        return (f"{self.way} path={self.to_path} load{self.load_kw} damage={self.damage} "
                f"tree={_show(self.tree)}")


def _show(node):
    kind = node[0]
    if kind in ("list", "tuple"):
        return f"{kind}[{', '.join(_show(x) for x in node[1])}]"
    if kind in ("dict", "int keys", "OrderedDict", "odd keys"):
        return f"{kind}{{{', '.join(f'{k}: {_show(v)}' for k, v in node[1])}}}"
    if kind == "tensor":
        return f"{node[1].dtype}{list(node[1].shape)}:{node[2]}"
    if kind == "view":
        return f"family{node[1]}{node[2]}:{node[4]}"
    if kind == "again":
        return f"tensor #{node[1]} again"
    return f"{kind}:{node[1]!r}"


def _flagged(m, t, flags):
    if flags == "requires_grad":
        return t.requires_grad_()
    if flags == "Parameter":
        return m.nn.Parameter(t)
    if flags == "Parameter frozen":
        return m.nn.Parameter(t, requires_grad=False)
    if flags == "non-contiguous":
        return t.transpose(0, 1)
    if flags == "attribute":
        t.note = "an attribute"
        return t
    return t


def _module(m, name, seed):
    rng = np.random.default_rng(seed)
    mod = {"Linear": lambda: m.nn.Linear(3, 2), "BatchNorm1d": lambda: m.nn.BatchNorm1d(3),
           "Conv1d": lambda: m.nn.Conv1d(2, 2, 3)}[name]()
    with m.no_grad():
        for t in list(mod.parameters()) + list(mod.buffers()):
            if t.dtype in (m.float32, m.float64):
                t.copy_(_tensor(m, rng.standard_normal(tuple(t.shape)).astype("float32")))
    return mod


def _optimizer(m, name, seed):
    rng = np.random.default_rng(seed)
    params = [m.nn.Parameter(_tensor(m, rng.standard_normal(s))) for s in [(2, 3), (3,)]]
    opt = getattr(m.optim, name)(params, lr=0.1, **({"momentum": 0.9} if name == "SGD" else {}))
    for p in params:
        p.grad = _tensor(m, rng.standard_normal(tuple(p.shape)))
    opt.step()
    return opt


def _other(m, name):
    return {"set": lambda: {1, "a"}, "frozenset": lambda: frozenset([1, 2]),
            "namedtuple": lambda: Pair(1, "x"), "Config": Config,
            "defaultdict": lambda: collections.defaultdict(int, a=1),
            "Counter": lambda: collections.Counter(a=2), "Size": lambda: m.Size([2, 3]),
            "dtype": lambda: m.float16, "device": lambda: m.device("cpu"),
            "bytearray": lambda: bytearray(b"xy"), "slice": lambda: slice(1, 2)}[name]()


def _map_location(m, spec):
    if spec == "device cpu":
        return m.device("cpu")
    if spec == "callable":
        return lambda storage, location: storage
    return spec


def _damage(case, blob):
    at = int(case.damage_at * len(blob))
    if case.damage == "truncate":
        return blob[:at]
    if case.damage == "flip":
        return blob[:at] + bytes([blob[at] ^ 0x5A]) + blob[at + 1:] if blob else blob
    if case.damage == "empty":
        return b""
    if blob[:4] != b"PK\x03\x04":  # "zip record": a storage record dropped
        return blob[:at]
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(blob)) as zin, zipfile.ZipFile(out, "w") as zout:
        infos = zin.infolist()
        drop = infos[int(case.damage_at * len(infos))].filename
        for info in infos:  # (aligned as torch.save's: torch.load(mmap=True) maps records
            # in place, and torch crashes writing a complex128 tensor at an unaligned address)
            if info.filename != drop:
                torch_format._write_aligned(zout, out, info.filename, zin.read(info))
    return out.getvalue()


def _saved(case, save, obj, tmp):
    """A function giving the file (a path, or a fresh BytesIO) that `save(obj, ...)` writes,
    damaged as the case says."""
    buf = io.BytesIO()
    save(obj, buf)
    blob = buf.getvalue()
    if case.damage:
        blob = _damage(case, blob)
    if not case.to_path:
        return lambda: io.BytesIO(blob)
    path = os.path.join(tmp, f"ckpt{len(os.listdir(tmp))}.bin")
    with open(path, "wb") as fh:
        fh.write(blob)
    return lambda: path


def _load(m, case, f):
    kw = dict(case.load_kw)
    if "map_location" in kw:
        kw["map_location"] = _map_location(m, kw["map_location"])
    return m.load(f, **kw)


SAVERS = {
    "torch": lambda obj, f: torch.save(obj, f),
    "torch legacy": lambda obj, f: torch.save(obj, f, _use_new_zipfile_serialization=False),
    "flow": lambda obj, f: flow.save(obj, f),
    "flow(torch format)": lambda obj, f: flow.save(obj, f, format="torch"),
}


def _outcome(fn):
    """(result, None) or (None, the exception)."""
    try:
        return fn(), None
    except Exception as exc:  # the type is compared with torch's
        return None, exc


def run(case):
    """(torch's outcome, the outcome under test), each (loaded object, exception)."""
    saver, loader = case.way.split("->")
    with tempfile.TemporaryDirectory() as tmp:
        torch_file, exc = _outcome(lambda: _saved(
            case, SAVERS["torch legacy" if saver == "torch legacy" else "torch"],
            case.build(torch), tmp))
        want = (None, exc) if exc else _outcome(lambda: _load(torch, case, torch_file()))
        if not exc and case.load_kw.get("map_location") == "meta":
            # torch's values from this very file (a legacy file orders its storages by their
            # addresses, so a second save may put a flipped byte in another tensor)
            plain = {k: v for k, v in case.load_kw.items() if k != "map_location"}
            case.plain = _outcome(lambda: torch.load(torch_file(), **plain))
        if saver.startswith("torch"):
            if exc:
                return want, want
            f = torch_file
        else:
            f, exc = _outcome(lambda: _saved(case, SAVERS[saver], case.build(flow), tmp))
            if exc is not None:
                return want, (None, exc)
        got = _outcome(lambda: _load(flow if loader == "flow" else torch, case, f()))
    return want, got


def check(seed):
    """None when the case loads alike in torch and in flowgrad, else a message."""
    case = Case(seed)
    (want, want_exc), (got, got_exc) = run(case)
    if case.way == "flow->flow" and "as different types" in str(want_exc) and got_exc is None:
        return None  # KNOWN["views as two dtypes in flowgrad's format"]
    if case.damage and _says_corrupt(got_exc) and (
            want_exc is None or not isinstance(got_exc, type(want_exc))):
        return None  # KNOWN["damaged file, flowgrad refuses"], [..., "exception types"]
    if case.damage and isinstance(got_exc, pickle.UnpicklingError) and any(
                w in str(got_exc) for w in ("which is not loaded", "cannot rebuild",
                                            "which flowgrad does not have")):
        return None  # KNOWN["damaged file, a damaged global"]
    if case.damage and want_exc is not None and not isinstance(got_exc, type(want_exc)):
        case.damage = None  # KNOWN["damaged file, torch refuses"]: as the undamaged file
        want, want_exc = run(case)[0]
    if (want_exc is None) != (got_exc is None):
        return (f"torch {'raised ' + _short(want_exc) if want_exc else 'loaded'}, flowgrad "
                f"{'raised ' + _short(got_exc) if got_exc else 'loaded'}")
    if want_exc is not None:
        if not isinstance(got_exc, type(want_exc)):
            return f"torch raised {_short(want_exc)}, flowgrad {_short(got_exc)}"
        return None
    if case.load_kw.get("map_location") == "meta" and case.way.endswith("flow"):
        # KNOWN["map_location meta"]
        want = case.plain[0]
    return difference(want, got, offsets=case.way != "flow->flow")


def _says_corrupt(exc):
    """Whether flowgrad's exception says the file is damaged."""
    return isinstance(exc, (pickle.UnpicklingError, RuntimeError, ValueError)) and any(
        w in str(exc) for w in ("corrupt", "truncated", "damaged", "not a valid",
                                "unsupported pickle protocol"))


def _short(exc):
    return f"{type(exc).__name__}({str(exc)[:150]!r})"


def difference(want, got, offsets=True):
    """The first difference of a loaded object `got` (flowgrad's or torch's) from torch's
    `want`, or None: see the module docstring (storage offsets only with `offsets`)."""
    leaves = []
    msg = _walk(want, got, "obj", leaves, offsets)
    return msg or _identity(leaves) or _sharing(leaves)


def _identity(leaves):
    """A tensor held twice is one object after the load, as after torch's."""
    for i, (w1, t1, f1) in enumerate(leaves):
        for w2, t2, f2 in leaves[:i]:
            if (t1 is t2) != (f1 is f2):
                return (f"{w1} and {w2} are {'' if t1 is t2 else 'not '}one tensor after "
                        "torch's load")
    return None


def _is_tensor(x):
    return isinstance(x, (torch.Tensor, flow.Tensor))


def _walk(t, f, where, leaves, offsets):
    if isinstance(t, torch.Tensor):
        if not _is_tensor(f):
            return f"{where}: torch loaded a tensor, got {type(f).__name__}"
        if type(t).__name__ != type(f).__name__:
            return f"{where}: torch loaded a {type(t).__name__}, got {type(f).__name__}"
        for what, a, b in [("dtype", str(t.dtype)[6:], str(f.dtype).split(".")[-1]),
                           ("shape", tuple(t.shape), tuple(f.shape)),
                           # (KNOWN["empty tensors' strides"])
                           ("stride", t.stride() if t.numel() else 0,
                            f.stride() if t.numel() else 0),
                           # (KNOWN["safetensors storage offsets"])
                           ("storage_offset", t.storage_offset() if offsets else 0,
                            f.storage_offset() if offsets else 0),
                           ("requires_grad", t.requires_grad, f.requires_grad),
                           ("device", t.device.type, f.device.type)]:
            if a != b:
                return f"{where}: {what} torch {a}, got {b}"
        if t.device.type == "meta":
            return None
        a, b = _numpy(t), _numpy(f)
        if a.tobytes() != b.tobytes() and not _same_but_nan_payloads(a, b):
            return f"{where}: values torch {a!r}, got {b!r}"
        leaves.append((where, t, f))
        return None
    if isinstance(t, (torch.Size, torch.device, torch.dtype)):
        if type(t).__name__ != type(f).__name__ or str(t).split(".")[-1] != \
                str(f).split(".")[-1]:
            return f"{where}: torch {t!r}, got {f!r}"
        return None
    if type(t) is not type(f):
        return f"{where}: torch loaded a {type(t).__name__}, got {type(f).__name__}"
    if isinstance(t, dict):
        if list(t) != list(f):
            return f"{where}: keys torch {list(t)}, got {list(f)}"
        if getattr(t, "_metadata", None) != getattr(f, "_metadata", None):
            return f"{where}: _metadata torch {t._metadata}, got {getattr(f, '_metadata', None)}"
        for k in t:
            msg = _walk(t[k], f[k], f"{where}[{k!r}]", leaves, offsets)
            if msg:
                return msg
        return None
    if isinstance(t, (list, tuple)):
        if len(t) != len(f):
            return f"{where}: length torch {len(t)}, got {len(f)}"
        for i, (a, b) in enumerate(zip(t, f)):
            msg = _walk(a, b, f"{where}[{i}]", leaves, offsets)
            if msg:
                return msg
        return None
    if not (t == f or t != t and f != f):
        return f"{where}: torch {t!r}, got {f!r}"
    return None


def _same_but_nan_payloads(a, b):
    if a.dtype != b.dtype or a.dtype.kind not in "fcV" and a.dtype != ml_dtypes.bfloat16:
        return False
    a, b = a.astype(np.complex128), b.astype(np.complex128)
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


def _sharing(leaves):
    """Which loaded tensors see a write through another: the same pairs in both."""
    for i, (where, t, f) in enumerate(leaves):
        if t.numel() == 0:
            continue
        before = [(_numpy(a).tobytes(), _numpy(b).tobytes()) for _, a, b in leaves]
        for x in (t, f):
            x = x.detach()
            idx = (0,) * x.dim()
            old = x[idx].item()
            x[idx] = (not old) if isinstance(old, bool) else (7 if old != 7 else 3)
        for j, (w2, a, b) in enumerate(leaves):
            seen_t = _numpy(a).tobytes() != before[j][0]
            seen_f = _numpy(b).tobytes() != before[j][1]
            if seen_t != seen_f:
                return (f"a write through {where} is {'' if seen_t else 'not '}seen by {w2} "
                        f"after torch's load, {'' if seen_f else 'not '}after this one")
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Case(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
