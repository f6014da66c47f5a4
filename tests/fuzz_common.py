"""What the differential fuzz scripts share: running a case in torch and in flowgrad, the
raise/no-raise verdict, the comparison of their arrays, and the command line.

>>> first_difference([("value", np.ones(2), np.ones(2))], rtol=1e-9) is None
True
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import flowgrad as flow

# what torch raises for a case it refuses (anything else is the harness's own error)
TORCH_REFUSALS = (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError)


def run_both(run, case):
    """(torch's result, flowgrad's result) of `run(module, case)`, or the verdict when one of
    them raises: None when both do, else a message naming which."""
    try:
        want = run(torch, case)
        torch_error = None
    except TORCH_REFUSALS as e:
        torch_error = e
    try:
        got = run(flow, case)
    except Exception as e:
        if torch_error is not None:
            return None
        return f"flowgrad raised {type(e).__name__}: {e}"
    if torch_error is not None:
        return f"torch raised {type(torch_error).__name__}: {torch_error}; flowgrad ran"
    return want, got


def value_and_gradients(m, out, leaves, seed):
    """[out, d(sum(out * u))/d leaf for each leaf] as arrays (None where no gradient flows),
    u an upstream gradient drawn from `seed`: the same in both frameworks."""
    up = m.tensor(np.random.default_rng(seed + 1).standard_normal(tuple(out.shape)))
    grads = m.autograd.grad((out * up).sum(), leaves, allow_unused=True)
    return [out.detach().numpy()] + [None if g is None else g.numpy() for g in grads]


def check_value_and_gradients(run, case, rtol, dtypes=True):
    """The verdict of a case whose `run(module, case)` returns [value, gradient 0, ...]: None
    when flowgrad agrees with torch (raise/no-raise, then every array), else a message."""
    both = run_both(run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    names = ["value"] + [f"gradient {i}" for i in range(len(got) - 1)]
    return first_difference(list(zip(names, got, want)), rtol, dtypes)


def first_difference(pairs, rtol, dtypes=True):
    """The first of `pairs` ((what, flowgrad array or None, torch array or None)) that
    differs, as a message; None when all agree: None against zeros (no gradient is a zero
    gradient), the same shape (and dtype), integers exactly, nan and infinities where torch
    has them, and the rest to `rtol` of the array's scale (a sum taken in another order moves
    each element by ulps of its terms, not of the sum)."""
    for what, a, b in pairs:
        if a is None or b is None:
            other = b if a is None else a
            if other is not None and np.any(np.nan_to_num(other) != 0):
                return f"{what}: flowgrad {a is not None}, torch {b is not None}"
            continue
        if a.shape != b.shape or dtypes and a.dtype != b.dtype:
            return f"{what}: flowgrad {a.dtype}{a.shape}, torch {b.dtype}{b.shape}"
        if b.dtype.kind in "biu":
            if not np.array_equal(a, b):
                return f"{what} differs: flowgrad {a!r}, torch {b!r}"
            continue
        if not _same_specials(a, b):
            return f"{what}: nan/inf differ: flowgrad {a!r}, torch {b!r}"
        fa = np.nan_to_num(a, posinf=0.0, neginf=0.0)  # (complex: each part)
        fb = np.nan_to_num(b, posinf=0.0, neginf=0.0)
        scale = max(1.0, float(np.abs(fb).max(initial=0.0)))
        err = float(np.abs(fa - fb).max(initial=0.0))
        if err > rtol * scale:
            return f"{what} differs by {err:.3g} (scale {scale:.3g}): flowgrad {a!r}, torch {b!r}"
    return None


def _same_specials(a, b):
    """nan and infinities (with their signs; complex: in each part) where torch has them."""
    if b.dtype.kind == "c":
        return _same_specials(a.real, b.real) and _same_specials(a.imag, b.imag)
    return np.array_equal(np.isnan(a), np.isnan(b)) and \
        np.array_equal(np.isposinf(a), np.isposinf(b)) and \
        np.array_equal(np.isneginf(a), np.isneginf(b))


def assert_seeds_agree(check, seeds, known=()):
    """Fail, listing each one, if `check` finds a difference on any seed outside `known`."""
    bad = {s: v for s in seeds if s not in known and (v := check(s))}
    assert not bad, "\n".join(f"seed {s}: {v[:200]}" for s, v in bad.items())


def main(doc, generate, check, seeds="0:500"):
    """The scripts' command line: `--seeds A:B` prints the cases that differ and a summary
    (exit 1 if any), `--show N` one case and its verdict."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seeds", default=seeds)
    ap.add_argument("--show", type=int)
    args = ap.parse_args()
    if args.show is not None:
        print(generate(args.show))
        print("verdict:", check(args.show) or "same")
        return
    lo, hi = (int(s) for s in args.seeds.split(":"))
    bad = []
    for seed in range(lo, hi):
        try:
            msg = check(seed)
        except Exception as e:
            msg = f"harness error {type(e).__name__}: {e}"
        if msg:
            bad.append(seed)
            print(f"seed {seed}: {generate(seed)}: {msg}"[:450])
    print(f"{len(bad)} of {hi - lo} differ: {bad}")
    sys.exit(1 if bad else 0)


def report_main(doc, source, check, argv=None):
    """The command line of a fuzzer whose `check(seed)` report holds the case itself (the
    program fuzzers over program_fuzz's programs): `--seeds A:B` prints the first 20 reports
    and a summary (exit status 1 if any differ), `--show N` one report, or `source(N)` when
    the case runs alike."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--seeds", default="0:500", help="A:B, a half-open range")
    ap.add_argument("--show", type=int, help="print one seed's case and verdict")
    args = ap.parse_args(argv)
    if args.show is not None:
        print(check(args.show) or source(args.show) + "\n# same in both")
        return 0
    lo, hi = map(int, args.seeds.split(":"))
    differ = []
    for seed in range(lo, hi):
        report = check(seed)
        if report is not None:
            differ.append(seed)
            if len(differ) <= 20:
                print(f"seed {seed}: {report}\n")
    print(f"{len(differ)} of {hi - lo} differ: {differ}")
    return 1 if differ else 0
