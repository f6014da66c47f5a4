"""The op registry: one entry per op, its kernel and its gradient rule side by side.

    @op("tanh", save="outputs")
    def tanh(xp, x):                 # kernel: arrays in, arrays out; xp from the device
        return xp.tanh(x)

    @tanh.grad
    def _(ctx, dy):                  # rule: flowgrad tensors in, flowgrad tensors out
        return tanh_grad(ctx.out, dy)

The rule receives the op's recorded node, which is its capture state (`ctx.inputs`,
`ctx.outputs`, `ctx.out`, attributes as `ctx.<name>`, `ctx.needs_input_grad`), and one
gradient per output; it returns one
gradient (or None) per input, of the broadcast shape: the engine un-broadcasts.
Because rules are written with flowgrad ops, their own backward is recorded when
`create_graph=True`, which gives higher derivatives and lets graph mode trace them.
Common rule shapes have declaration helpers in `rules.py`: an elementwise unary op whose
gradient is dy * f'(x) or dy * f'(y) is one `unary(...)` row.
"""
from __future__ import annotations

import itertools
import types

from ..autograd import interpreter as _interpreter
from ..autograd.node import NodeName
from .kernel_wrappers import wrapped
from .layout import column_major, torch_layout

REGISTRY: dict[str, Op] = {}
_SAVE = {None: 0, "inputs": 1, "outputs": 2, "inputs outputs": 3, "all": 3, "attrs": 4}


def _saved_inputs(save, grad_reads=None):
    """`save="inputs[0]"` (or "inputs[0, 2]") saves only those inputs; the others are None
    in `ctx.inputs`, so an in-place write to them does not invalidate the backward.
    `save="inputs for others"` (a product's rule: each input's gradient needs the others)
    saves an input only when some other input needs grad, as torch unpacks only those.
    `grad_reads[i]` names the inputs input i's gradient reads (div's: ((1,), (0, 1))): an
    input is saved only when the gradient of some input that needs one reads it, so an
    in-place write to an input no needed gradient reads is allowed, as in torch."""
    if grad_reads is not None:
        if save is None or not save.startswith("inputs"):
            raise ValueError(f"grad_reads needs save='inputs...', not {save!r}")
        table = {}
        for needs in itertools.product((False, True), repeat=len(grad_reads)):
            table[needs] = tuple(sorted({j for reads, need in zip(grad_reads, needs) if need
                                         for j in reads}))
        return _SAVE[save], table
    if save is not None and save.startswith("inputs[") and save.endswith("] attrs"):
        # those inputs, and the node counts as having saved something even when it keeps
        # none of them (a second backward through it raises, as torch's CopySlices does)
        return 1 | 4, _saved_inputs(save[:-len(" attrs")])[1]
    if save is not None and save.startswith("inputs[") and save.endswith("] outputs"):
        return 1 | 2, _saved_inputs(save[:-len(" outputs")])[1]  # those inputs, and outputs
    if save == "inputs for others":
        return 1, "others"
    if save is None or not save.startswith("inputs["):
        return _SAVE[save], None
    return 1, tuple(int(i) for i in save[len("inputs["):-1].split(","))


@_interpreter.follow_current
class Op:
    """A registered op: name, kernel, gradient rule, and what the rule needs saved."""

    __slots__ = ("name", "kernel", "backward", "save", "saved_inputs", "n_out", "node_name",
                 "differentiable", "is_view", "complex", "jvp", "create_graph_reads")

    def __init__(self, name, kernel, save=None, n_out=1, differentiable=True, is_view=False,
                 complex=False, jvp=None, grad_reads=None, create_graph_reads=(),
                 layout=None):
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is registered twice")
        if layout not in _LAYOUTS:
            raise ValueError(f"op {name!r}: layout must be one of {sorted(map(str, _LAYOUTS))}")
        self.name = name
        self.kernel = _LAYOUTS[layout](kernel)
        self.backward = None
        self.save, self.saved_inputs = _saved_inputs(save, grad_reads)
        self.n_out = n_out
        self.node_name = NodeName(f"{name}_backward")
        self.differentiable = differentiable
        self.is_view = is_view
        self.complex = complex  # audited for complex inputs (its rule conjugates as torch's)
        if jvp not in _JVP_KINDS:
            raise ValueError(f"op {name!r}: jvp must be one of {sorted(map(str, _JVP_KINDS))}")
        self.jvp = jvp  # the shape of its forward-mode rule (ops/jvp_rules.py), if declared
        # saved inputs its rule reads (ctx.saved_input) only under create_graph: backward
        # checks them for in-place writes only then
        self.create_graph_reads = tuple(create_graph_reads)
        REGISTRY[name] = self

    def grad(self, rule):
        """Register `rule(ctx, *output_grads) -> input_grads` as this op's gradient.

        Tracebacks and profiles name the op: a rule not already called `<op>_backward` (a
        body shared by several ops, a lambda) is registered as a copy under that name."""
        name = f"{self.name}_backward"
        if rule.__code__.co_name != name:
            rule = _renamed(rule, name)
        self.backward = rule
        return rule

    def __get__(self, tensor, owner=None):
        """As a Tensor method (`Tensor.m = some_op`), `x.m()` passes x as the input (flowgrad's own
        methods are functions calling their op: see graph/tracer.py's _CALLER_SKIP)."""
        return self if tensor is None else types.MethodType(self, tensor)

    # __call__(*inputs, **attrs) is the current interpreter's entry: set by the
    # interpreter.follow_current decorator above, and again whenever an interpreter is installed

    @property
    def __name__(self):
        return self.name

    def __repr__(self):
        return f"<op {self.name}>"


def _renamed(fn, name):
    """fn under another name: the same code, globals, defaults and closure."""
    code = fn.__code__.replace(co_name=name, co_qualname=name)
    copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__doc__, copy.__kwdefaults__ = fn.__doc__, fn.__kwdefaults__
    return copy


# Forward-mode rules an op gets by declaring its shape (`jvp=`), beside its kernel and rule:
# "linear" (J t is the op on the tangents: shape ops, sums, gathers), "multilinear" (linear
# in each input: mul, matmul, conv), "diagonal" (elementwise: the reverse rule on the tangent).
_JVP_KINDS = (None, "linear", "multilinear", "diagonal")


def op(name, save=None, n_out=1, differentiable=True, is_view=False, complex=False, jvp=None,
       grad_reads=None, create_graph_reads=(), layout=None):
    """Decorator: register a kernel as op `name`. Follow with `@<op>.grad` for its rule,
    or pass differentiable=False for ops with no gradient (comparisons, argmax).

    `n_out` is how many of the kernel's returned arrays are outputs (more are saved for the
    rule as `ctx.aux`); None means all of them, however many (split, unbind). `complex=True`:
    the op accepts complex inputs and its rule gives torch's (conjugate Wirtinger) gradients;
    other ops refuse complex inputs with an error naming the op. `jvp`: the shape of its
    forward-mode rule, "linear", "multilinear" or "diagonal" (see _JVP_KINDS); without it,
    a rule in ops/jvp_rules.py or the one derived from the reverse rule. `grad_reads`: which
    saved inputs each input's gradient reads (see _saved_inputs); `create_graph_reads`: the
    saved inputs the rule reads only under create_graph. `layout`: how the outputs lie in
    memory where NumPy's choice is not torch's (what a later view()/flatten() depends on):
    "contiguous" makes them C-ordered, as torch allocates a reduction's, a scan's or softmax's
    (NumPy keeps a strided input's layout there); "elementwise" (an elementwise op of several
    tensors, or a one-input kernel that is not one NumPy ufunc) lays a result of strided
    inputs out as torch's iterator does (ops/layout.py); "column_major" gives the
    matrices (last two dims; outputs with as many dims as the first input) of a LAPACK-backed
    op's outputs column-major, as torch's."""
    def register(kernel):
        return Op(name, kernel, save, n_out, differentiable, is_view, complex, jvp, grad_reads,
                  create_graph_reads, layout)
    return register


def _c_contiguous_output(kernel):
    """`kernel`, its outputs copied to C order where they are not (only for a strided input);
    with the kernel's own parameters (kernel_wrappers.py)."""
    return wrapped(kernel, "    _out = kernel({call})\n"
                           "    if type(_out) is tuple:\n"
                           "        return tuple(o if o.flags.c_contiguous else "
                           "xp.ascontiguousarray(o) for o in _out)\n"
                           "    return _out if _out.flags.c_contiguous else "
                           "xp.ascontiguousarray(_out)\n")


def _torch_layout_output(kernel):
    """`kernel`, its result laid out as torch's iterator lays out an elementwise result where
    some input is not C-contiguous (ops/layout.py); with the kernel's parameters."""
    return wrapped(kernel, "    _out = kernel({call})\n"
                           "    if {all_c}:\n"
                           "        return _out\n"
                           "    if type(_out) is tuple:\n"
                           "        return tuple(torch_layout(xp, o, {arrays}) for o in _out)\n"
                           "    return torch_layout(xp, _out, {arrays})\n",
                   torch_layout=torch_layout)


def _column_major_output(kernel):
    """`kernel`, each matrix output (2 or more dims, and as many as the first input: not
    svd's singular values, eigenvalues, pivots, tau, info, nor a solve's vectors) with its
    last two dims column-major (batch dims outermost), as torch's LAPACK-backed results;
    with the kernel's parameters."""
    return wrapped(kernel, "    _out = kernel({call})\n"
                           "    _ndim = max(2, {arrays}[0].ndim)\n"
                           "    if type(_out) is tuple:\n"
                           "        return tuple(column_major(xp, o) if o.ndim >= _ndim else o\n"
                           "                     for o in _out)\n"
                           "    return column_major(xp, _out) if _out.ndim >= _ndim else _out\n",
                   column_major=column_major)


_LAYOUTS = {None: lambda kernel: kernel, "contiguous": _c_contiguous_output,
            "elementwise": _torch_layout_output, "column_major": _column_major_output}
