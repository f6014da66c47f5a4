"""torch.nn.attention: which kernels `F.scaled_dot_product_attention` may use.

On the CPU torch has two: the math one and a flash one that takes 4-D inputs of one head
width, without dropout. flowgrad computes both the same way; the choice decides, as in
torch, whether a call runs or raises (both off, or flash alone with inputs it cannot take).
The switches are `flowgrad.backends.cuda`'s (`enable_math_sdp`, ...), which `sdpa_kernel`
sets for its block.

>>> import flowgrad as flow
>>> import flowgrad.nn.functional as F
>>> from flowgrad.nn.attention import SDPBackend, sdpa_kernel
>>> q = flow.ones(1, 2, 3, 4)
>>> with sdpa_kernel([SDPBackend.MATH]):
...     F.scaled_dot_product_attention(q, q, q).shape
flowgrad.Size([1, 2, 3, 4])
"""
from __future__ import annotations

import contextlib
import enum

from ...backends import cuda as _cuda

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels, with torch's values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self):
        return f"SDPBackend.{self.name}"


_FLAG = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
         SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
         SDPBackend.CUDNN_ATTENTION: "cudnn", SDPBackend.OVERRIDEABLE: "overrideable"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Inside the block only `backends` (one or a list of SDPBackend) may run
    scaled_dot_product_attention; the switches are restored after it. `set_priority` (the
    order to try them in) changes nothing here: every kernel gives the same numbers."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend) or b is SDPBackend.ERROR:
            raise AssertionError(f"Backend must be an instance of SDPBackend, got {b!r}")
    saved = dict(_cuda._sdp)
    _cuda._sdp.update({flag: backend in backends for backend, flag in _FLAG.items()})
    try:
        yield {}
    finally:
        _cuda._sdp.update(saved)
