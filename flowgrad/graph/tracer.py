"""Tracing `nn.Graph.build`: the interpreter that records the job, and the autograd pass.

While `build` runs, `Tracer` is the current interpreter (`interpreter.using_interpreter`):
every op still runs eagerly through `eager_call` (`AutogradInterpreter.apply`), so values,
shapes and the eager capture states are real, and is also recorded as a `Node` of the
`Program`. Arrays are told apart by identity: a tensor that shares its array with a recorded
value (a `detach()`, a saved tensor unpacked) is that value.

`loss.backward()` inside `build` does not run the eager engine: it runs `autograd_pass`, a
pass over the recorded forward nodes in reverse that calls each op's registered gradient rule
through this same tracer, so the backward ops join the Program as ordinary nodes.
"""
from __future__ import annotations

import numpy as np

from ..autograd import engine, grad_mode
from ..autograd.interpreter import eager_call
from ..autograd.node import FunctionNode
from ..errors import freed_graph_error
from ..ops.registry import Op
from ..tensor import Tensor
from . import checkpointing, value_checks, value_shapes
from .ir import CONST, INPUT, NODE, STATE, Node, Program, Value
from .sites import _PACKAGE, user_line, user_site
from .value_shapes import VALUE_SHAPED

# op -> how many frames above the tracer's `user_site` are flowgrad's for certain: 3 for
# flowgrad's own ops, which only flowgrad code calls (no public name is an op:
# tests/test_graph.py), 2 for an op registered elsewhere, which user code may call. A frame
# the walk looks at becomes a frame object (made, then freed with the call): most of its cost
_CALLER_SKIP = {}


_new = object.__new__


def _caller_skip(op):
    module = getattr(op.kernel, "__module__", None) or ""
    skip = _CALLER_SKIP[op] = 3 if module.startswith("flowgrad.") else 2
    return skip


class Tracer:
    """The interpreter in use while `build` runs: eager execution, recorded into a Program."""

    def __init__(self):
        self.program = Program()
        self.value_of = {}     # id(array) -> Value
        self.tensor_of = {}    # value id -> a tensor holding it (results of the first call)
        self.function_of = {}  # Node -> the eager FunctionNode its rule runs from
        self.arrays = {}       # id -> every array seen: alive, so ids stay unique meanwhile
        self.stale = {}        # id(array) -> Value, for arrays an in-place write changed
        self.written_state = {}  # id(array) -> the state/constant Value a write went into
        self.functions = []    # (position among the nodes, node) of custom Functions
        self.made_here = []    # tensors a factory (zeros, arange, ...) made during build
        self.eager_grads = {}  # parameter -> its eager .grad, while build sees the traced one
        self.leaf_eager_grads = {}  # another leaf's meta -> its .grad before build, likewise
        self.value_shaped = False  # whether some traced tensor's size depends on values
        self.rebinds = {}      # (id(store), name) -> a parameter or buffer build assigned anew
        self.phase = "forward"
        self.backups = {}      # id(array) -> (array, its values before build first wrote it)
        self.where = None      # set by the autograd pass: the user_site of its ops

    # ---- values ------------------------------------------------------------------------------
    def bind(self, tensor, kind, source=None):
        """Register an external tensor (a graph input or module state) as a Value."""
        value = self.program.new_value(kind, tensor._data, source)
        self._remember(tensor, value)
        return value

    def value(self, tensor):
        """The Value a tensor holds; an unknown one is a captured constant (used by reference:
        the plan reads its storage at every run)."""
        key = id(tensor._data)
        if key in self.stale:
            raise NotImplementedError(
                f"nn.Graph: a tensor (shape {tuple(tensor.shape)}) is used inside build() after "
                f"an in-place write changed its storage through another tensor (a view or its "
                f"base), at {user_line()}; this is not supported yet: use out-of-place ops")
        value = self.value_of.get(key)
        if value is None:
            value = self.bind(tensor, CONST, tensor)
            if any(t._data is tensor._data for t in self.made_here):
                self._freeze(value, tensor)
        return value

    def _freeze(self, value, tensor):
        """A constant a factory (zeros, arange, ...) made inside build is the same on every
        call: the plan reads a read-only copy of it as made (a later write to the tensor,
        inside build or by the user, does not reach the plan, as eagerly each call makes
        it anew), and constant folding may evaluate what is computed from it once."""
        snapshot = tensor._data.copy()
        snapshot.flags.writeable = False
        value.source = Tensor._wrap(snapshot)
        self.program.__dict__.setdefault("frozen", set()).add(value.id)

    def _remember(self, tensor, value):
        self.value_of[id(tensor._data)] = value
        self.tensor_of.setdefault(value.id, tensor)
        self.arrays[id(tensor._data)] = tensor._data

    # ---- the interpreter -----------------------------------------------------------------
    def apply(self, op, inputs, attrs):
        """Run the op eagerly and record it: its inputs' Values, attributes and outputs."""
        value_of = self.value_of
        if self.stale:
            in_values = [self.value(t) for t in inputs]
        elif len(inputs) == 1:  # (most ops: no comprehension; a Value is never falsy)
            in_values = [value_of.get(id(inputs[0]._data)) or self.value(inputs[0])]
        elif len(inputs) == 2:  # (binary ops: no comprehension either)
            a, b = inputs
            in_values = [value_of.get(id(a._data)) or self.value(a),
                         value_of.get(id(b._data)) or self.value(b)]
        else:  # (the lookup, else a new constant)
            in_values = [value_of.get(id(t._data)) or self.value(t) for t in inputs]
        values = self.program.values
        n_values = len(values)
        result = eager_call(op, *inputs, **attrs)
        # a Node made as Node.__init__ makes it, its slots set here (no call per op); attrs:
        # the entry's own keyword dict, made for this call: kept, not copied
        node = _new(Node)
        node.op, node.inputs, node.attrs, node.outputs, node.phase = \
            op, in_values, attrs, [], self.phase
        # (this frame and its caller, the interpreter's entry or a wrapping interpreter, are
        # flowgrad's, and so is the caller of one of flowgrad's ops: the walk starts above them)
        node.where = self.where or user_site(_CALLER_SKIP.get(op) or _caller_skip(op))
        if type(result) is tuple:
            outs = result
            function = None
            for o in outs:
                grad_fn = o._grad_fn
                if grad_fn is not None and grad_fn.op is op:
                    function = grad_fn
                    break
        else:
            outs = (result,)
            function = result._grad_fn
            if function is not None and function.op is not op:
                function = None
        node.n_results = len(outs)
        if function is not None:
            self.function_of[node] = function
            if function.aux:
                outs = outs + tuple(function.aux)
        if self.value_shaped or op.name in VALUE_SHAPED:
            value_shapes.follow(self, op, inputs, outs, node)
        if len(values) > n_values:  # ops ran inside this one (a saved-tensor pack hook)
            return self._record_around(node, outs, n_values, result)
        # each output a new Value, remembered as `_remember` does (inline: once per op)
        outputs, arrays, tensor_of = node.outputs, self.arrays, self.tensor_of
        for tensor in outs:
            data = tensor._data
            vid = len(values)
            value = _new(Value)  # (as Value.__init__ makes it)
            value.id, value.kind, value.shape, value.dtype, value.source = \
                vid, NODE, data.shape, data.dtype, node
            values.append(value)
            outputs.append(value)
            value_of[id(data)] = value
            tensor_of[vid] = tensor
            arrays[id(data)] = data
        self.program.nodes.append(node)
        return result

    def apply_full(self, op, inputs, attrs):
        """`apply` for a function transform's level (a vmap's batching rules run their ops on
        the physical tensors through the interpreter below them): (outputs, the aux tensors
        the op's eager node keeps). Without it the levels ran their ops eagerly, unrecorded,
        and the plan kept the first call's values (vmap, jacrev inside build)."""
        nodes = self.program.nodes
        result = self.apply(op, inputs, attrs)
        outs = result if type(result) is tuple else (result,)
        node = next((n for n in reversed(nodes) if n.op is op), None)
        function = self.function_of.get(node) if node is not None else None
        return outs, tuple(function.aux) if function is not None and function.aux else ()

    def _record_around(self, node, outs, n_values, result):
        """Record `node` when ops ran while it did: a saved_tensors_hooks pack hook called on
        its outputs (saved before the op returned) made them constants, frozen at their traced
        values. They become the node's outputs, and the node goes before those ops."""
        values = self.program.values
        first_inner = next((i for i, n in enumerate(self.program.nodes)
                            if any(v.id >= n_values for v in n.outputs)), len(self.program.nodes))
        for tensor in outs:
            data = tensor._data
            value = self.value_of.get(id(data))
            if value is not None and value.kind == CONST and value.id >= n_values:
                value.kind, value.source = NODE, node  # a pack hook read it: it is this output
            else:
                value = Value(len(values), NODE, data.shape, data.dtype, node)
                values.append(value)
                self._remember(tensor, value)
            node.outputs.append(value)
        self.program.nodes.insert(first_inner, node)
        return result

    def read(self, tensor, what):
        """Reading a value that depends on the graph's inputs or state would freeze it into the
        plan: refuse, naming the line. Constants may be read, and so may the autograd pass
        (a rule's guard that raises on bad input, checked once here); a rule choosing its
        formula by the values must not let the plan keep that choice: `varies_per_run`."""
        value = self.value_of.get(id(tensor._data))
        if self.phase == "backward" or value is None or value.kind == CONST:
            # a constant (or a Python number being wrapped) reads the same every run; a
            # captured eager tensor is read by reference: the plan is stale once it changes
            if self.phase != "backward" and (value is None or value.id not in getattr(
                    self.program, "frozen", ())) and not any(
                    t._data is tensor._data for t in self.made_here):
                self.program.read_guards.append((tensor, tensor._data.copy()))
            return
        raise RuntimeError(
            f"nn.Graph: {what} of a tensor (shape {tuple(tensor.shape)}) inside build() reads "
            f"its value, which the compiled plan cannot do: at {user_line()}. Keep the "
            f"computation in tensor ops (flow.where instead of `if`), or pass the value to the "
            f"graph as a Python argument")

    def value_check(self, ok, message, error=ValueError):
        """`if not ok.all(): raise error(message)` on a value the plan computes: checked now
        and by the plan on every call (`value_checks`); False for a constant, which the
        caller checks as eagerly."""
        return value_checks.record(self, ok, message, error)

    def varies(self, tensor):
        """Whether the plan recomputes `tensor` per run (not a constant): `varies_per_run`."""
        value = self.value_of.get(id(tensor._data))
        return value is not None and value.kind != CONST

    def is_input(self, tensor):
        """Whether `tensor` is a graph input itself (whose layout each call may change)."""
        value = self.value_of.get(id(tensor._data))
        return value is not None and value.kind == INPUT

    def host_draw(self, what):
        """Random numbers drawn outside an op while build runs would be frozen into the plan:
        refuse, naming the line."""
        raise RuntimeError(
            f"nn.Graph: {what} draws its random numbers outside an op, once, while build() is "
            f"traced, so the compiled plan would reuse them on every call: at {user_line()}. "
            f"Initialize parameters outside build(), or draw with random ops (flow.rand, "
            f"flow.randn, Tensor.uniform_, Tensor.normal_), which a plan draws anew each call")

    def inplace(self, tensor):
        """An in-place write is about to change `tensor`'s storage: every known array sharing
        it is stale until `written` says which recorded value it now holds."""
        data = tensor._data
        for key, array in self.arrays.items():
            if key not in self.stale and np.may_share_memory(array, data):
                self.stale[key] = self.value_of.get(key)

    def writing(self, target, result):
        """About to write into `target`'s storage in place: the array of a graph input,
        parameter, buffer or captured tensor (or a view of one) keeps its values before
        build's first write to it, for a failed trace to put back (`restore_writes`): the
        trace's writes ran eagerly, and flow.compile then runs the call eagerly again (a
        BatchNorm's running stats were updated twice)."""
        data = target._data
        if id(data) in self.backups:
            return
        value = self.value_of.get(id(data))
        if value is None or value.kind == NODE:
            base = data.base
            value = None if base is None else self.value_of.get(id(base))
            if value is None or value.kind == NODE:
                return
        self.backups[id(data)] = (data, data.copy())

    def restore_writes(self):
        """Put back the values build's in-place writes changed (`writing`), latest first."""
        for data, before in reversed(list(self.backups.values())):
            data[...] = before
        self.backups = {}

    def written(self, target, result):
        """An in-place op left `result`'s value in `target` (its storage now holds it); a write
        to a parameter or buffer becomes a write-back at the end of the plan."""
        key = id(target._data)
        before = self.stale.pop(key, None) or self.value_of.get(key)
        if result._data is not target._data:
            self.value_of[key] = self.value(result)
            # the first call hands out the written tensor itself, as eagerly: its views share
            # its storage
            self.tensor_of[self.value_of[key].id] = target
        if before is not None:
            self._keep_write(key, key, before, target, self.value_of[key])

    def _keep_write(self, key, new_key, before, target, value):
        """`target` (whose array had id `key`, now `new_key`) holds `value` after a write: a
        parameter, buffer, graph input or captured eager tensor keeps the (last) write after
        the plan, as eagerly."""
        origin = self.written_state.get(key)
        if origin is None and (before.kind == STATE or before.kind == INPUT or before.kind ==
                               CONST and before.source._data is target._data):
            origin = before
        if origin is None:
            return
        self.written_state[new_key] = origin
        if origin.kind == INPUT:  # the plan writes into the array the caller gave
            self.program.input_writes[origin.source] = value
            return
        self.program.writebacks[origin.source] = value
        if origin.kind == STATE:
            # a parameter written under no_grad is still the leaf its later reads reach:
            # their gradients are its gradient
            self.program.leaf_values[value.id] = origin

    def relayout(self, name, target):
        """`target.t_()`, `unsqueeze_`, `resize_` inside build: the caller's tensor (an input, a
        parameter or buffer, a captured tensor) would change its shape on the first call only;
        the plan cannot change a tensor it was handed. A tensor made in build may."""
        value = self.value_of.get(id(target._data))
        if value is None or value.kind == NODE or value.id in getattr(
                self.program, "frozen", ()):
            return
        raise NotImplementedError(
            f"nn.Graph: {name} changes the shape of a graph input, parameter, buffer or "
            f"captured tensor (shape {tuple(target.shape)}) inside build() at {user_line()}; "
            f"the compiled plan cannot: use the out-of-place form (x = x.{name[:-1]}(...))")

    def data_set(self, target, array):
        """`target.data = other` inside build: target now holds other's array, so a
        parameter, buffer, input or captured tensor keeps other's value after the plan (the
        plan copies it in: the same shape and dtype only)."""
        key = id(target._data)
        before = self.value_of.get(key)
        if before is None:
            return
        if array.shape != target._data.shape or array.dtype != target._data.dtype:
            if before.kind != NODE:
                raise NotImplementedError(
                    f"nn.Graph: `.data = ` gives a parameter, buffer or input (shape "
                    f"{tuple(target._data.shape)}, {target._data.dtype}) another shape or "
                    f"dtype ({tuple(array.shape)}, {array.dtype}) inside build() at "
                    f"{user_line()}; the plan can only write values of the same shape: "
                    f"assign outside build, or use copy_ with a tensor of the same shape")
            return
        value = self.value_of.get(id(array)) or self.value(Tensor._wrap(array))
        self._keep_write(key, id(array), before, target, value)

    def finish(self):
        """After build: each parameter's gradient is what its .grad held at the end of build
        (written in place, or set to None), and its eager .grad is back; a parameter or buffer
        written by something the trace cannot replay raises."""
        for param in self.eager_grads:
            final = param._meta.acc_grad
            if final is None:
                self.program.grads.pop(param, None)
            else:
                self.program.grads[param] = self.value(final)
        if self.leaf_eager_grads:
            self._leaf_results()
        self.restore_grads()
        if self.program.value_roots:
            value_shapes.guard_sizes(self.program)

    def rebinding(self, store, path, name):
        """A module's parameter, buffer or tensor attribute is about to be assigned anew
        inside build (`self.avg = ...`): its store, path and the tensor it held, once per
        name."""
        self.rebinds.setdefault((id(store), name),
                                (store, path, name, store.get(name), name in store))

    def _leaf_results(self):
        """The gradients a graph input or a captured eager tensor holds at the end of build:
        results of the plan, which `Graph` adds into the tensor's .grad after each call (a
        leaf made inside build lives for the call only: its .grad was build's to read)."""
        made = {id(t._data) for t in self.made_here}
        for value in self.program.values:
            if value.kind == INPUT:
                tensor, key = self.tensor_of[value.id], value.source
            elif value.kind == CONST and id(value.source._data) not in made and \
                    value.id not in getattr(self.program, "frozen", ()):
                tensor = key = value.source
            else:
                continue
            meta = tensor._meta
            if meta is not None and meta in self.leaf_eager_grads and \
                    meta.acc_grad is not None and key not in self.program.leaf_grads:
                self.program.leaf_grads[key] = self.value(meta.acc_grad)

    def restore_grads(self):
        """Put the parameters' eager .grad back (after build, or when build raised)."""
        for param, eager_grad in self.eager_grads.items():
            param._meta.acc_grad = eager_grad
        self.eager_grads = {}
        for meta, eager_grad in self.leaf_eager_grads.items():
            meta.acc_grad = eager_grad
        self.leaf_eager_grads = {}
        for key, before in self.stale.items():
            if before is not None and before.kind == STATE and \
                    before.source not in self.program.writebacks:
                raise NotImplementedError(
                    f"nn.Graph: build() wrote a parameter or buffer (shape {before.shape}) in a "
                    f"way the trace cannot replay (a write through a view of it, or into its "
                    f"array directly); write it with an op (x.copy_(...), x.add_(...))")

    def checkpointed(self, function, args, kwargs):
        """`flowgrad.utils.checkpoint` inside build: `checkpointing.checkpointed`."""
        return checkpointing.checkpointed(self.program, function, args, kwargs)

    # ---- custom autograd.Function ----------------------------------------------------------
    def function_node(self, function, inputs, outputs):
        """A custom Function ran: its forward's ops are recorded already; remember the node that
        links its inputs to its outputs, so the autograd pass runs its backward."""
        in_values = [self.value(t) for t in inputs]
        out_values = []
        for t in outputs:
            value = self.value(t)
            if value.kind != NODE or any(value is v for v in in_values):
                # an input (or state) handed back as it is (`t.detach()`, as module backward
                # hooks do): a value of its own, a copy, or the gradients of output and input
                # would add up in one value (counted twice) and skip the Function's backward
                value = self._copy_into(t, value)
            out_values.append(value)
        node = Node(function.op, in_values, {}, out_values, "function")
        self.functions.append((len(self.program.nodes), node))
        self.function_of[node] = function

    def _copy_into(self, tensor, value):
        """Record `tensor = clone(value)`: tensor gets a copy of its array as a new value."""
        from ..ops.shape import _clone

        copy = tensor._data.copy()
        node = Node(_clone, [value], {}, [], self.phase)
        node.where = self.where or user_site(2)
        out = Value(len(self.program.values), NODE, copy.shape, copy.dtype, node)
        self.program.values.append(out)
        node.outputs.append(out)
        node.n_results = 1
        self.program.nodes.append(node)
        tensor._data = copy
        self.value_of[id(copy)] = out
        self.tensor_of[out.id] = tensor
        self.arrays[id(copy)] = copy
        return out

    # ---- the autograd pass ---------------------------------------------------------------
    def backward(self, tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                 inputs=None):
        """`loss.backward()` inside build: the autograd pass over the recorded job; each
        trainable parameter's gradient becomes a result of the plan, and so does that of a
        graph input or captured tensor that requires grad (added into its .grad after each
        call, as eagerly); every leaf's .grad reads the traced gradient until build ends."""
        tensors = tuple(tensors) if isinstance(tensors, (tuple, list)) else (tensors,)
        self.program.differentiated = True
        if inputs is not None:
            raise NotImplementedError(
                f"nn.Graph: backward(inputs=...) is not supported inside build() yet (at "
                f"{user_line()}); use flow.autograd.grad(outputs, inputs)")
        if isinstance(grad_tensors, Tensor):
            grad_tensors = (grad_tensors,)
        grad_tensors = tuple(grad_tensors) if grad_tensors is not None else \
            (None,) * len(tensors)
        if len(grad_tensors) != len(tensors):
            raise RuntimeError(f"backward: got {len(tensors)} tensors but {len(grad_tensors)} "
                               f"gradients")
        # eager's checks (a root that requires no grad, an implicit seed of a non-scalar, a
        # seed of another shape) and its seeds
        seeds = [g for _, _, g in engine._roots_and_seeds(tensors, grad_tensors, create_graph)]
        leaves = {}
        autograd_pass(self, list(tensors), seeds, create_graph, leaves, retain_graph)
        for value in self.program.states:
            if value.source.requires_grad:
                reached = leaves.pop(value.source._meta, None)
                if reached is not None:
                    g = self._leaf_hooked(reached[0], value.source, create_graph)
                    self._accumulate(value.source, g, create_graph)
        for meta, (g, shape) in leaves.items():
            g = self._meta_hooked(g, meta, shape, create_graph)
            if meta not in self.leaf_eager_grads:
                self.leaf_eager_grads[meta] = meta.acc_grad
                meta.acc_grad = None
            current = meta.acc_grad
            if current is not None:
                with grad_mode.set_grad_enabled(create_graph):
                    g = current + g
            meta.acc_grad = g
            self.value(g)

    def _accumulate(self, param, g, create_graph):
        """param.grad += g, as eagerly, on the traced gradient: the rest of build reads it
        (a gradient norm, a second backward adds to it, zero_grad drops it); every call of
        the plan starts from no gradient, the eager .grad is back after build (`finish`)."""
        if param not in self.eager_grads:
            self.eager_grads[param] = param._meta.acc_grad
        else:
            current = param._meta.acc_grad
            if current is not None:
                with grad_mode.set_grad_enabled(create_graph):
                    g = current + g
        param._meta.acc_grad = g
        self.program.grads[param] = self.value(g)

    def _leaf_hooked(self, g, leaf, create_graph):
        """`g` after the leaf's tensor hooks (`leaf.register_hook`), recorded as the eager
        engine's accumulate_grad runs them; post-accumulate-grad hooks (an optimizer step in
        backward, DDP's all-reduce) cannot be replayed by a plan: refused, not skipped."""
        meta = leaf._meta
        if meta is None:
            return g
        return self._meta_hooked(g, meta, tuple(leaf.shape), create_graph)

    def _meta_hooked(self, g, meta, shape, create_graph):
        """`_leaf_hooked` on the leaf's meta (`shape`: the leaf's, for the message)."""
        if meta.post_accumulate_hooks:
            raise NotImplementedError(
                f"nn.Graph: a parameter (shape {shape}) has post-accumulate-grad "
                f"hooks (register_post_accumulate_grad_hook, or DistributedDataParallel's), "
                f"which a compiled plan cannot run (at {user_line()}); remove them, or change "
                f"the gradient with a tensor hook (register_hook) instead")
        if not meta.hooks:
            return g
        phase, self.phase = self.phase, "backward"
        try:
            with grad_mode.set_grad_enabled(create_graph):
                g = engine._run_hooks(meta.hooks, g)
        finally:
            self.phase = phase
        self.value(g)
        return g

    def _leaf_gradient(self, grads, value):
        """The gradient reaching `value`; for a parameter's value, the sum over every value the
        parameter held in build (written in place under no_grad, it stays one leaf: the reads
        before and after the write all reach it)."""
        leaf_values = self.program.leaf_values
        state = value if value.kind == STATE else leaf_values.get(value.id)
        if state is None:
            return grads.get(value.id)
        total = None
        for vid in [state.id] + [i for i, s in leaf_values.items() if s is state]:
            g = grads.get(vid)
            if g is not None:
                total = g if total is None else total + g
        return total

    def grad(self, outputs, inputs, grad_outputs=None, create_graph=False, allow_unused=False,
             materialize_grads=False, retain_graph=None):
        """`flow.autograd.grad` inside build: the same pass, returning the gradients as traced
        tensors (differentiable again with create_graph=True: a gradient penalty)."""
        self.program.differentiated = True
        if not grad_outputs or len(grad_outputs) == 1 and grad_outputs[0] is None:
            grad_outputs = (None,) * len(outputs)
        grad_outputs = tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise RuntimeError(f"grad: got {len(outputs)} outputs but {len(grad_outputs)} "
                               f"grad_outputs")
        # eager's checks and seeds (see backward)
        seeds = [g for _, _, g in engine._roots_and_seeds(outputs, grad_outputs, create_graph)]
        leaves = {}
        grads = autograd_pass(self, list(outputs), seeds, create_graph, leaves, retain_graph)
        result = []
        for i, t in enumerate(inputs):
            meta = t._meta
            if t._grad_fn is None and meta is not None and meta.is_leaf:
                g = leaves.get(meta, (None,))[0]  # (per tensor: see autograd_pass)
            else:
                g = self._leaf_gradient(grads, self.value(t))
            if g is not None and t._grad_fn is None:
                g = self._leaf_hooked(g, t, create_graph)
            if g is None and not allow_unused:
                raise RuntimeError(f"nn.Graph: input {i} of autograd.grad was not used to "
                                   f"compute the outputs; pass allow_unused=True")
            if g is None and materialize_grads:
                g = Tensor._zeros(t._data.shape, t._data.dtype, t)
                self.value(g)
            result.append(g)
        return tuple(result)


def autograd_pass(tracer, roots, seeds, create_graph, leaves=None, retain_graph=None):
    """Walk the recorded nodes from `roots` back, calling each op's registered gradient rule
    (through the tracer, so its ops join the Program); returns {value id: gradient tensor}.
    With create_graph the rules' ops are recorded for autograd too, so a later pass can
    differentiate them again. `leaves` (a dict) gets {meta: (gradient, shape)} for every leaf
    reached, summed per tensor, not per value: `w.detach().requires_grad_()` shares w's
    value, not its gradient. Without `retain_graph` (default: `create_graph`) each node run
    is marked released, as eagerly, so a second pass through one that saved tensors raises
    eager's error instead of adding the gradients again."""
    from ..ops.creation import ones_like

    collected = leaves
    release = not (create_graph if retain_graph is None else retain_graph)

    program = tracer.program
    nodes = list(program.nodes)
    for position, node in reversed(tracer.functions):  # custom Functions, in place
        nodes.insert(position, node)
    grads = {}  # value id -> gradient tensor
    reached = set()  # value ids the roots reach through inputs that require grad
    phase, where, function_of = tracer.phase, tracer.where, tracer.function_of
    value_of = tracer.value_of
    # the ops a registered rule (flowgrad's own code) records are the user's backward() line:
    # found once here, not by a walk up the stack per op
    outer = user_site()
    tracer.phase = "backward"
    try:
        with grad_mode.set_grad_enabled(create_graph):
            for i, root in enumerate(roots):
                seed = seeds[i] if seeds is not None and seeds[i] is not None else \
                    ones_like(root)
                _add(tracer, grads, tracer.value(root), seed)
                reached.add(tracer.value(root).id)
                meta = root._meta
                if collected is not None and meta is not None and meta.is_leaf:
                    _add_leaf(collected, meta, seed, tuple(root.shape))
            for node in reversed(nodes):
                function = function_of.get(node)
                if function is None:
                    continue
                if node.n_results == 1:  # (most ops: no list to filter)
                    out = node.outputs[0]
                    g = grads.get(out.id)
                    if g is None:
                        # reached by the roots, it still runs, on zeros, as the eager
                        # engine runs it: a rule that drops an input (fill's) gives the
                        # leaves behind it zeros, not None (an optimizer skips None)
                        if out.id not in reached:
                            continue
                        g = _materialized(function, out)
                    out_grads = [g]
                else:
                    results = node.outputs[:node.n_results]
                    out_grads = [grads.get(v.id) for v in results]
                    if not any(v.id in reached for v in results):
                        continue
                    out_grads = [g if g is not None else _materialized(function, v)
                                 for g, v in zip(out_grads, results)]
                metas = function.output_metas
                if len(metas) == 1 and (metas[0] is None or not metas[0].hooks and
                                        not metas[0].retain_grad):
                    metas = ()  # (most nodes: one output, neither hooks nor retain_grad)
                for k, meta in enumerate(metas):
                    if meta is not None and meta.hooks and out_grads[k] is not None:
                        # the tensor's hooks (register_hook), as the eager engine's _take_grad
                        tracer.where = None
                        g = engine._run_hooks(meta.hooks, out_grads[k])
                        out_grads[k] = grads[node.outputs[k].id] = g
                        if tracer.stale or id(g._data) not in value_of:
                            tracer.value(g)
                    if meta is not None and meta.retain_grad and out_grads[k] is not None:
                        engine._retain(meta, out_grads[k])  # h.retain_grad() in build
                own = (_OWN_RULE.get(function.op) if type(function).behaviour is FunctionNode
                       else False)
                tracer.where = outer if own or own is None and _own_rule(function) else None
                if function.released and function.saved_something:
                    raise freed_graph_error(function)
                in_grads = function.backward_fn(out_grads)
                if release:
                    function.released = True
                if type(in_grads) is not tuple:
                    in_grads = tuple(in_grads) if isinstance(in_grads, list) else (in_grads,)
                for meta, g, value, info in zip(function.input_metas, in_grads, node.inputs,
                                                function.input_infos):
                    if meta is None:
                        continue
                    reached.add(value.id)
                    if g is None:
                        continue
                    if g.__class__ is not Tensor and getattr(g, "is_sparse", False):
                        # (a sparse Embedding's weight gradient: dense in a plan, whose
                        # update ops read arrays)
                        g = g.to_dense()
                    data = g._data
                    if data.shape != info[0] or data.dtype is not info[1] and \
                            data.dtype != info[1]:  # (dtypes: the same object, most often)
                        g = engine._fit_grad(g, info[0], info[1], function)
                    if collected is not None and (meta.is_leaf or value.kind != NODE) and (
                            value.kind != NODE or value.source not in function_of):
                        # (a value an op made, with a rule: the gradient goes on through it,
                        # to the leaf it came from; an unpacked saved tensor whose pack hook
                        # copied the leaf carries the leaf's meta on that copy. An input or
                        # captured tensor with an eager history is where the trace ends: its
                        # gradient goes on into that history after each call)
                        _add_leaf(collected, meta, g, info[0])
                    old = grads.get(value.id)  # (as _add, inline: once per gradient)
                    if old is not None:
                        g = old + g
                    grads[value.id] = g
                    if tracer.stale or id(g._data) not in value_of:
                        tracer.value(g)
    finally:
        tracer.phase, tracer.where = phase, where
    return grads


_OWN_RULE = {}  # registry op -> whether its gradient rule is flowgrad's code


def _own_rule(function):
    """Whether `function` runs a rule of flowgrad's registry written in flowgrad (no user
    code runs in it: not a custom Function's backward, nor a node with hooks)."""
    if type(function).behaviour is not FunctionNode:
        return False
    op = function.op
    own = _OWN_RULE.get(op)
    if own is None:
        code = getattr(op.backward, "__code__", None) if type(op) is Op else None
        own = _OWN_RULE[op] = code is not None and code.co_filename.startswith(_PACKAGE)
    return own


def _add(tracer, grads, value, g):
    old = grads.get(value.id)
    grads[value.id] = g = g if old is None else old + g
    if tracer.stale or id(g._data) not in tracer.value_of:
        tracer.value(g)


def _add_leaf(collected, meta, g, shape):
    old = collected.get(meta)
    collected[meta] = (g if old is None else old[0] + g, shape)


def _materialized(function, value):
    """The gradient of an output that received none, as the eager engine's `_take_grad`:
    zeros, or None for a custom Function that asked not to materialize them."""
    from ..tensor import Tensor

    materialize = getattr(function.op, "materialize_grads", None)
    if materialize is not None and not materialize(function):
        return None
    return Tensor._zeros(value.shape, value.dtype)


__all__ = ["Tracer", "autograd_pass", "user_line", "INPUT", "STATE", "CONST"]
