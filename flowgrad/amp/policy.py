"""torch's CPU autocast cast policy, as tables, and the casts that apply it.

torch registers a wrapper per aten op under the AutocastCPU dispatch key
(aten/src/ATen/autocast_mode.cpp, torch 2.13); every other op falls through and runs on the
dtypes it is given. Three policies:

- lower precision: floating inputs (float64 excepted) are cast to the autocast dtype;
- float32: floating inputs (float64 excepted) are cast to float32;
- promote: to the widest floating input type (float32 if any input is float32).

Inside a wrapped op autocast is off (torch excludes the dispatch key while the op runs), so
a composite op's pieces are not cast again.

flowgrad applies a policy in two places. Its registered primitives (`PRIMITIVES`, keyed by
registry name) are cast by the autocast interpreter (`autocast_mode.AutocastInterpreter`),
which `Op.__call__` reaches first while autocast is on. torch ops that flowgrad composes in
Python from several primitives (`COMPOSITES`: conv2d's bias add, addmm, the losses, linalg)
get a wrapper that casts their arguments and runs them with autocast off; the wrappers are
installed once, the first time autocast is entered (`install_composites`), so a program
that never uses autocast runs the plain functions.

>>> import flowgrad as flow
>>> with flow.autocast("cpu"):
...     a = flow.ones(2, 3)
...     (a @ a.T).dtype, flow.nn.functional.mse_loss(a @ a.T, a @ a.T).dtype
(flowgrad.bfloat16, flowgrad.float32)
"""
from __future__ import annotations

import functools
import sys

import numpy as np

from .. import dtypes as _dt
from ..errors import guarded

# torch 2.13's AutocastCPU registrations, by policy (torch's names)
LOWER_PRECISION_FP = (
    "conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm",
    "_addmm_activation", "addbmm", "linear", "_convolution", "matmul", "conv_tbc",
    "mkldnn_rnn_layer", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "prelu",
    "scaled_dot_product_attention", "_native_multi_head_attention")
FP32 = (
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile",
    "nanquantile", "stft", "cdist", "grid_sampler_2d", "_grid_sampler_2d_cpu_fallback",
    "grid_sampler_3d", "trace", "view_as_complex", "cholesky", "cholesky_inverse",
    "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr", "pinverse", "max_pool3d",
    "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d", "reflection_pad1d",
    "reflection_pad2d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
    "mse_loss", "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss",
    "poisson_nll_loss", "smooth_l1_loss", "cross_entropy_loss", "l1_loss", "huber_loss",
    "margin_ranking_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "ctc_loss", "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits",
    "fft_fft", "fft_ifft", "fft_fft2", "fft_ifft2", "fft_fftn", "fft_ifftn", "fft_rfft",
    "fft_irfft", "fft_rfft2", "fft_irfft2", "fft_rfftn", "fft_irfftn", "fft_hfft", "fft_ihfft",
    "linalg_cond", "linalg_matrix_rank", "linalg_solve", "linalg_cholesky", "linalg_svdvals",
    "linalg_eigvals", "linalg_eigvalsh", "linalg_inv", "linalg_householder_product",
    "linalg_tensorinv", "linalg_tensorsolve", "fake_quantize_per_tensor_affine", "geqrf",
    "_lu_with_info", "qr", "svd", "triangular_solve", "fractional_max_pool2d",
    "fractional_max_pool3d", "adaptive_max_pool3d", "multilabel_margin_loss_forward",
    "linalg_qr", "linalg_cholesky_ex", "linalg_svd", "linalg_eig", "linalg_eigh",
    "linalg_lstsq", "linalg_inv_ex")
PROMOTE = ("stack", "cat", "index_copy")

LOWER, FLOAT32, WIDEST, NONE = "lower_precision_fp", "fp32", "promote", "fallthrough"

# flowgrad's registered primitives -> the policy of the torch op(s) they implement
PRIMITIVES = {
    # mm, bmm, matmul, @, linalg_vecdot; linear; every convolution; torch's CPU einsum and
    # multi_dot run bmm/mm, which are cast; nn.LSTM / nn.RNN run mkldnn_rnn_layer (GRU does not)
    **dict.fromkeys(("matmul", "linear", "conv", "conv_transpose", "einsum", "lstm_seq",
                     "rnn_seq"), LOWER),
    **dict.fromkeys(("cross_entropy", "nll_loss", "binary_cross_entropy",
                     "binary_cross_entropy_with_logits", "ctc_loss", "prod", "view_as_complex",
                     "geqrf", "fft_c2c", "fft_r2c", "fft_c2r", "linalg_cholesky",
                     "linalg_cholesky_info", "linalg_inv", "linalg_solve", "linalg_svd",
                     "linalg_eigh", "linalg_qr", "linalg_pinv", "linalg_lu_factor"), FLOAT32),
    "cat": WIDEST,  # and stack, which is cat of unsqueezed inputs
}

# torch ops flowgrad composes in Python: where to find them (flowgrad's public spellings;
# every alias of the same function is wrapped with it). NONE: torch runs them as one op that
# autocast lets through, while flowgrad's composition calls a cast primitive (mv -> matmul)
COMPOSITES = {
    # matmul, mm, bmm, linear, einsum are primitives too, but their Python front ends check
    # the operands' dtypes: torch casts before any check
    LOWER: ("matmul mm bmm nn.functional.linear einsum "
            "nn.functional.conv1d nn.functional.conv2d nn.functional.conv3d "
            "nn.functional.conv_transpose1d nn.functional.conv_transpose2d "
            "nn.functional.conv_transpose3d addmm baddbmm addbmm nn.functional.prelu "
            "nn.functional.scaled_dot_product_attention linalg.vecdot"),
    FLOAT32: ("nn.functional.mse_loss nn.functional.l1_loss nn.functional.smooth_l1_loss "
              "nn.functional.huber_loss nn.functional.kl_div nn.functional.margin_ranking_loss "
              "nn.functional.soft_margin_loss nn.functional.triplet_margin_loss "
              "nn.functional.multi_margin_loss nn.functional.multilabel_margin_loss "
              "nn.functional.hinge_embedding_loss nn.functional.cosine_embedding_loss "
              "nn.functional.poisson_nll_loss nn.functional.binary_cross_entropy "
              "nn.functional.binary_cross_entropy_with_logits nn.functional.cross_entropy "
              "nn.functional.nll_loss nn.functional.ctc_loss "
              "nn.functional.avg_pool3d nn.functional.max_pool3d "
              "nn.functional.adaptive_avg_pool3d nn.functional.adaptive_max_pool3d "
              "nn.functional.fractional_max_pool2d nn.functional.fractional_max_pool3d "
              "nn.functional.max_unpool2d nn.functional.max_unpool3d nn.functional.grid_sample "
              "cdist quantile nanquantile trace polar prod inverse pinverse cholesky_inverse "
              "cholesky_solve lu_solve orgqr ormqr qr svd triangular_solve geqrf "
              "linalg.cond linalg.matrix_rank linalg.solve linalg.cholesky linalg.svdvals "
              "linalg.eigvals linalg.eigvalsh linalg.inv linalg.householder_product "
              "linalg.tensorinv linalg.tensorsolve linalg.qr linalg.cholesky_ex linalg.svd "
              "linalg.eig linalg.eigh linalg.lstsq linalg.inv_ex "
              "fft.fft fft.ifft fft.fft2 fft.ifft2 fft.fftn fft.ifftn fft.rfft fft.irfft "
              "fft.rfft2 fft.irfft2 fft.rfftn fft.irfftn fft.hfft fft.ihfft "
              "ops.pad._pad_indexed_float32"),  # F.pad's replicate and 1-d/2-d reflect
    WIDEST: "cat stack index_copy",
    # torch runs these on the dtypes they get; flowgrad composes them from matmul/einsum,
    # which autocast would cast (interpolate of float32 came out bfloat16)
    NONE: ("mv dot vdot addmv outer addr nn.functional.bilinear nn.functional.interpolate "
           "nn.functional.upsample nn.functional.upsample_bilinear "
           "nn.functional.upsample_nearest nn.functional.adaptive_avg_pool1d "
           "nn.functional.adaptive_avg_pool2d"),
}

_ELIGIBLE = (np.dtype(np.float16), np.dtype(np.float32))
_F32 = np.dtype(np.float32)


def eligible(t) -> bool:
    """A tensor autocast may cast: floating, not float64 (torch's is_eligible)."""
    d = t._data.dtype
    return d in _ELIGIBLE or d.name == "bfloat16"


def target_dtype(policy, tensors, lower):
    """The NumPy dtype `policy` casts `tensors` to (None: leave them), `lower` the autocast
    dtype's. promote follows torch's `prioritize`: float32 wins, float64 is ignored."""
    if policy == LOWER:
        return lower
    if policy == FLOAT32:
        return _F32
    if policy == NONE:
        return None
    widest = lower
    for t in tensors:
        if eligible(t):
            d = t._data.dtype
            if d == _F32 or widest == _F32:
                widest = _F32
            elif d != lower:
                raise RuntimeError(
                    f"autocast: cannot promote {_dt.from_numpy_dtype(d)} with the autocast "
                    f"dtype {_dt.from_numpy_dtype(lower)} (torch's prioritize refuses it too); "
                    f"cast the input to {_dt.from_numpy_dtype(lower)} or float32 first")
    return widest


def _resolve(path):
    import flowgrad

    obj = flowgrad
    for part in path.split("."):
        obj = getattr(obj, part, None)  # None: not in flowgrad (yet)
    return obj


_installed = []


def install_composites(wrap):
    """Replace each function in COMPOSITES by `wrap(fn, policy)`, wherever flowgrad binds it
    (module attributes of flowgrad's modules, Tensor methods): once per process."""
    if _installed:
        return
    from ..tensor import Tensor

    wrapped = {}
    for policy, paths in COMPOSITES.items():
        for path in paths.split():
            f = _resolve(path)
            # (and every function its front ends wrap: the argument-type guard, torch.*'s
            # `out=`, the NumPy spellings; Tensor methods bind the innermost)
            while f is not None:
                if id(f) not in wrapped:
                    wrapped[id(f)] = (f, functools.wraps(f)(wrap(f, policy)))
                f = f.__dict__.get("__wrapped__") if hasattr(f, "__dict__") else None
    spaces = [vars(m) for name, m in list(sys.modules.items())
              if m is not None and (name == "flowgrad" or name.startswith("flowgrad."))]
    for space in spaces:
        for name, value in list(space.items()):
            hit = wrapped.get(id(value))
            if hit is not None and hit[0] is value:
                space[name] = hit[1]
                if hasattr(value, "_public"):  # (__torch_function__ is told the new name)
                    value._public[0] = hit[1]
    for name, value in list(vars(Tensor).items()):
        f = value  # (a method's argument guard wraps the function autocast knows)
        while f is not None:
            hit = wrapped.get(id(f))
            if hit is not None and hit[0] is f:
                new = hit[1] if f is value else guarded(hit[1], name, method=True)
                respell = getattr(value, "_respell", None)  # (x.prod(axis=0) keeps working)
                setattr(Tensor, name, new if f is value or respell is None else respell(new))
                break
            f = f.__dict__.get("__wrapped__") if hasattr(f, "__dict__") else None
    _installed.append(True)
