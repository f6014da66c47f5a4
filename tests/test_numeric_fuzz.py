"""diff, gradient, trapezoid/cumulative_trapezoid, cov/corrcoef, cross, kron, vander,
cartesian_prod, combinations, tril/triu_indices, rot90, renorm, nan_to_num, float_power,
fmax/fmin, heaviside, nextafter, logaddexp, frexp/ldexp over their arguments against torch:
see tests/numeric_fuzz.py."""
from __future__ import annotations

import warnings

import fuzz_common
import numeric_fuzz as nf
import numpy as np
import pytest
import torch

import flowgrad as flow

DEFAULT = range(1200)
_KNOWN_HERE = [s for s in DEFAULT if nf.known(nf.generate(s))]


@pytest.mark.parametrize("seed", [s for s in DEFAULT if s not in _KNOWN_HERE])
def test_numeric_case_matches_torch(seed):
    verdict = nf.check(seed)
    assert verdict is None, f"{nf.generate(seed)}\n{verdict}"


@pytest.mark.slow
def test_many_numeric_cases_match_torch():
    seeds = range(1200, 20000)
    fuzz_common.assert_seeds_agree(nf.check, seeds,
                                   {s for s in seeds if nf.known(nf.generate(s))})


def _case(op, inputs, *args, **kw):
    """A fuzz case written out: inputs as (shape, dtype, values)."""
    return dict(op=op, inputs=[dict(shape=s, dtype=d, values=v) for s, d, v in inputs],
                args=list(args), kw=kw, seed=7, call="fn")


F64, I64, C128 = "float64", "int64", "complex128"
# one written case for each KNOWN entry (the default tier's seeds hold only some of them)
KNOWN_CASES = {
    "ldexp negative exponent": _case("ldexp", [((3,), F64, "normal"), ((3,), I64, "exponents")],
                                     nf.T(1)),
    "frexp subnormal": dict(_case("frexp", [((3, 3, 4), F64, "special")]), seed=3592),
    "gradient coordinates size": _case("gradient", [((3, 4), F64, "normal"),
                                                    ((4,), F64, "sorted")],
                                       dim=0, spacing=[nf.T(1)]),
    "logaddexp bool": _case("logaddexp", [((3,), "bool", "normal"), ((3,), F64, "normal")],
                            nf.T(1)),
    "vander of an infinity": dict(_case("vander", [((4,), F64, "special")], N=5,
                                        increasing=False), seed=7428),
    "complex pow at an infinity": dict(_case("float_power", [((4, 3, 2), C128, "special"),
                                                             ((4, 3, 2), F64, "ties")],
                                             nf.T(1)), seed=4572),
    "complex difference at an infinity": dict(_case("diff", [((3,), C128, "special")],
                                                    n=1, dim=-1), seed=11994),
    "renorm subnormal norm": dict(_case("renorm", [((4, 1, 1), F64, "special")], 3, -3, 0.0),
                                  seed=38866),
    "complex cov of dof <= 0": dict(_case("cov", [((5, 3), C128, "normal"),
                                                  ((3,), F64, "positive")],
                                          correction=3, aweights=nf.T(1)), seed=34670),
    "real cov of dof <= 0 at a zero sum": dict(_case("cov", [((5, 3), F64, "ties")],
                                                     correction=3), seed=5019820),
    "cov aweights dtype": _case("cov", [((3, 1), I64, "normal"), ((1,), F64, "positive")],
                                aweights=nf.T(1)),
    "cov single weighted observation": _case("cov", [((3, 1), F64, "normal"),
                                                     ((1,), F64, "positive")],
                                             aweights=nf.T(1)),
}


@pytest.mark.parametrize("name", sorted(nf.KNOWN))
def test_each_known_difference_still_differs(name):
    case = KNOWN_CASES[name]
    assert nf.known(case) == name
    assert nf.check(None, case) is not None


# ---- the bugs the fuzz found, one test each ------------------------------------------------
def _both(fn):
    """fn(module) for torch and flowgrad, warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [fn(m) for m in (torch, flow)]


def test_nan_to_num_takes_nan_none_as_zero():
    # nan=None left the nans (seed 241); torch's None is its default, 0
    want, got = _both(lambda m: m.nan_to_num(
        m.tensor([float("nan"), 1.0, float("inf")], dtype=m.float64), nan=None).numpy())
    np.testing.assert_array_equal(got, want)


def test_gradient_promotes_the_samples_with_coordinate_tensors():
    # float32 (or integer) samples at float64 coordinates: flowgrad rounded the coordinates'
    # weights to float32 and returned float32 (seeds 55, 1153); torch's result is float64
    def run(m):
        f = m.tensor([1.0, 4.1, 9.3, 16.7, 25.2], dtype=m.float32)
        x = m.tensor([0.0, 0.7, 1.9, 3.1, 3.3], dtype=m.float64)
        outs = m.gradient(f, spacing=[x], edge_order=2) + \
            m.gradient(m.tensor([1, 4, 9, 16, 25]), spacing=[x])
        return [(o.dtype, o.numpy()) for o in outs]
    want, got = _both(run)
    for (dt_w, w), (dt_g, g) in zip(want, got):
        assert str(dt_g).split(".")[-1] == str(dt_w).split(".")[-1] == "float64"
        # (torch's second-order edges of float32 samples come out rounded to float32)
        np.testing.assert_allclose(g[1:-1], w[1:-1], rtol=1e-13)
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_vander_of_bool_no_columns_or_no_points_and_negative_n():
    # bool gave bool (torch: int64, seed 1464); N=0 or an empty x gave a result that
    # required grad (torch's is off the graph, seed 131); N=-1 ran (torch raises)
    def run(m):
        x = m.tensor([0.5, 2.0], dtype=m.float64, requires_grad=True)
        empty = m.zeros(0, dtype=m.float64, requires_grad=True)
        try:
            m.vander(x, N=-1)
            refused = False
        except RuntimeError:
            refused = True
        return (m.vander(m.tensor([True, False])).numpy().dtype,
                m.vander(m.tensor([True, False])).tolist(),
                m.vander(x, N=0).requires_grad, m.vander(empty).requires_grad,
                tuple(m.vander(x, N=0).shape), refused)
    want, got = _both(run)
    assert got == want


def test_trapezoid_over_no_samples_and_bool_samples():
    # no samples: flowgrad's zeros were y.sum(dim) (on the graph, and int64 for bool y; seeds
    # 457, 2225); cumulative_trapezoid took an empty bool y (seed 166) and returned an empty
    # y unpromoted, off x's graph (seed 6841); torch checks and promotes first
    def run(m):
        y = m.zeros(2, 0, dtype=m.float64, requires_grad=True)
        x = m.zeros(0, dtype=m.float64, requires_grad=True)
        out = [m.trapezoid(y, x).requires_grad, m.trapezoid(y, dx=2.0).requires_grad,
               m.trapezoid(m.zeros(2, 0, dtype=m.bool), x).numpy().dtype,
               m.trapz(m.zeros(3, 0, dtype=m.int64)).numpy().dtype]
        c = m.cumulative_trapezoid(m.zeros(0, dtype=m.float32), x)
        out += [c.detach().numpy().dtype, c.requires_grad]
        try:
            m.cumulative_trapezoid(m.zeros(0, 3, dtype=m.bool), dim=0)
            out.append("ran")
        except RuntimeError:
            out.append("raised")
        return out
    want, got = _both(run)
    assert got == want


def test_cov_refusals_and_a_single_observation():
    # a bool input (seed 777) and weights that sum to zero (seeds 465, 1518) ran; one
    # weighted observation with dof 0 gave inf (x * w / w rounds off x) where torch's 0 / 0
    # is nan (seed 856)
    def run(m):
        x = m.tensor([[0.3, 1.7, -2.0]], dtype=m.float64)
        verdicts = []
        for fn in (lambda: m.cov(m.tensor([[True, False]])),
                   lambda: m.corrcoef(m.tensor([[True, False, True]])),
                   lambda: m.cov(x, fweights=m.tensor([0, 0, 0])),
                   lambda: m.cov(x, aweights=m.zeros(3, dtype=m.float64)),
                   lambda: m.cov(m.zeros(0, dtype=m.float64), fweights=m.zeros(0, dtype=m.long))):
            try:
                fn()
                verdicts.append("ran")
            except RuntimeError:
                verdicts.append("raised")
        one = m.cov(m.tensor(-0.2849, dtype=m.float64), aweights=m.tensor([1.3291],
                                                                          dtype=m.float64))
        return verdicts, one.item()
    (want_v, want_one), (got_v, got_one) = _both(run)
    assert got_v == want_v
    np.testing.assert_equal(got_one, want_one)


def test_renorm_passes_the_gradient_through_slices_it_leaves():
    # a slice under maxnorm is returned as it is, so its gradient is the incoming one; flowgrad
    # differentiated the unused factor too, nan at a nan element or where the norm underflows
    # to 0 (seeds 857, 874, 1848, 2385, 2417)
    def run(m):
        x = m.tensor([[float("nan"), 1.0, 2.0], [1e-310, 0.0, 0.0], [3.0, 4.0, 0.0]],
                     dtype=m.float64, requires_grad=True)
        w = m.arange(9, dtype=m.float64).reshape(3, 3)
        return [m.autograd.grad((m.renorm(x, p, 0, 2.0) * w).sum(), x)[0].numpy()
                for p in (3, 2, 0.5)]
    want, got = _both(run)
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-12)


def test_diff_of_order_zero_checks_prepend_and_append():
    # n=0 returned the input before the shape check (seed 512); torch checks the shapes (and
    # then the dim) when prepend or append is given, and neither when not
    def run(m):
        x = m.zeros(4, 4)
        out = []
        for kw in (dict(prepend=m.zeros(0, 4), dim=-1), dict(append=m.zeros(1, 3), dim=0),
                   dict(prepend=m.zeros(2, 4), dim=0), dict(dim=7)):
            try:
                out.append(tuple(m.diff(x, n=0, **kw).shape))
            except RuntimeError:
                out.append("raised")
        return out
    want, got = _both(run)
    assert got == want


def test_cross_refuses_a_dim_out_of_range():
    # dim % ndim took any dim: cross(a, b, dim=1) of 3-vectors ran as dim 0 (seeds 1185, 4607)
    def run(m):
        out = []
        for shape, dim in (((3,), 1), ((3,), -2), ((2, 3), 2), ((), 0), ((3, 3), -1)):
            for fn in (lambda a, b: m.cross(a, b, dim=dim),
                       lambda a, b: m.linalg.cross(a, b, dim=dim)):
                try:
                    out.append(tuple(fn(m.ones(shape), m.ones(shape)).shape))
                except IndexError:
                    out.append("IndexError")
        return out
    want, got = _both(run)
    assert got == want


def test_gradient_takes_no_spacing_tensor_that_requires_grad_as_a_number():
    # a 0-d spacing tensor is torch's Number only when it needs no grad; flowgrad took one
    # that required grad too (seed 989)
    def run(m):
        f = m.tensor([1.0, 4.0, 9.0], dtype=m.float64)
        h = m.tensor(0.5, dtype=m.float64)
        ok = m.gradient(f, spacing=h)[0].tolist()
        try:
            m.gradient(f, spacing=h.requires_grad_())
            return ok, "ran"
        except TypeError:
            return ok, "TypeError"
    want, got = _both(run)
    assert got == want


def test_the_norm_of_one_element_is_its_modulus():
    # sqrt(x * x) and (|x| ** p) ** (1 / p) underflowed 1e-310 to 0 and overflowed 1e200 to
    # inf; torch's norm over one element is |x| (seed 17820: renorm scaled nothing down)
    def run(m):
        x = m.tensor([[1e-310], [-1e200], [3.0]], dtype=m.float64)
        out = [m.linalg.vector_norm(x, p, dim=1).tolist() for p in (2, 3, 0.5, 1)]
        out.append(m.tensor(-1e-310, dtype=m.float64).norm().item())
        out.append(m.renorm(x, 2, 0, 0.5).tolist())
        return out
    want, got = _both(run)
    assert got == want
