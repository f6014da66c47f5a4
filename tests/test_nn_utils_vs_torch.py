"""flowgrad.nn.utils against torch.nn.utils: values and gradients in float64 (weights set
from seeded NumPy arrays, so that random inits do not matter), and raise / no raise.

Each row builds the same thing with `lib` = torch and with `lib` = flowgrad and returns
tensors (or plain values); `check` compares the two results (or the exception classes)."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

LIBS = (torch, flow)


class KW(dict):
    """The keyword arguments of a table row (its last element)."""


def R(lib, *shape, seed=0, rg=False):
    t = lib.tensor(np.random.RandomState(seed).randn(*shape))
    return t.requires_grad_(True) if rg else t


def init(lib, m, seed=0):
    """Seeded float64 values for every parameter (sorted by name: same in both libs)."""
    m = m.double()
    with lib.no_grad():
        for i, (_, p) in enumerate(sorted(m.named_parameters())):
            p.copy_(lib.tensor(np.random.RandomState(seed + i).randn(*p.shape) * 0.5))
    return m


def backward(lib, y, seed=99):
    (y * R(lib, *y.shape, seed=seed)).sum().backward()


def grads(m):
    return [p.grad for _, p in sorted(m.named_parameters())]


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (torch.Tensor, flow.Tensor)):
        return ("tensor", str(v.dtype).split(".")[-1], v.detach().numpy())
    if isinstance(v, (torch.dtype, flow.dtype)):
        return ("dtype", str(v).split(".")[-1])
    return v


def _same(a, b, where="result"):
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, tuple) and a and a[0] == "tensor":
        assert b[0] == "tensor" and a[1] == b[1], f"{where}: dtype {a[1]} vs {b[1]}"
        np.testing.assert_allclose(b[2], a[2], rtol=1e-9, atol=1e-12, err_msg=where)
    else:
        assert a == b, f"{where}: torch {a!r} vs flowgrad {b!r}"


def check(case, *args):
    """Run `case(lib, *args)` under torch and flowgrad; same exception class or same result."""
    out = []
    for lib in LIBS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out.append(("ok", _plain(case(lib, *args))))
            except Exception as e:  # noqa: BLE001 - the class is what is compared
                out.append(("err", type(e).__name__, str(e)))
    (tk, *tv), (fk, *fv) = out
    assert tk == fk, f"torch: {tk} {tv[-1] if tk == 'err' else ''}; flowgrad: {fk} " \
                     f"{fv[-1] if fk == 'err' else ''}"
    if tk == "err":
        assert tv[0] == fv[0], f"torch raises {tv[0]}: {tv[1]}; flowgrad {fv[0]}: {fv[1]}"
    else:
        _same(tv[0], fv[0])


# ---- nn.utils.rnn ---------------------------------------------------------------------------

def pad_case(lib, shapes, dtypes=None, **kw):
    seqs = [R(lib, *s, seed=i, rg=dtypes is None) for i, s in enumerate(shapes)]
    if dtypes:
        seqs = [s.to(getattr(lib, d)) for s, d in zip(seqs, dtypes)]
    y = lib.nn.utils.rnn.pad_sequence(seqs, **kw)
    if dtypes:
        return y
    backward(lib, y)
    return [y] + [s.grad for s in seqs]


def pack_case(lib, shape, lengths, as_tensor=False, **kw):
    x = R(lib, *shape, seed=1, rg=True)
    lens = lib.tensor(lengths) if as_tensor else lengths
    p = lib.nn.utils.rnn.pack_padded_sequence(x, lens, **kw)
    backward(lib, p.data)
    return [p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices, x.grad]


def pad_packed_case(lib, lengths, enforce_sorted, **kw):
    x = R(lib, 4, len(lengths), 2, seed=1, rg=True)
    p = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted)
    y, lens = lib.nn.utils.rnn.pad_packed_sequence(p, **kw)
    backward(lib, y)
    return [y, lens, x.grad]


def pack_sequence_case(lib, lengths, enforce_sorted):
    U = lib.nn.utils.rnn
    xs = [R(lib, n, 2, seed=i) for i, n in enumerate(lengths)]
    p = U.pack_sequence(xs, enforce_sorted=enforce_sorted)
    return [p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices, U.unpack_sequence(p)]


def unpad_case(lib, batch_first):
    x = R(lib, 3, 4, 2, seed=1) if batch_first else R(lib, 4, 3, 2, seed=1)
    return lib.nn.utils.rnn.unpad_sequence(x, lib.tensor([4, 1, 2]), batch_first=batch_first)


def packed_fields_case(lib):
    p = lib.nn.utils.rnn.pack_sequence([R(lib, 3, 2, seed=1), R(lib, 1, 2, seed=2)],
                                       enforce_sorted=False)
    q = p.to(lib.float32)
    d, b, s, u = q
    return [d, b, s, u, type(q).__name__, p.to(lib.float64) is p, p.double() is p,
            p.float().data, p[1]]


def packed_rnn_case(lib, cls, layers, bidirectional, lengths, enforce_sorted, h0=False,
                    **extra):
    U = lib.nn.utils.rnn
    m = init(lib, getattr(lib.nn, cls)(3, 4, num_layers=layers, bidirectional=bidirectional,
                                       **extra))
    xs = [R(lib, n, 3, seed=10 + i, rg=True) for i, n in enumerate(lengths)]
    p = U.pack_sequence(xs, enforce_sorted=enforce_sorted)
    state = ()
    if h0:
        dirs, b = layers * (2 if bidirectional else 1), len(lengths)
        h = R(lib, dirs, b, extra.get("proj_size") or 4, seed=7)
        state = ((h, R(lib, dirs, b, 4, seed=8)) if cls == "LSTM" else h,)
    out, h = m(p, *state)
    y, lens = U.pad_packed_sequence(out, batch_first=True)
    hs = list(h) if isinstance(h, tuple) else [h]
    loss = (y * R(lib, *y.shape, seed=99)).sum()
    for i, t in enumerate(hs):
        loss = loss + (t * R(lib, *t.shape, seed=90 + i)).sum()
    loss.backward()
    return [out.data, out.batch_sizes, out.sorted_indices, out.unsorted_indices, y, lens] + \
        hs + [x.grad for x in xs] + grads(m)


RNN_ROWS = [
    # pad_sequence
    (pad_case, [(3, 2), (1, 2), (2, 2)]),
    (pad_case, [(3, 2), (1, 2), (2, 2)], None, KW(batch_first=True, padding_value=-1.5)),
    (pad_case, [(3, 2), (1, 2), (2, 2)], None, KW(batch_first=True, padding_side="left")),
    (pad_case, [(3,), (1,)], None, KW(padding_side="left", padding_value=7)),
    (pad_case, [(3,), (1,)], None, KW(padding_side="middle")),
    (pad_case, [(3, 2), (1, 3)]),
    (pad_case, [(2,), (0,)], None, KW(batch_first=True)),
    (pad_case, [(3,), (1,)], ["int64", "float64"]),  # the first sequence's dtype, as torch
    (pad_case, [(3,), (1,)], ["float32", "float64"], KW(padding_value=2)),
    # pack_padded_sequence
    (pack_case, (4, 3, 2), [4, 2, 1]),
    (pack_case, (4, 3, 2), [4, 2, 1], True),
    (pack_case, (4, 3, 2), [1, 4, 2]),  # unsorted with enforce_sorted=True: raises
    (pack_case, (4, 3, 2), [1, 4, 2], True, KW(enforce_sorted=True)),
    (pack_case, (4, 3, 2), [1, 4, 2], False, KW(enforce_sorted=False)),
    (pack_case, (3, 4, 2), [1, 4, 2], True, KW(batch_first=True, enforce_sorted=False)),
    (pack_case, (3, 4), [2, 4, 2], True, KW(batch_first=True, enforce_sorted=False)),
    (pack_case, (3, 4), [4, 2, 2], False, KW(batch_first=True)),
    (pack_case, (3, 4), [4, 0, 2], False, KW(batch_first=True, enforce_sorted=False)),
    (pack_case, (3, 4), [3, 2], False, KW(batch_first=True)),
    # pad_packed_sequence
    (pad_packed_case, [1, 4, 2], False),
    (pad_packed_case, [1, 4, 2], False, KW(batch_first=True, padding_value=-3.0, total_length=6)),
    (pad_packed_case, [1, 4, 2], False, KW(total_length=3)),
    (pad_packed_case, [4, 2, 1], True, KW(total_length=4, batch_first=True)),
    # pack_sequence / unpack_sequence / unpad_sequence / fields
    (pack_sequence_case, [3, 1, 2], False),
    (pack_sequence_case, [3, 1, 2], True),
    (pack_sequence_case, [3, 2, 2], True),
    (unpad_case, False),
    (unpad_case, True),
    (packed_fields_case,),
    # a PackedSequence through the recurrent layers
    (packed_rnn_case, "RNN", 1, False, [4, 2, 1], True),
    (packed_rnn_case, "RNN", 2, True, [2, 4, 1, 4], False),
    (packed_rnn_case, "RNN", 2, True, [2, 4, 1], False, True),
    (packed_rnn_case, "RNN", 2, False, [3, 3, 1], False, False,
     KW(nonlinearity="relu", bias=False)),
    (packed_rnn_case, "LSTM", 1, False, [4, 2, 1], True),
    (packed_rnn_case, "LSTM", 2, True, [2, 4, 1, 4], False),
    (packed_rnn_case, "LSTM", 2, True, [2, 4, 1], False, True),
    (packed_rnn_case, "LSTM", 2, True, [2, 4, 1], False, False, KW(proj_size=2)),
    (packed_rnn_case, "LSTM", 1, False, [2, 4, 1], False, True, KW(proj_size=2)),
    (packed_rnn_case, "GRU", 1, False, [4, 2, 1], True),
    (packed_rnn_case, "GRU", 2, True, [2, 4, 1, 4], False),
    (packed_rnn_case, "GRU", 2, True, [2, 4, 1], False, True),
    (packed_rnn_case, "GRU", 1, True, [3, 3, 3], True),
]


# ---- weight_norm ----------------------------------------------------------------------------

MODS = {
    "linear": (lambda nn: nn.Linear(3, 4), (2, 3)),
    "conv1d": (lambda nn: nn.Conv1d(2, 3, 3), (2, 2, 5)),
    "conv2d": (lambda nn: nn.Conv2d(2, 3, 2), (1, 2, 4, 4)),
    "convT1d": (lambda nn: nn.ConvTranspose1d(2, 3, 3), (2, 2, 5)),
}


def weight_norm_case(lib, mod, dim, old_api=False, remove=False):
    make, xshape = MODS[mod]
    U = lib.nn.utils
    m = init(lib, make(lib.nn))
    (U.weight_norm if old_api else U.parametrizations.weight_norm)(m, dim=dim)
    init(lib, m, seed=3)
    x = R(lib, *xshape, seed=5)
    y = m(x)
    backward(lib, y)
    res = [y, m.weight, sorted(m.state_dict())] + grads(m)
    if remove:
        if old_api:
            U.remove_weight_norm(m)
        else:
            U.parametrize.remove_parametrizations(m, "weight")
        m.zero_grad()
        y = m(x)
        backward(lib, y)
        res += [sorted(m.state_dict()), m.weight, y, type(m.weight).__name__,
                m.weight.requires_grad, m.weight.grad]
    return res


WN_ROWS = [(weight_norm_case, mod, dim, old)
           for old in (False, True)
           for mod, dims in [("linear", (0, 1, None, -1, -2, 2, 5, -3)),
                             ("conv1d", (0, 2, None, -1, -3, 3)),
                             ("conv2d", (1, 3, -4, 4)), ("convT1d", (0, 1, None))]
           for dim in dims]
WN_ROWS += [(weight_norm_case, mod, dim, old, True)
            for old in (False, True) for mod, dim in [("linear", 0), ("conv1d", None)]]


# ---- spectral_norm --------------------------------------------------------------------------

def spectral_norm_case(lib, mod, n, eps, dim, modes, old_api=False):
    make, xshape = MODS[mod]
    U, F = lib.nn.utils, lib.nn.functional
    m = init(lib, make(lib.nn))
    kw = {} if dim is None else {"dim": dim}
    (U.spectral_norm if old_api else U.parametrizations.spectral_norm)(
        m, n_power_iterations=n, eps=eps, **kw)
    # the power iteration starts from random u, v: both libs get the same ones
    owner, uname = (m, "weight_") if old_api else (m.parametrizations.weight[0], "_")
    u, v = getattr(owner, uname + "u"), getattr(owner, uname + "v")
    with lib.no_grad():
        u.copy_(F.normalize(R(lib, *u.shape, seed=20), dim=0))
        v.copy_(F.normalize(R(lib, *v.shape, seed=21), dim=0))
    x, res = R(lib, *xshape, seed=5), []
    for mode in modes:
        m.train(mode)
        y = m(x)
        backward(lib, y)
        res += [y, m.weight, u, v] + grads(m)  # in eval u and v must not move
    res.append(sorted(m.state_dict()))
    if old_api:
        U.remove_spectral_norm(m)
        res += [m.weight, sorted(m.state_dict()), m(x)]
    return res


SN_ROWS = [(spectral_norm_case, mod, n, eps, dim, modes, old)
           for old in (False, True)
           for mod in ("linear", "conv1d", "convT1d", "conv2d")
           for n, eps, dim, modes in [(1, 1e-12, None, (True, True, False, True)),
                                      (3, 1e-3, None, (False, True)),
                                      (2, 1e-12, 1, (True, False)),
                                      (1, 1e-12, -1, (True,))]]
SN_ROWS += [(spectral_norm_case, "linear", 0, 1e-12, None, (True,), old) for old in (0, 1)]
SN_ROWS += [(spectral_norm_case, "linear", 1, 1e-12, 2, (True,), old) for old in (0, 1)]


# ---- orthogonal -----------------------------------------------------------------------------

def orthogonal_case(lib, shape, omap, triv, batch=()):
    m = lib.nn.Module()
    m.weight = lib.nn.Parameter(R(lib, *batch, *shape, seed=3))
    lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    P = m.parametrizations.weight
    with lib.no_grad():
        P.original.copy_(R(lib, *P.original.shape, seed=30) * 0.3)
        if triv:
            P[0].base.copy_(lib.linalg.qr(R(lib, *P[0].base.shape, seed=31))[0])
    W = m.weight
    backward(lib, W)
    return [W, P.original.grad, sorted(m.state_dict())]


def orthogonal_assign_case(lib, shape, omap, triv):
    m = lib.nn.Module()
    m.weight = lib.nn.Parameter(R(lib, *shape, seed=3))
    lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=omap, use_trivialization=triv)
    Q = lib.linalg.qr(R(lib, max(shape), min(shape), seed=40))[0]
    m.weight = Q.mT if shape[0] < shape[1] else Q
    return [m.weight]


ORTH_ROWS = [(orthogonal_case, shape, omap, triv)
             for shape in ((4, 4), (5, 3), (3, 5))
             for omap in (None, "matrix_exp", "cayley", "householder")
             for triv in (True, False)]
ORTH_ROWS += [(orthogonal_case, (4, 3), omap, False, (2,))
              for omap in ("matrix_exp", "cayley", "householder")]
ORTH_ROWS += [(orthogonal_assign_case, shape, omap, triv)
              for shape in ((4, 4), (5, 3), (3, 5))
              for omap in ("matrix_exp", "cayley", "householder")
              for triv in (True, False)]
ORTH_ROWS += [(orthogonal_case, (4, 4), "foo", True)]


# ---- parametrize ----------------------------------------------------------------------------

def _parametrizations(lib):
    """Symmetric (no right_inverse), Scale (with one), Split (two originals)."""
    class Sym(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    class Scale(lib.nn.Module):
        def forward(self, X):
            return X * 3

        def right_inverse(self, X):
            return X / 3

    class Split(lib.nn.Module):
        def forward(self, A, B):
            return A + B

        def right_inverse(self, X):
            return X * 0.25, X * 0.75

    class Flat(lib.nn.Module):
        def forward(self, X):
            return X.reshape(-1)

        def right_inverse(self, X):
            return X.reshape(3, 3)

    return {"sym": Sym, "scale": Scale, "split": Split, "flat": Flat}


def parametrize_case(lib, names, unsafe=False, assign=False, remove=None, buffers=False):
    P = lib.nn.utils.parametrize
    kinds = _parametrizations(lib)
    m = init(lib, lib.nn.Linear(3, 3))
    if buffers:
        for name in ("weight", "bias"):
            t = getattr(m, name).detach()
            del m._parameters[name]
            m.register_buffer(name, t)
    for name in names:
        P.register_parametrization(m, "weight", kinds[name](), unsafe=unsafe)
    res = [m.weight, sorted(m.state_dict()), type(m).__name__, P.is_parametrized(m),
           P.is_parametrized(m, "bias"), P.type_before_parametrizations(m).__name__]
    if not buffers and m.weight.dim() == 2:
        y = m(R(lib, 2, 3, seed=4))
        backward(lib, y)
        res += [y, [p.grad for _, p in sorted(m.parametrizations.weight.named_parameters())]]
    if assign:
        m.weight = R(lib, *m.weight.shape, seed=7)
        res += [m.weight] + [t for _, t in sorted(m.parametrizations.weight.state_dict().items())]
    if remove is not None:
        P.remove_parametrizations(m, "weight", leave_parametrized=remove)
        res += [m.weight, sorted(m.state_dict()), type(m).__name__, type(m.weight).__name__,
                m.weight.requires_grad, sorted(n for n, _ in m.named_parameters())]
    return res


def cached_case(lib):
    P = lib.nn.utils.parametrize
    calls = []

    class Twice(lib.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 2

    m = init(lib, lib.nn.Linear(3, 3))
    P.register_parametrization(m, "weight", Twice())
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
        y = m(R(lib, 2, 3, seed=1)) + m(R(lib, 2, 3, seed=2))
    backward(lib, y)
    inside = len(calls)
    return [inside, a is b, m.weight is m.weight, y, m.parametrizations.weight.original.grad]


def state_dict_case(lib):
    P = lib.nn.utils.parametrize
    Scale = _parametrizations(lib)["scale"]
    m = init(lib, lib.nn.Linear(3, 3))
    P.register_parametrization(m, "weight", Scale())
    P.register_parametrization(m, "bias", Scale())
    m.sub = init(lib, lib.nn.Linear(2, 2), seed=4)
    P.register_parametrization(m.sub, "weight", Scale())
    sd = {k: v * 2 for k, v in m.state_dict().items()}
    m2 = lib.nn.Linear(3, 3).double()
    P.register_parametrization(m2, "weight", Scale())
    P.register_parametrization(m2, "bias", Scale())
    m2.sub = lib.nn.Linear(2, 2).double()
    P.register_parametrization(m2.sub, "weight", Scale())
    m2.load_state_dict(sd)
    return [sorted(m.state_dict()), sorted(n for n, _ in m.named_parameters()),
            sorted(n for n, _ in m.named_modules()), m2.weight, m2.bias, m2.sub.weight]


def identity_case(lib, what, frozen=False):
    """A shape-changing (unsafe) parametrization keeps the original tensor object, as
    torch's set_ does: an optimizer made before registering still trains the weight."""
    P = lib.nn.utils.parametrize

    class Flat(lib.nn.Module):
        def forward(self, X):
            return X.reshape(-1) if X.dim() == 2 else X.reshape(3, 3)

        def right_inverse(self, X):
            return X.reshape(-1) if X.dim() == 2 else X.reshape(3, 3)

    m = init(lib, lib.nn.Linear(3, 3))
    if what == "buffer":
        m.register_buffer("buf", R(lib, 3, 3, seed=2))
    name = "buf" if what == "buffer" else "weight"
    t = getattr(m, name)
    t.requires_grad_(not frozen and what != "buffer")
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    P.register_parametrization(m, name, Flat(), unsafe=True)
    res = [getattr(m.parametrizations, name).original is t, getattr(m, name), t.shape]
    if what == "train":
        backward(lib, getattr(m, name))
        opt.step()
        res += [getattr(m, name), t]
    P.remove_parametrizations(m, name)
    t2 = getattr(m, name)
    return res + [t2 is t, t2, type(t2).__name__, t2.requires_grad, sorted(m.state_dict())]


PAR_ROWS = [
    (identity_case, "train"),
    (identity_case, "remove"),
    (identity_case, "remove", True),
    (identity_case, "buffer"),
    (parametrize_case, ["sym"]),
    (parametrize_case, ["sym"], False, True),  # assigning needs a right_inverse: raises
    (parametrize_case, ["scale"], False, True),
    (parametrize_case, ["scale", "sym"], False, False, True),
    (parametrize_case, ["scale", "sym"], False, False, False),
    (parametrize_case, ["split"], False, True),
    (parametrize_case, ["split"], False, False, True),  # a trainable Parameter again
    (parametrize_case, ["split"], False, False, False),
    (parametrize_case, ["split"], False, False, True, True),  # originals are buffers
    (parametrize_case, ["flat"]),  # a changed shape needs unsafe=True
    (parametrize_case, ["flat"], True, True, True),
    (parametrize_case, ["scale"], False, False, True, True),
    (cached_case,),
    (state_dict_case,),
]


# ---- vectors, clipping, fusion, memory format -----------------------------------------------

def to_vector_case(lib):
    a, b = R(lib, 2, 3, seed=1, rg=True), R(lib, 4, seed=2, rg=True)
    v = lib.nn.utils.parameters_to_vector([a, b])
    backward(lib, v)
    return [v, a.grad, b.grad]


def from_vector_case(lib, n):
    m = init(lib, lib.nn.Linear(3, 2))
    v = R(lib, n, seed=1)
    lib.nn.utils.vector_to_parameters(v, m.parameters())
    y = m(R(lib, 2, 3, seed=4))
    backward(lib, y)
    return [m.weight, m.bias, y, m.weight.grad, type(m.weight).__name__]


def clip_case(lib, how, *args):
    U = lib.nn.utils
    a, b = R(lib, 2, 3, seed=1, rg=True), R(lib, 4, seed=2, rg=True)
    backward(lib, a * 3, seed=3)
    backward(lib, b, seed=4)
    if how == "value":
        U.clip_grad_value_([a, b], *args)
        return [a.grad, b.grad]
    if how == "total":
        return U.get_total_norm([a.grad, b.grad], *args)
    if how == "with_norm":
        n = U.get_total_norm([a.grad, b.grad])
        U.clip_grads_with_norm_([a, b], args[0], n)
        return [n, a.grad, b.grad]
    n = U.clip_grad_norm_([a, b], *args)
    return [n, a.grad, b.grad]


def fuse_case(lib, kind, bias, affine, groups=1):
    U, nn = lib.nn.utils, lib.nn
    layer = {"conv2d": lambda: nn.Conv2d(4, 6, 2, bias=bias, groups=groups),
             "convT2d": lambda: nn.ConvTranspose2d(4, 6, 2, bias=bias, groups=groups),
             "conv1d": lambda: nn.Conv1d(4, 6, 2, bias=bias),
             "linear": lambda: nn.Linear(4, 6, bias=bias)}[kind]()
    layer = init(lib, layer).eval()
    bn = (nn.BatchNorm1d if kind in ("conv1d", "linear") else nn.BatchNorm2d)(6, affine=affine)
    bn = init(lib, bn, seed=4).eval()
    with lib.no_grad():
        bn.running_mean.copy_(R(lib, 6, seed=7))
        bn.running_var.copy_(R(lib, 6, seed=8).abs() + 0.5)
    x = R(lib, *{"linear": (3, 4), "conv1d": (1, 4, 5)}.get(kind, (1, 4, 4, 4)), seed=9)
    if kind == "linear":
        fused = U.fuse_linear_bn_eval(layer, bn)
    else:
        fused = U.fuse_conv_bn_eval(layer, bn, transpose=kind == "convT2d")
    return [fused.weight, fused.bias, fused(x), bn(layer(x)), fused is layer,
            fused.weight.requires_grad, fused.bias.requires_grad]


def fuse_weights_case(lib, kind, bias, bn_affine, transpose=False):
    U = lib.nn.utils
    shape = {"conv": (2, 3, 2, 2) if transpose else (3, 2, 2, 2), "linear": (3, 2)}[kind]
    w = R(lib, *shape, seed=1, rg=True)
    b = R(lib, 3, seed=2, rg=True) if bias else None
    bw = R(lib, 3, seed=5, rg=True) if bn_affine else None
    bb = R(lib, 3, seed=6, rg=True) if bn_affine else None
    rm, rv = R(lib, 3, seed=3), R(lib, 3, seed=4).abs() + 0.5
    if kind == "conv":
        fw, fb = U.fuse_conv_bn_weights(w, b, rm, rv, 1e-3, bw, bb, transpose=transpose)
    else:
        fw, fb = U.fuse_linear_bn_weights(w, b, rm, rv, 1e-3, bw, bb)
    backward(lib, fw, seed=9)
    if fb.requires_grad:
        backward(lib, fb, seed=10)
    return [fw, fb, type(fw).__name__, fb.requires_grad] + \
        [t.grad for t in (w, b, bw, bb) if t is not None]


def memory_format_case(lib, dims, fmt):
    nn = lib.nn
    m = nn.Sequential(nn.Conv2d(2, 3, 2), nn.Sequential(nn.ConvTranspose2d(3, 2, 2)),
                      nn.Conv3d(2, 3, 2), nn.ConvTranspose3d(3, 2, 2))
    w = m[0].weight
    convert = getattr(lib.nn.utils, f"convert_conv{dims}d_weight_memory_format")
    out = convert(m, getattr(lib, fmt))
    conv2d = [m[0].weight, m[1][0].weight]
    conv3d = [m[2].weight, m[3].weight]
    return [out is m, m[0].weight is w, type(w).__name__] + \
        [t.is_contiguous(memory_format=lib.channels_last) for t in conv2d] + \
        [t.is_contiguous(memory_format=lib.channels_last_3d) for t in conv3d]


MISC_ROWS = [
    (to_vector_case,),
    (from_vector_case, 8),
    (from_vector_case, 10),
    (from_vector_case, 6),
    (clip_case, "value", 0.5),
    (clip_case, "value", 0),
    (clip_case, "total", 2.0), (clip_case, "total", 1), (clip_case, "total", 0.5),
    (clip_case, "total", float("inf")), (clip_case, "total", 0),
    (clip_case, "with_norm", 1.0), (clip_case, "with_norm", 100.0),
    (clip_case, "norm", 1.0), (clip_case, "norm", 1.0, 1), (clip_case, "norm", 0.5, "inf"),
] + [(fuse_case, kind, bias, affine)
     for kind in ("conv2d", "convT2d", "conv1d", "linear")
     for bias in (True, False) for affine in (True, False)] + [
    (fuse_case, "conv2d", True, True, 2),
    (fuse_weights_case, "conv", True, True),
    (fuse_weights_case, "conv", False, False),
    (fuse_weights_case, "conv", True, True, True),
    (fuse_weights_case, "linear", True, True),
    (fuse_weights_case, "linear", False, True),
    (memory_format_case, 2, "channels_last"),
    (memory_format_case, 3, "channels_last_3d"),
    (memory_format_case, 3, "channels_last"),  # a 5-d weight cannot be channels_last
]


# ---- stateless.functional_call --------------------------------------------------------------

def _tied(lib):
    class Tied(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = lib.nn.Linear(3, 3, bias=False)
            self.b = lib.nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x, k=1.0):
            return self.b(self.a(x)) * k

    return init(lib, Tied())


def functional_call_case(lib, module, given, **kw):
    call = lib.func.functional_call if kw.pop("via_func", False) else \
        lib.nn.utils.stateless.functional_call
    P = lib.nn.utils.parametrize
    kinds = _parametrizations(lib)
    if module == "tied":
        m = _tied(lib)
    elif module == "batchnorm":
        m = init(lib, lib.nn.BatchNorm1d(3))
    else:
        m = init(lib, lib.nn.Linear(3, 3))
        if module != "linear":
            P.register_parametrization(m, "weight", kinds[module]())
    values = {k: R(lib, *v, seed=20 + i, rg=module != "batchnorm")
              for i, (k, v) in enumerate(given.items())}
    if kw.pop("same", False):  # one tensor under two tied names
        values["b.weight"] = values["a.weight"]
    before = [t.detach().clone() for _, t in sorted(m.state_dict().items())]
    y = call(m, values, (R(lib, 4, 3, seed=1),), **kw)
    backward(lib, y)
    after = [t for _, t in sorted(m.state_dict().items())]
    return [y, before, after, grads(m), [values[k] for k in sorted(values)]] + \
        [values[k].grad for k in sorted(given)]


FC_ROWS = [
    (functional_call_case, "linear", {"weight": (3, 3)}),
    (functional_call_case, "linear", {"weight": (3, 3)}, KW(strict=True)),
    (functional_call_case, "linear", {"weight": (3, 3), "bias": (3,)}, KW(strict=True)),
    (functional_call_case, "linear", {"weight": (3, 3), "bias": (3,), "foo": (2,)}),
    (functional_call_case, "linear", {"weight": (3, 3), "bias": (3,), "foo": (2,)},
     KW(strict=True)),
    (functional_call_case, "batchnorm", {"running_mean": (3,)}),
    (functional_call_case, "tied", {"a.weight": (3, 3)}),  # b.weight follows (tie_weights)
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(tie_weights=False)),
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(strict=True)),
    (functional_call_case, "tied", {"a.weight": (3, 3), "b.weight": (3, 3)}),
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(same=True)),
    (functional_call_case, "tied", {"a.weight": (3, 3), "b.weight": (3, 3)},
     KW(tie_weights=False)),
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(kwargs={"k": 3.0})),
    (functional_call_case, "scale", {"weight": (3, 3)}),  # through right_inverse
    (functional_call_case, "sym", {"weight": (3, 3)}),  # no right_inverse: raises
    (functional_call_case, "scale", {"parametrizations.weight.original": (3, 3)}),
    # torch.func's is the same function
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(via_func=True)),
    (functional_call_case, "tied", {"a.weight": (3, 3), "b.weight": (3, 3)},
     KW(via_func=True)),
    (functional_call_case, "tied", {"a.weight": (3, 3)}, KW(via_func=True, strict=True)),
    (functional_call_case, "scale", {"weight": (3, 3)}, KW(via_func=True)),
]


def _row_id(row):
    return "-".join([row[0].__name__.replace("_case", "")] +
                    [str(a).replace(" ", "") for a in row[1:]])[:90]


ALL_ROWS = RNN_ROWS + WN_ROWS + SN_ROWS + ORTH_ROWS + PAR_ROWS + MISC_ROWS + FC_ROWS


@pytest.mark.parametrize("row", ALL_ROWS, ids=[_row_id(r) for r in ALL_ROWS])
def test_nn_utils_matches_torch(row):
    case, *args = row
    kwargs = args.pop() if args and isinstance(args[-1], KW) else {}
    if kwargs:
        check(lambda lib, *a: case(lib, *a, **kwargs), *args)
    else:
        check(case, *args)
