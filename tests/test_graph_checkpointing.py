"""Activation checkpointing in nn.Graph (`self.model[i].to(flow.nn.graph.GraphModule)
.activation_checkpointing = True`): the same numbers as without it and as eager, recompute
nodes in the compiled program, and a lower peak memory per compiled step.

The MLP is 16 Linear+Tanh layers of width 256 in 4 checkpointed segments of 4 layers, batch
1024. One checkpoint per Linear+Tanh would save nothing: its backward reads only the layer's
input and output, which a checkpoint keeps. And the parameters' gradients are results held
to the end of the step, so the batch is larger than the width for activations to dominate.
"""
import tracemalloc

import numpy as np
import pytest

import flowgrad as flow
from flowgrad.graph.fusion import FusedOp

WIDTH, BATCH, SEGMENTS, DEPTH = 256, 1024, 4, 4


def _mlp(dropout=0.0):
    flow.manual_seed(0)
    segments = []
    for _ in range(SEGMENTS):
        layers = []
        for i in range(DEPTH):
            layers += [flow.nn.Linear(WIDTH, WIDTH), flow.nn.Tanh()]
            if dropout and i == 1:
                layers.append(flow.nn.Dropout(dropout))
        segments.append(flow.nn.Sequential(*layers))
    return flow.nn.Sequential(*segments)


def _train_graph(model, checkpoint, nested=False):
    opt = flow.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            if checkpoint:
                for segment in self.model:
                    segment.to(flow.nn.graph.GraphModule).activation_checkpointing = True
            if nested:  # an outer checkpoint: the segments' ranges are part of its range
                self.model.to(flow.nn.graph.GraphModule).activation_checkpointing = True
            self.add_optimizer(opt)

        def build(self, x, y):
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            return loss

    return Train()


def _batches(n, seed=3):
    rng = np.random.default_rng(seed)
    return [(flow.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32)),
             flow.tensor(rng.standard_normal((BATCH, WIDTH)).astype(np.float32)))
            for _ in range(n)]


def _recomputed(graph):
    return [n for n in graph._compiled[0].nodes if n.phase == "recompute"]


def test_checkpointed_mlp_matches_plain_graph_and_eager():
    plain_model, ckpt_model, eager = _mlp(), _mlp(), _mlp()
    plain, ckpt = _train_graph(plain_model, False), _train_graph(ckpt_model, True)
    opt = flow.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    for x, y in _batches(3):
        loss_p, loss_c = plain(x, y), ckpt(x, y)
        loss_e = ((eager(x) - y) ** 2).mean()
        opt.zero_grad()
        loss_e.backward()
        opt.step()
        np.testing.assert_array_equal(loss_c.numpy(), loss_p.numpy())
        np.testing.assert_allclose(loss_c.numpy(), loss_e.detach().numpy(), rtol=1e-6)
    for pp, pc, pe in zip(plain_model.parameters(), ckpt_model.parameters(),
                          eager.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pp.detach().numpy())
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)


def _made_by(node, name):
    """Ids of the values `node` hands out that an op `name` made (inside a fused chain too)."""
    if isinstance(node.op, FusedOp):
        op = node.op  # (its outputs: the chain's exported steps, in order)
        return {v.id for v, k in zip(node.outputs, op.exports) if op.ops[k].name == name}
    return {node.outputs[0].id} if node.op.name == name else set()


def test_compiled_program_recomputes_each_segment_and_frees_its_internals():
    ckpt, plain = _train_graph(_mlp(), True), _train_graph(_mlp(), False)
    (x, y), = _batches(1)
    ckpt(x, y)
    plain(x, y)
    assert _recomputed(plain) == []
    # each segment recomputes its first DEPTH - 1 layers (the last one's output is kept)
    names = [n.op.name for n in _recomputed(ckpt)]
    assert names.count("linear") == SEGMENTS * (DEPTH - 1), names
    # (a tanh alone reading its linear's result computes in it: fused[tanh])
    assert sum(n in ("tanh", "fused[tanh]") for n in names) == SEGMENTS * (DEPTH - 1), names
    program = ckpt._compiled[0]
    first_backward = next(i for i, n in enumerate(program.nodes) if n.phase == "backward")
    forward_tanh = set().union(*(_made_by(n, "tanh") for n in program.nodes[:first_backward]))
    freed_in_forward = {vid for i, dead in program.dead_after.items() if i < first_backward
                        for vid in dead}
    # of the forward's tanh outputs only the segments' outputs outlive the forward
    assert len(forward_tanh - freed_in_forward) == SEGMENTS
    assert "recompute" in repr(program)


def _peak(graph, x, y):
    graph(x, y)  # compiles
    tracemalloc.start()
    try:
        graph(x, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_checkpointing_lowers_peak_memory_of_a_compiled_step():
    (x, y), = _batches(1)
    plain = _peak(_train_graph(_mlp(), False), x, y)
    ckpt = _peak(_train_graph(_mlp(), True), x, y)
    print(f"peak memory of one compiled step: {plain / 2**20:.2f} MiB without checkpointing, "
          f"{ckpt / 2**20:.2f} MiB with ({ckpt / plain:.2f}x)")
    assert ckpt < 0.7 * plain, (plain, ckpt)


def test_dropout_inside_a_checkpoint_reuses_the_forward_draws():
    plain_model, ckpt_model = _mlp(dropout=0.3), _mlp(dropout=0.3)
    plain, ckpt = _train_graph(plain_model, False), _train_graph(ckpt_model, True)
    for seed, (x, y) in enumerate(_batches(3)):
        flow.manual_seed(100 + seed)
        loss_p = plain(x, y)
        flow.manual_seed(100 + seed)
        loss_c = ckpt(x, y)
        np.testing.assert_array_equal(loss_c.numpy(), loss_p.numpy())
    assert _recomputed(ckpt)
    assert not any(n.op.name == "dropout" for n in _recomputed(ckpt))
    for pp, pc in zip(plain_model.parameters(), ckpt_model.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pp.detach().numpy())


def test_nested_checkpoints_recompute_the_outermost_range():
    plain_model, ckpt_model = _mlp(), _mlp()
    plain, ckpt = _train_graph(plain_model, False), _train_graph(ckpt_model, True, True)
    for x, y in _batches(2):
        np.testing.assert_array_equal(ckpt(x, y).numpy(), plain(x, y).numpy())
    names = [n.op.name for n in _recomputed(ckpt)]
    # the whole model is one range: every layer but the last is recomputed, once
    assert names.count("linear") == SEGMENTS * DEPTH - 1, names
    for pp, pc in zip(plain_model.parameters(), ckpt_model.parameters()):
        np.testing.assert_array_equal(pc.detach().numpy(), pp.detach().numpy())


def test_graph_modules_are_proxies_with_oneflow_settings():
    model = flow.nn.Sequential(flow.nn.Linear(3, 4), flow.nn.Tanh())

    class Eval(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.settings = self.model.to(flow.nn.graph.GraphModule)
            self.settings.activation_checkpointing = True

        def build(self, x):
            return self.model(x)

    graph = Eval()
    assert isinstance(graph.model, flow.nn.graph.ProxyModule)
    assert graph.model.to(flow.nn.graph.GraphModule) is graph.settings
    assert graph.settings.activation_checkpointing is True
    assert graph.model[0].weight is model[0].weight
    assert [type(m._module) for m in graph.model] == [flow.nn.Linear, flow.nn.Tanh]
    assert len(graph.model) == 2
    with pytest.raises(AttributeError):
        graph.settings.activation_checkpoint = True  # a typo is an error, not a no-op
    x = flow.ones(2, 3)
    np.testing.assert_array_equal(graph(x).numpy(), model(x).detach().numpy())
    assert _recomputed(graph) == []  # no backward: nothing to recompute
    assert not model._forward_hooks and not model._forward_pre_hooks  # tracing only
