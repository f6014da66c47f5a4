"""MultiheadAttention and the Transformer family (encoder/decoder layers and stacks).

Parameter names follow torch (`in_proj_weight`, `out_proj.weight`, `linear1.weight`,
`norm1.weight`), so state dicts map one to one.

>>> import flowgrad as flow
>>> mha = flow.nn.MultiheadAttention(8, 2)
>>> out, w = mha(flow.randn(5, 3, 8), flow.randn(4, 3, 8), flow.randn(4, 3, 8))
>>> tuple(out.shape), tuple(w.shape)
((5, 3, 8), (3, 5, 4))
"""
from __future__ import annotations

import copy
import math

from ...autograd.grad_mode import is_grad_enabled
from ...ops.attention import _multi_head_attention, canonical_mask
from ...ops.creation import arange, full
from ...ops.elementwise import where
from .. import functional as F
from .. import init
from ..module import Module
from .activation import GELU, ReLU
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear, NonDynamicallyQuantizableLinear
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]


def _float_mask(mask, name, dtype):
    """Bool masks (True = masked out) become additive -inf masks; float masks pass."""
    return canonical_mask(mask, name, dtype)


def _causal_mask(size, dtype, device=None, source=None):
    return full((size, size if source is None else source), -math.inf, dtype=dtype,
                device=device).triu(1)


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention, torch's layout (L, N, E) or batch_first.

    Returns (output, weights): weights (N, L, S) averaged over heads, (N, H, L, S) with
    average_attn_weights=False, None with need_weights=False.

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> g = flow.manual_seed(0)
    >>> mha = nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
    >>> x = flow.randn(2, 5, 8)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    (flowgrad.Size([2, 5, 8]), flowgrad.Size([2, 5, 5]))
    >>> weights.sum(-1).allclose(flow.ones(2, 5))
    True
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        from ._utils import new_param

        if not self._qkv_same_embed_dim:
            self.q_proj_weight = new_param(embed_dim, embed_dim, dtype=dtype, device=device)
            self.k_proj_weight = new_param(embed_dim, self.kdim, dtype=dtype, device=device)
            self.v_proj_weight = new_param(embed_dim, self.vdim, dtype=dtype, device=device)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = new_param(3 * embed_dim, embed_dim, dtype=dtype, device=device)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = new_param(3 * embed_dim, dtype=dtype, device=device)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = new_param(1, 1, embed_dim, dtype=dtype, device=device)
            self.bias_v = new_param(1, 1, embed_dim, dtype=dtype, device=device)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _torch_fast_path(self, query, key, value, key_padding_mask, attn_mask):
        """Whether torch would run this call on its fast path (native MHA kernel)."""
        if any(m is not None and m.is_floating_point() for m in (key_padding_mask, attn_mask)):
            return False
        if self.training or query.dim() != 3 or not (query is key and key is value) or \
                not self.batch_first or self.num_heads % 2 or self.bias_k is not None or \
                self.add_zero_attn or not self._qkv_same_embed_dim or \
                self.in_proj_bias is None or query.dtype != self.in_proj_weight.dtype or \
                query.dtype != self.in_proj_bias.dtype:
            return False
        args = (query, self.in_proj_weight, self.in_proj_bias, self.out_proj.weight,
                self.out_proj.bias)
        return not (is_grad_enabled() and any(t is not None and t.requires_grad
                                              for t in args))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        if query.dim() not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but "
                                 f"received {query.dim()}-D query tensor")
        if is_causal and attn_mask is not None:  # torch checks the mask's dtype even where
            canonical_mask(attn_mask, "attn_mask", query.dtype)  # the hint will replace it
        fast = self._torch_fast_path(query, key, value, key_padding_mask, attn_mask)
        return self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                            average_attn_weights, is_causal, fast)

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                average_attn_weights, is_causal, fast):
        """forward, on torch's fast path (`fast`: its native kernel) or not: F's
        multi_head_attention_forward on the layer's weights, batch first or not."""
        separate = not self._qkv_same_embed_dim
        return _multi_head_attention(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, self.training, key_padding_mask,
            need_weights, attn_mask, separate, self.q_proj_weight, self.k_proj_weight,
            self.v_proj_weight, None, None, average_attn_weights, is_causal,
            batch_first=self.batch_first and query.dim() == 3, fast=fast)


def _relu_or_gelu(activation):
    """torch's activation_relu_or_gelu: 1 relu, 2 gelu (what its fast path runs), else 0."""
    if activation is F.relu or isinstance(activation, ReLU):
        return 1
    if activation is F.gelu or isinstance(activation, GELU):
        return 2
    return 0


def _activation(activation):
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return F.gelu
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")
    return activation


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with residual, dropout and LayerNorm
    (after the residual, or before with norm_first=True).

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> g = flow.manual_seed(0)
    >>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32,
    ...                                    batch_first=True)
    >>> layer(flow.randn(2, 7, 16)).shape
    flowgrad.Size([2, 7, 16])
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.activation_relu_or_gelu = _relu_or_gelu(self.activation)

    def _fast_layout(self):
        """The layer's own part of torch's fast-path conditions (its encoder's nested-tensor
        path asks the same): batch first, packed in-projection with a bias, relu or gelu,
        one norm eps, an even number of heads."""
        sa = self.self_attn
        return sa.batch_first and sa.in_proj_bias is not None and sa._qkv_same_embed_dim \
            and bool(self.activation_relu_or_gelu) and self.norm1.eps == self.norm2.eps \
            and sa.num_heads % 2 == 0

    def _torch_fast_path(self, src):
        """Whether torch runs this call as its native encoder-layer kernel."""
        sa = self.self_attn
        if src.dim() != 3 or self.training or not self._fast_layout():
            return False
        if any(getattr(m, "_forward_hooks", None) or getattr(m, "_forward_pre_hooks", None)
               for m in self.modules()):
            return False
        args = (src, sa.in_proj_weight, sa.in_proj_bias, sa.out_proj.weight, sa.out_proj.bias,
                self.norm1.weight, self.norm1.bias, self.norm2.weight, self.norm2.bias,
                self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias)
        return not (is_grad_enabled() and any(t is not None and t.requires_grad
                                              for t in args))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        # as torch: both masks become float before self-attention sees them (so its own fast
        # path, which takes bool masks only, never runs here)
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask",
                                           src.dtype)
        src_mask = _float_mask(src_mask, "src_mask", src.dtype)
        fast = self._torch_fast_path(src)
        if fast:  # torch's native kernel reads any nonzero mask entry as "masked"
            src_mask = None if src_mask is None else src_mask != 0
            src_key_padding_mask = None if src_key_padding_mask is None else \
                src_key_padding_mask != 0
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal,
                                   fast)
            x = x + self._ff_block(self.norm2(x), fast)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal,
                                              fast))
            x = self.norm2(x + self._ff_block(x, fast))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False, fast=False):
        if fast:
            x = self.self_attn._attend(x, x, x, key_padding_mask, False, attn_mask, True,
                                       is_causal, True)[0]
        else:
            x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                               need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x, fast=False):
        # torch's native kernel runs its own relu or exact gelu: GELU(approximate='tanh')
        # counts as gelu there and is computed exactly
        act = (F.relu, F.gelu)[self.activation_relu_or_gelu - 1] if fast else self.activation
        x = self.linear2(self.dropout(act(self.linear1(x))))
        return self.dropout2(x)


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over `memory`, and a feed-forward block."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


def _get_clones(module, n):
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer`, then an optional norm."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        layer = encoder_layer
        # torch's conditions for running a padded batch as a nested tensor (in eval)
        self.use_nested_tensor = enable_nested_tensor and \
            isinstance(layer, TransformerEncoderLayer) and not layer.norm_first and \
            layer._fast_layout()

    def _nested_padding(self, src, mask, key_padding_mask):
        """When torch would run the layers on a nested tensor: (the padding mask the layers
        see, the positions that come out 0), else None. The nested tensor keeps each row's
        first `length` positions; torch's mask check (a mask not left aligned keeps the
        padded path) is computed by ops, so a compiled plan makes it per call."""
        first = self.layers[0]
        if self.use_nested_tensor and not first.training and src.dim() == 3 and \
                key_padding_mask is not None and self.mask_check and \
                tuple(key_padding_mask.shape) != tuple(src.shape[:2]):
            # torch's left-alignment check runs before its other conditions, and refuses
            raise RuntimeError(f"TransformerEncoder: src_key_padding_mask of shape "
                               f"{tuple(key_padding_mask.shape)} for src of shape "
                               f"{tuple(src.shape)}: Mask size should match input size "
                               f"{tuple(src.shape[:2])}")
        if not self.use_nested_tensor or first.training or src.dim() != 3 or \
                key_padding_mask is None or mask is not None or \
                not first._torch_fast_path(src):
            return None
        keep = key_padding_mask == 0  # (torch's logical_not of the float mask)
        lengths = keep.sum(1, keepdim=True)
        pad = arange(src.shape[1], device=src.device) >= lengths
        if not self.mask_check:
            return pad, pad
        aligned = ~(keep[:, 1:] & ~keep[:, :-1]).any()
        return where(aligned, pad, ~keep), pad & aligned

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        src_key_padding_mask = _float_mask(src_key_padding_mask, "src_key_padding_mask",
                                           src.dtype)
        mask = _float_mask(mask, "mask", src.dtype)
        nested = self._nested_padding(src, mask, src_key_padding_mask)
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, is_causal=bool(is_causal),
                      src_key_padding_mask=src_key_padding_mask if nested is None
                      else nested[0])
        if nested is not None:
            out = where(nested[1].unsqueeze(-1), 0.0, out)
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer`, then an optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need"."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, dtype=dtype)
            self.encoder = TransformerEncoder(
                layer, num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, dtype=dtype)
            self.decoder = TransformerDecoder(
                layer, num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self):
        for p in self.parameters():
            if p.dim() > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        batched = src.dim() == 3
        if batched and src.shape[0 if self.batch_first else 1] != \
                tgt.shape[0 if self.batch_first else 1]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """A float mask with -inf above the diagonal (position i sees positions <= i)."""
        from ... import dtypes as _dt

        dt = _dt.as_dtype(dtype) if dtype is not None else _dt.get_default_dtype()
        return _causal_mask(sz, dt, device)
