"""torch.utils.data._utils's layout, for code that imports from it (collate's registry)."""
from . import collate

__all__ = ["collate"]
