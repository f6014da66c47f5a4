"""Differential fuzzing of mixed-precision training: random GradScaler programs run in torch and
in flowgrad on the CPU.

A program draws a small model (Linear / ReLU / LayerNorm, float32 parameters, now and then a
float16 one), one or two optimizers (SGD, Adam, AdamW, some with two parameter groups, some
fused=True: the scaler hands those the scale), a GradScaler (any spelling:
`amp.GradScaler("cpu")`, the deprecated `cpu.amp` / `cuda.amp` ones, the top-level one;
random init_scale, growth_factor, backoff_factor, growth_interval, enabled) and then
iterations of calls: zero_grad, a forward under `autocast` (bfloat16 or float16, or none)
whose loss (or a list / tuple / generator of losses) is scaled and backpropagated (now and
then twice: accumulated), inf or NaN written into gradients, unscale_ and clip_grad_norm_,
step (of one optimizer, of both, twice), update() or update(new_scale) with a float or a
tensor, the setters, state_dict into a fresh scaler mid-run, pickling. After every call the
parameters, gradients, the scale, the growth tracker, each optimizer's stage and recorded
inf checks and the optimizer state must agree with torch's, and a call must raise (the same
exception type) exactly where torch's does.

    .venv/bin/python tests/amp_fuzz.py --seeds 0:500      # summary
    .venv/bin/python tests/amp_fuzz.py --show 17          # one program and its verdict
"""
from __future__ import annotations

import pickle
import random
import warnings

import fuzz_common
import numpy as np
import optim_fuzz
import torch

import flowgrad as flow

ITERATIONS = 4
INIT_SCALES = [1.0, 3.0, 0.5, 2.0 ** 4, 2.0 ** 16, 2.0 ** 24, 2.0 ** 126, 1024]
# tolerance of the parameters and gradients: float32 programs, programs with an autocast region
TOL = {None: 1e-5, "bfloat16": 3e-2, "float16": 3e-3}


def _optimizer(r):
    name = r.choice(["SGD", "Adam", "AdamW"])
    lr = r.choice([0.1, 0.01])
    if name == "SGD":
        kw = dict(lr=lr, momentum=r.choice([0.0, 0.9]), weight_decay=r.choice([0.0, 1e-2]))
    else:
        kw = dict(lr=lr, weight_decay=r.choice([0.0, 1e-2]), amsgrad=r.random() < 0.3)
    # fused=True: the scaler hands the step its scale (not SGD's with momentum nor amsgrad:
    # see KNOWN in test_amp_fuzz_vs_torch.py)
    if r.random() < 0.25 and not kw.get("momentum") and not kw.get("amsgrad"):
        kw["fused"] = True
    return name, kw


def _scaler_spec(r):
    spelling = r.choice(["amp", "amp", "amp", "top", "cpu_amp", "cuda_amp", "amp_cuda"])
    kw = {}
    if r.random() < 0.8:
        kw["init_scale"] = r.choice(INIT_SCALES)
    if r.random() < 0.6:
        kw["growth_factor"] = r.choice([2.0, 1.5, 3.0, 2.0, 1.0]) if r.random() < 0.97 else 0.5
    if r.random() < 0.6:
        kw["backoff_factor"] = r.choice([0.5, 0.25, 0.9, 0.5, 1.0]) if r.random() < 0.97 else 2.
    kw["growth_interval"] = r.choice([1, 2, 3, 2000])
    if r.random() < 0.15:
        kw["enabled"] = False
    return spelling, kw


def _make_scaler(m, spelling, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the deprecated spellings, cuda without CUDA)
        if spelling == "amp":
            return m.amp.GradScaler("cpu", **kw)
        if spelling == "top":
            return m.GradScaler("cpu", **kw)
        if spelling == "amp_cuda":
            return m.amp.GradScaler("cuda", **kw)
        return (m.cpu if spelling == "cpu_amp" else m.cuda).amp.GradScaler(**kw)


class Program:
    """One mixed-precision training program, drawn from a seed."""

    def __init__(self, seed):
        r = random.Random(seed)
        rng = np.random.default_rng(seed)
        self.width = r.randint(2, 5)
        layers, d = [], self.width
        for _ in range(r.randint(1, 4)):
            kind = r.choice(["Linear", "Linear", "ReLU", "LayerNorm"])
            if kind == "LayerNorm" and (d < 3 or layers and layers[-1][0] == "ReLU"):
                # (its input's gradient is 0 but for rounding, noise in both, over 2 features
                # or a ReLU's row with one value left)
                kind = "Linear"
            out = r.randint(2, 5) if kind == "Linear" else d
            layers.append((kind, d, out))
            d = out
        if not any(k == "Linear" for k, _, _ in layers):
            layers.append(("Linear", d, 2))
        self.layers = layers
        self.out = layers[-1][2]
        self.init = {}  # (layer, name) -> array
        for i, (kind, d_in, d_out) in enumerate(layers):
            if kind == "Linear":
                self.init[i, "weight"] = rng.standard_normal((d_out, d_in)).astype(np.float32)
                self.init[i, "bias"] = rng.standard_normal(d_out).astype(np.float32)
            elif kind == "LayerNorm":
                self.init[i, "weight"] = rng.uniform(0.5, 1.5, d_in).astype(np.float32)
                self.init[i, "bias"] = rng.standard_normal(d_in).astype(np.float32)
        self.scaler = _scaler_spec(r)
        # a float16 parameter: unscale_ refuses its grad (not with a disabled scaler: the
        # optimizers' float16 steps are optim_fuzz's business)
        self.half_param = r.random() < 0.05 and self.scaler[1].get("enabled", True) and \
            "cuda" not in self.scaler[0]
        n = len(self.init) + self.half_param
        order = list(range(n))
        r.shuffle(order)
        self.n_params = n
        if n > 1 and r.random() < 0.4:  # two optimizers
            cut = r.randint(1, n - 1)
            owners = [order[:cut], order[cut:]]
        else:
            owners = [order]
        self.optims = []
        for own in owners:
            name, kw = _optimizer(r)
            split = r.randint(1, len(own)) if len(own) > 1 and r.random() < 0.4 else len(own)
            self.optims.append((name, kw, own[:split], own[split:], r.choice([0.5, 2.0])))
        self.program = [self._iteration(r, rng, it) for it in range(ITERATIONS)]
        self.autocast = next((a[1]["dtype"] for it in self.program for a in it
                              if a[0] == "forward" and a[1]["dtype"]), None)

    def _iteration(self, r, rng, it):
        """The calls of one iteration: (name, arguments)."""
        acts = []
        k = len(self.optims)
        if r.random() < 0.8:
            acts.append(("zero_grad", {"set_to_none": r.random() < 0.7}))
        dtype = r.choice([None, None, "bfloat16", "float16"])
        acts.append(("forward", {
            "x": (rng.standard_normal((3, self.width)) * r.choice([1.0, 1.0, 100.0]))
            .astype(np.float32),
            "dtype": dtype, "spelling": r.choice(["autocast", "autocast", "cpu_amp"]),
            "enabled": r.random() < 0.9, "pack": r.choice(["one", "one", "list", "tuple",
                                                           "gen", "unscaled"]),
            "loss_inside": r.random() < 0.5}))
        if r.random() < 0.2:  # gradient accumulation: a second scaled backward
            acts.append(("forward", dict(acts[-1][1], x=(rng.standard_normal((3, self.width)))
                                         .astype(np.float32), pack=r.choice(["one", "list"]))))
        if r.random() < 0.3:
            acts.append(("inject", {"param": r.randrange(self.n_params),
                                    "value": r.choice([np.inf, -np.inf, np.nan]),
                                    "pos": r.random()}))
        steps = list(range(k))
        if k == 2 and r.random() < 0.3:
            steps = [r.randrange(2)]
        for o in steps:
            if r.random() < 0.3:
                acts.append(("unscale", {"opt": o}))
                if r.random() < 0.6:
                    acts.append(("clip", {"opt": o, "max_norm": r.choice([0.1, 1.0, 10.0])}))
            if r.random() < 0.08:
                acts.append(("step", {"opt": o}))  # (stepped twice: torch refuses)
            acts.append(("step", {"opt": o}))
            if r.random() < 0.05:
                acts.append(("unscale", {"opt": o}))  # after step: refused
        if r.random() < 0.1:
            acts.append(("pickle", {}))  # mid-iteration: refused
        roll = r.random()
        if roll < 0.1:
            acts.append(("update", {"new": r.choice([0.0, 2.0 ** -130, 3.5, 1e30, 256.0])}))
        elif roll < 0.2:
            acts.append(("update_tensor", {"value": r.choice([4.0, 0.25, 1e-3]),
                                           "shape": r.choice([(), (), (1,), (2,)]),
                                           "dtype": r.choice(["float32", "float64", "int64"]),
                                           "grad": r.random() < 0.1}))
        elif roll < 0.93:
            acts.append(("update", {}))
        if r.random() < 0.15:
            acts.append(("setter", {"which": r.choice(["growth_factor", "backoff_factor",
                                                       "growth_interval"]),
                                    "value": r.choice([1.5, 4.0, 0.25, 1, 3, 2.0])}))
        if r.random() < 0.15:
            acts.append(("reload", {"fresh_spelling": r.random() < 0.5}))
        if r.random() < 0.1:
            acts.append(("pickle", {}))
        return acts

    def describe(self):
        lines = [f"layers {self.layers} half_param {self.half_param}",
                 f"optimizers {self.optims}", f"scaler {self.scaler}"]
        for it, acts in enumerate(self.program):
            lines.append(f"  iteration {it}: " + ", ".join(
                n + str({k: v for k, v in a.items() if k != "x"}) for n, a in acts))
        return "\n".join(lines)

    # running it

    def _model(self, m):
        mods = []
        for kind, d_in, d_out in self.layers:
            if kind == "Linear":
                mods.append(m.nn.Linear(d_in, d_out))
            elif kind == "ReLU":
                mods.append(m.nn.ReLU())
            else:  # (its input in float32: see KNOWN)
                mods.append(m.nn.Sequential(_to_float(m), m.nn.LayerNorm(d_in)))
        model = m.nn.Sequential(*mods)
        params = []
        with m.no_grad():
            for (i, name), a in self.init.items():
                p = getattr(model[i] if self.layers[i][0] == "Linear" else model[i][1], name)
                p.copy_(m.tensor(a))
                params.append(p)
        if self.half_param:
            params.append(m.nn.Parameter(m.tensor(np.float32([0.5, -1.0])).half()))
        return model, params

    def run(self, m, nudge=False):
        """A list of (call, exception type name or None, observations) after every call;
        `nudge`: each initial parameter moved by one ulp, up or down at random."""
        model, params = self._model(m)
        if nudge:
            rng = np.random.default_rng(0)
            with m.no_grad():
                for p in params:
                    a = p.detach().float().numpy()
                    up = rng.random(a.shape) < 0.5
                    a = np.nextafter(a, np.where(up, np.inf, -np.inf).astype(np.float32))
                    p.copy_(m.tensor(a).to(p.dtype))
        opts = []
        for name, kw, first, second, factor in self.optims:
            groups = [{"params": [params[i] for i in first]}]
            if second:
                groups.append({"params": [params[i] for i in second], "lr": kw["lr"] * factor})
            opts.append(getattr(m.optim, name)(groups, **kw))
        out = []
        try:
            scaler = _make_scaler(m, *self.scaler)
        except Exception as e:
            return [("GradScaler()", type(e).__name__, {})]
        env = {"m": m, "model": model, "params": params, "opts": opts, "scaler": scaler}
        for it, acts in enumerate(self.program):
            for name, a in acts:
                try:
                    getattr(self, "_" + name)(env, **a)
                    error = None
                except Exception as e:  # noqa: BLE001 - each side's exception is compared
                    error = f"{type(e).__name__}: {str(e)[:120]}"
                out.append((f"iteration {it} {name}", error, _observe(env)))
        return out

    def _zero_grad(self, env, set_to_none):
        for opt in env["opts"]:
            opt.zero_grad(set_to_none=set_to_none)
        if self.half_param:
            env["params"][-1].grad = None

    def _forward(self, env, x, dtype, spelling, enabled, pack, loss_inside):
        m, model, scaler = env["m"], env["model"], env["scaler"]
        xt = m.tensor(x)
        if dtype is None:
            region = _Nothing()
        elif spelling == "autocast":
            region = m.autocast("cpu", dtype=getattr(m, dtype), enabled=enabled)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                region = m.cpu.amp.autocast(dtype=getattr(m, dtype), enabled=enabled)
        with region:
            y = model(xt)
            if loss_inside:
                losses = [(y.float() ** 2).mean(), y.sum() * 0.5]
        if not loss_inside:
            losses = [(y.float() ** 2).mean(), y.float().sum() * 0.5]
        if self.half_param:
            losses[0] = losses[0] + (env["params"][-1].float() * 3.0).sum()
        if pack == "one":
            scaler.scale(losses[0]).backward()
        elif pack == "unscaled":
            losses[0].backward()
        elif pack == "gen":
            m.autograd.backward(list(scaler.scale(t for t in losses)))
        else:
            scaled = scaler.scale(list(losses) if pack == "list" else tuple(losses))
            if type(scaled).__name__ != pack:
                raise AssertionError(f"scale() of a {pack} gave a {type(scaled).__name__}")
            m.autograd.backward(list(scaled))

    def _inject(self, env, param, value, pos):
        p = env["params"][param]
        if p.grad is not None and p.grad.numel():
            with env["m"].no_grad():
                p.grad.view(-1)[int(pos * p.grad.numel())] = float(value)

    def _unscale(self, env, opt):
        env["scaler"].unscale_(env["opts"][opt])

    def _clip(self, env, opt, max_norm):
        params = [p for g in env["opts"][opt].param_groups for p in g["params"]]
        env["m"].nn.utils.clip_grad_norm_(params, max_norm)

    def _step(self, env, opt):
        env["scaler"].step(env["opts"][opt])

    def _update(self, env, new=None):
        env["scaler"].update(new)

    def _update_tensor(self, env, value, shape, dtype, grad):
        m = env["m"]
        t = m.full(shape, value, dtype=getattr(m, dtype))
        if grad:
            t.requires_grad_(True)
        env["scaler"].update(t)

    def _setter(self, env, which, value):
        scaler = env["scaler"]
        getattr(scaler, "set_" + which)(value)
        if getattr(scaler, "get_" + which)() != value:
            raise AssertionError(f"get_{which} after set_{which}")

    def _reload(self, env, fresh_spelling):
        saved = env["scaler"].state_dict()
        spelling, kw = self.scaler
        fresh = _make_scaler(env["m"], "amp" if fresh_spelling else spelling,
                             {k: v for k, v in kw.items() if k == "enabled"})
        fresh.load_state_dict(saved)
        env["scaler"] = fresh

    def _pickle(self, env):
        env["scaler"] = pickle.loads(pickle.dumps(env["scaler"]))


def _to_float(m):
    class ToFloat(m.nn.Module):
        def forward(self, x):
            return x.float()
    return ToFloat()


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _array(t):
    return None if t is None else t.detach().float().numpy().copy()


def _observe(env):
    """What a call leaves behind: parameters, gradients, the scaler's numbers, the found_inf
    each optimizer recorded (a fresh optimizer records nothing) and the optimizer states."""
    scaler = env["scaler"]
    obs = {"params": [_array(p) for p in env["params"]],
           "grads": [_array(p.grad) for p in env["params"]],
           "enabled": scaler.is_enabled(), "scale": scaler.get_scale(),
           "tracker": scaler._get_growth_tracker(), "state_dict": scaler.state_dict(),
           "opt_state": [optim_fuzz._state(o) for o in env["opts"]]}
    if scaler.is_enabled():  # each optimizer's stage and how many inf checks it recorded,
        found = []  # and whether any found one (torch's update adds the others' found_inf
        for o in env["opts"]:  # into the first's, so not each one's value)
            st = scaler._per_optimizer_states.get(id(o))
            found.append(None if st is None else
                         (st["stage"].name, len(st["found_inf_per_device"])))
        obs["found_inf"] = found
        obs["any_inf"] = any(bool(v.item()) for st in scaler._per_optimizer_states.values()
                             for v in st["found_inf_per_device"].values())
    return obs


def _differ(what, got, want, tol):
    """The first difference of `got` from torch's `want` (nested lists / dicts of arrays and
    numbers) as a message, or None. An array holding an inf or NaN in torch (an overflowed
    backward, or a step of a disabled scaler that took it) only needs one too: its finite
    rest is a residue that float32 rounding can move by any amount (a layer norm's sums of
    1e37-sized terms cancel to 1e31), and which entries are inf, which NaN and which 0 is up
    to the order of operations (OpenBLAS's sgemm sums an overflowing inf and -inf to inf,
    torch's to NaN; a ReLU then keeps one and zeroes the other)."""
    if isinstance(want, dict):
        if sorted(got) != sorted(want):
            return f"{what}: keys {sorted(got)}, torch {sorted(want)}"
        for k in want:
            msg = _differ(f"{what}[{k!r}]", got[k], want[k], tol)
            if msg:
                return msg
        return None
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return f"{what}: flowgrad {got!r}, torch {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            msg = _differ(f"{what}[{i}]", g, w, tol)
            if msg:
                return msg
        return None
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        if got is None or want is None:
            return f"{what}: flowgrad {got!r}, torch {want!r}"
        if not np.isfinite(want).all():  # (see above)
            if np.isfinite(got).all():
                return f"{what}: flowgrad finite {got!r}, torch {want!r}"
            return None
        return fuzz_common.first_difference([(what, got, want)], tol, dtypes=False)
    if isinstance(want, float) and isinstance(got, float) and np.isnan(want) and np.isnan(got):
        return None
    if got != want or type(got) is not type(want):  # (get_scale(): the int init_scale)
        return f"{what}: flowgrad {got!r}, torch {want!r}"
    return None


def _near_overflow(grads):
    """Whether a gradient of torch's is within 2**5 of float32's largest value: from there on
    which one overflows, and so which step is skipped, depends on the order of operations
    (a layer norm's backward, 2.6e38 in torch, overflows in flowgrad's)."""
    return any(g is not None and np.abs(g[np.isfinite(g)]).max(initial=0) > 2.0 ** 123
               for g in grads or ())


def _spread(want, nudged, key, index):
    """How far torch's own `key` at call `index` moves when its initial parameters move by an
    ulp: the conditioning of the program there, relative to the arrays' scale."""
    pairs = zip(_arrays(want[index][2].get(key)), _arrays(nudged[index][2].get(key)))
    return max((float(np.abs(a - b).max(initial=0.0)) / max(1.0, float(np.abs(a).max(
        initial=0.0))) for a, b in pairs if a.shape == b.shape and np.isfinite(a).all() and
        np.isfinite(b).all()), default=0.0)


def _arrays(value):
    """The arrays in a nested observation, in order."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, dict):
        return [a for k in value for a in _arrays(value[k])]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays(v)]
    return []


def check(seed):
    """None when flowgrad's program follows torch's call by call, else a message. A float32
    program may amplify rounding (a 4-layer net whose outputs cancel: a one-ulp change of the
    parameters moves a gradient by 2e-5): where flowgrad's parameters, gradients or optimizer
    state differ past the tolerance, they may still differ by as much as 4 times torch's own
    move under a one-ulp nudge of its initial parameters."""
    prog = Program(seed)
    want, got = prog.run(torch), prog.run(flow)
    tol = TOL[prog.autocast]
    nudged = None
    for index, ((call, ew, ow), (_, eg, og)) in enumerate(zip(want, got)):
        if (ew is None) != (eg is None) or ew and eg.split(":")[0] != ew.split(":")[0]:
            return f"{call}: flowgrad raised {eg}, torch raised {ew}"
        if _near_overflow(ow.get("grads")):
            return None  # (the rest: which values overflow is up to the order of operations)
        for key in ("enabled", "scale", "tracker", "state_dict", "found_inf", "any_inf"):
            msg = _differ(f"{call}: {key}", og.get(key), ow.get(key), 0)
            if msg:
                return msg
        for key in ("params", "grads", "opt_state"):
            msg = _differ(f"{call}: {key}", og.get(key), ow.get(key), tol)
            if msg and prog.autocast is None:
                nudged = nudged or prog.run(torch, nudge=True)
                spread = _spread(want, nudged, key, index)
                msg = _differ(f"{call}: {key} (torch's own spread {spread:.2g})", og.get(key),
                              ow.get(key), max(tol, 4 * spread))
            if msg:
                return msg
    if len(want) != len(got):
        return f"{len(got)} calls ran, torch {len(want)}"
    return None


def main():
    fuzz_common.main(__doc__, lambda seed: Program(seed).describe(), check, seeds="0:300")


if __name__ == "__main__":
    main()
