"""Module backward hooks: an identity autograd Function at the module's inputs and one at its
outputs; their backward calls the backward pre-hooks (grad_output) and the full backward hooks
(grad_input, grad_output), global ones first, as torch's BackwardHook.
"""
from __future__ import annotations

from .._warn import warn
from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.node_hooks import checked_results
from ..tensor import Tensor
from . import module_hooks as _global


class _HookState:
    """What one call's backward hooks share between the output and the input boundary."""

    def __init__(self, module, n_args, input_positions, input_zeros):
        self.module = module
        self.n_args = n_args
        self.input_positions = input_positions  # arg index of each wrapped tensor
        self.input_zeros = input_zeros  # arg index -> (shape, dtype, device): no grad needed
        self.n_outputs, self.output_positions = 1, ()
        self.grad_outputs = None  # set at the output boundary, taken at the input boundary


class _BackwardHookIdentity(Function):
    """Identity on a set of tensors; its backward is where module backward hooks run."""

    @staticmethod
    def forward(ctx, state, at_output, *tensors):
        ctx.state, ctx.at_output = state, at_output
        if at_output:  # an output backward never reached is None in grad_output, as torch's
            ctx.set_materialize_grads(False)
        # returned as-is: views made in a custom Function, which an in-place op may not
        # write (it would bypass the hooks), as torch's BackwardHookFunction
        return tensors

    @staticmethod
    def jvp(ctx, _state, _at_output, *tangents):  # an identity: tangents pass through
        return tangents

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        if ctx.at_output:
            return (None, None) + _at_outputs(state, state.module, grads)
        if state.grad_outputs is None:
            # reached without passing the module's outputs (double backward through the
            # module's saved tensors): torch runs no hook, or its change would count twice
            return (None, None) + grads
        return (None, None) + _at_inputs(state, state.module, grads)


def _at_outputs(state, module, grads):
    """Backward pre-hooks on grad_output (one entry per output, None for a non-tensor)."""
    packed = [None] * state.n_outputs
    for pos, g in zip(state.output_positions, grads):
        packed[pos] = g
    grads = tuple(packed)
    for hook in [*_global.BACKWARD_PRE.values(), *module._backward_pre_hooks.values()]:
        res = hook(module, grads)
        if res is not None:
            grads = checked_results(hook, grads, res, lambda n, want=len(grads): (
                f"Backward pre hook returned an invalid number of grad_output, got {n}, but "
                f"expected {want}"))
    state.grad_outputs = grads
    if not state.input_positions:
        # no input requires grad: the hooks see grad_input of all None, as in torch
        grad_input = (None,) * state.n_args
        for hook in [*_global.BACKWARD.values(), *module._backward_hooks.values()]:
            res = hook(module, grad_input, grads)
            if res is not None and any(r is not None for r in res):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient "
                    "should always return None or None for all gradients.")
        state.grad_outputs = None
    return tuple(grads[p] for p in state.output_positions)


def _at_inputs(state, module, grads):
    """Full backward hooks on grad_input (one entry per argument: zeros for a tensor that
    needs no grad, None for a non-tensor), with the grad_output the pass brought."""
    grad_input = [None] * state.n_args
    for pos, g in zip(state.input_positions, grads):
        grad_input[pos] = g
    for pos, (shape, dtype, dev) in state.input_zeros.items():
        grad_input[pos] = Tensor._zeros(shape, dtype).to(dev)
    grad_input = tuple(grad_input)
    grad_outputs, state.grad_outputs = state.grad_outputs, None
    for hook in [*_global.BACKWARD.values(), *module._backward_hooks.values()]:
        res = hook(module, grad_input, grad_outputs)
        if res is not None:
            grad_input = checked_results(hook, grad_input, res, lambda n, want=len(grad_input): (
                f"Backward hook returned an invalid number of grad_input, got {n}, but "
                f"expected {want}"))
    return tuple(grad_input[p] for p in state.input_positions)


def wrap_inputs(module, args):
    """Wrap the module's tensor arguments that require grad in one identity node whose
    backward runs the full backward hooks; also the state the output boundary fills."""
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not grad_mode.is_grad_enabled():
        positions = []
    zeros = {} if not positions else {
        i: (tuple(a.shape), a._data.dtype, a.device) for i, a in enumerate(args)
        if isinstance(a, Tensor) and not a.requires_grad}
    state = _HookState(module, len(args), positions, zeros)
    if not state.input_positions:
        return args, state
    wrapped = _BackwardHookIdentity.apply(state, False, *(args[i] for i in positions))
    args = list(args)
    for i, w in zip(positions, wrapped):
        args[i] = w
    return tuple(args), state


def wrap_outputs(result, state):
    """Wrap the outputs that require grad in the identity node whose backward runs the
    backward pre-hooks (and, when no input requires grad, the full hooks)."""
    single = isinstance(result, Tensor)
    if not single and not isinstance(result, tuple):
        warn(f"For backward hooks to be called, module output should be a Tensor or a "
             f"tuple of Tensors but received {type(result)}")
        return result
    outs = [result] if single else list(result)
    idx = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not idx:
        return result
    state.n_outputs, state.output_positions = len(outs), idx
    wrapped = _BackwardHookIdentity.apply(state, True, *(outs[i] for i in idx))
    for i, w in zip(idx, wrapped):
        outs[i] = w
    if single:
        return outs[0]
    return type(result)(*outs) if hasattr(result, "_fields") else tuple(outs)
