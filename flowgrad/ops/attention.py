"""scaled_dot_product_attention, composed from matmul and the fused softmax (so its gradient,
to any order, comes from theirs).

>>> import flowgrad as flow
>>> q = k = v = flow.ones(1, 2, 4)
>>> flow.nn.functional.scaled_dot_product_attention(q, k, v).shape
flowgrad.Size([1, 2, 4])
"""
from __future__ import annotations

import math

from ..device import array_module
from ..tensor import Tensor
from .activation import softmax
from .elementwise import where
from .nn_misc import dropout
from .registry import op

__all__ = ["scaled_dot_product_attention"]


# ---- self-attention's packed in-projection, split into heads and merged back ---------------
def _as_heads(x, heads, batch_first):
    """(N, L, 3E) (batch_first) or (L, N, 3E) as a (3, N, H, L, hd) view."""
    a, b, e3 = x.shape
    x = x.reshape(a, b, 3, heads, e3 // (3 * heads))
    return x.transpose(2, 0, 3, 1, 4) if batch_first else x.transpose(2, 1, 3, 0, 4)


@op("split_heads", n_out=3, jvp="linear")
def _split_heads(xp, qkv, *, heads, batch_first):
    """q (N*H, L, hd), k^T (N*H, hd, L) and v (N*H, L, hd) of the packed projection: three
    copies, laid out as the attention's batched GEMMs read them."""
    q, k, v = _as_heads(qkv, heads, batch_first)
    n, _, length, hd = q.shape
    return (xp.ascontiguousarray(q).reshape(n * heads, length, hd),
            xp.ascontiguousarray(k.swapaxes(-1, -2)).reshape(n * heads, hd, length),
            xp.ascontiguousarray(v).reshape(n * heads, length, hd))


@_split_heads.grad
def split_heads_backward(ctx, dq, dkt, dv):
    return _merge_heads(dq, dkt, dv, heads=ctx.heads, batch_first=ctx.batch_first)


# split_heads' adjoint: the three blocks written straight into the projection's layout (an
# unbind's stack and a reshape's copy were two passes of the gradient, one of them strided)
@op("merge_heads", jvp="linear")
def _merge_heads(xp, dq, dkt, dv, *, heads, batch_first):
    nh, length, hd = dq.shape
    n = nh // heads
    out = xp.empty((n, length, 3 * heads * hd) if batch_first else (length, n, 3 * heads * hd),
                   dq.dtype)
    view = _as_heads(out, heads, batch_first)
    view[0] = dq.reshape(n, heads, length, hd)
    view[1] = dkt.reshape(n, heads, hd, length).swapaxes(-1, -2)
    view[2] = dv.reshape(n, heads, length, hd)
    return out


@_merge_heads.grad
def merge_heads_backward(ctx, g):
    return _split_heads(g, heads=ctx.heads, batch_first=ctx.batch_first)


def _repeat_heads(t, times):
    """Repeat each head `times` times along dim -3 (grouped-query attention)."""
    xp = array_module(t._data)
    heads = t._data.shape[-3]
    return t[(Ellipsis, Tensor._wrap(xp.repeat(xp.arange(heads), times)), slice(None),
              slice(None))]


def check_mask_dtype(mask, dtype):
    """torch's rule: a non-bool mask is float32 or the query's dtype (no other promotion)."""
    if mask.dtype.name not in ("bool", "float32", dtype.name):
        raise RuntimeError(f"scaled_dot_product_attention: expected attn_mask dtype to be "
                           f"bool or float or to match query dtype, but got attn_mask.dtype: "
                           f"{mask.dtype.name} and query.dtype: {dtype.name}; convert the "
                           f"mask with .to({dtype.name})")


def _safe_softmax(scores, allowed=None):
    """softmax over the last dim, with torch's SDPA rule for rows where every score is -inf
    (a fully masked row): output 0 there, with gradient 0, rather than softmax's NaN.
    `allowed` (bool, True = attend) masks the scores to -inf first."""
    if allowed is not None:
        scores = where(allowed, scores, -math.inf)
    empty = (scores == -math.inf).all(-1, keepdim=True)
    # the empty rows' softmax runs on zeros (no NaN to leak into the gradient), then is zeroed
    return where(empty, 0.0, softmax(where(empty, 0.0, scores), -1))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, with query (..., L, E), key (..., S, E) and
    value (..., S, Ev).

    attn_mask: bool (True = attend) or float (added to the scores; float32 or the query's
    dtype), broadcastable to (..., L, S). is_causal: attend only to positions <= own. Rows
    with nothing to attend to (every score -inf) give zeros, as torch's kernels do.
    enable_gqa: key/value may have fewer heads (dim -3) than query, which must be a multiple.

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> q = flow.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    >>> v = flow.tensor([[[1.0, 2.0], [3.0, 4.0]]])
    >>> F.scaled_dot_product_attention(q, q, v, is_causal=True)
    tensor([[[1.0000, 2.0000],
             [2.3395, 3.3395]]])
    """
    xp = array_module(query._data)
    q, k, v = query, key, value
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t._data.ndim < 2:
            raise RuntimeError(f"scaled_dot_product_attention: {name} must have at least 2 "
                               f"dims (..., seq, embed), got shape {tuple(t.shape)}")
    if q._data.shape[-1] != k._data.shape[-1] or k._data.shape[-2] != v._data.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: shapes don't match: query "
                           f"{tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}; "
                           f"need query (..., L, E), key (..., S, E), value (..., S, Ev)")
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: pass either attn_mask or "
                           "is_causal=True, not both")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p has to be between 0 and "
                         f"1, but got {dropout_p}")
    if enable_gqa and q._data.ndim >= 3:
        hq, hk = q._data.shape[-3], k._data.shape[-3]
        if hq % hk or hq % v._data.shape[-3]:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa the number of "
                               f"query heads ({hq}) must be a multiple of the key/value heads "
                               f"({hk}, {v._data.shape[-3]})")
        if hk != hq:
            k = _repeat_heads(k, hq // hk)
        if v._data.shape[-3] != hq:
            v = _repeat_heads(v, hq // v._data.shape[-3])
    length, source = q._data.shape[-2], k._data.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(q._data.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:  # (a constant of the shapes)
        attn = _safe_softmax(scores, Tensor._wrap(xp.tril(xp.ones((length, source), bool))))
    elif attn_mask is not None:
        if attn_mask._data.dtype.kind == "b":
            # an input of the ops below: a graph compiles them
            attn = _safe_softmax(scores, attn_mask)
        else:
            check_mask_dtype(attn_mask, q.dtype)
            attn = _safe_softmax(scores + attn_mask.to(scores.dtype))
    else:
        attn = softmax(scores, -1)
    if dropout_p > 0:
        attn = dropout(attn, dropout_p, training=True)
    return attn @ v
