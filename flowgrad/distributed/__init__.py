"""flowgrad.distributed: data-parallel training on MPI, with torch.distributed's API.

Start the ranks with the launcher (or `mpirun`), then call `init_process_group()`:

    python -m flowgrad.distributed.run --nproc-per-node 2 train.py --epochs 3

Collectives work on tensors in place (`all_reduce`, `broadcast`, ...), `async_op=True`
returns a `Work` handle; `flowgrad.nn.parallel.DistributedDataParallel` averages
gradients during backward. Importing this package does not import mpi4py (that starts MPI):
`init_process_group` does.

>>> import flowgrad.distributed as dist
>>> dist.is_initialized(), dist.ReduceOp.SUM
(False, <RedOpType.SUM: 0>)
"""
from . import nn
from .collectives import *  # noqa: F401,F403
from .process_group import (
    _STATE,
    DEFAULT_TIMEOUT,
    NON_GROUP_MEMBER,
    DebugLevel,
    ProcessGroup,
    RedOpType,
    ReduceOp,
    Work,
    barrier,
    destroy_process_group,
    get_backend,
    get_debug_level,
    get_rank,
    get_world_size,
    init_process_group,
    is_available,
    is_initialized,
    new_group,
    set_debug_level,
)


class GroupMember:
    """torch's `GroupMember`: `NON_GROUP_MEMBER` is what `new_group` gives non-members."""

    NON_GROUP_MEMBER = NON_GROUP_MEMBER


class _World:
    """`dist.group.WORLD`: the default process group (None before init)."""

    @property
    def WORLD(self):
        return _STATE.default


group = _World()


def get_global_rank(group, group_rank):
    """The world rank of `group_rank` in `group`."""
    return group.ranks[group_rank]


def get_group_rank(group, global_rank):
    """The rank in `group` of world rank `global_rank`."""
    return group.group_rank(global_rank, "get_group_rank")
