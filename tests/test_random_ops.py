"""Random numbers are drawn inside ops, from a Generator passed as an attribute: dropout (all
variants), rrelu and the samplers give the numbers eager flowgrad gave before they became ops
(literal values recorded from that code with flow.manual_seed(0)); no op gets a NumPy array
as an attribute; a recorded op call replayed draws fresh numbers, and a seed reproduces them.
"""
import numpy as np
import pytest

import flowgrad as flow
import flowgrad.nn.functional as F
from flowgrad.autograd import interpreter
from flowgrad.autograd.interpreter import AutogradInterpreter, using_interpreter


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _grad_of(fn, shape, **kw):
    """fn's output on fixed values of `shape`, and the gradient of 3 * sum(output)."""
    x = (flow.arange(1, 1 + _numel(shape), dtype=flow.float32) / 7).reshape(shape)
    x.requires_grad_(True)
    y = fn(x, **kw)
    y.backward(flow.ones_like(y) * 3)
    return [y, x.grad]


def _inplace_dropout():
    x = flow.ones(8)
    F.dropout(x, 0.4, inplace=True)
    return [x]


def _sequence():  # the order of the draws across ops
    a = flow.rand(3)
    b = F.dropout(flow.ones(6), 0.5)
    c = flow.randn(2)
    d = flow.randint(0, 100, (3,))
    return [a, b, c, d]


# name -> (the op that must draw, the calls)
SAMPLERS = {
    "rand": ("rand", lambda: [flow.rand(5)]),
    "rand_f64": ("rand", lambda: [flow.rand(2, 3, dtype=flow.float64)]),
    "rand_generator": ("rand", lambda: [flow.rand(4, generator=flow.Generator().manual_seed(3))]),
    "randn": ("randn", lambda: [flow.randn(5)]),
    "randn_f64": ("randn", lambda: [flow.randn(size=(3,), dtype=flow.float64)]),
    "randint": ("randint", lambda: [flow.randint(0, 10, (6,))]),
    "randint_int32": ("randint", lambda: [flow.randint(-5, 5, (4,), dtype=flow.int32)]),
    "randint_high_only": ("randint", lambda: [flow.randint(7, (5,))]),
    "rand_like": ("rand", lambda: [flow.rand_like(flow.zeros(4))]),
    "randn_like": ("randn", lambda: [flow.randn_like(flow.zeros(4, dtype=flow.float64))]),
    "randint_like": ("randint",
                     lambda: [flow.randint_like(flow.zeros(4, dtype=flow.int64), 3, 9)]),
    "randperm": ("randperm", lambda: [flow.randperm(7)]),
    "normal_scalars": ("normal", lambda: [flow.normal(2.0, 3.0, size=(4,))]),
    "normal_mean_tensor": ("normal", lambda: [flow.normal(flow.tensor([0.0, 1.0, 2.0]), 1.0)]),
    "normal_std_tensor": ("normal", lambda: [flow.normal(0.5, flow.tensor([1.0, 2.0]))]),
    "normal_both_tensors": ("normal", lambda: [flow.normal(flow.tensor([0.0, 10.0]),
                                                           flow.tensor([[1.0], [0.1]]))]),
    "bernoulli": ("bernoulli",
                  lambda: [flow.bernoulli(flow.tensor([0.2, 0.5, 0.9, 0.5, 0.1]))]),
    "bernoulli_p": ("bernoulli", lambda: [flow.bernoulli(flow.zeros(6), p=0.5)]),
    "multinomial": ("multinomial",
                    lambda: [flow.multinomial(flow.tensor([1.0, 2.0, 3.0, 4.0]), 3)]),
    "multinomial_replacement": ("multinomial", lambda: [flow.multinomial(
        flow.tensor([[1.0, 2.0, 3.0], [5.0, 0.0, 1.0]]), 5, replacement=True)]),
}

DROPOUTS = {
    "dropout": ("dropout", lambda: _grad_of(F.dropout, (10,), p=0.5)),
    "dropout_p01": ("dropout", lambda: _grad_of(F.dropout, (3, 4), p=0.1)),
    "dropout1d": ("dropout", lambda: _grad_of(F.dropout1d, (2, 3, 4), p=0.5)),
    "dropout1d_unbatched": ("dropout", lambda: _grad_of(F.dropout1d, (3, 4), p=0.5)),
    "dropout2d": ("dropout", lambda: _grad_of(F.dropout2d, (2, 3, 2, 2), p=0.5)),
    "dropout3d": ("dropout", lambda: _grad_of(F.dropout3d, (2, 2, 1, 2, 2), p=0.5)),
    "alpha_dropout": ("dropout", lambda: _grad_of(F.alpha_dropout, (8,), p=0.3,
                                                  training=True)),
    "feature_alpha_dropout": ("dropout", lambda: _grad_of(F.feature_alpha_dropout, (2, 3, 2),
                                                          p=0.3, training=True)),
    "dropout_inplace": ("dropout", _inplace_dropout),
    "dropout_module": ("dropout", lambda: [flow.nn.Dropout(0.25)(flow.ones(8))]),
    "dropout2d_module": ("dropout", lambda: [flow.nn.Dropout2d(0.5)(flow.ones(2, 4, 1, 1))]),
    "rrelu": ("rrelu", lambda: _grad_of(lambda x: F.rrelu(x - 1, 0.1, 0.3, training=True),
                                        (6,))),
    "rrelu_generator": ("rrelu", lambda: [F.rrelu(-flow.ones(3), training=True,
                                                  generator=flow.Generator().manual_seed(5))]),
    "sequence": ("dropout", _sequence),
}

# Recorded once from the code before random draws became ops (same seed, same calls):
# (dtype, shape, flat values); floats in the shortest form that reads back exactly.
EXPECTED = {
    'rand': [
        ('float32', (5,), [
            0.6369617, 0.26978672, 0.040973525, 0.016527636, 0.8132702
        ]),
    ],
    'rand_f64': [
        ('float64', (2, 3), [
            0.6369616873214543, 0.2697867137638703, 0.04097352393619469, 0.016527635528529094,
            0.8132702392002724, 0.9127555772777217
        ]),
    ],
    'rand_generator': [
        ('float32', (4,), [
            0.08564917, 0.2368105, 0.8012745, 0.582162
        ]),
    ],
    'randn': [
        ('float32', (5,), [
            0.12573022, -0.13210486, 0.64042264, 0.104900114, -0.5356694
        ]),
    ],
    'randn_f64': [
        ('float64', (3,), [
            0.1257302210933933, -0.1321048632913019, 0.6404226504432821
        ]),
    ],
    'randint': [
        ('int64', (6,), [
            8, 6, 5, 2, 3, 0
        ]),
    ],
    'randint_int32': [
        ('int32', (4,), [
            3, 1, 0, -3
        ]),
    ],
    'randint_high_only': [
        ('int64', (5,), [
            5, 4, 3, 1, 2
        ]),
    ],
    'rand_like': [
        ('float32', (4,), [
            0.6369617, 0.26978672, 0.040973525, 0.016527636
        ]),
    ],
    'randn_like': [
        ('float64', (4,), [
            0.1257302210933933, -0.1321048632913019, 0.6404226504432821, 0.10490011715303971
        ]),
    ],
    'randint_like': [
        ('int64', (4,), [
            8, 6, 6, 4
        ]),
    ],
    'randperm': [
        ('int64', (7,), [
            4, 0, 5, 3, 2, 6, 1  # torch's (randperm draws from torch's MT19937 stream)
        ]),
    ],
    'normal_scalars': [
        ('float32', (4,), [
            2.3771906, 1.6036854, 3.921268, 2.3147004
        ]),
    ],
    'normal_mean_tensor': [
        ('float32', (3,), [
            0.12573022, 0.8678951, 2.6404226
        ]),
    ],
    'normal_std_tensor': [
        ('float32', (2,), [
            0.6257302, 0.23579027
        ]),
    ],
    'normal_both_tensors': [
        ('float32', (2, 2), [
            0.12573022, 9.867895, 0.06404226, 10.01049
        ]),
    ],
    'bernoulli': [
        ('float32', (5,), [
            0.0, 1.0, 1.0, 1.0, 0.0
        ]),
    ],
    'bernoulli_p': [
        ('float32', (6,), [
            0.0, 1.0, 1.0, 1.0, 0.0, 0.0
        ]),
    ],
    'multinomial': [
        ('int64', (3,), [
            2, 1, 3  # torch's (weights over Exp(1) draws from torch's MT19937 stream)
        ]),
    ],
    'multinomial_replacement': [
        ('int64', (2, 5), [
            2, 2, 1, 2, 2, 0, 0, 0, 0, 0  # torch's (drawn from torch's MT19937 stream)
        ]),
    ],
    'dropout': [
        ('float32', (10,), [
            0.2857143, 0.0, 0.0, 0.0, 1.4285715, 1.7142857, 2.0, 2.2857144, 2.5714285, 2.857143
        ]),
        ('float32', (10,), [
            6.0, 0.0, 0.0, 0.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0
        ]),
    ],
    'dropout_p01': [
        ('float32', (3, 4), [
            0.15873018, 0.31746036, 0.0, 0.0, 0.79365087, 0.952381, 1.1111112, 1.2698414,
            1.4285715, 1.5873017, 1.7460318, 0.0
        ]),
        ('float32', (3, 4), [
            3.3333335, 3.3333335, 0.0, 0.0, 3.3333335, 3.3333335, 3.3333335, 3.3333335, 3.3333335,
            3.3333335, 3.3333335, 0.0
        ]),
    ],
    'dropout1d': [
        ('float32', (2, 3, 4), [
            0.2857143, 0.5714286, 0.85714287, 1.1428572, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 4.857143, 5.142857, 5.428571, 5.714286, 6.0, 6.285714, 6.571429,
            6.857143
        ]),
        ('float32', (2, 3, 4), [
            6.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0,
            6.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0
        ]),
    ],
    'dropout1d_unbatched': [
        ('float32', (3, 4), [
            0.2857143, 0.5714286, 0.85714287, 1.1428572, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        ]),
        ('float32', (3, 4), [
            6.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        ]),
    ],
    'dropout2d': [
        ('float32', (2, 3, 2, 2), [
            0.2857143, 0.5714286, 0.85714287, 1.1428572, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0, 4.857143, 5.142857, 5.428571, 5.714286, 6.0, 6.285714, 6.571429,
            6.857143
        ]),
        ('float32', (2, 3, 2, 2), [
            6.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.0,
            6.0, 6.0, 6.0, 6.0, 6.0, 6.0, 6.0
        ]),
    ],
    'dropout3d': [
        ('float32', (2, 2, 1, 2, 2), [
            0.2857143, 0.5714286, 0.85714287, 1.1428572, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            0.0, 0.0, 0.0, 0.0
        ]),
        ('float32', (2, 2, 1, 2, 2), [
            6.0, 6.0, 6.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        ]),
    ],
    'alpha_dropout': [
        ('float32', (8,), [
            0.5770853, -1.0595483, -1.0595483, -1.0595483, 1.0690582, 1.1920514, 1.3150446,
            1.438038
        ]),
        ('float32', (8,), [
            2.5828578, 0.0, 0.0, 0.0, 2.5828578, 2.5828578, 2.5828578, 2.5828578
        ]),
    ],
    'feature_alpha_dropout': [
        ('float32', (2, 3, 2), [
            0.5770853, 0.70007855, -1.0595483, -1.0595483, -1.0595483, -1.0595483, -1.0595483,
            -1.0595483, 1.5610311, 1.6840243, 1.8070176, 1.9300108
        ]),
        ('float32', (2, 3, 2), [
            2.5828578, 2.5828578, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5828578, 2.5828578, 2.5828578,
            2.5828578
        ]),
    ],
    'dropout_inplace': [
        ('float32', (8,), [
            1.6666666, 0.0, 0.0, 0.0, 1.6666666, 1.6666666, 1.6666666, 1.6666666
        ]),
    ],
    'dropout_module': [
        ('float32', (8,), [
            1.3333334, 1.3333334, 0.0, 0.0, 1.3333334, 1.3333334, 1.3333334, 1.3333334
        ]),
    ],
    'dropout2d_module': [
        ('float32', (2, 4, 1, 1), [
            2.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0
        ]),
    ],
    'rrelu': [
        ('float32', (6,), [
            -0.19490771, -0.10996953, -0.06182554, -0.044273794, -0.075044006, -0.04036444
        ]),
        ('float32', (6,), [
            0.682177, 0.461872, 0.3245841, 0.3099166, 0.7879621, 0.8476533
        ]),
    ],
    'rrelu_generator': [
        ('float32', (3,), [
            -0.29270893, -0.29332098, -0.2323595
        ]),
    ],
    'sequence': [
        ('float32', (3,), [
            0.6369617, 0.26978672, 0.040973525
        ]),
        ('float32', (6,), [
            0.0, 2.0, 2.0, 2.0, 2.0, 2.0
        ]),
        ('float32', (2,), [
            -1.2654215, -0.62327445
        ]),
        ('int64', (3,), [
            67, 0, 39
        ]),
    ],
}


@pytest.mark.parametrize("name", list(SAMPLERS) + list(DROPOUTS))
def test_seeded_values_match_the_eager_draws_before(name):
    _, calls = {**SAMPLERS, **DROPOUTS}[name]
    flow.manual_seed(0)
    outs = calls()
    assert len(outs) == len(EXPECTED[name])
    for out, (dtype, shape, values) in zip(outs, EXPECTED[name]):
        got = out.detach().numpy()
        assert got.dtype.name == dtype and got.shape == shape
        np.testing.assert_array_equal(got, np.array(values, dtype).reshape(shape))


def _arrays_in(value):
    """The NumPy arrays anywhere in an attribute (tuples, lists, dicts, nested)."""
    stack, found = [value], []
    while stack:
        v = stack.pop()
        if isinstance(v, np.ndarray):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return found


class NoArrayAttributes:
    """An interpreter that refuses any op call with a NumPy array among its attributes (a
    tracer would freeze it), and notes the ops called."""

    seen = []

    @classmethod
    def apply(cls, op, inputs, attrs):
        bad = [k for k, v in attrs.items() if _arrays_in(v)]
        assert not bad, f"op {op.name} got NumPy arrays as attributes {bad}"
        cls.seen.append(op.name)
        return AutogradInterpreter.apply(op, inputs, attrs)


def _embedding_forward_backward():
    w = flow.randn(5, 3, requires_grad=True)
    idx = flow.tensor([[1, 4], [1, 0]])
    out = F.embedding(idx, w, padding_idx=0, scale_grad_by_freq=True)
    (out * out).sum().backward()
    return [out, w.grad]


def _embedding_bag_forward_backward(mode, two_d=False):
    w = flow.randn(5, 3, requires_grad=True)
    if two_d:
        out = F.embedding_bag(flow.tensor([[1, 4], [2, 0]]), w, mode=mode, padding_idx=0)
    else:
        out = F.embedding_bag(flow.tensor([0, 2, 1, 3, 3, 1]), w, flow.tensor([0, 2, 2, 5]),
                              mode=mode, per_sample_weights=flow.rand(6) if mode == "sum"
                              else None)
    (out * out).sum().backward()
    return [out, w.grad]


EMBEDDINGS = {
    "embedding": ("embedding_backward", _embedding_forward_backward),
    "embedding_bag_sum": ("embedding_bag_layout", lambda: _embedding_bag_forward_backward("sum")),
    "embedding_bag_max": ("embedding_bag_layout", lambda: _embedding_bag_forward_backward("max")),
    "embedding_bag_mean_2d": ("embedding_bag_layout",
                              lambda: _embedding_bag_forward_backward("mean", True)),
}


@pytest.mark.parametrize("name", list(SAMPLERS) + list(DROPOUTS) + list(EMBEDDINGS))
def test_no_op_gets_numpy_arrays_as_attributes(name):
    op_name, calls = {**SAMPLERS, **DROPOUTS, **EMBEDDINGS}[name]
    NoArrayAttributes.seen = []
    with interpreter.using_interpreter(NoArrayAttributes):
        outs = calls()
    assert op_name in NoArrayAttributes.seen  # the draw (or the backward) went through an op
    assert all(o is not None for o in outs)


def test_embedding_double_backward_without_array_attributes():
    import torch

    def second(m, w, idx):
        out = m.nn.functional.embedding(idx, w, padding_idx=3)
        (g,) = m.autograd.grad((out ** 3).sum(), w, create_graph=True)
        return m.autograd.grad((g * g).sum(), w)[0]

    w = np.linspace(-1, 1, 8).reshape(4, 2)
    idx = [2, 2, 0, 3]
    expected = second(torch, torch.tensor(w, requires_grad=True), torch.tensor(idx))
    with interpreter.using_interpreter(NoArrayAttributes):
        got = second(flow, flow.tensor(w, requires_grad=True), flow.tensor(idx))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)


class Recorder:
    """Records each op call (op, inputs, attrs) as a tracer would, running it eagerly."""

    def __init__(self):
        self.calls = []

    def apply(self, op, inputs, attrs):
        self.calls.append((op, inputs, attrs))
        return AutogradInterpreter.apply(op, inputs, attrs)


def _record(fn):
    rec = Recorder()
    with using_interpreter(rec):
        out = fn()
    return out, rec.calls


@pytest.mark.parametrize("name,fn", [
    ("dropout", lambda x: F.dropout(x, 0.5)),
    ("dropout", lambda x: F.dropout2d(x.reshape(4, 5, 5, 4), 0.5)),
    ("dropout", lambda x: F.alpha_dropout(x, 0.5, training=True)),
    ("rrelu", lambda x: F.rrelu(x - 0.5, training=True)),
    ("rand", lambda x: flow.rand(400)),
    ("randn", lambda x: flow.randn_like(x)),
    ("randperm", lambda x: flow.randperm(400)),
    ("bernoulli", lambda x: flow.bernoulli(x)),
])
def test_replayed_op_draws_fresh_numbers_and_a_seed_reproduces_them(name, fn):
    x = flow.rand(400)
    flow.manual_seed(7)
    first, calls = _record(lambda: fn(x))
    (op, inputs, attrs), = [c for c in calls if c[0].name == name]
    replayed = [op(*inputs, **attrs) for _ in range(2)]  # the same op call, as a replay would
    assert not np.array_equal(replayed[0].numpy(), replayed[1].numpy())
    assert not np.array_equal(first.numpy(), replayed[0].numpy())
    flow.manual_seed(7)
    again = op(*inputs, **attrs)
    if name in ("rand", "randn", "randperm", "bernoulli"):  # the op is the whole call
        np.testing.assert_array_equal(again.numpy(), first.numpy())
    else:
        flow.manual_seed(7)
        np.testing.assert_array_equal(fn(x).numpy(), first.numpy())


def test_dropout_twice_draws_different_masks_and_a_seed_reproduces_them():
    x = flow.ones(1000, requires_grad=True)
    flow.manual_seed(3)
    a, b = F.dropout(x, 0.5), F.dropout(x, 0.5)
    assert not np.array_equal(a.detach().numpy(), b.detach().numpy())
    (a + 2 * b).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(),
                                  a.detach().numpy() + 2 * b.detach().numpy())  # x is ones
    flow.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(x, 0.5).detach().numpy(), a.detach().numpy())
    np.testing.assert_array_equal(F.dropout(x, 0.5).detach().numpy(), b.detach().numpy())
    m = flow.nn.Dropout(0.5)
    assert not np.array_equal(m(flow.ones(100)).numpy(), m(flow.ones(100)).numpy())


def test_random_ops_take_the_generator_object_as_their_attribute():
    g = flow.Generator().manual_seed(11)
    _, calls = _record(lambda: (flow.rand(3, generator=g), flow.randn(2), F.dropout(
        flow.ones(4), 0.5), F.rrelu(-flow.ones(2), training=True, generator=g)))
    gens = {c[0].name: c[2]["generator"] for c in calls if "generator" in c[2]}
    assert gens == {"rand": g, "randn": flow.random.default_generator,
                    "dropout": flow.random.default_generator, "rrelu": g}
    assert all(type(v) is flow.random.Generator for v in gens.values())


def test_random_ops_are_not_differentiable_but_dropout_and_rrelu_are():
    from flowgrad.ops import REGISTRY

    for name in ("rand", "randn", "randint", "randperm", "multinomial"):
        assert not REGISTRY[name].differentiable and REGISTRY[name].backward is None, name
    # (normal's mean and std, bernoulli's and poisson's input: torch's zero gradients)
    for name in ("dropout", "rrelu", "embedding", "embedding_backward", "normal", "bernoulli",
                 "poisson"):
        assert REGISTRY[name].backward is not None, name
    x = flow.rand(50, requires_grad=True)
    assert flow.bernoulli(x).requires_grad is True
    assert F.dropout(x, 0.5).grad_fn.name() == "MulBackward0"  # (torch's CPU dropout: a product)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("shape", "n", "replacement"), [
    ((8,), 3, False), ((8,), 8, False), ((8,), 1, False), ((8,), 1, True), ((3, 5), 2, False),
    ((2, 6), 1, True)])
def test_multinomial_without_replacement_and_one_draw_give_torchs_indices(dtype, shape, n,
                                                                          replacement):
    """torch draws these from its CPU stream as q ~ Exp(1) per weight (-log1p(-u), u a 53-bit
    double) and takes the n largest weights / q: flowgrad gives its indices and leaves the
    stream where torch's is (flowgrad's Gumbel draws from its own stream gave others)."""
    import torch

    w = np.random.default_rng(5).random(shape) ** 2
    got, want = [], []
    for m, out in ((flow, got), (torch, want)):
        m.manual_seed(436)
        out.append(m.multinomial(m.tensor(w, dtype=getattr(m, dtype)), n, replacement).tolist())
        g = m.Generator().manual_seed(7)
        out.append(m.multinomial(m.tensor(w, dtype=getattr(m, dtype)), n, replacement,
                                 generator=g).tolist())
        out.append(m.randperm(6).tolist())
        m.manual_seed(3)
        out.append(list(m.utils.data.WeightedRandomSampler(w.ravel()[:5].tolist(), 4,
                                                           replacement=False)))
    assert got == want


def test_multinomial_fills_a_transposed_inputs_draws_in_memory_order_as_torch():
    """torch's Exp(1) draws go into empty_like(weights): for a transposed (column-major)
    input they fill its columns first; a slice or an expand keeps the row-major order."""
    import torch

    w = np.random.default_rng(0).random((5, 3))
    got, want = [], []
    for m, out in ((flow, got), (torch, want)):
        for make in (lambda: m.tensor(w).T, lambda: m.tensor(w)[:, ::2].T,
                     lambda: m.tensor(w[0]).expand(4, 3), lambda: m.tensor(w)[::2]):
            m.manual_seed(1)
            out.append(m.multinomial(make(), 2).tolist())
    assert got == want
