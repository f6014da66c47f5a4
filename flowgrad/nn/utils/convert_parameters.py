"""Flatten parameters into one vector and back (for second-order methods, ES, ...).

>>> import flowgrad as flow
>>> a, b = flow.zeros(2, 2), flow.zeros(3)
>>> v = flow.nn.utils.parameters_to_vector([a, b]); v.shape
flowgrad.Size([7])
>>> flow.nn.utils.vector_to_parameters(flow.arange(7.0), [a, b]); b
tensor([4., 5., 6.])
"""
from __future__ import annotations

from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _typename(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__


def parameters_to_vector(parameters):
    """One 1-D tensor: every parameter flattened and concatenated (differentiable)."""
    from ...ops.shape import cat

    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make each parameter's data the matching slice of `vec` (they share storage with
    `vec` afterwards, as torch's `param.data = ...` does)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected flowgrad.Tensor, but got: {_typename(vec)}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    # as torch: each parameter takes vec[start:start + numel] (along the first dimension)
    # viewed as the parameter's shape; all slices are checked before any is assigned
    # (by ops and the .data setter: inside nn.Graph's build the trace records them, where a
    # raw array assignment left the plan without the write)
    flat = vec.detach()
    chunks = []
    start = 0
    for p in parameters:
        n = p.numel()
        chunk = flat[start:start + n]
        if chunk.numel() != n:
            raise RuntimeError(
                f"vector_to_parameters: vec must be 1-D with at least as many entries as the "
                f"parameters ({sum(q.numel() for q in parameters)}), got shape "
                f"{tuple(vec.shape)} (vec[{start}:{start + n}] has {chunk.numel()} entries for "
                f"a parameter of shape {tuple(p.shape)})")
        chunks.append(chunk.reshape(p._data.shape))
        start += n
    for p, chunk in zip(parameters, chunks):
        p.data = chunk
