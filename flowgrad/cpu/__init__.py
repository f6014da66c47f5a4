"""`flowgrad.cpu`: torch.cpu's names that scripts use: `is_available` and `amp`.

>>> import flowgrad as flow
>>> flow.cpu.is_available()
True
"""
from . import amp  # noqa: F401

__all__ = ["is_available", "amp"]


def is_available() -> bool:
    """True: the CPU is always there (torch.cpu.is_available)."""
    return True
