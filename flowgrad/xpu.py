"""`flow.xpu`: the Intel XPU backend is not available; flowgrad runs on the CPU (NumPy).

>>> import flowgrad as flow
>>> flow.xpu.is_available(), flow.xpu.device_count()
(False, 0)
"""
from .absent_device import (  # noqa: F401 - the namespace torch scripts call
    device_count,
    empty_cache,
    is_available,
    manual_seed,
    synchronize,
)
