"""Differential fuzzing of the spatial ops over their whole argument space, against torch.

Convolutions and transposed convolutions (1-3 d: stride, padding ints/tuples/'same'/'valid',
dilation, groups, output_padding, bias, the modules' padding modes), max/avg/adaptive/LP
pooling (ceil_mode, count_include_pad, divisor_override, return_indices, dilation),
interpolate (every mode, align_corners, size or scale_factor, recompute_scale_factor,
antialias), pad (every mode, negative pads), unfold/fold, pixel_(un)shuffle and grid_sample
are drawn with shapes that cross the kernels' layout and fast-path thresholds (channels per
group around 16, tiling pools, one-channel inputs, empty batches). Each case runs in float64
(a quarter in float32) in both frameworks and must give the same raise/no-raise (the
exception type may differ), the same output shape and values, and the same gradients of
input and weight for a random upstream gradient.

    .venv/bin/python tests/spatial_fuzz.py --seeds 0:2000     # summary
    .venv/bin/python tests/spatial_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL, RTOL32 = 1e-9, 2e-5  # of the array's scale: float64, float32 cases


def _sizes(r, nd, lo=1, hi=9):
    return tuple(r.randint(lo, hi) for _ in range(nd))


def _int_or_tuple(r, nd, lo, hi):
    return r.randint(lo, hi) if r.random() < 0.5 else tuple(r.randint(lo, hi) for _ in range(nd))


def _conv(r):
    nd = r.choice([1, 2, 2, 3])
    groups = r.choice([1, 1, 2, 3])
    cg = r.choice([1, 2, 3, 8, 15, 16, 17])
    og = r.choice([1, 2, 4, 7])
    n = r.choice([0, 1, 2, 3])
    transposed = r.random() < 0.35
    k = _int_or_tuple(r, nd, 1, 4)
    stride = _int_or_tuple(r, nd, 1, 3)
    dilation = _int_or_tuple(r, nd, 1, 2)
    kw = dict(stride=stride, dilation=dilation, groups=groups, bias=r.random() < 0.6)
    if transposed:
        kw["padding"] = _int_or_tuple(r, nd, 0, 2)
        kw["output_padding"] = r.choice([0, 0, 1])
        cls = f"ConvTranspose{nd}d"
        cin, cout = cg * groups, og * groups
    else:
        kw["padding"] = r.choice([_int_or_tuple(r, nd, 0, 2), "same", "valid"])
        kw["padding_mode"] = r.choice(["zeros", "zeros", "reflect", "replicate", "circular"])
        cls = f"Conv{nd}d"
        cin, cout = cg * groups, og * groups
    return dict(kind="module", cls=cls, args=(cin, cout, k), kwargs=kw,
                shape=(n, cin) + _sizes(r, nd, 1, 10 if nd < 3 else 6))


def _padding_only_window(shape, kw):
    """Whether some max-pool window lies over padding only (ceil_mode, dilation): torch 2.13
    returns out-of-range indices there and its backward writes out of bounds (a crash), so
    such cases are not drawn; tests/test_ops_pool.py checks flowgrad's answer alone."""
    nd = len(shape) - 2
    tup = lambda v: (v,) * nd if isinstance(v, int) else tuple(v)  # noqa: E731
    k, p, d = tup(kw["kernel_size"]), tup(kw["padding"]), tup(kw["dilation"])
    s = tup(kw["stride"] if kw["stride"] is not None else kw["kernel_size"])
    for size, k_, s_, p_, d_ in zip(shape[2:], k, s, p, d):
        span = size + 2 * p_ - d_ * (k_ - 1) - 1  # < 0 still gives one window with ceil_mode
        out = (span + (s_ - 1 if kw["ceil_mode"] else 0)) // s_ + 1
        if out <= 0:
            continue  # torch refuses the size
        if kw["ceil_mode"] and (out - 1) * s_ >= size + p_:
            out -= 1
        for i in range(out):
            if not any(0 <= i * s_ - p_ + j * d_ < size for j in range(k_)):
                return True
    return False


def _pool(r):
    nd = r.choice([1, 2, 2, 3])
    shape = (r.choice([0, 1, 2]), r.choice([1, 3, 4])) + _sizes(r, nd, 1, 10 if nd < 3 else 6)
    k = _int_or_tuple(r, nd, 1, 3)
    kind = r.choice(["max", "max", "avg", "avg", "adaptive_max", "adaptive_avg", "lp"])
    if kind == "max":
        kw = dict(kernel_size=k, stride=r.choice([None, _int_or_tuple(r, nd, 1, 3)]),
                  padding=r.choice([0, 0, 1]), dilation=r.choice([1, 1, 2]),
                  ceil_mode=r.random() < 0.4, return_indices=r.random() < 0.3)
        if _padding_only_window(shape, kw):
            kw["ceil_mode"], kw["padding"] = False, 0
        return dict(kind="functional", fn=f"max_pool{nd}d", kwargs=kw, shape=shape)
    if kind == "avg":
        kw = dict(kernel_size=k, stride=r.choice([None, _int_or_tuple(r, nd, 1, 3)]),
                  padding=r.choice([0, 0, 1]), ceil_mode=r.random() < 0.4,
                  count_include_pad=r.random() < 0.5)
        if nd > 1 and r.random() < 0.2:
            kw["divisor_override"] = r.choice([1, 3])
        return dict(kind="functional", fn=f"avg_pool{nd}d", kwargs=kw, shape=shape)
    if kind.startswith("adaptive"):
        out = r.choice([1, _int_or_tuple(r, nd, 1, 5)])
        kw = dict(output_size=out)
        if kind == "adaptive_max" and r.random() < 0.3:
            kw["return_indices"] = True
        return dict(kind="functional", fn=f"{kind}_pool{nd}d", kwargs=kw, shape=shape)
    nd = min(nd, 2)
    shape = shape[:2 + nd]
    return dict(kind="functional", fn=f"lp_pool{nd}d", shape=shape, positive=True,
                kwargs=dict(norm_type=r.choice([1.0, 2.0, 3.0]), kernel_size=r.choice([1, 2, 3]),
                            stride=r.choice([None, 1, 2]), ceil_mode=r.random() < 0.3))


def _interpolate(r):
    nd = r.choice([1, 2, 2, 3])
    mode = r.choice({1: ["nearest", "nearest-exact", "linear", "area"],
                     2: ["nearest", "nearest-exact", "bilinear", "bicubic", "area"],
                     3: ["nearest", "nearest-exact", "trilinear", "area"]}[nd])
    shape = (r.choice([1, 2]), r.choice([1, 3])) + _sizes(r, nd, 1, 8 if nd < 3 else 5)
    kw = {"mode": mode}
    if r.random() < 0.5:
        kw["size"] = _sizes(r, nd, 1, 12 if nd < 3 else 6)
    else:
        kw["scale_factor"] = r.choice([0.5, 1.5, 2.0, 2.7, 1.0, 0.3])
        if r.random() < 0.4:
            kw["recompute_scale_factor"] = True
    if mode in ("linear", "bilinear", "bicubic", "trilinear"):
        kw["align_corners"] = r.random() < 0.5
        if mode in ("bilinear", "bicubic") and r.random() < 0.3:
            kw["antialias"] = True
    return dict(kind="functional", fn="interpolate", kwargs=kw, shape=shape)


def _pad(r):
    nd = r.choice([1, 2, 3])
    mode = r.choice(["constant", "reflect", "replicate", "circular"])
    shape = (r.choice([1, 2]), r.choice([1, 2])) + _sizes(r, nd, 1, 6)
    pads = tuple(r.randint(-2, 3) for _ in range(2 * nd))
    kw = {"pad": pads, "mode": mode}
    if mode == "constant":
        kw["value"] = r.choice([0.0, 1.5])
    return dict(kind="functional", fn="pad", kwargs=kw, shape=shape)


def _other(r):
    which = r.choice(["unfold", "fold", "pixel_shuffle", "pixel_unshuffle", "grid_sample"])
    if which == "unfold":
        k = _int_or_tuple(r, 2, 1, 3)
        kw = dict(kernel_size=k, dilation=r.choice([1, 2]), padding=r.choice([0, 1]),
                  stride=r.choice([1, 2]))
        return dict(kind="functional", fn="unfold", kwargs=kw,
                    shape=(r.choice([0, 1, 2]), r.choice([1, 3])) + _sizes(r, 2, 2, 8))
    if which == "fold":
        out, k = _sizes(r, 2, 3, 7), (r.randint(1, 3), r.randint(1, 3))
        stride, pad, dil = r.choice([1, 2]), r.choice([0, 1]), r.choice([1, 2])
        blocks = 1
        for o, kk in zip(out, k):
            blocks *= max(0, (o + 2 * pad - dil * (kk - 1) - 1) // stride + 1)
        c = r.choice([1, 2])
        return dict(kind="functional", fn="fold", shape=(r.choice([1, 2]), c * k[0] * k[1],
                                                         blocks),
                    kwargs=dict(output_size=out, kernel_size=k, stride=stride, padding=pad,
                                dilation=dil))
    if which == "pixel_shuffle":
        f = r.choice([1, 2, 3])
        return dict(kind="functional", fn="pixel_shuffle", kwargs=dict(upscale_factor=f),
                    shape=(r.choice([1, 2]), r.choice([1, 2]) * f * f) + _sizes(r, 2, 1, 4))
    if which == "pixel_unshuffle":
        f = r.choice([1, 2, 3])
        return dict(kind="functional", fn="pixel_unshuffle", kwargs=dict(downscale_factor=f),
                    shape=(r.choice([1, 2]), r.choice([1, 2])) + tuple(
                        f * r.randint(1, 3) for _ in range(2)))
    nd = r.choice([2, 2, 3])
    n, c = r.choice([1, 2]), r.choice([1, 3])
    out = _sizes(r, nd, 1, 5)
    mode = r.choice(["bilinear", "nearest"] + (["bicubic"] if nd == 2 else []))
    return dict(kind="grid_sample", shape=(n, c) + _sizes(r, nd, 1, 6),
                grid=(n,) + out + (nd,),
                kwargs=dict(mode=mode, padding_mode=r.choice(["zeros", "border", "reflection"]),
                            align_corners=r.random() < 0.5))


def generate(seed):
    r = random.Random(seed)
    case = r.choice([_conv, _conv, _pool, _pool, _interpolate, _pad, _other])(r)
    case["seed"] = seed
    case["dtype"] = "float32" if r.random() < 0.25 else "float64"
    return case


def _run(m, case):
    """(outputs, input grad, weight grad, bias grad) as arrays, under module `m`."""
    with warnings.catch_warnings():  # (torch's notes on even 'same' kernels and the like)
        warnings.simplefilter("ignore")
        return _run_quietly(m, case)


def _run_quietly(m, case):
    rng = np.random.default_rng(case["seed"])
    dtype = case.get("dtype", "float64")
    x_np = rng.standard_normal(case["shape"])
    if case.get("positive"):
        x_np = np.abs(x_np) + 0.1
    x = m.tensor(x_np.astype(dtype), requires_grad=True)
    params = []
    if case["kind"] == "module":
        layer = getattr(m.nn, case["cls"])(*case["args"], **case["kwargs"]).to(
            getattr(m, dtype))
        for p in layer.parameters():
            with m.no_grad():
                p.copy_(m.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype)))
            params.append(p)
        out = layer(x)
    elif case["kind"] == "grid_sample":
        grid = m.tensor(rng.uniform(-1.2, 1.2, case["grid"]).astype(dtype), requires_grad=True)
        params.append(grid)
        out = m.nn.functional.grid_sample(x, grid, **case["kwargs"])
    else:
        out = getattr(m.nn.functional, case["fn"])(x, **case["kwargs"])
    outs = out if isinstance(out, tuple) else (out,)
    if outs[0].numel():
        up = m.tensor(np.random.default_rng(case["seed"] + 1).standard_normal(
            tuple(outs[0].shape)).astype(dtype))
        (outs[0] * up).sum().backward()
    grads = [None if t.grad is None else t.grad.numpy() for t in [x] + params]
    return [o.detach().numpy() for o in outs], grads


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    both = fuzz_common.run_both(_run, case)
    if not isinstance(both, tuple):
        return both
    (outs_g, grads_g), (outs_t, grads_t) = both[1], both[0]
    pairs = [(f"output {i}", a, b) for i, (a, b) in enumerate(zip(outs_g, outs_t))] + \
        [(f"gradient {i}", a, b) for i, (a, b) in enumerate(zip(grads_g, grads_t))]
    return fuzz_common.first_difference(
        pairs, RTOL if case.get("dtype", "float64") == "float64" else RTOL32)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
