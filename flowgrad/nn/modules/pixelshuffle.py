"""torch.nn.modules.pixelshuffle's names (the layers live in misc.py)."""
from .misc import PixelShuffle, PixelUnshuffle

__all__ = ["PixelShuffle", "PixelUnshuffle"]
