"""accumulate_grad: how a gradient lands in a leaf's `.grad` (the seed's AccumulateGrad node
and copy_or_acc_grad): the leaf's hooks, the sum into `acc_grad` (in place where the optimizer
holds the tensor, taking the gradient's storage where nothing else can see it, laid out as
torch lays out a first `.grad`), sparse gradients, then the post-accumulate hooks.
"""
from __future__ import annotations

import sys

from ..device import array_module, new_empty
from . import grad_mode
from . import interpreter as _interpreter
from . import node_hooks as _node_hooks
from .inplace import dense, writable
from .meta import retained_into

SparseTensor = None  # bound by flowgrad.sparse (which imports this layer)


def check_assigned_grad(tensor, value):
    """`tensor.grad = value` takes a gradient of the tensor's own shape and dtype, as torch's
    setter does: a gradient of another dtype would reach the optimizer's step unconverted."""
    if tuple(value.shape) != tuple(tensor.shape):
        raise RuntimeError(
            f"assigned grad has shape {tuple(value.shape)} but the tensor has shape "
            f"{tuple(tensor.shape)}; they must match")
    if value.dtype != tensor.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient of dtype {value.dtype} to a tensor of dtype "
            f"{tensor.dtype} (shape {tuple(tensor.shape)}): the gradient must match the "
            f"tensor's dtype; assign value.to({tensor.dtype}) instead")


def check_assigned_data(tensor, value, is_tensor):
    """`tensor.data = value` takes a tensor (torch's setter refuses arrays, numbers, None), of
    a floating or complex dtype while `tensor` requires grad."""
    if not is_tensor:
        raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}; "
                        f"wrap it as flowgrad.tensor(value)")
    if tensor.requires_grad and value._data.dtype.kind not in "fcV":  # (V: bfloat16)
        raise RuntimeError(f"data set to a tensor that requires gradients must be floating "
                           f"point or complex dtype, got {value.dtype}; call "
                           f"requires_grad_(False) first or assign a float tensor")


def acc_grad_for_leaf(meta, variable):
    """A leaf's accumulate_grad step: hooks, then acc_grad += current_grad, then
    post-accumulate hooks. `variable`: the leaf (None when it is gone)."""
    g = meta.current_grad
    if g is None:
        return
    meta.current_grad = None
    if meta.hooks:  # (torch's engine runs them before the node: after detach_() too)
        g = _run_hooks(meta.hooks, g)
    if not meta.is_leaf:  # written in place with history since the graph was recorded
        raise RuntimeError(
            "leaf variable has been moved into the graph interior: a tensor this graph uses "
            "as a leaf got a history from an in-place op since (after detach_() or "
            "requires_grad_(False)); clone() it before the in-place op instead")
    if meta.requires_grad:  # (not after requires_grad_(False) since the graph was recorded;
        _accumulate(meta, g, owned=True, variable=variable)  # its post hooks run, as torch's)
    if meta.post_accumulate_hooks:
        _run_post_accumulate_hooks(meta.post_accumulate_hooks, variable)


def _run_post_accumulate_hooks(hooks, arg):
    """torch's: each hook is called with the leaf, or with what an earlier one returned in its
    place (a tensor of its dtype and shape, checked as it returns); all run, then a returned
    tensor other than the argument is refused (a non-tensor at once)."""
    replaced = False
    for hook in hooks:
        result = hook(arg)
        if result is None or result is arg:
            continue
        if not isinstance(result, _interpreter.Tensor):
            raise TypeError(f"expected Variable, but hook returned "
                            f"'{type(result).__name__}' (a post accumulate grad hook)")
        if arg is not None and (result.dtype != arg.dtype or result.shape != arg.shape):
            raise RuntimeError(
                f"hook '{getattr(hook, '__name__', 'hook')}' has changed the "
                f"{'type' if result.dtype != arg.dtype else 'size'} of value (was "
                f"{arg.dtype} {tuple(arg.shape)} got {result.dtype} {tuple(result.shape)})")
        arg, replaced = result, True
    if replaced:
        raise RuntimeError(
            "Tensor post accumulate grad hooks should return None; modify "
            "tensor.grad in place instead of returning a value")


def _run_hooks(hooks, g):
    # a snapshot: a hook that removes another still sees it run in this pass, as torch's
    for hook in tuple(hooks):
        result = hook(g)
        if result is not None:
            g = _node_hooks.checked_result(hook, g, result)
    return g


def _retain(meta, g):
    """retain_grad: g, the gradient `meta` received, into the `.grad` of its tensor (that
    tensor's newer meta after an in-place layout change: `meta.RetainedFor`)."""
    if meta.retain_grad is not True:
        meta = retained_into(meta)
        if meta is None:
            return
    _accumulate(meta, g)


def _accumulate(meta, g, owned=False, variable=None):
    """acc_grad += g (the seed's copy_or_acc_grad). `owned`: the caller drops g afterwards (a
    leaf's accumulate step), so .grad may take g's storage when nothing else can see it, as
    torch does; otherwise (retain_grad, autograd.grad's results: g flows on) or when something
    else can see it, it copies, so a .grad never aliases another .grad or a live tensor.
    A first .grad is laid out as torch's: like `variable` (a leaf), C-contiguous without it
    (retain_grad)."""
    acc = meta.acc_grad
    if type(g) is SparseTensor or type(acc) is SparseTensor:
        meta.acc_grad = _accumulated_sparse(acc, g, owned)
        return
    if acc is None:
        relaid = _relaid(g, variable)
        if relaid is not None:  # a fresh copy: nothing else sees it
            meta.acc_grad = relaid
        elif owned and _sole_owner(g):
            meta.acc_grad = g
        elif grad_mode.is_grad_enabled():  # create_graph: keep g's history
            meta.acc_grad = g.clone()
        else:
            meta.acc_grad = g.detach().clone()
    elif hasattr(acc, "_phys") and not hasattr(g, "_phys"):
        return  # a batched .grad left by grad(is_grads_batched=True) stays one (torch's sum
        # with it is batched too: reading it raises)
    elif grad_mode.is_grad_enabled():  # the sum laid out as .grad was (torch's iterator)
        total = acc + g  # (out of place, as torch's: a .grad of another shape broadcasts)
        relaid = _relaid(total, acc) if total._data.shape == acc._data.shape else None
        meta.acc_grad = total if relaid is None else relaid
    elif acc._grad_fn is None and acc._data.shape == g._data.shape and meta.is_leaf:
        # in place: keeps the .grad object the optimizer holds. A non-leaf's retained grad
        # is a new tensor each time, as torch's: one read before stays as it was
        data = writable(acc._data, "AccumulateGrad")  # (an expanded .grad: refused)
        data += g._data
    elif meta.is_leaf and acc._data.shape == g._data.shape:
        acc.add_(g)  # a .grad with history (from create_graph): torch's adds in place too,
        # under no_grad, so it keeps its history (and requires grad)
    else:
        total = (acc + g).detach()
        if total._data.shape != acc._data.shape:
            # torch adds in place here: a .grad made before the tensor changed shape (a
            # `.data =` or set_ of another shape) cannot take the new gradient
            raise RuntimeError(f"output with shape {list(acc._data.shape)} doesn't match the "
                               f"broadcast shape {list(total._data.shape)}")
        meta.acc_grad = total


def _relaid(g, variable):
    """None when g is laid out as torch's AccumulateGrad lays out a first `.grad`, else a
    copy of g so laid out (recorded under create_graph): the leaf `variable`'s strides where
    its elements are dense (no overlap, no gap; size-1 dims aside), C order otherwise or
    without a variable (torch's retain_grad). So `p.grad.view(-1)` works where torch's does.
    (None, not g: a reference to g kept here would make `_sole_owner` copy it.)"""
    data = g._data
    like = data if variable is None else variable._data
    if data.strides == like.strides and variable is not None or data.size == 0:
        return None
    if hasattr(g, "_phys"):  # a batched g (grad(is_grads_batched=True) into a retain_grad
        return g.clone()  # tensor): its copy, batched too; torch's .grad is its BatchedTensor
    if variable is not None and dense(like):
        if all(s == t or n == 1 and s != 0
               for s, t, n in zip(data.strides, like.strides, data.shape)):
            return None
        array = array_module(like).empty_like(like, dtype=data.dtype)  # (order K: like's)
    elif data.flags.c_contiguous:
        return None
    else:
        array = new_empty(data)
    return _interpreter.Tensor._wrap(array).copy_(g)  # (recorded under create_graph)


def _c_ordered(g):
    """An autograd.grad result laid out otherwise than C order (a rule's transposed GEMM, a
    slice of the output's gradient) copied to C order, as torch's kernels hand theirs back;
    so `g.view(-1)` works where torch's does. A broadcast one (zero strides: a sum's, as
    torch's expand) stays as it is."""
    if g is None or type(g) is SparseTensor or 0 in g._data.strides:
        return g
    relaid = _relaid(g, None)
    return g if relaid is None else relaid


def _accumulated_sparse(acc, g, owned):
    """`_accumulate` where a sparse gradient meets `.grad`, as torch's AccumulateGrad: sparse
    on sparse adds the entries (in place, without create_graph), dense on sparse or sparse on
    dense gives a dense `.grad` (a dense one kept and added to in place where it can be)."""
    keep_graph = grad_mode.is_grad_enabled()
    if acc is None:  # (g is the sparse one)
        return g if owned else g.clone() if keep_graph else g.detach().clone()
    if type(acc) is SparseTensor and type(g) is SparseTensor:
        total = acc + g if keep_graph else acc.detach() + g.detach()
        if keep_graph:
            return total
        acc._idx, acc._vals, acc._coalesced = total._idx, total._vals, total._coalesced
        return acc
    if type(acc) is SparseTensor:  # a dense gradient onto a sparse .grad
        return g + acc if keep_graph else (g.detach() + acc.detach())
    if not keep_graph and acc._grad_fn is None:
        acc._data += g.to_dense()._data  # in place: keeps the .grad object the optimizer holds
        return acc
    return acc + g


def _sole_owner(g) -> bool:
    """Whether nothing but the callers' frames can see g or its storage: g has no history
    and is no flowgrad view; the references to g are the two caller frames
    (acc_grad_for_leaf, _accumulate), this one's and getrefcount's; the array's is g's (+ the
    local and getrefcount's). The array may be a reshape of a private buffer (a reduction
    with keepdims then reshaped, a rule's reshape of a product): a C-contiguous view of all
    of an array that owns its memory and is referenced by that view alone."""
    if g._grad_fn is not None or g._view is not None or sys.getrefcount(g) > 4:
        return False
    data = g._data
    if sys.getrefcount(data) > 3 or not data.flags.writeable:
        return False
    base = data.base
    if base is None:
        return True
    # a view of a view points at the owner itself (NumPy collapses bases), so one level
    return (type(base) is type(data) and base.base is None and sys.getrefcount(base) <= 3
            and data.flags.c_contiguous and data.nbytes == base.nbytes)
