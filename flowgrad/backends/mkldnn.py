"""`flow.backends.mkldnn`: oneDNN is not used (NumPy's BLAS does the work); `enabled` is
recorded only.

>>> import flowgrad as flow
>>> flow.backends.mkldnn.is_available()
False
"""
enabled = True
deterministic = False


def is_available() -> bool:
    """False: flowgrad does not use oneDNN."""
    return False
