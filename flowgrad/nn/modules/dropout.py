"""Dropout layers: active in training mode, the identity in eval mode.

>>> import flowgrad as flow
>>> flow.nn.Dropout(0.2)
Dropout(p=0.2, inplace=False)
"""
from __future__ import annotations

from .. import functional as F
from ..module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


class _DropoutNd(Module):
    _fn = "dropout"

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability p and scale the rest by 1/(1-p).

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> g = flow.manual_seed(0)
    >>> m = nn.Dropout(p=0.5)
    >>> y = m(flow.ones(1000))
    >>> sorted(set(y.tolist()))
    [0.0, 2.0]
    >>> m.eval()(flow.ones(3))
    tensor([1., 1., 1.])
    """

    _fn = "dropout"


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) inputs."""

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) inputs."""

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) inputs."""

    _fn = "dropout3d"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps a SELU network's mean and variance."""

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels (torch.nn.FeatureAlphaDropout); identity in eval mode."""
    _fn = "feature_alpha_dropout"
