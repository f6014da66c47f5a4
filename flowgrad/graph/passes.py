"""Passes over a traced Program. Each takes a Program, rewrites it in place and returns it.

`optimize` runs `PIPELINE`: algebraic simplification, common-subexpression elimination,
constant folding, activation checkpointing's recomputation (`checkpointing.py`: after CSE,
which would merge a recomputed node back into its original), dead-code elimination, max
pooling moved before the relu it alone reads, elementwise fusion (`fusion.py`), the
optimizer's update nodes (`optimizer_pass.py`: last, so no rewrite moves a read of a
parameter past its update), then the liveness annotation codegen may use to drop arrays
early. No pass changes a number: a rewrite is made only where the result is bitwise the same
array (same dtype, shape and values; the one exception, `pool_before_relu`, may give a zero
gradient in a pooling window the other sign), and never where it would make a result
returned to the user share storage it did not share before.

>>> from flowgrad.graph.ir import Program
>>> eliminate_dead_code(Program()).nodes
[]
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..ops.pool import _max_pool as _MAX_POOL
from ..random import Generator
from .checkpointing import recompute_checkpoints
from .fusion import fuse_elementwise
from .ir import CONST, NODE, Value
from .optimizer_pass import fuse_plain_steps, place_updates


# ---- helpers ------------------------------------------------------------------------------
def trace(fn, *tensors):
    """The forward Program of `fn(*tensors)` (tensors as graph inputs): for examples and tests.

    >>> import flowgrad as flow
    >>> trace(lambda x: x * 2, flow.ones(2))
    inputs: [v0]
      [forward] v1 = scalar_mul(v0, value=2)
    outputs: [v1]
    """
    from ..autograd.interpreter import using_interpreter
    from .tracer import Tracer

    tracer = Tracer()
    for i, t in enumerate(tensors):
        tracer.program.inputs.append(tracer.bind(t, "input", i))
    with using_interpreter(tracer):
        out = fn(*tensors)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    tracer.program.outputs = [tracer.value(t) for t in outs]
    return tracer.program


def _results(program):
    return {v.id for v in program.results()}


def _results_and_their_bases(program):
    """The results, and every value a result is a view of (through view ops: expand, slicing,
    permute, ...). Replacing one of those by its input would hand the user a tensor sharing
    the input's storage, where eagerly it had storage of its own."""
    keep = _results(program)
    for node in reversed(program.nodes):
        if getattr(node.op, "is_view", False) and any(v.id in keep for v in node.outputs):
            keep.update(v.id for v in node.inputs)
    return keep


def _replace_uses(program, replace):
    """Point every use of value id `k` (node inputs, outputs, gradients, write-backs) at
    `replace[k]`."""
    if not replace:
        return program

    def get(value):
        while value.id in replace:
            value = replace[value.id]
        return value

    for node in program.nodes:
        node.inputs = [get(v) for v in node.inputs]
    program.outputs = [get(v) for v in program.outputs]
    program.grads = {p: get(v) for p, v in program.grads.items()}
    writebacks = getattr(program, "writebacks", None)
    if writebacks:
        program.writebacks = {t: get(v) for t, v in writebacks.items()}
    if program.input_writes:
        program.input_writes = {i: get(v) for i, v in program.input_writes.items()}
    if program.leaf_grads:
        program.leaf_grads = {k: get(v) for k, v in program.leaf_grads.items()}
    return program


def is_random(node):
    """A node drawing from a Generator (its attributes hold one): every run differs."""
    attrs = node.attrs
    if not attrs:
        return False
    if "generator" in attrs:
        return True
    for a in attrs.values():
        if isinstance(a, Generator):
            return True
    return False


def _has_aux(node):
    return len(node.outputs) != node.n_results


def _key(obj):
    """A hashable key equal only for attributes that make a kernel compute the same: the type
    is part of it (1, 1.0 and True promote differently), floats by repr (0.0 vs -0.0, nan),
    containers and slices elementwise, dtypes by value; anything else by identity."""
    kind = type(obj)
    if kind is float:
        return kind, repr(obj)
    if obj is None or kind in (bool, int, str, complex, np.dtype):
        return kind, obj
    if isinstance(obj, np.generic):
        return kind, repr(obj)
    if kind in (tuple, list):
        return kind, tuple(_key(o) for o in obj)
    if kind is slice:
        return kind, _key(obj.start), _key(obj.stop), _key(obj.step)
    if kind is dict:
        return kind, tuple((k, _key(v)) for k, v in sorted(obj.items()))
    return "id", id(obj)


# ---- common-subexpression elimination -------------------------------------------------------
def _never_merged(node):
    return is_random(node) or len(node.outputs) != node.n_results


def _attrs_key(attrs):
    return tuple([(k, _key(attrs[k])) for k in sorted(attrs)]) if attrs else ()


def eliminate_common_subexpressions(program):
    """Two nodes with the same op, the same input values and equal attributes compute the same:
    keep the first, point uses of the other's outputs at the first's. Random nodes and nodes
    with aux outputs are never merged, nor two results or values results are views of (the
    user's tensors would share storage).

    >>> import flowgrad as flow
    >>> p = trace(lambda x: (x.exp() + x.exp()).sum(), flow.ones(3))
    >>> [n.op.name for n in eliminate_common_subexpressions(p).nodes]
    ['exp', 'add', 'sum']
    """
    handed_out = None  # (_results_and_their_bases: made once two nodes may merge)
    # (id of the op, *input ids) -> the first node with them; once a second one comes,
    # {attribute key: first node}: most nodes have inputs of their own, and never build an
    # attribute key (nor ask whether they may merge)
    seen, replace, dropped = {}, {}, set()
    for node in program.nodes:
        inputs = node.inputs
        if replace:
            inputs = node.inputs = [replace.get(v.id, v) for v in inputs]
        n_in = len(inputs)  # (the op by identity: an op object may define __eq__)
        key = (id(node.op), inputs[0].id) if n_in == 1 else \
            (id(node.op), inputs[0].id, inputs[1].id) if n_in == 2 else \
            (id(node.op), *[v.id for v in inputs])
        first = seen.setdefault(key, node)
        if first is node:
            continue
        if first.__class__ is not dict:
            first = seen[key] = {_attrs_key(first.attrs): first}
        by_attrs, attrs_key = first, _attrs_key(node.attrs)
        first = by_attrs.get(attrs_key)
        if first is None or _never_merged(first):  # (it stands for them until one can)
            by_attrs[attrs_key] = node
            continue
        if _never_merged(node):
            continue
        if handed_out is None:
            handed_out = _results_and_their_bases(program)
        if any(a.id in handed_out and b.id in handed_out
               for a, b in zip(first.outputs, node.outputs)):
            continue  # two tensors the user gets (or views of them) stay two
        for a, b in zip(first.outputs, node.outputs):
            replace[b.id] = a
            if b.id in handed_out:
                handed_out.add(a.id)
        dropped.add(id(node))
    if dropped:
        program.nodes = [node for node in program.nodes if id(node) not in dropped]
    return _replace_uses(program, replace)


# ---- constant folding -------------------------------------------------------------------
def frozen_values(program):
    """Ids of CONST values whose arrays nobody can change between runs: the ones the tracer
    or a pass marked in `program.frozen` (a set; absent means none). Captured eager tensors are
    not frozen: the plan reads them by reference, and the user may write them between calls."""
    return getattr(program, "frozen", None) or set()


def fold_constants(program):
    """Evaluate once, at compile time, a deterministic node (no random attribute) whose inputs
    are all frozen constants (a node without inputs qualifies); its outputs become frozen
    constants (read-only arrays), so chains fold. A node whose output is a result is left to
    run: the plan must hand the user a fresh array each call.

    >>> import flowgrad as flow
    >>> p = trace(lambda x: x * 2, flow.ones(2))
    >>> len(fold_constants(p).nodes)  # x is an input: nothing to fold
    1
    """
    frozen = set(frozen_values(program))
    if not frozen and all(node.inputs for node in program.nodes):
        program.frozen = frozen  # (nothing can fold: only a node without inputs could)
        return program
    results = _results_and_their_bases(program)
    kept = []
    for node in program.nodes:
        for v in node.inputs:  # (a loop: most nodes stop at their first input)
            if v.id not in frozen:
                break
        else:
            if not is_random(node) and not any(v.id in results for v in node.outputs):
                _fold(node, frozen)
                continue
        kept.append(node)
    program.frozen = frozen
    program.nodes = kept
    return program


def _fold(node, frozen):
    """Run `node` now: its outputs become frozen constants."""
    from ..device import ARRAY_MODULES, HOST_XP
    from ..tensor import Tensor

    arrays = [v.source._data for v in node.inputs]
    xp = ARRAY_MODULES.get(type(arrays[0]), HOST_XP) if arrays else HOST_XP
    out = node.op.kernel(xp, *arrays, **node.attrs)
    out = out if type(out) in (tuple, list) else (out,)
    for value, array in zip(node.outputs, out):
        if isinstance(array, np.generic) or not hasattr(array, "flags"):
            array = xp.asarray(array)  # a kernel's 0-d result may be a NumPy scalar
        array.flags.writeable = False
        value.kind, value.source = CONST, Tensor._wrap(array)
        frozen.add(value.id)


# ---- algebraic simplification --------------------------------------------------------------
def _is_identity_scalar(node, x):
    """x * 1, x / 1, x + (-0.0) and x + 0 on integers: bitwise x. (x + 0.0 is not:
    -0.0 + 0.0 is +0.0; x * 1.0 on integers goes through float64; a float multiply by 1
    quiets a signalling NaN, which NumPy never produces, so that one is accepted.)"""
    value = node.attrs.get("value")
    if type(value) not in (int, float) or value != 0 and value != 1:
        return False
    kind = np.dtype(x.dtype).kind
    if kind not in "iufc":
        return False
    if kind in "iu" and type(value) is float:
        return False
    if node.op.name in ("scalar_mul", "scale", "scalar_div"):
        return value == 1
    if node.op.name == "scalar_add":
        return value == 0 and (type(value) is int and kind in "iu"
                               or type(value) is float and math.copysign(1.0, value) < 0)
    return False


def simplify_algebra(program):
    """Rewrites that leave every bit of the result unchanged: permute of a permute becomes one
    permute (or nothing, when the two cancel), reshape of a reshape one reshape (or nothing,
    back at the input's shape), `x * 1`, `x / 1` and `x + (-0.0)` (integers: `x + 0`) are x.
    A node whose output is a result, or what a result is a view of, is never replaced by its
    input (the user would get a tensor sharing the input's storage).

    >>> import flowgrad as flow
    >>> p = trace(lambda x: (x.t().t() * 1.0).sum(), flow.ones(2, 3))
    >>> [n.op.name for n in eliminate_dead_code(simplify_algebra(p)).nodes]
    ['sum']
    """
    results = None  # (_results_and_their_bases: made once a node may be rewritten)
    replace = {}
    kinds = _SIMPLIFIED
    for node in program.nodes:
        if replace:
            node.inputs = [replace.get(v.id, v) for v in node.inputs]
        kind = kinds.get(node.op.name)
        if kind is None:
            kind = _simplified_kind(node.op.name)
        if not kind:
            continue
        if kind is _SCALAR:  # (a value of 0 or 1 only; inline: a scalar op is one node in three)
            value = node.attrs.get("value")
            if type(value) not in (int, float) or value != 0 and value != 1:
                continue
        if len(node.inputs) != 1 or len(node.outputs) != node.n_results:
            continue
        if results is None:
            results = _results_and_their_bases(program)
        out = node.outputs[0]
        x = node.inputs[0]
        inner = x.source if x.kind == NODE and x.source.op is node.op else None
        if kind is _PERMUTE and inner is not None:
            dims = tuple(inner.attrs["dims"][d] for d in node.attrs["dims"])
            node.inputs, node.attrs = [inner.inputs[0]], dict(node.attrs, dims=dims)
        elif kind is _RESHAPE and inner is not None and out.id not in results:
            # (not under a result: the inner reshape may have copied, eagerly, a layout a
            # view cannot take, and then the result owns its storage)
            node.inputs = [inner.inputs[0]]
        x = node.inputs[0]
        if out.id in results or tuple(out.shape) != tuple(x.shape) or out.dtype != x.dtype:
            continue
        if kind is _PERMUTE and node.attrs["dims"] == tuple(range(len(out.shape))) or \
                kind is _RESHAPE or kind is _SCALAR and _is_identity_scalar(node, x):
            replace[out.id] = x
    return _replace_uses(program, replace)


_PERMUTE, _RESHAPE, _SCALAR = "permute", "reshape", "scalar"
_SIMPLIFIED = {}  # op name -> the rewrite simplify_algebra may make of it ("" for none)


def _simplified_kind(name):
    """The rewrite `simplify_algebra` may make of a node of op `name` (_PERMUTE, _RESHAPE,
    _SCALAR for a scalar op, "" for none): found once per op name."""
    if len(_SIMPLIFIED) >= 4096:  # (fused chains' names are many: bounded)
        _SIMPLIFIED.clear()
    kind = _SIMPLIFIED[name] = (_PERMUTE if name == "permute" else _RESHAPE if name ==
                                "reshape" else _SCALAR if name.startswith("scalar_") else "")
    return kind


# ---- relu after max pooling ----------------------------------------------------------------
def pool_before_relu(program):
    """max_pool(relu(x)) -> relu(max_pool(x)), and in backward relu_grad then
    max_pool_backward: relu and its gradient run on the pooled values (a quarter of them
    under 2x2 windows; LeNet's and VGG's conv -> relu -> pool). relu is monotone, so each
    window's first maximum is at the same tap whenever it is positive (or nan); where it is
    not, the pooled value is 0 and its gradient 0 either way (only a zero's sign may move
    to another tap of the window). Made only where no window reads padding, the indices are
    unused, and relu's output, the pool's indices and the pool's gradient have no other
    reader.

    >>> import flowgrad as flow
    >>> p = trace(lambda x: flow.nn.functional.max_pool2d(x.relu(), 2), flow.ones(1, 1, 4, 4))
    >>> [n.op.name for n in pool_before_relu(p).nodes]
    ['max_pool', 'relu']
    """
    pools = [n for n in program.nodes if n.op is _MAX_POOL]
    if not pools:  # (most programs: one scan, no reader lists)
        return program
    readers, position = {}, {}
    for i, node in enumerate(program.nodes):
        position[id(node)] = i
        for v in node.inputs:
            readers.setdefault(v.id, []).append(node)
    results = _results(program)
    for pool in pools:
        y, (p, idx, *aux) = pool.inputs[0], pool.outputs  # (aux: the rule's indices, if any)
        relu = y.source if y.kind == NODE else None
        if relu is None or relu.op.name != "relu" or len(relu.outputs) != 1 or \
                idx.id in readers or {y.id, idx.id} & results or len(aux) > 1 or \
                not _windows_inside(pool.attrs, y.shape):
            continue
        aux = aux[0] if aux else idx
        pairs = []  # (max_pool_backward, the relu_grad that alone reads its output)
        for pool_grad in readers.get(aux.id, ()):
            after = readers.get(pool_grad.outputs[0].id, ())
            if pool_grad.op.name == "max_pool_backward" and len(after) == 1 and \
                    after[0].op.name == "relu_grad" and \
                    after[0].inputs == [y, pool_grad.outputs[0]] and \
                    pool_grad.inputs[1] is aux and pool_grad.outputs[0].id not in results:
                pairs.append((pool_grad, after[0]))
        if len(pairs) != len(readers.get(aux.id, ())) or \
                len(readers[y.id]) != 1 + len(pairs):
            continue
        pooled = _new_value(program, p, pool)
        pool.inputs, pool.outputs = relu.inputs, [pooled] + pool.outputs[1:]
        relu.inputs, relu.outputs, p.source = [pooled], [p], relu
        _swap(program, position, pool, relu)
        for pool_grad, relu_grad in pairs:
            dx, grad = relu_grad.outputs[0], _new_value(program, p, relu_grad)
            relu_grad.inputs, relu_grad.outputs = [p, pool_grad.inputs[0]], [grad]
            pool_grad.inputs, pool_grad.outputs, dx.source = [grad, aux], [dx], pool_grad
            _swap(program, position, relu_grad, pool_grad)
    return program


def _windows_inside(attrs, shape):
    """Whether every window of a max_pool reads input only: a window over padding alone
    pools -inf, which relu would turn into 0 after pooling."""
    return not any(attrs["padding"]) and all(
        (o - 1) * s + (k - 1) * d + 1 <= n for o, s, k, d, n in zip(
            attrs["out_shape"], attrs["stride"], attrs["ksize"], attrs["dilation"], shape[2:]))


def _new_value(program, like, source):
    value = Value(len(program.values), NODE, like.shape, like.dtype, source)
    program.values.append(value)
    return value


def _swap(program, position, a, b):
    """Exchange two nodes' places in the program (their `position` entries too)."""
    i, j = position[id(a)], position[id(b)]
    program.nodes[i], program.nodes[j] = b, a
    position[id(a)], position[id(b)] = j, i


# ---- dead code and liveness ----------------------------------------------------------------
def eliminate_dead_code(program):
    """Keep only the nodes some result depends on (walking back from the results), and random
    nodes: a draw nobody reads still advances its generator, as it did eagerly, so the numbers
    drawn after it stay the eager ones. Nodes with an effect (optimizer updates) stay too."""
    needed = {v.id for v in program.results()}
    kept = []
    for node in reversed(program.nodes):
        for v in node.outputs:
            if v.id in needed:
                break
        else:
            if not (is_random(node) or getattr(node.op, "effect", False)):
                continue
        kept.append(node)
        for v in node.inputs:  # (a loop: a comprehension is a call per node)
            needed.add(v.id)
    program.nodes = kept[::-1]
    return program


def liveness(program):
    """`{node index: [value ids]}`: the values no later node reads and the plan does not
    return, once node `index` has run (its inputs read for the last time, its outputs nobody
    reads, such as unused aux arrays). Codegen can emit `del v<id>` there: the array is
    freed as soon as nothing else (a view, a constant's tensor) holds it.

    >>> import flowgrad as flow
    >>> p = trace(lambda x: x.exp().tanh().sum(), flow.ones(2))
    >>> liveness(p)  # v1 (exp) dies after tanh, v2 (tanh) after sum; x (v0) is an input
    {1: [1], 2: [2]}
    """
    results = _results(program)
    last = {}
    for i, node in enumerate(program.nodes):
        for v in node.outputs:
            last[v.id] = i
        for v in node.inputs:
            last[v.id] = i
    dead = {}
    values = program.values  # (a Value's id is its position)
    for vid, i in sorted(last.items()):
        if vid not in results and values[vid].kind == NODE:
            ids = dead.get(i)
            if ids is None:  # (not setdefault: a list made per value, mostly thrown away)
                dead[i] = [vid]
            else:
                ids.append(vid)
    return dead


def annotate_liveness(program):
    """Store `liveness(program)` as `program.dead_after` for codegen (changes no node)."""
    program.dead_after = liveness(program)
    return program


PIPELINE = (simplify_algebra, eliminate_common_subexpressions, fold_constants,
            recompute_checkpoints, eliminate_dead_code, pool_before_relu, fuse_elementwise,
            place_updates, fuse_plain_steps, annotate_liveness)


def optimize(program, log=None):
    """Run every pass of the pipeline, in order; `log(message)` hears each one's effect."""
    for run_pass in PIPELINE:
        before, started = len(program.nodes), time.perf_counter()
        program = run_pass(program)
        if log is not None:
            log(f"pass {run_pass.__name__}: {before} -> {len(program.nodes)} nodes in "
                f"{(time.perf_counter() - started) * 1e3:.1f} ms")
    return program
