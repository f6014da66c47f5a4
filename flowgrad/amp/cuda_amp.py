"""`flowgrad.cuda.amp`: torch.cuda.amp's deprecated spellings. flowgrad has no CUDA device,
so, as torch without CUDA, `autocast()` warns and runs the region without autocast and
`GradScaler()` warns and disables itself (`scale` returns the loss, `step` just steps).

>>> import warnings
>>> import flowgrad as flow
>>> from flowgrad.cuda.amp import GradScaler
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     GradScaler().is_enabled()
False
"""
from __future__ import annotations

import sys

from .. import dtypes as _dt
from .._warn import warn
from . import autocast_mode as _autocast_mode
from . import grad_scaler as _grad_scaler

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def old_spellings(device, default_dtype, module):
    """torch.<device>.amp's deprecated autocast and GradScaler classes: they warn, then are
    `autocast(device, ...)` and `GradScaler(device, ...)`, classes of `module`."""
    def deprecated(name):
        warn(f"`torch.{device}.amp.{name}(args...)` is deprecated. Please use "
             f"`torch.amp.{name}('{device}', args...)` instead.", FutureWarning,
             stacklevel=3)

    class autocast(_autocast_mode.autocast):  # noqa: N801 - torch's name
        def __init__(self, enabled=True, dtype=default_dtype, cache_enabled=True):
            deprecated("autocast")
            super().__init__(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_grad_scaler.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            deprecated("GradScaler")
            super().__init__(device, init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)

    autocast.__doc__ = f"`flowgrad.autocast('{device}', ...)` under torch.{device}.amp's name."
    GradScaler.__doc__ = (f"`flowgrad.amp.GradScaler('{device}', ...)` under torch.{device}"
                          f".amp's name.")
    for cls in (autocast, GradScaler):  # (where pickle finds them: a scaler pickles)
        cls.__module__, cls.__qualname__ = module, cls.__name__
    return autocast, GradScaler


autocast, GradScaler = old_spellings("cuda", _dt.float16, __name__)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch.cuda.amp.custom_fwd: `flowgrad.amp.custom_fwd(device_type='cuda')`."""
    return _autocast_mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """torch.cuda.amp.custom_bwd: `flowgrad.amp.custom_bwd(device_type='cuda')`."""
    return _autocast_mode.custom_bwd(bwd, device_type="cuda")


sys.modules.setdefault("flowgrad.cuda.amp", sys.modules[__name__])
