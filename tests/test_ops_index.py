"""Indexing ops (issue 3): getitem/setitem with every index form, gather/scatter family,
index_*, take, masks, sort/topk/unique/searchsorted, against torch (forward and backward)
and by float64 finite differences to second order; bad arguments raise and write nothing."""
import numpy as np
import pytest
import torch
from helpers import check, gradcheck, op_table_tests

import flowgrad as flow

I = np.array  # noqa: E741 - short for index arrays in the tables
ROWS = I([2, 0, 2], dtype=np.int64)
COLS = I([1, 3, 0], dtype=np.int64)
MASK = I([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
G_IDX = I([[0, 2], [1, 1], [3, 0]], dtype=np.int64)      # gather along dim 1 of (3, 4)
S_IDX = I([[0, 2], [1, 3], [3, 0]], dtype=np.int64)      # unique per row (scatter)
R_IDX = I([[0, 0, 2], [1, 1, 1]], dtype=np.int64)        # repeats (scatter_reduce dim 1)


def setitem(x, index, value):
    y = x * 1  # a non-leaf copy, so the in-place write is recorded
    y[index] = value
    return y


def idx(m, a):
    return a if isinstance(a, (torch.Tensor, flow.Tensor)) else m.tensor(a)


CASES = [
    # getitem: basic forms (views)
    ("get_int", lambda m, x: x[1], (3, 4)),
    ("get_neg_int", lambda m, x: x[-1, -2], (3, 4)),
    ("get_slice_step", lambda m, x: x[::2, 1::2], (3, 4)),
    ("get_none_ellipsis", lambda m, x: x[None, ..., 1, None], (2, 3, 4)),
    ("get_ellipsis_mid", lambda m, x: x[0, ..., 1:], (2, 3, 4)),
    # getitem: advanced forms
    ("get_tensor", lambda m, x, i: x[i], (3, 4), ROWS),
    ("get_tensor_2d", lambda m, x, i: x[i], (3, 4), I([[0, 1], [2, 2]], dtype=np.int64)),
    ("get_two_tensors", lambda m, x, i, j: x[i, j], (3, 4), ROWS, COLS),
    ("get_tensor_dim1", lambda m, x, j: x[:, j], (3, 4), COLS),
    ("get_separated", lambda m, x, i, j: x[i, :, j], (3, 2, 4), ROWS, COLS),
    ("get_adjacent_mid", lambda m, x, i, j: x[:, i, j], (2, 3, 4), ROWS, COLS),
    ("get_broadcast_idx", lambda m, x, i, j: x[i[:, None], j], (3, 4), ROWS, COLS),
    ("get_list", lambda m, x: x[[0, 2]], (3, 4)),
    ("get_lists", lambda m, x: x[[0, 2], [1, 1]], (3, 4)),
    ("get_list_slice", lambda m, x: x[1:, [3, 0, 3]], (3, 4)),
    ("get_ellipsis_list", lambda m, x: x[..., [1, 0]], (2, 3, 4)),
    ("get_none_tensor", lambda m, x, i: x[None, i, 1:], (3, 4), ROWS),
    ("get_int_tensor_sep", lambda m, x, j: x[1, :, j], (3, 2, 4), COLS),
    ("get_mask", lambda m, x, k: x[k], (3, 4), MASK),
    ("get_mask_row", lambda m, x, k: x[k], (3, 4), I([True, False, True])),
    ("get_mask_cmp", lambda m, x: x[x > 0], (3, 4)),
    ("get_mask_dim1", lambda m, x, k: x[:, k], (3, 4), I([True, False, True, True])),
    ("get_0d_tensor", lambda m, x: x[m.tensor(1)], (3, 4)),
    # setitem (values broadcast; values and target may require grad)
    ("set_int", lambda m, x, v: setitem(x, 1, v), (3, 4), (4,)),
    ("set_scalar", lambda m, x: setitem(x, (slice(None), 0), 2.5), (3, 4)),
    ("set_slice_bcast", lambda m, x, v: setitem(x, (slice(0, 3, 2), slice(1, None)), v),
     (3, 4), (1, 3)),
    ("set_tensor", lambda m, x, i, v: setitem(x, i[:2], v), (3, 4), ROWS, (1, 4)),
    ("set_mask", lambda m, x, v: setitem(x, x > 0, v), (3, 4), (1,)),
    ("set_two_tensors", lambda m, x, i, j, v: setitem(x, (i[1:], j[1:]), v), (3, 4), ROWS, COLS,
     (2,)),
    ("set_separated", lambda m, x, i, j, v: setitem(x, (i[1:], slice(None), j[1:]), v),
     (3, 2, 4), ROWS, COLS, (2, 1)),
    ("set_lead_ones", lambda m, x, v: setitem(x, 0, v), (3, 4), (1, 4)),
    ("set_ellipsis_none", lambda m, x, v: setitem(x, (Ellipsis, None, 2), v), (2, 3, 4), (2, 1, 1)),
    # gather / scatter family
    ("gather", lambda m, x, i: m.gather(x, 1, idx(m, i)), (3, 4), G_IDX),
    ("gather_dim0", lambda m, x, i: x.gather(0, idx(m, i)), (3, 4), I([[2, 0, 1, 1]])),
    ("gather_smaller", lambda m, x, i: x.gather(1, idx(m, i)), (3, 4), G_IDX[:2, :1]),
    ("take_along_dim", lambda m, x, i: m.take_along_dim(x, idx(m, i), 1), (3, 4), G_IDX),
    ("take", lambda m, x: m.take(x, m.tensor([[0, 11], [-1, 5]])), (3, 4)),
    ("scatter", lambda m, x, s, i: x.scatter(1, idx(m, i), s), (3, 4), (3, 2), S_IDX),
    ("scatter_value", lambda m, x, i: m.scatter(x, 1, idx(m, i), 1.5), (3, 4), S_IDX),
    ("scatter_add", lambda m, x, s, i: x.scatter_add(1, idx(m, i), s), (3, 4), (2, 3), R_IDX),
    ("scatter_add_dim0", lambda m, x, s: m.scatter_add(x, 0, m.tensor([[0, 0, 2, 0]]), s),
     (3, 4), (1, 4)),
    ("index_select", lambda m, x: x.index_select(1, m.tensor([3, 0, 3])), (3, 4)),
    ("index_add", lambda m, x, s: x.index_add(1, m.tensor([0, 2, 0]), s, alpha=2.0), (3, 4),
     (3, 3)),
    ("index_copy", lambda m, x, s: m.index_copy(x, 0, m.tensor([2, 0]), s), (3, 4), (2, 4)),
    ("index_fill", lambda m, x: x.index_fill(1, m.tensor([1, 3]), -2.0), (3, 4)),
    ("index_put", lambda m, x, v: x.index_put((m.tensor([0, 2]), m.tensor([1, 1])), v),
     (3, 4), (2,)),
    ("index_put_acc", lambda m, x, v: m.index_put(x, (m.tensor([0, 0, 2]),), v, True),
     (3, 4), (1, 4)),
    ("masked_select", lambda m, x, k: m.masked_select(x, k), (3, 4), MASK),
    ("masked_select_bcast", lambda m, x: x.masked_select(m.tensor([True, False, True, True])),
     (3, 4)),
    ("masked_scatter", lambda m, x, s, k: x.masked_scatter(k, s), (3, 4), (7,),
     MASK),
    ("masked_fill", lambda m, x, k: x.masked_fill(k, 0.5), (3, 4), MASK),
    ("masked_fill_tensor", lambda m, x, v: x.masked_fill(x > 0, v), (3, 4), ()),
    # sorting
    ("sort", lambda m, x: m.sort(x, 1), (3, 4)),
    ("sort_desc", lambda m, x: x.sort(dim=0, descending=True), (3, 4)),
    ("argsort_values", lambda m, x: x.gather(1, x.argsort(1, descending=True)), (3, 4)),
    ("msort", lambda m, x: m.msort(x), (3, 4)),
    ("topk", lambda m, x: m.topk(x, 2), (3, 4)),
    ("topk_small", lambda m, x: x.topk(2, dim=0, largest=False), (3, 4)),
    ("kthvalue", lambda m, x: m.kthvalue(x, 2, 1), (3, 4)),
    ("kthvalue_keep", lambda m, x: x.kthvalue(3, 0, keepdim=True), (3, 4)),
]


test_against_torch, test_finite_differences = op_table_tests(CASES)


# ---- scatter_reduce: every reduction, with and without self -------------------------------------
REDUCE = [(r, s) for r in ("sum", "prod", "mean", "amax", "amin") for s in (True, False)]


@pytest.mark.parametrize("reduce,include_self", REDUCE)
def test_scatter_reduce(reduce, include_self):
    def fn(m, x, s, i):
        return x.scatter_reduce(1, idx(m, i), s, reduce, include_self=include_self)
    check(fn, (2, 4), (2, 3), R_IDX)
    gradcheck(fn, (2, 4), (2, 3), R_IDX)


def test_scatter_src_larger_than_index():
    # torch reads only the index-shaped block of src (its own backward rejects this case)
    gradcheck(lambda m, x, s, i: x.scatter(1, idx(m, i), s), (3, 4), (3, 3), S_IDX)
    gradcheck(lambda m, x, s, i: x.scatter_add(0, idx(m, i), s), (3, 4), (3, 4), R_IDX)


def test_scatter_reduce_prod_zeros():
    x = I([[1.0, 0.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]], dtype=np.float32)
    s = I([[0.0, 2.0, 3.0], [4.0, 0.0, 0.0]], dtype=np.float32)
    check(lambda m, x, s, i: m.scatter_reduce(x, 1, idx(m, i), s, "prod"), x, s, R_IDX)


def test_scatter_reduce_integer_mean_floors():
    check(lambda m, x, s: m.scatter_reduce(x, 0, m.tensor([0, 0, 1]), s, "mean"),
          I([3, 4], dtype=np.int64), I([2, 2, 5], dtype=np.int64))


# ---- outputs without gradient ------------------------------------------------------------------
FORWARD = [
    ("nonzero", lambda m, x: m.nonzero(x > 0), (3, 4)),
    ("nonzero_tuple", lambda m, x: m.nonzero(x > 0, as_tuple=True), (3, 4)),
    ("argwhere", lambda m, x: m.argwhere(x > 0), (3, 4)),
    ("argsort", lambda m, x: m.argsort(x, 0), (3, 4)),
    ("unique", lambda m, x: m.unique(x), I([3, 1, 3, 2, 1])),
    ("unique_all", lambda m, x: m.unique(x, return_inverse=True, return_counts=True),
     I([[3, 1], [3, 2], [1, 1]])),
    ("unique_dim", lambda m, x: x.unique(dim=0, return_inverse=True, return_counts=True),
     I([[3, 1], [1, 2], [3, 1]])),
    ("unique_unsorted", lambda m, x: x.unique(sorted=False), I([3, 1, 3])),
    ("searchsorted", lambda m, s, v: m.searchsorted(s, v), I([1.0, 2.0, 2.0, 5.0]),
     I([[2.0, 0.0], [6.0, 1.5]])),
    ("searchsorted_right", lambda m, s, v: m.searchsorted(s, v, right=True),
     I([1.0, 2.0, 2.0, 5.0]), I([2.0, 5.0])),
    ("searchsorted_side", lambda m, s, v: m.searchsorted(s, v, side="right"),
     I([1.0, 2.0, 2.0, 5.0]), I([2.0, 5.0])),
    ("searchsorted_nd", lambda m, s, v: m.searchsorted(s, v), I([[1.0, 3.0], [2.0, 4.0]]),
     I([[2.0, 3.0, 0.0], [5.0, 2.0, 3.0]])),
    ("searchsorted_int32", lambda m, s, v: m.searchsorted(s, v, out_int32=True),
     I([1.0, 2.0]), I([1.5])),
    ("bucketize", lambda m, v, b: m.bucketize(v, b), I([[0.5, 2.0], [3.0, 9.0]]),
     I([1.0, 2.0, 3.0])),
    ("bucketize_right", lambda m, v, b: m.bucketize(v, b, right=True), I([0.5, 2.0, 3.0]),
     I([1.0, 2.0, 3.0])),
    ("repeat_interleave_counts", lambda m: m.repeat_interleave(m.tensor([2, 0, 3]))),
]


@pytest.mark.parametrize("case", FORWARD, ids=[c[0] for c in FORWARD])
def test_forward_only(case):
    name, fn, *specs = case
    check(fn, *specs, grad=False)


def test_unique_records_a_gradient_that_raises():
    # as torch: the values require grad and backward refuses (a loss reaching them raises
    # rather than skipping them)
    for m in (torch, flow):
        x = m.randn(4, requires_grad=True)
        out = m.unique(x)
        assert out.requires_grad and out.grad_fn is not None
        with pytest.raises(NotImplementedError):
            (out.sum() + x.sum()).backward()


# ---- in-place variants ---------------------------------------------------------------------------
INPLACE = [
    ("scatter_", lambda m, x, s, i: (x * 1).scatter_(1, idx(m, i), s), (3, 4), (3, 2), S_IDX),
    ("scatter_add_", lambda m, x, s, i: (x * 1).scatter_add_(1, idx(m, i), s), (3, 4), (2, 3),
     R_IDX),
    ("scatter_reduce_", lambda m, x, s, i: (x * 1).scatter_reduce_(1, idx(m, i), s, "amax"),
     (3, 4), (2, 3), R_IDX),
    ("index_add_", lambda m, x, s: (x * 1).index_add_(0, m.tensor([1, 1]), s), (3, 4), (2, 4)),
    ("index_copy_", lambda m, x, s: (x * 1).index_copy_(1, m.tensor([3]), s), (3, 4), (3, 1)),
    ("index_fill_", lambda m, x: (x * 1).index_fill_(0, m.tensor([0]), 3.0), (3, 4)),
    ("index_put_", lambda m, x, v: (x * 1).index_put_((m.tensor([1]),), v, accumulate=True),
     (3, 4), (4,)),
    ("masked_fill_", lambda m, x, k: (x * 1).masked_fill_(k, -1.0), (3, 4), MASK),
    ("masked_scatter_", lambda m, x, s, k: (x * 1).masked_scatter_(k, s), (3, 4),
     (8,), MASK),
]


@pytest.mark.parametrize("case", INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_against_torch(case):
    name, fn, *specs = case
    check(fn, *specs)
    gradcheck(fn, *specs)


def test_setitem_without_grad_writes_in_place():
    x, tx = flow.zeros(3, 4), torch.zeros(3, 4)
    for t in (x, tx):
        t[1:, [0, 2]] = 1.0
        t[t.sum(1) > 0, 3] = 2.0
    np.testing.assert_array_equal(x.numpy(), tx.numpy())


def test_setitem_on_leaf_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        flow.zeros(3, requires_grad=True)[0] = 1.0


# ---- bad arguments: errors name the op and values, and change nothing -------------------
def _x(*shape):
    return flow.arange(float(np.prod(shape))).reshape(shape)


def _i(*v):
    return flow.tensor(list(v))


ERRORS = [
    ("get_range", lambda x: x[3], IndexError, "out of bounds"),
    ("get_tensor_range", lambda x: x[:, _i(4)], IndexError, "out of bounds"),
    ("get_float_index", lambda x: x[flow.tensor([0.0, 1.0])], IndexError,
     "tensors used as indices must be long"),
    ("get_float_list", lambda x: x[[0.5]], IndexError, "must hold ints or bools"),
    ("get_neg_step", lambda x: x[::-1], ValueError, "step must be greater than zero"),
    ("get_bad_type", lambda x: x["a"], IndexError, "only integers, slices"),
    ("get_mask_shape", lambda x: x[flow.tensor([True, False])], IndexError,
     "boolean index did not match"),
    ("set_range", lambda x: x.__setitem__(_i(0, 5), 1.0), IndexError, "out of bounds"),
    ("set_shape", lambda x: x.__setitem__(0, flow.ones(3)), RuntimeError, "expanded size"),
    ("gather_dims", lambda x: x.gather(1, _i(0)), RuntimeError, "same number of dimensions"),
    ("gather_range", lambda x: x.gather(1, flow.tensor([[5]])), RuntimeError,
     "index 5 is out of bounds for dimension 1 with size 4"),
    ("gather_neg", lambda x: x.gather(1, flow.tensor([[-1]])), RuntimeError, "out of bounds"),
    ("gather_size", lambda x: x.gather(1, flow.zeros(4, 1, dtype=flow.int64)), RuntimeError,
     "Size does not match at dimension 0"),
    ("gather_float", lambda x: x.gather(1, flow.zeros(1, 1)), RuntimeError,
     "Expected dtype int32 or int64 for index"),
    ("gather_dim", lambda x: x.gather(2, flow.zeros(1, 1, dtype=flow.int64)), IndexError,
     "Dimension out of range"),
    ("scatter_dtype", lambda x: x.scatter(0, flow.tensor([[0]]), flow.ones(1, 1).double()),
     RuntimeError, "Expected self.dtype to be equal to src.dtype"),
    ("scatter_src_small", lambda x: x.scatter(1, flow.tensor([[0, 1]]), flow.ones(1, 1)),
     RuntimeError, "smaller than src"),
    ("scatter_src_dims", lambda x: x[0].scatter_add(0, _i(1), flow.ones(3, 4)), RuntimeError,
     "same number of dimensions as src"),
    ("scatter_reduce_mode", lambda x: x.scatter_reduce(1, flow.tensor([[0]]), flow.ones(1, 1),
                                                       "max"), RuntimeError, "reduce argument"),
    ("scatter_mode", lambda x: x.scatter(1, flow.tensor([[0]]), flow.ones(1, 1), reduce="max"),
     RuntimeError, "either add or multiply"),
    ("index_select_2d", lambda x: x.index_select(0, flow.tensor([[0]])), IndexError,
     "supposed to be a vector"),
    ("index_select_float", lambda x: x.index_select(0, flow.tensor([0.0])), RuntimeError,
     "Expected dtype int32 or int64 for index"),
    ("index_add_shape", lambda x: x.index_add(0, _i(0), flow.ones(2, 4)), RuntimeError,
     r"source of shape \(2, 4\) does not match the expected shape \(1, 4\)"),
    ("index_copy_range", lambda x: x.index_copy(1, _i(4), flow.ones(3, 1)), IndexError,
     "index 4 is out of bounds for dimension 1 with size 4"),
    ("index_put_shape", lambda x: x.index_put((_i(0, 1),), flow.ones(3)), RuntimeError,
     "shape mismatch"),
    ("index_put_range", lambda x: x.index_put((_i(7),), flow.ones(4)), IndexError,
     "out of bounds"),
    ("take_range", lambda x: x.take(_i(12)), IndexError, "index 12 is out of bounds"),
    ("masked_select_dtype", lambda x: x.masked_select(flow.ones(3, 4)), RuntimeError,
     "expected BoolTensor for mask"),
    ("masked_select_shape", lambda x: x.masked_select(flow.ones(2, dtype=flow.bool)),
     RuntimeError, "must broadcast"),
    ("masked_fill_dtype", lambda x: x.masked_fill(flow.ones(3, 4), 1.0), RuntimeError,
     "only supports boolean masks"),
    ("masked_fill_value", lambda x: x.masked_fill(x > 0, flow.ones(2)), RuntimeError,
     "0-dimensional value tensor"),
    ("masked_scatter_few", lambda x: x.masked_scatter(x > 0, flow.ones(2)), RuntimeError,
     "Number of elements of source"),
    ("topk_k", lambda x: x.topk(5), RuntimeError, r"k \(5\) out of range"),
    ("kthvalue_k", lambda x: x.kthvalue(0), RuntimeError, r"k \(0\) out of range"),
    ("sort_dim", lambda x: x.sort(2), IndexError, "Dimension out of range"),
    ("searchsorted_shape", lambda x: flow.searchsorted(x, flow.zeros(2, 2)), RuntimeError,
     "boundaries tensor should be 1 dimension"),
    ("searchsorted_side", lambda x: flow.searchsorted(x[0], x[0], side="middle"),
     RuntimeError, "side can only be"),
    ("bucketize_2d", lambda x: flow.bucketize(x[0], x), RuntimeError, "must be 1 dimension"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_bad_arguments_change_nothing(case):
    name, fn, exc, match = case
    x = _x(3, 4)
    before, version = x.numpy().copy(), x._version
    with pytest.raises(exc, match=match):
        fn(x)
    np.testing.assert_array_equal(x.numpy(), before)
    assert x._version == version


@pytest.mark.parametrize("method", ["scatter_", "index_copy_", "index_put_", "masked_fill_"])
def test_failing_inplace_writes_nothing(method):
    x = _x(3, 4)
    before = x.numpy().copy()
    args = {"scatter_": (1, flow.tensor([[9]]), flow.ones(1, 1)),
            "index_copy_": (0, _i(5), flow.ones(1, 4)),
            "index_put_": ((_i(0, 9),), flow.ones(2)),
            "masked_fill_": (flow.ones(3, 4), 1.0)}[method]
    with pytest.raises((RuntimeError, IndexError)):
        getattr(x, method)(*args)
    np.testing.assert_array_equal(x.numpy(), before)


def test_tied_values_report_torchs_indices_in_topk_kthvalue_median_and_mode():
    """torch's selection kernels (nth_element/sort/partial_sort for topk, quick-select for
    kthvalue, position order for median(dim), std::sort of pairs for mode) pick among equal
    values by their own steps: the stable order gave other indices, so the values' gradients
    went to other elements (and mode of a row with a NaN another value)."""
    rng = np.random.default_rng(0)
    for trial in range(16):
        n = int(rng.integers(2, 50))
        a = rng.integers(0, 3, (3, n)).astype(np.float64)
        if trial % 4 == 0:
            a[rng.random(a.shape) < 0.1] = np.nan
        k = int(rng.integers(1, n + 1))
        x, t = flow.tensor(a), torch.tensor(a)
        for fn in (lambda m: m.topk(k, 1).indices, lambda m: m.topk(min(k, 2), 1).indices,
                   lambda m: m.topk(k, 1, largest=False, sorted=False).indices,
                   lambda m: m.kthvalue(k, 1).indices, lambda m: m.median(1).indices,
                   lambda m: m.nanmedian(1).indices, lambda m: m.mode(1).indices,
                   lambda m: m.mode(1).values.nan_to_num(7.0)):
            assert fn(x).tolist() == fn(t).tolist(), (a.tolist(), k)
    x = flow.tensor([-3.0, 0.0, 6.0, 6.0, 1.0], requires_grad=True)
    t = torch.tensor([-3.0, 0.0, 6.0, 6.0, 1.0], requires_grad=True)
    for m, v in ((flow, x), (torch, t)):
        (v.topk(3).values * m.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == t.grad.tolist()
