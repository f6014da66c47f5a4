"""The calls torch scripts make on an accelerator namespace (`torch.cuda`, `torch.mps`,
`torch.xpu`) answered for a machine without that device: flowgrad runs on the CPU (NumPy).

>>> from flowgrad import absent_device
>>> absent_device.is_available(), absent_device.device_count()
(False, 0)
"""


def is_available() -> bool:
    """False: the device is not present (flowgrad runs on the CPU)."""
    return False


def device_count() -> int:
    """0: the device is not present."""
    return 0


def manual_seed(seed) -> None:
    """Accepted for torch compatibility: there is no device generator to seed."""


def manual_seed_all(seed) -> None:
    """Accepted for torch compatibility: there is no device generator to seed."""


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish when they return."""


def empty_cache() -> None:
    """Nothing to free: there is no device memory (torch's call is safe without one too)."""
