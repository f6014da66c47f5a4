"""`get_num_threads` / `set_num_threads`: the thread pool of the BLAS behind flowgrad's matmul
(what torch's intra-op threads are for flowgrad): MKL's where flowgrad loaded it (`blas.py`),
else NumPy's BLAS, set through threadpoolctl.

threadpoolctl is optional (`pip install flowgrad[threads]`): without it `get_num_threads`
reports the CPU count and `set_num_threads` warns once that the BLAS pool keeps its size.

>>> import flowgrad as flow
>>> n = flow.get_num_threads()
>>> flow.set_num_threads(1); flow.get_num_threads()
1
>>> flow.set_num_threads(n)
"""
from __future__ import annotations

import os

from . import blas
from ._warn import warn

_interop = [1]
_warned = [False]


def _controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def get_num_threads() -> int:
    """The number of threads the BLAS uses (the CPU count when that cannot be read)."""
    if blas.BACKEND == "mkl":
        return blas.get_num_threads()
    controller = _controller()
    pools = controller.select(user_api="blas").lib_controllers if controller else []
    if pools:
        return max(p.num_threads for p in pools)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)


def set_num_threads(num: int) -> None:
    """Set the BLAS thread pool to `num` threads (torch: intra-op threads)."""
    if not isinstance(num, int) or isinstance(num, bool) or num <= 0:
        raise RuntimeError(f"set_num_threads expects a positive integer, got {num!r}")
    mkl = blas.set_num_threads(num)
    controller = _controller()
    if controller is None:
        if not mkl and not _warned[0]:
            _warned[0] = True
            warn("flowgrad.set_num_threads: install threadpoolctl (pip install "
                 "flowgrad[threads]) to resize the BLAS thread pool; it keeps its "
                 "size", UserWarning, stacklevel=2)
        return
    for pool in controller.select(user_api="blas").lib_controllers:
        if pool.internal_api != "mkl":
            # beside MKL the other pools (NumPy's, SciPy's OpenBLAS) stay at one thread: two
            # pools spinning on the same cores slow both several times over
            pool.set_num_threads(1 if mkl else num)


def get_num_interop_threads() -> int:
    """The inter-op thread count: flowgrad runs one op at a time, so it is only recorded."""
    return _interop[0]


def set_num_interop_threads(num: int) -> None:
    """Recorded for torch compatibility (ops run one at a time)."""
    if not isinstance(num, int) or isinstance(num, bool) or num <= 0:
        raise RuntimeError(f"set_num_interop_threads expects a positive integer, got {num!r}")
    _interop[0] = num
