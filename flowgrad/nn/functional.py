"""flowgrad.nn.functional: the functional forms of layers, activations and losses.

Each op family module lists its public names in `__all__`; this module gathers them.
"""
from ..ops.activation import *  # noqa: F401,F403
from ..ops.attention import *  # noqa: F401,F403
from ..ops.conv import *  # noqa: F401,F403
from ..ops.elementwise import sigmoid, tanh  # noqa: F401
from ..ops.linalg import bilinear, linear  # noqa: F401
from ..ops.loss import *  # noqa: F401,F403
from ..ops.loss_ctc import *  # noqa: F401,F403
from ..ops.loss_linear import *  # noqa: F401,F403
from ..ops.loss_more import *  # noqa: F401,F403
from ..ops.nn_extra import (  # noqa: F401 - F's names only (torch.*'s differ)
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    channel_shuffle,
    max_pool3d_with_indices,
    pdist,
    upsample_bilinear,
    upsample_nearest,
)
from ..ops.nn_misc import *  # noqa: F401,F403
from ..ops.normalization import *  # noqa: F401,F403
from ..ops.pad import *  # noqa: F401,F403
from ..ops.pool import *  # noqa: F401,F403
from ..ops.pool_more import *  # noqa: F401,F403
from ..ops.spatial import *  # noqa: F401,F403
from . import grad  # noqa: F401 - F.grad is torch.nn.grad
