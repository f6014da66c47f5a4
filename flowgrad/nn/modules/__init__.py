"""The layer modules, one file per family (as torch.nn.modules)."""
from . import activation, conv, linear, module, pooling, sparse
from .activation import *  # noqa: F401,F403
from .adaptive import *  # noqa: F401,F403
from .container import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .dropout import *  # noqa: F401,F403
from .extra import *  # noqa: F401,F403
from .lazy import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .misc import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .padding import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
from .sparse import *  # noqa: F401,F403
from .sync_batchnorm import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403

# torch keeps these classes in other submodules than flowgrad does: they are there too, so
# `from flowgrad.nn.modules.linear import LazyLinear` and the like work as torch's
_TORCH_PLACES = {
    activation: ("MultiheadAttention",),
    conv: ("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d"),
    linear: ("LazyLinear",),
    pooling: ("FractionalMaxPool2d", "FractionalMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d",
              "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d"),
    sparse: ("EmbeddingBag",),
}
for _module, _names in _TORCH_PLACES.items():
    for _name in _names:
        setattr(_module, _name, globals()[_name])
del _module, _names, _name
