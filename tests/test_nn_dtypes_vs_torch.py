"""nn.functional ops on the dtypes torch accepts beyond floats, checked against torch:
complex inputs (normalize, pairwise_distance, rms_norm, triplet_margin_loss, unfold/fold,
silu's forward) with torch's conjugate-Wirtinger gradients, and integer inputs (average and
max pools, local_response_norm, poisson_nll_loss) with torch's output dtypes and integer
rounding, and the same refusals where torch has no kernel for a dtype."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from vs_torch import assert_same_raise, outcome

import flowgrad as flow
import flowgrad.nn.functional as F

RNG = np.random.default_rng(0)
TORCH_DTYPES = {"int64": torch.int64, "int32": torch.int32, "uint8": torch.uint8,
                "bool": torch.bool, "complex128": torch.complex128, "float64": torch.float64}


def _complex(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _ints(*shape, dtype="int64", lo=-20, hi=20):
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype == "uint8":
        lo = 0
    return RNG.integers(lo, hi, shape).astype(dtype)


def _pair(a, grad=False):
    """The same values as a torch and a flowgrad tensor."""
    t = torch.tensor(a, dtype=TORCH_DTYPES[a.dtype.name], requires_grad=grad)
    return t, flow.tensor(a, requires_grad=grad)


def _check_values(t, f, tol=1e-10):
    assert str(t.dtype).split(".")[1] == str(f.dtype).split(".")[1], (t.dtype, f.dtype)
    assert tuple(t.shape) == tuple(f.shape)
    np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def _check_op(t_fn, f_fn, arrays, grad=True, tol=1e-10):
    """Run both, compare the values, then the gradients of one random cotangent."""
    pairs = [_pair(a, grad and a.dtype.kind in "fc") for a in arrays]
    ty = t_fn(*(p[0] for p in pairs))
    fy = f_fn(*(p[1] for p in pairs))
    _check_values(ty, fy, tol)
    if not any(p[0].requires_grad for p in pairs):
        return
    shape = tuple(ty.shape)
    cot = _complex(*shape) if ty.is_complex() else RNG.standard_normal(shape)
    tg = torch.autograd.grad(ty, [p[0] for p in pairs if p[0].requires_grad],
                             torch.tensor(cot))
    fy.backward(flow.tensor(cot))
    fg = [p[1].grad for p in pairs if p[1].requires_grad]
    for t, f in zip(tg, fg):
        _check_values(t, f, tol)


# ---- complex inputs -----------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((2, 3, 5), -1), ((4,), 0)])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, 0.5, 0.0, -1.0, float("inf")])
def test_normalize_complex(shape, dim, p):
    _check_op(lambda x: TF.normalize(x, p=p, dim=dim), lambda x: F.normalize(x, p=p, dim=dim),
              [_complex(*shape)])


@pytest.mark.parametrize("shapes", [((3,), (3,)), ((4, 5), (4, 5)), ((2, 5), (5,))])
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_complex(shapes, p, keepdim):
    _check_op(lambda a, b: TF.pairwise_distance(a, b, p=p, keepdim=keepdim),
              lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=keepdim),
              [_complex(*s) for s in shapes])


@pytest.mark.parametrize("shape,normalized", [((2, 3), [3]), ((2, 3, 4), [3, 4])])
@pytest.mark.parametrize("weight", ["none", "complex", "real"])
@pytest.mark.parametrize("eps", [None, 0.5])
def test_rms_norm_complex(shape, normalized, weight, eps):
    arrays = [_complex(*shape)]
    if weight != "none":
        arrays.append(_complex(*normalized) if weight == "complex"
                      else RNG.standard_normal(normalized))
    _check_op(lambda x, *w: TF.rms_norm(x, normalized, *w, eps=eps),
              lambda x, *w: F.rms_norm(x, normalized, *w, eps=eps), arrays)


@pytest.mark.parametrize("shape", [(5, 6), (4,)])
@pytest.mark.parametrize("kwargs", [{}, {"swap": True}, {"p": 1, "margin": 3.0},
                                    {"reduction": "none"}, {"reduction": "sum", "p": 3}])
def test_triplet_margin_loss_complex(shape, kwargs):
    _check_op(lambda a, p, n: TF.triplet_margin_loss(a, p, n, **kwargs),
              lambda a, p, n: F.triplet_margin_loss(a, p, n, **kwargs),
              [_complex(*shape) for _ in range(3)])


@pytest.mark.parametrize("shape,kwargs", [
    ((2, 3, 5, 5), {"kernel_size": 2}),
    ((1, 2, 6, 5), {"kernel_size": (2, 3), "stride": 2, "padding": 1, "dilation": (1, 2)}),
    ((2, 4, 4), {"kernel_size": 3, "padding": 1}),
])
def test_unfold_fold_complex(shape, kwargs):
    _check_op(lambda x: TF.unfold(x, **kwargs), lambda x: F.unfold(x, **kwargs),
              [_complex(*shape)])
    size = shape[-2:]
    cols = TF.unfold(torch.zeros(shape, dtype=torch.complex128), **kwargs)
    _check_op(lambda c: TF.fold(c, size, **kwargs), lambda c: F.fold(c, size, **kwargs),
              [_complex(*cols.shape)])


@pytest.mark.parametrize("shape", [(7,), (2, 3), ()])
def test_silu_complex_forward_and_refused_autograd(shape):
    _check_op(TF.silu, F.silu, [_complex(*shape)], grad=False)
    t, f = _pair(_complex(*shape), grad=True)
    _, torch_error = outcome(lambda: TF.silu(t))
    _, error = outcome(lambda: F.silu(f))
    assert torch_error is not None and error is not None
    assert "does not support automatic differentiation" in str(error)
    with torch.no_grad(), flow.no_grad():  # no graph: the value alone, as torch
        _check_values(TF.silu(t), F.silu(f))


# ---- integer inputs ----------------------------------------------------------------------
AVG_CASES = [
    (1, (2, 3, 9), {"kernel_size": 3}),
    (1, (3, 10), {"kernel_size": 4, "stride": 3, "padding": 2, "ceil_mode": True,
                  "count_include_pad": False}),
    (2, (2, 3, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    (2, (1, 2, 6, 6), {"kernel_size": (2, 3), "padding": 1, "count_include_pad": False}),
    (2, (1, 2, 6, 6), {"kernel_size": 2, "divisor_override": -3}),
    (3, (1, 2, 4, 5, 5), {"kernel_size": 2, "stride": 1, "padding": 1,
                          "count_include_pad": False}),
    (3, (2, 4, 5, 4), {"kernel_size": (2, 3, 2), "ceil_mode": True, "divisor_override": 3}),
]


@pytest.mark.parametrize("nd,shape,kwargs", AVG_CASES)
def test_avg_pool_int64_truncates_as_torch(nd, shape, kwargs):
    name = f"avg_pool{nd}d"
    _check_op(lambda x: getattr(TF, name)(x, **kwargs), lambda x: getattr(F, name)(x, **kwargs),
              [_ints(*shape, lo=-50, hi=50)], grad=False, tol=0)


MAX_CASES = [
    (1, (2, 3, 9), {"kernel_size": 3, "return_indices": True}),
    (2, (2, 3, 7, 8), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    (2, (1, 2, 6, 6), {"kernel_size": 2, "return_indices": True}),
    (2, (2, 6, 7), {"kernel_size": (2, 3), "dilation": 2, "padding": 1,
                    "return_indices": True}),
    (3, (1, 2, 4, 5, 5), {"kernel_size": 2, "stride": 1, "padding": 1,
                          "return_indices": True}),
    (3, (2, 4, 5, 4), {"kernel_size": (2, 3, 2), "ceil_mode": True}),
]


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("nd,shape,kwargs", MAX_CASES)
def test_max_pool_ints_as_torch(dtype, nd, shape, kwargs):
    name = f"max_pool{nd}d"
    t, f = _pair(_ints(*shape, dtype=dtype))
    ty, fy = getattr(TF, name)(t, **kwargs), getattr(F, name)(f, **kwargs)
    if kwargs.get("return_indices"):
        _check_values(ty[1], fy[1], 0)
        ty, fy = ty[0], fy[0]
    _check_values(ty, fy, 0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "complex128"])
@pytest.mark.parametrize("call", [
    lambda m, x: m.avg_pool1d(x[0], 3), lambda m, x: m.avg_pool2d(x, 3),
    lambda m, x: m.avg_pool3d(x[None], 2), lambda m, x: m.max_pool1d(x[0], 3),
    lambda m, x: m.max_pool1d(x[0], 3, return_indices=True),
    lambda m, x: m.max_pool2d(x, 3), lambda m, x: m.max_pool3d(x[None], 2),
    lambda m, x: m.local_response_norm(x, 2), lambda m, x: m.local_response_norm(x[0], 3),
])
def test_pool_dtype_refusals_as_torch(dtype, call):
    a = _complex(2, 3, 6, 6) if dtype == "complex128" else _ints(2, 3, 6, 6, dtype=dtype)
    t, f = _pair(a)
    ty, torch_error = outcome(lambda: call(TF, t))
    fy, error = outcome(lambda: call(F, f))
    assert_same_raise(torch_error, error)
    if error is not None:
        assert type(error) is type(torch_error), (torch_error, error)
        assert str(torch_error).split(" not implemented")[0] in str(error)
    else:
        for t_out, f_out in zip(*((y,) if isinstance(y, torch.Tensor | flow.Tensor) else y
                                  for y in (ty, fy))):
            _check_values(t_out, f_out, 1e-6)


@pytest.mark.parametrize("shape,size", [((2, 5, 4), 2), ((1, 6, 3, 4), 3), ((2, 3, 2, 2, 2), 4),
                                        ((0, 3, 4), 2)])
@pytest.mark.parametrize("kwargs", [{}, {"alpha": 0.3, "beta": 0.5, "k": 1.25}])
def test_local_response_norm_int64(shape, size, kwargs):
    _check_op(lambda x: TF.local_response_norm(x, size, **kwargs),
              lambda x: F.local_response_norm(x, size, **kwargs),
              [_ints(*shape)], grad=False, tol=1e-6)


@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("int64", "float64"),
                                    ("float64", "int64"), ("int32", "int64"),
                                    ("float64", "bool"), ("bool", "float64"),
                                    ("bool", "bool"), ("complex128", "complex128")])
@pytest.mark.parametrize("kwargs", [{}, {"full": True}, {"log_input": False},
                                    {"log_input": False, "full": True, "reduction": "none"},
                                    {"reduction": "sum"}])
def test_poisson_nll_loss_dtypes(dtypes, kwargs):
    def make(dtype):
        if dtype == "float64":
            return RNG.uniform(0.1, 3.0, (3, 4))
        if dtype == "complex128":
            return _complex(3, 4) + 2
        return _ints(3, 4, dtype=dtype, lo=0, hi=5)
    arrays = [make(d) for d in dtypes]
    ts, fs = zip(*(_pair(a) for a in arrays))
    _, torch_error = outcome(lambda: TF.poisson_nll_loss(*ts, **kwargs))
    _, error = outcome(lambda: F.poisson_nll_loss(*fs, **kwargs))
    assert_same_raise(torch_error, error)
    if error is None:
        _check_op(lambda x, y: TF.poisson_nll_loss(x, y, **kwargs),
                  lambda x, y: F.poisson_nll_loss(x, y, **kwargs), arrays, tol=1e-6)


@pytest.mark.parametrize("value,dtype", [(float("-inf"), "float64"), (0, "uint8"),
                                         (-2**63, "int64"), (-2**31, "int32")])
@pytest.mark.parametrize("kwargs", [{"kernel_size": 3, "stride": 1, "padding": 1},
                                    {"kernel_size": 2, "padding": 1, "dilation": 2,
                                     "ceil_mode": True}])
def test_max_pool_index_where_nothing_beats_padding(value, dtype, kwargs):
    # every window ties with the padding's lowest(): torch's index is the first tap inside
    t, f = _pair(np.full((1, 2, 4, 5), value, dtype))
    ty, ti = TF.max_pool2d(t, return_indices=True, **kwargs)
    fy, fi = F.max_pool2d(f, return_indices=True, **kwargs)
    _check_values(ty, fy, 0)
    _check_values(ti, fi, 0)
