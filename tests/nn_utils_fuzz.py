"""Differential fuzzing of nn.utils and nn.init: random calls in torch and in flowgrad.

A seed draws one case of one family:

- clip: clip_grad_norm_ (every norm_type, max_norm of any sign, error_if_nonfinite,
  foreach, grads None / inf / nan, a single tensor, a generator, an empty list),
  clip_grad_value_, get_total_norm and clip_grads_with_norm_;
- vector: parameters_to_vector (and its gradient), vector_to_parameters (short, long, 2-D
  and other-dtype vectors);
- parametrize: register_parametrization stacked (with and without right_inverse, unsafe,
  several originals, on a buffer), assignment through right_inverse, cached(),
  remove_parametrizations (leave_parametrized either way), state_dict keys;
- norms: parametrizations.orthogonal / spectral_norm / weight_norm and the older
  weight_norm / spectral_norm with remove_*;
- prune: a sequence of pruning methods on a module's weight or bias (amounts good and bad),
  global_unstructured, custom_from_mask, remove, is_pruned (the random methods by their
  counts: flowgrad does not draw from torch's stream there);
- fuse: fuse_conv_bn_eval / fuse_linear_bn_eval (train mode, no running stats);
- call: stateless.functional_call over a random subset of names;
- init: every nn.init function (deterministic ones by value, random ones by shape, bounds and
  statistics), calculate_gain for every nonlinearity and param, the fan modes, the errors.

The outcome of a case (its results, or the class of the exception it raises) must be torch's.

    .venv/bin/python tests/nn_utils_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/nn_utils_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import math
import random
import warnings

import fuzz_common
import numpy as np
import torch
import torch.nn.utils.prune  # noqa: F401 - (torch.nn.utils does not import it)

import flowgrad as flow

SHAPES = [(3,), (2, 3), (), (0,), (4, 1), (2, 2, 2)]
INF = math.inf
NORM_TYPES = [1, 2, 2.0, INF, -INF, 0, 3.5, 0.5, "inf"]
TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 2e-3}


class Approx:
    """A statistic compared to a relative tolerance (random inits: not the same draws)."""

    def __init__(self, value, rtol):
        self.value, self.rtol = float(value), rtol

    def __repr__(self):
        return f"~{self.value:.4g}"


def _arr(rng, shape, dtype="float64"):
    return rng.standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------------------- clipping

def gen_clip(r, rng):
    dtype = r.choice(["float64", "float64", "float32", "float16"])
    n = r.choice([0, 1, 2, 3, 4])
    shapes = [r.choice(SHAPES) for _ in range(n)]
    mixed = r.random() < 0.15  # grads of several dtypes (complex ones too)
    grads = [None if r.random() < 0.2 else
             _arr(rng, s, r.choice(["float32", "float64", "complex64"]) if mixed else dtype) * 3
             for s in shapes]
    if r.random() < 0.2 and any(g is not None and g.size for g in grads):
        g = r.choice([g for g in grads if g is not None and g.size])
        g.reshape(-1)[0] = r.choice([np.nan, np.inf, -np.inf])
    how = r.choice(["norm", "norm", "norm", "value", "total", "with_norm"])
    tol = max(TOL[str(g.real.dtype)] for g in grads if g is not None) if any(
        g is not None for g in grads) else 1e-10
    case = dict(family="clip", how=how, grads=grads, with_none=r.random() < 0.1, tol=tol,
                form=r.choice(["list", "list", "single", "generator"]))
    if how == "value":
        case["clip_value"] = r.choice([0.5, 0, 2, -1.0, 1e9])
    else:
        case["max_norm"] = r.choice([1.0, 0.1, 100.0, 0.0, -1.0, 2])
        case["norm_type"] = r.choice(NORM_TYPES)
        case["error_if_nonfinite"] = r.random() < 0.3
        if how == "with_norm":
            case["total_as"] = r.choice(["tensor", "float"])
    case["foreach"] = r.choice([None, None, True, False])
    return case


def run_clip(m, c):
    params = []
    for g in c["grads"]:
        p = m.zeros(g.shape, dtype=getattr(m, str(g.dtype)), requires_grad=True) \
            if g is not None else m.zeros(2, requires_grad=True)
        p.grad = None if g is None else m.tensor(g.copy())
        params.append(p)
    ids = [id(p.grad) for p in params]
    if c["form"] == "single":
        arg = params[0] if params else []
    elif c["form"] == "generator":
        arg = (p for p in params)
    else:
        arg = params
    U, fe = m.nn.utils, c["foreach"]
    out = []
    if c["how"] == "value":
        out.append(U.clip_grad_value_(arg, c["clip_value"], foreach=fe))
    elif c["how"] == "norm":
        out.append(U.clip_grad_norm_(arg, c["max_norm"], c["norm_type"],
                                     c["error_if_nonfinite"], foreach=fe))
    else:
        grads = [p.grad for p in params if p.grad is not None or c["with_none"]]
        if c["form"] == "single":
            grads = grads[0] if grads else []
        total = U.get_total_norm(grads, c["norm_type"], c["error_if_nonfinite"], foreach=fe)
        out.append(total)
        if c["how"] == "with_norm":
            t = total if c["total_as"] == "tensor" else float(total)
            out.append(U.clip_grads_with_norm_(arg, c["max_norm"], t, foreach=fe))
    return out + [[p.grad for p in params], [id(p.grad) for p in params] == ids]


# ----------------------------------------------------------------------------- vectors

def gen_vector(r, rng):
    shapes = [r.choice(SHAPES) for _ in range(r.randint(0, 4))]
    total = sum(int(np.prod(s)) for s in shapes)
    return dict(family="vector", values=[_arr(rng, s, "float32" if r.random() < 0.15 else
                                              "float64") for s in shapes],
                vec_list=r.random() < 0.05,
                vec=_arr(rng, (max(0, total + r.choice([0, 0, 0, -1, 1, 3])),)),
                vec_2d=r.random() < 0.1, vec_dtype=r.choice(["float64", "float64", "float32"]),
                to=r.random() < 0.5, single=r.random() < 0.1)


def run_vector(m, c):
    ps = [m.nn.Parameter(m.tensor(v.copy())) for v in c["values"]]
    arg = ps[0] if c["single"] and ps else ps
    if c["to"]:
        v = m.nn.utils.parameters_to_vector(arg)
        w = m.tensor(np.arange(v.numel(), dtype=np.float64))
        (v * w).sum().backward()
        return [v, [p.grad for p in ps]]
    vec = m.tensor(c["vec"]).to(getattr(m, c["vec_dtype"]))
    if c["vec_2d"]:
        vec = vec.reshape(1, -1)
    if c["vec_list"]:
        vec = vec.tolist()
    out = m.nn.utils.vector_to_parameters(vec, arg)
    return [out, ps, [type(p).__name__ for p in ps], [p.requires_grad for p in ps]]


# ----------------------------------------------------------------------------- parametrize

def _parametrizations(m):
    """Parametrizations by name: forward only, with right_inverse, two originals, a shape
    change, a dtype change."""
    class Sym(m.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).mT

    class Scale(m.nn.Module):
        def forward(self, X):
            return X * 3

        def right_inverse(self, X):
            return X / 3

    class Split(m.nn.Module):
        def forward(self, A, B):
            return A + B

        def right_inverse(self, X):
            return X * 0.25, X * 0.75

    class Flat(m.nn.Module):
        def forward(self, X):
            return X.reshape(-1) if X.dim() == 2 else X.reshape(3, 3)

        def right_inverse(self, X):
            return X.reshape(-1) if X.dim() == 2 else X.reshape(3, 3)

    class Half(m.nn.Module):
        def forward(self, X):
            return X.float()

    class Exp(m.nn.Module):
        def forward(self, X):
            return X.exp()

        def right_inverse(self, X):
            return X.log()

    return {"sym": Sym, "scale": Scale, "split": Split, "flat": Flat, "half": Half, "exp": Exp}


def gen_parametrize(r, rng):
    names = [r.choice(["sym", "scale", "scale", "split", "flat", "half", "exp"])
             for _ in range(r.randint(1, 3))]
    return dict(family="parametrize", names=names, target=r.choice(["weight", "weight", "bias",
                                                                     "buffer"]),
                unsafe=r.random() < 0.3, assign=r.random() < 0.4, cached=r.random() < 0.3,
                remove=r.choice([None, True, False]), w=_arr(rng, (3, 3)),
                frozen=r.random() < 0.15, reload=r.random() < 0.3,
                b=_arr(rng, (3,)), x=_arr(rng, (2, 3)), new=_arr(rng, (3, 3)) ** 2 + 0.1)


def _parametrized(m, c, w, out):
    """A float64 Linear(3, 3) (with a buffer `buf`) holding `w`, the case's parametrizations
    registered on its target (each one's outcome appended to `out`); (module, name)."""
    P = m.nn.utils.parametrize
    kinds = _parametrizations(m)
    lin = m.nn.Linear(3, 3).double()
    lin.weight.requires_grad_(not c["frozen"])
    with m.no_grad():
        lin.weight.copy_(m.tensor(w))
        lin.bias.copy_(m.tensor(c["b"]))
    name = c["target"]
    if name == "buffer":
        name = "buf"
        lin.register_buffer("buf", m.tensor(w.copy()))
    for k in c["names"]:
        try:
            P.register_parametrization(lin, name, kinds[k](), unsafe=c["unsafe"])
            out.append("ok")
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            out.append(type(e).__name__)
    return lin, name


def run_parametrize(m, c):
    P = m.nn.utils.parametrize
    out = []
    lin, name = _parametrized(m, c, c["w"], out)
    out += [P.is_parametrized(lin), P.is_parametrized(lin, name), sorted(lin.state_dict()),
            sorted(n for n, _ in lin.named_parameters())]
    if not P.is_parametrized(lin, name):
        return out
    if c["cached"]:
        with P.cached():
            a = getattr(lin, name)
            out += [a is getattr(lin, name), a]
    value = getattr(lin, name)
    out += [value, value.requires_grad]
    if c["reload"]:  # the state_dict into a module parametrized alike (strict)
        again, _ = _parametrized(m, c, c["new"], [])
        out += [str(again.load_state_dict(lin.state_dict())), getattr(again, name)]
    if name != "buf" and tuple(value.shape) == (3,) * value.dim() and value.dtype == m.float64:
        y = lin(m.tensor(c["x"]))
        (y * y).sum().backward()
        out += [y, [p.grad for _, p in sorted(lin.named_parameters())]]
    if c["assign"]:
        new = m.tensor(c["new"] if name != "bias" else c["new"][0])
        setattr(lin, name, new)
        out += [getattr(lin, name), sorted(lin.state_dict().items())]
    if c["remove"] is not None:
        P.remove_parametrizations(lin, name, leave_parametrized=c["remove"])
        t = getattr(lin, name)
        out += [t, type(t).__name__, t.requires_grad, sorted(lin.state_dict()),
                type(lin).__name__, P.is_parametrized(lin)]
    return out


# ----------------------------------------------------------------------------- norms

LAYERS = {"linear": (lambda nn: nn.Linear(3, 4), (2, 3)),
          "conv1d": (lambda nn: nn.Conv1d(2, 3, 3), (2, 2, 5)),
          "convT1d": (lambda nn: nn.ConvTranspose1d(2, 3, 3), (2, 2, 5)),
          "conv2d": (lambda nn: nn.Conv2d(2, 3, 2), (1, 2, 3, 3))}


def gen_norms(r, rng):
    kind = r.choice(["weight_norm", "weight_norm_old", "spectral_norm", "spectral_norm_old",
                     "orthogonal"])
    layer = r.choice(sorted(LAYERS))
    c = dict(family="norms", kind=kind, layer=layer, seed=r.randrange(1000),
             dim=r.choice([None, 0, 1, -1, 2, -2, 3, "absent"]), steps=r.choice([1, 2]),
             train=[r.random() < 0.7 for _ in range(2)], remove=r.random() < 0.4,
             name="bias" if r.random() < 0.15 else "weight")
    if kind.startswith("spectral"):
        c.update(n=r.choice([0, 1, 2, 3]), eps=r.choice([1e-12, 1e-3]))
    if kind == "orthogonal":
        c.update(layer="linear", shape=r.choice([(4, 4), (5, 3), (3, 5), (2, 4, 3)]),
                 omap=r.choice([None, "matrix_exp", "cayley", "householder", "bad"]),
                 triv=r.random() < 0.5, assign=r.random() < 0.4, cplx=r.random() < 0.25)
    return c


def _seeded(m, mod, seed):
    with m.no_grad():
        for i, (_, p) in enumerate(sorted(mod.named_parameters())):
            p.copy_(m.tensor(np.random.RandomState(seed + i).randn(*p.shape) * 0.5))
    return mod


def run_norms(m, c):
    U, F = m.nn.utils, m.nn.functional
    make, xshape = LAYERS[c["layer"]]
    x = m.tensor(np.random.RandomState(c["seed"] + 50).randn(*xshape))
    kw = {} if c["dim"] == "absent" else {"dim": c["dim"]}
    kind = c["kind"]
    if kind == "orthogonal":
        def draw(seed, shape, scale=1.0):  # (complex weights: unitary ones)
            rs = np.random.RandomState(seed)
            a = rs.randn(*shape) * scale
            return m.tensor(a + 1j * rs.randn(*shape) * scale if c["cplx"] else a)
        mod = m.nn.Module()
        mod.weight = m.nn.Parameter(draw(c["seed"], c["shape"]))
        U.parametrizations.orthogonal(mod, orthogonal_map=c["omap"],
                                      use_trivialization=c["triv"])
        P = mod.parametrizations.weight
        with m.no_grad():
            P.original.copy_(draw(c["seed"] + 1, P.original.shape, 0.3))
            if c["triv"]:
                P[0].base.copy_(m.linalg.qr(draw(c["seed"] + 2, P[0].base.shape))[0])
        W = mod.weight
        (W * draw(c["seed"] + 3, W.shape)).real.sum().backward()
        out = [W, P.original.grad, sorted(mod.state_dict())]
        if c["assign"] and len(c["shape"]) == 2:
            big, small = max(c["shape"]), min(c["shape"])
            Q = m.linalg.qr(draw(c["seed"] + 4, (big, small)))[0]
            mod.weight = Q.mT if c["shape"][0] < c["shape"][1] else Q
            out.append(mod.weight)
        return out
    mod = _seeded(m, make(m.nn).double(), c["seed"])
    name = c["name"]
    if kind == "weight_norm":
        U.parametrizations.weight_norm(mod, name, **kw)
    elif kind == "weight_norm_old":
        U.weight_norm(mod, name, **kw)
    else:
        (U.spectral_norm if kind == "spectral_norm_old" else
         U.parametrizations.spectral_norm)(mod, name, n_power_iterations=c["n"], eps=c["eps"],
                                           **kw)
    _seeded(m, mod, c["seed"] + 10)
    uv = []
    if kind.startswith("spectral"):  # the same starting u, v in both
        owner, pre = (mod, name + "_") if kind.endswith("old") else \
            (getattr(mod.parametrizations, name)[0], "_")
        uv = [getattr(owner, pre + "u"), getattr(owner, pre + "v")]
        with m.no_grad():
            for i, t in enumerate(uv):
                t.copy_(F.normalize(m.tensor(np.random.RandomState(c["seed"] + 20 + i).randn(
                    *t.shape)), dim=0))
    out = [sorted(mod.state_dict())]
    for mode in c["train"][:c["steps"]]:
        mod.train(mode)
        mod.zero_grad()
        y = mod(x)
        (y * y).sum().backward()
        out += [y, getattr(mod, name)] + uv + \
            [[p.grad for _, p in sorted(mod.named_parameters())]]
    if c["remove"]:
        if kind.endswith("old"):
            getattr(U, "remove_" + kind[:-4])(mod, name)
        else:
            U.parametrize.remove_parametrizations(mod, name)
        out += [sorted(mod.state_dict()), getattr(mod, name), mod(x),
                type(getattr(mod, name)).__name__]
    return out


# ----------------------------------------------------------------------------- prune

AMOUNTS = [0, 0.3, 0.5, 1.0, 0.0, 2, 1, 100, 1.5, -1, -0.2]


def gen_prune(r, rng):
    layer = r.choice(["linear", "conv2d"])
    steps = []
    for _ in range(r.randint(1, 3)):
        how = r.choice(["l1", "l1", "ln", "ln", "random_u", "random_s", "identity", "custom",
                        "global"])
        step = dict(how=how, name=r.choice(["weight", "weight", "bias"]),
                    amount=r.choice(AMOUNTS), scores=r.random() < 0.25)
        if how in ("ln", "random_s"):
            step.update(n=r.choice([1, 2, INF, -INF, 0, "fro", "nuc", 3]),
                        dim=r.choice([0, 1, -1, 2, -3, 4]))
        if how == "custom":
            step["mask"] = (rng.random(12) < 0.6).astype(np.float64)
            step["mask_shape"] = r.choice(["right", "right", "wrong"])
        if how == "global":
            step["method"] = r.choice(["L1Unstructured", "RandomUnstructured", "Identity",
                                       "LnStructured"])
            step["scores"] = r.random() < 0.3
        steps.append(step)
    return dict(family="prune", layer=layer, seed=r.randrange(1000), steps=steps,
                remove=r.choice([None, "weight", "bias"]))


def _random_only(c):
    """Whether the case prunes entries that are not determined: random methods, and
    ln_structured with n=0 (every channel of a dense weight has the same L0 norm, and topk's
    order among equal values is unspecified: torch's CPU kernel keeps the last ones)."""
    return any(s["how"] in ("random_u", "random_s") or s.get("method") == "RandomUnstructured"
               or s["how"] == "ln" and s["n"] == 0 for s in c["steps"])


def _prune_state(m, mods, exact, counted=True):
    """The modules' state_dict keys, is_pruned, and their tensors (with random methods: only
    how many entries all the masks keep, where that is not random too)."""
    out, kept = [], 0
    for mod in mods:
        out += [sorted(mod.state_dict()), m.nn.utils.prune.is_pruned(mod)]
        for k, v in sorted(mod.state_dict().items()):
            if exact:
                out.append(v)
            elif k.endswith("_mask"):
                kept += int(v.sum())
    return out + [kept] if exact or counted else out


def run_prune(m, c):
    pr = m.nn.utils.prune
    make = (lambda: m.nn.Linear(3, 4)) if c["layer"] == "linear" else \
        (lambda: m.nn.Conv2d(2, 3, 2))
    mods = [_seeded(m, make().double(), c["seed"]), _seeded(m, make().double(), c["seed"] + 7)]
    exact = not _random_only(c)
    counted = len(c["steps"]) == 1 and not c["remove"]  # (a random count: one method, kept)
    out = []
    for s in c["steps"]:
        mod, name = mods[0], s["name"]
        try:
            scores = None
            if s["scores"] and s["how"] in ("l1", "ln"):  # (a wrong shape for a few)
                t = getattr(mod, name).detach()
                scores = (t ** 3 + 0.1) if s["amount"] != 1 else t[:1]
            if s["how"] == "l1":
                r = pr.l1_unstructured(mod, name, s["amount"], importance_scores=scores)
            elif s["how"] == "random_u":
                r = pr.random_unstructured(mod, name, s["amount"])
            elif s["how"] == "ln":
                r = pr.ln_structured(mod, name, s["amount"], s["n"], s["dim"],
                                     importance_scores=scores)
            elif s["how"] == "random_s":
                r = pr.random_structured(mod, name, s["amount"], s["dim"])
            elif s["how"] == "identity":
                r = pr.identity(mod, name)
            elif s["how"] == "custom":
                shape = tuple(getattr(mod, name).shape)
                n = int(np.prod(shape))
                mask = s["mask"][:n].reshape(shape) if s["mask_shape"] == "right" and n <= 12 \
                    else s["mask"][:5]
                r = pr.custom_from_mask(mod, name, m.tensor(mask))
            else:
                pairs = [(mods[0], "weight"), (mods[1], name)]
                kw = {} if s["method"] == "Identity" else {"amount": s["amount"]}
                if s["method"] == "LnStructured":
                    kw.update(n=2, dim=0)
                scores = {(mo, n): getattr(mo, n).detach() ** 3 for mo, n in pairs} \
                    if s["scores"] else None
                r = pr.global_unstructured(pairs, getattr(pr, s["method"]),
                                           importance_scores=scores, **kw)
            out.append(type(r).__name__ if s["how"] == "global" else r is mod)
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            out.append(type(e).__name__)
            if hasattr(mods[0], name + "_orig"):
                return out  # KNOWN["re-pruning refused"]: the module differs from here on
        out += _prune_state(m, mods, exact, counted)
    x = m.tensor(np.random.RandomState(c["seed"] + 3).randn(
        *((2, 3) if c["layer"] == "linear" else (1, 2, 3, 3))))
    if exact:
        y = mods[0](x)
        (y * y).sum().backward()
        out += [y, [(n, p.grad) for n, p in sorted(mods[0].named_parameters())]]
    if c["remove"]:
        try:
            out.append(pr.remove(mods[0], c["remove"]) is mods[0])
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        out += _prune_state(m, mods, exact, counted) + \
            [sorted(n for n, _ in mods[0].named_parameters()),
             len(mods[0]._forward_pre_hooks)]
    return out


# ----------------------------------------------------------------------------- fusion

def gen_fuse(r, rng):
    return dict(family="fuse", kind=r.choice(["conv2d", "convT2d", "conv1d", "linear"]),
                bias=r.random() < 0.6, affine=r.random() < 0.7, track=r.random() < 0.9,
                train=r.choice([None, None, None, "conv", "bn"]), eps=r.choice([1e-5, 1e-3]),
                seed=r.randrange(1000), wrong_transpose=r.random() < 0.15)


def run_fuse(m, c):
    U, nn = m.nn.utils, m.nn
    layer = {"conv2d": lambda: nn.Conv2d(4, 6, 2, bias=c["bias"]),
             "convT2d": lambda: nn.ConvTranspose2d(4, 6, 2, bias=c["bias"]),
             "conv1d": lambda: nn.Conv1d(4, 6, 2, bias=c["bias"]),
             "linear": lambda: nn.Linear(4, 6, bias=c["bias"])}[c["kind"]]()
    layer = _seeded(m, layer.double(), c["seed"]).eval()
    bn = (nn.BatchNorm1d if c["kind"] in ("conv1d", "linear") else nn.BatchNorm2d)(
        6, eps=c["eps"], affine=c["affine"], track_running_stats=c["track"])
    bn = _seeded(m, bn.double(), c["seed"] + 4).eval()
    if c["track"]:
        with m.no_grad():
            bn.running_mean.copy_(m.tensor(np.random.RandomState(c["seed"] + 7).randn(6)))
            bn.running_var.copy_(m.tensor(np.random.RandomState(c["seed"] + 8).rand(6) + 0.5))
    if c["train"] == "conv":
        layer.train()
    elif c["train"] == "bn":
        bn.train()
    x = m.tensor(np.random.RandomState(c["seed"] + 9).randn(
        *{"linear": (3, 4), "conv1d": (1, 4, 5)}.get(c["kind"], (1, 4, 4, 4))))
    if c["kind"] == "linear":
        fused = U.fuse_linear_bn_eval(layer, bn)
    else:
        transpose = (c["kind"] == "convT2d") != c["wrong_transpose"]
        fused = U.fuse_conv_bn_eval(layer, bn, transpose=transpose)
    y = fused(x)
    y.sum().backward()
    return [fused.weight, fused.bias, y, fused is layer, type(fused).__name__,
            fused.weight.grad, fused.training, sorted(fused.state_dict())]


# ----------------------------------------------------------------------------- functional_call

FC_NAMES = ["lin.weight", "lin.bias", "bn.weight", "bn.running_mean", "bn.num_batches_tracked",
            "tied.weight", "nope", "lin"]


def gen_call(r, rng):
    names = r.sample(FC_NAMES, r.randint(0, 4))
    return dict(family="call", names=names, tie=r.random() < 0.7, strict=r.random() < 0.3,
                train=r.random() < 0.5, seed=r.randrange(1000), as_tuple=r.random() < 0.2,
                via_func=r.random() < 0.3)


def run_call(m, c):
    nn = m.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.bn = nn.BatchNorm1d(3)
            self.tied = nn.Linear(3, 3, bias=False)
            self.tied.weight = self.lin.weight

        def forward(self, x):
            return self.tied(self.bn(self.lin(x)))

    net = _seeded(m, Net().double(), c["seed"]).train(c["train"])
    values = {}
    for i, n in enumerate(c["names"]):
        shape = {"lin.bias": (3,), "bn.weight": (3,), "bn.running_mean": (3,),
                 "nope": (2,), "bn.num_batches_tracked": ()}.get(n, (3, 3))
        t = m.tensor(np.random.RandomState(c["seed"] + 30 + i).randn(*shape))
        # (the running stats without requires_grad: torch's batch_norm has no derivative
        # for them, flowgrad's has)
        values[n] = t.long() if n == "bn.num_batches_tracked" else \
            t if n == "bn.running_mean" else t.requires_grad_()
    before = sorted((k, v.clone()) for k, v in net.state_dict().items())
    call = m.func.functional_call if c["via_func"] else nn.utils.stateless.functional_call
    arg = (values, {}) if c["as_tuple"] else values
    x = m.tensor(np.random.RandomState(c["seed"] + 1).randn(4, 3))
    y = call(net, arg, (x,), tie_weights=c["tie"], strict=c["strict"])
    y.sum().backward()
    return [y, before, sorted(net.state_dict().items()),
            [(k, v.grad) for k, v in sorted(values.items()) if v.requires_grad],
            [(k, p.grad) for k, p in sorted(net.named_parameters())]]


# ----------------------------------------------------------------------------- init

NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                  "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu", "gelu",
                  "Relu", "softplus", ""]
GAIN_PARAMS = [None, 0.2, 0, 1, -0.5, True, "x", 2, 0.0, np.float64(0.3), None]
INITS = ["uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
         "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
         "orthogonal_", "sparse_", "gain", "fans"]
DEPRECATED = ["uniform_", "normal_", "constant_", "eye_", "dirac_", "xavier_uniform_",
              "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]
SEEDED = ["uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_",
          "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]
INIT_SHAPES = [(64, 48), (48, 64), (32, 8, 3, 3), (16, 12, 5), (40,), (), (0, 5), (5, 0),
               (100, 30), (6, 4, 3, 2, 2), (3, 3)]


def gen_init(r, rng):
    fn = r.choice(INITS)
    c = dict(family="init", fn=fn, shape=r.choice(INIT_SHAPES), generator=r.random() < 0.15,
             deprecated=fn in DEPRECATED and r.random() < 0.15,
             dtype=r.choice(["float64", "float32", "float32", "int64", "float16", "complex64"]
                            if r.random() < 0.3 else ["float32"]),
             param=r.random() < 0.2)
    if fn == "gain":
        c.update(nonlinearity=r.choice(NONLINEARITIES), gain_param=r.choice(GAIN_PARAMS))
    elif fn == "uniform_":
        c.update(args=r.choice([(), (-2.0, 3.0), (1.0, 1.0), (3.0, -1.0), (0, 1e-3)]))
    elif fn == "normal_":
        c.update(args=r.choice([(), (1.0, 2.0), (0.0, 0.0), (0.0, -1.0), (-3.0, 0.01)]))
    elif fn == "trunc_normal_":
        c.update(args=r.choice([(), (0.0, 1.0, -1.0, 1.0), (1.0, 0.5, 0.0, 5.0),
                                (0.0, 1.0, 2.0, 3.0), (0.0, 2.0, -0.5, 0.5)]))
    elif fn == "constant_":
        c.update(args=(r.choice([0.5, -3, 0, 1e30, float("nan")]),))
    elif fn == "dirac_":
        c.update(args=(r.choice([1, 2, 3, 4]),))
    elif fn in ("xavier_uniform_", "xavier_normal_", "orthogonal_"):
        c.update(args=(r.choice([1.0, 0.5, 2.0, 0.0, -1.0]),))
    elif fn.startswith("kaiming"):
        c.update(args=(r.choice([0, 0.1, math.sqrt(5), -1.0]),
                       r.choice(["fan_in", "fan_out", "FAN_IN", "fan_avg"]),
                       r.choice(["leaky_relu", "relu", "tanh", "linear", "selu", "gelu"])))
    elif fn == "sparse_":
        c.update(args=(r.choice([0.0, 0.1, 0.5, 0.9, 1.0]), r.choice([0.01, 1.0])))
    else:
        c.update(args=())
    return c


def _init_stats(fn, t, args):
    """What random draws of `fn` must share with torch's: the support, the structure and
    (for 1000 draws or more) the moments."""
    a = t.detach().numpy().astype(np.complex128 if t.is_complex() else np.float64)
    flat = a.reshape(-1)
    out = [bool(np.isfinite(flat).all())]
    if t.is_complex():
        return out
    if fn == "uniform_" and len(args) == 2:
        out.append(bool((flat >= args[0]).all() and (flat <= args[1]).all()))
    if fn == "trunc_normal_" and len(args) == 4:
        out.append(bool((flat >= args[2]).all() and (flat <= args[3]).all()))
    if fn == "orthogonal_" and a.size:
        w = a.reshape(a.shape[0], -1)
        out.append(np.round(w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w, 4))
    if fn == "sparse_":  # ceil(sparsity * rows) zeros in each column
        out.append((a == 0).sum(axis=0))
    if flat.size >= 1000:
        out += [Approx(flat.std(), 0.12), bool(abs(flat.mean()) <= 0.2 * flat.std() + 1e-12)]
        if "uniform" in fn:  # the largest draw is near the bound
            out.append(Approx(np.abs(flat).max(), 0.05))
    return out


def run_init(m, c):
    init = m.nn.init
    if c["fn"] == "gain":
        return [init.calculate_gain(c["nonlinearity"], c["gain_param"])]
    t = m.empty(c["shape"], dtype=getattr(m, c["dtype"]))
    if c["dtype"] != "int64":
        t = t.fill_(7)
    else:
        t.fill_(7)
    if c["param"] and t.is_floating_point():
        t = m.nn.Parameter(t)
    if c["fn"] == "fans":
        return list(init._calculate_fan_in_and_fan_out(t))
    m.manual_seed(0)
    kw = {"generator": m.Generator().manual_seed(5)} if c["generator"] and \
        c["fn"] in SEEDED and not c["deprecated"] else {}
    fn = getattr(init, c["fn"][:-1] if c["deprecated"] else c["fn"])
    r = fn(t, *c["args"], **kw)
    out = [r is t, tuple(t.shape), str(t.dtype).split(".")[-1], t.requires_grad]
    if c["fn"] in ("constant_", "ones_", "zeros_", "eye_", "dirac_"):
        return out + [t]
    return out + _init_stats(c["fn"], t, c["args"])


FAMILIES = {"clip": (gen_clip, run_clip), "vector": (gen_vector, run_vector),
            "parametrize": (gen_parametrize, run_parametrize), "norms": (gen_norms, run_norms),
            "prune": (gen_prune, run_prune), "fuse": (gen_fuse, run_fuse),
            "call": (gen_call, run_call), "init": (gen_init, run_init)}
WEIGHTS = {"clip": 4, "vector": 1, "parametrize": 3, "norms": 2, "prune": 4, "fuse": 1,
           "call": 1, "init": 4}


def generate(seed):
    r, rng = random.Random(seed), np.random.default_rng(seed)
    family = r.choices(sorted(WEIGHTS), [WEIGHTS[k] for k in sorted(WEIGHTS)])[0]
    return FAMILIES[family][0](r, rng)


def describe(seed):
    c = generate(seed)
    return ", ".join(f"{k}={np.round(v, 3).tolist() if isinstance(v, np.ndarray) else v}"
                     for k, v in c.items() if k not in ("x", "b", "new"))[:400]


def _plain(v):
    if isinstance(v, (torch.Tensor, flow.Tensor)):
        return ("tensor", str(v.dtype).split(".")[-1], v.detach().numpy().copy())
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (torch.dtype, flow.dtype)):
        return str(v).split(".")[-1]
    if isinstance(v, np.ndarray):
        return ("tensor", str(v.dtype), v)
    return v


def outcome(m, case):
    """("ok", the case's results as plain values) or ("raise", the exception's class)."""
    run = FAMILIES[case["family"]][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", _plain(run(m, case))
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return "raise", type(e).__name__, str(e)[:200]


def _differ(got, want, tol, where="result"):
    if isinstance(want, Approx):
        if not isinstance(got, Approx):
            return f"{where}: flowgrad {got!r}, torch {want!r}"
        if abs(got.value - want.value) > want.rtol * max(abs(want.value), 1e-3):
            return f"{where}: flowgrad {got!r}, torch {want!r}"
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: flowgrad {got!r}, torch {want!r}"[:300]
        for i, (a, b) in enumerate(zip(got, want)):
            if (d := _differ(a, b, tol, f"{where}[{i}]")) is not None:
                return d
        return None
    if isinstance(want, tuple) and want and want[0] == "tensor":
        if not (isinstance(got, tuple) and got and got[0] == "tensor"):
            return f"{where}: flowgrad {got!r}, torch a tensor"
        if got[1] != want[1]:
            return f"{where}: dtype flowgrad {got[1]}, torch {want[1]}"
        rtol = TOL.get(want[1], tol)
        return fuzz_common.first_difference([(where, got[2], want[2])], max(rtol, tol))
    if isinstance(want, float) and isinstance(got, float):
        if math.isnan(want) and math.isnan(got) or abs(got - want) <= 1e-12 * max(1, abs(want)):
            return None
    if got != want or type(got) is not type(want) and not isinstance(want, (int, float)):
        return f"{where}: flowgrad {got!r}, torch {want!r}"
    return None


def _used_grads(c):
    return [g for g in (c["grads"][:1] if c["form"] == "single" else c["grads"])
            if g is not None]


# Differences kept on purpose: name -> (the cases they cover, why flowgrad differs)
KNOWN = {
    "clip_grad_value_ without gradients": (
        lambda c: c["family"] == "clip" and c["how"] == "value" and not _used_grads(c),
        "torch's _group_tensors_by_device_and_dtype fails an internal check (Expected "
        "!nested_tensorlist[0].empty()) when no parameter has a grad; flowgrad does nothing, "
        "as clip_grad_norm_ does"),
    "vector_to_parameters of a single tensor": (
        lambda c: c["family"] == "vector" and c["single"] and c["values"],
        "torch iterates the tensor (its rows; a 0-d one raises TypeError) and assigns the "
        "rows' .data, which leaves the tensor as it was; flowgrad takes it as [tensor]"),
    "stateless.functional_call of a tuple of dicts": (
        lambda c: c["family"] == "call" and c["as_tuple"] and not c["via_func"],
        "torch's deprecated nn.utils.stateless.functional_call calls .keys() on it "
        "(AttributeError); flowgrad's is torch.func.functional_call, which takes it"),
    "orthogonal_ of a half tensor": (
        lambda c: c["family"] == "init" and c["fn"] == "orthogonal_" and
        c["dtype"] == "float16" and 0 not in c["shape"] and len(c["shape"]) >= 2,
        "torch has no float16 QR kernel (NotImplementedError: geqrf); flowgrad takes the QR "
        "in float64 and writes the rounded orthogonal matrix"),
    "parameters_to_vector of a non-contiguous parameter": (
        lambda c: False,  # (the fuzzer's parameters are contiguous: see its test)
        "torch's param.view(-1) raises for a transposed or channels_last parameter; flowgrad "
        "reshapes (the same vector torch gives for a contiguous copy)"),
    "re-pruning refused": (
        lambda c: False,  # (run_prune stops the case at the refused step)
        "a refused second pruning of a tensor: torch has already taken the first method's "
        "pre-hook off (the module keeps name_orig and name_mask but is no longer pruned); "
        "flowgrad leaves the module as it was"),
}


def known(case):
    """The name of the KNOWN difference covering `case`, or None."""
    return next((k for k, (covers, _) in KNOWN.items() if covers(case)), None)


def check(seed, skip_known=True):
    """None when flowgrad's outcome of the seed's case is torch's (or the case is a KNOWN
    difference), else a message."""
    case = generate(seed)
    if skip_known and known(case):
        return None
    want, got = outcome(torch, case), outcome(flow, case)
    if want[0] != got[0]:
        return f"torch {want[0]} {want[1:]}; flowgrad {got[0]} {got[1:]}"
    if want[0] == "raise":
        if want[1] != got[1]:
            return f"torch raises {want[1]}: {want[2]}; flowgrad {got[1]}: {got[2]}"
        return None
    return _differ(got[1], want[1], case.get("tol", 1e-10))


def main():
    fuzz_common.main(__doc__, describe, check, seeds="0:500")


if __name__ == "__main__":
    main()
