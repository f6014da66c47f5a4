"""`flow.accelerator`: torch's device-agnostic accelerator API. flowgrad has no accelerator
(it computes on the CPU with NumPy), so scripts take their CPU branch.

>>> import flowgrad as flow
>>> flow.accelerator.is_available(), flow.accelerator.current_accelerator()
(False, None)
"""


def is_available() -> bool:
    """False: there is no accelerator, only the CPU."""
    return False


def current_accelerator(check_available=False):
    """None: no accelerator (torch returns None on a CPU-only build)."""
    return None


def device_count() -> int:
    """0: no accelerator devices."""
    return 0


def current_device_index() -> int:
    """Refused as torch refuses it without an accelerator."""
    raise RuntimeError("Cannot access accelerator device when none is available.")


current_device_idx = current_device_index


def set_device_index(device) -> None:
    """Refused: there is no accelerator device to select."""
    raise RuntimeError("flowgrad.accelerator: there is no accelerator to select; flowgrad "
                       "runs on the 'cpu' device")


set_device_idx = set_device_index


def synchronize(device=None) -> None:
    """Nothing to wait for: CPU ops finish when they return."""
