"""The written forward-mode rules beyond first order (the op tables' jvp column checks first
order): forward over forward, vmap over jvp, and what a tangent records, against torch."""
import numpy as np
import pytest
import torch

import flowgrad as flow

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 3))
B = RNG.standard_normal((2, 3, 4))


def _sym(a):
    return a + a.mT


# scalar functions of one matrix through the decomposition rules, free of sign conventions
SECOND_ORDER = [
    ("svdvals", lambda m, a: m.linalg.svdvals(a).pow(3).sum(), A),
    ("svd_u", lambda m, a: (m.linalg.svd(a, full_matrices=False)[0][:, 0] ** 2 * m.arange(
        3.0, dtype=a.dtype)).sum(), A),
    ("eigvalsh", lambda m, a: (m.linalg.eigvalsh(_sym(a)) ** 2).sum(), A),
    ("eigh_v", lambda m, a: (m.linalg.eigh(_sym(a))[1][:, 0] ** 2).prod(), A),
    ("qr_r", lambda m, a: (m.linalg.qr(a)[1] ** 2).sum(), A),
    ("qr_wide", lambda m, a: (m.linalg.qr(a[:2])[1] ** 2).sum(), A),
    ("logcumsumexp", lambda m, a: m.logcumsumexp(a * 3, 1).sin().sum(), A),
]


@pytest.mark.parametrize("fn,a", [c[1:] for c in SECOND_ORDER], ids=[c[0] for c in SECOND_ORDER])
def test_forward_over_forward_matches_torch_hessian(fn, a):
    ours = flow.func.jacfwd(flow.func.jacfwd(lambda x: fn(flow, x)))(flow.tensor(a))
    theirs = torch.func.hessian(lambda x: fn(torch, x))(torch.tensor(a))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("name", ["svd", "qr", "eigh"])
def test_vmap_over_jvp_matches_torch(name):
    def f(m, a):
        if name == "svd":
            return m.linalg.svdvals(a)
        if name == "qr":
            return m.linalg.qr(a)[1].abs()
        return m.linalg.eigvalsh(a @ a.mT)

    def run(m, b, t):
        return m.func.vmap(lambda a, u: m.func.jvp(lambda x: f(m, x), (a,), (u,))[1])(b, t)
    t = RNG.standard_normal(B.shape)
    ours = run(flow, flow.tensor(B), flow.tensor(t))
    theirs = run(torch, torch.tensor(B), torch.tensor(t))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-10)


@pytest.mark.parametrize("grad_on", [True, False])
def test_tangent_records_only_as_torch(grad_on):
    """A tangent has a grad_fn when grad mode is on and its primal requires grad, not else,
    through a written rule (sin), a linalg rule (qr) and a derived one (cumprod)."""
    for m in (flow, torch):
        x = m.tensor(A).requires_grad_()
        with m.set_grad_enabled(grad_on):
            for f in (m.sin, lambda a: m.linalg.qr(a)[0], lambda a: a.cumprod(0)):
                _, tan = m.func.jvp(f, (x,), (m.ones(3, 3, dtype=x.dtype),))
                assert (tan.grad_fn is not None) == grad_on == tan.requires_grad, (m, f)


def test_detach_drops_the_tangent():
    import flowgrad.autograd.forward_ad as fwAD
    x = flow.tensor([1.0, 2.0])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, flow.tensor([1.0, 1.0]))
        assert fwAD.unpack_dual(d.detach()).tangent is None
        assert fwAD.unpack_dual(d * 2).tangent.tolist() == [2.0, 2.0]
        y = d.detach()
        y.add_(1)  # still the same storage
        assert x.tolist() == [2.0, 3.0]


def test_forward_mode_through_complex_values_matches_torch():
    """Tangents through complex intermediates (real -> complex -> real) and complex duals
    (the complex table's jvp column checks each op)."""
    a, t = RNG.standard_normal(3), RNG.standard_normal(3)
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    for f, x, tx in ((lambda m, a: (a * (1 + 2j)).abs().sum(), a, t),
                     (lambda m, a: m.fft.rfft(a).abs().sum(), a, t),
                     (lambda m, z: (z * z.conj()).exp() / z, z, 1j * z)):
        ours = flow.func.jvp(lambda x: f(flow, x), (flow.tensor(x),), (flow.tensor(tx),))
        theirs = torch.func.jvp(lambda x: f(torch, x), (torch.tensor(x),), (torch.tensor(tx),))
        np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), atol=1e-10)
    with flow.autograd.forward_ad.dual_level():
        dual = flow.autograd.forward_ad.make_dual(flow.tensor(z), flow.tensor(z))
        tangent = flow.autograd.forward_ad.unpack_dual(dual * dual).tangent
    np.testing.assert_allclose(tangent.numpy(), 2 * z * z)


def test_complex_tangents_through_transforms_match_torch():
    """Forward over forward, vmap over jvp and reverse over forward with complex tangents."""
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    t1, t2 = (RNG.standard_normal(3) + 1j * RNG.standard_normal(3) for _ in range(2))

    def run(m):
        def f(z):
            return (z.exp() * z.conj() / (z + 3)).abs() + (z * z).real

        def inner(z):
            return m.func.jvp(f, (z,), (m.tensor(t1),))[1]
        fof = m.func.jvp(inner, (m.tensor(z),), (m.tensor(t2),))[1]
        vj = m.func.vmap(lambda t: m.func.jvp(lambda z: f(z) * 1j, (m.tensor(z),), (t,))[1])(
            m.tensor(np.stack([t1, t2])))
        zz = m.tensor(z, requires_grad=True)
        rof = m.autograd.grad(inner(zz).sum(), zz)[0]
        return [r.detach().numpy() for r in (fof, vj, rof)]
    for ours, theirs in zip(run(flow), run(torch)):
        np.testing.assert_allclose(ours, theirs, atol=1e-10)


def test_jacfwd_refuses_complex_inputs_and_outputs_as_torch():
    """A basis of real tangents misses the imaginary directions: torch.func.jacfwd raises."""
    z, x = flow.tensor([1.0 + 2.0j]), flow.tensor([1.0])
    with pytest.raises(RuntimeError, match="Expected all inputs to be real"):
        flow.func.jacfwd(lambda z: z * z)(z)
    with pytest.raises(RuntimeError, match="Expected all outputs to be real"):
        flow.func.jacfwd(lambda x: x * 1j)(x)
    np.testing.assert_allclose(flow.func.jacfwd(lambda x: (x * 1j).exp().real)(x).numpy(),
                               [[-np.sin(1.0)]])


@pytest.mark.parametrize("op", ["mul_", "add_", "sub_", "div_"])
def test_in_place_op_with_itself_as_operand_has_the_true_tangent(op):
    """t.mul_(t) and the like under forward AD: the tangent of the result is the derivative
    of the out-of-place op at the values before the write, checked by central differences.
    torch 2.13's mul_ rule reads the tangent it has already overwritten: t.mul_(t) gets
    dt t (1 + t) instead of 2 t dt (vmap_fuzz jvp_of_grad 45830, 5218 differ by that alone),
    so torch is not the oracle here."""
    def f(x):
        t = x.exp()
        getattr(t, op)(t)
        return t
    x, v = np.array([0.46, -0.3]), np.array([0.7, -1.1])
    tangent = flow.func.jvp(f, (flow.tensor(x),), (flow.tensor(v),))[1].numpy()
    h = 1e-6
    numeric = (f(flow.tensor(x + h * v)).numpy() - f(flow.tensor(x - h * v)).numpy()) / (2 * h)
    np.testing.assert_allclose(tangent, numeric, rtol=1e-7, atol=1e-9)


def _tangent(m, fn, *duals):
    """fn's result's tangent (None, or a list) with each (value, tangent) pair made dual."""
    ad = m.autograd.forward_ad
    with ad.dual_level():
        args = [ad.make_dual(m.tensor(v, dtype=m.float64), m.tensor(t, dtype=m.float64))
                if t is not None else m.tensor(v, dtype=m.float64) for v, t in duals]
        t = ad.unpack_dual(fn(m, *args)).tangent
        return None if t is None else t.tolist()


@pytest.mark.parametrize("bounds", ["both", "min", "max"])
def test_clamp_tensor_bounds_tangent_is_torchs_at_ties_nans_and_crossed_bounds(bounds):
    # torch's clamp_jvp takes a bound's tangent at a tie where its reverse rule passes the
    # input's gradient; flowgrad derived the reverse rule's choice
    import itertools

    def clamp(m, x, lo, hi):
        return m.clamp(x, min=None if bounds == "max" else lo, max=None if bounds == "min"
                       else hi)
    for (x, lo, hi), dual in itertools.product(itertools.product([np.nan, 0.0, 1.0], repeat=3),
                                               itertools.product([0, 1], repeat=3)):
        duals = [([v], [float(k)] if d else None) for v, k, d in zip((x, lo, hi), (2, 3, 5),
                                                                        dual)]
        ours, theirs = _tangent(flow, clamp, *duals), _tangent(torch, clamp, *duals)
        assert ours == theirs or (theirs is None and ours == [0.0]), (x, lo, hi, dual)


SAMPLERS = [
    ("normal_mean", lambda m, d: m.normal(d, m.ones(3, dtype=m.float64))),
    ("normal_std", lambda m, d: m.normal(m.zeros(3, dtype=m.float64), d.abs())),
    ("normal_number", lambda m, d: m.normal(d, 2.0)),
    ("bernoulli", lambda m, d: m.bernoulli(d.abs() / 3)),
    ("poisson", lambda m, d: m.poisson(d.abs())),
    ("Normal.sample", lambda m, d: m.distributions.Normal(d, 1.0).sample()),
    ("LogNormal.sample", lambda m, d: m.distributions.LogNormal(d, 1.0).sample((2,))),
    ("Independent.sample", lambda m, d: m.distributions.Independent(
        m.distributions.Normal(d, 1.0), 1).sample()),
    ("Poisson.sample", lambda m, d: m.distributions.Poisson(d.abs()).sample()),
]


@pytest.mark.parametrize("name,fn", SAMPLERS, ids=[c[0] for c in SAMPLERS])
def test_a_samples_tangent_is_zeros_as_torchs(name, fn):
    # the samplers' tangents were absent (None), and Normal.sample (rsample under no_grad,
    # which forward mode ignores) moved with loc: torch's sample() draws by torch.normal
    duals = [([0.5, -1.0, 2.0], [1.0, 1.0, 1.0])]
    ours, theirs = _tangent(flow, fn, *duals), _tangent(torch, fn, *duals)
    assert set(np.ravel(ours)) == {0.0}
    if name == "normal_std":  # (torch's is None where only normal's std is dual)
        theirs = ours if theirs is None else theirs
    assert ours == theirs


def test_a_sample_broadcast_over_its_parameters_has_a_tangent_of_its_shape():
    # (torch raises: it gives the tangent the parameter's shape; zeros of the sample's shape
    # are what its zero derivative means)
    for fn in (lambda m, d: m.normal(d, m.ones(2, 1, dtype=m.float64)),
               lambda m, d: m.normal(m.zeros(2, 1, dtype=m.float64), d.abs()),
               lambda m, d: m.distributions.HalfNormal(d.abs()).sample((2,))):
        assert _tangent(flow, fn, ([0.5, 1.0, 2.0], [1.0, 1.0, 1.0])) == [[0.0] * 3] * 2


@pytest.mark.parametrize("fn", [
    lambda m, d: m.bernoulli(d.abs() / 3, 0.5),
    lambda m, d: m.distributions.Gamma(d.abs(), 1.0).sample(),
    lambda m, d: m.distributions.Binomial(3, d.abs() / 3).sample(),
], ids=["bernoulli_p", "Gamma.sample", "Binomial.sample"])
def test_samplers_without_a_forward_formula_refuse_a_dual_as_torch(fn):
    for m in (torch, flow):
        with pytest.raises(NotImplementedError):
            _tangent(m, fn, ([0.5, 1.0, 2.0], [1.0, 1.0, 1.0]))


@pytest.mark.parametrize("name,fn", [
    ("binomial", lambda m, p: m.binomial(m.tensor([3.0, 4.0]), p)),
    ("ldl_factor", lambda m, p: m.linalg.ldl_factor(m.diag(p + 1))[0]),
    ("ldl_factor_ex", lambda m, p: m.linalg.ldl_factor_ex(m.diag(p + 1))[0]),
], ids=["binomial", "ldl_factor", "ldl_factor_ex"])
def test_outputs_without_a_derivative_require_grad_and_refuse_a_backward_as_torchs(name, fn):
    # flowgrad's required no grad: a loss through them ran, their term silently left out
    for m in (torch, flow):
        p = m.tensor([0.3, 0.6], requires_grad=True)
        y = fn(m, p)
        assert y.requires_grad
        with pytest.raises(RuntimeError, match=name[:10]):
            (y.sum() + p.sum()).backward()


def test_bernoulli_fill_by_probabilities_requiring_grad_gives_them_zeros_as_torch():
    # the probabilities were detached: the result required no grad, a loss through it raised
    for m in (torch, flow):
        p = m.tensor([0.3, 0.6], dtype=m.float64, requires_grad=True)
        m.manual_seed(0)
        y = m.zeros(2, dtype=m.float32).bernoulli_(p)
        assert y.requires_grad
        (y * 3).sum().backward()
        assert p.grad.tolist() == [0.0, 0.0]


# torch's own forward formulas where they part from its reverse rules (J^T applied to the
# tangent, which flowgrad's elementwise JVPs were): atan2's 0 / 0 at the origin, div's inf
# at a zero denominator (not inf - inf), maximum/minimum's tangent at a nan (the second
# input's, not both), fmax/fmin's ties (fmax's to the second input, fmin's to the first)
_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, float("inf"), float("nan")]
_A, _B = np.meshgrid(_SPECIAL, _SPECIAL)


@pytest.mark.parametrize("name", ["atan2", "div", "maximum", "minimum", "fmax", "fmin"])
@pytest.mark.parametrize("which", ["both", "first", "second"])
def test_binary_jvp_at_special_values_matches_torch(name, which):
    ta = np.linspace(0.3, 1.3, _A.size).reshape(_A.shape)
    tb = np.linspace(-0.7, 0.9, _A.size).reshape(_A.shape)

    def tangent(m):
        f, a, b = getattr(m, name), m.tensor(_A), m.tensor(_B)
        if which == "both":
            return m.func.jvp(f, (a, b), (m.tensor(ta), m.tensor(tb)))[1]
        if which == "first":
            return m.func.jvp(lambda x: f(x, b), (a,), (m.tensor(ta),))[1]
        return m.func.jvp(lambda y: f(a, y), (b,), (m.tensor(tb),))[1]
    np.testing.assert_allclose(tangent(flow).numpy(), tangent(torch).numpy(), rtol=1e-12)
