"""Regressions from torch's OpInfo samples (tests/opinfo_vs_torch.py) for the shape, index and
creation ops: each checked against torch, forward and backward."""
import numpy as np
import pytest
import torch

import flowgrad as flow


def pair(array, requires_grad=False):
    """The same values as a torch and a flowgrad tensor."""
    array = np.asarray(array)
    t = torch.tensor(array).requires_grad_(requires_grad)
    f = flow.tensor(array.copy()).requires_grad_(requires_grad)
    return t, f


def same(f, t):
    assert str(f.dtype).split(".")[1] == str(t.dtype).split(".")[1], (f.dtype, t.dtype)
    assert tuple(f.shape) == tuple(t.shape), (tuple(f.shape), tuple(t.shape))
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-9)


def backward_same(ft, tt, fx, tx):
    """Both outputs' sums backpropagated: the leaves' gradients agree."""
    tt.sum().backward() if not tt.is_complex() else tt.abs().sum().backward()
    ft.sum().backward() if not ft.is_complex() else ft.abs().sum().backward()
    for f, t in zip(fx, tx):
        same(f.grad, t.grad)


def raises_like(fn_torch, fn_flow, match=None):
    with pytest.raises(Exception) as t_err:
        fn_torch()
    with pytest.raises(Exception) as f_err:
        fn_flow()
    if match is not None:
        assert match in str(t_err.value) and match in str(f_err.value), (t_err, f_err)


# ---- 1. diff with n=0 -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2])
def test_diff_order_with_prepend_append(n):
    rng = np.random.default_rng(0)
    tx, fx = pair(rng.standard_normal((5, 5)), True)
    tp, fp = pair(rng.standard_normal((1, 5)), True)
    ta, fa = pair(rng.standard_normal((2, 5)), True)
    tt, ft = torch.diff(tx, n, 0, tp, ta), flow.diff(fx, n, 0, fp, fa)
    same(ft, tt)
    assert ft is not fx  # a copy, as torch's
    backward_same(ft, tt, [fx], [tx])
    raises_like(lambda: torch.diff(tx, -1), lambda: flow.diff(fx, -1), "non-negative")


# ---- 2. unfold of a 0-d tensor; complex unfold ---------------------------------------------------
@pytest.mark.parametrize("size", [0, 1])
def test_unfold_zero_dim(size):
    tx, fx = pair(np.float64(3.0), True)
    tt, ft = tx.unfold(0, size, 1), fx.unfold(0, size, 1)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])


def test_unfold_complex():
    rng = np.random.default_rng(1)
    tx, fx = pair(rng.standard_normal((4, 6)) + 1j * rng.standard_normal((4, 6)), True)
    tt, ft = tx.unfold(1, 3, 2), fx.unfold(1, 3, 2)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])


# ---- 3. dtypes: boolean addr, sum_to_size ----------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (), (1, 3)])
@pytest.mark.parametrize("beta,alpha", [(3, 2), (0, 1), (1, 0), (True, False)])
def test_addr_bool(shape, beta, alpha):
    rng = np.random.default_rng(2)
    ti, fi = pair(rng.random(shape) > 0.5)
    ta, fa = pair(np.array([True, False]))
    tb, fb = pair(np.array([False, True, True]))
    same(flow.addr(fi, fa, fb, beta=beta, alpha=alpha),
         torch.addr(ti, ta, tb, beta=beta, alpha=alpha))


def test_addr_bool_refuses_float_coefficient():
    ti, fi = pair(np.array([[True]]))
    tv, fv = pair(np.array([True]))
    raises_like(lambda: torch.addr(ti, tv, tv, beta=1.5),
                lambda: flow.addr(fi, fv, fv, beta=1.5), "beta must not be a floating point")


@pytest.mark.parametrize("shape,size", [((), ()), ((2,), ()), ((1, 2), (2,)), ((2, 1), (1, 1)),
                                        ((1, 1), (1, 1)), ((3, 2), (2,)), ((1, 2), (1, 1))])
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "float32"])
def test_sum_to_size_dtype(shape, size, dtype):
    array = (np.arange(int(np.prod(shape))).reshape(shape) % 3).astype(dtype)
    tx, fx = pair(array)
    same(fx.sum_to_size(size), tx.sum_to_size(size))


def test_sum_to_size_grad():
    tx, fx = pair(np.arange(6.0).reshape(2, 3), True)
    tt, ft = tx.sum_to_size(1, 3), fx.sum_to_size(1, 3)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])


# ---- 4. combinations with r > len ------------------------------------------------------------
@pytest.mark.parametrize("n,r", [(1, 2), (2, 4), (3, 2)])
def test_combinations_graph(n, r):
    tx, fx = pair(np.arange(1.0, n + 1), True)
    tt, ft = torch.combinations(tx, r), flow.combinations(fx, r)
    same(ft, tt)
    assert ft.requires_grad == tt.requires_grad
    backward_same(ft, tt, [fx], [tx])


# ---- 5. accepted inputs --------------------------------------------------------------------
def test_take_along_dim_negative_indices():
    tx, fx = pair(np.arange(10.0).reshape(2, 5), True)
    ti, fi = pair(np.array([[-1, 0], [-5, 2]]))
    tt, ft = torch.take_along_dim(tx, ti, 1), flow.take_along_dim(fx, fi, 1)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])
    ti, fi = pair(np.array([[-1, 3, -2]]))  # broadcast over the rows
    same(flow.take_along_dim(fx, fi, 1), torch.take_along_dim(tx, ti, 1))


@pytest.mark.parametrize("index_shape", [(2, 0), (2, 1, 0), (0,), (0, 3)])
def test_gather_empty_index(index_shape):
    tx, fx = pair(np.arange(5.0), True)
    ti, fi = pair(np.zeros(index_shape, np.uint8))
    tt, ft = torch.gather(tx, 0, ti), flow.gather(fx, 0, fi)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])


@pytest.mark.parametrize("name", ["scatter", "scatter_add", "scatter_reduce"])
@pytest.mark.parametrize("index_shape", [(2, 0, 1), (5, 0)])
def test_scatter_empty_index(name, index_shape):
    tx, fx = pair(np.zeros((3, 4)), True)
    ts, fs = pair(np.ones((2, 2)), True)
    ti, fi = pair(np.zeros(index_shape, np.int64))
    extra = ("amax",) if name == "scatter_reduce" else ()
    tt = getattr(torch, name)(tx, 1, ti, ts, *extra)
    ft = getattr(flow, name)(fx, 1, fi, fs, *extra)
    same(ft, tt)
    # (torch's own backward fails here: its src gradient takes the index's shape) the input
    # passes its gradient through, src gets zeros
    ft.sum().backward()
    assert fx.grad.tolist() == np.ones((3, 4)).tolist()
    assert fs.grad.tolist() == np.zeros((2, 2)).tolist()


def test_gather_still_checks_nonempty_index():
    tx, fx = pair(np.arange(5.0))
    ti, fi = pair(np.zeros((2, 1), np.int64))
    raises_like(lambda: torch.gather(tx, 0, ti), lambda: flow.gather(fx, 0, fi),
                "same number of dimensions")
    ti, fi = pair(np.array([-1]))
    raises_like(lambda: torch.gather(tx, 0, ti), lambda: flow.gather(fx, 0, fi),
                "out of bounds")


@pytest.mark.parametrize("index", [[0], 0])
def test_index_select_zero_dim(index):
    tx, fx = pair(np.float64(2.0), True)
    ti, fi = pair(np.array(index))
    tt, ft = torch.index_select(tx, 0, ti), flow.index_select(fx, 0, fi)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])
    for bad in ([0, 0], [1], [-1]):
        ti, fi = pair(np.array(bad))
        raises_like(lambda: torch.index_select(tx, 0, ti), lambda: flow.index_select(fx, 0, fi))


def test_index_select_zero_dim_index_keeps_the_dim():
    tx, fx = pair(np.arange(6.0).reshape(2, 3), True)
    ti, fi = pair(np.array(1))
    tt, ft = torch.index_select(tx, 1, ti), flow.index_select(fx, 1, fi)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])


@pytest.mark.parametrize("sa,sb,dims", [((1, 1, 1), (2, 1, 2), [[0, 1], [2, 0]]),
                                        ((3, 1), (3, 4), [[0, 1], [0, 1]]),
                                        ((2, 3), (3, 1), [[1, 0], [0, 1]]),
                                        ((1, 3), (0, 3), [[0], [0]])])
def test_tensordot_size_one_contracted_dims(sa, sb, dims):
    rng = np.random.default_rng(3)
    ta, fa = pair(rng.standard_normal(sa), True)
    tb, fb = pair(rng.standard_normal(sb), True)
    tt, ft = torch.tensordot(ta, tb, dims=dims), flow.tensordot(fa, fb, dims=dims)
    same(ft, tt)
    backward_same(ft, tt, [fa, fb], [ta, tb])


def test_tensordot_mismatch_still_raises():
    ta, fa = pair(np.ones((2, 3)))
    tb, fb = pair(np.ones((3, 3)))
    raises_like(lambda: torch.tensordot(ta, tb, dims=[[0], [0]]),
                lambda: flow.tensordot(fa, fb, dims=[[0], [0]]), "contracted dimensions")


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [False, True])
def test_scatter_reduce_bool_extrema(reduce, include_self):
    rng = np.random.default_rng(4)
    tx, fx = pair(rng.random((6, 3)) > 0.5)
    ts, fs = pair(rng.random((4, 3)) > 0.5)
    ti, fi = pair(rng.integers(0, 6, (4, 3)))
    same(flow.scatter_reduce(fx, 0, fi, fs, reduce, include_self=include_self),
         torch.scatter_reduce(tx, 0, ti, ts, reduce, include_self=include_self))


def test_masked_scatter_broadcasts_input_and_mask():
    rng = np.random.default_rng(5)
    tx, fx = pair(rng.standard_normal(5), True)
    tm, fm = pair(rng.random((5, 5)) > 0.5)
    ts, fs = pair(rng.standard_normal((5, 5)), True)
    tt, ft = torch.masked_scatter(tx, tm, ts), flow.masked_scatter(fx, fm, fs)
    same(ft, tt)
    backward_same(ft, tt, [fx, fs], [tx, ts])
    # in place, the input cannot grow
    raises_like(lambda: tx.detach().clone().masked_scatter_(tm, ts.detach()),
                lambda: fx.detach().clone().masked_scatter_(fm, fs.detach()))


# ---- 6. errors ------------------------------------------------------------------------------
def test_cat_out_overlapping_an_input_raises():
    for lib in (torch, flow):
        x, y, z = lib.zeros(0), lib.ones(4, 6), lib.zeros(4, 6)
        for inputs, out in (((x, y), x), ((x, y), y), ((y, z), z[:2, :])):
            with pytest.raises(RuntimeError, match="refer to a single memory location"):
                lib.cat(inputs, dim=0, out=out)
        out = lib.zeros(8, 6)  # a separate out is fine
        assert lib.cat((y, y), out=out) is out


@pytest.mark.parametrize("start", ["bool", "float", "vector"])
def test_narrow_start_tensor_must_be_integral_0d(start):
    tx, fx = pair(np.arange(20.0).reshape(4, 5))
    value = {"bool": np.array(True), "float": np.array(1.0), "vector": np.array([1])}[start]
    ts, fs = pair(value)
    raises_like(lambda: tx.narrow(0, ts, 2), lambda: fx.narrow(0, fs, 2),
                "start must be an 0-dim integral Tensor")


def test_narrow_start_tensor_integral():
    tx, fx = pair(np.arange(20.0).reshape(4, 5), True)
    ts, fs = pair(np.array(1))
    tt, ft = tx.narrow(0, ts, 2), fx.narrow(0, fs, 2)
    same(ft, tt)
    backward_same(ft, tt, [fx], [tx])
    raises_like(lambda: tx.narrow(0, True, 2), lambda: fx.narrow(0, True, 2))


@pytest.mark.parametrize("shape", [(), (3,)])
def test_renorm_needs_two_dims(shape):
    tx, fx = pair(np.ones(shape))
    raises_like(lambda: torch.renorm(tx, 2, 0, 1.0), lambda: flow.renorm(fx, 2, 0, 1.0),
                "needs at least 2 dimensions")


# ---- 7. features ---------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("cpu", "float64", True, True), ("cpu", "float64", False),
                                  ("cpu", "float32", False, False), (None, "float64"),
                                  ("float64", False, True), ("other", False, True)])
def test_to_positional_forms(args):
    tx, fx = pair(np.arange(4.0, dtype=np.float32).reshape(2, 2), True)
    tother, fother = pair(np.zeros(1, np.float64))
    conv = {"float64": (torch.float64, flow.float64), "float32": (torch.float32, flow.float32),
            "other": (tother, fother)}
    targs = [conv[a][0] if a in conv else a for a in args]
    fargs = [conv[a][1] if a in conv else a for a in args]
    tt, ft = tx.to(*targs), fx.to(*fargs)
    same(ft, tt)
    assert (ft is fx) == (tt is tx)
    if tt.requires_grad:
        backward_same(ft * 2, tt * 2, [fx], [tx])


def test_to_memory_format_and_bad_arguments():
    tx, fx = pair(np.ones((2, 3, 4, 5), np.float32))
    tt = tx.to("cpu", torch.float64, False, True, memory_format=torch.channels_last)
    ft = fx.to("cpu", flow.float64, False, True, memory_format=flow.channels_last)
    same(ft, tt)
    assert ft.is_contiguous(memory_format=flow.channels_last)
    with pytest.raises(TypeError):
        fx.to(flow.float64, "cpu")  # not one of torch's forms
    with pytest.raises(TypeError):
        tx.to(torch.float64, "cpu")


def test_normal_layout_keyword():
    out = flow.normal(1.6, 0.3, [2, 2, 2], dtype=flow.float64, layout=flow.strided,
                      device="cpu")
    ref = torch.normal(1.6, 0.3, [2, 2, 2], dtype=torch.float64, layout=torch.strided,
                       device="cpu")
    assert tuple(out.shape) == tuple(ref.shape) and out.dtype == flow.float64
    with pytest.raises(TypeError, match="unexpected keyword"):
        flow.normal(1.6, 0.3, [2], lay0ut=flow.strided)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_normal_and_uniform(dtype):
    flow.manual_seed(0)
    x = flow.empty(20000, dtype=getattr(flow, dtype)).normal_(3.0, 2.0)
    assert x.dtype == getattr(flow, dtype)
    for part in (x.real, x.imag):  # torch: each part N(mean, std**2 / 2)
        assert abs(float(part.mean()) - 3.0) < 0.05
        assert abs(float(part.std()) - 2.0 / np.sqrt(2)) < 0.05
    y = flow.empty(1000, dtype=getattr(flow, dtype)).uniform_(1.0, 2.0)
    for part in (y.real, y.imag):
        assert float(part.min()) >= 1.0 and float(part.max()) <= 2.0
    ref = torch.empty(3, dtype=getattr(torch, dtype)).normal_(0, 1)
    assert ref.dtype == getattr(torch, dtype)
    with pytest.raises(RuntimeError, match="std >= 0"):
        flow.empty(2, dtype=getattr(flow, dtype)).normal_(0.0, -1.0)
    real = flow.empty(3).normal_(std=2.0)  # real tensors: unchanged
    assert real.dtype == flow.float32


def test_resize_():
    for lib in (torch, flow):
        x = lib.arange(6.0)
        first = x[:3]
        assert x.resize_(2, 2) is x
        assert x.tolist() == [[0.0, 1.0], [2.0, 3.0]]
        assert x.data_ptr() == first.data_ptr()  # the same storage
        del first  # (growing memory a view shares: see the test below)
        x.resize_([4, 4])
        assert tuple(x.shape) == (4, 4) and x[0].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert tuple(lib.tensor(3.0).resize_([1, 1, 1]).shape) == (1, 1, 1)
        w = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
            w.resize_(2)


def test_resize_as_and_zero_functions():
    for lib in (torch, flow):
        x = lib.ones(2)
        assert lib.resize_as_(x, lib.zeros(3, 1)) is x and tuple(x.shape) == (3, 1)
        assert x.resize_as_(lib.zeros(2)) is x and tuple(x.shape) == (2,)
        y = lib.ones(2, 2)
        assert lib.zero_(y) is y and y.tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_resize_of_a_view_within_its_storage_as_torch_and_growing_one_refused():
    for lib in (torch, flow):
        base = lib.arange(6.0)
        view = base[2:]
        assert view.resize_(2) is view and view.tolist() == [2.0, 3.0]
        assert view._base is base and view.storage_offset() == 2
        view = base[2:]
        assert view.resize_(4) is view  # the same shape: nothing to do
    with pytest.raises(NotImplementedError, match="view"):  # (torch grows the storage)
        flow.arange(6.0)[2:].resize_(5)


@pytest.mark.parametrize("alias", ["view", "detach", "numpy"])
def test_growing_memory_other_tensors_share_is_refused_not_split(alias):
    # torch grows the storage under every tensor over it; flowgrad's grown copy left the
    # view, the detached alias or the NumPy array on the old memory: later writes through
    # one were silently not seen by the other
    x = flow.zeros(3, 4)
    other = {"view": lambda: x[1], "detach": x.detach, "numpy": x.numpy}[alias]()
    with pytest.raises(NotImplementedError, match=r"resize_: growing a tensor \(shape "
                                                  r"\(3, 4\) to \(4, 4\)\) whose memory"):
        x.resize_(4, 4)
    with pytest.raises(NotImplementedError, match=r"add: growing"):
        flow.add(flow.ones(4, 4), 1, out=x)
    assert tuple(x.shape) == (3, 4) and x._version == 0 and other is not None
    x[1] = 5.0
    assert float(x.sum()) == 20.0
    del other
    x.resize_(4, 4)  # (nothing else over it: grown, the old values first)
    assert x[1].tolist() == [5.0] * 4 and x[3].tolist() == [0.0] * 4


def test_an_out_resized_within_its_memory_is_seen_by_its_views_as_torch():
    # (atomicity_fuzz seed 635: out= of fewer elements got a new array, so a view of out
    # kept the old values where torch's shows the result)
    for lib in (torch, flow):
        g = lib.zeros(3, 4)
        column = g.t()[0]
        with pytest.warns(UserWarning, match="was resized"):
            lib.stack([lib.ones(2, 4)], -2, out=g)
        assert tuple(g.shape) == (2, 1, 4) and column.tolist() == [1.0, 1.0, 0.0]


def test_gradient_spacing_none_and_repeated_dims():
    rng = np.random.default_rng(6)
    tx, fx = pair(rng.standard_normal((5, 5)), True)
    tt = torch.gradient(tx, spacing=None, dim=None, edge_order=2)
    ft = flow.gradient(fx, spacing=None, dim=None, edge_order=2)
    for f, t in zip(ft, tt):
        same(f, t)
    backward_same(ft[0] + ft[1], tt[0] + tt[1], [fx], [tx])
    raises_like(lambda: torch.gradient(tx, spacing=0.1, dim=[1, 1]),
                lambda: flow.gradient(fx, spacing=0.1, dim=[1, 1]), "appears multiple times")
