"""Fold/Unfold (col2im/im2col), EmbeddingBag, MaxUnpool1d/2d/3d, LPPool1d/2d/3d and
FractionalMaxPool2d/3d: modules over the functional forms of the same names.

>>> import flowgrad as flow
>>> flow.nn.Unfold(kernel_size=2)(flow.ones(1, 3, 4, 4)).shape
flowgrad.Size([1, 12, 9])
"""
from __future__ import annotations

from .. import functional as F
from ..module import Module
from ._utils import _ntuple
from .sparse import Embedding

__all__ = ["Fold", "Unfold", "EmbeddingBag", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d",
           "LPPool1d", "LPPool2d", "LPPool3d", "FractionalMaxPool2d", "FractionalMaxPool3d"]


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) as columns: (N, C * kh * kw, L) (F.unfold).

    >>> import flowgrad as flow
    >>> flow.nn.Unfold(2, stride=2)(flow.ones(1, 1, 4, 4)).shape
    flowgrad.Size([1, 4, 4])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """Sum columns of sliding blocks back into (N, C, *output_size) (F.fold).

    >>> import flowgrad as flow
    >>> flow.nn.Fold((3, 3), 2)(flow.ones(1, 4, 4)).shape
    flowgrad.Size([1, 1, 3, 3])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


class EmbeddingBag(Embedding):
    """Sums, means or maxima of bags of embeddings (F.embedding_bag), without materialising
    the per-index embeddings' sequence for the caller.

    >>> import flowgrad as flow
    >>> bag = flow.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(flow.tensor([1, 2, 4, 5]), flow.tensor([0, 2])).shape
    flowgrad.Size([2, 3])
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, device=device, dtype=dtype)
        self.mode = mode
        self.include_last_offset = include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}{self._norm_repr()}, mode={self.mode!r}"
        return s + ("" if self.padding_idx is None else f", padding_idx={self.padding_idx}")

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is `embeddings` (2-D), frozen unless freeze=False."""
        if embeddings.dim() != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional, got "
                             f"{embeddings.dim()}-D")
        bag = cls(*embeddings.shape, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag


class _MaxUnpoolNd(Module):
    _fn = "max_unpool2d"
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        as_tuple = _ntuple(self._nd)
        self.kernel_size = as_tuple(kernel_size)
        self.stride = as_tuple(stride if stride is not None else kernel_size)
        self.padding = as_tuple(padding)

    def forward(self, input, indices, output_size=None):
        return getattr(F, self._fn)(input, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d given its indices: zeros except at the maxima.

    >>> import flowgrad as flow
    >>> flow.nn.MaxUnpool1d(2)(flow.tensor([[[4.0]]]), flow.tensor([[[0]]]))
    tensor([[[4., 0.]]])
    """
    _fn, _nd = "max_unpool1d", 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d given its indices (flat over H * W)."""
    _fn = "max_unpool2d"


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d given its indices (flat over D * H * W)."""
    _fn, _nd = "max_unpool3d", 3


class _LPPoolNd(Module):
    _fn = "lp_pool2d"

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, input):
        return getattr(F, self._fn)(input, float(self.norm_type), self.kernel_size, self.stride,
                                    self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling over (N, C, L): (sum of x**p over each window) ** (1/p).

    >>> import flowgrad as flow
    >>> flow.nn.LPPool1d(2, 2)(flow.tensor([[[3.0, 4.0]]]))
    tensor([[[5.]]])
    """
    _fn = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W)."""
    _fn = "lp_pool2d"


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W)."""
    _fn = "lp_pool3d"


class _FractionalMaxPoolNd(Module):
    _fn = "fractional_max_pool2d"

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, "
                             f"or a pooling ratio (exactly one)")
        self.kernel_size, self.output_size, self.output_ratio = (kernel_size, output_size,
                                                                 output_ratio)
        self.return_indices = return_indices
        # a buffer, as torch's: in the state_dict, and cast and moved with the module
        self.register_buffer("_random_samples", _random_samples)

    def forward(self, input):
        return getattr(F, self._fn)(input, self.kernel_size, self.output_size, self.output_ratio,
                                    self.return_indices, self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over pseudo-random windows to output_size (or output_ratio of the input).

    >>> import flowgrad as flow
    >>> flow.nn.FractionalMaxPool2d(2, output_ratio=0.5)(flow.ones(1, 1, 8, 8)).shape
    flowgrad.Size([1, 1, 4, 4])
    """
    _fn = "fractional_max_pool2d"


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-D fractional max pooling over (N, C, T, H, W)."""
    _fn = "fractional_max_pool3d"
