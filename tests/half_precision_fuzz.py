"""Differential fuzzing of float16 and bfloat16 ACCURACY against torch's.

precision_fuzz.py's cases (its ops, inputs and measure) run in half precision: flowgrad's
float16 (bfloat16) value and gradients and torch's float16 (bfloat16) ones are measured against
torch's float64 on the same half-rounded inputs and upstream gradient. torch's CPU kernels
compute a half-precision elementwise op in float32 and round once, and accumulate reductions,
products, scans, softmaxes, norms and normalisations in float32; a flowgrad composite that
rounds to half between its steps (softplus as log1p(exp(x)): exp overflows float16 at x = 11)
or accumulates in half is what this finds.

Tolerance: flowgrad's error may be FACTOR (8) times torch's plus ULPS (2) ulps of the half
dtype at the array's scale. An ulp of float16 is 2^-10 of the scale, of bfloat16 2^-7: one
rounding of the largest element is half an ulp, so 2 ulps let a composite round three or four
times where torch rounds once (a few roundings are not a finding in half precision; a formula
that cancels or overflows is off by many ulps, or wholly).

float16's range is 6e-8..65504: an input drawn beyond it (precision_fuzz's magnitudes reach
1e30, its offsets 1e7) is scaled into it (c and s alike, so the offset / spread ratio that
provokes cancellation stays); bfloat16 has float32's range and is drawn as is. Complex var
is left out (no complex32 in flowgrad). Beside precision_fuzz's ops it draws MORE_OPS, the
elementwise composites torch computes in float32 at once (lerp, addcmul, addcdiv, hardswish,
hardsigmoid, softsign, tanhshrink, logit, rsqrt, xlogy, pow), prod/cumprod and
local_response_norm.

    .venv/bin/python tests/half_precision_fuzz.py --dtype bfloat16 --seeds 0:300
    .venv/bin/python tests/half_precision_fuzz.py --dtype float16 --show 17
"""
from __future__ import annotations

import argparse
import random
import sys

import fuzz_common
import precision_fuzz as pf

ULPS = 2.0  # half-precision ulps of the array's scale (FACTOR: precision_fuzz's)
HALVES = ("float16", "bfloat16")
LEFT_OUT = {"var_complex"}  # (no complex32)
F16_TOP = 3e4  # an input's |c| + 5 s (float16) is scaled down to this where it is above


def more(name, gen):
    def register(fn):
        pf.MORE_OPS[name] = (gen, fn)
        return fn
    return register


def g_unary(r):
    (x,), o = pf.g_unary(r)
    return [x], dict(o, w=r.choice([0.5, 0.3, 2.0, -1.5, 1e-3, 10.0]))


def g_ternary(r):
    (x, y), o = pf.g_binary(r)
    return [x, y, dict(y, p=dict(y["p"]))], dict(o, w=r.choice([0.5, 0.3, 2.0, -1.5, 1e-3]))


F = pf.F
UNARY = {
    "hardswish": lambda m, x, o: F(m).hardswish(x),
    "hardsigmoid": lambda m, x, o: F(m).hardsigmoid(x),
    "softsign": lambda m, x, o: F(m).softsign(x),
    "tanhshrink": lambda m, x, o: F(m).tanhshrink(x),
    "logit": lambda m, x, o: m.logit(m.sigmoid(x), eps=abs(o["w"]) % 0.5),
    "rsqrt": lambda m, x, o: m.rsqrt(x.abs()),
    "pow_scalar": lambda m, x, o: m.pow(x.abs(), o["w"] * 3),
}
for _name, _f in UNARY.items():
    more(_name, g_unary)(lambda m, xs, o, _f=_f: _f(m, xs[0], o))
TERNARY = {
    "lerp": lambda m, x, y, z, o: m.lerp(x, y, o["w"]),
    "lerp_tensor": lambda m, x, y, z, o: m.lerp(x, y, m.sigmoid(z)),
    "addcmul": lambda m, x, y, z, o: m.addcmul(x, y, z, value=o["w"]),
    "addcdiv": lambda m, x, y, z, o: m.addcdiv(x, y, z.abs() + 0.5, value=o["w"]),
    "xlogy": lambda m, x, y, z, o: m.xlogy(x, y.abs()),
    "pow": lambda m, x, y, z, o: m.pow(x.abs(), y.clamp(-4, 4)),
}
for _name, _f in TERNARY.items():
    more(_name, g_ternary)(lambda m, xs, o, _f=_f: _f(m, *xs, o))


def g_products(r):
    shape = pf._rows(r, r.choice([1, 2]))
    kind, p = r.choice([("offset", dict(c=r.choice([-1.0, 1.0]), s=10.0 ** r.uniform(-4, 0))),
                        ("positive", dict(s=10.0 ** r.uniform(-3, 0))), pf._kind(r)])
    return [pf._inp(shape, kind, **p)], dict(dim=pf._dim(r, len(shape)))


@more("prod", g_products)
def _(m, xs, o):
    return m.prod(xs[0], o["dim"])


@more("cumprod", g_products)
def _(m, xs, o):
    return m.cumprod(xs[0], o["dim"])


def g_lrn(r):
    (x, _, _), o = pf.g_norm(r)
    return [x], dict(size=r.choice([1, 2, 3, 5]), k=r.choice([1.0, 2.0, 1e-3]))


@more("local_response_norm", g_lrn)
def _(m, xs, o):
    x = xs[0] if xs[0].dim() >= 3 else xs[0].unsqueeze(-1)
    return F(m).local_response_norm(x, o["size"], k=o["k"])


def _into_float16(spec):
    """The input spec with its magnitudes scaled into float16's range."""
    p = dict(spec["p"])
    if spec["kind"] == "wide":
        p["lo"], p["hi"] = max(p["lo"], -7.0), min(p["hi"], 4.3)
        p["lo"] = min(p["lo"], p["hi"])
    elif spec["kind"] in ("offset", "near", "logits") and "s" in p:
        top = abs(p.get("c", 0.0)) + 5 * p["s"]
        if top > F16_TOP:
            p = {k: v * F16_TOP / top if k in ("c", "s") else v for k, v in p.items()}
    elif spec["kind"] == "positive" and p.get("c", 1.0) > 1e3:
        p["c"] = 1e3
    return dict(spec, p=p)


def generate(seed, dtype):
    """A case of precision_fuzz's ops or MORE_OPS, in `dtype`."""
    r = random.Random(seed)
    name = r.choice(sorted(pf.OPS.keys() - LEFT_OUT) + sorted(pf.MORE_OPS))
    inputs, opts = (pf.OPS.get(name) or pf.MORE_OPS[name])[0](r)
    case = pf.Case(seed, name, inputs, opts, dtype)
    if dtype == "float16":
        case.inputs = [_into_float16(s) for s in case.inputs]
    return case


def check(seed, dtype):
    return pf.check(seed, generate(seed, dtype), ULPS)


def show(seed, dtype):
    return pf.show(seed, generate(seed, dtype))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--dtype", choices=HALVES, default="bfloat16")
    args, sys.argv[1:] = ap.parse_known_args()
    fuzz_common.main(__doc__, lambda s: show(s, args.dtype), lambda s: check(s, args.dtype),
                     seeds="0:300")
