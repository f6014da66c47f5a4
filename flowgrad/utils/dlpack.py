"""DLPack: tensors shared with other libraries without a copy (torch.utils.dlpack).

`flow.from_dlpack(x)` takes any object with `__dlpack__` (a torch tensor, a NumPy array, a
JAX or CuPy array on the CPU) or a legacy DLPack capsule, and returns a flowgrad tensor over
the same memory; flowgrad tensors export themselves the same way (`torch.from_dlpack(t)`,
`np.from_dlpack(t)`), through their array's own export. As torch's, `__dlpack__` does not
export a tensor that requires grad (the other library would not see the graph): detach it first.

>>> import numpy as np
>>> import flowgrad as flow
>>> a = np.zeros(3, np.float32)
>>> t = flow.from_dlpack(a)
>>> t += 1
>>> a
array([1., 1., 1.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..autograd.interpreter import check_read
from ..device import resolve_device
from ..tensor import Tensor, tensor_method

__all__ = ["from_dlpack", "to_dlpack"]


class _Capsule:
    """A legacy `to_dlpack` capsule, given the protocol NumPy's from_dlpack asks for."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU: capsules come from host tensors here


def from_dlpack(ext_tensor, *, device=None, copy=None):
    """A tensor sharing `ext_tensor`'s memory (an object with `__dlpack__`, or a capsule);
    `copy=True` copies it, `copy=False` refuses to; `device` may only be the CPU."""
    if device is not None and resolve_device(device, "from_dlpack").type != "cpu":
        raise RuntimeError(f"from_dlpack: device={device} is not available: flowgrad takes "
                           f"host (CPU) memory")
    if isinstance(ext_tensor, Tensor):
        return Tensor._wrap(ext_tensor._data.copy()) if copy else ext_tensor
    source = ext_tensor if hasattr(ext_tensor, "__dlpack__") else _Capsule(ext_tensor)
    try:
        array = np.from_dlpack(source, copy=copy)
    except (BufferError, RuntimeError, TypeError) as error:
        device = source.__dlpack_device__()[0] if hasattr(source, "__dlpack_device__") else 1
        hint = ("flowgrad takes host (CPU) memory: move it to the CPU first" if device != 1
                else "NumPy's dtypes only (no bfloat16 or complex32), no tensor that requires "
                     "grad")
        raise RuntimeError(f"from_dlpack: cannot take {type(ext_tensor).__name__} ({error}); "
                           f"{hint}") from error
    return Tensor._wrap(array)


def to_dlpack(tensor):
    """A DLPack capsule over `tensor`'s memory (legacy form; prefer `__dlpack__`)."""
    if not hasattr(tensor, "_data"):
        raise TypeError(f"to_dlpack(): argument 'data' (position 1) must be Tensor, not "
                        f"{type(tensor).__name__}")
    return tensor._data.__dlpack__()


@tensor_method("__dlpack__")
def _dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    check_read(self, "__dlpack__ (an export of its memory)")
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    return self._data.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                                 copy=copy)


@tensor_method("__dlpack_device__")
def _dlpack_device(self):
    return self._data.__dlpack_device__()
