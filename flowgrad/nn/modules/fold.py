"""torch.nn.modules.fold's names (the layers live in extra.py)."""
from .extra import Fold, Unfold

__all__ = ["Fold", "Unfold"]
