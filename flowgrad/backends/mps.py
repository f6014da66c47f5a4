"""`flow.backends.mps`: Apple's Metal backend is not available (flowgrad runs on NumPy).

>>> import flowgrad as flow
>>> flow.backends.mps.is_available(), flow.backends.mps.is_built()
(False, False)
"""


def is_available() -> bool:
    """False: there is no MPS device."""
    return False


def is_built() -> bool:
    """False: flowgrad has no MPS build."""
    return False
