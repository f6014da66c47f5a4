"""Convolution weights in a given memory format, as torch.nn.utils.memory_format.

Each weight's data is replaced by a copy laid out in that format (channels_last: NHWC), as
torch's; the values (and every result computed from them) are unchanged.

>>> import flowgrad as flow
>>> m = convert_conv2d_weight_memory_format(flow.nn.Conv2d(2, 3, 2), flow.channels_last)
>>> m.weight.is_contiguous(memory_format=flow.channels_last)
True
"""
from __future__ import annotations

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, memory_format, kinds):
    from ..modules import conv

    classes = tuple(getattr(conv, k) for k in kinds)
    if isinstance(module, classes):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Give the weight of every nn.Conv2d / nn.ConvTranspose2d in `module` (itself included)
    the `memory_format` (e.g. flowgrad.channels_last); returns `module`."""
    return _convert(module, memory_format, ("Conv2d", "ConvTranspose2d"))


def convert_conv3d_weight_memory_format(module, memory_format):
    """Give the weight of every nn.Conv3d / nn.ConvTranspose3d in `module` (itself included)
    the `memory_format` (e.g. flowgrad.channels_last_3d); returns `module`."""
    return _convert(module, memory_format, ("Conv3d", "ConvTranspose3d"))
