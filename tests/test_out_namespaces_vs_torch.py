"""torch's `out=` on torch.linalg.*, torch.special.* and the torch.* functions the first table
(test_out_argument_vs_torch.py) leaves out: the same raise/no-raise as torch for an `out` of
each dtype and shape, `out` returned, resized and written with torch's values and dtype; a
function of several results takes a tuple of outs. Before, all of these raised TypeError."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from vs_torch import assert_same_raise, outcome, outcome_into, outcome_out

import flowgrad as flow


def _operands(T):
    a = T.tensor([[1.5, -2.0, 3.0], [0.5, 2.0, -1.0]])
    return dict(
        a=a, b=T.tensor([[2.0, 1.0, 3.0], [1.0, 2.0, 1.0]]),
        p=T.tensor([[0.1, 0.5, 0.9], [0.25, 0.75, 0.3]]),
        sq=T.tensor([[2.0, 0.5], [0.5, 3.0]]), b2=T.tensor([[1.0], [2.0]]),
        v=T.tensor([1.0, -2.0, 0.5]), tall=T.tensor([[1.5, 0.5], [-2.0, 2.0], [3.0, -1.0]]),
        ai=T.tensor([[1, 2, 3], [4, 5, 6]]),
        t4=T.tensor([[[[2.0, 0.5], [0.0, 1.0]], [[0.0, 0.0], [1.0, 0.0]]],
                     [[[0.0, 1.0], [0.0, 0.0]], [[1.0, 0.0], [0.5, 3.0]]]]))


def _linalg_calls(T):
    L, o = T.linalg, _operands(T)
    a, sq, b2, v, tall, t4 = o["a"], o["sq"], o["b2"], o["v"], o["tall"], o["t4"]
    return {
        "linalg.cholesky": lambda out: L.cholesky(sq, out=out),
        "linalg.cond": lambda out: L.cond(sq, out=out),
        "linalg.cross": lambda out: L.cross(v, v.flip(0), out=out),
        "linalg.det": lambda out: L.det(sq, out=out),
        "linalg.eigvalsh": lambda out: L.eigvalsh(sq, out=out),
        "linalg.eigvals": lambda out: L.eigvals(sq, out=out),
        "linalg.inv": lambda out: L.inv(sq, out=out),
        "linalg.matmul": lambda out: L.matmul(a, tall, out=out),
        "linalg.matrix_norm": lambda out: L.matrix_norm(a, out=out),
        "linalg.matrix_power": lambda out: L.matrix_power(sq, 3, out=out),
        "linalg.matrix_rank": lambda out: L.matrix_rank(a, out=out),
        "linalg.multi_dot": lambda out: L.multi_dot([a, tall, sq], out=out),
        "linalg.norm": lambda out: L.norm(a, out=out),
        "linalg.pinv": lambda out: L.pinv(a, out=out),
        "linalg.solve": lambda out: L.solve(sq, b2, out=out),
        "linalg.solve_triangular": lambda out: L.solve_triangular(L.cholesky(sq), b2,
                                                                  upper=False, out=out),
        "linalg.svdvals": lambda out: L.svdvals(a, out=out),
        "linalg.tensorinv": lambda out: L.tensorinv(t4, ind=2, out=out),
        "linalg.tensorsolve": lambda out: L.tensorsolve(t4, sq, out=out),
        "linalg.vecdot": lambda out: L.vecdot(a, a, out=out),
        "linalg.vector_norm": lambda out: L.vector_norm(a, 3, dim=1, out=out),
        "linalg.householder_product": lambda out: L.householder_product(tall, v[:2], out=out),
        "linalg.ldl_solve": lambda out: L.ldl_solve(*L.ldl_factor(sq), b2, out=out),
        "linalg.lu_solve": lambda out: L.lu_solve(*L.lu_factor(sq), b2, out=out),
    }


_SPECIAL_UNARY = {
    "a": ("airy_ai", "bessel_j0", "bessel_j1", "erf", "erfc", "erfcx", "exp2", "expit", "expm1",
          "i0", "i0e", "i1", "i1e", "log_ndtr", "modified_bessel_i0", "modified_bessel_i1",
          "ndtr", "round", "sinc", "spherical_bessel_j0"),
    "b": ("bessel_y0", "bessel_y1", "digamma", "gammaln", "log1p", "modified_bessel_k0",
          "modified_bessel_k1", "psi", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1"),
    "p": ("entr", "erfinv", "logit", "ndtri"),
}
_POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
                "laguerre_polynomial_l", "legendre_polynomial_p",
                "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
                "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w")


def _special_calls(T):
    S, o = T.special, _operands(T)
    a, b = o["a"], o["b"]
    calls = {f"special.{name}": (lambda out, f=getattr(S, name), x=o[arg]: f(x, out=out))
             for arg, names in _SPECIAL_UNARY.items() for name in names}
    calls.update({f"special.{name}": (lambda out, f=getattr(S, name): f(o["p"], 3, out=out))
                  for name in _POLYNOMIALS})
    calls.update({
        "special.gammainc": lambda out: S.gammainc(b, b, out=out),
        "special.gammaincc": lambda out: S.gammaincc(b, b, out=out),
        "special.xlog1py": lambda out: S.xlog1py(a, b, out=out),
        "special.xlogy": lambda out: S.xlogy(a, b, out=out),
        "special.zeta": lambda out: S.zeta(b + 1, b, out=out),
        "special.polygamma": lambda out: S.polygamma(1, b, out=out),
        "special.multigammaln": lambda out: S.multigammaln(b + 1, 2, out=out),
        "special.logsumexp": lambda out: S.logsumexp(a, 1, out=out),
    })
    return calls


def _torch_calls(T):
    o = _operands(T)
    a, sq, b2, ai = o["a"], o["sq"], o["b2"], o["ai"]
    index = T.tensor([2, 0, 1])
    return {
        "cholesky": lambda out: T.cholesky(sq, out=out),
        "chain_matmul": lambda out: T.chain_matmul(a, a.T, sq, out=out),
        "lu_solve": lambda out: T.lu_solve(b2, *T.linalg.lu_factor(sq), out=out),
        "multinomial": lambda out: T.multinomial(T.tensor([0.0, 1.0]), 3, replacement=True,
                                                 out=out),
        "kron": lambda out: T.kron(sq, sq, out=out),
        "matrix_power": lambda out: T.matrix_power(sq, 2, out=out),
        "mvlgamma": lambda out: T.mvlgamma(sq + 1, 2, out=out),
        "narrow_copy": lambda out: T.narrow_copy(a, 1, 0, 2, out=out),
        "nonzero": lambda out: T.nonzero(a > 0, out=out),
        "ormqr": lambda out: T.ormqr(*T.geqrf(sq), sq, out=out),
        "polar": lambda out: T.polar(sq, sq, out=out),
        "complex": lambda out: T.complex(sq, sq, out=out),
        "range": lambda out: T.range(0, 3, out=out),
        "isin": lambda out: T.isin(ai, ai[0], out=out),
        "clamp_min": lambda out: T.clamp_min(a, 0, out=out),
        "clamp_max": lambda out: T.clamp_max(a, 0, out=out),
        "softmax": lambda out: T.softmax(a, 1, out=out),
        "log_softmax": lambda out: T.log_softmax(a, 1, out=out),
        "index_add": lambda out: T.index_add(a, 1, index, a, out=out),
        "index_copy": lambda out: T.index_copy(a, 1, index, a, out=out),
        "scatter": lambda out: T.scatter(a, 1, ai % 3, a, out=out),
        "scatter_add": lambda out: T.scatter_add(a, 1, ai % 3, a, out=out),
        "take": lambda out: T.take(a, index, out=out),
    }


def _calls(T):
    return {**_linalg_calls(T), **_special_calls(T), **_torch_calls(T)}


NAMES = list(_calls(flow))
OUTS = [("float32", (2, 3)), ("float32", (0,)), ("float64", (2, 3)), ("int64", (2, 3)),
        ("complex64", (0,)), ("bfloat16", (0,)), ("bool", (0,))]


def _run(T, name, dtype, shape):
    return outcome_out(_calls(T)[name], T.zeros(shape, dtype=getattr(T, dtype)))


def _values(t, T):
    return t.detach().to(T.complex128 if t.is_complex() else T.float64).numpy()


@pytest.mark.parametrize("dtype,shape", OUTS, ids=[f"{d}-{s}" for d, s in OUTS])
@pytest.mark.parametrize("name", NAMES)
def test_namespace_out_as_torch(name, dtype, shape):
    expected, torch_error = _run(torch, name, dtype, shape)
    got, error = _run(flow, name, dtype, shape)
    assert_same_raise(torch_error, error)
    if expected is not None:
        assert tuple(got.shape) == tuple(expected.shape)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_allclose(_values(got, flow), _values(expected, torch), rtol=1e-2,
                                   atol=1e-5 if name != "multinomial" else 0)


def _tuple_calls(T):
    L, o = T.linalg, _operands(T)
    a, sq, b2 = o["a"], o["sq"], o["b2"]
    return {
        "linalg.cholesky_ex": lambda out: L.cholesky_ex(sq, out=out),
        "linalg.eig": lambda out: L.eig(sq, out=out),
        "linalg.eigh": lambda out: L.eigh(sq, out=out),
        "linalg.inv_ex": lambda out: L.inv_ex(sq, out=out),
        "linalg.ldl_factor": lambda out: L.ldl_factor(sq, out=out),
        "linalg.ldl_factor_ex": lambda out: L.ldl_factor_ex(sq, out=out),
        "linalg.lu": lambda out: L.lu(sq, out=out),
        "linalg.lu_factor": lambda out: L.lu_factor(sq, out=out),
        "linalg.lu_factor_ex": lambda out: L.lu_factor_ex(sq, out=out),
        "linalg.qr": lambda out: L.qr(a, out=out),
        "linalg.slogdet": lambda out: L.slogdet(sq, out=out),
        "linalg.solve_ex": lambda out: L.solve_ex(sq, b2, out=out),
        "linalg.svd": lambda out: L.svd(a, full_matrices=False, out=out),
        "linalg.lstsq": lambda out: L.lstsq(sq, b2, out=out),
        "svd": lambda out: T.svd(a, out=out),
        "geqrf": lambda out: T.geqrf(a, out=out),
        "histogram": lambda out: T.histogram(a, 4, out=out),
        "lu_unpack": lambda out: T.lu_unpack(*L.lu_factor(sq), out=out),
        "triangular_solve": lambda out: T.triangular_solve(b2, L.cholesky(sq), upper=False,
                                                           out=out),
        "qr": lambda out: T.qr(a, out=out),
        "slogdet": lambda out: T.slogdet(sq, out=out),
        "median": lambda out: T.median(a, 1, out=out),
        "nanmedian": lambda out: T.nanmedian(a, 1, out=out),
    }


TUPLE_NAMES = list(_tuple_calls(flow))
VARIANTS = ["right dtypes", "empty", "wrong shape", "float64 first", "int64 last",
            "one tensor", "one fewer", "requires grad"]


def _run_tuple(T, name, variant):
    call = _tuple_calls(T)[name]
    results = call(None)  # (out=None: torch's plain call) the dtypes the outs must have
    dtypes = [r.dtype for r in results]
    shape = (0,) if variant == "empty" else (5, 1) if variant == "wrong shape" else None
    outs = [T.zeros(shape if shape is not None else tuple(r.shape), dtype=d)
            for r, d in zip(results, dtypes)]
    if variant == "float64 first":
        outs[0] = outs[0].to(T.complex128 if outs[0].is_complex() else T.float64)
    if variant == "int64 last":
        outs[-1] = outs[-1].to(T.int64)
    if variant == "requires grad":
        outs[0] = T.zeros(outs[0].shape, requires_grad=True)
    outs = outs[0] if variant == "one tensor" else tuple(outs[:-1] if variant == "one fewer"
                                                         else outs)
    return outcome_into(call, outs)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", TUPLE_NAMES)
def test_namespace_out_tuple_as_torch(name, variant):
    """torch.linalg.eigh(A, out=(values, vectors)), svd, qr, lu, ...: each `out` written
    (resized) and returned in the named tuple; a wrong dtype or count raises where torch's
    does. Signs of singular and eigenvectors are LAPACK's choice: compared in absolute value."""
    expected, torch_error = _run_tuple(torch, name, variant)
    got, error = _run_tuple(flow, name, variant)
    assert_same_raise(torch_error, error)
    if expected is not None:
        for g, e in zip(got, expected):
            assert tuple(g.shape) == tuple(e.shape)
            assert str(g.dtype).split(".")[-1] == str(e.dtype).split(".")[-1]
            np.testing.assert_allclose(np.abs(_values(g, flow)), np.abs(_values(e, torch)),
                                       rtol=1e-4, atol=1e-5)


def _every_call(T):
    import test_out_argument_vs_torch as first

    return {**first._calls(T), **_calls(T)}


def _result_dtype(call, T):
    """The dtype of a call's result: the first `out` dtype torch's call accepts."""
    for dtype in (T.float32, T.int64, T.bool, T.complex64):
        result, error = outcome(lambda: call(T.zeros(0, dtype=dtype)))
        if error is None:
            return result.dtype
    return None


@pytest.mark.parametrize("name", list(_every_call(flow)))
def test_out_requiring_grad_as_torch(name):
    """An `out` that requires grad: torch refuses it for the functions it differentiates (out=
    results are not differentiable) and writes it for the others (comparisons, histc, the
    Bessel functions and orthogonal polynomials of torch.special)."""
    outcomes = []
    for T in (torch, flow):
        call = _every_call(T)[name]
        dtype = _result_dtype(call, T)
        if dtype is None or not (dtype.is_floating_point or dtype.is_complex):
            pytest.skip("no floating result: an out of its dtype cannot require grad")
        outcomes.append(outcome(lambda: call(T.zeros(0, dtype=dtype, requires_grad=True)))[1])
    assert_same_raise(*outcomes)


def _input_calls(T, x):
    index = T.tensor([0.0, 1.0])
    return {
        "eq": lambda o: T.eq(x, x, out=o), "lt": lambda o: T.lt(x, 0.5, out=o),
        "logical_and": lambda o: T.logical_and(x, x, out=o),
        "logical_not": lambda o: T.logical_not(x, out=o),
        "argmax": lambda o: T.argmax(x, 0, out=o), "any": lambda o: T.any(x, 0, out=o),
        "all": lambda o: T.all(x, 0, out=o), "isneginf": lambda o: T.isneginf(x, out=o),
        "signbit": lambda o: T.signbit(x, out=o), "isin": lambda o: T.isin(x, x, out=o),
        "bucketize": lambda o: T.bucketize(x, index, out=o),
        "searchsorted": lambda o: T.searchsorted(index, x, out=o),
        "nonzero": lambda o: T.nonzero(x, out=o), "histc": lambda o: T.histc(x, 4, out=o),
        "floor_divide": lambda o: T.floor_divide(x, x, out=o),
        "heaviside": lambda o: T.heaviside(x, x, out=o),
        "exp": lambda o: T.exp(x, out=o), "sum": lambda o: T.sum(x, 0, out=o),
        "linalg.matrix_rank": lambda o: T.linalg.matrix_rank(x.reshape(1, 3), out=o),
        "linalg.norm": lambda o: T.linalg.norm(x, out=o),
        "special.bessel_j0": lambda o: T.special.bessel_j0(x, out=o),
        "special.erf": lambda o: T.special.erf(x, out=o),
    }


@pytest.mark.parametrize("name", list(_input_calls(flow, flow.zeros(3))))
def test_out_with_inputs_requiring_grad_as_torch(name):
    """Inputs that require grad: out= raises for a function torch differentiates and runs for
    one it never does, as torch."""
    outcomes = []
    for T in (torch, flow):
        dtype = _result_dtype(_input_calls(T, T.tensor([1.0, -2.0, 3.0]))[name], T)
        x = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
        result, error = outcome(lambda: _input_calls(T, x)[name](T.zeros(0, dtype=dtype)))
        outcomes.append((result, error))
    assert_same_raise(outcomes[0][1], outcomes[1][1])
    if outcomes[0][1] is None:
        np.testing.assert_allclose(_values(outcomes[1][0], flow), _values(outcomes[0][0], torch),
                                   rtol=1e-6)


@pytest.mark.parametrize("call", [
    lambda T, x: T.sum(x, 1, dtype=T.bool), lambda T, x: T.sum(x, dtype=T.bool),
    lambda T, x: x.sum(0, dtype=T.bool), lambda T, x: T.nansum(x, 1, dtype=T.bool),
    lambda T, x: T.cumsum(x, 1, dtype=T.bool), lambda T, x: T.cumprod(x, 0, dtype=T.bool),
    lambda T, x: T.logsumexp(x), lambda T, x: x.logsumexp(),
    lambda T, x: T.special.logsumexp(x), lambda T, x: T.logsumexp(x, 1),
    lambda T, x: T.range(0, 3, dtype=T.bool), lambda T, x: T.range(0, 3, dtype=T.complex64),
    lambda T, x: T.nansum(x, 1, dtype=T.complex64), lambda T, x: T.nanmean(x, dtype=T.complex64),
    lambda T, x: T.nansum(x.long(), 1, dtype=T.complex64),
    lambda T, x: T.linalg.vector_norm(x, dtype=T.complex64),
    lambda T, x: T.linalg.vector_norm(x.to(T.complex64), dtype=T.float64),
    lambda T, x: T.linalg.vector_norm(x.to(T.complex64), dtype=T.complex128),
    lambda T, x: T.linalg.vector_norm(x.double(), dtype=T.float32),
    lambda T, x: T.linalg.matrix_norm(x, dtype=T.float16),
    lambda T, x: T.linalg.matrix_norm(x, 1, dtype=T.complex64),
    lambda T, x: T.linalg.matrix_norm(x, "nuc", dtype=T.float64),
    lambda T, x: T.linalg.norm(x, dim=1, dtype=T.complex64),
    lambda T, x: T.any(x, dim=()), lambda T, x: T.all(x, dim=[], keepdim=True),
    lambda T, x: (x > 0).any(()), lambda T, x: T.sum(x, dim=()), lambda T, x: T.amax(x, ()),
], ids=["sum-bool", "sum-all-bool", "method-sum-bool", "nansum-bool", "cumsum-bool",
        "cumprod-bool", "logsumexp-no-dim", "method-logsumexp-no-dim",
        "special-logsumexp-no-dim", "logsumexp", "range-bool", "range-complex",
        "nansum-complex", "nanmean-complex", "nansum-int-complex", "vector_norm-real-complex",
        "vector_norm-complex-real", "vector_norm-complex-wider", "vector_norm-narrower",
        "matrix_norm-narrower", "matrix_norm-real-complex", "matrix_norm-nuc-wider",
        "norm-real-complex", "any-no-dims", "all-no-dims", "method-any-no-dims",
        "sum-no-dims", "amax-no-dims"])
def test_reduction_dtypes_and_dims_as_torch(call):
    """A sum in bool is torch's saturating one (any nonzero), not a count; a scan in bool and
    a range of bools or complex numbers are refused; logsumexp needs its dim; a norm's dtype=
    is of the input's kind (real or complex) and never narrower; nansum of floats refuses a
    complex dtype; all/any over an empty dim tuple reduce nothing (sum and amax: everything).
    """
    data = [[1.5, -2.0, 0.0], [0.0, 0.0, -1.0]]
    expected, torch_error = outcome(lambda: call(torch, torch.tensor(data)))
    got, error = outcome(lambda: call(flow, flow.tensor(data)))
    assert_same_raise(torch_error, error)
    if torch_error is None:
        assert tuple(got.shape) == tuple(expected.shape)
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        np.testing.assert_allclose(_values(got, flow), _values(expected, torch), rtol=1e-6)


# torch parses the arguments before any check of out=: a wrong count or a wrong type with an
# out overlapping an input is torch's TypeError, where flowgrad's partial-overlap check came
# first (RuntimeError) for every special function and the torch.* ones taking out=
_PARSED_FIRST = {
    "special.erf extra": lambda m, x, o: m.special.erf(x, x.clone(), out=o),
    "special.xlogy extra": lambda m, x, o: m.special.xlogy(x, x.clone(), x.clone(), out=o),
    "special.zeta one": lambda m, x, o: m.special.zeta(x, out=o),
    "special.logit eps": lambda m, x, o: m.special.logit(x, x.clone(), out=o),
    "special.polygamma n": lambda m, x, o: m.special.polygamma(x, x.clone(), out=o),
    "special.polygamma float n": lambda m, x, o: m.special.polygamma(1.0, x, out=o),
    "special.multigammaln p": lambda m, x, o: m.special.multigammaln(x + 3, x.clone(), out=o),
    "erf extra": lambda m, x, o: m.erf(x, x.clone(), out=o),
    "cumsum dim": lambda m, x, o: m.cumsum(x, x.clone(), out=o),
    "aminmax one out": lambda m, x, o: m.aminmax(x, out=o),
    "logit eps fits": lambda m, x, o: m.special.logit(x, m.tensor(0.2), out=o),
}


@pytest.mark.parametrize("case", sorted(_PARSED_FIRST))
def test_arguments_are_parsed_before_out_is_checked(case):
    def kind(m):
        x = m.arange(1.0, 7.0) / 7
        try:
            _PARSED_FIRST[case](m, x[:4], x[1:5])
        except Exception as e:  # noqa: BLE001 (the class is what is compared)
            return type(e).__name__
        return "ran"
    assert kind(flow) == kind(torch)


# found by tests/out_arg_fuzz.py (seeds named in each)
@pytest.mark.parametrize("name", ["logical_not_", "logical_and_", "logical_or_", "logical_xor_"])
@pytest.mark.parametrize("target", ["leaf", "view"])
def test_logical_writes_run_on_a_leaf_that_requires_grad(name, target):
    # torch does not differentiate them: a leaf (or a view of one) that requires grad takes
    # the write and stays a leaf (seeds 10000014, 10000029: flowgrad refused it as a leaf's)
    def run(m):
        a = m.tensor([0.5, -1.0, 0.0], dtype=m.float64, requires_grad=True)
        x = a if target == "leaf" else a[:2]
        args = () if name == "logical_not_" else (m.tensor(1.0, dtype=m.float64),)
        getattr(x, name)(*args)
        (a * 3).sum().backward()
        return a.tolist(), a.is_leaf, a.requires_grad, a.grad.tolist()
    assert run(flow) == run(torch)


@pytest.mark.parametrize("shape", [(1, 2), (2,), (5,)])
def test_matmul_of_a_vector_by_a_matrix_resizes_out_as_torch(shape):
    # torch writes the mm of the (1, n) row into out, then squeezes it: an out of (1, m) is
    # no resize (no warning), one of (m,) is (seed 10000222: flowgrad's warnings the reverse)
    def run(m):
        out = m.zeros(shape, dtype=m.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.matmul(m.arange(3.0, dtype=m.float64), m.ones(3, 2, dtype=m.float64), out=out)
        return tuple(out.shape), out.tolist(), len(caught)
    assert run(flow) == run(torch)


def test_matrix_power_one_into_an_out_sharing_part_of_a_refuses():
    # n = 1 is torch's out.copy_(A), whose overlap check refuses an out sharing part of A
    # (out_arg_fuzz 10003021: flowgrad wrote it); A itself as out is the same elements
    def run(m, lo):
        base = m.arange(16.0, dtype=m.float64)
        try:
            m.linalg.matrix_power(base[:8].view(2, 2, 2), 1, out=base[lo:lo + 8].view(2, 2, 2))
        except RuntimeError:
            return "refused"
        return base.tolist()
    for lo in (0, 4, 8):
        assert run(flow, lo) == run(torch, lo)


@pytest.mark.parametrize("shape", [(0,), (2, 0), (2,)])
def test_cummax_of_complex_runs_only_without_elements(shape):
    # torch's cummax/cummin kernel runs for no element and refuses complex otherwise with
    # NotImplementedError (out_arg_fuzz 10001183: flowgrad's RuntimeError for an empty one)
    def run(m):
        try:
            values, indices = m.cummax(m.zeros(shape, dtype=m.complex128), -1)
        except NotImplementedError:
            return "NotImplementedError"
        return tuple(values.shape), str(values.dtype)[-10:], str(indices.dtype)[-5:]
    assert run(flow) == run(torch)
