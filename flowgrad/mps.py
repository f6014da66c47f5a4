"""`flow.mps`: the Apple MPS backend is not available; flowgrad runs on the CPU (NumPy).

>>> import flowgrad as flow
>>> flow.mps.is_available(), flow.mps.device_count()
(False, 0)
"""
from .absent_device import (  # noqa: F401 - the namespace torch scripts call
    device_count,
    empty_cache,
    is_available,
    manual_seed,
    synchronize,
)
