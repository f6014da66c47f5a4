"""Elementwise fusion: a chain of elementwise nodes, each feeding the next, runs as one block
of ufunc calls that codegen writes inline into the plan. The first step allocates a fresh
array; every later step writes into it, the ufunc's output operand (NumPy has no numexpr here),
so the chain costs no Python call per op and one allocation per array it must hand out, with
the same ufunc loops, in the same operand order: bitwise the values the separate kernels give.

A value in the middle of a chain that something else reads (a result, or a backward rule's
saved output) is handed out as it is made: the chain goes on in a fresh array. The fused node
stands where the chain's last node stood, so every such reader must come later.

Constants are 0-d arrays of the chain's dtype: NumPy converts a Python scalar on every call
(about as long as a ufunc on 100 floats) and gives the same bits for the 0-d array.

`relu_grad` multiplies by a float mask (the sign of relu's output), which turns an inf or nan
gradient at y <= 0 into nan where eager gives 0. Every step carries a nan on to the chain's last
array, so one check at the end finds it, and the chain then reruns with the ops' own kernels.
On at most WHERE_SIZE values its kernel is one `where` (+0 where masked), and so is its step.

>>> import numpy as np
>>> import flowgrad as flow
>>> from flowgrad.graph.passes import trace
>>> p = fuse_elementwise(trace(lambda x: (x * 2.0 + 1.0).tanh(), flow.ones(3)))
>>> p.nodes[0].op.name
'fused[scalar_mul+scalar_add+tanh]'
>>> p.nodes[0].op.kernel(np, np.zeros(3, np.float32))
array([0.7615942, 0.7615942, 0.7615942], dtype=float32)
"""
from __future__ import annotations

import itertools
import math
import operator

import numpy as np

from ..ops.rules import _SMALL as WHERE_SIZE
from ..ops.rules import has_nan
from .ir import Node

# op name -> (the input the chain runs through, the step's source, whether it is a masked
# step that needs the nan check). {x} is the chain array, {i0}, {i1} the node's inputs, {c}
# its `value` attribute, {zero} and {one} 0-d constants, {t} and {m} temporaries (TEMPS), {o}
# "" for a step that allocates and ", {b}" for one that writes into the chain's array {b} (the
# ufunc's output operand by position: a keyword costs a tenth of a ufunc call on 100 values;
# {ko} is ", out={b}", for maximum, whose positional output NumPy 2.4 deprecates)
STEPS = {
    "scalar_mul": (0, "{b} = xp.multiply({x}, {c}{o})", False),
    "scale": (0, "{b} = xp.multiply({x}, {c}{o})", False),
    "scalar_add": (0, "{b} = xp.add({x}, {c}{o})", False),
    "scalar_div": (0, "{b} = xp.true_divide({x}, {c}{o})", False),
    "neg": (0, "{b} = xp.negative({x}{o})", False),
    "tanh": (0, "{b} = xp.tanh({x}{o})", False),
    "exp": (0, "{b} = xp.exp({x}{o})", False),
    "sqrt": (0, "{b} = xp.sqrt({x}{o})", False),
    # (maximum's output by keyword: NumPy 2.4 deprecates it by position, and its warning
    # check doubled the call)
    "relu": (0, "{b} = xp.maximum({x}, {zero}{ko})", False),
    "add": (None, "{b} = xp.add({i0}, {i1}{o})", False),
    "sub": (None, "{b} = xp.subtract({i0}, {i1}{o})", False),
    "mul": (None, "{b} = xp.multiply({i0}, {i1}{o})", False),
    "div": (None, "{b} = xp.true_divide({i0}, {i1}{o})", False),
    # dy * (1 - y * y), as _tanh_grad
    "tanh_grad": (1, "{t} = xp.square({i0}{to})\n"
                     "{t} = xp.subtract({one}, {t}, {t})\n"
                     "{b} = xp.multiply({x}, {t}{o})", False),
    # dy where y > 0, else 0, as _relu_grad (nan/inf at y <= 0: the check at the end). y is
    # relu's output (>= +0, or nan), whose sign is heaviside(y, 0): 1, +0 or nan (NumPy's
    # heaviside took 330 us on 64k values, its sign 28)
    "relu_grad": (1, "{t} = xp.sign({i0}{to})\n"
                     "{b} = xp.multiply({x}, {t}{o})", True),
    # the same on at most WHERE_SIZE values, where its kernel (masked_product) takes one
    # `where` (+0 where masked, as torch's; a nan y passes dy): one `where` here too
    "relu_grad_small": (1, "{m} = xp.less_equal({i0}, {zero}{mo})\n"
                           "{b} = xp.where({m}, {zero}, {x})", False),
}
SMALL_STEPS = {"relu_grad": "relu_grad_small"}  # op -> its step on at most WHERE_SIZE values
# a step's source when it writes into the chain's array ({x} is {b}): `copyto` with a mask
# writes only the masked values, in less than half a `where`'s time on 100 values
IN_PLACE = {"relu_grad_small": "{m} = xp.less_equal({i0}, {zero}{mo})\n"
                               "xp.copyto({x}, {zero}, where={m})"}
# the temporaries a step may use: {t} of the chain's dtype, {m} a boolean mask; a chain that
# uses one in two steps or more (a loop's every repeat) makes it once, up front, and each step
# writes into it ({to}, {mo}: ", {t}", ", {m}"; else "" and the step allocates)
TEMPS = {"t": "xp.empty_like({x})", "m": "xp.empty({x}.shape, xp.bool_)"}
_TEMPS_OF = {name: [kind for kind in TEMPS if "{" + kind + "}" in step[1]]
             for name, step in STEPS.items()}


def _step_name(node):
    """The STEPS entry a fusable node runs as."""
    name = node.op.name
    small = SMALL_STEPS.get(name)
    if small is not None and math.prod(node.outputs[0].shape) <= WHERE_SIZE:
        return small
    return name


_OP, _INPUTS, _ATTRS, _NAME = (operator.attrgetter(name)
                               for name in ("op", "inputs", "attrs", "name"))


class FusedOp:
    """The op of a fused node. `inline(args, outs, prefix, ...)` gives its source lines over the
    given variable names and the constants they read; `kernel` is the same code as a
    function, for a plan that calls it and for tests."""

    def __init__(self, chain, exports, into_input=False):
        # per step, in parallel lists (not the traced nodes: a compiled plan keeps its fused
        # ops, and the cycle collector walks whatever they hold): its op, the input the chain
        # runs through, how many inputs it has and its attributes
        nodes, positions = zip(*chain)
        self.ops = list(map(_OP, nodes))
        self.positions = list(positions)
        self.arities = list(map(len, map(_INPUTS, nodes)))
        self.step_attrs = list(map(_ATTRS, nodes))
        self.dtype = np.dtype(chain[-1][0].outputs[0].dtype)
        self.exports = exports    # chain positions whose value is an output, the last included
        self.into_input = into_input  # the first step writes into the chain's input array
        names = list(map(_NAME, self.ops))
        # the STEPS entry of each step (every step has the chain's shape: one size check)
        self.steps = names if math.prod(chain[0][0].outputs[0].shape) > WHERE_SIZE else \
            list(map(SMALL_STEPS.get, names, names))
        self.masked = any(STEPS[name][2] for name in set(self.steps))
        if len(names) > 6:
            names = [f"{len(names)} ops: {names[0]}", names[1], "...", names[-1]]
        self.name = "fused[" + "+".join(names) + "]"
        self.n_out = len(exports)
        self._kernel = None

    @property
    def kernel(self):
        """The chain as a function `kernel(xp, *inputs)` (made on first use: plans inline
        the chain and never call it)."""
        if self._kernel is None:
            lines, scope, _ = self.inline([f"a{i}" for i in range(self.n_in)],
                                       [f"r{k}" for k in range(self.n_out)], "")
            args = ", ".join(f"a{i}" for i in range(self.n_in))
            results = ", ".join(f"r{k}" for k in range(self.n_out))
            self.source = "\n".join([f"def fused(xp, {args}):"]
                                    + ["    " + line for line in lines]
                                    + [f"    return {results}" + ("," if self.n_out == 1 else "")])
            scope["__name__"] = "flowgrad.graph.fusion"  # (flowgrad's warning filter)
            exec(compile(self.source, "<fused kernel>", "exec"), scope)  # our generated code
            function = scope["fused"]
            self._kernel = ((lambda xp, *a: function(xp, *a)[0]) if self.n_out == 1
                            else function)
        return self._kernel

    @property
    def n_in(self):
        return 1 + sum(self.arities) - len(self.arities)

    def __repr__(self):
        return f"<fused op {self.name}>"

    def inline(self, args, outs, prefix, consts=None, share=False):
        """Source lines computing `outs` from `args` (variable names, or `list[i]` items), the
        names they read, and `{out: "list[i]"}` for the outputs left in a loop's list.

        Constants are 0-d arrays named `C<n>`, one per dtype and value in `consts` (a dict the
        plan's chains share). A stretch of steps repeating n times (a layer's ops in a loop
        of layers) is written once, as a loop: a plan compiles per line. The arrays a loop
        hands out are collected in a list; with `share` they stay there (the plan reads
        them as items: no line naming each of them), else they are unpacked into `outs`."""
        consts = {} if consts is None else consts
        dtype = self.dtype
        # memo: (type, repr) of a Python number -> its constant's name; seen: id of a number
        # object -> (it, its name), the same float object of a loop's every step looked up
        # without a repr
        scope, memo, seen = {}, {}, {}

        def const(value):
            hit = seen.get(id(value))
            if hit is not None and hit[0] is value:
                return hit[1]
            name = memo.get((type(value), repr(value)))
            if name is None:
                name = _new_const(value)
            seen[id(value)] = value, name
            return name

        def _new_const(value):
            array = np.asarray(value, dtype)
            key = (array.dtype.str, array.tobytes())
            name = consts.get(key)
            if name is None:
                name = consts[key] = f"C{len(consts)}"
                scope[name] = array
            memo[type(value), repr(value)] = name
            return name

        steps, fresh, arg, exports = [], not self.into_input, 1, set(self.exports)
        sigs, kinds = [], {}  # each step's shape (see _repeats), numbered
        for name, pos, arity, attrs in zip(self.steps, self.positions, self.arities,
                                           self.step_attrs):
            n_other = arity - 1
            c = attrs.get("value")
            if c is not None:  # (const(), inline: once per step)
                hit = seen.get(id(c))
                c = hit[1] if hit is not None and hit[0] is c else const(c)
            export = len(steps) in exports
            steps.append((name, pos, args[arg:arg + n_other] if n_other else (), c, fresh,
                          export))
            key = (name, pos, n_other, c is None, fresh, export)
            sig = kinds.get(key)
            if sig is None:
                sig = kinds[key] = len(kinds)
            sigs.append(sig)
            arg += n_other
            fresh = export
        # temporary -> how many steps use it: made up front when two or more do
        uses = dict.fromkeys(TEMPS, 0)
        for name in set(self.steps):
            for kind in _TEMPS_OF[name]:
                uses[kind] += self.steps.count(name)
        temps = {kind: f"{prefix}{kind}" for kind, n in uses.items() if n}
        into = {kind + "o": f", {temps[kind]}" if uses[kind] > 1 else "" for kind in TEMPS
                if kind in temps}

        def emit(step, x, b, others, c):
            name, pos, _, _, fresh, _ = step
            template = STEPS[name][1] if fresh or x != b else IN_PLACE.get(name, STEPS[name][1])
            inputs, rest = {}, iter(others)
            for i in range(len(others) + 1):
                inputs[f"i{i}"] = x if i == pos else next(rest)
            return template.format(
                x=x, b=b, c=c, o="" if fresh else f", {b}", ko="" if fresh else f", out={b}",
                **temps, **into,
                zero=const(0) if "{zero}" in template else "",
                one=const(1) if "{one}" in template else "", **inputs).split("\n")

        lines, x, out, loop_names, aliases = [], args[0], 0, [], {}
        share = share and not self.masked  # (the rerun below assigns every output by name)
        if self.into_input:
            lines.append(f"{outs[0]} = {args[0]}")
        for kind, name in temps.items():
            if into[kind + "o"]:
                lines.append(f"{name} = " + TEMPS[kind].format(x=args[0]))
        k = n_loops = 0
        for start, period, reps in _repeats(sigs) + [(len(steps), 0, 0)]:
            for step in steps[k:start]:  # written out, one step after another
                lines += emit(step, x, outs[out], step[2], step[3])
                x, out = outs[out], out + 1 if step[5] else out
            if not reps:
                break
            loop = _Loop(steps[start:start + period * reps], period, prefix, n_loops)
            n_loops += 1
            x, out = loop.write(lines, x, outs, out, emit, loop_names, aliases if share else None)
            k = start + period * reps
        loop_names += temps.values()  # a temporary must not outlive the chain
        if loop_names:
            lines.append(f"del {', '.join(loop_names)}")
        if self.masked:  # a nan reached the end: redo the chain with the ops' own kernels
            # (its inputs looked up in the plan's locals on that rare path: a call naming
            # each of a long chain's inputs costs compile time on every first call)
            names = tuple(args)
            scope[f"{prefix}exact"] = lambda xp, scope: self.exact(xp, *[
                scope[n] if i is None else scope[n][i] for n, i in map(_local_ref, names)])
            scope["has_nan"] = has_nan
            lines.append(f"if has_nan(xp, {outs[-1]}):")
            lines.append(f"    {', '.join(outs)}{',' if len(outs) == 1 else ''} = "
                         f"{prefix}exact(xp, locals())")
        return lines, scope, aliases

    def exact(self, xp, *args):
        """The chain with each node's own kernel (the path eager takes)."""
        x, arg, outs = args[0], 1, []
        for k, (op, pos, arity, attrs) in enumerate(zip(self.ops, self.positions, self.arities,
                                                        self.step_attrs)):
            inputs = []
            for i in range(arity):
                if i == pos:
                    inputs.append(x)
                else:
                    inputs.append(args[arg])
                    arg += 1
            x = op.kernel(xp, *inputs, **attrs)
            if k in self.exports:
                outs.append(x)
        return tuple(outs)


class _Loop:
    """`steps` (`len(steps) // period` repeats of one pattern) written as a `for` loop: what
    differs between repeats (other inputs, constants) comes from the loop's columns; the
    handed-out arrays are collected in a list."""

    def __init__(self, steps, period, prefix, n):
        self.steps, self.period, self.prefix = steps, period, prefix
        self.chain, self.hand_out = f"{prefix}b", f"{prefix}E{n}"

    def write(self, lines, x, outs, out, emit, loop_names, aliases):
        """Append the loop's lines; return the chain's array and the next output's index.
        With `aliases` (a dict) the handed-out arrays stay in the list (out -> `list[i]`)."""
        steps, period, prefix, chain = self.steps, self.period, self.prefix, self.chain
        varying, body_args = [], []  # per repeat: the names that differ; per step: its names
        for j in range(period):
            at = steps[j::period]
            names = []
            n_other = len(at[0][2])  # (every repeat's step has the same: its shape does)
            for slot in range(n_other + 1):  # the other inputs, then the constant
                column = list(map(operator.itemgetter(slot), map(_OTHER_INPUTS, at))) \
                    if slot < n_other else list(map(_CONSTANT, at))
                if len(set(column)) == 1:
                    names.append(column[0])
                else:
                    names.append(f"{prefix}l{len(varying)}")
                    varying.append(column)
            body_args.append(names)
        n_out = list(map(_HANDED_OUT, steps)).count(True)
        lines.append(f"{chain} = {x}")
        if n_out:
            lines.append(f"{self.hand_out} = []")
        if varying:
            loop_vars = [f"{prefix}l{i}" for i in range(len(varying))]
            columns = [_column(c) for c in varying]
            source = columns[0] if len(columns) == 1 else f"zip({', '.join(columns)})"
            lines.append(f"for {', '.join(loop_vars)} in {source}:")
            loop_names += loop_vars
        else:
            lines.append(f"for {prefix}n in range({len(steps) // period}):")
            loop_names.append(f"{prefix}n")
        for j, step in enumerate(steps[:period]):
            names = body_args[j]
            lines += ["    " + line for line in emit(step, chain, chain, names[:-1], names[-1])]
            if step[5]:
                lines.append(f"    {self.hand_out}.append({chain})")
        if n_out:
            got = outs[out:out + n_out]
            if aliases is None:
                lines.append(f"{', '.join(got)}, = {self.hand_out}")
                loop_names.append(self.hand_out)
            else:
                aliases.update((o, f"{self.hand_out}[{i}]") for i, o in enumerate(got))
            out += n_out
        loop_names.append(chain)
        if not steps[-1][5]:  # the stretch goes on in the loop's array: under its own name
            lines.append(f"{outs[out]} = {chain}")
            return outs[out], out
        return chain, out


# a step's (see FusedOp.inline) other inputs, constant, and whether it hands its array out
_OTHER_INPUTS, _CONSTANT, _HANDED_OUT = map(operator.itemgetter, (2, 3, 5))


def _local_ref(expression):
    """(name, index) of a `name[index]` item, (name, None) of a plain name."""
    if expression.endswith("]"):
        name, index = expression[:-1].split("[")
        return name, int(index)
    return expression, None


def _column(items):
    """Source of a loop column: a slice of one list when the items are `list[i]` with i in
    steps of the same size (no name per item to compile), else a tuple of the names."""
    if len(items) > 1 and items[0].endswith("]") and items[1].endswith("]"):
        (name, first), (second_name, second) = _local_ref(items[0]), _local_ref(items[1])
        step = second - first
        if step and second_name == name and all(  # (each item as that slice would name it)
                item == f"{name}[{first + k * step}]" for k, item in enumerate(items)):
            stop = first + len(items) * step
            return f"{name}[{first}:{'' if stop < 0 else stop}:{step}]"
    return f"({', '.join(items)},)"


def _repeats(sigs, shortest=8, longest_period=16):
    """Non-overlapping stretches `(start, period, repeats)`, in order, where the steps'
    shapes `sigs` (a number per distinct op, chain position, count of other inputs, constant
    or not, fresh array, handed out) repeat with `period`, covering at least `shortest`
    steps: the longest first, then the same search left and right of it."""
    found = []
    todo = [(0, len(sigs))]
    while todo:
        lo, hi = todo.pop()
        best = None  # (steps covered, start, period, repeats)
        for period in range(1, min(longest_period, (hi - lo) // 2) + 1):
            # same[k] == 1 where step lo + k has the shape of the step `period` later: a run
            # of r ones is a stretch of r + period steps repeating with that period
            same = bytes(map(operator.eq, sigs[lo:hi - period], sigs[lo + period:hi]))
            run = len(max(same.split(b"\0")))  # (all-ones strings: the longest is max)
            reps = (run + period) // period
            if run >= period and (best is None or reps * period > best[0]):
                best = (reps * period, lo + same.find(b"\1" * run), period, reps)
                if best[0] * 10 >= (hi - lo) * 9:
                    break  # most of the stretch: a longer period would gain little
        if best is None or best[0] < shortest:
            continue
        _, start, period, reps = best
        found.append((start, period, reps))
        todo += [(lo, start), (start + period * reps, hi)]
    return sorted(found)


_FLOATING = {}  # a Value's dtype -> whether it is float32/64 (np.dtype() per node adds up)


def _step_positions(nodes):
    """By node: the index of the input a chain runs through it, True for a binary step (either
    input), False if the node cannot be a step (one loop: a call per node adds up)."""
    positions = []
    for node in nodes:
        pos = _STEP_AT.get(node.op.name, False)
        if pos is not False:
            outputs = node.outputs
            out = outputs[0] if len(outputs) == 1 and node.n_results == 1 else None
            if out is None or not out.shape:
                pos = False
            else:
                shape, dtype = out.shape, out.dtype
                floating = _FLOATING.get(dtype)
                if floating is None:  # (not float16: its kernels compute a scalar step in
                    #                     float32)
                    kind = np.dtype(dtype)
                    floating = _FLOATING[dtype] = kind.kind == "f" and kind.itemsize > 2
                if not floating:
                    pos = False
                for v in node.inputs:
                    if v.shape != shape or v.dtype is not dtype and v.dtype != dtype:
                        pos = False
                        break
                if pos is not False and node.op.name in _SCALAR_STEPS and \
                        type(node.attrs.get("value")) not in (int, float):
                    pos = False
        positions.append(pos)
    return positions


# op name -> the input a chain runs through it, True for either (a binary op)
_STEP_AT = {name: True if step[0] is None else step[0] for name, step in STEPS.items()}
_SCALAR_STEPS = frozenset(name for name in STEPS if name.startswith("scalar_"))


def _readers(program):
    """Value id -> indices of the nodes reading it (results: read after every node)."""
    readers = {}
    for i, node in enumerate(program.nodes):
        for v in node.inputs:
            reads = readers.get(v.id)
            if reads is None:  # (not setdefault: a list made per read, mostly thrown away)
                readers[v.id] = [i]
            else:
                reads.append(i)
    end = len(program.nodes)
    for v in program.results():
        readers.setdefault(v.id, []).append(end)
    return readers


# ops whose kernel returns an array of its own (a GEMM's or a convolution's result): a chain
# that alone reads it may write into it (OneFlow's "add to output")
FRESH_OUTPUT = frozenset({"linear", "matmul", "conv", "conv_transpose"})


def _writable_input(node, pos, readers, program):
    value = node.inputs[pos]
    producer = value.source if value.kind == "node" else None
    switches = getattr(program, "switches", {})
    return (producer is not None and getattr(producer.op, "name", None) in FRESH_OUTPUT
            and producer.n_results == 1 and len(producer.outputs) == 1
            and len(readers.get(value.id, ())) == 1
            and switches.get("allow_fuse_add_to_output", True))


def fuse_elementwise(program):
    """Replace each chain of two or more fusable elementwise nodes by one fused node (at the
    place of the chain's last node, where every input is ready). A chain that starts from a
    GEMM's or convolution's result nothing else reads computes in that array (one node is
    enough then), unless `config.allow_fuse_add_to_output(False)`."""
    nodes = program.nodes
    n_nodes = len(nodes)
    readers = _readers(program)
    kinds = _step_positions(nodes)  # by node index, as `taken`
    taken, new_at = bytearray(n_nodes), {}
    # free[i]: node i can still be a step (fusable, in no chain yet); one more 0 at the end
    # (the index of the results' reads): the next chain's start is a C-level search
    free = bytearray(map(operator.is_not, kinds, itertools.repeat(False)))
    free.append(0)
    start = -1
    while True:
        start = free.find(1, start + 1)
        if start < 0:
            break
        node, pos = nodes[start], kinds[start]
        if pos is True:  # a binary first step runs through the operand it may write into
            pos = 1 if (not _writable_input(node, 0, readers, program)
                        and _writable_input(node, 1, readers, program)) else 0
        chain, exports, at = [(node, pos)], [], [start]
        first_outside = n_nodes + 1  # the earliest reader outside the chain so far
        out = node.outputs[0]
        while True:
            reads = readers.get(out.id, ())
            if len(reads) == 1:  # (most steps: the one reader, as _next_step, inline)
                j = reads[0]
                at_j = kinds[j] if free[j] else False
                if at_j is not False:
                    step = nodes[j]
                    if at_j is True:  # (read once: exactly one input is `out`)
                        at_j = 0 if step.inputs[0].id == out.id else 1
                    elif step.inputs[at_j].id != out.id:
                        at_j = False
                if at_j is False or first_outside <= j:
                    exports.append(len(chain) - 1)
                    break
                chain.append((step, at_j))
                at.append(j)
                out = step.outputs[0]
                continue
            nxt = _next_step(nodes, reads, out, free, kinds)
            if nxt is not None:
                j = nxt[0]
                first = first_outside
                for i in reads:  # the earliest reader other than the next step
                    if i != j and i < first:
                        first = i
                if first <= j:  # a reader of a handed-out value would run before the chain
                    nxt = None
            if nxt is None:
                exports.append(len(chain) - 1)
                break
            if len(reads) > 1:  # read outside the chain too: handed out
                exports.append(len(chain) - 1)
                first_outside = first
            chain.append(nxt[1:])
            at.append(j)
            out = nxt[1].outputs[0]
        into_input = _writable_input(node, pos, readers, program) and not any(
            STEPS[_step_name(n)][2] for n, _ in chain)  # a masked chain's rerun needs its input
        if len(chain) < 2 and not into_input:
            continue
        outputs = [chain[k][0].outputs[0] for k in exports]
        inputs = [node.inputs[pos]]
        for n, p in chain:
            if len(n.inputs) > 1:  # (a unary step reads the chain only)
                inputs += n.inputs[:p] + n.inputs[p + 1:]
        last = chain[-1][0]
        fused = Node(FusedOp(chain, exports, into_input), inputs, {}, outputs, last.phase)
        fused.where = getattr(last, "where", None)  # a failing plan names the user's line
        for v in outputs:
            v.source = fused
        for i in at:
            taken[i], free[i] = 1, 0
        new_at[at[-1]] = fused
    if new_at:
        nodes = list(nodes)
        for i, fused in new_at.items():  # (in the place of its chain's last node)
            nodes[i], taken[i] = fused, 0
        program.nodes = list(itertools.compress(nodes, map(operator.not_, taken)))
    return program


def _next_step(nodes, reader_indices, out, free, kinds):
    """(index, node, chain input) of the one node that can continue the chain through `out`:
    a fusable reader that reads it once (and so has its dtype), not already in a chain (a
    binary op joins one chain only: the chain of its other operand may have it). `free[i]`:
    whether node i is fusable and in no chain (0 at the results' index, after the nodes)."""
    found = None
    if len(reader_indices) != 1 and len(set(reader_indices)) != len(reader_indices):
        reader_indices = [i for i in set(reader_indices) if reader_indices.count(i) == 1]
    for i in reader_indices:
        if not free[i]:
            continue
        pos = kinds[i]
        node = nodes[i]
        if pos is True:  # either input: the one `out` is (read once, so one)
            pos = next(k for k, v in enumerate(node.inputs) if v.id == out.id)
        elif node.inputs[pos].id != out.id:
            continue
        if found is not None:
            return None
        found = (i, node, pos)
    return found


__all__ = ["fuse_elementwise", "FusedOp", "STEPS"]
