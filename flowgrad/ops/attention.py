"""scaled_dot_product_attention, composed from matmul and the fused softmax (so its gradient,
to any order, comes from theirs).

>>> import flowgrad as flow
>>> q = k = v = flow.ones(1, 2, 4)
>>> flow.nn.functional.scaled_dot_product_attention(q, k, v).shape
flowgrad.Size([1, 2, 4])
"""
from __future__ import annotations

import math

import numpy as np

from ..device import array_module
from ..tensor import Tensor
from .activation import softmax
from .elementwise import where
from .nn_misc import dropout

__all__ = ["scaled_dot_product_attention"]


def _repeat_heads(t, times):
    """Repeat each head `times` times along dim -3 (grouped-query attention)."""
    xp = array_module(t._data)
    heads = t._data.shape[-3]
    return t[(Ellipsis, Tensor._wrap(xp.repeat(xp.arange(heads), times)), slice(None),
              slice(None))]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, with query (..., L, E), key (..., S, E) and
    value (..., S, Ev).

    attn_mask: bool (True = attend) or float (added to the scores), broadcastable to
    (..., L, S). is_causal: attend only to positions <= own. Rows with nothing to attend to
    give zeros, as torch's math kernel does. enable_gqa: key/value may have fewer heads
    (dim -3) than query, which must be a multiple.

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
    allowed = None
    if is_causal:
        allowed = xp.tril(xp.ones((length, source), bool))
    elif attn_mask is not None:
        if attn_mask._data.dtype.kind == "b":
            allowed = attn_mask._data
        else:
            scores = scores + attn_mask.to(scores.dtype)
    if allowed is not None:
        shape = np.broadcast_shapes(allowed.shape, scores._data.shape)
        allowed = xp.broadcast_to(allowed, shape)
        empty = ~allowed.any(-1, keepdims=True)
        # rows with nothing to attend to: softmax over zeros (no NaN), then output zero
        scores = where(Tensor._wrap(allowed | empty), scores, -math.inf)
        attn = softmax(scores, -1)
        if empty.any():
            attn = where(Tensor._wrap(empty), 0.0, attn)
    else:
        attn = softmax(scores, -1)
    if dropout_p > 0:
        attn = dropout(attn, dropout_p, training=True)
    return attn @ v
