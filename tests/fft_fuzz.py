"""Differential fuzzing of torch.fft against torch: fft/ifft/rfft/irfft/hfft/ihfft and their
2-d and n-d forms, with n/s (padding and truncation), dim (negative, tuples, repeated
order), every norm ("backward", "ortho", "forward"), real and complex inputs, plus fftshift/
ifftshift and fftfreq/rfftfreq. Values and gradients (complex outputs through their real and
imaginary parts) in float64/complex128.

    .venv/bin/python tests/fft_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/fft_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random

import fuzz_common
import numpy as np

RTOL = 1e-10


def generate(seed):
    r = random.Random(seed)
    nd = r.randint(1, 3)
    shape = tuple(r.randint(1, 5) for _ in range(nd))
    name = r.choice(["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2",
                     "irfft2", "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift"])
    complex_in = name in ("ifft", "irfft", "hfft", "ifft2", "irfft2", "ifftn", "irfftn") or \
        (name in ("fft", "fft2", "fftn") and r.random() < 0.5)
    if name.startswith("ihfft") or name.startswith("rfft"):
        complex_in = False
    kw = {}
    if name in ("fftshift", "ifftshift"):
        if r.random() < 0.5:
            kw["dim"] = r.randrange(nd) if r.random() < 0.5 else tuple(range(nd))[-r.randint(
                1, nd):]
        return dict(name=name, shape=shape, complex=complex_in, kwargs=kw, seed=seed)
    kw["norm"] = r.choice([None, "backward", "ortho", "forward"])
    if name[-1] in "2n":
        k = 2 if name.endswith("2") else r.randint(1, nd)
        if nd < k:
            shape = shape + tuple(r.randint(1, 4) for _ in range(k - nd))
            nd = len(shape)
        dims = r.sample(range(nd), k) if name.endswith("n") else [nd - 2, nd - 1]
        if r.random() < 0.4 or name.endswith("2"):
            kw["dim"] = tuple(d - nd if r.random() < 0.3 else d for d in dims)
        if r.random() < 0.4:
            kw["s"] = tuple(r.randint(1, 6) for _ in range(k))
            if "dim" not in kw and name.endswith("n"):
                kw["dim"] = tuple(dims)
    else:
        if r.random() < 0.5:
            kw["dim"] = r.randrange(nd) - (nd if r.random() < 0.3 else 0)
        if r.random() < 0.4:
            kw["n"] = r.randint(1, 7)
    return dict(name=name, shape=shape, complex=complex_in, kwargs=kw, seed=seed)


def _run(m, case):
    rng = np.random.default_rng(case["seed"])
    a = rng.standard_normal(case["shape"])
    if case["complex"]:
        a = a + 1j * rng.standard_normal(case["shape"])
    x = m.tensor(a, requires_grad=True)
    out = getattr(m.fft, case["name"])(x, **case["kwargs"])
    o = out.detach().resolve_conj().numpy()  # (torch's hfft/ihfft: a conjugate view)
    up = rng.standard_normal(o.shape)
    if np.iscomplexobj(o):
        up2 = rng.standard_normal(o.shape)
        parts = m.view_as_real(out.resolve_conj())
        loss = (parts[..., 0] * m.tensor(up)).sum() + (parts[..., 1] * m.tensor(up2)).sum()
    else:
        loss = (out * m.tensor(up)).sum()
    (g,) = m.autograd.grad(loss, x)
    return o, g.detach().resolve_conj().numpy()


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    want, got = both
    return fuzz_common.first_difference(list(zip(("value", "gradient"), got, want)), RTOL)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
