"""torch.nn.modules.upsampling's names (the layers live in misc.py)."""
from .misc import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d"]
