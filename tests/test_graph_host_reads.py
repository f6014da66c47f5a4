"""Functions that computed on their inputs' arrays outside an op, under nn.Graph: the trace
froze the first call's values into the plan, so the next call with other data gave the old
answer with no error (one_hot, isclose, round of integers, multi_margin_loss's target,
scaled_dot_product_attention's bool mask, bucketize, searchsorted, histc, a 0-d index tensor,
where(cond)). Each is an op now; those whose output shape comes from the values (unique,
histogram, bincount, allclose's bool, repeat_interleave's and tensor_split's tensors) raise
inside build, as does copying a traced tensor (tensor(x), full_like(x, x.sum())) or handing it
to NumPy (np.asarray(x), np.sqrt(x)), deepcopy, pickling, save or a DLPack export.
Named-tuple results (sort, topk, linalg's) came back from a graph as a TypeError. Each case
is compiled once and called on two different inputs, against eager. A size that depends on
values (x[mask], nonzero) is static in a plan, as input shapes are: checked on every call."""
from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad.graph.graph import StalePlanError

T = flow.tensor
I2 = [[1.0, 2.0], [3.0, 5.0]]
CASES = [
    ("copy.copy shares the traced tensor", lambda x: copy.copy(x) * 2,
     [T([0.0, 1.0]), T([3.0, 2.0])]),
    ("one_hot", lambda y: F.one_hot(y, 4), [T([0, 1]), T([3, 3])]),
    ("isclose", lambda x: flow.isclose(x, flow.ones(2)).float(), [T([1.0, 2.0]), T([2.0, 1.0])]),
    ("round int", lambda x: flow.round(x) + flow.floor(x) + flow.trunc(x), [T([1, 2]), T([5, 6])]),
    ("multi_margin target", lambda t: F.multi_margin_loss(flow.arange(6.0).reshape(2, 3), t),
     [T([0, 1]), T([2, 2])]),
    ("multi_margin weight", lambda t: F.multi_margin_loss(
        flow.arange(6.0).reshape(2, 3), t, weight=T([1.0, 2.0, 3.0])), [T([0, 1]), T([2, 0])]),
    ("sdpa bool mask", lambda m: F.scaled_dot_product_attention(
        flow.arange(6.0).reshape(1, 2, 3), flow.ones(1, 2, 3), flow.arange(6.0).reshape(1, 2, 3),
        attn_mask=m), [T([[True, False], [True, True]]), T([[False, True], [False, False]])]),
    ("bucketize", lambda x: flow.bucketize(x, T([0.5, 1.5])).float(),
     [T([0.0, 1.0]), T([2.0, 2.0])]),
    ("searchsorted", lambda x: flow.searchsorted(T([0.5, 1.5]), x, right=True).float(),
     [T([0.5, 1.0]), T([2.0, 1.5])]),
    ("searchsorted sorter", lambda s: flow.searchsorted(s, T([1.0, 2.5]), sorter=s.argsort()),
     [T([3.0, 1.0, 2.0]), T([0.0, 5.0, 4.0])]),
    ("histc", lambda x: flow.histc(x, 2, 0, 2), [T([0.0, 1.5]), T([1.5, 1.5])]),
    ("histc data range", lambda x: flow.histc(x, 3), [T([0.0, 1.5, 3.0]), T([1.0, 1.0, 7.0])]),
    # neighbours that were already ops: they stay right
    ("cross_entropy", lambda t: F.cross_entropy(flow.arange(6.0).reshape(2, 3), t),
     [T([0, 1]), T([2, 2])]),
    ("embedding", lambda i: F.embedding(i, flow.arange(8.0).reshape(4, 2)),
     [T([0, 1]), T([3, 2])]),
    ("gather", lambda i: flow.arange(4.0).gather(0, i), [T([0, 1]), T([3, 2])]),
    ("index_fill", lambda i: flow.arange(4.0).index_fill(0, i, -1.0), [T([0, 1]), T([3, 2])]),
    ("masked_fill", lambda m: flow.arange(2.0).masked_fill(m, -1.0),
     [T([True, False]), T([False, True])]),
    ("ctc", lambda t: F.ctc_loss(flow.arange(30.0).reshape(5, 1, 6).log_softmax(2), t, T([5]),
                                 T([2])), [T([[1, 2]]), T([[3, 3]])]),
    ("kthvalue", lambda x: x.kthvalue(1)[0], [T([0.0, 1.0]), T([2.0, 1.0])]),
    ("median", lambda x: x.median(), [T([0.0, 1.0, 5.0]), T([2.0, 1.0, 0.0])]),
    ("nan_to_num", lambda x: flow.nan_to_num(x), [T([float("nan"), 1.0]), T([1.0, float("inf")])]),
    ("solve", lambda x: flow.linalg.solve(x, T([1.0, 1.0])), [T(I2), T([[2.0, 0.0], [0.0, 3.0]])]),
    ("grid_sample", lambda g: F.grid_sample(flow.arange(4.0).reshape(1, 1, 2, 2), g,
                                            align_corners=True),
     [T([[[[0.0, 0.0]]]]), T([[[[1.0, -1.0]]]])]),
    ("max_unpool", lambda i: F.max_unpool1d(T([[[5.0]]]), i, 2), [T([[[0]]]), T([[[1]]])]),
    ("full_like 0-d value", lambda x: flow.full_like(x, 2.0) * x, [T([1.0, 2.0]), T([3.0, 4.0])]),
    # named-tuple results came back as a TypeError (the plan rebuilt them from one iterable)
    ("sort", lambda x: x.sort(), [T([2.0, 1.0, 3.0]), T([0.0, 5.0, 4.0])]),
    ("topk", lambda x: x.topk(2), [T([2.0, 1.0, 3.0]), T([0.0, 5.0, 4.0])]),
    ("aminmax", lambda x: flow.aminmax(x), [T([2.0, 1.0, 3.0]), T([0.0, 5.0, 4.0])]),
    ("linalg.eigh", lambda x: flow.linalg.eigh(x + x.mT).eigenvalues, [T(I2), T([[2.0, 0.0],
                                                                               [1.0, 3.0]])]),
    ("linalg.qr", lambda x: flow.linalg.qr(x), [T(I2), T([[2.0, 0.0], [1.0, 3.0]])]),
    ("linalg.slogdet", lambda x: flow.linalg.slogdet(x), [T(I2), T([[2.0, 0.0], [1.0, 3.0]])]),
    # a 0-d index tensor was read as an int while tracing (x[i], x[i] = v), and where(cond)'s
    # indices computed outside an op: the first call's positions on every call
    ("0-d index", lambda i: flow.arange(6.0).reshape(3, 2)[i, 1:], [T(0), T(2)]),
    ("0-d index write", lambda i: flow.zeros(3).index_put_((i,), T(1.0)) +
     (lambda y: (y.__setitem__(i, 5.0), y)[1])(flow.zeros(3)), [T(1), T(2)]),
    # (the same count of non-zeros at other places: a plan's sizes are static)
    ("where(cond)", lambda c: flow.where(c), [T([[0, 1], [1, 1]]), T([[1, 1], [0, 1]])]),
    ("nonzero as_tuple", lambda c: flow.nonzero(c, as_tuple=True), [T([0, 3, 1]), T([2, 0, 5])]),
    # (histogram was NumPy's on the host, refused here; it is histogramdd's op now)
    ("histogram", lambda x: tuple(flow.histogram(x, 2)), [T([0.0, 1.0]), T([3.0, -1.0])]),
]

REFUSED = [
    ("allclose", lambda x: x * float(flow.allclose(x, flow.ones(2))), T([1.0, 1.0])),
    ("equal", lambda x: x * float(flow.equal(x, flow.ones(2))), T([1.0, 1.0])),
    ("untyped_storage bytes", lambda x: x * x.untyped_storage()[3], T([1.0, 1.0])),
    ("unique", lambda x: flow.unique(x).float().sum(), T([0, 1])),
    ("bincount", lambda x: flow.bincount(x).float(), T([0, 1])),
    ("one_hot inferred classes", lambda y: F.one_hot(y), T([0, 1])),
    ("unique_consecutive", lambda x: flow.unique_consecutive(x), T([0, 0, 1])),
    ("tensor of a tensor", lambda x: flow.tensor(x) * 2, T([0.0, 1.0])),
    ("scalar_tensor of a tensor", lambda x: flow.scalar_tensor(x.sum()), T([0.0, 1.0])),
    ("full_like of a traced value", lambda x: flow.full_like(x, x.sum()), T([0.0, 1.0])),
    ("repeat_interleave repeats", lambda r: flow.repeat_interleave(flow.ones(2), r), T([1, 2])),
    ("repeat_interleave counts", lambda r: flow.repeat_interleave(r), T([1, 2])),
    ("tensor_split indices", lambda i: flow.tensor_split(flow.ones(4), i)[0], T([1, 3])),
    # (narrow read a 0-d start/length tensor's array: a plan sliced the trace's place)
    ("narrow tensor start", lambda s: flow.arange(6.0).narrow(0, s, 2) * 1, T(3)),
    ("narrow_copy tensor length", lambda n: flow.arange(6.0).narrow_copy(0, 1, n), T([2])),
    # (a sparse tensor's entries are the non-zeros: a plan kept the trace's indices and count)
    ("to_sparse", lambda x: x.to_sparse().values() * 2, T([0.0, 1.0, 1.0])),
    ("to_sparse_csr", lambda x: x.reshape(1, 3).to_sparse_csr().values() * 2, T([0.0, 1.0, 1.0])),
    ("sparse coalesce", lambda i: flow.sparse_coo_tensor(i, T([1.0, 2.0]), (3,)).coalesce()
     .values() * 2, T([[0, 1]])),
    ("sparse_coo_tensor size", lambda i: flow.sparse_coo_tensor(i, T([1.0, 2.0])).to_dense() * 2,
     T([[0, 1]])),
    ("sparse_csr_tensor indices", lambda c: flow.sparse_csr_tensor(
        c, T([0, 1]), T([1.0, 2.0]), (2, 2)).to_dense() * 2, T([0, 1, 2])),
    ("np.asarray of a traced tensor", lambda x: x + float(np.asarray(x).sum()), T([0.0, 1.0])),
    ("a NumPy ufunc of a traced tensor", lambda x: x * np.sqrt(x).sum().item(), T([0.0, 1.0])),
    ("deepcopy", lambda x: copy.deepcopy(x) * 2, T([0.0, 1.0])),
    ("pickle", lambda x: pickle.loads(pickle.dumps(x)) * 2, T([0.0, 1.0])),
    ("save", lambda x: flow.save(x, io.BytesIO()), T([0.0, 1.0])),
    ("dlpack", lambda x: flow.from_dlpack(np.from_dlpack(x)) * 2, T([0.0, 1.0])),
]


def _graph(fn):
    class Step(flow.nn.Graph):
        def build(self, x):
            return fn(x)
    return Step()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compiled_function_sees_each_calls_data(case):
    _, fn, inputs = case
    graph = _graph(fn)
    for x in inputs:
        got, want = graph(x), fn(x)
        assert type(got) is type(want)
        for g, w in zip(*((r,) if isinstance(r, flow.Tensor) else r for r in (got, want))):
            assert tuple(g.shape) == tuple(w.shape)
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_value_dependent_functions_refuse_inside_build(case):
    _, fn, x = case
    with pytest.raises(RuntimeError, match="inside build"):
        _graph(fn)(x)
    fn(x)  # eagerly they run


def test_one_hot_checks_its_classes_on_every_call():
    graph = _graph(lambda y: F.one_hot(y, 3))
    graph(T([0, 2]))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        graph(T([0, 3]))


def test_attention_masks_are_inputs_of_the_plan():
    """MultiheadAttention turned a bool key_padding_mask or attn_mask into an additive mask
    on the host: a compiled Transformer kept the first batch's padding for every batch."""
    flow.manual_seed(0)
    layer = flow.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    x = flow.randn(2, 3, 4)

    class Encode(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def build(self, pad, causal):
            return self.layer(x, src_mask=causal, src_key_padding_mask=pad)

    graph = Encode()
    masks = [(T([[False, False, True], [False, True, True]]), flow.ones(3, 3).triu(1).bool()),
             (T([[True, False, False], [False, False, False]]), flow.ones(3, 3).tril(-1).bool())]
    for pad, causal in masks:
        want = layer(x, src_mask=causal, src_key_padding_mask=pad).detach()
        np.testing.assert_allclose(graph(pad, causal).detach().numpy(), want.numpy(),
                                   rtol=1e-5, atol=1e-6)


def _stepping(holder, step):
    """A graph whose state is `holder`'s parameters and whose build is `step(input)`."""
    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.holder = holder

        def build(self, s):
            return step(s)
    return Step()


def test_decomposition_rules_do_not_freeze_a_zero_gradient():
    """eigh's rule skips the eigenvector term when that gradient is a constant zero; a traced
    gradient that was zero on the first call only (here: scaled by an input) must keep it."""
    holder = flow.nn.Module()
    holder.a = flow.nn.Parameter(flow.tensor([[2.0, 0.5], [0.5, 1.0]]))

    def gradient(s):
        values, vectors = flow.linalg.eigh(holder.a + holder.a.mT)
        return flow.autograd.grad((vectors.abs() * s).sum() + values.sum(), [holder.a])[0]

    step = _stepping(holder, gradient)
    for s in (flow.zeros(2, 2), flow.tensor([[1.0, -2.0], [0.5, 3.0]])):
        np.testing.assert_allclose(step(s).numpy(), gradient(s).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", [lambda t: t.prod(), lambda t: t.cumprod(0).sum()],
                         ids=["prod", "cumprod"])
def test_product_rules_keep_their_exact_form_for_later_zeros(reduce):
    """prod's and cumprod's rules divide by x when it has no zero: a plan traced on such an
    input gave nan gradients for a later input with a zero."""
    holder = flow.nn.Module()
    holder.a = flow.nn.Parameter(flow.tensor([1.0, 2.0, 3.0]))

    def gradient(s):
        return flow.autograd.grad(reduce(holder.a * s), [holder.a])[0]

    step = _stepping(holder, gradient)
    for s in (flow.ones(3), flow.tensor([1.0, 0.0, 2.0]), flow.tensor([0.0, 0.0, 2.0])):
        np.testing.assert_allclose(step(s).numpy(), gradient(s).numpy(), rtol=1e-6)


@pytest.mark.parametrize("read", [
    lambda x: x[x > 0].sum() + x[x > 0].shape[0],
    lambda x: x.sum() * 0 + len(flow.nonzero(x)),
    lambda x: flow.masked_select(x, x > 0).sum() + x[x > 0].size(0),
    lambda x: (x[x > 0] * 2).mean() + (x[x > 0] * 2).numel(),
], ids=["shape", "len_nonzero", "size_of_masked_select", "numel_of_a_product"])
def test_reading_a_value_dependent_size_inside_build_raises(read):
    """A boolean mask's selection (and what is computed from it) has a size that depends on
    the values: reading it inside build would freeze the first call's size into the plan."""
    graph = flow.nn.Graph.trace(read)
    with pytest.raises(RuntimeError, match=r"depends on values.*\(mask\.sum\(\)"):
        graph(T([1.0, 2.0, 0.0, -1.0]))


TAKES_A_VALUE_SIZE = [
    lambda x: (x[x > 0] * 2).sum() + (x > 0).sum() + flow.nonzero(x).sum() * 0,
    lambda x: x[x > 0].chunk(2)[0].sum(),  # split bounds from the traced size: silently wrong
    lambda x: x[x > 0].unsqueeze(1).expand(-1, 2).sum(),
    lambda x: flow.ones_like(x[x > 0]).sum(),  # a constant of the traced size: silently wrong
    lambda x: flow.full_like(x[x > 0], 2.0).sum(),
    lambda x: flow.rand_like(x[x > 0]).mul(0).add(1).sum(),
    lambda x: flow.isreal(x[x > 0]).sum(),  # flowgrad's own code reads the size: wrong shape
    lambda x: flow.gradient(x[x > 0])[0].sum() * 0 + flow.gradient(x[x > 0])[0][-1],
    lambda x: flow.fft.irfft(x[x > 0].to(flow.complex64)).abs().sum(),  # n from the size
    lambda x: x.index_select(0, flow.nonzero(x > 0).squeeze(1)).sum(),
]


@pytest.mark.parametrize("fn", TAKES_A_VALUE_SIZE, ids=[
    "sum", "chunk", "expand", "ones_like", "full_like", "rand_like", "isreal", "gradient",
    "irfft", "nonzero"])
def test_a_value_dependent_size_is_static_in_a_plan(fn):
    """What build computes from a mask selection may keep its traced size: ops take sizes as
    attributes (chunk's bounds, a reshape, irfft's n), factories make constants of its shape
    (ones_like, isreal's new_ones), flowgrad's code turns it into numbers (gradient's narrows):
    the next call with another count computed with the traced size (wrong sums and shapes, no
    error) or failed in a kernel. A plan now checks every such size, as it checks its input
    shapes: the same count runs, another raises StalePlanError naming the line, and
    flow.compile traces anew."""
    graph, compiled = flow.nn.Graph.trace(fn), flow.compile(fn)
    three, same, four = T([1.0, 2.0, -3.0, 4.0]), T([5.0, -1.0, 6.0, 7.0]), T([1.0, 2.0, 3.0, 4.0])
    for x in (three, same):
        assert graph(x).item() == fn(x).item()
    with pytest.raises(StalePlanError, match=r"depends on values.*it was \(3.*is \(4"):
        graph(four)
    for x in (three, four, same, four):
        assert compiled(x).item() == fn(x).item()


def test_a_training_step_through_a_value_dependent_size_refuses_another_and_keeps_state():
    """The gradient of a sum over p[mask] expands to the traced count: a training graph with
    another count raises before the update (the parameter and momentum as they were; it had
    failed inside a kernel); masking with where instead follows any count."""
    for masked, follows in ((lambda p, m: (p[m] ** 2).sum(), False),
                            (lambda p, m: flow.where(m, p, 0.0).pow(2).sum(), True)):
        p = flow.nn.Parameter(flow.tensor([1.0, -2.0, 3.0, 4.0]))
        twin = flow.nn.Parameter(p.detach().clone())
        opt, eager_opt = (flow.optim.SGD([w], lr=0.1, momentum=0.9) for w in (p, twin))

        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.holder = flow.nn.Module()
                self.holder.p = p
                self.add_optimizer(opt)

            def build(self, m):
                loss = masked(p, m)
                loss.backward()
                return loss

        step = Step()
        for i, m in enumerate((T([True, False, True, True]), T([True, True, True, True]))):
            if i and not follows:
                before, momentum = p.detach().clone(), opt.state[p]["momentum_buffer"].clone()
                with pytest.raises(StalePlanError, match="depends on values"):
                    step(m)
                assert p.tolist() == before.tolist()
                assert opt.state[p]["momentum_buffer"].tolist() == momentum.tolist()
                break
            eager_opt.zero_grad()
            want = masked(twin, m)
            want.backward()
            eager_opt.step()
            assert step(m).item() == want.item()
            np.testing.assert_allclose(p.detach().numpy(), twin.detach().numpy(), rtol=1e-6)


def test_a_training_step_over_selected_rows_runs_while_the_count_stays():
    """Cross-entropy over x[mask] rows through a scaled linear layer: the same count on every
    call trains as eager (new rows, new values); another count raises StalePlanError."""
    rng = np.random.default_rng(0)
    models = [flow.nn.Linear(3, 2) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    scales = [flow.nn.Parameter(flow.tensor([0.5])) for _ in range(2)]
    opts = [flow.optim.SGD([*m.parameters(), s], lr=0.1) for m, s in zip(models, scales)]

    def loss_of(model, scale, x, m, y):
        return F.cross_entropy(model(x[m]) * scale, y[m])

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model, self.scale = models[0], flow.nn.Module()
            self.scale.s = scales[0]
            self.add_optimizer(opts[0])

        def build(self, x, m, y):
            loss = loss_of(models[0], scales[0], x, m, y)
            loss.backward()
            return loss

    step = Step()
    for mask in ([1, 0, 1, 1, 0, 1], [0, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 1]):
        x, y = T(rng.standard_normal((6, 3)).astype(np.float32)), T(rng.integers(0, 2, 6))
        m = T(np.array(mask, bool))
        if sum(mask) != 4:
            with pytest.raises(StalePlanError, match=r"it was \(4, 3\).*is \(5, 3\)"):
                step(x, m, y)
            break
        got = step(x, m, y)
        opts[1].zero_grad()
        want = loss_of(models[1], scales[1], x, m, y)
        want.backward()
        opts[1].step()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
        for a, b in zip([*models[0].parameters(), scales[0]],
                        [*models[1].parameters(), scales[1]]):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5)


def test_distribution_validation_inside_build_is_checked_by_the_plan_each_call():
    """A distribution validates its arguments and log_prob's value with bool(ok.all()):
    inside build that was a host read, refused, so every VAE or policy loss with a
    distribution (validation is on by default, as torch's) failed to compile. The check is a
    node of the plan now: values of each call, eager's numbers, eager's ValueError on bad ones
    (before any state is written)."""
    import flowgrad.distributions as D

    flow.manual_seed(0)
    models = [flow.nn.Linear(3, 4) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    opts = [flow.optim.SGD(m.parameters(), lr=0.1) for m in models]

    def loss_of(model, x, scale, k):
        out = model(x)
        normal = D.Normal(out[:, :2], scale)
        prior = D.Normal(flow.zeros(2), flow.ones(2))  # (constants made in build)
        categorical = D.Categorical(logits=out[:, 2:])
        return -(normal.log_prob(x[:, :2]).sum() + prior.log_prob(out[:, :2]).sum()
                 + categorical.log_prob(k).sum())

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = models[0]
            self.add_optimizer(opts[0])

        def build(self, x, scale, k):
            loss = loss_of(self.model, x, scale, k)
            loss.backward()
            return loss

    step = Step()
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = T(rng.standard_normal((5, 3)).astype(np.float32))
        scale = T(rng.uniform(0.5, 2, (5, 2)).astype(np.float32))
        k = T(rng.integers(0, 2, 5))
        got = step(x, scale, k)
        opts[1].zero_grad()
        want = loss_of(models[1], x, scale, k)
        want.backward()
        opts[1].step()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    weight = models[0].weight.detach().numpy().copy()
    with pytest.raises(ValueError, match=r"parameter scale .* GreaterThan.*this call's values"):
        step(x, -scale, k)
    with pytest.raises(ValueError, match=r"value argument .* support"):
        step(x, scale, k + 5)
    np.testing.assert_array_equal(models[0].weight.detach().numpy(), weight)


@pytest.mark.parametrize("name, fn, good, bad", [
    ("binary_cross_entropy", lambda x, t: F.binary_cross_entropy(x, t),
     (T([0.2, 0.9]), T([0.0, 1.0])), (T([0.2, 1.5]), T([0.0, 1.0]))),
    ("bernoulli", lambda p, _: flow.bernoulli(p), (T([0.2, 0.9]), None),
     (T([0.2, -0.5]), None)),
    ("multinomial", lambda p, _: flow.multinomial(p, 1), (T([[0.2, 0.8]]), None),
     (T([[0.2, float("nan")]]), None)),
    ("normal", lambda m, s: flow.normal(m, s), (T([0.0, 1.0]), T([1.0, 2.0])),
     (T([0.0, 1.0]), T([1.0, -2.0]))),
    ("poisson", lambda r, _: flow.poisson(r), (T([1.0, 2.0]), None), (T([1.0, -2.0]), None)),
], ids=["binary_cross_entropy", "bernoulli", "multinomial", "normal", "poisson"])
def test_value_checks_run_on_every_call_of_a_plan(name, fn, good, bad):
    """binary_cross_entropy's [0, 1] range, the samplers' probabilities, normal's std and
    poisson's rates were checked on arrays outside the kernel: once, on the trace's data, so
    a plan ran later calls' invalid values into nans or draws with no error (or NumPy's
    ValueError). The kernels check them now (eager's error)."""
    graph = flow.nn.Graph.trace(fn)
    graph(*good)
    message = r"between 0 and 1|in \[0, 1\]|probability tensor|std >= 0|Poisson rate"
    with pytest.raises(RuntimeError, match=f"op {name} failed.*({message})"):
        graph(*bad)
    with pytest.raises(RuntimeError, match=message):
        fn(*bad)


@pytest.mark.parametrize("name, fn, bad", [
    ("gather", lambda x, i: x.gather(1, i), T([[0], [-1]])),
    ("scatter", lambda x, i: flow.zeros(2, 3).scatter(1, i, x[:, :1]), T([[0], [3]])),
    ("take", lambda x, i: x.take(i.reshape(-1)), T([[0], [-7]])),
    ("index_add", lambda x, i: flow.zeros(3, 3).index_add(0, i.reshape(-1), x[:2]),
     T([[0], [3]])),
    ("index_select", lambda x, i: x.index_select(1, i.reshape(-1)), T([[0], [-1]])),
], ids=["gather", "scatter", "take", "index_add", "index_select"])
def test_index_ranges_are_checked_on_every_call_of_a_plan(name, fn, bad):
    """gather/scatter/take/index_add/index_select checked their index's range on its array,
    once, at trace time: a plan wrapped a later call's -1 to the last position of gather or
    index_select (torch raises) or failed inside NumPy with a ValueError. The flat-position
    kernel (index_select: a check node) checks it now."""
    x = T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    graph = flow.nn.Graph.trace(fn)
    graph(x, T([[0], [2]]))
    with pytest.raises((RuntimeError, IndexError), match=f"{name}\\(\\): index .*out "
                                                          f"of (bounds|range)") as plan_error:
        graph(x, bad)
    with pytest.raises(plan_error.type, match="out of (bounds|range)"):
        fn(x, bad)


@pytest.mark.parametrize("fn, good, bad, error, message", [
    (lambda b: T([4, 6]) // b, T([2, 3]), T([2, 0]), RuntimeError, "ZeroDivisionError: div"),
    (lambda b: flow.remainder(T([4, 6]), b), T([2, 3]), T([0, 3]), RuntimeError,
     "ZeroDivisionError: remainder"),
    (lambda b: flow.fmod(T([4, 6]), b), T([2, 3]), T([0, 3]), RuntimeError,
     "ZeroDivisionError: fmod"),
    (lambda v: F.gaussian_nll_loss(T([1.0, 2.0]), T([1.5, 2.0]), v), T([1.0, 2.0]),
     T([-1.0, 2.0]), ValueError, "var has negative"),
    (lambda w: flow.cov(flow.arange(6.0).reshape(2, 3), fweights=w), T([1, 2, 1]),
     T([1, -2, 1]), RuntimeError, "fweights cannot be negative"),
    (lambda w: flow.cov(flow.arange(6.0).reshape(2, 3), aweights=w), T([1.0, 2.0, 1.0]),
     T([0.0, 0.0, 0.0]), RuntimeError, "weights sum to zero"),
    (lambda n: flow.segment_reduce(T([1.0, 2.0, 3.0]), "sum", lengths=n), T([1, 2]), T([1, 1]),
     RuntimeError, "Expected all rows of lengths"),
    (lambda o: flow.segment_reduce(T([1.0, 2.0, 3.0]), "sum", offsets=o), T([0, 1, 3]),
     T([0, 2, 1]), RuntimeError, "offsets must be non-decreasing"),
    (lambda q: flow.quantile(T([1.0, 2.0, 3.0]), q), T([0.5]), T([1.0001]), RuntimeError,
     r"q values must be in the range \[0, 1\]"),
], ids=["floor_divide", "remainder", "fmod", "gaussian_nll_loss", "cov_fweights",
        "cov_weight_sum", "segment_lengths", "segment_offsets", "quantile"])
def test_input_value_guards_are_checked_on_every_call_of_a_plan(fn, good, bad, error, message):
    """Integer division's zero divisor, gaussian_nll_loss's var, cov's weights and
    segment_reduce's lengths/offsets and quantile's q were checked on the trace's arrays only
    (every_example's guard): a plan divided a later call's integers by zero into 0 and ran
    negative variances and weights (and a q of 1.0001) into numbers with no error. They are
    check nodes of the plan now."""
    graph = flow.nn.Graph.trace(fn)
    np.testing.assert_allclose(graph(good).numpy(), fn(good).numpy())
    with pytest.raises(error, match=f"{message}.*checked by the compiled plan"):
        graph(bad)
    with pytest.raises(error, match=message):
        fn(bad)


EYE, ZERO, NEG = T([[1.0, 0.0], [0.0, 2.0]]), T([[0.0, 0.0], [0.0, 0.0]]), T([[-1.0, 0.0],
                                                                             [0.0, 1.0]])


@pytest.mark.parametrize("fn, bad, error, message", [
    (lambda a: flow.linalg.lu_factor(a)[0], ZERO, RuntimeError, "lu_factor: .*U.* is zero"),
    (lambda a: flow.linalg.lu_factor_ex(a, check_errors=True)[0], ZERO, RuntimeError,
     "lu_factor_ex: .*U.* is zero"),
    (lambda a: flow.linalg.inv_ex(a, check_errors=True)[0], ZERO, flow.linalg.LinAlgError,
     "inv_ex: the factorization could not be completed"),
    (lambda a: flow.linalg.solve_ex(a, T([1.0, 1.0]), check_errors=True)[0], ZERO,
     flow.linalg.LinAlgError, "solve_ex: the factorization could not be completed"),
    (lambda a: flow.linalg.cholesky_ex(a, check_errors=True)[0], NEG, flow.linalg.LinAlgError,
     "cholesky_ex: the factorization could not be completed"),
    (lambda a: flow.linalg.ldl_factor_ex(a, check_errors=True)[0], ZERO, RuntimeError,
     "ldl_factor_ex: .*D is singular"),
    (lambda a: flow.linalg.inv_ex(a)[0], ZERO, None, None),  # NaN for a failed matrix
    (lambda a: flow.linalg.cholesky_ex(a)[0], NEG, None, None),
    (lambda a: flow.cholesky_inverse(a), ZERO, flow.linalg.LinAlgError,
     "cholesky_inverse: .*diagonal element .*zero"),
], ids=["lu_factor", "lu_factor_ex", "inv_ex", "solve_ex", "cholesky_ex", "ldl_factor_ex",
        "inv_ex_nan", "cholesky_ex_nan", "cholesky_inverse"])
def test_factorization_failures_are_checked_on_every_call_of_a_plan(fn, bad, error, message):
    """lu_factor and the check_errors of lu_factor_ex/inv_ex/solve_ex/cholesky_ex/
    ldl_factor_ex read info's array, and the _ex forms chose on it whether to put NaN in a
    failed matrix's result: once, at trace time, so a plan traced on an invertible matrix gave
    a later singular (or indefinite) one's numbers with no error. They are check nodes (and
    the NaN's where, always) of the plan now."""
    graph = flow.nn.Graph.trace(fn)
    np.testing.assert_allclose(graph(EYE).numpy(), fn(EYE).numpy())
    if error is None:
        np.testing.assert_array_equal(graph(bad).numpy(), fn(bad).numpy())
        assert np.isnan(graph(bad).numpy()).all()
        return
    with pytest.raises(error, match=f"{message}.*checked by the compiled plan"):
        graph(bad)
    with pytest.raises(error, match=message):
        fn(bad)


W4 = flow.arange(8.0).reshape(4, 2)


@pytest.mark.parametrize("fn, good, bad, error, message", [
    (lambda i: F.embedding_bag(i, W4, T([0])), T([0, 1]), T([0, 4]), RuntimeError,
     r"valid range \[0, 4\)"),
    (lambda i: F.embedding(i, W4), T([0, 1]), T([0, 4]), IndexError,
     "embedding: index out of range in self"),
    (lambda i: F.embedding(i, W4.clone(), max_norm=1.0), T([0, 1]), T([0, 4]), IndexError,
     "embedding: index out of range in self"),
    (lambda t: F.multi_margin_loss(flow.arange(6.0).reshape(2, 3), t), T([0, 1]), T([0, 3]),
     RuntimeError, "multi_margin_loss: target out of range"),
    (lambda t: F.multilabel_margin_loss(flow.arange(6.0).reshape(2, 3), t),
     T([[0, -1, 0], [1, 2, -1]]), T([[0, 3, 0], [1, 2, -1]]), RuntimeError,
     "multilabel_margin_loss: target is out of range"),
    (lambda i: F.max_unpool1d(T([[[5.0]]]), i, 2), T([[[0]]]), T([[[2]]]), RuntimeError,
     "max_unpool1d: found an invalid max index"),
], ids=["embedding_bag", "embedding", "embedding_max_norm", "multi_margin_loss",
        "multilabel_margin_loss", "max_unpool1d"])
def test_a_plans_range_errors_are_the_ops_own(fn, good, bad, error, message):
    """A plan caught these out-of-range indices only in a later kernel: embedding_bag's as an
    IndexError (eager and torch: RuntimeError), the others with another op's message (gather,
    one_hot, scatter, NumPy's indexing). The plan checks them as the op's own now."""
    graph = flow.nn.Graph.trace(fn)
    graph(good)
    with pytest.raises(error, match=message) as caught:
        graph(bad)
    assert caught.type is error
    with pytest.raises(error, match=message):
        fn(bad)


@pytest.mark.parametrize("fn, bad", [
    (lambda a: flow.linalg.inv(a), ZERO),
    (lambda a: flow.linalg.solve(a, T([1.0, 1.0])), ZERO),
    (lambda a: flow.linalg.cholesky(a), NEG),
    (lambda a: flow.linalg.svdvals(a), T([[float("nan"), 0.0], [0.0, 1.0]])),
    (lambda a: flow.linalg.pinv(a), T([[float("nan"), 0.0], [0.0, 1.0]])),
    (lambda a: flow.linalg.eigvals(a), T([[float("nan"), 0.0], [0.0, 1.0]])),
], ids=["inv", "solve", "cholesky", "svdvals", "pinv", "eigvals"])
def test_a_plans_lapack_failures_raise_torchs_error_class(fn, bad):
    """The wrappers turned NumPy's LinAlgError (a ValueError) into torch's LinAlgError (a
    RuntimeError) around the op call, at trace time only: a plan raised NumPy's, which
    `except torch.linalg.LinAlgError` / `except RuntimeError` does not catch. The kernels
    raise torch's class (eig's: RuntimeError) themselves now."""
    graph = flow.nn.Graph.trace(fn)
    graph(EYE)
    with pytest.raises(RuntimeError, match="compiled plan") as caught:
        graph(bad)
    assert not isinstance(caught.value, ValueError)
    with pytest.raises(type(caught.value)):
        fn(bad)


def test_binomial_runs_in_a_plan_and_checks_each_calls_counts():
    """binomial checked an infinite count with bool(), which nn.Graph refuses inside build:
    a plan of it could not be made at all. It is a check node of the plan now."""
    def fn(count, prob):
        return flow.binomial(count, prob)
    graph = flow.nn.Graph.trace(fn)
    for count, prob in ((T([3.0, 5.0]), T([0.5, 0.5])), (T([30.0, 50.0]), T([0.2, 0.9]))):
        flow.manual_seed(1)
        got = graph(count, prob)
        flow.manual_seed(1)
        np.testing.assert_array_equal(got.numpy(), fn(count, prob).numpy())
    with pytest.raises(RuntimeError, match="infinite count.*checked by the compiled plan"):
        graph(T([float("inf"), 5.0]), T([0.5, 0.5]))


def test_lu_solve_checks_each_calls_pivots_in_a_plan():
    """lu_solve's pivots' range is checked in the permutation kernel (it was not checked at
    all: 0 and -1 wrapped to row swaps), so a plan checks each call's."""
    LU = T([[2.0, 1.0], [0.5, 3.0]])
    graph = flow.nn.Graph.trace(lambda p: flow.linalg.lu_solve(LU, p, T([[1.0], [1.0]])))
    graph(T([2, 2], dtype=flow.int32))
    with pytest.raises(RuntimeError, match="lu_solve must all be greater or equal to 1"):
        graph(T([0, 2], dtype=flow.int32))


@pytest.mark.parametrize("batched", [True, False], ids=["concatenated", "unbatched"])
def test_ctc_target_lengths_must_match_the_targets_on_every_call_of_a_plan(batched):
    """ctc_loss checked that 1-D concatenated targets hold sum(target_lengths) labels (an
    unbatched target exactly its length) on the trace's lengths only: a plan ran a later
    call's lengths that do not add up into a loss with no error."""
    lp = flow.arange(60.0).reshape(5, 2, 6).log_softmax(2)
    if batched:
        def fn(n):
            return F.ctc_loss(lp, T([1, 2, 3]), T([5, 5]), n, reduction="none")
        good, bad = T([2, 1]), T([1, 1])
    else:
        def fn(n):
            return F.ctc_loss(lp[:, 0], T([1, 2]), T([5]), n)
        good, bad = T([2]), T([1])
    graph = flow.nn.Graph.trace(fn)
    np.testing.assert_allclose(graph(good).numpy(), fn(good).numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="ctc_loss: .*target.*checked by the compiled plan"):
        graph(bad)
    with pytest.raises(RuntimeError, match="ctc_loss: "):
        fn(bad)


@pytest.mark.parametrize("fn", [
    lambda v: flow.zeros(3, dtype=flow.int8).masked_fill(T([True, False, True]), v),
    lambda v: flow.zeros(3, dtype=flow.int8).index_fill(0, T([1]), v),
    lambda v: flow.zeros(3).masked_fill(T([True, False, True]), v),
], ids=["masked_fill", "index_fill", "masked_fill_float32"])
def test_a_fill_values_range_is_checked_on_every_call_of_a_plan(fn):
    """masked_fill/index_fill checked that a 0-d value tensor fits the input's dtype on the
    trace's value only: a plan wrapped a later call's 300 into int8's 44 (and a float64 1e300
    into float32's inf) with no error, where eager and torch raise."""
    small, big = (T(5), T(300)) if fn(T(5)).dtype == flow.int8 else (T(5.0, dtype=flow.float64),
                                                                       T(1e300, dtype=flow.float64))
    graph = flow.nn.Graph.trace(fn)
    np.testing.assert_array_equal(graph(small).numpy(), fn(small).numpy())
    with pytest.raises(RuntimeError, match="cannot be converted to type"):
        graph(big)
    with pytest.raises(RuntimeError, match="cannot be converted to type"):
        fn(big)


def test_sparse_coo_tensor_checks_each_calls_indices_in_a_plan():
    """sparse_coo_tensor checked its indices against the size on the trace's only: a plan
    failed on a later call's in index_add (an IndexError, index_add's message) where eager
    raises sparse_coo_tensor's RuntimeError."""
    def fn(i):
        return flow.sparse_coo_tensor(i, T([1.0, 2.0]), (3,)).to_dense() * 2
    graph = flow.nn.Graph.trace(fn)
    graph(T([[0, 1]]))
    for bad in (T([[0, 3]]), T([[0, -1]])):
        with pytest.raises(RuntimeError, match="sparse_coo_tensor: indices out of bounds") as e:
            graph(bad)
        assert e.type is not IndexError


def test_a_view_of_an_input_is_checked_against_each_calls_layout():
    """x.view(-1) on a graph input traced contiguous: a later call's transposed input raised
    in eager (no view of that layout), while the plan's reshape copied it with no error. The
    plan checks each call's input now."""
    graph = flow.nn.Graph.trace(lambda x: x.view(-1) * 2)
    x = flow.arange(6.0).reshape(2, 3)
    for _ in range(2):
        assert graph(x).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    transposed = flow.arange(6.0).reshape(3, 2).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        transposed.view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        graph(transposed)
    assert graph(transposed.contiguous()).tolist() == (transposed.reshape(-1) * 2).tolist()


def test_a_write_through_a_reshape_of_an_input_runs_on_later_calls():
    """The input-layout check's loop variable shadowed the optimizers' param layout of the
    plan: every call after the first of a build writing into an input through a reshape
    raised 'an optimizer's param groups changed'."""
    def write(x):
        x.reshape(-1).add_(1)
        return x * 2

    graph = flow.nn.Graph.trace(write)
    for _ in range(3):
        x, want = flow.ones(2, 3), flow.ones(2, 3)
        assert graph(x).tolist() == write(want).tolist() and x.tolist() == want.tolist()


def test_contiguous_of_an_input_is_made_on_each_call_of_a_plan():
    """x.contiguous() of an input traced contiguous returned the input itself: the plan's
    view(-1) of it then refused a later transposed input, which eagerly is copied first. A
    write through it still reaches the input, as eagerly."""
    graph = flow.nn.Graph.trace(lambda x: x.contiguous().view(-1) * 2)
    graph(flow.ones(2, 3))
    transposed = flow.arange(6.0).reshape(3, 2).t()
    assert graph(transposed).tolist() == (transposed.contiguous().view(-1) * 2).tolist()

    def write(x):
        y = x.contiguous()
        y.add_(1)
        return y * 2

    graph = flow.nn.Graph.trace(write)
    for _ in range(2):
        x = flow.ones(2, 3)
        assert graph(x).tolist() == [[4.0] * 3] * 2 and x.tolist() == [[2.0] * 3] * 2


def test_masked_scatter_runs_for_any_count_of_true_in_a_plan():
    """masked_scatter's result has the input's size whatever the mask holds, but it was made
    through the positions of the True elements (value-shaped): a later call whose mask held
    another count of them raised StalePlanError. Too short a source raises as eagerly."""
    def fn(x, mask, source):
        out = x.masked_scatter(mask, source) * flow.arange(1.0, 10.0).reshape(3, 3)
        out.sum().backward()
        return out

    graph, x = flow.nn.Graph.trace(fn), flow.zeros(3, 3)
    for mask in (T([True, False, True]), T([False, True, False]), T([False] * 3)):
        source, eager_source = flow.arange(6.0, requires_grad=True), flow.arange(
            6.0, requires_grad=True)
        assert graph(x, mask, source).tolist() == fn(x, mask, eager_source).tolist()
        assert source.grad.tolist() == eager_source.grad.tolist()
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
        graph(x, T([True, True, True]), flow.arange(6.0, requires_grad=True))


@pytest.mark.parametrize("driver", ["gels", "gelsd"])
def test_lstsq_residuals_of_a_tall_matrix_inside_build(driver):
    """lstsq of a tall matrix with a driver that returns residuals (only at full rank: their
    size depends on A's values) was refused inside build (bool() of the rank test); a plan
    computes them, checking each call's size."""
    def fn(a, b):
        return tuple(flow.linalg.lstsq(a, b, driver=driver))[:2]

    graph, b = flow.nn.Graph.trace(fn), T([[1.0], [2.0], [4.0]], dtype=flow.float64)
    for a in ([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[1.0, 2.0], [0.0, 1.0], [3.0, 1.0]]):
        a = T(a, dtype=flow.float64)
        for got, want in zip(graph(a, b), fn(a, b)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(StalePlanError, match="depends on values"):
        graph(T([[1.0, 2.0], [1.0, 2.0], [2.0, 4.0]], dtype=flow.float64), b)
    compiled = flow.compile(fn)
    for a in ([[1.0, 2.0], [0.0, 1.0], [3.0, 1.0]], [[1.0, 2.0], [1.0, 2.0], [2.0, 4.0]]):
        a = T(a, dtype=flow.float64)
        assert [tuple(t.shape) for t in compiled(a, b)] == [tuple(t.shape) for t in fn(a, b)]
