"""What a compiled plan froze from Python while build was traced, checked on each call against
eager: layout reads (is_contiguous, stride, storage_offset, data_ptr of an input, a parameter or
a buffer), long lists and big NumPy arrays build reads, an optimizer's param group options
read through a global. A call that would change what build computed raises StalePlanError in
nn.Graph, and flow.compile traces anew (its numbers are eager's)."""
from __future__ import annotations

import collections
import copy
import functools
import types

import numpy as np
import pytest

import flowgrad as flow
from flowgrad.graph.graph import StalePlanError


def _by_contiguity(x):
    return x * 2 if x.is_contiguous() else x * 3


def _by_stride(x):
    return x * x.stride(0)


def _by_offset(x):
    return x + x.storage_offset()


@pytest.mark.parametrize("fn", [_by_contiguity, _by_stride, _by_offset])
def test_build_reading_an_inputs_layout_is_checked_on_each_call(fn):
    """build branching on an input's layout: a later call with another layout took the traced
    branch (or number) and gave it silently."""
    first = flow.arange(9.0).reshape(3, 3)
    other = flow.arange(9.0).reshape(3, 3).t() if fn is not _by_offset else \
        flow.arange(10.0)[1:].reshape(3, 3)
    graph = flow.nn.Graph.trace(fn)
    assert graph(first).tolist() == fn(first).tolist()
    with pytest.raises(StalePlanError, match="read a layout"):
        graph(other)
    compiled = flow.compile(fn)
    for x in (first, other, first):
        assert compiled(x).tolist() == fn(x).tolist()


def test_flowgrads_own_layout_reads_add_no_check():
    graph = flow.nn.Graph.trace(lambda x: x.reshape(-1) * 2)
    graph(flow.ones(2, 3))
    assert graph(flow.arange(6.0).reshape(3, 2).t()).tolist() == [0, 4, 8, 2, 6, 10]


class _ByStateLayout(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = flow.nn.Parameter(flow.arange(9.0).reshape(3, 3))
        self.register_buffer("table", flow.arange(9.0).reshape(3, 3))

    def forward(self, x):
        scale = 2.0 if self.weight.is_contiguous() else 3.0
        return (x @ self.weight) * scale + self.table.storage_offset()


@pytest.mark.parametrize("change", [
    lambda m: setattr(m.weight, "data", m.weight.data.t()),
    lambda m: setattr(m.table, "data", flow.arange(10.0)[1:].reshape(3, 3))])
def test_build_reading_a_parameters_or_buffers_layout_is_checked_on_each_call(change):
    """build branching on a parameter's is_contiguous() or a buffer's storage_offset(): after
    `weight.data = weight.data.t()` (or a buffer's data at an offset) the plan took the
    traced branch and gave its numbers silently."""
    model, x = _ByStateLayout(), flow.ones(2, 3)
    graph, compiled = flow.nn.Graph.trace(lambda x: model(x)), flow.compile(model)
    assert graph(x).tolist() == compiled(x).tolist() == model(x).tolist()
    change(model)
    with pytest.raises(StalePlanError, match="parameter or buffer of shape"):
        graph(x)
    assert compiled(x).tolist() == model(x).tolist()


def _by_address(q, k):
    return q * 2 if q.data_ptr() == k.data_ptr() else q + k


def _by_storage(q, k):
    return q * 2 if q.untyped_storage().data_ptr() == k.untyped_storage().data_ptr() else q + k


@pytest.mark.parametrize("fn", [_by_address, _by_storage])
def test_build_reading_data_ptr_is_checked_on_each_call(fn):
    """`q.data_ptr() == k.data_ptr()` (a self-attention shortcut; or of their storages) was
    not watched at all: a later call with other tensors took the traced branch."""
    a, b = flow.ones(3), flow.full((3,), 5.0)
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    assert graph(a[:2], a[1:]).tolist() == fn(a[:2], a[1:]).tolist()
    with pytest.raises(StalePlanError, match="address"):
        graph(a[:2], b[1:])
    for q, k in ((a, a), (a, b), (b, b)):
        assert compiled(q, k).tolist() == fn(q, k).tolist()


_LINEAR = flow.nn.Linear(2, 1)
OPTIMIZER = flow.optim.SGD(_LINEAR.parameters(), lr=0.5)
SCHEDULER = flow.optim.lr_scheduler.StepLR(OPTIMIZER, step_size=1, gamma=0.5)


def _scaled_by_lr(x):
    return _LINEAR(x) * OPTIMIZER.param_groups[0]["lr"]


def _scaled_by_last_lr(x):
    return _LINEAR(x) * SCHEDULER.get_last_lr()[0]


@pytest.mark.parametrize("fn", [_scaled_by_lr, _scaled_by_last_lr])
def test_an_optimizers_rate_read_through_a_global_is_watched(fn):
    """OPTIMIZER.param_groups[0]['lr'] (or a scheduler's last rate) read in build through a
    global optimizer not registered with add_optimizer: the plan kept the traced rate after
    the user or a scheduler changed it."""
    x = flow.ones(1, 2)
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    assert graph(x).item() == compiled(x).item() == fn(x).item()
    SCHEDULER.step()
    with pytest.raises(StalePlanError, match="param_groups|last_lr"):
        graph(x)
    assert compiled(x).item() == fn(x).item()
    OPTIMIZER.param_groups[0]["lr"] = 0.25
    assert compiled(x).item() == fn(x).item()


TABLE = [1.0] * 100
BIG = np.ones(5000)


def _from_table(x):
    return x * TABLE[3]


def _from_array_item(x):
    return x * float(BIG[3])


def _from_array_copy(x):
    return x * flow.tensor(BIG).sum()


@pytest.mark.parametrize("fn", [_from_table, _from_array_item, _from_array_copy])
def test_a_change_in_place_to_a_long_list_or_a_big_array_is_seen(fn):
    """A list longer than 64 or a NumPy array over 4096 elements that build read was watched
    by identity only: a change to an element in place gave the traced numbers."""
    x = flow.ones(2)
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    assert graph(x).tolist() == compiled(x).tolist() == fn(x).tolist()
    TABLE[3], BIG[3] = 2.0, 2.0
    try:
        with pytest.raises(StalePlanError, match="TABLE|values of a captured"):
            graph(x)
        assert compiled(x).tolist() == fn(x).tolist()
    finally:
        TABLE[3], BIG[3] = 1.0, 1.0
    shared = flow.nn.Graph.trace(lambda x: x * flow.from_numpy(BIG).sum())
    shared(x)
    BIG[0] = 3.0  # (read by reference: each call's values, as eagerly)
    try:
        assert shared(x).tolist() == [5002.0, 5002.0]
    finally:
        BIG[0] = 1.0


LOOKUP = [[1.0, 2.0], [3.0, 4.0]]
CONFIG = {"weights": [1.0, 2.0], "array": np.ones(3)}


def _from_nested_list(x):
    return x * LOOKUP[0][1]


def _from_dict_of_list(x):
    return x * CONFIG["weights"][1]


def _from_dict_of_array(x):
    return x * float(CONFIG["array"][1])


@pytest.mark.parametrize("fn, change", [
    (_from_nested_list, lambda: LOOKUP[0].__setitem__(1, 5.0)),
    (_from_dict_of_list, lambda: CONFIG["weights"].__setitem__(1, 5.0)),
    (_from_dict_of_array, lambda: CONFIG["array"].__setitem__(1, 5.0)),
    (_from_dict_of_array, lambda: CONFIG.__setitem__("array", np.full(3, 5.0)))])
def test_nested_containers_build_reads_are_watched(fn, change):
    """A list of lists, or a dict holding a list or a NumPy array, was not watched at all: a
    change to an element the plan read gave the traced numbers."""
    held = (copy.deepcopy(LOOKUP), copy.deepcopy(CONFIG))
    x = flow.ones(2)
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    assert graph(x).tolist() == compiled(x).tolist() == fn(x).tolist()
    change()
    try:
        with pytest.raises(StalePlanError):
            graph(x)
        assert compiled(x).tolist() == fn(x).tolist() == [5.0, 5.0]
    finally:
        LOOKUP[:] = held[0]
        CONFIG.update(held[1])


DIST = flow.distributions.Normal(flow.tensor(0.0), flow.tensor(1.0))
SCALE_BY = functools.partial(flow.mul, other=2.0)
ORDERED = collections.OrderedDict(a=2.0)
NAMESPACE = types.SimpleNamespace(inner=types.SimpleNamespace(s=2.0))


def _from_distribution(x):
    return DIST.log_prob(x)


def _from_partial(x):
    return SCALE_BY(x)


def _from_ordered_dict(x):
    return x * ORDERED["a"]


def _from_nested_namespace(x):
    return x * NAMESPACE.inner.s


@pytest.mark.parametrize("fn, change", [
    (_from_distribution, lambda: globals().__setitem__(
        "DIST", flow.distributions.Normal(flow.tensor(1.0), flow.tensor(1.0)))),
    (_from_partial, lambda: globals().__setitem__(
        "SCALE_BY", functools.partial(flow.mul, other=3.0))),
    (_from_ordered_dict, lambda: ORDERED.__setitem__("a", 3.0)),
    (_from_nested_namespace, lambda: setattr(NAMESPACE.inner, "s", 3.0))])
def test_other_objects_build_reads_are_watched(fn, change):
    """A global bound to another kind of object (a distribution, a partial) was not watched
    even by identity, nor a dict subclass's items or a config object's nested attributes:
    rebinding or changing them gave the traced numbers."""
    held = (DIST, SCALE_BY, dict(ORDERED), NAMESPACE.inner.s)
    x = flow.ones(2)
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    assert graph(x).tolist() == compiled(x).tolist() == fn(x).tolist()
    change()
    try:
        with pytest.raises(StalePlanError):
            graph(x)
        assert compiled(x).tolist() == fn(x).tolist()
    finally:
        globals().update(DIST=held[0], SCALE_BY=held[1])
        ORDERED.update(held[2])
        NAMESPACE.inner.s = held[3]


def test_a_registered_optimizers_option_read_in_build_is_watched():
    """build reading the lr of the graph's own optimizer (add_optimizer) kept the traced one
    after its scheduler changed it; a build that only names the optimizer runs on."""
    linear = flow.nn.Linear(2, 1)
    opt = flow.optim.SGD(linear.parameters(), lr=0.5)
    sched = flow.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)

    class Step(flow.nn.Graph):
        reads = True

        def __init__(self):
            super().__init__()
            self.linear = linear
            self.add_optimizer(opt, lr_sch=sched)

        def build(self, x):
            scale = opt.param_groups[0]["lr"] if self.reads else float(opt is not None)
            loss = (self.linear(x) * scale).sum()
            loss.backward()
            return loss

    x = flow.ones(1, 2)
    step = Step()
    step(x)
    with pytest.raises(StalePlanError, match=r"param_groups\[0\]\['lr'\]"):
        step(x)
    assert opt.param_groups[0]["lr"] == 0.25
    Step.reads = False
    step = Step()
    for _ in range(3):
        step(x)
    assert opt.param_groups[0]["lr"] == 0.25 / 8


class _Agent(flow.nn.Module):
    """An RL agent's module holding its own optimizer and scheduler (as attributes)."""
    reads_rate = False

    def __init__(self):
        super().__init__()
        self.net = flow.nn.Linear(3, 2)
        self.opt = flow.optim.Adam(self.parameters(), lr=0.1)
        self.sched = flow.optim.lr_scheduler.StepLR(self.opt, 1, gamma=0.5)

    def forward(self, x):
        out = self.net(x).tanh()
        return out * self.sched.get_last_lr()[0] if self.reads_rate else out


@pytest.mark.parametrize("reads_rate", [False, True])
def test_an_optimizer_a_module_holds_is_watched_only_where_build_reads_it(reads_rate):
    """A module holding its optimizer and scheduler had every option of the groups and the
    scheduler's rates watched though forward never read them: each sched.step() between
    calls made nn.Graph raise StalePlanError (and flow.compile trace anew). What build does
    read (the scheduler's last rate) is still watched."""
    agent, x = _Agent(), flow.ones(4, 3)
    agent.reads_rate = reads_rate
    graph, compiled = flow.nn.Graph.trace(lambda x: agent(x)), flow.compile(agent)
    for step in range(3):
        assert compiled(x).tolist() == agent(x).tolist()
        if not step:
            first = next(iter(compiled._graphs.values()))
        if reads_rate and agent.sched.last_epoch:
            with pytest.raises(StalePlanError, match=r"StepLR\.(_last_lr|last_epoch)"):
                graph(x)
        else:
            assert graph(x).tolist() == agent(x).tolist()
        agent(x).sum().backward()
        agent.opt.step()
        agent.opt.zero_grad()
        agent.sched.step()
    assert (next(iter(compiled._graphs.values())) is first) is not reads_rate  # (traced anew)


def test_a_rate_read_in_build_is_watched_across_load_state_dict():
    """Optimizer.load_state_dict puts new group dicts in: the plan watched the traced dict,
    so the loaded rate was never seen and the traced one was used silently."""
    linear = flow.nn.Linear(2, 1)
    opt = flow.optim.SGD(linear.parameters(), lr=0.5)

    def scaled(x):
        return linear(x) * opt.param_groups[0]["lr"]

    x = flow.ones(1, 2)
    graph, compiled = flow.nn.Graph.trace(scaled), flow.compile(scaled)
    assert graph(x).item() == compiled(x).item() == scaled(x).item()
    state = opt.state_dict()
    state["param_groups"][0]["lr"] = 0.125
    opt.load_state_dict(state)
    with pytest.raises(StalePlanError, match=r"param_groups\[0\]\['lr'\]"):
        graph(x)
    assert compiled(x).item() == scaled(x).item()


class _Decoder(flow.nn.Module):
    """A decoder step reading a cache dict and a memory list of tensors."""

    def __init__(self, writes=False):
        super().__init__()
        self.cache, self.memory = {"k": flow.zeros(2)}, [flow.zeros(2)]
        self.writes = writes

    def forward(self, x):
        out = x + self.cache["k"] + self.memory[-1]
        if self.writes:
            self.cache["k"] = out.detach()
        return out


@pytest.mark.parametrize("change", [
    lambda m: m.cache.__setitem__("k", flow.full((2,), 5.0)),
    lambda m: m.memory.append(flow.full((2,), 5.0))])
def test_a_container_of_tensors_build_reads_is_watched(change):
    """A module's dict or list attribute holding tensors (a cache, a memory) was not watched:
    storing another tensor in it between calls gave the traced one's numbers."""
    model, x = _Decoder(), flow.ones(2)
    graph, compiled = flow.nn.Graph.trace(lambda x: model(x)), flow.compile(model)
    assert graph(x).tolist() == compiled(x).tolist() == model(x).tolist()
    change(model)
    with pytest.raises(StalePlanError, match="cache|memory"):
        graph(x)
    assert compiled(x).tolist() == model(x).tolist()


def test_build_changing_a_container_attribute_is_refused():
    """`self.cache["k"] = out.detach()` in build changed the cache once, at the trace: later
    calls gave the first call's numbers and left the cache as it was."""
    model, eager, x = _Decoder(writes=True), _Decoder(writes=True), flow.ones(2)
    held = model.cache["k"]
    with pytest.raises(NotImplementedError, match="dict attribute cache"):
        flow.nn.Graph.trace(lambda x: model(x))(x)
    assert model.cache["k"] is held
    compiled = flow.compile(model)  # (runs eagerly)
    for _ in range(3):
        assert compiled(x).tolist() == eager(x).tolist()


_LEAF = flow.ones(2, requires_grad=True)
_HELD = flow.nn.Linear(2, 2)


def _by_requires_grad(x):
    return x * 2 if x.requires_grad else x * 3


def _by_grad_fn(x):
    return x * 2 if x.grad_fn is None else x * 3


def _by_grad(x):
    return _HELD(x) * (2 if _HELD.weight.grad is None else 3)


@pytest.mark.parametrize("fn, calls", [
    (_by_requires_grad, [lambda: flow.ones(1, 2), lambda: flow.ones(1, 2).requires_grad_()]),
    (_by_grad_fn, [lambda: _LEAF, lambda: _LEAF * 1]),
    (_by_grad, [lambda: flow.ones(1, 2), lambda: flow.ones(1, 2)])])
def test_build_reading_autograd_state_is_checked_on_each_call(fn, calls):
    """A branch of build on an input's requires_grad or grad_fn, or on a parameter's .grad
    (`p.grad is None`): a later call with another state took the traced branch silently."""
    _HELD.weight.grad = None
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    first, second = calls
    assert graph(first()).tolist() == compiled(first()).tolist() == fn(first()).tolist()
    _HELD.weight.grad = flow.zeros(2, 2)
    with pytest.raises(StalePlanError, match="requires_grad|grad"):
        graph(second())
    assert compiled(second()).tolist() == fn(second()).tolist()
    _HELD.weight.grad = None


class _MaskMemo(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.masks = {}

    def forward(self, x):
        n = x.shape[0]
        if n not in self.masks:  # (a memo of constants: eagerly the same values each call)
            self.masks[n] = flow.triu(flow.ones(n, n), 1).bool()
        return x.masked_fill(self.masks[n], 0.0)


def test_build_filling_a_memo_of_constants_is_not_refused():
    model, x = _MaskMemo(), flow.ones(3, 3)
    graph = flow.nn.Graph.trace(lambda x: model(x))
    for _ in range(2):
        assert graph(x).tolist() == _MaskMemo()(x).tolist()
    assert list(model.masks) == [3]


class _ReshapedWrite(flow.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", flow.zeros(2, 2))

    def forward(self, x):
        with flow.no_grad():
            self.count.reshape(-1).add_(1)  # (a view of a contiguous buffer, else a copy)
        return x + self.count


def test_a_write_through_a_reshape_of_a_buffer_of_another_layout_is_refused():
    """The plan traced `buf.reshape(-1).add_(1)` on a contiguous buffer (a view: the write
    reaches it); after `buf.data = buf.data.t()` eagerly the reshape copies and the write is
    lost, but the plan went on writing into the buffer."""
    model, eager, x = _ReshapedWrite(), _ReshapedWrite(), flow.ones(2, 2)
    graph, compiled = flow.nn.Graph.trace(lambda x: model(x)), flow.compile(eager)
    graph(x), compiled(x)
    for m in (model, eager):
        m.count.data = m.count.data.t()
    with pytest.raises(StalePlanError, match="through a reshape"):
        graph(x)
    assert compiled(x).tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert eager.count.tolist() == [[1.0, 1.0], [1.0, 1.0]]


CALLS = 0
SEEN_SIZES = []


def _counting(x):
    global CALLS
    CALLS += 1
    return x * 2


def _logging_sizes(x):
    SEEN_SIZES.append(x.shape[0])
    return x * 2


@pytest.mark.parametrize("fn", [_counting, _logging_sizes])
def test_build_changing_a_plain_global_is_refused_and_undone(fn):
    """`global CALLS; CALLS += 1` or `SEEN_SIZES.append(n)` in build ran once, at the trace:
    later calls left them as they were, silently. Refused (put back); flow.compile runs the
    function eagerly, each call changing them as eagerly."""
    x = flow.ones(2)
    with pytest.raises(NotImplementedError, match="CALLS|SEEN_SIZES"):
        flow.nn.Graph.trace(fn)(x)
    assert CALLS == 0 and SEEN_SIZES == []
    compiled = flow.compile(fn)
    try:
        for _ in range(3):
            assert compiled(x).tolist() == [2.0, 2.0]
        assert CALLS + len(SEEN_SIZES) == 3
    finally:
        globals()["CALLS"] = 0
        SEEN_SIZES.clear()
