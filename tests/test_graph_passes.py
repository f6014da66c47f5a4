"""The nn.Graph compiler's passes (flowgrad/graph/passes.py, fusion.py): each rewrites what it
should, leaves what it must not, and changes no bit of any result; a training step compiled
with the whole pipeline gives eager's losses."""
import gc
import types

import graph_helpers
import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad.graph import codegen, fusion, passes
from flowgrad.graph.fusion import STEPS, _repeats, fuse_elementwise
from flowgrad.graph.ir import CONST, NODE, Node, Program
from flowgrad.graph.optimizer_pass import fuse_plain_steps, place_updates
from flowgrad.graph.passes import trace
from flowgrad.ops.elementwise import scale
from flowgrad.ops.registry import REGISTRY


def _names(program):
    return [n.op.name for n in program.nodes]


def _run(program, *arrays):
    return codegen.generate(program).run(np, list(arrays))


def _same_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()


def _check_pass(fn, tensors, run_pass, names):
    """`run_pass` on the trace of fn leaves ops `names`, and the plan's bits don't change."""
    arrays = [t.numpy() for t in tensors]
    want = _run(trace(fn, *tensors), *arrays)
    program = passes.eliminate_dead_code(run_pass(trace(fn, *tensors)))
    assert _names(program) == names, program
    _same_bits(_run(program, *arrays), want)
    return program


# ---- common-subexpression elimination ------------------------------------------------------
def test_cse_merges_equal_nodes_and_rewrites_results():
    x = flow.tensor([0.5, -1.0, 2.0])
    cse = passes.eliminate_common_subexpressions
    _check_pass(lambda x: (x.exp() + x.exp()).sum(), [x], cse, ["exp", "add", "sum"])
    # a duplicate that is a result points at the first node (not a result itself)
    p = _check_pass(lambda x: (x.exp().sum(), x.exp()), [x], cse, ["exp", "sum"])
    assert p.outputs[1] is p.nodes[0].outputs[0]
    # equal tuple attributes merge; different ones do not
    _check_pass(lambda x: x.sum(0) + x.sum(0) + x.sum(0, keepdim=True), [flow.ones(2, 3)], cse,
                ["sum", "add", "sum", "add"])
    # each tanh is the only reader of its exp; once the exps merge, the tanhs match too
    _check_pass(lambda x: (x.exp().tanh() * x.exp().tanh()).sum(), [x], cse,
                ["exp", "tanh", "mul", "sum"])


def test_cse_keeps_random_nodes_aux_nodes_distinct_attrs_and_two_results():
    x = flow.ones(64)
    cse = passes.eliminate_common_subexpressions
    p = cse(trace(lambda x: F.dropout(x, 0.5, training=True) + F.dropout(x, 0.5,
                                                                         training=True), x))
    assert _names(p).count("dropout") == 2
    img, w = flow.ones(1, 1, 4, 4), flow.ones(1, 1, 3, 3, requires_grad=True)
    p = cse(trace(lambda a, b: F.conv2d(a, b) + F.conv2d(a, b), img, w))
    assert _names(p).count("conv") == 2  # conv keeps aux columns for its backward
    # 1, 1.0 and True promote differently: an integer tensor keeps all three products
    i = flow.tensor([1, 2, 3])
    _check_pass(lambda i: i * 1 + i * 1 + i * True, [i], cse,
                ["scalar_mul", "add", "scalar_mul", "add"])
    # two results never share storage
    p = cse(trace(lambda x: (x.exp(), x.exp()), x))
    assert p.outputs[0] is not p.outputs[1]


def test_attribute_keys():
    key = passes._key
    assert key(0.0) != key(-0.0) and key(1) != key(1.0) and key(1) != key(True)
    assert key(float("nan")) == key(float("nan"))
    assert key((1, slice(0, 3, None))) == key((1, slice(0, 3, None)))
    assert key(slice(0, 3)) != key(slice(0, 4))
    assert key(np.dtype("float32")) == key(np.dtype(np.float32)) != key(np.dtype("float64"))
    gen = flow.Generator()
    assert key(gen) == key(gen) != key(flow.Generator())


def test_cse_rewrites_gradient_and_write_back_values():
    program = Program()
    x = program.new_value("input", np.ones(2))
    program.inputs.append(x)
    op = types.SimpleNamespace(name="neg", kernel=lambda xp, a: -a, n_out=1)
    nodes = [Node(op, [x], {}, [], "forward") for _ in range(2)]
    for node in nodes:
        node.outputs.append(program.new_value(NODE, np.ones(2), node))
        node.n_results = 1
    program.nodes = nodes
    program.grads = {"p": nodes[1].outputs[0]}
    program.writebacks = {"buffer": nodes[1].outputs[0]}
    passes.eliminate_common_subexpressions(program)
    assert program.nodes == [nodes[0]] and program.grads["p"] is nodes[0].outputs[0]
    assert program.writebacks["buffer"] is nodes[0].outputs[0]


# ---- constant folding --------------------------------------------------------------------
def _const_program():
    c = flow.tensor([1.0, 2.0])
    program = trace(lambda x: x + (c * 2.0).exp(), flow.ones(2))
    return program, c, program.state_values(CONST)[0]


def test_constants_captured_by_reference_are_not_folded():
    program, c, _ = _const_program()
    passes.fold_constants(program)
    assert _names(program) == ["scalar_mul", "exp", "add"]
    plan = codegen.generate(program)
    with flow.no_grad():
        c.fill_(0.0)  # the user changes the captured tensor between calls: the plan sees it
    assert plan.run(np, [np.zeros(2, np.float32)])[0].tolist() == [1.0, 1.0]


def test_frozen_constants_fold_in_chains_to_read_only_arrays():
    program, c, value = _const_program()
    want = _run(program, np.ones(2, np.float32))
    program.frozen = {value.id}
    passes.fold_constants(program)
    assert _names(program) == ["add"]
    folded = program.nodes[0].inputs[1]
    assert folded.kind == CONST and not folded.source._data.flags.writeable
    _same_bits(_run(program, np.ones(2, np.float32)), want)


def test_folding_zero_input_nodes_but_never_random_ones_or_results():
    program = Program()
    op = types.SimpleNamespace(name="arange3", kernel=lambda xp: xp.arange(3.0), n_out=1)
    make = Node(op, [], {}, [], "forward")
    make.outputs.append(program.new_value(NODE, np.zeros(3), make))
    neg = Node(REGISTRY["neg"], make.outputs, {}, [], "forward")
    neg.outputs.append(program.new_value(NODE, np.zeros(3), neg))
    program.nodes, program.outputs = [make, neg], list(neg.outputs)
    passes.fold_constants(program)
    assert program.nodes == [neg]  # folded; neg's output is a result: it still runs
    assert _run(program)[0].tolist() == [0.0, -1.0, -2.0]
    random = passes.fold_constants(trace(lambda x: x + flow.rand(2), flow.ones(2)))
    assert _names(random) == ["rand", "add"]


# ---- algebraic simplification --------------------------------------------------------------
def test_simplify_permutes_and_reshapes():
    x = flow.tensor(np.arange(24.0, dtype=np.float32).reshape(2, 3, 4))
    simp = passes.simplify_algebra
    _check_pass(lambda x: x.permute(2, 0, 1).permute(1, 2, 0).sum(), [x], simp, ["sum"])
    p = _check_pass(lambda x: x.permute(2, 0, 1).permute(0, 2, 1).sum(0), [x], simp,
                    ["permute", "sum"])
    assert p.nodes[0].attrs["dims"] == (2, 1, 0)
    _check_pass(lambda x: x.reshape(6, 4).reshape(4, 6).reshape(24).sum(), [x], simp,
                ["reshape", "sum"])
    _check_pass(lambda x: x.reshape(6, 4).reshape(2, 3, 4).exp(), [x], simp, ["exp"])
    # a result is never replaced by its input: the user's tensor would share x's storage
    _check_pass(lambda x: x.permute(1, 0, 2).permute(1, 0, 2), [x], simp,
                ["permute"])


def test_simplify_identity_scalars_only_where_bitwise_identical():
    f = flow.tensor([-0.0, 1.5, float("nan"), float("inf"), 1e-40])
    i = flow.tensor([2 ** 60 + 1, -3])
    simp = passes.simplify_algebra
    _check_pass(lambda f: (f * 1.0).exp() + (f * 1).exp() + (f / 1.0).exp(), [f], simp,
                ["exp", "exp", "add", "exp", "add"])
    _check_pass(lambda f: (f + -0.0).exp(), [f], simp, ["exp"])
    _check_pass(lambda f: (f + 0.0).exp(), [f], simp, ["scalar_add", "exp"])  # -0 + 0 is +0
    program = Program()  # (flowgrad's i * 1.0 casts first; a scalar_mul would go via float64)
    v = program.new_value("input", i.numpy())
    node = Node(REGISTRY["scalar_mul"], [v], {"value": 1.0}, [], "forward")
    assert not passes._is_identity_scalar(node, v)
    assert passes._is_identity_scalar(Node(REGISTRY["scalar_mul"], [v], {"value": 1}, [], ""), v)
    _check_pass(lambda i: (i * 1 + 0).neg(), [i], simp, ["neg"])
    _check_pass(lambda f: f * 1.0, [f], simp, ["scalar_mul"])  # a result: fresh array


# ---- max pooling before relu ---------------------------------------------------------------
def _pool_relu_data(shape, seed=0):
    """Windows all negative, with ties, zeros of both signs, a nan and infinities."""
    data = np.random.default_rng(seed).choice(
        np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 1.0, 3.0], np.float32), shape)
    data.flat[[0, 1, 4, 5]] = -1.5  # (one all-negative 2x2 window, tied)
    data.flat[9], data.flat[-1], data.flat[-6] = np.nan, np.inf, -np.inf
    return data


def test_pool_before_relu_in_forward_only_where_no_other_reader_or_padding():
    x = flow.tensor(_pool_relu_data((2, 3, 6, 6)))
    swap, pool = passes.pool_before_relu, F.max_pool2d
    _check_pass(lambda x: pool(x.relu(), 2).exp(), [x], swap, ["max_pool", "relu", "exp"])
    _check_pass(lambda x: pool(x.relu(), 3, 1, dilation=2).exp(), [x], swap,  # overlapping
                ["max_pool", "relu", "exp"])
    keep = ["relu", "max_pool", "exp"]
    _check_pass(lambda x: pool(x.relu(), 2, padding=1).exp(), [x], swap, keep)
    _check_pass(lambda x: pool(x.relu(), 4, ceil_mode=True).exp(), [x], swap, keep)
    _check_pass(lambda x: pool(x.relu(), 2, return_indices=True)[1] + 1, [x], swap,
                ["relu", "max_pool", "scalar_add"])  # the indices differ (all-negative windows)
    _check_pass(lambda x: (lambda r: pool(r, 2).exp().sum() + r.sum())(x.relu()), [x], swap,
                keep + ["sum", "sum", "add"])
    _check_pass(lambda x: (lambda r: (pool(r, 2).exp(), r))(x.relu()), [x], swap, keep)


@pytest.mark.parametrize("pool", [dict(kernel_size=2), dict(kernel_size=3, stride=2),
                                  dict(kernel_size=2, stride=1, dilation=2),
                                  dict(kernel_size=3, padding=1), dict(kernel_size=3,
                                                                       ceil_mode=True)])
def test_pool_before_relu_training_matches_eager_bitwise(pool):
    def model(seed):
        flow.manual_seed(seed)
        features = flow.nn.Sequential(flow.nn.Conv2d(2, 3, 3), flow.nn.ReLU(),
                                      flow.nn.MaxPool2d(**pool), flow.nn.Flatten())
        return flow.nn.Sequential(features, flow.nn.Linear(
            features(flow.zeros(1, 2, 10, 10)).shape[1], 4))

    rng = np.random.default_rng(2)
    batches = [(flow.tensor(_pool_relu_data((5, 2, 10, 10), seed)).nan_to_num(0.0),
                flow.tensor(rng.integers(0, 4, 5))) for seed in range(4)]
    program = _train_both(model(0), model(0), lambda m, x, y: F.cross_entropy(m(x), y),
                          batches)
    names = _names(program)
    swapped = names.index("max_pool") < names.index("relu")
    assert swapped == (not pool.get("padding") and not pool.get("ceil_mode")), names
    assert swapped == (names.index("relu_grad") < names.index("max_pool_backward")), names


# ---- elementwise fusion -------------------------------------------------------------------
_DATA = np.array([-0.0, 0.0, 1.5, -2.25, np.nan, np.inf, -np.inf, 1e-40, 3.0, 0.5] * 7,
                 np.float32)


@pytest.mark.parametrize("name", sorted(STEPS))
def test_each_fused_step_is_bitwise_its_kernel(name):
    """Every STEPS entry, first in a chain and inside one, against the op's own kernel (an
    op with a SMALL_STEPS entry: its STEPS one on more than WHERE_SIZE values)."""
    rng = np.random.default_rng(0)
    small = {step: op for op, step in fusion.SMALL_STEPS.items()}
    data = _DATA if name in small else np.tile(_DATA, fusion.WHERE_SIZE // _DATA.size + 1) \
        if name in fusion.SMALL_STEPS else _DATA
    name = small.get(name, name)
    x = flow.tensor(data)
    other = flow.tensor(rng.standard_normal(data.shape).astype(np.float32))
    calls = {"scalar_mul": lambda a: a * 1.5, "scale": lambda a: scale(a, value=1.5),
             "scalar_add": lambda a: a + 0.25,
             "scalar_div": lambda a: a / 3.0, "neg": flow.neg, "tanh": flow.tanh,
             "exp": flow.exp, "sqrt": flow.sqrt, "relu": flow.relu,
             "add": lambda a: a + other, "sub": lambda a: other - a,
             "mul": lambda a: a * other, "div": lambda a: other / a}
    if name in calls:
        step = calls[name]
    else:  # the gradient ops: dy through the chain, y the other input
        step = lambda a: REGISTRY[name](other, a)  # noqa: E731
    for fn in (lambda x: step(x).tanh(), lambda x: step(x.tanh() * 2.0) * 0.5):
        program = trace(fn, x)
        want = _run(program, data)
        fuse_elementwise(program)
        assert len(program.nodes) == 1 and program.nodes[0].op.name.startswith("fused[")
        with np.errstate(all="ignore"):
            _same_bits(_run(program, data), want)


def test_fusion_leaves_shared_values_integers_broadcasts_and_0d():
    x = flow.tensor(_DATA[:4])
    p = fuse_elementwise(trace(lambda x: (x * 2.0).tanh().exp(), x))
    assert _names(p) == ["fused[scalar_mul+tanh+exp]"]
    fn = lambda x: (lambda t: (t, t.exp()))((x * 2.0).tanh())  # noqa: E731
    p = trace(fn, x)
    want = _run(p, _DATA[:4])
    fuse_elementwise(p)  # t is a result: handed out, and the chain goes on in a fresh array
    assert _names(p) == ["fused[scalar_mul+tanh+exp]"]
    assert p.outputs == p.nodes[0].outputs
    got = _run(p, _DATA[:4])
    _same_bits(got, want)
    assert not np.shares_memory(got[0], got[1])
    # t is also read by a node that runs before the chain's next step: the chain stops at t
    p = fuse_elementwise(trace(lambda x: (lambda t: t.sum() * t.exp())((x * 2.0).tanh()), x))
    assert _names(p)[0] == "fused[scalar_mul+tanh]" and "exp" in _names(p)
    y = x * 2.0  # a value read by two nodes stays between them
    p = fuse_elementwise(trace(lambda x: (lambda y: y.exp() + y.tanh())(x * 2.0), x))
    assert "scalar_mul" in _names(p) and y is not None
    p = fuse_elementwise(trace(lambda i: (i * 2).neg(), flow.tensor([1, 2])))
    assert _names(p) == ["scalar_mul", "neg"]
    p = fuse_elementwise(trace(lambda x, b: (x * 2.0) + b, flow.ones(2, 3), flow.ones(3)))
    assert _names(p) == ["scalar_mul", "add"]
    p = fuse_elementwise(trace(lambda x: (x * 2.0).exp(), flow.tensor(1.0)))
    assert _names(p) == ["scalar_mul", "exp"]


def test_repeat_search_finds_the_longest_repeating_stretches():
    def shapes(names):
        return [(n, 0, (), None, False, False) for n in names]

    assert _repeats(shapes("abcd" * 50)) == [(0, 4, 50)]
    assert _repeats(shapes("x" + "abc" * 49 + "yz")) == [(1, 3, 49)]
    assert _repeats(shapes("ab" * 10 + "c" + "def" * 5)) == [(0, 2, 10), (21, 3, 5)]
    assert _repeats(shapes("abcdefg")) == [] and _repeats(shapes("ab" * 3)) == []
    # a step handing out its array differs from one that does not
    steps = shapes("ab" * 10)
    steps[7] = steps[7][:5] + (True,)
    assert _repeats(steps) == [(8, 2, 6)]


def _loop_chain(x, *others):
    """12 layers: a constant and an operand that change per layer, every third layer's value
    handed out (a result), then a tail after the repeats."""
    saved = []
    for k in range(12):
        x = (x * (1.0 + k / 8) + others[k]).tanh()
        if k % 3 == 2:
            saved.append(x)
    return (x.exp() * 0.5, *saved)


def test_repeated_chain_stretches_run_as_a_loop_bitwise():
    rng = np.random.default_rng(0)
    tensors = [flow.tensor(_DATA[:10])] + [
        flow.tensor(rng.standard_normal(10).astype(np.float32)) for _ in range(12)]
    arrays = [t.numpy() for t in tensors]
    want = _run(trace(_loop_chain, *tensors), *arrays)
    program = fuse_elementwise(trace(_loop_chain, *tensors))
    assert len(program.nodes) == 1
    plan = codegen.generate(program)
    assert plan.source.count("for ") == 1 and len(plan.source.splitlines()) < 40, plan.source
    # one constant per distinct value: the 12 scales, and 0.5
    assert plan.source.split("\n")[1].split("=")[0].count(",") == 13, plan.source
    with np.errstate(all="ignore"):
        got = plan.run(np, arrays)
    _same_bits(got, want)
    assert len({id(a) for a in got}) == len(got)  # handed-out arrays are distinct


def test_a_loops_handed_out_values_stay_in_its_list_and_are_freed_one_by_one():
    """A plan reads the arrays a loop handed out as items of its list (no line naming each),
    a later loop takes them as slices, and each item is dropped after its last reader."""
    def fn(x):
        saved = []
        for _ in range(10):
            x = (x * 1.5).tanh()
            saved.append(x)
        total = saved[0].sum()
        for s in saved[1:]:
            total = total + s.sum()
        return total

    x = flow.tensor(_DATA[:10])
    want = _run(trace(fn, x), _DATA[:10])
    program = passes.annotate_liveness(fuse_elementwise(trace(fn, x)))
    source = codegen.generate(program).source
    assert "f0_E0[3] = None" in source and "del f0_E0" in source, source
    with np.errstate(all="ignore"):
        _same_bits(_run(program, _DATA[:10]), want)
    assert fusion._column(["a[7]", "a[5]", "a[3]", "a[1]"]) == "a[7::-2]"
    assert fusion._column(["a[8]", "a[6]", "a[4]"]) == "a[8:2:-2]"
    assert fusion._column(["a[0]", "a[3]", "a[6]"]) == "a[0:9:3]"
    assert fusion._column(["a[0]", "a[1]", "b[2]"]) == "(a[0], a[1], b[2],)"
    assert fusion._column(["v1", "v2"]) == "(v1, v2,)"


def test_a_compiled_graph_keeps_only_the_nodes_of_its_plan():
    """After codegen the traced nodes a fused chain or a pass replaced are gone (a value and
    its node refer to each other: freed then, not left for the cycle collector to walk), and
    the plan still runs: each later call gives eager's numbers."""
    def chain(lin, x):
        y = lin(x)
        for _ in range(10):
            y = flow.relu(flow.tanh(y * 1.5 + 0.5))
        return y.sum()

    class Chain(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.lin = flow.nn.Linear(8, 8)

        def build(self, x):
            return chain(self.lin, x)

    graph = Chain()
    x = flow.tensor(_DATA[:16].reshape(2, 8))
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = sum(type(o) is Node for o in gc.get_objects())
        graph(x)
        program = graph._compiled[0]
        after = sum(type(o) is Node for o in gc.get_objects())
    finally:
        if was_enabled:
            gc.enable()
    assert after - before == len(program.nodes) < 10, (before, after, program)
    assert any(v is None for v in program.values)
    for _ in range(2):
        x = x * 0.5
        with flow.no_grad():
            want = chain(graph.lin, x).numpy()
        np.testing.assert_allclose(graph(x).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("size", [10, fusion.WHERE_SIZE + 10])
def test_a_masked_chain_in_a_loop_reruns_exactly_on_nan(size):
    """relu_grad as a float mask (on more than WHERE_SIZE values) turns an inf gradient at
    y <= 0 into nan; the rerun with the ops' own kernels gives eager's 0, also when the chain
    ran as a loop. On fewer values the step is one `where`, as its kernel: no rerun."""
    rng = np.random.default_rng(1)
    ys = [rng.standard_normal(size).astype(np.float32) for _ in range(10)]
    for y in ys:
        y[2] = 1.0
    ys[-1][2] = np.nan  # a nan y passes the gradient (torch's y <= 0 ? 0 : dy), fused or not
    ys = [flow.tensor(y) for y in ys]

    def fn(g, *ys):
        for y in ys:
            g = REGISTRY["relu_grad"](y, g) * 1.5
        return g

    for first in (rng.standard_normal(size).astype(np.float32), np.resize(_DATA, size)):
        tensors = [flow.tensor(first)] + ys
        arrays = [t.numpy() for t in tensors]
        want = _run(trace(fn, *tensors), *arrays)
        program = fuse_elementwise(trace(fn, *tensors))
        source = codegen.generate(program).source
        assert "for " in source and ("exact" in source) == (size > fusion.WHERE_SIZE), source
        with np.errstate(all="ignore"):
            _same_bits(_run(program, *arrays), want)


def test_a_masked_backward_chain_reading_a_loops_list_reruns_exactly():
    """The backward chain of a loop of layers reads the forward loop's list; an inf gradient
    at y <= 0 makes relu_grad's float mask give nan, and the exact rerun finds its inputs
    (list items among them) and gives eager's 0 there."""
    def step(x):
        y = x
        for _ in range(6):
            y = flow.relu(flow.tanh(y * 1.5 + 0.25))
        (gx,) = flow.autograd.grad((y * 1e30).sum() * 1e30, [x])  # overflows to inf
        return gx

    # (more than WHERE_SIZE values: relu_grad's step is the float mask)
    data = np.resize(np.array([-1.0, 0.5, 2.0, -3.0], np.float32), fusion.WHERE_SIZE + 4)
    x = flow.tensor(data, requires_grad=True)
    with np.errstate(all="ignore"):
        want = _run(trace(step, x), data)
        program = passes.annotate_liveness(fuse_elementwise(trace(step, x)))
        source = codegen.generate(program).source
        assert "for " in source and "f0_E0[" in source and "exact" in source, source
        got = _run(program, data)
    _same_bits(got, want)
    assert not np.isnan(got[0]).any()


# ---- liveness ----------------------------------------------------------------------------
def test_liveness_frees_each_intermediate_after_its_last_reader():
    x = flow.ones(3)
    program = trace(lambda x: (x.exp(), (x.exp().tanh() * x.exp()).sum()), x)
    e1, e2, t, e3, m, s = (n.outputs[0].id for n in program.nodes)
    dead = passes.liveness(program)
    assert dead == {2: [e2], 4: [t, e3], 5: [m]}  # e1, s are results; x an input
    img, w = flow.ones(1, 1, 4, 4), flow.ones(1, 1, 3, 3, requires_grad=True)
    program = trace(lambda a, b: F.conv2d(a, b).sum(), img, w)
    conv = program.nodes[0]
    assert len(conv.outputs) == 2  # the aux columns: unread, dead right after the conv
    assert passes.liveness(program) == {0: [conv.outputs[1].id], 1: [conv.outputs[0].id]}
    assert passes.optimize(program).dead_after == passes.liveness(program)


# ---- the whole pipeline -------------------------------------------------------------------
def _mlp(seed=0):
    flow.manual_seed(seed)
    return flow.nn.Sequential(flow.nn.Linear(8, 16), flow.nn.Tanh(), flow.nn.Linear(16, 16),
                              flow.nn.ReLU(), flow.nn.Linear(16, 4))


def _train_both(eager, graphed, build, batches, lr=0.1):
    opt_e = flow.optim.SGD(eager.parameters(), lr=lr, momentum=0.9)
    opt_g = flow.optim.SGD(graphed.parameters(), lr=lr, momentum=0.9)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = graphed
            self.add_optimizer(opt_g)

        def build(self, *args):
            loss = build(self.model, *args)
            loss.backward()
            return loss

    train = Train()
    for args in batches:
        loss_e = build(eager, *args)
        opt_e.zero_grad()
        loss_e.backward()
        opt_e.step()
        np.testing.assert_array_equal(train(*args).numpy(), loss_e.detach().numpy())
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        np.testing.assert_array_equal(pg.detach().numpy(), pe.detach().numpy())
    return train._compiled[0]


def test_pipeline_runs_every_pass():
    assert passes.PIPELINE[-4:] == (fuse_elementwise, place_updates, fuse_plain_steps,
                                    passes.annotate_liveness)
    assert {passes.simplify_algebra, passes.eliminate_common_subexpressions,
            passes.fold_constants, passes.eliminate_dead_code} <= set(passes.PIPELINE)


def test_mlp_training_with_the_full_pipeline_matches_eager_bitwise():
    rng = np.random.default_rng(1)
    batches = [(flow.tensor(rng.standard_normal((12, 8)).astype(np.float32)),
                flow.tensor(rng.integers(0, 4, 12))) for _ in range(8)]

    def build(model, x, y):  # a transpose pair and a `* 1.0` the passes take out
        logits = model(x.t().t()) * 1.0
        return F.cross_entropy(logits, y) + 0.0 * (logits.exp() + logits.exp()).mean()

    program = _train_both(_mlp(), _mlp(), build, batches)
    assert "permute" not in _names(program)
    assert _names(program).count("exp") <= 1


def test_elementwise_chain_training_fuses_and_matches_eager_bitwise():
    class Holder(flow.nn.Module):
        def __init__(self):
            super().__init__()
            self.x = flow.nn.Parameter(flow.tensor(np.linspace(0.1, 1.0, 50, dtype=np.float32)))

    def build(model, scale):
        y = model.x
        for _ in range(6):
            y = flow.relu(flow.tanh(y * 1.0001 + 0.0001))
        return (y * scale).sum()

    scale = flow.tensor(np.float32(1.5))
    program = _train_both(Holder(), Holder(), build, [(scale,)] * 5, lr=0.01)
    fused = [n for n in _names(program) if n.startswith("fused[")]
    # the forward is one chain handing out the saved outputs, the backward another
    assert len(fused) == 2, _names(program)
    assert [len(n.op.ops) for n in program.nodes if n.op.name in fused][0] == 24


def test_a_binary_op_joins_one_fusion_chain_only():
    """x.tanh() * y.exp(): the product could extend either operand's chain; fusing it into
    both dropped the first chain's nodes (the LSTM's f * c + i * g hit this)."""
    for fn in (lambda x, y: x.tanh() * y.exp(), lambda a, b: a.tanh() * b + a.exp() * b.neg()):
        graph = flow.nn.Graph.trace(fn)
        x, y = flow.tensor([0.5, -1.0, 2.0]), flow.tensor([1.5, 0.25, -0.5])
        for _ in range(3):  # the first call runs the trace; the later ones the plan
            np.testing.assert_array_equal(graph(x, y).numpy(), fn(x, y).numpy())


# ---- constants made inside build -----------------------------------------------------------
def test_constants_made_inside_build_fold_and_each_call_sees_them_as_made():
    def step(x):
        mask = flow.ones(3)
        mask[1] = 0.0  # written inside build: each eager call makes and writes it anew
        scale = flow.arange(3.0).exp()  # computed from factories only: folded
        return x * mask * scale

    graph = flow.nn.Graph.trace(step)
    for k in range(3):
        x = flow.tensor([1.0, 2.0, 3.0]) * (k + 1)
        np.testing.assert_array_equal(graph(x).numpy(), step(x).numpy())
    assert "exp" not in _names(graph._compiled[0])


def test_a_captured_tensor_written_inside_build_keeps_each_write_as_eagerly():
    counter, eager_counter = flow.zeros(2), flow.zeros(2)

    def make(c):
        def step(x):
            c.add_(1.0)
            return x + c
        return step

    graph = flow.nn.Graph.trace(make(counter))
    eager = make(eager_counter)
    for _ in range(3):
        np.testing.assert_array_equal(graph(flow.ones(2)).numpy(), eager(flow.ones(2)).numpy())
    np.testing.assert_array_equal(counter.numpy(), [3.0, 3.0])


# writes inside build that outlive the call: to the graph's input, through a view of it, and
# `.data =` on an input or a parameter; each call of the plan must leave the caller's tensors
# as eager leaves them (the plan wrote nothing back: only the traced first call did)
INPUT_WRITES = {
    "add_": lambda x, w: x.add_(1.0) * 2,
    "view mul_": lambda x, w: (x[1:].mul_(2.0), x.sum())[1],
    "setitem": lambda x, w: (x.__setitem__(0, 5.0), x * 1)[1],
    "clamp_": lambda x, w: x.clamp_(min=0.0) + 0,
    "copy_": lambda x, w: (x.copy_(x * 3), x + 1)[1],
    "detach().mul_": lambda x, w: (x.detach().mul_(2.0), x + 0)[1],
    "index_add_": lambda x, w: x.index_add_(0, flow.tensor([0, 0]), flow.ones(2)) * 1,
    "zero_": lambda x, w: (x.zero_(), x + 1)[1],
    "input .data =": lambda x, w: (setattr(x, "data", x * 2), x + 0)[1],
    "parameter .data =": lambda x, w: (setattr(w, "data", w.data * 0.5), x * w)[1],
}


@pytest.mark.parametrize("name", INPUT_WRITES)
def test_writes_to_inputs_and_parameters_inside_build_outlive_each_call(name):
    fn = INPUT_WRITES[name]
    w_graph, w_eager = flow.nn.Parameter(flow.ones(3)), flow.nn.Parameter(flow.ones(3))
    holder = flow.nn.Module()
    holder.w = w_graph

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.holder = holder

        def build(self, x):
            return fn(x, self.holder.w)

    graph = Step()
    for seed in range(3):
        data = np.random.default_rng(seed).standard_normal(3).astype(np.float32)
        x_graph, x_eager = flow.tensor(data), flow.tensor(data)
        version = x_graph._version
        with flow.no_grad():
            want = fn(x_eager, w_eager)
        np.testing.assert_allclose(graph(x_graph).numpy(), want.numpy(), rtol=1e-6)
        np.testing.assert_allclose(x_graph.numpy(), x_eager.numpy(), rtol=1e-6)
        np.testing.assert_allclose(w_graph.detach().numpy(), w_eager.detach().numpy())
        if ".data" not in name:  # (a .data assignment bumps no version eagerly)
            assert (x_graph._version > version) == (x_eager._version > 0)


def test_a_chain_reading_a_gemm_result_alone_computes_in_it_unless_switched_off():
    model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.ReLU(), flow.nn.Linear(8, 2))

    def step(x):
        return model(x) * 2.0 + 1.0

    x = flow.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    for switch, expected in ((None, [True, True]), (False, [False])):  # off: relu stays alone
        graph = flow.nn.Graph.trace(step)
        if switch is not None:
            graph.config.allow_fuse_add_to_output(switch)
        for _ in range(2):
            np.testing.assert_array_equal(graph(x).numpy(), step(x).detach().numpy())
        fused = [n.op for n in graph._compiled[0].nodes if n.op.name.startswith("fused[")]
        assert [op.into_input for op in fused] == expected


def test_a_residual_add_computes_in_its_gemm_operand_whichever_side_it_is():
    """h + linear(h) and linear(h) + h: the add writes into the GEMM's fresh array (the
    operand read there alone), the other operand read as it is; the values are eager's bit for
    bit, and the residual h is left as it was (it is read again after)."""
    lin = flow.nn.Linear(8, 8)

    def left(h):
        return (h + lin(h)) * h

    def right(h):
        return (lin(h) + h) * h

    h = flow.tensor(np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32))
    for step in (left, right):
        graph = flow.nn.Graph.trace(step)
        for _ in range(2):
            before = h.numpy().copy()
            np.testing.assert_array_equal(graph(h).numpy(), step(h).detach().numpy())
            np.testing.assert_array_equal(h.numpy(), before)
        adds = [n for n in graph._compiled[0].nodes if n.op.name.startswith("fused[add")]
        assert [n.op.into_input for n in adds] == [True]


def test_in_place_random_fills_draw_anew_on_every_call_as_eagerly():
    """Tensor.uniform_ and normal_ inside build draw inside random ops: each call of the
    compiled plan gets fresh numbers, the same stream as eagerly (they were drawn by Python at
    trace time and frozen into the plan)."""
    def step(x):
        return x + flow.empty(4).uniform_(-1.0, 2.0), x * flow.empty(4).normal_(0.5, 2.0)

    graph_helpers.assert_draws_as_eager(step, flow.zeros(4))


def test_in_place_random_fills_keep_numpys_values():
    from flowgrad.random import numpy_generator

    for dtype in (flow.float32, flow.float64):
        flow.manual_seed(7)
        want_u = numpy_generator().uniform(-2, 3, (4, 5)).astype(dtype.np)
        want_n = numpy_generator().normal(1.5, 2, (4, 5)).astype(dtype.np)
        flow.manual_seed(7)
        np.testing.assert_array_equal(flow.empty(4, 5, dtype=dtype).uniform_(-2, 3).numpy(),
                                      want_u)
        np.testing.assert_array_equal(flow.empty(4, 5, dtype=dtype).normal_(1.5, 2).numpy(),
                                      want_n)


def test_nn_init_inside_build_raises_naming_the_line():
    def step(x):
        w = flow.empty(3, 3)
        flow.nn.init.xavier_uniform_(w)  # drawn by Python: the plan would freeze it
        return x @ w

    with pytest.raises(RuntimeError, match=r"nn.init draws its random numbers.*test_graph"):
        flow.nn.Graph.trace(step)(flow.ones(2, 3))
    w = flow.empty(3, 3)
    flow.nn.init.xavier_uniform_(w)  # eagerly: as before
    assert float(w.abs().sum()) > 0
