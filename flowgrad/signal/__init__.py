"""flowgrad.signal: torch.signal's window functions (`flow.signal.windows`).

>>> import flowgrad as flow
>>> flow.signal.windows.hann(5)
tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
"""
from . import windows

__all__ = ["windows"]
