"""Sparse COO arithmetic against torch: the dense form of each result, whether it is
sparse and coalesced, and the gradient reaching the values (and a dense operand)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome

import flowgrad as flow

INDICES = [[0, 1, 1, 2, 0], [2, 0, 2, 1, 2]]  # (0, 2) twice: an uncoalesced tensor
VALUES = [3.0, -4.0, 5.0, 6.0, 7.0]


def sparse(T, values=None):
    return T.sparse_coo_tensor(T.tensor(INDICES), T.tensor(VALUES) if values is None else values,
                               (3, 3))


def dense(T):
    return T.arange(9.0).reshape(3, 3) - 4


# (the sparse operand s, the dense one d) -> result
CALLS = {
    "s + s": lambda T, s, d: s + s,
    "coalesced + coalesced": lambda T, s, d: s.coalesce() + s.coalesce(),
    "s + coalesced": lambda T, s, d: s + s.coalesce(),
    "s - coalesced": lambda T, s, d: s - s.coalesce() * 0.5,
    "add alpha": lambda T, s, d: s.coalesce().add(s.coalesce(), alpha=2),
    "sub alpha": lambda T, s, d: s.sub(s.t(), alpha=3),
    "s + s.t()": lambda T, s, d: s + s.t(),
    "d + s": lambda T, s, d: d + s,
    "d - s": lambda T, s, d: d - s,
    "add(d, s)": lambda T, s, d: T.add(d, s),
    "s + d": lambda T, s, d: s + d,
    "s - d": lambda T, s, d: s - d,
    "s * s": lambda T, s, d: s * s,
    "s * s.t()": lambda T, s, d: s * s.t(),
    "s * d": lambda T, s, d: s * d,
    "d * s": lambda T, s, d: d * s,
    "mul(s, d)": lambda T, s, d: T.mul(s, d),
    "s * row": lambda T, s, d: s * d[0],
    "s * 0-d": lambda T, s, d: s * T.tensor(2.5),
    "s / 2": lambda T, s, d: s / 2,
    "s / d": lambda T, s, d: s / d,
    "s + ones(2, 2)": lambda T, s, d: s + T.ones(2, 2).to_sparse(),
    "abs": lambda T, s, d: (s * -1).abs(),
    "sqrt": lambda T, s, d: (s * s).sqrt(),
    "sin": lambda T, s, d: s.sin(),
    "tanh": lambda T, s, d: s.tanh(),
    "relu": lambda T, s, d: s.relu(),
    "sign": lambda T, s, d: s.sign(),
    "square": lambda T, s, d: s.square(),
    "pow 2": lambda T, s, d: s.pow(2),
    "pow 0.5": lambda T, s, d: s.abs().pow(0.5),
    "pow 0": lambda T, s, d: s.pow(0),
    "** 3": lambda T, s, d: s ** 3,
    "neg": lambda T, s, d: -s,
    "exp": lambda T, s, d: s.exp(),
    "softmax 1": lambda T, s, d: T.sparse.softmax(s, 1),
    "softmax 0": lambda T, s, d: T.sparse.softmax(s, 0),
    "softmax -1": lambda T, s, d: T.sparse.softmax(s.coalesce(), -1),
    "log_softmax 1": lambda T, s, d: T.sparse.log_softmax(s, 1),
    "log_softmax 0": lambda T, s, d: T.sparse.log_softmax(s, 0),
    "select 0": lambda T, s, d: s.select(0, 1),
    "select 1": lambda T, s, d: s.select(1, 2),
    "select -1": lambda T, s, d: s.select(-1, 0),
    "index_select 1": lambda T, s, d: s.index_select(1, T.tensor([2, 0, 2])),
    "index_select 0": lambda T, s, d: s.index_select(0, T.tensor([1])),
    # functional forms (the public function meets a sparse operand: its sparse form)
    "abs()": lambda T, s, d: T.abs(s * -1),
    "sqrt()": lambda T, s, d: T.sqrt(s * s),
    "relu()": lambda T, s, d: T.relu(s),
    "tanh()": lambda T, s, d: T.tanh(s),
    "sin()": lambda T, s, d: T.sin(s),
    "exp()": lambda T, s, d: T.exp(s),
    "add(s, s, alpha)": lambda T, s, d: T.add(s, s, alpha=2),
    "sub(s, s, alpha)": lambda T, s, d: T.sub(s, s.t(), alpha=3),
    "add(d, s, alpha)": lambda T, s, d: T.add(d, s, alpha=0.5),
    # shapes and products (sparse_shape.py)
    "cat 0": lambda T, s, d: T.cat([s, s.t()]),
    "cat 1": lambda T, s, d: T.cat([s, s, s], 1),
    "cat -1": lambda T, s, d: T.cat([s.coalesce(), s], -1),
    "cat sparse and dense": lambda T, s, d: T.cat([s, d]),
    "cat sizes differ": lambda T, s, d: T.cat([s, s.index_select(1, T.tensor([0]))], 0),
    "stack 0": lambda T, s, d: T.stack([s, s.t()]),
    "stack 2": lambda T, s, d: T.stack([s, s], 2),
    "unsqueeze 0": lambda T, s, d: s.unsqueeze(0),
    "unsqueeze -1": lambda T, s, d: T.unsqueeze(s, -1),
    "unsqueeze 1": lambda T, s, d: s.coalesce().unsqueeze(1),
    "permute": lambda T, s, d: s.permute(1, 0),
    "permute 3-D": lambda T, s, d: s.unsqueeze(0).permute(2, 0, 1),
    "permute repeated": lambda T, s, d: s.permute(0, 0),
    "narrow_copy 1": lambda T, s, d: s.narrow_copy(1, 1, 2),
    "narrow_copy 0": lambda T, s, d: s.coalesce().narrow_copy(0, 0, 2),
    "narrow_copy too long": lambda T, s, d: s.narrow_copy(0, 2, 3),
    "zeros_like": lambda T, s, d: T.zeros_like(s),
    "mv": lambda T, s, d: T.mv(s, d[1]),
    "s.mv": lambda T, s, d: s.mv(d[:, 2]),
    "bmm": lambda T, s, d: T.bmm(T.stack([s, s.t()]), T.stack([d, d * 2])),
    "norm": lambda T, s, d: s.norm(),
    "norm 1": lambda T, s, d: T.norm(s, 1),
}

# a sparse tensor with a dense dim: values (nnz, 2)
HYBRID = {
    "hybrid + hybrid": lambda T, s: s + s,
    "hybrid * hybrid": lambda T, s: s * s,
    "hybrid * dense": lambda T, s: s * T.arange(18.0).reshape(3, 3, 2),
    "hybrid abs": lambda T, s: (s * -1).abs(),
    "hybrid softmax sparse dim": lambda T, s: T.sparse.softmax(s, 1),
    "hybrid softmax dense dim": lambda T, s: T.sparse.softmax(s, 2),
    "hybrid select dense dim": lambda T, s: s.select(2, 1),
    "hybrid select sparse dim": lambda T, s: s.select(0, 0),
    "hybrid index_select dense dim": lambda T, s: s.index_select(2, T.tensor([1, 1, 0])),
}


def _as_dense(r):
    return r.to_dense() if getattr(r, "is_sparse", False) else r


def _same(expected, got):
    assert bool(getattr(got, "is_sparse", False)) == bool(expected.is_sparse)
    if expected.is_sparse:
        assert got.is_coalesced() == expected.is_coalesced()
        if expected.is_coalesced():
            np.testing.assert_array_equal(got.indices().numpy(), expected.indices().numpy())
    e, g = _as_dense(expected), _as_dense(got)
    assert str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
    np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(CALLS))
def test_sparse_op_as_torch(name):
    expected, torch_error = outcome(lambda: CALLS[name](torch, sparse(torch), dense(torch)))
    got, error = outcome(lambda: CALLS[name](flow, sparse(flow), dense(flow)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        _same(expected, got)


def _hybrid(T):
    return T.sparse_coo_tensor(T.tensor(INDICES), T.arange(10.0).reshape(5, 2) - 3, (3, 3, 2))


@pytest.mark.parametrize("name", list(HYBRID))
def test_sparse_op_with_dense_dim_as_torch(name):
    expected, torch_error = outcome(lambda: HYBRID[name](torch, _hybrid(torch)))
    got, error = outcome(lambda: HYBRID[name](flow, _hybrid(flow)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        _same(expected, got)


GRADS = ["s + coalesced", "s - coalesced", "d + s", "s * s", "s * d", "d * s", "pow 2",
         "softmax 1", "softmax 0", "log_softmax 1", "abs", "abs()", "add(s, s, alpha)",
         "mv", "bmm", "norm 1"]
# torch has no backward for these on sparse tensors: checked against the same computation
# on the dense form, in flowgrad
DENSE_FORMS = {
    "tanh": lambda s: s.to_dense().tanh() * (s.to_dense() != 0),
    "sqrt": lambda s: s.to_dense().abs(),
    "select 1": lambda s: s.to_dense().select(1, 2),
    "index_select 1": lambda s: s.to_dense().index_select(1, flow.tensor([2, 0, 2])),
    "cat 0": lambda s: flow.cat([s.to_dense(), s.to_dense().t()]),
    "cat 1": lambda s: flow.cat([s.to_dense()] * 3, 1),
    "stack 0": lambda s: flow.stack([s.to_dense(), s.to_dense().t()]),
    "unsqueeze 0": lambda s: s.to_dense().unsqueeze(0),
    "permute": lambda s: s.to_dense().t(),
    "narrow_copy 1": lambda s: s.to_dense().narrow(1, 1, 2),
    "norm": lambda s: s.to_dense().norm(),
}


@pytest.mark.parametrize("name", GRADS)
def test_sparse_op_gradient_as_torch(name):
    grads = {}
    for T in (torch, flow):
        values = T.tensor(VALUES, dtype=T.float64).requires_grad_()
        d = dense(T).double().requires_grad_()
        out = _as_dense(CALLS[name](T, sparse(T, values), d))
        weights = T.arange(float(out.numel()), dtype=T.float64).reshape(out.shape).cos()
        (out * weights).sum().backward()
        grads[T] = (values.grad, d.grad)
    for e, g in zip(grads[torch], grads[flow]):
        assert (e is None) == (g is None)
        if e is not None:
            np.testing.assert_allclose(_as_dense(g).numpy(), _as_dense(e).numpy(), rtol=1e-10,
                                       atol=1e-12)


@pytest.mark.parametrize("name", list(DENSE_FORMS))
def test_sparse_op_gradient_as_its_dense_form(name):
    grads = []
    for run in (lambda s: CALLS[name](flow, s, None).to_dense(), DENSE_FORMS[name]):
        values = flow.tensor(VALUES, dtype=flow.float64).requires_grad_()
        out = run(sparse(flow, values))
        weights = flow.arange(float(out.numel()), dtype=flow.float64).reshape(out.shape).cos()
        (out * weights).sum().backward()
        grads.append(values.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_sparse_errors_name_the_op_and_remedy():
    s = sparse(flow)
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use "
                                           r"add\(dense, sparse\)"):
        s + dense(flow)
    with pytest.raises(NotImplementedError, match=r"exp is not supported on flowgrad's sparse "
                                                  r"COO tensors .* call .to_dense\(\) first"):
        s.exp()
    with pytest.raises(RuntimeError, match=r"add: expected the sparse operands to have the same "
                                           r"size, got \(3, 3\) and \(2, 2\)"):
        s + flow.ones(2, 2).to_sparse()
