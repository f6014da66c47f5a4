"""Devices and their array modules. Kernels take `xp` from here, never `import numpy`
themselves, so a CuPy backend needs no kernel rewritten.

>>> import flowgrad as flow
>>> flow.device("cpu")
device(type='cpu')
"""
from __future__ import annotations

import numpy as np


class device:  # noqa: N801 - torch's name
    """Where a tensor's storage lives; `xp` is the array module its kernels use."""

    __slots__ = ("type", "index", "xp")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        spec = str(spec)
        if ":" in spec:
            spec, idx = spec.split(":")
            index = int(idx)
        if spec != "cpu":
            raise RuntimeError(
                f"device {spec!r} is not available: flowgrad runs on the 'cpu' device (NumPy); "
                f"use device='cpu'")
        self.type, self.index, self.xp = spec, index, np

    def __eq__(self, other):
        try:
            other = device(other)
        except RuntimeError:
            return False
        return self.type == other.type

    def __hash__(self):
        return hash(self.type)

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type


CPU = device("cpu")


# array type -> the module whose kernels handle it; a CuPy device would add
# {cupy.ndarray: cupy} here and every kernel would run on it unchanged
ARRAY_MODULES = {np.ndarray: np}


def array_module(array):
    """The array module that owns `array` (NumPy for CPU tensors).

    >>> import numpy as np
    >>> array_module(np.zeros(2)) is np
    True
    """
    return ARRAY_MODULES.get(type(array), np)


def check_device(spec, op_name):
    """Nothing for None or the CPU; else the RuntimeError naming `op_name` for a device
    flowgrad cannot honour (e.g. 'cuda': there is no CUDA backend).

    >>> check_device("cpu:0", "zeros")
    >>> check_device("cuda", "zeros")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    RuntimeError: zeros(): device 'cuda' is not available: flowgrad runs on the 'cpu' ...
    """
    if spec is None or spec is CPU or spec == "cpu":
        return
    try:
        device(spec)
    except RuntimeError as error:
        raise RuntimeError(f"{op_name}(): {error}") from None
