"""torch.nn.modules.channelshuffle's names (the layer lives in misc.py)."""
from .misc import ChannelShuffle

__all__ = ["ChannelShuffle"]
