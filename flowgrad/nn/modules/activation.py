"""Activation functions as modules; each calls its `flowgrad.nn.functional` form.

>>> import flowgrad as flow
>>> flow.nn.ReLU()(flow.tensor([-1.0, 2.0]))
tensor([0., 2.])
"""
from __future__ import annotations

from ..._warn import warn
from .. import functional as F
from .. import init
from ..module import Module
from ._utils import new_param

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
           "Softplus", "Softsign", "Hardtanh", "Hardsigmoid", "Hardswish", "Hardshrink",
           "Softshrink", "Tanhshrink", "Threshold", "PReLU", "RReLU", "GLU", "LogSigmoid",
           "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softmin", "Softmax2d"]


class _Inplace(Module):
    """An activation with only an `inplace` flag."""

    _fn = "relu"

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _Plain(Module):
    """An activation with no settings."""

    _fn = "sigmoid"

    def forward(self, input):
        return getattr(F, self._fn)(input)


class ReLU(_Inplace):
    """max(0, x).

    >>> import flowgrad as flow
    >>> from flowgrad import nn
    >>> nn.ReLU()(flow.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    _fn = "relu"


class ReLU6(_Inplace):
    """min(max(0, x), 6)."""

    _fn = "relu6"


class SELU(_Inplace):
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) with the self-normalising
    constants."""

    _fn = "selu"


class SiLU(_Inplace):
    """x * sigmoid(x)."""

    _fn = "silu"


class Mish(_Inplace):
    """x * tanh(softplus(x))."""

    _fn = "mish"


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6."""

    _fn = "hardsigmoid"


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6."""

    _fn = "hardswish"


class Sigmoid(_Plain):
    """1 / (1 + exp(-x)), elementwise (torch.nn.Sigmoid)."""
    _fn = "sigmoid"


class Tanh(_Plain):
    """Hyperbolic tangent, elementwise (torch.nn.Tanh)."""
    _fn = "tanh"


class Softsign(_Plain):
    """x / (1 + |x|)."""

    _fn = "softsign"


class Tanhshrink(_Plain):
    """x - tanh(x)."""

    _fn = "tanhshrink"


class LogSigmoid(_Plain):
    """log(sigmoid(x)), computed stably."""

    _fn = "logsigmoid"


class LeakyReLU(Module):
    """x if x >= 0 else negative_slope * x."""

    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                           else "")


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1)."""

    _fn = "elu"

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return getattr(F, self._fn)(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""

    _fn = "celu"


class GELU(Module):
    """x * Phi(x); approximate='tanh' uses the tanh formula."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta, linear above threshold."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """clamp(x, min_val, max_val)."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:  # torch's deprecated spellings
            warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                 FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                 FutureWarning, stacklevel=2)
            max_val = max_value
        if max_val <= min_val:
            raise ValueError(f"Hardtanh: max_val ({max_val}) must be greater than min_val "
                             f"({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class _Shrink(Module):
    _fn = "hardshrink"

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return getattr(F, self._fn)(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(_Shrink):
    """x where |x| > lambd, else 0."""

    _fn = "hardshrink"


class Softshrink(_Shrink):
    """x - lambd*sign(x) where |x| > lambd, else 0."""

    _fn = "softshrink"


class Threshold(Module):
    """x if x > threshold else value."""

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class PReLU(Module):
    """LeakyReLU with a learned slope (one, or one per channel)."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = new_param(num_parameters, dtype=dtype, device=device)
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """LeakyReLU with a random slope in [lower, upper] in training, their mean in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                              else "")


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


def _legacy_softmax_dim(name, ndim):
    warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
         f"to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """exp(x) / sum(exp(x)) along dim."""

    _fn = "softmax"

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim
        if dim is None:
            dim = _legacy_softmax_dim(self._fn, input.dim())
        return getattr(F, self._fn)(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """log(softmax(x)) along dim, computed stably."""

    _fn = "log_softmax"


class Softmin(Softmax):
    """softmax(-x) along dim."""

    _fn = "softmin"


class Softmax2d(Module):
    """Softmax over the channel dim of (N, C, H, W) or (C, H, W) inputs."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D "
                             f"instead")
        return F.softmax(input, -3)
