"""Embedding: a lookup table of vectors.

>>> import flowgrad as flow
>>> flow.nn.Embedding(10, 3, padding_idx=0)
Embedding(10, 3, padding_idx=0)
"""
from __future__ import annotations

from ...autograd.grad_mode import no_grad
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from ._utils import new_param

__all__ = ["Embedding"]


class Embedding(Module):
    """Rows of `weight` (num_embeddings, embedding_dim) picked by integer indices; the row
    at padding_idx starts at zero and gets no gradient.

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> emb = nn.Embedding(10, 3, padding_idx=0)
    >>> emb(flow.tensor([[0, 2], [4, 0]])).shape
    flowgrad.Size([2, 2, 3])
    >>> emb.weight[0]
    tensor([0., 0., 0.], grad_fn=<SelectBackward0>)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = new_param(num_embeddings, embedding_dim, dtype=dtype, device=device,
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with no_grad():
                self.weight._data[self.padding_idx] = 0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def _norm_repr(self):
        """The max_norm, norm_type, scale_grad_by_freq part of the repr (EmbeddingBag's too)."""
        s = "" if self.max_norm is None else f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s + (", scale_grad_by_freq=True" if self.scale_grad_by_freq is not False else "")

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        s += self._norm_repr()
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is `embeddings` (2-D), frozen unless freeze=False."""
        if embeddings.dim() != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional, got "
                             f"{embeddings.dim()}-D")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
