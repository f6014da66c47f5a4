"""Folding an eval-mode BatchNorm into the convolution or linear layer before it, as
torch.nn.utils.fusion: y = bn(conv(x)) becomes one conv whose weight is scaled per output
channel by gamma / sqrt(running_var + eps) and whose bias absorbs the running mean and beta.

>>> import flowgrad as flow
>>> conv, bn = flow.nn.Conv2d(1, 2, 3).eval(), flow.nn.BatchNorm2d(2).eval()
>>> x = flow.randn(1, 1, 5, 5)
>>> fused = fuse_conv_bn_eval(conv, bn)
>>> bool(flow.allclose(fused(x), bn(conv(x)), atol=1e-6))
True
"""
from __future__ import annotations

import copy
import inspect

from ...ops.creation import ones_like, zeros_like
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init"]


def _eval_only(*modules):
    if any(m.training for m in modules):
        raise AssertionError("Fusion only for eval! Call .eval() on both modules first")


def _running_stats(bn):
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError(f"fusion needs the BatchNorm's running statistics, and "
                             f"{type(bn).__name__} was made with track_running_stats=False")
    return bn.running_mean, bn.running_var


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the convolution that computes bn(conv(x)) in eval mode;
    `transpose`: conv_w is a transposed convolution's (in, out / groups, ...) weight."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.dim() - 2)
    weight = (conv_w * scale.reshape(shape)).to(dtype=w_dtype)
    bias = ((conv_b - bn_rm) * scale + bn_b).to(dtype=b_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` (eval mode) that computes bn(conv(x)) of the eval-mode `bn`."""
    _eval_only(conv, bn)
    mean, var = _running_stats(bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, mean, var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer that computes bn(linear(x)) in eval
    mode."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    weight = linear_w * scale.unsqueeze(-1).to(dtype=w_dtype)
    bias = ((linear_b - bn_rm) * scale + bn_b).to(dtype=b_dtype)
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` (eval mode) that computes bn(linear(x)) of the eval-mode `bn`."""
    _eval_only(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(f"To fuse, linear.out_features ({linear.out_features}) must equal "
                             f"bn.num_features ({bn.num_features}) or bn.num_features must be 1")
    mean, var = _running_stats(bn)
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, mean, var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def skip_init(module_cls, *args, **kwargs):
    """`module_cls(*args, **kwargs)`, as torch's skip_init: torch leaves the parameters
    uninitialised to save the time; flowgrad initialises them (any values are valid there).
    The module must take a `device` argument, as torch requires."""
    from ..module import Module

    if not issubclass(module_cls, Module):  # (TypeError for an instance, as torch's)
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
