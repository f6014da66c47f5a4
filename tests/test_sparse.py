"""Sparse COO tensors against torch: construction, coalesce, to_dense/to_sparse, sparse.mm and
sparse.sum with gradients for the dense operand and the values (and second order by float64
finite differences), a 2-layer graph-convolution network trained step by step beside torch,
and clear errors for what is not supported."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck

import flowgrad as flow

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning")

IDX = np.array([[0, 1, 1, 2, 0], [2, 0, 3, 1, 2]])  # (0, 2) twice: duplicates sum
IDX3 = np.array([[0, 1, 1], [1, 0, 1], [2, 2, 0]])


def sp(m, idx, v, size):
    return m.sparse_coo_tensor(idx, v, size)


CASES = [
    ("to_dense", lambda m, i, v: sp(m, i, v, (3, 4)).to_dense(), IDX, (5,)),
    ("to_dense_hybrid", lambda m, i, v: sp(m, i, v, (3, 4, 2)).to_dense(), IDX, (5, 2)),
    ("to_dense_3d", lambda m, i, v: sp(m, i, v, (2, 2, 3)).to_dense(), IDX3, (3,)),
    ("coalesce_values", lambda m, i, v: sp(m, i, v, (3, 4)).coalesce().values(), IDX, (5,)),
    ("mm", lambda m, i, v, d: m.sparse.mm(sp(m, i, v, (3, 4)), d), IDX, (5,), (4, 2)),
    ("mm_torch_mm", lambda m, i, v, d: m.mm(sp(m, i, v, (3, 4)), d), IDX, (5,), (4, 3)),
    ("spmm", lambda m, i, v, d: m.spmm(sp(m, i, v, (3, 4)), d), IDX, (5,), (4, 2)),
    ("matmul_op", lambda m, i, v, d: sp(m, i, v, (3, 4)) @ d, IDX, (5,), (4, 2)),
    ("dense_mm_sparse", lambda m, d, i, v: m.mm(d, sp(m, i, v, (3, 4))), (2, 3), IDX, (5,)),
    ("mm_scaled", lambda m, i, v, d: m.sparse.mm(sp(m, i, v, (3, 4)) * 0.5, d), IDX, (5,),
     (4, 2)),
    ("mm_transposed", lambda m, i, v, d: m.sparse.mm(sp(m, i, v, (3, 4)).t(), d), IDX, (5,),
     (3, 2)),
    ("sum_all", lambda m, i, v: m.sparse.sum(sp(m, i, v, (3, 4))), IDX, (5,)),
    ("sum_dim", lambda m, i, v: m.sparse.sum(sp(m, i, v, (3, 4)), 0).to_dense(), IDX, (5,)),
    ("sum_all_dims", lambda m, i, v: m.sparse.sum(sp(m, i, v, (3, 4)), (0, 1)), IDX, (5,)),
    ("sum_hybrid", lambda m, i, v: m.sparse.sum(sp(m, i, v, (3, 4, 2)), (0, 1)), IDX, (5, 2)),
    ("sum_dense_dim", lambda m, i, v: m.sparse.sum(sp(m, i, v, (3, 4, 2)), 2).to_dense(), IDX,
     (5, 2)),
    ("to_sparse", lambda m, x: (x * (x > 0)).to_sparse().to_dense() * 2, (3, 4)),
    ("to_sparse_values", lambda m, x: (x * (x > 0)).to_sparse().values(), (3, 4)),
    ("to_sparse_hybrid", lambda m, x: (x * (x > 0)).to_sparse(1).to_dense(), (3, 4)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_finite_differences(case):
    name, fn, *specs = case
    gradcheck(fn, *specs)


def _pair(idx, values, size, **kw):
    return (flow.sparse_coo_tensor(idx, values, size, **kw),
            torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(values), size, **kw))


def test_structure_as_torch():
    vals = np.arange(1.0, 6.0)
    ours, theirs = _pair(IDX, vals, (3, 4))
    assert ours.is_sparse and not flow.ones(1).is_sparse
    assert repr(ours.layout) == "flowgrad.sparse_coo" and repr(flow.ones(1).layout) == \
        "flowgrad.strided" and flow.strided is flow.ones(1).layout
    assert (ours.sparse_dim(), ours.dense_dim(), ours._nnz(), tuple(ours.shape)) == \
        (theirs.sparse_dim(), theirs.dense_dim(), theirs._nnz(), tuple(theirs.shape))
    assert ours.is_coalesced() == theirs.is_coalesced() is False
    for get in ("indices", "values"):
        with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
            getattr(ours, get)()
    c, tc = ours.coalesce(), theirs.coalesce()
    assert c.is_coalesced() and c._nnz() == tc._nnz() == 4
    np.testing.assert_array_equal(c.indices().numpy(), tc.indices().numpy())
    np.testing.assert_array_equal(c.values().numpy(), tc.values().numpy())
    np.testing.assert_array_equal(ours._indices().numpy(), IDX)
    assert ours.t().is_coalesced() == theirs.t().is_coalesced()
    default = flow.sparse_coo_tensor(IDX, vals)  # size from the indices
    assert tuple(default.shape) == tuple(torch.sparse_coo_tensor(torch.tensor(IDX),
                                                                 torch.tensor(vals)).shape)
    dense = np.array([[0.0, 1.5], [2.0, 0.0]])
    s, ts = flow.tensor(dense).to_sparse(), torch.tensor(dense).to_sparse()
    assert s.is_coalesced() == ts.is_coalesced()
    np.testing.assert_array_equal(s.indices().numpy(), ts.indices().numpy())
    assert repr(s).replace("flowgrad", "torch") == repr(ts)


def test_values_leaf_gets_a_sparse_grad():
    # requires_grad=True makes the values a leaf: S.grad is sparse, with S's indices
    d = np.random.default_rng(0).standard_normal((4, 2))
    ours, theirs = _pair(IDX, np.arange(1.0, 6.0), (3, 4), requires_grad=True)
    flow.sparse.mm(ours, flow.tensor(d)).sum().backward()
    torch.sparse.mm(theirs, torch.tensor(d)).sum().backward()
    assert ours.grad.is_sparse and theirs.grad.is_sparse
    np.testing.assert_allclose(ours.grad.to_dense().numpy(), theirs.grad.to_dense().numpy())


def _normalized_adjacency(m, n_nodes, edges):
    """D^-1/2 (A + I) D^-1/2 of an undirected graph, as a sparse COO tensor."""
    a = np.eye(n_nodes)
    a[edges[0], edges[1]] = a[edges[1], edges[0]] = 1.0
    d = 1 / np.sqrt(a.sum(1))
    a = a * d[:, None] * d[None, :]
    rows, cols = np.nonzero(a)
    return m.sparse_coo_tensor(m.tensor(np.stack([rows, cols])), m.tensor(a[rows, cols]),
                               (n_nodes, n_nodes))


def _gcn_losses(m, steps=6):
    rng = np.random.default_rng(3)
    n, f, h, c = 40, 8, 16, 3
    edges = rng.integers(0, n, size=(2, 120))
    adj = _normalized_adjacency(m, n, edges)
    x = m.tensor(rng.standard_normal((n, f)))
    y = m.tensor(rng.integers(0, c, size=n))
    params = [m.tensor(rng.standard_normal(s) * 0.3, requires_grad=True)
              for s in ((f, h), (h,), (h, c), (c,))]
    w1, b1, w2, b2 = params
    opt = m.optim.Adam(params, lr=0.05)
    losses = []
    for _ in range(steps):
        hidden = m.relu(m.sparse.mm(adj, x @ w1) + b1)     # layer 1: A X W1
        out = m.spmm(adj, hidden @ w2) + b2                  # layer 2: A H W2
        loss = m.nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_gcn_trains_like_torch():
    ours, theirs = _gcn_losses(flow), _gcn_losses(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)
    assert ours[-1] < ours[0]


ERRORS = [
    ("unsupported_method", lambda s: s.exp(), NotImplementedError,
     r"exp is not supported on flowgrad's sparse COO tensors .* call .to_dense\(\) first"),
    ("add", lambda s: s + 1, RuntimeError, r"add\(sparse, dense\) is not supported"),
    ("number_plus_sparse", lambda s: 1 + s, RuntimeError,
     r"add\(sparse, dense\) is not supported"),
    # a dense op given a sparse operand names itself (not the array attribute it read)
    ("dense_outer", lambda s: flow.outer(s, flow.ones(4)), NotImplementedError,
     r"^outer is not supported on flowgrad's sparse COO tensors \(size \(3, 4\)\)"),
    ("dense_div_sparse", lambda s: flow.ones(3, 4) / s, NotImplementedError,
     r"^div is not supported"),
    ("exp", lambda s: flow.exp(s), NotImplementedError, r"^exp is not supported"),
    ("addmm", lambda s: flow.addmm(flow.ones(3, 3), flow.ones(3, 4), s.t()),
     RuntimeError, r"^addmm: expected a sparse COO mat1 and a strided mat2"),
    ("mm_shapes", lambda s: flow.sparse.mm(s, flow.ones(3, 2)), RuntimeError,
     r"sparse.mm: mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x2\)"),
    ("mm_sparse_sparse", lambda s: flow.sparse.mm(s, s.t()), NotImplementedError,
     r"sparse @ sparse is not supported"),
    ("mm_dtype", lambda s: flow.sparse.mm(s, flow.ones(4, 2, dtype=flow.float64)),
     RuntimeError, r"sparse.mm: expected both operands to have the same dtype"),
    ("indices_bounds", lambda s: flow.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,)),
     RuntimeError, r"sparse_coo_tensor: indices out of bounds for size \(3,\)"),
    # (torch's check_invariants=True words: the dim and the bad index)
    ("indices_bounds_dim", lambda s: flow.sparse_coo_tensor([[0, 1], [2, 4]], [1.0, 2.0], (3, 3)),
     RuntimeError, r"for dim 1, size is 3 but found index 4"),
    ("indices_negative", lambda s: flow.sparse_coo_tensor([[0, -1]], [1.0, 2.0]),
     RuntimeError, r"found negative index -1 for dim 0"),
    ("values_count", lambda s: flow.sparse_coo_tensor([[0, 1]], [1.0], (3,)), RuntimeError,
     r"indices have 2 entries but values have shape \(1,\)"),
    ("indices_ndim", lambda s: flow.sparse_coo_tensor([0, 1], [1.0, 2.0], (3,)), RuntimeError,
     r"indices must be sparse_dim x nnz"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_input(case):
    name, fn, exc, match = case
    s = flow.sparse_coo_tensor(IDX, np.arange(1.0, 6.0, dtype=np.float32), (3, 4))
    with pytest.raises(exc, match=match):
        fn(s)


def test_check_sparse_tensor_invariants_keeps_torchs_switch():
    """torch.sparse.check_sparse_tensor_invariants (context manager, decorator, enable/disable/
    is_enabled) was missing; flowgrad's constructors check always, the switch keeps the flag."""
    import torch

    def run(m):
        c = m.sparse.check_sparse_tensor_invariants
        seen = [c.is_enabled()]
        with c():
            seen.append(c.is_enabled())
            with pytest.raises(RuntimeError, match="for dim 0, size is 3 but found index 5"):
                m.sparse_coo_tensor(m.tensor([[0, 5]]), m.tensor([1.0, 2.0]), (3,))
        seen.append(c(False)(c.is_enabled)())
        c.enable()
        seen.append(c.is_enabled())
        c.disable()
        return seen + [c.is_enabled()]
    assert run(flow) == run(torch)
