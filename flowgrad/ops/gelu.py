"""gelu, exact (x Phi(x), with erf) or by its tanh approximation, and its gradient op: the
forward hands Phi(x) to the backward as an aux output, so the backward computes only phi(x).
On MKL both run as whole-array passes of its vector math; elsewhere as NumPy passes over
cache-sized chunks (Phi in float32 for float32 and narrower, as torch's kernel).

>>> import flowgrad as flow
>>> x = flow.tensor([-1.0, 0.0, 1.0], requires_grad=True)
>>> flow.nn.functional.gelu(x).sum().backward(); x.grad
tensor([-0.0833,  0.5000,  1.0833])
"""
from __future__ import annotations

import math

from ..blas import VECTOR_THREADED, vector_affine, vector_math, vector_math2, vector_ready
from ..errors import check_kernel_dtype as _check_kernel_dtype
from ..tensor import tensor_method
from .halfprec import in_float32, upcast
from .registry import op
from .special import chunk_elements, erf, map_chunks, normal_cdf_into

__all__ = ["gelu"]

@op("gelu", jvp="diagonal", save="inputs", layout="elementwise")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _gelu(xp, x, *, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + xp.tanh(inner))).astype(x.dtype, copy=False)
    return _gelu_exact(xp, x)


def _gelu_exact(xp, x):
    """(x Phi(x), Phi(x)): Phi goes along as an aux output, so the backward needs only phi.
    With MKL: two whole-array passes of its vector math on its threads; else float32 and
    narrower run on cache-sized chunks of in-place passes (Phi in float32)."""
    cdf = vector_math("CdfNorm", x, low_accuracy=True)  # (float32: to 6e-8, see blas)
    if cdf is not None:
        y = vector_math2("Mul", x, cdf)
        if y is not None:
            return y, cdf
    if x.dtype.itemsize >= 8:
        cdf = erf(xp, x / math.sqrt(2))
        cdf += 1
        cdf *= 0.5
        return (x * cdf).astype(x.dtype, copy=False), cdf
    x1, step = x.reshape(-1), chunk_elements(x)
    y, cdf = xp.empty(x1.shape, x.dtype), xp.empty(x1.shape, xp.float32)
    tmp = xp.empty(min(step, x1.size), xp.float32)
    wide = x.dtype == xp.float32
    for start in range(0, x1.size, step):
        xs = x1[start:start + step]
        if not wide:  # bfloat16, float16: computed in float32 (as torch's kernel)
            xs = xs.astype(xp.float32)
        c = normal_cdf_into(xp, xs, cdf[start:start + step], tmp[:len(xs)])
        if wide:
            xp.multiply(xs, c, out=y[start:start + step])
        else:
            y[start:start + step] = xs * c
    return y.reshape(x.shape), cdf.reshape(x.shape)


@_gelu.grad
def gelu_backward(ctx, dy):
    x = ctx.inputs[0]
    if ctx.approximate == "tanh":
        # half precision in float32, rounded once, as torch's (float16's x ** 3 overflows)
        low, (x, dy) = upcast(x, dy)
        k = math.sqrt(2 / math.pi)
        t = (k * (x + x * x * x * 0.044715)).tanh()
        dinner = k * (1 + x * x * (3 * 0.044715))
        g = dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner)
        return g if low is None else g.to(low)
    return _gelu_grad(x, dy, *(ctx.aux or ()))


_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


# not the optional Phi(x) (gelu's aux output): its rule never reads it
@op("gelu_grad", jvp="diagonal", save="inputs[0, 1]")
@in_float32  # half precision: computed in float32 and rounded once, as torch
def _gelu_grad(xp, x, dy, *cdf):
    """dy * gelu'(x) = dy * (Phi(x) + x phi(x)) (exact gelu); `cdf`, when given, is Phi(x)
    from the forward, so only phi(x) is computed here (7 passes; 16 more for erf without)."""
    if cdf and cdf[0].shape == x.shape == dy.shape:
        return _gelu_grad_from_cdf(xp, x, dy, cdf[0])
    if x.shape != dy.shape:
        x, dy = xp.broadcast_arrays(x, dy)
    return map_chunks(xp, _gelu_grad_exact, x, dy)


_LOG_INV_SQRT_2PI = math.log(_INV_SQRT_2PI)
# gelu's gradient runs on chunks of this many special.CHUNKs (a million float32 values): its
# seven passes are cheap next to NumPy's per-call cost on 32k-value chunks (a (2048, 512)
# gradient: 1.10 ms whole, 1.31 ms on 32k chunks, on a Zen 4 core)
_GRAD_CHUNKS = 32


def _gelu_grad_from_cdf(xp, x, dy, cdf):
    """dy * (Phi + x phi(x)) in Phi's dtype (float32 for float32 and narrower): with MKL as the
    BLAS, six whole-array passes of its vector math (phi(x) as exp(-x^2 / 2 + log(1 /
    sqrt(2 pi)))), on its threads; else NumPy's passes on chunks of _GRAD_CHUNKS cache-sized
    chunks. (MKL's sequential VML beside OpenBLAS, on AMD's CPUs, is slower than NumPy here:
    its exp took 0.86 ms on a million float32 values to NumPy's 0.47 on a Zen 4 core.)"""
    if VECTOR_THREADED and vector_ready(x, dy, cdf):
        t = vector_math("Sqr", x)
        vector_affine(t, -0.5, _LOG_INV_SQRT_2PI, out=t)
        vector_math("Exp", t, t, no_inf=True)
        vector_math2("Mul", t, x, t)
        vector_math2("Add", t, cdf, t)
        return vector_math2("Mul", t, dy, t)
    x1, dy1, cdf1 = x.reshape(-1), dy.reshape(-1), cdf.reshape(-1)
    ct = cdf.dtype
    step = chunk_elements(x) * _GRAD_CHUNKS
    tmp = xp.empty(min(step, x1.size), ct)
    same = x.dtype == dy.dtype == ct
    # one chunk: the result is the scratch array itself, the last written (the GEMM that reads
    # the gradient next ran 0.2 ms slower on a fresh array written once)
    out = tmp if same and step >= x1.size else xp.empty(dy1.shape, dy.dtype)
    half, inv_sqrt_2pi = ct.type(-0.5), ct.type(_INV_SQRT_2PI)
    for start in range(0, x1.size, step):
        xs, dys = x1[start:start + step], dy1[start:start + step]
        if not same:  # bfloat16, float16: in float32, as torch's kernel
            xs, dys = xs.astype(ct), dys.astype(ct)
        t = xp.multiply(xs, xs, out=tmp[:len(xs)])
        t *= half
        xp.exp(t, out=t)
        t *= xs
        t *= inv_sqrt_2pi
        t += cdf1[start:start + step]
        if same:
            xp.multiply(t, dys, out=out[start:start + step])
        else:
            out[start:start + step] = t * dys
    return out.reshape(dy.shape)


def _gelu_grad_exact(xp, x, dy):
    x32 = x.astype(xp.float32) if x.dtype.kind == "V" else x
    cdf = erf(xp, x32 * (1 / math.sqrt(2)))
    cdf += 1
    cdf *= 0.5
    pdf = xp.exp(x32 * x32 * -0.5)
    pdf *= x32 * _INV_SQRT_2PI
    cdf += pdf
    cdf *= dy
    return cdf.astype(dy.dtype, copy=False)


@_gelu_grad.grad
def gelu_grad_backward(ctx, ddx):
    x, dy = ctx.inputs[:2]
    need = ctx.needs_input_grad
    # gelu''(x) = phi(x) (2 - x^2)
    dx = ddx * dy * (x * x * -0.5).exp() * _INV_SQRT_2PI * (2 - x * x) if need[0] else None
    # Phi(x), when passed, depends on x only: its part is in dx already
    return (dx, (_gelu_grad(x, ddx) if need[1] else None)) + (None,) * (len(need) - 2)


@tensor_method()
def gelu(input, approximate="none"):
    """x * Phi(x) (exact, with erf) or its tanh approximation.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> F.gelu(flow.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _check_kernel_dtype(input, "GeluKernelImpl")
    return _gelu(input, approximate=approximate)
