"""Every op of tests/special_values_vs_torch.py and ~90 more (reductions, norms, pads, pools,
interpolate, linalg, ...) run under CPU autocast (bfloat16) from float32, bfloat16 and mixed
inputs, in torch and in flowgrad: the output dtype (or the refusal) must be torch's, which is
where a policy table or a composite that autocast reaches inside differs.

    .venv/bin/python tests/autocast_sweep.py          # the differences, listed
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import special_values_vs_torch as sv
import torch

import flowgrad as flow

rng = np.random.default_rng(0)
A, B = rng.uniform(0.2, 0.8, (3, 4)), rng.uniform(0.2, 0.8, (3, 4))


def F(m):
    return m.nn.functional


EXTRA = {  # name -> fn(m, x, y) of two (3, 4) inputs in (0.2, 0.8)
    "sum": lambda m, x, y: x.sum(),
    "mean": lambda m, x, y: x.mean(1),
    "var": lambda m, x, y: x.var(),
    "std": lambda m, x, y: x.std(0),
    "norm": lambda m, x, y: x.norm(),
    "logsumexp": lambda m, x, y: x.logsumexp(1),
    "softmax": lambda m, x, y: x.softmax(1),
    "log_softmax": lambda m, x, y: x.log_softmax(1),
    "cumsum": lambda m, x, y: x.cumsum(1),
    "cumprod": lambda m, x, y: x.cumprod(1),
    "amax": lambda m, x, y: x.amax(1),
    "max": lambda m, x, y: x.max(),
    "sort": lambda m, x, y: x.sort(1)[0],
    "topk": lambda m, x, y: x.topk(2)[0],
    "median": lambda m, x, y: x.median(),
    "quantile": lambda m, x, y: x.quantile(0.3),
    "layer_norm": lambda m, x, y: F(m).layer_norm(x, (4,)),
    "group_norm": lambda m, x, y: F(m).group_norm(x[None], 1),
    "batch_norm": lambda m, x, y: F(m).batch_norm(x, None, None, training=True),
    "dropout_eval": lambda m, x, y: F(m).dropout(x, 0.5, False),
    "cosine_similarity": lambda m, x, y: F(m).cosine_similarity(x, y),
    "pairwise_distance": lambda m, x, y: F(m).pairwise_distance(x, y),
    "normalize": lambda m, x, y: F(m).normalize(x),
    "pad_reflect": lambda m, x, y: F(m).pad(x[None], (1, 1), mode="reflect"),
    "pad_replicate": lambda m, x, y: F(m).pad(x[None], (1, 1), mode="replicate"),
    "pad_const": lambda m, x, y: F(m).pad(x, (1, 1)),
    "interpolate": lambda m, x, y: F(m).interpolate(x[None], scale_factor=2.0, mode="linear"),
    "avg_pool1d": lambda m, x, y: F(m).avg_pool1d(x[None], 2),
    "max_pool1d": lambda m, x, y: F(m).max_pool1d(x[None], 2),
    "adaptive_avg_pool1d": lambda m, x, y: F(m).adaptive_avg_pool1d(x[None], 2),
    "max_pool2d": lambda m, x, y: F(m).max_pool2d(x[None, None], 2),
    "avg_pool2d": lambda m, x, y: F(m).avg_pool2d(x[None, None], 2),
    "adaptive_max_pool2d": lambda m, x, y: F(m).adaptive_max_pool2d(x[None, None], 1),
    "embedding": lambda m, x, y: F(m).embedding(m.tensor([0, 2]), x),
    "gelu": lambda m, x, y: F(m).gelu(x),
    "silu": lambda m, x, y: F(m).silu(x),
    "outer": lambda m, x, y: m.outer(x[0], y[0]),
    "addcmul": lambda m, x, y: m.addcmul(x, x, y),
    "addcdiv": lambda m, x, y: m.addcdiv(x, x, y),
    "lerp": lambda m, x, y: m.lerp(x, y, 0.3),
    "where": lambda m, x, y: m.where(x > 0.5, x, y),
    "clamp": lambda m, x, y: x.clamp(0.3, 0.6),
    "cross": lambda m, x, y: m.linalg.cross(x[:, :3], y[:, :3]),
    "diff": lambda m, x, y: m.diff(x),
    "tril": lambda m, x, y: x.tril(),
    "flip": lambda m, x, y: x.flip(0),
    "roll": lambda m, x, y: x.roll(1),
    "kron": lambda m, x, y: m.kron(x, y),
    "tensordot": lambda m, x, y: m.tensordot(x, y.T, 1),
    "inner": lambda m, x, y: m.inner(x, y),
    "vdot": lambda m, x, y: m.vdot(x[0], y[0]),
    "dist": lambda m, x, y: m.dist(x, y),
    "cdist": lambda m, x, y: m.cdist(x, y),
    "cov": lambda m, x, y: m.cov(x),
    "corrcoef": lambda m, x, y: m.corrcoef(x),
    "logcumsumexp": lambda m, x, y: x.logcumsumexp(1),
    "renorm": lambda m, x, y: x.renorm(2, 0, 1.0),
    "polar": lambda m, x, y: m.polar(x, y).abs(),
    "trapezoid": lambda m, x, y: m.trapezoid(x),
    "histc": lambda m, x, y: m.histc(x, 4),
    "bucketize": lambda m, x, y: m.bucketize(x, m.tensor([0.3, 0.6])),
    "unfold": lambda m, x, y: F(m).unfold(x[None, None], 2),
    "pixel_shuffle": lambda m, x, y: F(m).pixel_shuffle(x.reshape(1, 4, 3, 1), 2),
    "softplus": lambda m, x, y: F(m).softplus(x),
    "mish": lambda m, x, y: F(m).mish(x),
    "glu": lambda m, x, y: F(m).glu(x),
    "hardtanh": lambda m, x, y: F(m).hardtanh(x),
    "rms_norm": lambda m, x, y: F(m).rms_norm(x, (4,)),
    "local_response_norm": lambda m, x, y: F(m).local_response_norm(x[None], 2),
    "grid_sample":
        lambda m, x, y: F(m).grid_sample(x[None, None],
                                         (y[None, :, :2, None] * 2 - 1).expand(1, 3, 2, 2)),
    "cumulative_trapezoid": lambda m, x, y: m.cumulative_trapezoid(x),
    "matrix_exp": lambda m, x, y: m.linalg.matrix_exp(x[:, :3]),
    "det": lambda m, x, y: m.linalg.det(x[:, :3]),
    "slogdet": lambda m, x, y: m.linalg.slogdet(x[:, :3])[1],
    "matrix_norm": lambda m, x, y: m.linalg.matrix_norm(x),
    "vector_norm": lambda m, x, y: m.linalg.vector_norm(x),
    "pinv": lambda m, x, y: m.linalg.pinv(x),
    "lstsq": lambda m, x, y: m.linalg.lstsq(x[:, :3], y[:, :1]).solution,
    "eigvals_abs": lambda m, x, y: m.linalg.eigvals(x[:, :3]).abs(),
    "qr": lambda m, x, y: m.linalg.qr(x)[1],
    "svdvals": lambda m, x, y: m.linalg.svdvals(x),
    "solve_triangular":
        lambda m, x, y: m.linalg.solve_triangular(x[:, :3].triu() + m.eye(3), y[:, :1], upper=True),
    "matrix_rank": lambda m, x, y: m.linalg.matrix_rank(x),
    "cholesky_solve": lambda m, x, y: m.cholesky_solve(y[:, :1], m.eye(3)),
}


def _ops():
    for n in sv.UNARY:
        yield n, (lambda n: lambda m, x, y: sv._unary_fn(m, n)(x))(n)
    for n in sv.BINARY:
        yield n, (lambda n: lambda m, x, y: sv._binary_fn(m, n)(x, y))(n)
    for n, f in EXTRA.items():
        yield n, f
def _dtype(m, fn, in_dt):
    x, y = m.tensor(A, dtype=m.float32), m.tensor(B, dtype=m.float32)
    if in_dt == "bfloat16":
        x, y = x.to(m.bfloat16), y.to(m.bfloat16)
    elif in_dt == "mixed":
        x = x.to(m.bfloat16)
    region = torch.autocast("cpu", dtype=torch.bfloat16) if m is torch else \
        flow.autocast("cpu", dtype=flow.bfloat16)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with region:
                out = fn(m, x, y)
        return str(out.dtype).split(".")[-1]
    except Exception:
        return "raise"


def differences():
    """{(op, input dtypes): (torch's result dtype, flowgrad's)} where they differ."""
    found = {}
    for name, fn in _ops():
        for in_dt in ("float32", "bfloat16", "mixed"):
            want, got = _dtype(torch, fn, in_dt), _dtype(flow, fn, in_dt)
            if want != got:
                found[(name, in_dt)] = (want, got)
    return found


if __name__ == "__main__":
    diffs = differences()
    for key, value in diffs.items():
        print(key, "torch", value[0], "flowgrad", value[1])
    print(len(diffs), "differ")
    sys.exit(1 if diffs else 0)
