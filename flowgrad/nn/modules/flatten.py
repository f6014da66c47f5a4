"""torch.nn.modules.flatten's names (the layers live in misc.py)."""
from .misc import Flatten, Unflatten

__all__ = ["Flatten", "Unflatten"]
