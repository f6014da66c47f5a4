"""torch.nn.grad (also `F.grad`): the gradients of conv1d/conv2d/conv3d with respect to their
input and to their weight, as functions. Custom autograd Functions that fuse a convolution
with another layer (torch's "fusing convolution and batch norm" recipe) call them in their
backward. They are flowgrad's own convolution backward, so a custom Function built on them
gets the numbers autograd would; they stay differentiable when grad mode is on and an
argument requires grad, as torch's convolution_backward.

>>> import flowgrad as flow
>>> w = flow.ones(1, 1, 2)
>>> flow.nn.grad.conv1d_input((1, 1, 3), w, flow.ones(1, 1, 2))
tensor([[[1., 2., 1.]]])
"""
from __future__ import annotations

from ..autograd.engine import grad as _grad
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..ops.conv import conv1d, conv2d, conv3d
from ..ops.creation import zeros

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def _vjp(conv, make, wrt_input, other, grad_output, stride, padding, dilation, groups):
    """The gradient w.r.t. a zero tensor `make` of the convolution of it (as the input when
    `wrt_input`, else as the weight) with `other`, pulled back from grad_output."""
    higher = is_grad_enabled() and (other.requires_grad or grad_output.requires_grad)
    with enable_grad():
        out = (conv(make, other, None, stride, padding, dilation, groups) if wrt_input else
               conv(other, make, None, stride, padding, dilation, groups))
        if tuple(out.shape) != tuple(grad_output.shape):
            name = conv.__name__ + ("_input" if wrt_input else "_weight")
            raise RuntimeError(f"{name}: grad_output has shape {tuple(grad_output.shape)}, but "
                               f"the convolution gives {tuple(out.shape)} for these sizes, "
                               f"stride, padding and dilation")
        return _grad(out, make, grad_output, create_graph=higher)[0]


def _input_fn(conv):
    def fn(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
        x = zeros(tuple(input_size), dtype=grad_output.dtype, device=grad_output.device,
                  requires_grad=True)
        return _vjp(conv, x, True, weight, grad_output, stride, padding, dilation, groups)

    fn.__name__ = fn.__qualname__ = f"{conv.__name__}_input"
    fn.__doc__ = (f"The gradient of {conv.__name__} w.r.t. an input of size `input_size`, "
                  f"given the weight and the output's gradient.")
    return fn


def _weight_fn(conv):
    def fn(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
        w = zeros(tuple(weight_size), dtype=grad_output.dtype, device=grad_output.device,
                  requires_grad=True)
        return _vjp(conv, w, False, input, grad_output, stride, padding, dilation, groups)

    fn.__name__ = fn.__qualname__ = f"{conv.__name__}_weight"
    fn.__doc__ = (f"The gradient of {conv.__name__} w.r.t. a weight of size `weight_size`, "
                  f"given the input and the output's gradient.")
    return fn


conv1d_input, conv2d_input, conv3d_input = (_input_fn(c) for c in (conv1d, conv2d, conv3d))
conv1d_weight, conv2d_weight, conv3d_weight = (_weight_fn(c) for c in (conv1d, conv2d, conv3d))
