"""Sparse gradients, as torch's: `Embedding(sparse=True)` and `EmbeddingBag(sparse=True)` give
their weight a sparse COO gradient (one entry per lookup, in lookup order, the padding row's
left out, not coalesced), summed sparse into `.grad` across backward calls, dense once a dense
gradient joins it; the optimizers that take one (SGD, Adagrad, SparseAdam, LBFGS) update as
torch's, the others raise torch's error before anything is updated. Each case runs the same
code with `m` = torch and `m` = flowgrad, in float64."""
import warnings

import numpy as np
import pytest
import torch

import flowgrad as flow

ROWS, WIDTH = 7, 3


def _table(m, seed=0, rows=ROWS, width=WIDTH):
    w = np.random.default_rng(seed).standard_normal((rows, width))
    return m.tensor(w, requires_grad=True)


def _idx(m, *values):
    return m.tensor(np.array(values, dtype=np.int64))


# cases that sum two sparse gradients into one `.grad`: torch's sparse add_ merges the two
# lists of entries as if each were sorted, which merges some repeated rows and not others;
# flowgrad concatenates them. Their coalesced forms are compared.
ACCUMULATED = {"two_backwards"}


def _grads_of(m, case, coalesced=False):
    """The gradients a case leaves, as (is_sparse, indices or None, values or dense array)."""
    out = []
    for g in case(m):
        if g is None:
            out.append(None)
        elif g.is_sparse:
            g = g.coalesce() if coalesced else g
            out.append((True, g._indices().numpy().tolist(), g._values().detach().numpy()))
        else:
            out.append((False, None, g.detach().numpy()))
    return out


def _lookup(m):
    w = _table(m)
    (m.nn.functional.embedding(_idx(m, 1, 4, 1, 6), w, sparse=True) ** 2).sum().backward()
    return [w.grad]


def _lookup_2d(m):
    w = _table(m)
    m.nn.functional.embedding(_idx(m, 1, 2, 3, 1).reshape(2, 2), w, sparse=True).pow(3).sum() \
        .backward()
    return [w.grad]


def _padding(m):
    w = _table(m)
    m.nn.functional.embedding(_idx(m, 0, 2, 0, 5), w, padding_idx=0, sparse=True).sum() \
        .backward()
    return [w.grad]


def _only_padding(m):
    w = _table(m)
    m.nn.functional.embedding(_idx(m, 3, 3), w, padding_idx=3, sparse=True).sum().backward()
    return [w.grad]


def _two_backwards(m):
    w = _table(m)
    m.nn.functional.embedding(_idx(m, 1, 2), w, sparse=True).sum().backward()
    m.nn.functional.embedding(_idx(m, 2, 5), w, sparse=True).mul(3).sum().backward()
    return [w.grad]


def _tied_with_dense(m):
    w = _table(m)
    h = m.nn.functional.embedding(_idx(m, 1, 3), w, sparse=True)
    (h @ w.t()).tanh().sum().backward()  # the tied output layer's gradient is dense
    return [w.grad]


def _dense_then_sparse_backward(m):
    w = _table(m)
    (w ** 2).sum().backward()
    m.nn.functional.embedding(_idx(m, 2), w, sparse=True).sum().backward()
    return [w.grad]


def _sparse_then_dense_backward(m):
    w = _table(m)
    m.nn.functional.embedding(_idx(m, 2), w, sparse=True).sum().backward()
    (w ** 2).sum().backward()
    return [w.grad]


def _autograd_grad(m):
    w = _table(m)
    return list(m.autograd.grad((m.nn.functional.embedding(_idx(m, 5, 1), w, sparse=True)
                                 .exp()).sum(), w))


def _create_graph(m):
    w = _table(m)
    (g,) = m.autograd.grad((m.nn.functional.embedding(_idx(m, 5, 1, 5), w, sparse=True) ** 3)
                           .sum(), w, create_graph=True)
    (h,) = m.autograd.grad(g.to_dense().pow(2).sum(), w)
    return [g, h]


def _hook_sees_sparse(m):
    w = _table(m)
    seen = []
    w.register_hook(lambda g: seen.append(g.is_sparse))
    m.nn.functional.embedding(_idx(m, 1), w, sparse=True).sum().backward()
    assert seen == [True]
    return [w.grad]


def _module(m):
    emb = m.nn.Embedding(ROWS, WIDTH, sparse=True, padding_idx=2).double()
    with m.no_grad():
        emb.weight.copy_(_table(m))
    emb(_idx(m, 2, 4, 4, 1)).sigmoid().sum().backward()
    return [emb.weight.grad]


def _bag(mode, psw=False):
    def case(m):
        bag = m.nn.EmbeddingBag(ROWS, WIDTH, mode=mode, sparse=True, padding_idx=0).double()
        with m.no_grad():
            bag.weight.copy_(_table(m))
        weights = m.tensor(np.linspace(0.5, 2.0, 5)) if psw else None
        bag(_idx(m, 1, 0, 3, 3, 6), _idx(m, 0, 2), per_sample_weights=weights).pow(2).sum() \
            .backward()
        return [bag.weight.grad]
    return case


GRAD_CASES = {
    "lookup": _lookup,
    "lookup_2d": _lookup_2d,
    "padding": _padding,
    "only_padding": _only_padding,
    "two_backwards": _two_backwards,
    "tied_with_dense": _tied_with_dense,
    "dense_then_sparse_backward": _dense_then_sparse_backward,
    "sparse_then_dense_backward": _sparse_then_dense_backward,
    "autograd_grad": _autograd_grad,
    "create_graph": _create_graph,
    "hook_sees_sparse": _hook_sees_sparse,
    "module": _module,
    "bag_sum": _bag("sum"),
    "bag_mean": _bag("mean"),
    "bag_per_sample_weights": _bag("sum", psw=True),
}


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_sparse_gradient_matches_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _grads_of(torch, GRAD_CASES[name], name in ACCUMULATED)
    ours = _grads_of(flow, GRAD_CASES[name], name in ACCUMULATED)
    for a, b in zip(ours, theirs, strict=True):
        assert a[:2] == b[:2]  # layout, and the entries in torch's order
        np.testing.assert_allclose(a[2], b[2], rtol=1e-12, atol=1e-12)


def test_a_non_leaf_consumer_takes_the_dense_gradient():
    """torch hands a sparse gradient on through the ops between the lookup and the leaf (w * 1
    gets a sparse gradient, and so does w); flowgrad makes it dense for the first node that
    consumes it, as its rules read arrays: the same values, in the dense layout."""
    grads = {}
    for m in (torch, flow):
        w = _table(m)
        v = w * 1
        v.retain_grad()
        m.nn.functional.embedding(_idx(m, 1, 3), v, sparse=True).sum().backward()
        grads[m] = (v.grad.to_dense().numpy(), w.grad.to_dense().numpy())
        assert (v.grad.is_sparse, w.grad.is_sparse) == ((True, True) if m is torch else
                                                        (False, False))
    for a, b in zip(grads[flow], grads[torch]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("call", [
    lambda m, w: m.nn.functional.embedding(_idx(m, 1), w, sparse=True,
                                           scale_grad_by_freq=True).sum().backward(),
    lambda m, w: m.nn.functional.embedding_bag(_idx(m, 1, 2), w, _idx(m, 0), mode="max",
                                               sparse=True),
    lambda m, w: m.nn.utils.clip_grad_norm_([w], 1.0),
    lambda m, w: m.nn.utils.clip_grad_value_([w], 1.0),
])
def test_what_torch_refuses(call):
    errors = []
    for m in (torch, flow):
        w = _table(m)
        m.nn.functional.embedding(_idx(m, 4), w, sparse=True).sum().backward()
        with pytest.raises((RuntimeError, ValueError, NotImplementedError)) as info:
            call(m, w)
        errors.append(info.type)
    assert issubclass(errors[1], errors[0]) or errors[0] is NotImplementedError and \
        issubclass(errors[1], NotImplementedError)


OPTIMIZERS = {
    "sgd": lambda m, p: m.optim.SGD(p, lr=0.3),
    "sgd_momentum": lambda m, p: m.optim.SGD(p, lr=0.3, momentum=0.9, dampening=0.1),
    "sgd_nesterov_maximize": lambda m, p: m.optim.SGD(p, lr=0.3, momentum=0.9, nesterov=True,
                                                      maximize=True),
    "adagrad": lambda m, p: m.optim.Adagrad(p, lr=0.3, lr_decay=0.1),
    "sparse_adam": lambda m, p: m.optim.SparseAdam(p, lr=0.1),
    "sparse_adam_maximize": lambda m, p: m.optim.SparseAdam(p, lr=0.1, betas=(0.8, 0.9),
                                                            maximize=True),
    "sgd_weight_decay": lambda m, p: m.optim.SGD(p, lr=0.3, weight_decay=0.1),
    "adagrad_weight_decay": lambda m, p: m.optim.Adagrad(p, lr=0.3, weight_decay=0.1),
    "adam": lambda m, p: m.optim.Adam(p),
    "adamw": lambda m, p: m.optim.AdamW(p),
    "rmsprop": lambda m, p: m.optim.RMSprop(p),
    "adamax": lambda m, p: m.optim.Adamax(p),
    "asgd": lambda m, p: m.optim.ASGD(p),
    "rprop": lambda m, p: m.optim.Rprop(p),
    "adadelta": lambda m, p: m.optim.Adadelta(p),
    "nadam": lambda m, p: m.optim.NAdam(p),
    "radam": lambda m, p: m.optim.RAdam(p),
    "adafactor": lambda m, p: m.optim.Adafactor(p),
}


# each step's lookups; the second is masked out of the loss: its row is looked up with a zero
# gradient (row 1 on the second step, which the first step moved: SparseAdam updates it all
# the same, its moments decaying, as torch's)
LOOKUPS = [(1, 2, 3, 6), (4, 1, 5, 6), (1, 3, 3, 0)]


def _train(m, make_opt):
    w = _table(m)
    opt = make_opt(m, [w])
    mask = m.tensor(np.array([[1.0], [0.0], [1.0], [1.0]]))
    history = []
    for lookups in LOOKUPS:
        idx = _idx(m, *lookups)
        loss = (m.nn.functional.embedding(idx, w, sparse=True).tanh() * mask).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        try:
            opt.step()
        except RuntimeError as e:
            return history, str(e), w.detach().numpy()
        history.append(w.detach().numpy().copy())
    return history, None, None


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_on_sparse_gradients_matches_torch(name):
    theirs, their_error, _ = _train(torch, OPTIMIZERS[name])
    ours, our_error, left = _train(flow, OPTIMIZERS[name])
    assert our_error == their_error or our_error.startswith(their_error)
    if our_error is not None:
        np.testing.assert_array_equal(left, _table(flow).detach().numpy())  # nothing changed
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_sparse_adam_refuses_a_dense_gradient_and_lbfgs_takes_a_sparse_one():
    for m in (torch, flow):
        lin = m.nn.Linear(2, 2)
        lin(m.ones(1, 2)).sum().backward()
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            m.optim.SparseAdam(lin.parameters()).step()
    results = []
    for m in (torch, flow):
        w = _table(m)
        opt = m.optim.LBFGS([w], lr=0.5, max_iter=5)

        def closure():
            opt.zero_grad()
            loss = (m.nn.functional.embedding(_idx(m, 1, 2, 1), w, sparse=True) - 1) \
                .pow(2).sum()
            loss.backward()
            return loss
        opt.step(closure)
        results.append(w.detach().numpy())
    np.testing.assert_allclose(results[1], results[0], rtol=1e-10)


def test_zero_grad_keeps_an_empty_sparse_gradient():
    for m in (torch, flow):
        emb = m.nn.Embedding(ROWS, WIDTH, sparse=True)
        opt = m.optim.SGD(emb.parameters(), lr=0.1)
        emb(_idx(m, 1, 2)).sum().backward()
        grad = emb.weight.grad
        opt.zero_grad(set_to_none=False)
        assert emb.weight.grad is grad and grad.is_sparse and grad._nnz() == 0
        emb(_idx(m, 4)).sum().backward()
        assert emb.weight.grad._indices().tolist() == [[4]]
        emb.zero_grad(set_to_none=False)
        assert emb.weight.grad.is_sparse and emb.weight.grad._nnz() == 0


def test_a_sparse_gradient_can_be_assigned():
    for m in (torch, flow):
        w = m.zeros(3, 2, requires_grad=True)
        w.grad = m.sparse_coo_tensor([[1]], m.ones(1, 2), (3, 2))
        assert w.grad.is_sparse
        with pytest.raises(RuntimeError):
            w.grad = m.sparse_coo_tensor([[1]], m.ones(1, 2), (4, 2))


def test_graph_mode_trains_a_sparse_embedding_with_dense_gradients():
    """nn.Graph's plans keep every gradient dense (their update ops read arrays): the steps
    equal eager's sparse ones."""
    def make():
        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Embedding(ROWS, WIDTH, sparse=True),
                                   flow.nn.Linear(WIDTH, 1))
        return model, flow.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    model, opt = make()

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = model
            self.add_optimizer(opt)

        def build(self, idx):
            loss = self.model(idx).pow(2).sum()
            loss.backward()
            return loss

    step = Step()
    eager, eager_opt = make()
    for idx in ([1, 2, 1], [3, 1, 5], [2, 2, 6]):
        ours = step(flow.tensor(idx)).item()
        loss = eager(flow.tensor(idx)).pow(2).sum()
        eager_opt.zero_grad()
        loss.backward()
        assert eager[0].weight.grad.is_sparse
        eager_opt.step()
        assert ours == pytest.approx(loss.item(), rel=1e-6)
    np.testing.assert_allclose(model[0].weight.detach().numpy(), eager[0].weight.detach().numpy(),
                               rtol=1e-6)
