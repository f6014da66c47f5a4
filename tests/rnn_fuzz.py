"""Differential fuzzing of the recurrent layers and packed sequences against torch.

A case draws one of: a layer (RNN tanh/relu, LSTM with or without proj_size, GRU; input and
hidden sizes, layers, bias, batch_first, bidirectional, dropout 0 in train or eval, dropout
0.5 in eval, dropout 1 in train: deterministic, the only train-mode dropout compared since
flowgrad's dropout does not claim torch's random stream) run on an unbatched (2-D) input, a
batch, a batch of 1, one step, an empty batch, with or without h0/c0; the same layers on a
PackedSequence (pack_padded_sequence with enforce_sorted True/False, lengths as a list or a
tensor, batch_first; pack_sequence) whose output goes through pad_packed_sequence
(batch_first, padding_value, total_length); the sequence utilities by themselves
(pad_sequence with batch_first, padding_value and padding_side, unpad_sequence,
unpack_sequence, PackedSequence's fields, .to, .double/.float); and the cells (RNNCell,
LSTMCell, GRUCell). Some cases break an argument (the state's or input's shape or dtype,
lengths out of order, of 0, too long, total_length too short, sequences of other widths).

Modules are built in torch and flowgrad's gets torch's weights through load_state_dict. The
verdict: both raise (the same exception class) or neither does, and then the same outputs,
final states, integer fields (batch sizes, indices, lengths) and float64 (or float32)
gradients of the inputs, initial states and every weight.

    .venv/bin/python tests/rnn_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/rnn_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

RTOL = {"float64": 1e-9, "float32": 2e-4}
LAYERS = ["RNN", "LSTM", "GRU"]
CELLS = ["RNNCell", "LSTMCell", "GRUCell"]
# how a case breaks its arguments (None: it does not)
STATE_BREAKS = ["layers", "batch", "hidden", "dims", "dtype", "c_hidden", "not_tuple"]
INPUT_BREAKS = ["width", "dims1", "dims4", "empty_seq", "dtype"]
PACK_BREAKS = ["unsorted", "zero", "too_long", "count", "total_length", "state_batch"]
UTIL_BREAKS = ["widths", "empty", "side", "lengths_2d", "unpad_long"]


def _layer_options(r):
    cls = r.choice(LAYERS)
    hidden = r.randint(1, 5)
    kw = dict(num_layers=r.choice([1, 1, 2, 3]), bias=r.random() < 0.8,
              batch_first=r.random() < 0.5, bidirectional=r.random() < 0.4)
    if cls == "RNN":
        kw["nonlinearity"] = r.choice(["tanh", "relu"])
    if cls == "LSTM" and hidden > 1 and r.random() < 0.35:
        kw["proj_size"] = r.randint(1, hidden - 1)
    dropout, train = r.choice([(0.0, True), (0.0, False), (0.5, False), (1.0, True)])
    if dropout:
        kw["dropout"] = dropout
    return dict(cls=cls, args=(r.randint(1, 4), hidden), kwargs=kw, train=train,
                dtype="float32" if r.random() < 0.2 else "float64", values=_values(r))


def _values(r):
    """The input's values: standard normal, or scaled into saturation, or with nan/inf."""
    return r.choice(["normal"] * 8 + ["saturating", "nonfinite"])


def _layer(r):
    case = _layer_options(r)
    case.update(kind="layer", form=r.choice(["batched", "batched", "unbatched", "batch1",
                                             "seq1", "empty_batch"]),
                seq=r.randint(1, 5), batch=r.randint(2, 4), state=r.random() < 0.5)
    if case["form"] == "batch1":
        case["batch"] = 1
    if case["form"] == "seq1":
        case["seq"] = 1
    if case["form"] == "empty_batch":
        case["batch"] = 0
    case["break"] = None
    if r.random() < 0.25:
        case["break"] = r.choice(INPUT_BREAKS + STATE_BREAKS)
        case["state"] = case["state"] or case["break"] in STATE_BREAKS
    return case


def _packed(r):
    case = _layer_options(r)
    batch = r.randint(1, 4)
    seq = r.randint(1, 5)
    lengths = [r.randint(1, seq) for _ in range(batch)]
    lengths[r.randrange(batch)] = seq  # the longest fills the padded length
    sorted_ = r.random() < 0.4
    if sorted_:
        lengths.sort(reverse=True)
    case.update(kind="packed", lengths=lengths, seq=seq, batch=batch,
                via=r.choice(["pack_padded_sequence", "pack_padded_sequence", "pack_sequence"]),
                enforce_sorted=sorted_ and r.random() < 0.7,
                lengths_as=r.choice(["list", "tensor"]), pack_batch_first=r.random() < 0.5,
                out_batch_first=r.random() < 0.5, padding_value=r.choice([0.0, -1.5]),
                total_length=r.choice([None, None, seq, seq + 2]), state=r.random() < 0.5,
                to=r.choice([None, None, "double", "to_float64"]), break_=None)
    if r.random() < 0.25:
        case["break_"] = r.choice(PACK_BREAKS)
        if _known_pack_break(case):
            case["break_"] = None
        case["state"] = case["state"] or case["break_"] == "state_batch"
    return case


def _known_pack_break(case):
    """Broken arguments that torch takes where flowgrad refuses (KNOWN in test_rnn_fuzz.py):
    an h0 with more rows than the batch of a packed batch that carries sorted_indices (torch
    index_selects the rows it needs) or of any LSTM (torch's LSTM does not check a packed
    input's states, its kernel keeps extra rows), and more lengths than sequences with
    enforce_sorted=False and batch_first=True (torch's index_select raises IndexError on that
    dim, RuntimeError on dim 1 as flowgrad)."""
    unsorted = not case["enforce_sorted"]
    return case["break_"] == "state_batch" and (unsorted or case["cls"] == "LSTM") or \
        case["break_"] == "count" and unsorted and case["pack_batch_first"]


def _utils(r):
    n = r.randint(1, 4)
    trail = r.choice([(), (2,), (3,), (2, 1)])
    lengths = [r.randint(0 if r.random() < 0.1 else 1, 5) for _ in range(n)]
    return dict(kind="utils", lengths=lengths, trail=trail,
                batch_first=r.random() < 0.5, padding_value=r.choice([0.0, 2.5, -1.0]),
                padding_side=r.choice(["right", "right", "left"]),
                enforce_sorted=r.random() < 0.3, lengths_as=r.choice(["list", "tensor"]),
                dtype=r.choice(["float64", "float64", "float32"]),
                container=r.choice(["list", "list", "tuple", "generator", "tensor"]),
                break_=r.choice(UTIL_BREAKS) if r.random() < 0.2 else None)


def _ctor(r):
    """A constructor call with one argument maybe of a wrong type or out of its range."""
    cls = r.choice(LAYERS + CELLS)
    args = [r.randint(1, 3), r.randint(2, 4)]
    kw = {"bias": r.random() < 0.7}
    if cls in LAYERS:
        kw.update(num_layers=r.randint(1, 2), batch_first=r.random() < 0.5,
                  bidirectional=r.random() < 0.5, dropout=r.choice([0.0, 0.2]))
    if cls == "LSTM" and r.random() < 0.4:
        kw["proj_size"] = r.randint(1, args[1] - 1)
    if cls in ("RNN", "RNNCell") and r.random() < 0.5:
        kw["nonlinearity"] = r.choice(["tanh", "relu"])
    if r.random() < 0.6:
        what = r.choice(["input", "hidden", "num_layers", "dropout", "bias", "batch_first",
                         "bidirectional", "proj_size", "nonlinearity"])
        bad = r.choice({"input": [0, -1, 2.0], "hidden": [0, 3.0, -2],
                        "num_layers": [0, 2.0, -1, True], "dropout": [-0.1, 1.5, True, 1, "0"],
                        "bias": [1, 0, None], "batch_first": [1, None],
                        "bidirectional": [1, 0], "proj_size": [-1, 5, 0, 1.0],
                        "nonlinearity": ["sigmoid", "Tanh"]}[what])
        if what in ("input", "hidden"):
            args["input hidden".split().index(what)] = bad
        else:
            kw[what] = bad
    return dict(kind="ctor", cls=cls, args=tuple(args), kwargs=kw, dtype="float64")


def _cell(r):
    cls = r.choice(CELLS)
    kw = dict(bias=r.random() < 0.8)
    if cls == "RNNCell":
        kw["nonlinearity"] = r.choice(["tanh", "relu"])
    case = dict(kind="cell", cls=cls, args=(r.randint(1, 4), r.randint(1, 5)), kwargs=kw,
                form=r.choice(["batched", "batched", "unbatched", "batch1", "empty_batch"]),
                batch=r.randint(2, 4), state=r.random() < 0.6,
                dtype="float32" if r.random() < 0.2 else "float64", train=True, break_=None,
                values=_values(r))
    case["batch"] = {"batch1": 1, "empty_batch": 0}.get(case["form"], case["batch"])
    if r.random() < 0.25:
        case["break_"] = r.choice(["width", "dims3", "batch", "hidden", "dims", "dtype",
                                   "c_hidden", "not_tuple"])
        case["state"] = case["state"] or case["break_"] not in ("width", "dims3")
    if (case["form"], case["break_"], case["args"][1]) == ("unbatched", "dims", 1):
        # an h0 of shape (1, 1) for an unbatched cell of hidden_size 1: torch 2.13's LSTMCell
        # and GRUCell segfault (seed 5000407), its RNNCell runs (KNOWN
        # unbatched_cell_with_a_2d_state); hidden_size 2 breaks the same way and torch raises
        case["args"] = (case["args"][0], 2)
    return case


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_layer, _layer, _packed, _packed, _utils, _cell, _ctor])(r)
    case["seed"] = seed
    return case


# ---- running a case --------------------------------------------------------------------------
def _module(m, case):
    """The case's module in `m`; flowgrad's takes torch's weights through load_state_dict."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (dropout with one layer warns in both)
        with torch.random.fork_rng():
            torch.manual_seed(case["seed"])
            tm = getattr(torch.nn, case["cls"])(*case["args"], **case["kwargs"])
    tm = tm.to(getattr(torch, case["dtype"]))
    if m is torch:
        mod = tm
    else:
        mod = getattr(flow.nn, case["cls"])(*case["args"], **case["kwargs"])
        mod = mod.to(getattr(flow, case["dtype"]))
        mod.load_state_dict({k: flow.tensor(v.detach().numpy()) for k, v in
                             tm.state_dict().items()})
    mod.train(case["train"])
    return mod


class _Run:
    """What a case gives under one framework: named arrays (outputs, integer fields) and the
    differentiable outputs and leaves whose gradients are compared."""

    def __init__(self, m, case):
        self.m, self.case = m, case
        self.rng = np.random.default_rng(case["seed"])
        self.dtype = getattr(m, case.get("dtype", "float64"))
        self.named, self.outs, self.leaves, self.leaf_names = [], [], [], []

    def tensor(self, shape, leaf=None, dtype=None):
        a = self.rng.standard_normal(shape)
        values = self.case.get("values") if leaf == "grad input" else None
        if values == "saturating":
            a *= 1e3
        elif values == "nonfinite":
            a[self.rng.random(shape) < 0.15] = np.nan
            a[self.rng.random(shape) < 0.15] = np.inf
            a[self.rng.random(shape) < 0.15] = -np.inf
        t = self.m.tensor(a, dtype=dtype or self.dtype)
        if leaf:
            t.requires_grad_(True)
            self.leaves.append(t)
            self.leaf_names.append(leaf)
        return t

    def out(self, name, t):
        self.named.append((name, t.detach().numpy().copy()))
        if t.requires_grad:
            self.outs.append(t)

    def field(self, name, t):
        self.named.append((name, None if t is None else np.asarray(t.tolist(), np.int64)))

    def params(self, mod):
        for name, p in mod.named_parameters():
            self.leaves.append(p)
            self.leaf_names.append(f"grad {name}")

    def result(self):
        """[(name, array)]: the outputs and fields, then the gradients of a random projection
        of the differentiable outputs (the same draw in both frameworks)."""
        res = list(self.named)
        if self.outs and self.leaves:
            up = np.random.default_rng(self.case["seed"] + 1)
            total = sum((o * self.m.tensor(up.standard_normal(tuple(o.shape)),
                                           dtype=o.dtype)).sum() for o in self.outs)
            grads = self.m.autograd.grad(total, self.leaves, allow_unused=True)
            res += [(n, None if g is None else g.numpy())
                    for n, g in zip(self.leaf_names, grads)]
        return res


def _state_shapes(case, n):
    """(h0 shape, c0 shape or None) of a layer for batch `n` (None: unbatched)."""
    kw = case["kwargs"]
    layers = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    hidden = case["args"][1]
    h_size = kw.get("proj_size") or hidden
    lead = (layers,) if n is None else (layers, n)
    return lead + (h_size,), (lead + (hidden,) if case["cls"] == "LSTM" else None)


def _broken_state(case, hs, cs):
    br = case.get("break") or case.get("break_")
    if br == "layers":
        hs = (hs[0] + 1,) + hs[1:]
    elif br in ("batch", "state_batch") and len(hs) == 3:
        hs = hs[:1] + (hs[1] + 1,) + hs[2:]
    elif br == "hidden":
        hs = hs[:-1] + (hs[-1] + 1,)
    elif br == "dims":
        hs = hs[:1] + (1,) + hs[1:] if len(hs) == 2 else hs[1:]
    elif br == "c_hidden" and cs is not None:
        cs = cs[:-1] + (cs[-1] + 1,)
    return hs, cs


def _initial_state(run, case, n):
    hs, cs = _broken_state(case, *_state_shapes(case, n))
    br = case.get("break") or case.get("break_")
    h_dtype = run.m.float32 if br == "dtype" and case["dtype"] == "float64" else \
        run.m.float64 if br == "dtype" else None
    h0 = run.tensor(hs, "grad h0", h_dtype)
    if cs is None:
        return h0
    c0 = run.tensor(cs, "grad c0")
    return h0 if br == "not_tuple" else (h0, c0)


def _finals(run, state):
    if isinstance(state, tuple):
        run.out("h_n", state[0])
        run.out("c_n", state[1])
    else:
        run.out("h_n", state)


def _run_layer(m, case):
    run = _Run(m, case)
    mod = _module(m, case)
    inp, T, N = case["args"][0], case["seq"], case["batch"]
    br = case["break"]
    unbatched = case["form"] == "unbatched"
    if br == "width":
        inp += 1
    if br == "empty_seq":
        T = 0
    shape = (T, inp) if unbatched else (N, T, inp) if case["kwargs"]["batch_first"] else \
        (T, N, inp)
    if br == "dims1":
        shape = shape[-1:]
    elif br == "dims4":
        shape = (1,) + shape
    x_dtype = None
    if br == "dtype" and not case["state"]:
        x_dtype = m.float32 if case["dtype"] == "float64" else m.float64
    x = run.tensor(shape, "grad input", x_dtype)
    hx = _initial_state(run, case, None if unbatched else N) if case["state"] else None
    run.params(mod)
    out, state = mod(x) if hx is None else mod(x, hx)
    run.out("output", out)
    _finals(run, state)
    return run.result()


def _pack(run, case, x, seqs):
    """The case's PackedSequence of padded `x` (T, B, C) (or the sequences `seqs`)."""
    rnn = run.m.nn.utils.rnn
    lengths = list(case["lengths"])
    br = case["break_"]
    if br == "unsorted" and len(set(lengths)) > 1:
        lengths.sort()
        case = dict(case, enforce_sorted=True)
    elif br == "zero":
        lengths[-1] = 0
    elif br == "too_long":
        lengths[0] = case["seq"] + 1
    elif br == "count":
        lengths.append(1)
    if case["via"] == "pack_sequence" and br not in ("zero", "too_long", "count"):
        if br == "unsorted":
            seqs = sorted(seqs, key=lambda s: s.shape[0])
        return rnn.pack_sequence(seqs, enforce_sorted=case["enforce_sorted"])
    if case["lengths_as"] == "tensor":
        lengths = run.m.tensor(lengths)
    if case["pack_batch_first"]:
        x = x.transpose(0, 1)
    return rnn.pack_padded_sequence(x, lengths, batch_first=case["pack_batch_first"],
                                    enforce_sorted=case["enforce_sorted"])


def _run_packed(m, case):
    run = _Run(m, case)
    mod = _module(m, case)
    T, N, inp = case["seq"], case["batch"], case["args"][0]
    x = run.tensor((T, N, inp), "grad input")
    seqs = [x[:n, i] for i, n in enumerate(case["lengths"])]
    packed = _pack(run, case, x, seqs)
    run.field("batch_sizes", packed.batch_sizes)
    run.field("sorted_indices", packed.sorted_indices)
    run.field("unsorted_indices", packed.unsorted_indices)
    if case["to"] == "double":
        packed = packed.double()
    elif case["to"] == "to_float64":
        packed = packed.to(m.float64)
    if case["to"]:  # the module and the state follow the data's dtype
        mod = mod.double()
        run.dtype = m.float64
        case = dict(case, dtype="float64")
    hx = _initial_state(run, case, N) if case["state"] else None
    run.params(mod)
    out, state = mod(packed) if hx is None else mod(packed, hx)
    run.out("packed output data", out.data)
    run.field("output batch_sizes", out.batch_sizes)
    run.field("output sorted_indices", out.sorted_indices)
    run.field("output unsorted_indices", out.unsorted_indices)
    total = case["total_length"]
    if case["break_"] == "total_length":
        total = T - 1
    padded, lens = m.nn.utils.rnn.pad_packed_sequence(
        out, batch_first=case["out_batch_first"], padding_value=case["padding_value"],
        total_length=total)
    run.out("padded output", padded)
    run.field("lengths", lens)
    _finals(run, state)
    return run.result()


def _run_utils(m, case):
    run = _Run(m, case)
    rnn = m.nn.utils.rnn
    br = case["break_"]
    seqs = [run.tensor((n,) + case["trail"], f"grad sequence {i}")
            for i, n in enumerate(case["lengths"])]
    if br == "widths" and case["trail"] and len(seqs) > 1:
        seqs[1] = run.tensor((2,) + tuple(d + 1 for d in case["trail"]), "grad wide")
    if br == "empty":
        seqs = []
    side = "middle" if br == "side" else case["padding_side"]
    container = case["container"]
    if container == "tensor" and len({tuple(s.shape) for s in seqs}) == 1:
        given = m.stack(seqs)
    else:
        given = (s for s in seqs) if container == "generator" else \
            tuple(seqs) if container == "tuple" else seqs
    padded = rnn.pad_sequence(given, batch_first=case["batch_first"],
                              padding_value=case["padding_value"], padding_side=side)
    run.out("padded", padded)
    lengths = list(case["lengths"])
    if br == "unpad_long":
        lengths[0] = max(lengths) + 2
    lens = m.tensor(lengths) if case["lengths_as"] == "tensor" else lengths
    if br == "lengths_2d":
        lens = m.tensor([lengths])
    # (torch's unpad_sequence takes only a tensor of lengths, and transposes a batch_first=False
    # argument in place: see KNOWN in test_rnn_fuzz.py)
    unpad_lens = m.tensor(lengths)
    for i, s in enumerate(rnn.unpad_sequence(padded.clone(), unpad_lens,
                                             batch_first=case["batch_first"])):
        run.out(f"unpadded {i}", s)
    if case["padding_side"] == "left":
        return run.result()
    packed = rnn.pack_padded_sequence(padded, lens, batch_first=case["batch_first"],
                                      enforce_sorted=case["enforce_sorted"])
    run.out("packed data", packed.data)
    run.field("batch_sizes", packed.batch_sizes)
    run.field("sorted_indices", packed.sorted_indices)
    run.field("unsorted_indices", packed.unsorted_indices)
    for i, s in enumerate(rnn.unpack_sequence(packed)):
        run.out(f"unpacked {i}", s)
    rebuilt = rnn.PackedSequence(packed.data, packed.batch_sizes, packed.sorted_indices)
    run.field("rebuilt unsorted_indices", rebuilt.unsorted_indices)
    pair = rnn.PackedSequence((packed.data, packed.batch_sizes))  # (torch's pair form)
    run.field("pair form batch_sizes", pair.batch_sizes)
    run.out("pair form data", pair.data)
    same = packed.to(packed.data.dtype)
    run.field("to(own dtype) is itself, its data the same", m.tensor(
        [same is packed, same.data is packed.data]))
    other = packed.float() if case["dtype"] == "float64" else packed.to(dtype=m.float64)
    run.out("converted data", other.data)
    again, lens2 = rnn.pad_packed_sequence(other, batch_first=not case["batch_first"],
                                           padding_value=case["padding_value"])
    run.out("repadded", again)
    run.field("repadded lengths", lens2)
    return run.result()


def _run_cell(m, case):
    run = _Run(m, case)
    mod = _module(m, case)
    inp, hidden, N = case["args"][0], case["args"][1], case["batch"]
    br = case["break_"]
    unbatched = case["form"] == "unbatched"
    shape = (inp,) if unbatched else (N, inp)
    if br == "width":
        shape = shape[:-1] + (inp + 1,)
    elif br == "dims3":
        shape = (1,) + shape if not unbatched else (1, 1) + shape
    x = run.tensor(shape, "grad input")
    hx = None
    if case["state"]:
        hs = (hidden,) if unbatched else (N, hidden)
        cs = hs
        if br == "batch":  # (unbatched: a 2-D state whose first dimension is not the hidden
            # size, which torch's cell would take after unsqueezing: KNOWN in test_rnn_fuzz.py)
            hs = (hs[0] + 1,) + hs[1:] if not unbatched else (hidden + 1, hidden)
        elif br == "hidden":
            hs = hs[:-1] + (hidden + 1,)
        elif br == "dims":
            hs = (1,) + hs if len(hs) == 1 else (1, 1) + hs[1:] if N != 1 else (1,) + hs
        elif br == "c_hidden":
            cs = cs[:-1] + (hidden + 1,)
        h_dtype = None
        if br == "dtype":
            h_dtype = m.float32 if case["dtype"] == "float64" else m.float64
        hx = run.tensor(hs, "grad h0", h_dtype)
        if case["cls"] == "LSTMCell" and br != "not_tuple":
            hx = (hx, run.tensor(cs, "grad c0"))
    run.params(mod)
    out = mod(x) if hx is None else mod(x, hx)
    _finals(run, out)
    return run.result()


def _run_ctor(m, case):
    """The module's parameters (names and shapes), attributes and repr, or its refusal."""
    mod = getattr(m.nn, case["cls"])(*case["args"], **case["kwargs"])
    res = [(f"shape of {n}", np.asarray(p.shape, np.int64)) for n, p in mod.named_parameters()]
    attrs = [getattr(mod, a, None) for a in ("input_size", "hidden_size", "num_layers", "bias",
                                            "batch_first", "dropout", "bidirectional",
                                            "proj_size", "nonlinearity")]
    text = f"{mod!r} {attrs!r}"
    return res + [("repr and attributes", np.frombuffer(text.encode(), np.uint8))]


RUNNERS = {"layer": _run_layer, "packed": _run_packed, "utils": _run_utils, "cell": _run_cell,
           "ctor": _run_ctor}


def run(m, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RUNNERS[case["kind"]](m, case)


def check(seed):
    """None when flowgrad agrees with torch on the case of `seed`, else a message."""
    case = generate(seed)
    try:
        want = run(torch, case)
        torch_error = None
    except fuzz_common.TORCH_REFUSALS as e:
        torch_error = e
    try:
        got = run(flow, case)
    except Exception as e:  # noqa: BLE001 - the exception's class is compared
        if torch_error is None:
            return f"flowgrad raised {type(e).__name__}: {e}"
        if type(torch_error).__name__ != type(e).__name__:
            return (f"flowgrad raised {type(e).__name__}: {e}; torch "
                    f"{type(torch_error).__name__}: {torch_error}")
        return None
    if torch_error is not None:
        return f"torch raised {type(torch_error).__name__}: {torch_error}; flowgrad ran"
    if [n for n, _ in got] != [n for n, _ in want]:
        return f"results differ: flowgrad {[n for n, _ in got]}, torch {[n for n, _ in want]}"
    pairs = []
    for (name, a), (_, b) in zip(got, want):
        if (a is None) != (b is None) and not name.startswith("grad"):
            return f"{name}: flowgrad {a!r}, torch {b!r}"
        pairs.append((name, a, b))
    return fuzz_common.first_difference(pairs, RTOL[case.get("dtype", "float64")])


def main():
    fuzz_common.main(__doc__, generate, check, seeds="0:500")


if __name__ == "__main__":
    main()
