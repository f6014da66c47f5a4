"""The AutogradInterpreter: runs an op's kernel and records its backward node.

`apply(op, inputs, attrs)` follows the seed step by step:
1. outputs require grad iff grad mode is on and any input requires grad;
2. the kernel runs with grad mode off;
3. if grad is required, the op's rule captures what it needs and `add_node` links a
   FunctionNode to the inputs' nodes (leaves get their accumulate_grad node).
"""
from __future__ import annotations

import numpy as np

from ..device import ARRAY_MODULES
from ..errors import kernel_error
from . import anomaly as _anomaly
from . import grad_mode
from . import node as _node_module
from . import saved_hooks as _saved_hooks
from .meta import AutogradMeta, VersionCounter
from .node import FunctionNode, SavedTensor
from .views import mark_view, replay_view, sync_view, view_error, writable_alias

_state = grad_mode._state
_FLOAT_KINDS = frozenset("fVc")  # 'V': ml_dtypes' bfloat16; 'c': complex (differentiable)
complex_checks = False  # set once a complex dtype is first used (dtypes.complex_in_use)


def refuse_complex(op, inputs):
    """torch refuses complex inputs to relu, max, comparisons...: so does every op here that
    was not audited for complex (`@op(..., complex=True)`), rather than computing NumPy's
    lexicographic order or a gradient without the conjugates."""
    for t in inputs:
        if t._data.dtype.kind == "c":
            raise RuntimeError(
                f"{op.name} is not supported for complex tensors (got {t.dtype}, shape "
                f"{tuple(t._data.shape)}); apply it to .real, .imag or .abs() instead")


def _needs_record(inputs) -> bool:
    needs = False
    for t in inputs:
        m = t._meta
        view = t._view
        if view is not None:
            if view.version != t._version.value:
                sync_view(t)  # its base was written in place since its grad_fn was set
                m = t._meta
            elif m is None and view.base.requires_grad:
                needs = True  # a view with no history of a base that requires grad: torch's
                continue      # output requires grad, the gradient to this input goes nowhere
        if m is not None and m.requires_grad:
            needs = True
    return needs


Tensor = None  # bound by flowgrad.tensor once the class exists (import order)


def bind_tensor_class(cls):
    """Called once by flowgrad.tensor to hand this module the Tensor class (an import cycle)."""
    global Tensor
    Tensor = _node_module.Tensor = cls


class AutogradInterpreter:
    """Eager execution with autograd recording; one call per op."""

    @staticmethod
    def apply(op, inputs, attrs):
        """Run `op` on tensors `inputs` with keyword `attrs`; return its output tensor(s)."""
        if complex_checks and not op.complex:
            refuse_complex(op, inputs)
        record = _state.enabled and op.backward is not None and _needs_record(inputs)
        n_in = len(inputs)  # (a tuple for the usual one or two inputs: no comprehension frame)
        arrays = ((inputs[0]._data,) if n_in == 1 else (inputs[0]._data, inputs[1]._data)
                  if n_in == 2 else [t._data for t in inputs])
        xp = ARRAY_MODULES.get(type(arrays[0]), np) if arrays else np  # from the device
        try:
            if record:
                _state.enabled = False  # ops inside the kernel record nothing
                try:
                    result = op.kernel(xp, *arrays, **attrs)
                finally:
                    _state.enabled = True
            else:
                result = op.kernel(xp, *arrays, **attrs)
        except (ValueError, IndexError, TypeError) as error:
            raise kernel_error(op, inputs, error) from None
        if op.n_out == 1 and type(result) is not tuple:
            out = _new(Tensor)
            out._data = result if type(result) is np.ndarray else np.asarray(result)
            out._meta = out._grad_fn = out._version = out._view = None
            if op.is_view and _shares(out._data, inputs[0]._data):
                mark_view(inputs[0], out, op, attrs, None)
            if record:
                add_node(op, inputs, (out,), attrs, ())
            return out
        n_out = op.n_out
        if n_out is None:  # variadic: every array the kernel returns is an output
            n_out = len(result)
        outs = tuple(Tensor._wrap(r) for r in result[:n_out])
        if op.is_view:
            src = inputs[0]
            for i, out in enumerate(outs):
                if _shares(out._data, src._data):
                    mark_view(src, out, op, attrs, i)
        if record:
            aux = tuple(Tensor._wrap(r) for r in result[n_out:])
            add_node(op, inputs, outs, attrs, aux)
        return outs if n_out != 1 or op.n_out is None else outs[0]


_new = object.__new__

# The interpreter every op call goes to (`Op.__call__`): eager with autograd by default; a
# tracing interpreter (graph mode) swaps itself in with `using_interpreter`.
current = AutogradInterpreter


def check_read(tensor, what):
    """Reading a tensor's value (item(), bool(), numpy(), printing): a tracer refuses it, as
    its plan could not repeat it."""
    hook = getattr(current, "read", None)
    if hook is not None:
        hook(tensor, what)


class using_interpreter:
    """Context manager: run the ops called inside with `interpreter` (anything with
    `apply(op, inputs, attrs)`), then restore the previous one.

    >>> from flowgrad.autograd.interpreter import AutogradInterpreter, using_interpreter
    >>> with using_interpreter(AutogradInterpreter):
    ...     pass
    """

    def __init__(self, interpreter):
        self.interpreter = interpreter

    def __enter__(self):
        global current
        self.previous, current = current, self.interpreter
        return self.interpreter

    def __exit__(self, *exc):
        global current
        current = self.previous


def _shares(view, src):
    """A view op's result is a view unless it had to copy (reshape of a non-contiguous
    input); an empty result shares no bytes but is a view all the same, as torch's."""
    return view.size == 0 or np.may_share_memory(view, src)


# Every node of one shape signature holds the same ((shape, dtype), ...) tuple: a graph then
# leaves the cycle collector half as many objects per op, which is what made deep graphs
# slow to build (each full collection walks every live object). Bounded: cleared when full.
_SHARED_INFOS: dict = {}


def _shared(infos):
    if len(_SHARED_INFOS) >= 4096:
        _SHARED_INFOS.clear()
    return _SHARED_INFOS.setdefault(infos, infos)


def add_node(op, inputs, outputs, attrs, aux):
    """Link a FunctionNode for `op` into the graph: the seed's add_node.

    Leaf inputs that require grad get their accumulate_grad node; each floating output gets
    a fresh AutogradMeta and this node as grad_fn; the op's capture state saves what the
    rule declared it needs.
    """
    input_metas, next_nodes, input_infos = [], [], []
    for t in inputs:
        data = t._data
        input_infos.append((data.shape, data.dtype))
        meta = t._meta
        if meta is not None and meta.requires_grad:
            input_metas.append(meta)
            node = t._grad_fn
            next_nodes.append(node if node is not None else meta.grad_accumulator())
        else:
            input_metas.append(None)
            next_nodes.append(None)
    input_infos = tuple(input_infos)
    node = FunctionNode(op, attrs, input_metas, next_nodes,
                        _SHARED_INFOS.get(input_infos) or _shared(input_infos))
    if len(outputs) == 1:
        out = outputs[0]
        data = out._data
        info = ((data.shape, data.dtype),)
        node.output_infos = _SHARED_INFOS.get(info) or _shared(info)
        if data.dtype.kind in _FLOAT_KINDS:
            meta = out._meta = AutogradMeta(True, False)
            out._grad_fn = node
        else:
            meta = AutogradMeta(False, False)  # an index output: never gets a grad
        node.output_metas = (meta,)
    else:
        out_metas, out_infos = [], []
        for out in outputs:
            data = out._data
            out_infos.append((data.shape, data.dtype))
            if data.dtype.kind in _FLOAT_KINDS:
                meta = out._meta = AutogradMeta(True, False)
                out._grad_fn = node
            else:
                meta = AutogradMeta(False, False)
            out_metas.append(meta)
        node.output_metas = tuple(out_metas)
        node.output_infos = _shared(tuple(out_infos))
    save = op.save
    if save:  # 4: the rule reads data kept in attributes (index arrays): still "saved"
        if save & 1:
            keep = op.saved_inputs
            if keep == "others":
                n_need = len(input_metas) - input_metas.count(None)
                keep = [i for i, m in enumerate(input_metas) if n_need - (m is not None)]
            node._inputs = [SavedTensor(t, False) if keep is None or i in keep else None
                            for i, t in enumerate(inputs)]
        if save & 2:
            node._outputs = [SavedTensor(o, True) for o in outputs]
        node.saved_something = True
        if _saved_hooks.state.stack:  # inside saved_tensors_hooks (checkpoint, save_on_cpu)
            _saved_hooks.pack_capture(node, inputs, outputs)
    if aux:
        node.aux = aux
        node.saved_something = True
    if _anomaly.enabled:
        _anomaly.record_traceback(node)
    return node


def bump_version(tensor):
    """Mark an in-place write to `tensor`: bump its version counter (created on first write)."""
    if current is not AutogradInterpreter:
        hook = getattr(current, "inplace", None)  # a tracer refuses what it cannot record
        if hook is not None:
            hook(tensor)
    counter = tensor._version
    if counter is None:
        counter = tensor._version = VersionCounter()
    elif counter.__class__ is not VersionCounter:  # an inference tensor's
        from .inference import check_write

        check_write(tensor)
    counter.value += 1


def run_inplace(name, fn, target, *args, **kwargs):
    """`target.<name>(*args)`: compute `fn(target, *args)` out of place, then write the result
    into target's storage (views and detach() see it) and bump its version."""
    from ..tensor import Tensor

    args_need_grad = False
    for a in args:
        if isinstance(a, Tensor):
            args_need_grad = args_need_grad or a.requires_grad
            _check_no_partial_overlap(name, target._data, a._data)
    return inplace_update(name, target, lambda src: fn(src, *args, **kwargs), args_need_grad)


def _check_no_partial_overlap(name, data, other):
    """torch refuses an in-place op whose operand shares some, but not all, of the written
    memory (`x[1:].add_(x[:-1])`): the result would depend on the order of the writes."""
    if other is data or not np.may_share_memory(other, data):
        return
    try:  # bounds overlap; do elements? (interleaved columns of one matrix don't)
        if not np.shares_memory(other, data, max_work=10_000):
            return
    except np.exceptions.TooHardError:
        pass  # undecided: refuse, as the safe answer
    if (other.shape == data.shape
            and all(n < 2 or a == b for n, a, b in zip(data.shape, other.strides, data.strides))
            and other.__array_interface__["data"][0] == data.__array_interface__["data"][0]):
        return  # the same elements (a size-1 dim's stride is moot): `x.add_(x[:])` is fine
    raise RuntimeError(
        f"{name}: unsupported operation: some elements of the input tensor (shape "
        f"{tuple(other.shape)}) and the written-to tensor (shape {tuple(data.shape)}) refer "
        f"to a single memory location; clone() the input before the in-place operation")


def inplace_update(name, target, compute, args_need_grad=False):
    """Replace target's values by `compute(target)`, in place, with autograd.

    When recording, `compute` runs on a clone of the pre-op value (the write destroys it, and
    rules may need it) and target is rebased onto the op's node: new grad_fn, fresh meta.
    When target is a view, its root base is rebased too, as torch's CopySlices does: the
    base's new value is its old value with the view's region replaced.
    """
    view = target._view
    recording = False
    if _state.enabled:
        if view is not None and view.version != target._version.value:
            sync_view(target)
        meta = target._meta
        base = view.base if view is not None else None
        base_needs = base is not None and base.requires_grad
        recording = (meta is not None and meta.requires_grad) or base_needs or args_need_grad
        if recording:
            _check_inplace_allowed(name, target, view, meta, base_needs)
    if not recording and (view is None or current is AutogradInterpreter):
        return write_inplace(target, compute(target), name)
    if view is None:  # (a tracer records a write through a view as view_scatter on the base)
        return write_inplace(target, compute(target.clone()), name)
    return _inplace_through_view(name, target, compute)


def _check_inplace_allowed(name, target, view, meta, base_needs):
    """torch's check_inplace: refuse recorded writes that autograd cannot rebase."""
    own = meta is not None and meta.requires_grad
    if view is not None and view.creation:
        raise view_error(target, view.creation, "is being modified inplace")
    if view is not None and (own or base_needs) and view.base._grad_fn is None:
        raise RuntimeError(
            f"{name}: a view of a leaf tensor that requires grad (base shape "
            f"{tuple(view.base.shape)}, view shape {tuple(target.shape)}) is being used in an "
            f"in-place operation; wrap it in `with flowgrad.no_grad():` or clone() first")
    if view is None and own and target._grad_fn is None:
        raise RuntimeError(
            f"{name}: a leaf tensor that requires grad (shape {tuple(target.shape)}) "
            f"is being used in an in-place operation; wrap it in "
            f"`with flowgrad.no_grad():` or use the out-of-place op")


def _inplace_through_view(name, target, compute):
    from ..ops.registry import REGISTRY

    info = target._view
    base, chain = info.base, info.chain
    base_old = base.clone()
    region = compute(replay_view(base_old, chain))
    _check_writable(target, region._data, name)
    if name not in ("fill_", "zero_") and self_overlapping(target._data):
        raise RuntimeError(
            f"{name}: an in-place write with autograd through an expanded view whose elements "
            f"share memory (shape {tuple(target.shape)}) is not supported: its gradient "
            f"would count the shared elements more than once. clone() the view first, or "
            f"write the base")
    new_base = REGISTRY["view_scatter"](base_old, region.to(target.dtype), chain=chain)
    assign(target._data, region._data, name)  # shared storage: base sees it too
    bump_version(target)
    _adopt_saved_outputs(region, target)
    retain = base._meta is not None and base._meta.retain_grad
    base._meta, base._grad_fn = new_base._meta, new_base._grad_fn
    if retain:
        base._meta.retain_grad = True
    rebased = replay_view(new_base, chain)
    target._meta, target._grad_fn = rebased._meta, rebased._grad_fn
    info.version = target._version.value
    _tell_tracer(base, new_base)
    _tell_tracer(target, rebased)
    return target


def _tell_tracer(target, result):
    """A tracer (nn.Graph) learns which recorded value an in-place write left in `target`."""
    if current is not AutogradInterpreter:
        hook = getattr(current, "written", None)
        if hook is not None:
            hook(target, result)


def _adopt_saved_outputs(result, target):
    """An op that saved its output (relu_, exp_, ...) and whose result was then written into
    target: the saved output now lives in target's storage, so a later write to target is
    caught in backward, as in torch."""
    node = result._grad_fn
    if node is None or not node._outputs:
        return
    for saved in node._outputs:
        if saved.data is result._data:
            saved.data, saved.counter = target._data, target._version
            saved.version = target._version.value


# in-place ops that torch lets write through an expanded (self-overlapping) view; setitem
# checks the region it writes itself
_OVERLAP_OK = frozenset(("fill_", "zero_", "masked_fill_", "setitem"))


def self_overlapping(data):
    """Whether some elements of `data` share one memory location (a stride-0 dim)."""
    return data.size > 1 and any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape))


def writable(data, name):
    """`data` itself, or a writable alias of a read-only view from expand: NumPy marks every
    broadcast read-only, torch refuses only writes where elements overlap (`name` being
    one of fill_/zero_/masked_fill_ may write even those)."""
    if data.flags.writeable:
        return data
    if name not in _OVERLAP_OK and self_overlapping(data):
        raise RuntimeError(
            f"{name}: unsupported operation: more than one element of the written-to tensor "
            f"(shape {tuple(data.shape)}) refers to a single memory location (an expanded "
            f"view); call .clone() before the in-place operation")
    return writable_alias(data)


def assign(dst, values, name):
    """dst[...] = values, for an in-place op `name`. Where dst is an expand whose elements
    share memory, only the changed elements are written: copying back an unchanged alias
    would undo the write to another (a masked_fill_ or setitem of one aliased element)."""
    dst = writable(dst, name)
    if dst.flags.writeable and not self_overlapping(dst):
        dst[...] = values
        return
    changed = values != dst
    dst[changed] = np.broadcast_to(values, dst.shape)[changed]


def _check_writable(target, data, name):
    if data.dtype != target._data.dtype and not np.can_cast(data.dtype, target._data.dtype,
                                                            "same_kind"):
        raise RuntimeError(
            f"{name}: result type {data.dtype} can't be cast to the desired output type "
            f"{target._data.dtype}; use the out-of-place op, or convert the tensor first")
    if data.shape != target._data.shape:
        raise RuntimeError(
            f"{name}: output with shape {tuple(target._data.shape)} doesn't match the "
            f"broadcast shape {tuple(data.shape)}; in-place ops cannot change a tensor's shape")
    writable(target._data, name)  # raises for a write torch refuses


def write_inplace(target, result, name):
    """Copy `result` into `target`'s storage; if result was recorded, rebase target on it."""
    data = result._data
    _check_writable(target, data, name)
    if data is not target._data:
        assign(target._data, data, name)
    bump_version(target)
    if result._grad_fn is not None:
        old = target._meta
        if old is not None and old.retain_grad:
            result._meta.retain_grad = True
        target._meta, target._grad_fn = result._meta, result._grad_fn
        _adopt_saved_outputs(result, target)
        if target._view is not None:
            target._view.version = target._version.value
    _tell_tracer(target, result)
    return target
