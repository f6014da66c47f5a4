"""`flowgrad.cuda`: flowgrad runs on the CPU (NumPy) today, so torch scripts that ask
`torch.cuda.is_available()` take their CPU branch.

>>> import flowgrad as flow
>>> flow.cuda.is_available(), flow.cuda.device_count()
(False, 0)
"""
from __future__ import annotations

from .amp import cuda_amp as amp  # noqa: F401 - torch.cuda.amp (autocast, GradScaler)


def is_available() -> bool:
    """False: there is no CUDA backend yet."""
    return False


def device_count() -> int:
    """0: there is no CUDA backend yet."""
    return 0


def manual_seed(seed) -> None:
    """Accepted for torch compatibility; there is no CUDA generator to seed."""


def manual_seed_all(seed) -> None:
    """Accepted for torch compatibility; there is no CUDA generator to seed."""


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish when they return."""


def empty_cache() -> None:
    """Nothing to free: there is no CUDA memory (torch's call is safe without a GPU too)."""


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
