"""Sparse COO differences from torch found by probing (each row failed before its fix):
sparse.addmm's beta=0 and dtype rules, sparse.sum's coalescing and dim checks, the values'
gradient's flag, to_dense's dtype, t() of a 1-D tensor, tensors with no sparse dims, and the
Tensor-method forms (sum, neg, mul, div)."""
import numpy as np
import pytest
import torch

import flowgrad as flow

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")

IDX = [[0, 1, 1, 2, 0], [2, 0, 3, 1, 2]]  # (0, 2) twice
BOOLS = [True, True, False, True, True]


def both(fn):
    """fn(m) under torch and flowgrad, each result as a list of numpy arrays (or scalars)."""
    out = []
    for m in (torch, flow):
        r = fn(m)
        r = r if isinstance(r, (list, tuple)) else [r]
        out.append([x.to_dense() if getattr(x, "is_sparse", False) else x for x in r])
    return out


def as_np(x):
    return np.asarray(x.detach().numpy()) if hasattr(x, "detach") else np.asarray(x)


def _addmm(m, **kw):
    s = m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4))
    return m.sparse.addmm(m.full((3, 2), float("nan")), s, m.arange(8.0).reshape(4, 2), **kw)


def _sparse_dim0(m):
    s = m.sparse_coo_tensor(m.zeros(0, 3, dtype=m.int64),
                            m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), (2,))
    c = s.coalesce()
    return [s.to_dense(), c.values(), c.indices(), m.sparse.sum(s)]


def _scalar_to_sparse(m):
    s = m.tensor(3.0).to_sparse()
    return [s._indices(), s._values(), s.to_dense(), s._nnz(), list(s.shape)]


ROWS = [
    # beta=0 ignores mat: nan in it must not reach the result
    ("addmm_beta0_int", lambda m: _addmm(m, beta=0)),
    ("addmm_beta0_float", lambda m: _addmm(m, beta=0.0, alpha=2.0)),
    # a duplicated True counts once in the full sum (torch coalesces first)
    ("sum_bool_dups", lambda m: m.sparse.sum(m.sparse_coo_tensor(IDX, BOOLS, (3, 4)))),
    ("sum_bool_dups_dtype", lambda m: m.sparse.sum(m.sparse_coo_tensor(IDX, BOOLS, (3, 4)),
                                                   dtype=m.int64)),
    # duplicated int8 entries wrap when coalesced, before the sum
    ("sum_int8_dups", lambda m: m.sparse.sum(m.sparse_coo_tensor(
        [[0, 0]], m.tensor([100, 100], dtype=m.int8), (2,)))),
    # Tensor.sum does not coalesce (unlike sparse.sum)
    ("method_sum_bool", lambda m: m.sparse_coo_tensor(IDX, BOOLS, (3, 4)).sum()),
    ("method_sum_dim", lambda m: m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0],
                                                     (3, 4)).sum(0)),
    ("method_neg_mul_div", lambda m: [
        f(m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4)))
        for f in (lambda s: s.neg(), lambda s: s.mul(2), lambda s: s.div(2))]),
    ("t_1d", lambda m: m.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (3,)).t()),
    ("no_sparse_dims", _sparse_dim0),
    ("scalar_to_sparse", _scalar_to_sparse),
    ("zero_scalar_to_sparse", lambda m: m.tensor(0.0).to_sparse()._nnz()),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_values_as_torch(row):
    theirs, ours = both(row[1])
    assert len(theirs) == len(ours)
    for t, o in zip(theirs, ours):
        t, o = as_np(t), as_np(o)
        assert t.shape == o.shape and t.dtype == o.dtype, (t, o)
        np.testing.assert_allclose(o, t, rtol=1e-6)


def test_grad_is_not_flagged_coalesced():
    # torch's S.grad holds unique sorted indices but is_coalesced() is False
    got = []
    for m in (torch, flow):
        s = m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4), requires_grad=True)
        m.sparse.mm(s, m.arange(8.0).reshape(4, 2)).pow(2).sum().backward()
        got.append((s.grad.is_coalesced(), s.grad._indices().numpy(),
                    s.grad._values().numpy(), s.grad.to_dense().numpy()))
    assert got[0][0] == got[1][0] is False
    for t, o in zip(got[0][1:], got[1][1:]):
        np.testing.assert_allclose(o, t)


def _raises_like_torch(fn, exc, match):
    with pytest.raises(exc):
        fn(torch)
    with pytest.raises(exc, match=match):
        fn(flow)


ERRORS = [
    ("sum_repeated_dim", lambda m: m.sparse.sum(
        m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4)), (0, 0)), RuntimeError,
     r"sparse.sum: dim 0 appears multiple times"),
    ("sum_dim_out_of_range", lambda m: m.sparse.sum(
        m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4)), 2), IndexError,
     r"sparse.sum: dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"),
    ("addmm_mat_dtype", lambda m: m.sparse.addmm(
        m.ones(3, 2, dtype=m.float64),
        m.sparse_coo_tensor(IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4)), m.ones(4, 2)),
     RuntimeError, r"sparse.addmm: expected mat to have the dtype of mat1 and mat2"),
    ("to_dense_dtype", lambda m: m.sparse_coo_tensor(
        IDX, [1.0, 2.0, 3.0, 4.0, 5.0], (3, 4)).to_dense(m.float64), RuntimeError,
     r"to_dense: the dtype argument is not supported for sparse tensors"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_raises_as_torch(case):
    _raises_like_torch(*case[1:])
