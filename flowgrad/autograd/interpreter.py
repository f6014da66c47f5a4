"""The AutogradInterpreter: runs an op's kernel and records its backward node.

`apply(op, inputs, attrs)` follows the seed step by step:
1. outputs require grad iff grad mode is on and any input requires grad;
2. the kernel runs with grad mode off;
3. if grad is required, the op's rule captures what it needs and `add_node` links a
   FunctionNode to the inputs' nodes (leaves get their accumulate_grad node).
"""
from __future__ import annotations

import sys

import numpy as np

from .._warn import TENSOR_FILE, called_by_user
from ..device import ARRAY_MODULES, HOST_XP
from ..errors import kernel_error
from ..meta import MetaArray
from . import anomaly as _anomaly
from . import grad_mode
from . import node as _node_module
from . import saved_hooks as _saved_hooks
from .meta import AutogradMeta, VersionCounter
from .node import FunctionNode, InertNode, SavedTensor
from .node import next_sequence_nr as _next_sequence_nr
from .views import mark_view, sync_view

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
            if view.version != t._counter.value:
                sync_view(t)  # its base was written in place since its grad_fn was set
                m = t._meta
            elif (m is None or not m.requires_grad) and view.base.requires_grad:
                needs = True  # a view with no history of a base that requires grad (a meta
                continue  # of its own only holds its .grad): torch's output requires grad,
                # the gradient to this input goes nowhere
        if m is not None and m.requires_grad:
            needs = True
    return needs


Tensor = None  # bound by flowgrad.tensor once the class exists (import order)


_WRAPS = []  # [Tensor._wrap as defined, the one that stamps] (see `install`)


def bind_tensor_class(cls):
    """Called once by flowgrad.tensor to hand this module the Tensor class (an import cycle)."""
    global Tensor
    Tensor = _node_module.Tensor = _saved_hooks.Tensor = cls
    plain = cls._wrap

    def wrap_stamped(klass, array):  # (a factory's tensor is made at the level too)
        t = plain(array)
        t._lvl = STAMP[-1]
        return t
    _WRAPS[:] = [cls.__dict__["_wrap"], classmethod(wrap_stamped)]


def eager_call(op, *inputs, **attrs):
    """Run `op` on tensors `inputs` with keyword `attrs`; return its output tensor(s). This is
    `Op.__call__` itself while no other interpreter is installed (see `install`)."""
    try:  # (free until raised: a non-tensor input becomes torch's TypeError below)
        if complex_checks and not op.complex:
            refuse_complex(op, inputs)
        n_in = len(inputs)  # (a tuple for the usual one or two inputs: no comprehension frame)
        if n_in == 1 and inputs[0]._view is None:  # (_needs_record of one plain tensor, inline)
            meta = inputs[0]._meta
            record = meta is not None and meta.requires_grad and _state.enabled and \
                op.backward is not None
        else:
            record = _state.enabled and op.backward is not None and _needs_record(inputs)
        if n_in == 1:
            first = inputs[0]._data
            arrays = (first,)
        elif n_in == 2:
            first = inputs[0]._data
            arrays = (first, inputs[1]._data)
        else:
            arrays = [t._data for t in inputs]
            first = arrays[0] if arrays else None
        # the array module of the inputs' device
        xp = HOST_XP if type(first) is np.ndarray else ARRAY_MODULES.get(type(first), HOST_XP)
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
            out._data = result if type(result) is np.ndarray else xp.asarray(result)
            out._meta = out._grad_fn = out._counter = out._view = None
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
    except AttributeError as error:
        raise _not_tensor_input(op, inputs, error) from None


def _not_tensor_input(op, inputs, error):
    """torch's TypeError for an op called with a non-tensor input (the AttributeError
    `error` was raised reading it), or `error` itself when it had another cause."""
    for i, t in enumerate(inputs):
        if not hasattr(t, "_data"):
            kind = type(t)
            what = kind.__name__ if kind.__module__ == "builtins" else \
                f"{kind.__module__}.{kind.__name__}"
            return TypeError(f"{op.name}(): argument {i + 1} must be Tensor, not {what}; "
                             f"wrap data with flowgrad.tensor(...)")
    return error


class AutogradInterpreter:
    """Eager execution with autograd recording; one call per op."""

    @staticmethod
    def apply(op, inputs, attrs):
        """`eager_call` for the interpreters that wrap this one (they pass tuples)."""
        return eager_call(op, *inputs, **attrs)


_new = object.__new__

# The interpreter every op call goes to: eager with autograd by default; a tracing
# interpreter (graph mode), a func transform, autocast or inference mode installs itself
# with `install` (or `using_interpreter`). `Op.__call__` follows it: while eager it is
# `eager_call` itself, so an op call makes no dispatching call first.
current = AutogradInterpreter
_CALLERS = []  # classes whose __call__ follows `current` (ops.registry.Op)


def follow_current(cls):
    """Class decorator: `cls.__call__(op, *inputs, **attrs)` runs the current interpreter,
    now and after every `install`."""
    _CALLERS.append(cls)
    install(current)
    return cls


# while func transforms are entered: their levels' tokens, innermost last (levels.TOKENS);
# `Op.__call__` then stamps each new output with the last (`stamped`), and so does
# `Tensor._wrap` (the tensors factories and kernels outside ops make), else nothing is stamped
STAMP = []


def install(interpreter):
    """Make `interpreter` current (anything with `apply(op, inputs, attrs)`)."""
    global current
    current = interpreter
    if interpreter is AutogradInterpreter:
        entry = eager_call
    else:
        def entry(op, *inputs, **attrs):
            return interpreter.apply(op, inputs, attrs)
    if STAMP:
        entry = stamped(entry)
    for cls in _CALLERS:
        cls.__call__ = entry
    if _WRAPS:
        Tensor._wrap = _WRAPS[1] if STAMP else _WRAPS[0]


alias_token = None  # bound by levels: the stamp of a view of a tensor (levels.alias_token)


def stamped(entry):
    """`entry`, giving each output that is not one of the inputs (an in-place op's) the token
    of the innermost func transform: the level the tensor is made at (levels.own_depth); a
    view of a captured tensor, its frozen twin (in-place writes refused)."""
    def call(op, *inputs, **attrs):
        out = entry(op, *inputs, **attrs)
        token = STAMP[-1]
        for o in (out if type(out) is tuple else (out,)):
            if isinstance(o, Tensor) and not any(o is t for t in inputs):
                o._lvl = token if o._view is None else alias_token(inputs[0], token)
        return out
    return call


def check_read(tensor, what):
    """Reading a tensor's value (item(), bool(), numpy(), printing, a copy by tensor()): a
    tracer refuses it, as its plan could not repeat it, and so does a vmap-batched tensor,
    whose storage is a placeholder (its values differ between examples)."""
    hook = getattr(current, "read", None)
    if hook is not None:
        hook(tensor, what)
    refuse = getattr(tensor, "_refuse", None)  # (a BatchedTensor's)
    if refuse is not None:
        refuse(what)
    if tensor._data.__class__ is MetaArray and what not in _META_READS_NOTHING and \
            _read_for_user():
        _refuse_meta_read(tensor, what)


def require(ok, message, error=ValueError, shown=None):
    """`if not ok.all(): raise error(message)` for a check on values (a boolean tensor `ok`
    computed with ops); eagerly the message ends with `shown` (the values, formatted only on
    failure). Inside nn.Graph's build the plan checks it on every call (the tracer's
    `value_check`, which leaves a constant's to this eager check)."""
    check = getattr(current, "value_check", None)
    if check is not None and check(ok, message, error):
        return
    if not bool(ok.all()):
        raise error(message if shown is None else f"{message}:\n{shown}")


# what reads no value of a meta tensor: its shape and dtype are all it has, and these keep them
_META_READS_NOTHING = frozenset(("printing", "pickling", "copy.deepcopy()"))


def _read_for_user():
    """Whether the value read in progress (check_read's) is the user's: a flowgrad function
    reading a value for its result (save, unique) is; a Tensor method (item(), bool()) is
    where the user called it, not where flowgrad's own code does (a dtype's choice, a shape
    check: a meta tensor's meaningless zeros serve those)."""
    if sys._getframe(2).f_code.co_filename != TENSOR_FILE:
        return True
    return called_by_user(3, through_tensor=True)


def _refuse_meta_read(tensor, what):
    """torch's errors for reading a value of a meta tensor (which has none)."""
    detail = (f" (a meta tensor of shape {tuple(tensor._data.shape)}: a shape and a dtype, no "
              f"values; give it storage with Module.to_empty(device=...) or make it on the "
              f"CPU)")
    if what in ("item()", "bool()", "float()", "int()", "complex()"):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors" + detail)
    if what == "numpy()":
        raise TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() to "
                        "copy the tensor to host memory first." + detail)
    raise NotImplementedError(f"Cannot copy out of meta tensor; no data! ({what})" + detail)


def varies_per_run(tensor):
    """Whether `tensor` holds a value that a compiled plan recomputes on every run (a traced
    graph input or state, or what is computed from them): a choice made on its values (an
    index turned into an int, a shortcut for zeros) must not be frozen into the plan."""
    hook = getattr(current, "varies", None)
    return hook is not None and bool(hook(tensor))


def tracing_a_plan():
    """Whether the current interpreter traces a compiled plan (nn.Graph's build): code that
    works on arrays or Python state, not through ops, runs once there and is not replayed."""
    return getattr(current, "read", None) is not None


def check_host_draw(what):
    """Random numbers drawn by Python outside an op (nn.init's algorithms): a tracer refuses
    them, as its plan would reuse the same numbers on every run."""
    hook = getattr(current, "host_draw", None)
    if hook is not None:
        hook(what)


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
        self.previous = current
        install(self.interpreter)
        return self.interpreter

    def __exit__(self, *exc):
        install(self.previous)


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


def _edge(t):
    """(meta, next node) of an input: (None, None) when it needs no grad; a leaf's node is its
    accumulate_grad."""
    meta = t._meta
    if meta is None or not meta.requires_grad:
        return _NO_EDGE
    node = t._grad_fn
    return meta, node if node is not None else meta.grad_accumulator(t)


_NO_EDGE = (None, None)


def add_node(op, inputs, outputs, attrs, aux):
    """Link a FunctionNode for `op` into the graph: the seed's add_node.

    Leaf inputs that require grad get their accumulate_grad node; each floating output gets
    a fresh AutogradMeta and this node as grad_fn; the op's capture state saves what the
    rule declared it needs.
    """
    if len(inputs) == 1:  # most ops: tuples made at once, no loop
        t = inputs[0]
        data = t._data
        in_shape, in_dtype = data.shape, data.dtype
        input_infos = ((in_shape, in_dtype),)
        meta = t._meta
        if meta is not None and meta.requires_grad:
            node = t._grad_fn
            if node is None:
                node = meta.grad_accumulator(t)
            next_nodes = (node,)
            # the producer's (meta,) itself when t is its only output: one object less per
            # op for the cycle collector to walk
            input_metas = node.output_metas
            if len(input_metas) != 1 or input_metas[0] is not meta:
                input_metas = (meta,)
        else:
            input_metas = next_nodes = (None,)
    elif len(inputs) == 2:  # binary ops: tuples made at once, no lists to grow and freeze
        a, b = inputs
        data, other = a._data, b._data
        input_infos = ((data.shape, data.dtype), (other.shape, other.dtype))
        (meta_a, node_a), (meta_b, node_b) = _edge(a), _edge(b)
        input_metas, next_nodes = (meta_a, meta_b), (node_a, node_b)
    else:
        input_metas, next_nodes, input_infos = [], [], []
        for t in inputs:
            data = t._data
            input_infos.append((data.shape, data.dtype))
            meta = t._meta
            if meta is not None and meta.requires_grad:
                input_metas.append(meta)
                node = t._grad_fn
                next_nodes.append(node if node is not None else meta.grad_accumulator(t))
            else:
                input_metas.append(None)
                next_nodes.append(None)
        input_infos = tuple(input_infos)
    # FunctionNode.__init__ and AutogradMeta.__init__ inline (one call frame each less per
    # op, the hottest lines of a forward); output_metas and output_infos are set below
    node = _new(FunctionNode)
    node.sequence_nr = _next_sequence_nr()
    node.op, node.input_metas, node.next_nodes = op, input_metas, next_nodes
    node.input_infos = _SHARED_INFOS.get(input_infos) or _shared(input_infos)
    if attrs:
        node.__dict__ = attrs
    node._inputs = node._outputs = node.aux = node._needs = None
    node.saved_something = node.released = False
    if (not next_nodes or next_nodes[0] is None) and not any(next_nodes):
        node.__class__ = InertNode  # (only a no_grad view's requires_grad brought us here)
    if len(outputs) == 1:
        out = outputs[0]
        data = out._data
        shape, dtype = data.shape, data.dtype
        if len(inputs) == 1 and dtype is in_dtype and shape == in_shape:
            info = node.input_infos  # elementwise: its input's info
        else:
            info = ((shape, dtype),)
            info = _SHARED_INFOS.get(info) or _shared(info)
        node.output_infos = info
        meta = _new(AutogradMeta)
        meta.is_leaf = meta.retain_grad = False
        meta.acc_grad = meta.current_grad = meta.hooks = meta.post_accumulate_hooks = \
            meta._accumulator = None
        if dtype.kind in _FLOAT_KINDS:
            meta.requires_grad = True
            out._meta, out._grad_fn = meta, node
        else:
            meta.requires_grad = False  # an index output: never gets a grad
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
            elif keep.__class__ is dict:  # grad_reads: what the needed gradients read
                keep = keep[tuple(m is not None for m in input_metas)]
            if keep is None or len(keep) == len(inputs):  # all of them (without a list comp)
                node._inputs = ([SavedTensor(inputs[0], False)] if len(inputs) == 1 else
                                [SavedTensor(inputs[0], False), SavedTensor(inputs[1], False)]
                                if len(inputs) == 2 else [SavedTensor(t, False) for t in inputs])
            else:
                node._inputs = [SavedTensor(t, False) if keep is None or i in keep else None
                                for i, t in enumerate(inputs)]
        if save & 2:
            out = outputs[0]
            if len(outputs) == 1 and out._counter is None:  # SavedTensor(out, True), inline:
                saved = _new(SavedTensor)                   # a fresh output, a new counter
                counter = out._counter = saved.counter = _new(VersionCounter)
                counter.value = saved.version = 0
                saved.is_output, saved.data, saved.meta, saved.tensor = (
                    True, out._data, out._meta, None)
                node._outputs = [saved]
            else:
                node._outputs = [SavedTensor(o, True) for o in outputs]
        # a second backward raises only through a node that did save a tensor (torch's):
        # a product with one input needing grad may save none
        node.saved_something = save != 1 or node._inputs.count(None) < len(node._inputs)
        if save == 4 and node.__class__ is InertNode:
            # a scalar operand (x * 0.5): torch's node keeps it only for an input's gradient
            # that will be computed (its mul/div have two differentiable inputs), none here
            node.saved_something = False
        if _saved_hooks.state.stack:  # inside saved_tensors_hooks (checkpoint, save_on_cpu)
            _saved_hooks.pack_capture(node, inputs, outputs)
    if aux:
        node.aux = aux
        node.saved_something = True
    if _anomaly.enabled:
        _anomaly.record_traceback(node)
    return node
