"""Self-consistency scans over every public function (flow.* and nn.functional.*), no torch:

- nn.Graph: a function compiled on one input, then called on another, must give what eager
  gives on that other input. A function that computes on its inputs' arrays outside an op
  would be frozen into the plan (the first call's values, silently, on every later call).
- vmap: vmap(f) over a batch must equal f applied example by example.

Each function is called with the first argument list of `SIGNATURES` that runs eagerly; a
refusal inside the graph or vmap (a clear error) passes: only a silent difference fails.
And modules in training mode (losses with targets, embeddings, norms, attention masks...):
eager against a graph of their forward on two batches, outputs and buffers.
"""
from __future__ import annotations

import copy
import inspect

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F

nn = flow.nn


def _t(*shape, seed=0, kind="f", high=3):
    """Random values of a kind; float ones of an even seed hold some zeros, so a function
    whose path depends on zeros (nonzero, prod's rule) sees both on the scans' two calls."""
    r = np.random.default_rng(seed)
    if kind == "f":
        a = r.standard_normal(shape).astype(np.float32)
        if seed % 2 == 0:
            a[r.random(shape) < 0.3] = 0
        return flow.tensor(a)
    if kind == "p":
        return flow.tensor(r.uniform(0.2, 2, shape).astype(np.float32))
    if kind == "i":
        return flow.tensor(r.integers(0, high, shape))
    if kind == "b":
        return flow.tensor(r.random(shape) > 0.5)
    return flow.tensor((r.standard_normal(shape) + 1j * r.standard_normal(shape))
                       .astype(np.complex64))


SIGNATURES = [  # (args of seed s, keywords)
    (lambda s: (_t(3, 4, seed=s),), {}),
    (lambda s: (_t(3, 4, seed=s, kind="p"),), {}),
    (lambda s: (_t(3, 4, seed=s), _t(3, 4, seed=s + 10)), {}),
    (lambda s: (_t(3, 4, seed=s), 1), {}),
    (lambda s: (_t(3, 4, seed=s),), {"dim": 1}),
    (lambda s: (_t(3, 4, seed=s), _t(3, 4, seed=s + 10), _t(3, 4, seed=s + 20)), {}),
    (lambda s: (_t(4, 4, seed=s),), {}),
    (lambda s: (_t(4, 4, seed=s, kind="p") + 4 * flow.eye(4),), {}),
    (lambda s: (_t(3, 4, seed=s, kind="i"),), {}),
    (lambda s: (_t(3, 4, seed=s, kind="b"),), {}),
    (lambda s: (_t(3, 4, seed=s, kind="c"),), {}),
    (lambda s: (_t(3, 4, seed=s), _t(3, 4, seed=s + 5, kind="i")), {}),
    (lambda s: (_t(3, 4, seed=s), 0, _t(2, 4, seed=s + 5, kind="i")), {}),
    (lambda s: (_t(3, 4, seed=s), 1, _t(2, seed=s + 5, kind="i")), {}),
    (lambda s: (_t(6, seed=s),), {}),
    (lambda s: (_t(6, seed=s), _t(6, seed=s + 3)), {}),
    (lambda s: (_t(2, 3, 8, 8, seed=s),), {}),
    (lambda s: (_t(2, 3, 8, 8, seed=s), _t(4, 3, 3, 3, seed=s + 1)), {}),
    (lambda s: (_t(2, 3, 10, seed=s),), {}),
    (lambda s: (_t(3, 4, seed=s), 2), {}),
    (lambda s: (_t(3, 4, seed=s), _t(4, seed=s + 5, kind="i")), {}),
]

# draws random numbers (a fresh draw per call is the point), or changes global state
_RANDOM = ("rand", "normal", "bernoulli", "multinomial", "poisson", "dropout", "rrelu",
           "binomial", "gumbel", "lowrank")  # (svd/pca_lowrank: a random projection)
_SKIP = {"manual_seed", "seed", "set_default_dtype", "set_printoptions", "save", "load",
         "set_num_threads", "set_num_interop_threads", "set_rng_state",
         "use_deterministic_algorithms", "set_default_device", "set_grad_enabled",
         "set_anomaly_enabled", "compile", "from_numpy", "set_autocast_enabled",
         "set_float32_matmul_precision", "set_deterministic_debug_mode", "set_warn_always",
         "set_flush_denormal", "set_autocast_dtype", "set_autocast_cpu_dtype",
         "set_autocast_gpu_dtype", "set_autocast_cpu_enabled", "set_autocast_cache_enabled",
         "autocast_increment_nesting", "autocast_decrement_nesting", "vmap", "cond",
         "from_dlpack"}


def _functions():
    found = []
    for prefix, space in (("flow.", flow), ("F.", F)):
        for name in sorted(dir(space)):
            fn = getattr(space, name)
            if name.startswith("_") or name in _SKIP or not callable(fn) or \
                    inspect.isclass(fn) or any(r in name for r in _RANDOM):
                continue
            found.append((prefix + name, fn))
    return found


def _tensors(out):
    if isinstance(out, flow.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return []


def _fresh(args):
    """A copy of the arguments (in-place functions must not see an earlier call's write)."""
    return [a.clone() if isinstance(a, flow.Tensor) else a for a in args]


def _same(got, want):
    if len(got) != len(want):
        return False
    for a, b in zip(got, want):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            return False
        x, y = a.detach().numpy(), b.detach().numpy()
        if x.dtype.kind in "fc":
            if not np.allclose(x, y, rtol=1e-4, atol=1e-5, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _first_signature(fn):
    for make, kw in SIGNATURES:
        try:
            out = _tensors(fn(*_fresh(make(1)), **kw))
        except Exception:
            continue
        return (make, kw) if out else None
    return None


def _scanned():
    """(name, function, arguments of a seed, keywords) of every public function that runs
    eagerly on one of SIGNATURES (the first that does)."""
    for name, fn in _functions():
        signature = _first_signature(fn)
        if signature is not None:
            yield (name, fn) + signature


def _with_tensors(fn, template, kw):
    slots = [i for i, a in enumerate(template) if isinstance(a, flow.Tensor)]

    def call(*tensors):
        args = list(template)
        for i, t in zip(slots, tensors):
            args[i] = t
        return fn(*args, **kw)
    return call, slots


def test_graph_replays_every_function_on_new_inputs():
    differ, tried = [], 0
    for name, fn, make, kw in _scanned():
        first, second = make(1), make(2)
        call, slots = _with_tensors(fn, first, kw)
        try:
            graph = flow.nn.Graph.trace(call)
            got = [_tensors(graph(*[a[i] for i in slots])) for a in
                   (_fresh(first), _fresh(second))]
        except Exception:
            continue  # refused, clearly: fine
        tried += 1
        want = [_tensors(fn(*_fresh(a), **kw)) for a in (first, second)]
        if not all(_same(g, w) for g, w in zip(got, want)):
            differ.append(name)
    assert tried > 300, tried
    assert not differ, f"nn.Graph replays these with their first call's values: {differ}"


def test_vmap_matches_a_loop_for_every_function():
    differ, tried = [], 0
    for name, fn, make, kw in _scanned():
        batch = [make(10 + k) for k in range(3)]
        call, slots = _with_tensors(fn, batch[0], kw)
        try:
            loops = [_tensors(fn(*_fresh(b), **kw)) for b in batch]
            stacked = [flow.stack([b[i] for b in batch]) for i in slots]
            got = _tensors(flow.func.vmap(call)(*stacked))
        except Exception:
            continue
        tried += 1
        if not _same(got, [flow.stack([r[j] for r in loops]) for j in range(len(loops[0]))]):
            differ.append(name)
    assert tried > 300, tried
    assert not differ, f"vmap differs from a loop over the examples: {differ}"


def test_graph_gradients_match_eager_for_every_function():
    """d/dp of f(p * s) through the graph's autograd pass, on two inputs s: a rule that
    chose its formula by the first call's values (prod's division) kept it for the next."""
    differ, tried = [], 0
    for name, fn, make, kw in _scanned():
        first, second = make(1), make(2)
        if not first[0].is_floating_point():
            continue
        holder = flow.nn.Module()
        holder.p = flow.nn.Parameter(flow.full(tuple(first[0].shape), 0.7))

        def gradient(args, fn=fn, kw=kw, holder=holder):
            outs = [o for o in _tensors(fn(holder.p * args[0], *args[1:], **kw))
                    if o.requires_grad]
            if not outs:
                return None
            loss = sum((o.abs() if o.is_complex() else o).sum() * (k + 1)
                       for k, o in enumerate(outs))
            return flow.autograd.grad(loss, [holder.p], allow_unused=True)[0]

        try:
            want = [gradient(_fresh(a)) for a in (first, second)]
        except Exception:
            continue
        if want[0] is None:
            continue
        slots = [i for i, a in enumerate(first) if isinstance(a, flow.Tensor)]

        class Step(flow.nn.Graph):
            def __init__(self, holder=holder):
                super().__init__()
                self.holder = holder

            def build(self, *tensors, template=first, slots=slots, gradient=gradient):
                args = list(template)
                for i, t in zip(slots, tensors):
                    args[i] = t
                return gradient(args)

        try:
            step = Step()
            got = [step(*[_fresh(a)[i] for i in slots]) for a in (first, second)]
        except Exception:
            continue
        tried += 1
        if any(g is None or not _same([g], [w]) for g, w in zip(got, want)):
            differ.append(name)
    assert tried > 250, tried
    assert not differ, f"the graph's gradients differ from eager's: {differ}"


def _signs(s, shape):
    return flow.tensor(np.where(np.random.default_rng(s).random(shape) > 0.5, 1.0, -1.0)
                       .astype(np.float32))


MODULES = [  # (name, module, batch of seed s)
    ("CrossEntropy ignore", lambda: nn.CrossEntropyLoss(ignore_index=1),
     lambda s: (_t(6, 4, seed=s), _t(6, seed=s, kind="i", high=4))),
    ("CrossEntropy weight smoothing", lambda: nn.CrossEntropyLoss(
        weight=flow.tensor([1.0, 2, 3, 4]), label_smoothing=0.1),
     lambda s: (_t(6, 4, seed=s), _t(6, seed=s, kind="i", high=4))),
    ("NLL 2-d", lambda: nn.NLLLoss(ignore_index=0),
     lambda s: (_t(2, 3, 4, 4, seed=s), _t(2, 4, 4, seed=s, kind="i"))),
    ("MultiMargin", lambda: nn.MultiMarginLoss(p=2, margin=0.5),
     lambda s: (_t(5, 4, seed=s), _t(5, seed=s, kind="i", high=4))),
    ("MultiLabelMargin", lambda: nn.MultiLabelMarginLoss(),
     lambda s: (_t(3, 4, seed=s), flow.tensor(np.random.default_rng(s).integers(-1, 4, (3, 4))))),
    ("CTC", lambda: nn.CTCLoss(zero_infinity=True),
     lambda s: (flow.log_softmax(_t(8, 2, 5, seed=s), 2),
                flow.tensor(np.random.default_rng(s).integers(1, 5, (2, 3))),
                flow.tensor([8, 7]), flow.tensor([3, 2 + s % 2]))),
    ("BCEWithLogits pos_weight", lambda: nn.BCEWithLogitsLoss(pos_weight=flow.tensor(
        [1.0, 2, 3, 4])), lambda s: (_t(3, 4, seed=s), _t(3, 4, seed=s + 1, kind="p") / 2)),
    ("CosineEmbedding", lambda: nn.CosineEmbeddingLoss(margin=0.2),
     lambda s: (_t(4, 5, seed=s), _t(4, 5, seed=s + 1), _signs(s, 4))),
    ("HingeEmbedding", lambda: nn.HingeEmbeddingLoss(),
     lambda s: (_t(4, 5, seed=s), _signs(s, (4, 5)))),
    ("Embedding max_norm", lambda: nn.Embedding(5, 3, max_norm=0.5),
     lambda s: (_t(2, 4, seed=s, kind="i", high=5),)),
    ("EmbeddingBag weights", lambda: nn.EmbeddingBag(5, 3, mode="sum"),
     lambda s: (_t(7, seed=s, kind="i", high=5), flow.tensor([0, 3, 4 + s % 2]),
                _t(7, seed=s))),
    ("BatchNorm2d cumulative", lambda: nn.BatchNorm2d(3, momentum=None),
     lambda s: (_t(2, 3, 4, 4, seed=s),)),
    ("InstanceNorm1d tracked", lambda: nn.InstanceNorm1d(3, track_running_stats=True),
     lambda s: (_t(2, 3, 6, seed=s),)),
    ("MaxPool2d indices", lambda: nn.MaxPool2d(2, return_indices=True, ceil_mode=True),
     lambda s: (_t(2, 3, 5, 5, seed=s),)),
    ("Upsample bicubic", lambda: nn.Upsample(scale_factor=1.5, mode="bicubic"),
     lambda s: (_t(1, 2, 4, 4, seed=s),)),
    ("Fold", lambda: nn.Fold((4, 5), 2), lambda s: (_t(2, 8, 12, seed=s),)),
    ("GRU h0", lambda: nn.GRU(3, 4), lambda s: (_t(5, 2, 3, seed=s), _t(1, 2, 4, seed=s + 1))),
    ("MultiheadAttention key_padding_mask", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
     lambda s: (_t(2, 5, 8, seed=s), _t(2, 6, 8, seed=s + 1), _t(2, 6, 8, seed=s + 2),
                _t(2, 6, seed=s, kind="b"))),
    ("TransformerDecoderLayer mask", lambda: nn.TransformerDecoderLayer(
        8, 2, 16, dropout=0.0, norm_first=True),
     lambda s: (_t(5, 2, 8, seed=s), _t(4, 2, 8, seed=s + 1),
                nn.Transformer.generate_square_subsequent_mask(5))),
    ("PReLU", lambda: nn.PReLU(3), lambda s: (_t(2, 3, 4, seed=s),)),
]


@pytest.mark.parametrize("name,make_module,batch", MODULES, ids=[c[0] for c in MODULES])
def test_module_graph_matches_eager_on_two_batches(name, make_module, batch):
    flow.manual_seed(0)
    module = make_module()
    eager = copy.deepcopy(module)
    want = [_tensors(eager(*batch(s))) for s in (1, 2)]

    class Forward(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.module = module

        def build(self, *inputs):
            return self.module(*inputs)

    graph = Forward()
    got = [_tensors(graph(*batch(s))) for s in (1, 2)]
    assert all(_same(g, w) for g, w in zip(got, want)), name
    assert _same(list(module.buffers()), list(eager.buffers())), name
