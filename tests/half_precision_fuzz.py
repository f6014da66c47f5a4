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
is left out (no complex32 in flowgrad).

    .venv/bin/python tests/half_precision_fuzz.py --dtype bfloat16 --seeds 0:300
    .venv/bin/python tests/half_precision_fuzz.py --dtype float16 --show 17
"""
from __future__ import annotations

import argparse
import sys

import fuzz_common
import precision_fuzz as pf

ULPS = 2.0  # half-precision ulps of the array's scale (FACTOR: precision_fuzz's)
HALVES = ("float16", "bfloat16")
LEFT_OUT = {"var_complex"}  # (no complex32)
F16_TOP = 3e4  # an input's |c| + 5 s (float16) is scaled down to this where it is above


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
    """precision_fuzz's case of `seed` in `dtype` (a left-out op: the next seed's op)."""
    case = pf.generate(seed, dtype)
    k = 1
    while case.name in LEFT_OUT:
        other = pf.generate(seed + 1_000_000 * k, dtype)
        case, k = pf.Case(seed, other.name, other.inputs, other.opts, dtype), k + 1
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
