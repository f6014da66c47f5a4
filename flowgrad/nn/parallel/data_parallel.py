"""DataParallel: torch's single-process multi-GPU wrapper. flowgrad has no GPUs, and
torch without GPUs makes it the module itself behind a `module` attribute: so does this.

>>> import flowgrad as flow
>>> dp = flow.nn.DataParallel(flow.nn.Linear(2, 1))
>>> list(dp.state_dict())
['module.weight', 'module.bias']
"""
from __future__ import annotations

from ..module import Module


class DataParallel(Module):
    """Runs `module` in this process (no devices to scatter to), as torch without GPUs."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if device_ids:
            raise ValueError(f"DataParallel: device_ids {device_ids} name GPUs, which flowgrad "
                             f"does not have; leave device_ids None")
        self.module = module
        self.device_ids = []
        self.dim = dim
        self.output_device = None

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
