"""A tensor's storage as torch's `Tensor.untyped_storage()` shows it: the bytes of the array
its elements live in (the root of its views), to compare and measure, not to compute with.

>>> import flowgrad as flow
>>> x = flow.arange(4.0)
>>> x[1:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
True
>>> x.untyped_storage().nbytes()
16
"""
from __future__ import annotations

import ctypes

import numpy as np

from .autograd.inplace import memory_of
from .autograd.interpreter import check_read
from .device import device_of, memory_owner
from .tensor import tensor_method

__all__ = ["UntypedStorage"]

_byte_bounds = np.lib.array_utils.byte_bounds


class UntypedStorage:
    """The memory under a tensor, in bytes (torch.UntypedStorage's reading methods)."""

    __slots__ = ("_root", "_tensor")

    def __init__(self, root, tensor=None):
        self._root, self._tensor = root, tensor  # (the tensor it was taken from)

    def data_ptr(self):
        return _byte_bounds(self._root)[0]

    def nbytes(self):
        low, high = _byte_bounds(self._root)
        return high - low

    size = nbytes
    __len__ = nbytes

    def element_size(self):
        return 1

    @property
    def device(self):
        return device_of(self._root)

    def _bytes(self):
        """A copy of the bytes, in memory order."""
        if self._tensor is not None:  # (the values: inside nn.Graph's build, refused)
            check_read(self._tensor, "untyped_storage()'s bytes")
        buffer = (ctypes.c_ubyte * self.nbytes()).from_address(self.data_ptr())
        return np.frombuffer(buffer, np.uint8).copy()

    def tolist(self):
        return [int(b) for b in self._bytes()]

    def __getitem__(self, index):
        return self._bytes()[index].tolist()

    def untyped(self):
        return self

    def is_shared(self):
        return False

    def is_pinned(self, device="cuda"):
        return False

    def __repr__(self):
        return f"UntypedStorage(device={self.device}) of size {self.nbytes()}"


@tensor_method()
def untyped_storage(self):
    """The storage of this tensor's elements (see `UntypedStorage`): views of one tensor have
    the same one, at the same `data_ptr()`."""
    return UntypedStorage(memory_owner(memory_of(self)), self)
