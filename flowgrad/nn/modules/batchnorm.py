"""torch.nn.modules.batchnorm's names (the layers live in normalization.py, lazy.py and
sync_batchnorm.py): `from flowgrad.nn.modules.batchnorm import _BatchNorm` works as torch's."""
from .lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d
from .normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase
from .sync_batchnorm import SyncBatchNorm

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "SyncBatchNorm", "_BatchNorm", "_NormBase"]
