"""`flowgrad.cuda`: flowgrad runs on the CPU (NumPy) today, so torch scripts that ask
`torch.cuda.is_available()` take their CPU branch.

>>> import flowgrad as flow
>>> flow.cuda.is_available(), flow.cuda.device_count()
(False, 0)
"""
from __future__ import annotations

from .absent_device import (  # noqa: F401 - the calls torch scripts make
    device_count,
    empty_cache,
    is_available,
    manual_seed,
    manual_seed_all,
    synchronize,
)
from .amp import cuda_amp as amp  # noqa: F401 - torch.cuda.amp (autocast, GradScaler)


def memory_allocated(device=None) -> int:
    """0 bytes: nothing lives on a GPU."""
    return 0


def max_memory_allocated(device=None) -> int:
    """0 bytes: nothing lives on a GPU."""
    return 0


def reset_peak_memory_stats(device=None) -> None:
    """Nothing to reset: there is no CUDA memory."""


def is_bf16_supported(including_emulation=True) -> bool:
    """False: there is no CUDA device (as torch answers without one)."""
    return False
