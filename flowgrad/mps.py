"""`flow.mps`: the Apple MPS backend is not available; flowgrad runs on the CPU (NumPy).

>>> import flowgrad as flow
>>> flow.mps.is_available(), flow.mps.device_count()
(False, 0)
"""


def is_available() -> bool:
    """False: there is no Apple MPS device."""
    return False


def device_count() -> int:
    """0: there is no Apple MPS device."""
    return 0


def manual_seed(seed) -> None:
    """Accepted for torch compatibility: there is no mps generator to seed."""


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish when they return."""


def empty_cache() -> None:
    """Nothing to free: there is no mps memory."""
