"""copy.deepcopy of a tensor, and a tensor's own attributes (`t.tag = ...`) in copies and
pickles, as torch's.

deepcopy copies a tensor's whole storage once per `copy.deepcopy` call (the memo holds it), so
views of one tensor copied together stay views of one copy, with their strides and offsets;
attributes are deep-copied, `.grad` too; a tensor with a grad_fn raises; a subclass's copy is
made by its `new_empty`, as torch's (which raises for a subclass whose `new_empty` gives
another type).

>>> import copy
>>> import flowgrad as flow
>>> x = flow.arange(4.0)
>>> x.tag = "mine"
>>> a, b = copy.deepcopy([x, x[1:3]])
>>> a[1] = 10.0
>>> b.tolist(), a.tag
([10.0, 2.0], 'mine')
"""
from __future__ import annotations

import copy
import copyreg
import ctypes

import numpy as np

from .autograd.grad_mode import no_grad
from .autograd.interpreter import check_read
from .device import STORAGES, memory_owner
from .overrides import (
    DisableTorchFunctionSubclass,
    handle_torch_function,
    has_torch_function_unary,
)
from .tensor import Tensor, attributes_of, tensor_method

_byte_bounds = np.lib.array_utils.byte_bounds
_TENSOR_SLOTS = frozenset(Tensor.__slots__)

_NOT_A_LEAF = (
    "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol "
    "at the moment.  If you were attempting to deepcopy a module, this may be because of a "
    "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001")
_OTHER_TYPE = (
    "The default implementation of __deepcopy__() for non-wrapper subclasses only works for "
    "subclass types that implement new_empty() and for which that function returns another "
    "instance of the same subclass. You should either properly implement new_empty() for "
    "your subclass or override __deepcopy__() if it is intended behavior for new_empty() to "
    "return an instance of a different type.")


def _copied_storage(array, memo):
    """A copy of `array` in a copy of the whole memory it lies in, made once per memo (per
    deepcopy call) for all the arrays over that memory: same strides, same offset."""
    if type(array) is not np.ndarray or array.size == 0:
        return array.copy()
    root = memory_owner(array)
    low, high = _byte_bounds(root)
    first, end = _byte_bounds(array)
    if first < low or end > high:  # (a strided view reaching past its owner's elements)
        return array.copy(order="K")
    key = ("flowgrad storage", id(root))
    copied = memo.get(key)
    if copied is None:
        buffer = np.empty(high - low, np.uint8)
        ctypes.memmove(buffer.ctypes.data, low, high - low)
        memo[key] = copied = (buffer, low)
        STORAGES[id(buffer)] = buffer
        memo.setdefault(id(memo), []).append(root)  # (copy's keep-alive: the id stays its)
    buffer, low = copied
    start = array.__array_interface__["data"][0]
    new = np.ndarray(array.shape, array.dtype, buffer=buffer, offset=start - low,
                     strides=array.strides)
    if not array.flags.writeable:  # (an expanded view stays one that refuses writes)
        new.flags.writeable = False
    return new


@tensor_method("__deepcopy__")
def deepcopy_tensor(self, memo):
    """copy.deepcopy(t): a leaf's copy over a copy of its storage, with its requires_grad,
    `.grad` and attributes (see the module's docstring)."""
    if has_torch_function_unary(self):
        return handle_torch_function(Tensor.__deepcopy__, (self,), self, memo)
    check_read(self, "copy.deepcopy()")
    if not self.is_leaf:  # (as torch's: a stale view's history is brought up to date first)
        raise RuntimeError(_NOT_A_LEAF)
    if id(self) in memo:
        return memo[id(self)]
    with no_grad():
        data = _copied_storage(self._data, memo)
        if type(self) is Tensor:
            new = Tensor._wrap(data)
        else:
            with DisableTorchFunctionSubclass():
                new = self.new_empty([])
            if type(new) is not type(self):
                raise RuntimeError(_OTHER_TYPE)
            new._data = data
        if self.requires_grad:
            new.requires_grad_()
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        for slot in copyreg._slotnames(type(self)):
            if slot not in _TENSOR_SLOTS and hasattr(self, slot):
                setattr(new, slot, copy.deepcopy(getattr(self, slot), memo))
        state = attributes_of(self)
        if state:
            new.__dict__ = copy.deepcopy(state, memo)
    memo[id(self)] = new
    return new
