"""flowgrad.nn.parallel: DistributedDataParallel (on MPI) and DataParallel (on CPU, the
module itself), as torch.nn.parallel."""
from .data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
