"""Conv1d/2d/3d and ConvTranspose1d/2d/3d.

>>> import flowgrad as flow
>>> flow.nn.Conv2d(1, 2, 3, padding=1)
Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
"""
from __future__ import annotations

import math

from .. import functional as F
from .. import init
from ..module import Module
from ._utils import _pair, _reverse_repeat_tuple, _single, _triple, new_param

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None, *, output_padding=0):
        # (output_padding, the transposed subclasses', is keyword-only: torch's Conv2d takes
        # device and dtype tenth and eleventh)
        super().__init__()
        tup = {1: _single, 2: _pair, 3: _triple}[self._n]
        name = type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"['valid', 'same']")
            if padding == "same" and any(s != 1 for s in tup(stride)):
                raise ValueError("padding='same' is not supported for strided convolutions")
            if self._transposed:
                raise ValueError(f"{name}: padding must be a number or tuple, not a string")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride)
        self.padding = padding if isinstance(padding, str) else tup(padding)
        self.dilation = tup(dilation)
        self.transposed = self._transposed
        self.output_padding = tup(output_padding)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            # 'same': pad total d*(k-1), the extra on the right (torch's split)
            pad = [0, 0] * self._n
            if padding == "same":
                for d, k, i in zip(self.dilation, self.kernel_size,
                                   range(self._n - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    pad[2 * i], pad[2 * i + 1] = left, total - left
            self._reversed_padding_repeated_twice = tuple(pad)
        else:
            self._reversed_padding_repeated_twice = _reverse_repeat_tuple(self.padding, 2)
        if self._transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = new_param(*shape, dtype=dtype, device=device)
        if bias:
            self.bias = new_param(out_channels, dtype=dtype, device=device)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class _Conv(_ConvNd):
    _fn = "conv2d"

    def _conv_forward(self, input, weight, bias):
        fn = getattr(F, self._fn)
        pad = self._reversed_padding_repeated_twice
        padding = self.padding
        if isinstance(padding, str):
            # 'valid' and symmetric 'same' are plain integer paddings
            padding = tuple(pad[2 * i] for i in range(self._n - 1, -1, -1))
            if any(pad[2 * i] != pad[2 * i + 1] for i in range(self._n)):
                padding = None  # asymmetric 'same': pad explicitly below
        if self.padding_mode != "zeros" or padding is None:
            mode = "constant" if self.padding_mode == "zeros" else self.padding_mode
            padded = F.pad(input, pad, mode=mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) inputs."""

    _n, _fn = 1, "conv1d"


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) inputs.

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> m = nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1)
    >>> m.weight.shape
    flowgrad.Size([8, 3, 3, 3])
    >>> m(flow.zeros(2, 3, 32, 32)).shape
    flowgrad.Size([2, 8, 16, 16])
    """

    _n, _fn = 2, "conv2d"


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) inputs."""

    _n, _fn = 3, "conv3d"


class _ConvTransposeNd(_ConvNd):
    _transposed = True
    _fn = "conv_transpose2d"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype,
                         output_padding=output_padding)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._n
        output_size = list(output_size)
        if len(output_size) == n + 2:
            output_size = output_size[2:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {n + 2} elements (got {len(output_size)})")
        spatial = input.shape[-n:]
        result = []
        for d in range(n):
            min_size = ((spatial[d] - 1) * self.stride[d] - 2 * self.padding[d] +
                        self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            max_size = min_size + self.stride[d] - 1
            if not min_size <= output_size[d] <= max_size:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from "
                    f"{min_size} to {max_size} (for an input of {list(spatial)})")
            result.append(output_size[d] - min_size)
        return tuple(result)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size)
        return getattr(F, self._fn)(input, self.weight, self.bias, self.stride, self.padding,
                                    output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution (the gradient of Conv1d with respect to its input)."""

    _n, _fn = 1, "conv_transpose1d"


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution (the gradient of Conv2d with respect to its input)."""

    _n, _fn = 2, "conv_transpose2d"


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution."""

    _n, _fn = 3, "conv_transpose3d"
