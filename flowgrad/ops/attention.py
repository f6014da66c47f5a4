"""scaled_dot_product_attention and multi_head_attention_forward (nn.MultiheadAttention's
one implementation), composed from matmul and the fused softmax (so their gradients, to any
order, come from theirs).

>>> import flowgrad as flow
>>> q = k = v = flow.ones(1, 2, 4)
>>> flow.nn.functional.scaled_dot_product_attention(q, k, v).shape
flowgrad.Size([1, 2, 4])
"""
from __future__ import annotations

import math

from .._warn import warn
from ..backends.cuda import _sdp as _SDP
from ..device import array_module
from ..tensor import Tensor
from .activation import _safe_softmax_op, softmax
from .creation import full, zeros
from .elementwise import where
from .linalg import linear
from .nn_misc import dropout
from .pad import pad
from .registry import op
from .shape import cat

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


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
    (a fully masked row): output 0 there, rather than softmax's NaN (one op, `safe_softmax`:
    its gradient there is 0 * dy, as torch's). `allowed` (bool, True = attend) becomes an
    additive mask (0 or -inf), as torch's math kernel has it: a NaN or inf score at a masked
    position still reaches the row, and the masked positions' gradient is dy's."""
    if allowed is not None:
        additive = where(allowed, 0.0, -math.inf)
        if additive.dtype != scores.dtype:
            additive = additive.to(scores.dtype)
        scores = scores + additive
    return _safe_softmax_op(scores, dim=scores._data.ndim - 1)


def _flash_fits(q, k, v, dropout_p, enable_gqa, attn_mask=None):
    """Whether torch's CPU flash kernel takes these inputs: 4-D, one head width, no dropout,
    the batch and head dims matching (or grouped heads with enable_gqa), and a mask (not
    requiring grad) of 2 dims, or of 4 whose leading dims are 1 or the query's, and whose
    last two are the scores' or 1."""
    qs, ks, vs = q._data.shape, k._data.shape, v._data.shape
    if not (len(qs) == len(ks) == len(vs) == 4 and vs[-1] == qs[-1] and dropout_p == 0):
        return False
    if not (ks[:2] == vs[:2] and qs[0] == ks[0] and (
            qs[1] == ks[1] or enable_gqa and ks[1] and qs[1] % ks[1] == 0)):
        return False
    if attn_mask is None:
        return True
    ms = attn_mask._data.shape
    if attn_mask.requires_grad or len(ms) not in (2, 4) or ms[-2] not in (1, qs[2]) or \
            ms[-1] not in (1, ks[2]):
        return False
    return len(ms) == 2 or (ms[0] in (1, qs[0]) and ms[1] in (1, qs[1]))


def _check_backends(q, k, v, dropout_p, enable_gqa):
    """Raise as torch's CPU dispatch where the kernels allowed (`backends.cuda`'s switches,
    `nn.attention.sdpa_kernel`) cannot run the call: the math one is off and the flash one is
    off too or cannot take these inputs (4-D, one head width, no dropout, the batch and head
    dims matching, or grouped heads with enable_gqa). Every kernel gives the same numbers."""
    if _SDP["math"]:
        return
    if not _SDP["flash"]:
        raise RuntimeError("No viable backend for scaled_dot_product_attention was found. "
                           "This is likely due to turning off both the math kernel and the "
                           "fused kernels.")
    if not _flash_fits(q, k, v, dropout_p, enable_gqa):
        raise RuntimeError("No available kernel.  Aborting execution. (scaled_dot_product_"
                           "attention: only the flash kernel is enabled, and it takes 4-D "
                           "inputs of one head width without dropout; enable the math "
                           "kernel with nn.attention.sdpa_kernel)")


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
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p has to be between 0 and "
                         f"1, but got {dropout_p}")
    _check_backends(q, k, v, dropout_p, enable_gqa)
    if is_causal and attn_mask is not None and not (
            _SDP["flash"] and _flash_fits(q, k, v, dropout_p, enable_gqa, attn_mask)):
        # torch's math kernel refuses both; its flash kernel (taken where it fits) applies both
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                           "set when is_causal=True")
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
    causal = Tensor._wrap(xp.tril(xp.ones((length, source), bool))) if is_causal else None
    if attn_mask is not None:  # (with is_causal too: torch 2.13 applies both)
        if attn_mask._data.dtype.kind == "b":
            # an input of the ops below: a graph compiles them
            attn = _safe_softmax(scores, attn_mask if causal is None else attn_mask & causal)
        else:
            check_mask_dtype(attn_mask, q.dtype)
            attn = _safe_softmax(scores + attn_mask.to(scores.dtype), causal)
    elif is_causal:  # (a constant of the shapes)
        attn = _safe_softmax(scores, causal)
    else:
        attn = softmax(scores, -1)
    if dropout_p > 0:
        attn = dropout(attn, dropout_p, training=True)
    return attn @ v


# ---- multi-head attention (nn.MultiheadAttention's forward) ---------------------------------
def canonical_mask(mask, name, dtype, other=None, other_name=""):
    """torch's _canonical_mask: a bool mask (True = masked out) becomes an additive -inf mask
    of `dtype`; a float mask passes; another dtype raises. `other` (the other mask, or None)
    warns when the two masks' dtypes differ, as torch's deprecation does."""
    if mask is None:
        return None
    is_bool = mask.dtype.name == "bool"
    if not is_bool and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and mask.dtype != other.dtype:
        warn(f"Support for mismatched {name} and {other_name} is deprecated. Use same "
             f"type for both instead.", stacklevel=3)
    # by ops, not on the array: a mask that is an input of nn.Graph is traced
    return where(mask, -math.inf, 0.0).to(dtype) if is_bool else mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's _mha_shape_check: whether the call is batched (3-D query) or not (2-D)."""
    nd = query.dim()
    if nd not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                             f"{nd}-D query tensor")
    kind = "batched (3-D)" if nd == 3 else "unbatched (2-D)"
    if key.dim() != nd or value.dim() != nd:
        raise AssertionError(f"For {kind} `query`, expected `key` and `value` to be {nd}-D but "
                             f"found {key.dim()}-D and {value.dim()}-D tensors respectively")
    if key_padding_mask is not None and key_padding_mask.dim() != nd - 1:
        raise AssertionError(f"For {kind} `query`, expected `key_padding_mask` to be `None` or "
                             f"{nd - 1}-D but found {key_padding_mask.dim()}-D tensor instead")
    if attn_mask is not None:
        if attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For {kind} `query`, expected `attn_mask` to be `None`, 2-D "
                                 f"or 3-D but found {attn_mask.dim()}-D tensor instead")
        expected = (num_heads, query.shape[0], key.shape[0])
        if nd == 2 and attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
            raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                 f"{tuple(attn_mask.shape)}")
    return nd == 3


def _check_static(t, name, bsz_heads, head_dim):
    if t.shape[0] != bsz_heads:
        raise AssertionError(f"expecting {name}.size(0) of {bsz_heads}, but got {t.shape[0]}")
    if t.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {t.shape[2]}")


def _in_projection(query, key, value, num_heads, in_proj_weight, in_proj_bias, separate,
                   batch_first, packed):
    """q (N*H, L, hd), k^T (N*H, hd, S) and v (N*H, S, hd) from the inputs in (L, N, E)
    layout (or the batch-first input itself when `packed`: self-attention's one GEMM)."""
    if packed:
        qkv = linear(query, in_proj_weight, in_proj_bias)
        return _split_heads(qkv, heads=num_heads, batch_first=batch_first)
    if separate:
        wq, wk, wv = separate
    else:
        wq, wk, wv = in_proj_weight.chunk(3)
    bq, bk, bv = (None,) * 3 if in_proj_bias is None else in_proj_bias.chunk(3)
    return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """nn.MultiheadAttention's forward on explicit weights: query (L, N, E) or (L, E), key
    and value (S, N, E*) or (S, E*). Returns (output, weights): the weights averaged over
    heads (or per head), None with need_weights=False (then the attention is SDPA's: a row
    with nothing to attend to gives 0, not NaN).

    >>> import flowgrad as flow
    >>> import flowgrad.nn.functional as F
    >>> x = flow.ones(3, 1, 4)
    >>> w, b = flow.eye(4).repeat(3, 1), flow.zeros(12)
    >>> out, attn = F.multi_head_attention_forward(x, x, x, 4, 2, w, b, None, None, False,
    ...                                            0.0, flow.eye(4), flow.zeros(4))
    >>> tuple(out.shape), attn[0, 0]
    ((3, 1, 4), tensor([0.3333, 0.3333, 0.3333]))
    """
    return _multi_head_attention(
        query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
        bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training,
        key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
        k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal)


def _multi_head_attention(query, key, value, embed_dim_to_check, num_heads, in_proj_weight,
                          in_proj_bias, bias_k, bias_v, add_zero_attn, dropout_p,
                          out_proj_weight, out_proj_bias, training, key_padding_mask,
                          need_weights, attn_mask, use_separate_proj_weight, q_proj_weight,
                          k_proj_weight, v_proj_weight, static_k, static_v,
                          average_attn_weights, is_causal, batch_first=False, fast=False):
    """multi_head_attention_forward, the one implementation nn.MultiheadAttention runs too:
    `batch_first` takes batch-first inputs (and gives a batch-first output) without
    transposing a packed self-attention input; `fast` is torch's native-kernel path, which
    ignores is_causal and gives a fully masked row NaN."""
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    packed = batched and query is key and key is value and not use_separate_proj_weight \
        and bias_k is None and bias_v is None and not add_zero_attn and static_k is None \
        and static_v is None and in_proj_weight is not None
    src = query
    if not batched:
        query, key, value = (x.unsqueeze(1) for x in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    elif batch_first:
        query, key, value = (x.transpose(0, 1) for x in (query, key, value))
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    dtype = query.dtype
    key_padding_mask = canonical_mask(key_padding_mask, "key_padding_mask", dtype, attn_mask,
                                      "attn_mask")
    causal = False
    if fast:  # (torch's native kernel takes no is_causal)
        attn_mask = canonical_mask(attn_mask, "attn_mask", dtype)
    else:
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method "
                               "`generate_square_subsequent_mask` to create this mask.")
        if is_causal and key_padding_mask is None and not need_weights:
            attn_mask, causal = None, True  # the hint goes to SDPA in place of the mask
        else:
            attn_mask = canonical_mask(attn_mask, "attn_mask", dtype)
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {tuple(key.shape[:2])} do not "
                                 f"match value's {tuple(value.shape[:2])}")
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     f"is None")
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {tuple(key.shape)} does not match value shape "
                                 f"{tuple(value.shape)}")
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        separate = None
    q, k, v = _in_projection(src if packed else query, key, value, num_heads, in_proj_weight,
                             in_proj_bias, separate, batch_first, packed)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, "
                                   f"but should be {(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        set_, unset = ("bias_k", "bias_v") if bias_k is not None else ("bias_v", "bias_k")
        raise AssertionError(f"{set_} is set but {unset} is None")
    bh = bsz * num_heads
    if not packed:
        q = q.reshape(tgt_len, bh, head_dim).transpose(0, 1)
        if static_k is None:
            k = k.reshape(k.shape[0], bh, head_dim).permute(1, 2, 0)
        else:
            _check_static(static_k, "static_k", bh, head_dim)
            k = static_k.transpose(1, 2)
        if static_v is None:
            v = v.reshape(v.shape[0], bh, head_dim).transpose(0, 1)
        else:
            _check_static(static_v, "static_v", bh, head_dim)
            v = static_v
    kt = k  # k^T from here: (N*H, hd, S)
    if add_zero_attn:
        kt = cat([kt, zeros(bh, head_dim, 1, dtype=kt.dtype, device=kt.device)], 2)
        v = cat([v, zeros(bh, 1, head_dim, dtype=v.dtype, device=v.device)], 1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = kt.shape[2]
    if key_padding_mask is not None:
        for i, want in ((0, bsz), (1, src_len)):
            if key_padding_mask.shape[i] != want:  # (torch's native kernel: a view's error)
                raise (RuntimeError if fast else AssertionError)(
                    f"Expected key_padded_mask.shape[{i}] to be {want}, but got "
                    f"{key_padding_mask.shape[i]}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bh, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    scores = (q * math.sqrt(1.0 / head_dim)).matmul(kt)
    if causal:  # SDPA's causal mask: top-left aligned, over the keys as extended
        attn_mask = full((tgt_len, src_len), -math.inf, dtype=dtype, device=q.device).triu(1)
    if attn_mask is not None:
        if need_weights and not fast and attn_mask.dtype != dtype:  # torch's baddbmm refuses
            raise RuntimeError(f"multi_head_attention_forward: a float attn_mask of "
                               f"{attn_mask.dtype} with {dtype} inputs and need_weights=True; "
                               f"give the mask the inputs' dtype")
        scores = scores + attn_mask
    # need_weights runs torch's softmax (a fully masked row is NaN), else SDPA's (it is 0)
    safe = not (fast or need_weights) and attn_mask is not None
    weights = _safe_softmax(scores) if safe else softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    out = weights.matmul(v)  # (N*H, L, hd), the batch major
    e_out = out_proj_weight.shape[0]  # (not -1: an empty sequence leaves it undetermined)
    if batched and batch_first:  # rows in the batch-first order: the output projection's
        # result is the batch-first output itself, contiguous (the (L, N) order made it a
        # strided view, and the heads' gradient strided matrices for the batched GEMMs)
        out = out.reshape(bsz, num_heads, tgt_len, head_dim).transpose(1, 2)
        out = out.reshape(bsz * tgt_len, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(bsz, tgt_len, e_out)
    else:
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, e_out)
        if not batched:
            out = out.squeeze(1)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(1)
    return out, (weights if batched else weights.squeeze(0))
