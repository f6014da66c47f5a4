"""torch.nn.modules.distance's names (the layers live in misc.py)."""
from .misc import CosineSimilarity, PairwiseDistance

__all__ = ["CosineSimilarity", "PairwiseDistance"]
