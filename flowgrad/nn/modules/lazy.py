"""Lazy modules: layers whose input size is read from the first batch (torch's LazyLinear,
LazyConv*, LazyBatchNorm*, ...).

Until the first forward their parameters and running statistics are placeholders
(`UninitializedParameter` / `UninitializedBuffer`, no shape); a forward pre-hook then gives
them their shapes, initialises them as the eager layer would, and turns the module into that
layer (`cls_to_become`: a LazyLinear becomes a Linear). The placeholders are materialized in
place, so an optimizer made before the first batch updates them. `load_state_dict` of an
initialized checkpoint materializes them too.

>>> import flowgrad as flow
>>> m = flow.nn.LazyLinear(3)
>>> m
LazyLinear(in_features=0, out_features=3, bias=True)
>>> m(flow.ones(2, 5)).shape
flowgrad.Size([2, 3])
>>> m
Linear(in_features=5, out_features=3, bias=True)
"""
from __future__ import annotations

from ... import dtypes as _dt
from ...autograd.grad_mode import no_grad
from ...ops.creation import tensor as _tensor
from ..parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyModuleMixin:
    """Shape inference on the first forward: `initialize_parameters(*inputs)` materializes
    the placeholders, then the module becomes `cls_to_become` and the hook goes away."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer of this module (not its children) is a placeholder."""
        return any(is_lazy(t) for t in list(self._parameters.values()) +
                   list(self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(
            f"initialize_parameters is not implemented for {type(self).__name__}")

    @staticmethod
    def _infer_parameters(module, args, kwargs=None):
        placeholders = [(t, type(t), t._data) for t in list(module._parameters.values()) +
                        list(module._buffers.values()) if is_lazy(t)]
        try:
            with no_grad():
                module.initialize_parameters(*args, **(kwargs or {}))
        except BaseException:
            # (a failed first batch leaves the module lazy, not holding uninitialised memory
            # that a later forward would take for its weights)
            for t, cls, data in placeholders:
                t.__class__, t._data = cls, data
            raise
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with "
                           "`DataParallel`. Run a dummy forward pass to correctly initialize "
                           "the modules")


# ---- Linear ------------------------------------------------------------------------------------
class LazyLinear(LazyModuleMixin, Linear):
    """Linear with in_features read from the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False, device=device, dtype=dtype)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:  # materialized by load_state_dict: the size comes from it
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(
                    f"The in_features inferred from input: {input.shape[-1]} is not equal to "
                    f"in_features from self.weight: {self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


# ---- convolutions ------------------------------------------------------------------------------
class _LazyConvMixin(LazyModuleMixin):
    def _lazy_parameters(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        dims = self._n + 1  # channels and the spatial dims
        if input.dim() not in (dims, dims + 1):
            raise RuntimeError(f"Expected {dims}D (unbatched) or {dims + 1}D (batched) input "
                               f"to {type(self).__name__}, but got input of size: "
                               f"{input.shape}")
        self.in_channels = input.shape[1] if input.dim() == dims + 1 else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight.materialize(shape)
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


def _lazy_conv(base, transposed):
    """LazyConv{n}d / LazyConvTranspose{n}d over the eager `base`, torch's signatures."""
    if transposed:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                     groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                     dtype=None):
            base.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups,
                          False, dilation, padding_mode, device=device, dtype=dtype)
            self._initialize_hook = self.register_forward_pre_hook(
                self._infer_parameters, with_kwargs=True)
            self._lazy_parameters(out_channels, bias, device, dtype)
    else:
        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                     groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
            base.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False,
                          padding_mode, device=device, dtype=dtype)
            self._initialize_hook = self.register_forward_pre_hook(
                self._infer_parameters, with_kwargs=True)
            self._lazy_parameters(out_channels, bias, device, dtype)
    name = "Lazy" + base.__name__
    __init__.__qualname__ = f"{name}.__init__"
    return type(name, (_LazyConvMixin, base), {
        "__init__": __init__, "cls_to_become": base, "__module__": __name__,
        "__doc__": f"{base.__name__} with in_channels read from the first input."})


LazyConv1d = _lazy_conv(Conv1d, False)
LazyConv2d = _lazy_conv(Conv2d, False)
LazyConv3d = _lazy_conv(Conv3d, False)
LazyConvTranspose1d = _lazy_conv(ConvTranspose1d, True)
LazyConvTranspose2d = _lazy_conv(ConvTranspose2d, True)
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, True)


# ---- batch and instance norm -------------------------------------------------------------------
class _LazyNormMixin(LazyModuleMixin):
    # torch's lazy norms default to affine and tracked statistics, instance norms included
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, False, device=device, dtype=dtype,
                         bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = _tensor(0, dtype=_dt.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]  # (torch's: dim 1 even for unbatched input)
        for t in (self.weight, self.bias, self.running_mean, self.running_var):
            if t is not None:
                t.materialize((self.num_features,))
        self.reset_parameters()


def _lazy_norm(base):
    name = "Lazy" + base.__name__
    return type(name, (_LazyNormMixin, base), {
        "cls_to_become": base, "__module__": __name__,
        "__doc__": f"{base.__name__} with num_features read from the first input's dim 1."})


LazyBatchNorm1d = _lazy_norm(BatchNorm1d)
LazyBatchNorm2d = _lazy_norm(BatchNorm2d)
LazyBatchNorm3d = _lazy_norm(BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d)
