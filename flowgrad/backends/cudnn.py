"""`flow.backends.cudnn`: there is no cuDNN; the flags are recorded and change nothing.

>>> import flowgrad.backends.cudnn as cudnn
>>> cudnn.deterministic = True; cudnn.deterministic
True
"""
enabled = True
benchmark = False
benchmark_limit = 10
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    """False: flowgrad runs on the CPU."""
    return False


def version():
    """None: no cuDNN is loaded (torch's answer without one)."""
    return None


def is_acceptable(tensor) -> bool:
    """False: no tensor can use cuDNN here."""
    return False
