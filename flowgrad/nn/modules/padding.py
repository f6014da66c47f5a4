"""Padding layers: constant (zero), reflection, replication and circular, 1-3 D.

>>> import flowgrad as flow
>>> flow.nn.ZeroPad2d(1)
ZeroPad2d((1, 1, 1, 1))
"""
from __future__ import annotations

from .. import functional as F
from ..module import Module
from ._utils import _ntuple

__all__ = ["ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d",
           "ZeroPad3d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
           "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d"]


class _PadNd(Module):
    _n = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(2 * self._n)(padding)
        if len(self.padding) != 2 * self._n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of "
                             f"{2 * self._n} ints, got {padding}")

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last 1 dim(s) with `value`; `padding` is an int or a 2-tuple (left, right)."""
    _n = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dim(s) with `value`; `padding` is an int or a 4-tuple (left, right, top,
    bottom)."""
    _n = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dim(s) with `value`; `padding` is an int or a 6-tuple (left, right, top,
    bottom, front, back)."""
    _n = 3


class _ZeroPadNd(_PadNd):
    def forward(self, input):
        return F.pad(input, self.padding, "constant", 0.0)


class ZeroPad1d(_ZeroPadNd):
    """Pad the last 1 dim(s) with zeros; `padding` is an int or a 2-tuple."""
    _n = 1


class ZeroPad2d(_ZeroPadNd):
    """Pad the last 2 dim(s) with zeros; `padding` is an int or a 4-tuple."""
    _n = 2


class ZeroPad3d(_ZeroPadNd):
    """Pad the last 3 dim(s) with zeros; `padding` is an int or a 6-tuple."""
    _n = 3


class ReflectionPad1d(_PadNd):
    """Pad the last 1 dim(s) by reflection at the edge (edge not repeated); padding < dim size."""
    _n, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last 2 dim(s) by reflection at the edge (edge not repeated); padding < dim size."""
    _n, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last 3 dim(s) by reflection at the edge (edge not repeated); padding < dim size."""
    _n, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last 1 dim(s) by repeating the edge value."""
    _n, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last 2 dim(s) by repeating the edge value."""
    _n, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last 3 dim(s) by repeating the edge value."""
    _n, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input):
        if input.dim() not in (self._n + 1, self._n + 2):  # torch's _check_input_dim
            raise ValueError(f"expected {self._n + 1}D or {self._n + 2}D input (got "
                             f"{input.dim()}D input)")
        return F.pad(input, self.padding, self._mode)


class CircularPad1d(_CircularPadNd):
    """Pad the last 1 dim(s) by wrapping around (periodic padding)."""
    _n, _mode = 1, "circular"


class CircularPad2d(_CircularPadNd):
    """Pad the last 2 dim(s) by wrapping around (periodic padding)."""
    _n, _mode = 2, "circular"


class CircularPad3d(_CircularPadNd):
    """Pad the last 3 dim(s) by wrapping around (periodic padding)."""
    _n, _mode = 3, "circular"
