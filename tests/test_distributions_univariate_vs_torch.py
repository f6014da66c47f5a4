"""flowgrad.distributions' univariate continuous distributions (HalfCauchy, InverseGamma,
Kumaraswamy, Pareto, Weibull, GeneralizedPareto, FisherSnedecor, ContinuousBernoulli,
VonMises) and ExponentialFamily against torch.distributions, in float64: values, first and
second gradients of every method torch has (and the same errors where it has none), KL
divergences, supports and constraints, expand, validation; sampling checked on moments."""
import contextlib
import math

import numpy as np
import pytest
import torch

import flowgrad as flow

R = np.random.default_rng(0)
POS = R.uniform(0.5, 2.0, (3, 2))
POS2 = R.uniform(0.5, 2.0, (3, 2))
REAL = R.standard_normal((3, 2))
PROB = R.uniform(0.05, 0.95, (3, 2))
CONC = np.array([[0.6, 1.5], [2.5, 3.5], [0.9, 5.0]])  # either side of 1 and 2
XI = np.array([[-1.0, -0.4], [0.0, 0.2], [0.6, 1.2]])  # GeneralizedPareto's shapes
DF1 = np.array([[1.0, 2.5], [3.0, 5.0], [1.5, 8.0]])
DF2 = np.array([[1.5, 3.0], [4.5, 6.0], [2.0, 10.0]])
CB_PROBS = np.array([[0.2, 0.4995], [0.5, 0.8], [0.501, 0.05]])  # near 1/2: the Taylor side
CB_LOGITS = np.array([[-2.0, 0.0], [0.001, 1.5], [-0.003, 4.0]])
KAPPA = np.array([[0.5, 2.0], [3.7, 3.8], [6.0, 12.0]])  # either side of the Bessel switch
ALL = ["log_prob", "cdf", "icdf", "entropy", "mean", "mode", "variance", "stddev"]

# name, make(framework, *parameters), parameters, a value in the support
CASES = [
    ("half_cauchy", lambda m, s: m.distributions.HalfCauchy(s), [POS], POS2),
    ("inverse_gamma", lambda m, a, b: m.distributions.InverseGamma(a, b), [CONC, POS], POS2),
    ("kumaraswamy", lambda m, a, b: m.distributions.Kumaraswamy(a, b), [CONC, POS2], PROB),
    ("pareto", lambda m, s, a: m.distributions.Pareto(s, a), [POS, CONC], POS + POS2),
    ("weibull", lambda m, s, k: m.distributions.Weibull(s, k), [POS, CONC], POS2),
    ("generalized_pareto", lambda m, a, s, x: m.distributions.GeneralizedPareto(a, s, x),
     [REAL, POS, XI], REAL + 0.3 * POS),
    ("fisher_snedecor", lambda m, a, b: m.distributions.FisherSnedecor(a, b), [DF1, DF2], POS2),
    ("continuous_bernoulli_probs", lambda m, p: m.distributions.ContinuousBernoulli(p),
     [CB_PROBS], PROB),
    ("continuous_bernoulli_logits",
     lambda m, lg: m.distributions.ContinuousBernoulli(logits=lg), [CB_LOGITS], PROB),
    ("continuous_bernoulli_lims",
     lambda m, p: m.distributions.ContinuousBernoulli(p, lims=(0.3, 0.6)), [PROB],
     PROB[::-1].copy()),
    ("von_mises", lambda m, a, k: m.distributions.VonMises(a, k), [REAL, KAPPA], 3 * REAL),
]


@contextlib.contextmanager
def _torch_float64():
    """torch builds float64 constants inside some methods (GeneralizedPareto's 0.0 for
    isclose, which fails against float64 parameters otherwise)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def _leaves(m, arrays):
    return [m.tensor(a).requires_grad_() for a in arrays]


def _grads(m, out, leaves, order):
    """Gradients of out.sum() (order 1) or of the sum of those (order 2), or "RuntimeError"
    where there are none."""
    try:
        if not out.requires_grad:
            return None
        grads = m.autograd.grad(out.sum(), leaves, allow_unused=True, create_graph=order == 2)
        if order == 2:
            tracked = [g.sum() for g in grads if g is not None and g.requires_grad]
            if not tracked:
                return None
            grads = m.autograd.grad(sum(tracked), leaves, allow_unused=True)
        return [None if g is None else g.detach().numpy() for g in grads]
    except RuntimeError:  # (torch's NotImplementedError for gammainc's first argument too)
        return "RuntimeError"


def _evaluate(m, make, params, value, method, order=1):
    """(value, gradients) of one method, or the name of the error it raises."""
    leaves = _leaves(m, params)
    d = make(m, *leaves)
    try:
        if method in ("log_prob", "cdf", "icdf"):
            leaves.append(m.tensor(PROB if method == "icdf" else value).requires_grad_())
            out = getattr(d, method)(leaves[-1])
        else:
            out = d.entropy() if method == "entropy" else getattr(d, method)
    except (NotImplementedError, ValueError, RuntimeError) as error:
        return type(error).__name__
    return out.detach().numpy(), _grads(m, out, leaves, order)


def _assert_same(got, want, what):
    if isinstance(want, str) or isinstance(got, str):
        assert got == want, what
        return
    (value_f, grads_f), (value_t, grads_t) = got, want
    np.testing.assert_allclose(value_f, value_t, rtol=1e-7, atol=1e-10, err_msg=what)
    if isinstance(grads_t, str) or grads_t is None or isinstance(grads_f, str):
        assert grads_f == grads_t, f"{what}: gradients {grads_f} vs {grads_t}"
        return
    for i, (a, b) in enumerate(zip(grads_f, grads_t)):
        if (a is None) != (b is None):  # unused, or used with a zero gradient: the same
            assert not np.any(a if b is None else b), f"{what}: gradient {i} presence"
        elif b is not None:
            if a.shape == value_t.shape:  # an infinite value's gradient is 0 or nan: no matter
                a, b = (np.where(np.isfinite(value_t), g, 0.0) for g in (a, b))
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=f"{what} grad {i}")


def _compare(make, params, value, method, order=1):
    with _torch_float64():
        want = _evaluate(torch, make, params, value, method, order)
    got = _evaluate(flow, make, params, value, method, order)
    _assert_same(got, want, method)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_methods_match_torch(case):
    name, make, params, value = case
    for method in ALL:
        _compare(make, params, value, method)
    _compare(make, params, value, "log_prob", order=2)


def _bregman_entropy(m, d):
    return m.distributions.ExponentialFamily.entropy(d)


EXPFAMILY = [
    ("normal", lambda m, a, b: m.distributions.Normal(a, b), [REAL, POS]),
    ("exponential", lambda m, r: m.distributions.Exponential(r), [POS]),
    ("gamma", lambda m, a, b: m.distributions.Gamma(a, b), [CONC, POS]),
    ("bernoulli", lambda m, p: m.distributions.Bernoulli(p), [PROB]),
    ("continuous_bernoulli_probs", lambda m, p: m.distributions.ContinuousBernoulli(p),
     [CB_PROBS]),
    ("continuous_bernoulli_logits",
     lambda m, lg: m.distributions.ContinuousBernoulli(logits=lg), [CB_LOGITS]),
]


@pytest.mark.parametrize("case", EXPFAMILY, ids=[c[0] for c in EXPFAMILY])
def test_bregman_entropy_matches_torch_closed_form(case):
    """ExponentialFamily.entropy (through the log normalizer's gradient) against torch's
    closed-form entropy of the family, values and gradients in the parameters."""
    _, make, params = case
    out = {}
    for m in (torch, flow):
        leaves = _leaves(m, params)
        d = make(m, *leaves)
        h = d.entropy() if m is torch else _bregman_entropy(m, d)
        out[m] = h.detach().numpy(), _grads(m, h, leaves, 1)
    _assert_same(out[flow], out[torch], "entropy")


def test_bregman_entropy_needs_a_carrier_measure_and_keeps_no_grad_mode():
    D = flow.distributions
    for d, td in [(D.Poisson(flow.tensor([1.0])), torch.distributions.Poisson(torch.ones(1))),
                  (D.Beta(flow.ones(1), 2.0), torch.distributions.Beta(torch.ones(1), 2.0))]:
        with pytest.raises(NotImplementedError):
            _bregman_entropy(torch, td)
        with pytest.raises(NotImplementedError, match="carrier measure"):
            _bregman_entropy(flow, d)
    d = D.Normal(flow.tensor([0.0, 1.0], requires_grad=True), 2.0)
    assert _bregman_entropy(flow, d).requires_grad
    with flow.no_grad():
        assert not _bregman_entropy(flow, d).requires_grad
    assert not _bregman_entropy(flow, D.Normal(flow.zeros(2), 2.0)).requires_grad


def _cb(m, p):
    return m.distributions.ContinuousBernoulli(p)


def _pareto(m, s, a):
    return m.distributions.Pareto(s, a)


def _normal(m, a, b):
    return m.distributions.Normal(a, b)


def _uniform(m, a, w):
    return m.distributions.Uniform(a, a + w)


def _exponential(m, r):
    return m.distributions.Exponential(r)


def _gamma(m, a, b):
    return m.distributions.Gamma(a, b)


def _beta(m, a, b):
    return m.distributions.Beta(a, b)


BELOW0 = np.array([[-0.5, 0.1], [-0.2, -1.0], [0.0, -0.3]])  # low ends around 0
# name, make_p, p's parameters, make_q, q's parameters
KL_PAIRS = [
    ("cb_cb", _cb, [CB_PROBS], _cb, [PROB]),
    ("cb_logits_cb", lambda m, lg: m.distributions.ContinuousBernoulli(logits=lg),
     [CB_LOGITS], _cb, [CB_PROBS]),
    ("pareto_pareto", _pareto, [POS, CONC], _pareto, [0.6 * POS2, CONC[::-1].copy()]),
    ("beta_cb", _beta, [POS, POS2], _cb, [CB_PROBS]),
    ("uniform_cb", _uniform, [PROB * 0.5, 0.4 * POS], _cb, [CB_PROBS]),
    ("uniform_cb_edges", _uniform, [BELOW0, 1.2 * POS], _cb, [PROB]),
    ("cb_exponential", _cb, [CB_PROBS], _exponential, [POS]),
    ("cb_normal", _cb, [CB_PROBS], _normal, [REAL, POS]),
    ("cb_uniform", _cb, [CB_PROBS], _uniform, [BELOW0, 1.2 + POS]),
    ("pareto_exponential", _pareto, [POS, CONC], _exponential, [POS2]),
    ("pareto_gamma", _pareto, [POS, CONC], _gamma, [POS2, POS]),
    ("pareto_normal", _pareto, [POS, CONC], _normal, [REAL, POS2]),
    ("uniform_pareto", _uniform, [POS, POS2], _pareto, [0.6 * POS2, CONC]),
    # the pairs torch answers with inf: p has mass where q has none
    ("beta_pareto", _beta, [POS, POS2], _pareto, [POS, CONC]),
    ("cb_pareto", _cb, [CB_PROBS], _pareto, [POS, CONC]),
    ("exponential_cb", _exponential, [POS], _cb, [PROB]),
    ("exponential_pareto", _exponential, [POS], _pareto, [POS, CONC]),
    ("gamma_cb", _gamma, [POS, POS2], _cb, [PROB]),
    ("gamma_pareto", _gamma, [POS, POS2], _pareto, [POS, CONC]),
    ("gumbel_cb", lambda m, a, b: m.distributions.Gumbel(a, b), [REAL, POS], _cb, [PROB]),
    ("laplace_pareto", lambda m, a, b: m.distributions.Laplace(a, b), [REAL, POS], _pareto,
     [POS, CONC]),
    ("normal_cb", _normal, [REAL, POS], _cb, [PROB]),
    ("pareto_beta", _pareto, [POS, CONC], _beta, [POS, POS2]),
    ("pareto_cb", _pareto, [POS, CONC], _cb, [PROB]),
    ("pareto_uniform", _pareto, [POS, CONC], _uniform, [REAL, POS]),
]


def _kl(m, make_p, p_params, make_q, q_params, kl=None):
    p_leaves, q_leaves = _leaves(m, p_params), _leaves(m, q_params)
    p, q = make_p(m, *p_leaves), make_q(m, *q_leaves)
    try:
        out = (kl or m.distributions.kl_divergence)(p, q)
    except NotImplementedError as error:
        return type(error).__name__
    return out.detach().numpy(), _grads(m, out, p_leaves + q_leaves, 1)


@pytest.mark.parametrize("case", KL_PAIRS, ids=[c[0] for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case):
    _, make_p, p_params, make_q, q_params = case
    want = _kl(torch, make_p, p_params, make_q, q_params)
    _assert_same(_kl(flow, make_p, p_params, make_q, q_params), want, "kl")


BREGMAN_KL = [
    ("normal", _normal, [REAL, POS], [REAL[::-1].copy(), POS2]),
    ("exponential", _exponential, [POS], [POS2]),
    ("gamma", _gamma, [CONC, POS], [POS, POS2]),
    ("beta", _beta, [POS, POS2], [POS2, CONC]),
    ("bernoulli", lambda m, p: m.distributions.Bernoulli(p), [PROB], [PROB[::-1].copy()]),
    ("poisson", lambda m, r: m.distributions.Poisson(r), [POS], [POS2]),
    ("dirichlet", lambda m, c: m.distributions.Dirichlet(c), [POS.T.copy()], [POS2.T.copy()]),
    ("continuous_bernoulli", _cb, [CB_PROBS], [PROB]),
]


@pytest.mark.parametrize("case", BREGMAN_KL, ids=[c[0] for c in BREGMAN_KL])
def test_bregman_kl_matches_torch_closed_forms(case):
    """The (ExponentialFamily, ExponentialFamily) KL, called directly, against torch's
    closed form for the family: values and gradients in both distributions' parameters."""
    from flowgrad.distributions.univariate import _kl_expfamily_expfamily

    _, make, p_params, q_params = case
    want = _kl(torch, make, p_params, make, q_params)
    got = _kl(flow, make, p_params, make, q_params, kl=_kl_expfamily_expfamily)
    _assert_same(got, want, "kl")


def test_kl_between_different_families_is_not_implemented():
    for m in (torch, flow):
        D = m.distributions
        with pytest.raises(NotImplementedError, match="exponential families"):
            D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(m.tensor(1.0)))
        with pytest.raises(NotImplementedError):
            D.kl_divergence(D.VonMises(0.0, 1.0), D.VonMises(1.0, 1.0))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_constraints_support_and_flags_match_torch(case):
    _, make, params, _ = case
    probe = np.array([-2.0, -0.5, 0.0, 0.3, 0.5, 1.0, 1.7, 3.0, math.inf])
    seen = {}
    for m in (torch, flow):
        d = make(m, *[m.tensor(p) for p in params])
        values = m.tensor(probe).reshape(-1, 1, 1)
        seen[m] = (sorted(d.arg_constraints), d.has_rsample, d.support.is_discrete,
                   d.support.event_dim, d.support.check(values).numpy().tolist(),
                   tuple(d.batch_shape), tuple(d.event_shape))
    assert seen[flow] == seen[torch]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_expand_matches_torch(case):
    _, make, params, value = case
    value = np.broadcast_to(value[:1], value.shape).copy()  # in the support of row 0's
    out = {}
    for m in (torch, flow):
        with _torch_float64():
            d = make(m, *[m.tensor(p[:1]) for p in params]).expand((4, 3, 2))
            x = d.sample((5,))
            out[m] = (type(d).__name__, tuple(d.batch_shape), tuple(x.shape),
                      d.log_prob(m.tensor(value)).numpy())
    assert out[flow][:3] == out[torch][:3]
    np.testing.assert_allclose(out[flow][3], out[torch][3], rtol=1e-7)


# name, make (flowgrad), whose sample moments and cdf are checked
SAMPLED = [
    ("half_cauchy", lambda D, t: D.HalfCauchy(t([0.5, 2.0]))),
    ("inverse_gamma", lambda D, t: D.InverseGamma(t([5.0, 8.0]), t([1.0, 3.0]))),
    ("kumaraswamy", lambda D, t: D.Kumaraswamy(t([0.5, 2.0]), t([3.0, 0.7]))),
    ("pareto", lambda D, t: D.Pareto(t([1.0, 0.5]), t([10.0, 12.0]))),
    ("weibull", lambda D, t: D.Weibull(t([1.0, 2.0]), t([0.8, 3.0]))),
    ("generalized_pareto", lambda D, t: D.GeneralizedPareto(t([0.0, 1.0]), t([1.0, 0.5]),
                                                            t([-0.5, 0.1]))),
    ("fisher_snedecor", lambda D, t: D.FisherSnedecor(t([4.0, 10.0]), t([12.0, 20.0]))),
    ("continuous_bernoulli", lambda D, t: D.ContinuousBernoulli(t([0.1, 0.5]))),
    ("von_mises", lambda D, t: D.VonMises(t([1.0, -2.5]), t([1e-6, 4.0]))),
]


@pytest.mark.parametrize("case", SAMPLED, ids=[c[0] for c in SAMPLED])
def test_samples_have_the_distributions_shape_moments_and_cdf(case):
    name, make = case
    d = make(flow.distributions, lambda v: flow.tensor(v, dtype=flow.float64))
    n = 8000
    flow.manual_seed(0)
    x = d.sample((n,))
    flow.manual_seed(0)
    np.testing.assert_array_equal(d.sample((n,)).numpy(), x.numpy())  # the seed reproduces
    assert tuple(x.shape) == (n, 2) and tuple(d.sample().shape) == (2,)
    assert x.dtype == flow.float64 and not x.requires_grad
    xs = x.numpy()
    if name == "von_mises":  # circular: E[cos(x - loc)] = 1 - circular variance
        assert (xs >= -math.pi).all() and (xs < math.pi).all()
        resultant = np.cos(xs - d.loc.numpy()).mean(0)
        np.testing.assert_allclose(resultant, 1 - d.variance.numpy(), atol=0.03)
        return
    if name != "half_cauchy":
        mean, var = d.mean.numpy(), d.variance.numpy()
        np.testing.assert_allclose(xs.mean(0), mean, atol=5 * np.sqrt(var.max() / n))
        np.testing.assert_allclose(xs.var(0), var, rtol=0.15)
    if name != "fisher_snedecor":  # (no cdf, as torch)
        q = np.quantile(xs, [0.1, 0.5, 0.9], axis=0)
        np.testing.assert_allclose(d.cdf(flow.tensor(q)).numpy(),
                                   np.broadcast_to([[0.1], [0.5], [0.9]], q.shape), atol=0.02)


def test_von_mises_samples_in_float64_and_answers_in_its_dtype():
    """Small concentrations would reject for ever in float32 (torch's issue 88443)."""
    d = flow.distributions.VonMises(flow.zeros(3), flow.tensor([1e-5, 1e-4, 1.0]))
    flow.manual_seed(0)
    x = d.sample((1000,))
    assert x.dtype == flow.float32 and bool((x.abs() <= math.pi).all())


def test_rsample_gradients_follow_the_reparameterisation():
    """d/dtheta E[x] through rsample against d mean / dtheta, for each distribution with a
    finite mean; HalfCauchy's samples are scale * |Cauchy(0, 1)|: d sum(x) / d scale is
    sum(x) / scale exactly."""
    D = flow.distributions
    flow.manual_seed(1)
    n = 40000
    makers = [lambda a, b: D.InverseGamma(a * 5, b), lambda a, b: D.Kumaraswamy(a, b),
              lambda a, b: D.Pareto(b, a * 5), lambda a, b: D.Weibull(b, a),
              lambda a, b: D.GeneralizedPareto(b, a, b * 0.2 - 0.3),
              lambda a, b: D.FisherSnedecor(a * 4, b * 10),
              lambda a, b: D.ContinuousBernoulli(a * 0.4)]
    for make in makers:
        a = flow.tensor([1.3, 2.0], dtype=flow.float64, requires_grad=True)
        b = flow.tensor([0.8, 1.7], dtype=flow.float64, requires_grad=True)
        d = make(a, b)
        assert d.has_rsample
        mc = flow.autograd.grad(d.rsample((n,)).mean(0).sum(), [a, b], allow_unused=True,
                                retain_graph=True)
        exact = flow.autograd.grad(d.mean.sum(), [a, b], allow_unused=True)
        for g, e in zip(mc, exact):
            g, e = (np.zeros(2) if t is None else t.numpy() for t in (g, e))
            np.testing.assert_allclose(g, e, rtol=0.08, atol=0.02, err_msg=repr(d))
    scale = flow.tensor([0.5, 2.0], dtype=flow.float64, requires_grad=True)
    x = D.HalfCauchy(scale).rsample((100,))
    (g,) = flow.autograd.grad(x.sum(), [scale])
    np.testing.assert_allclose(g.numpy(), (x / scale).sum(0).detach().numpy(), rtol=1e-12)
    assert not D.VonMises.has_rsample
    with pytest.raises(NotImplementedError, match="rsample"):
        D.VonMises(flow.zeros(1), 1.0).rsample()


def test_sampling_first_keeps_the_lazy_probs_differentiable():
    grads = []
    for m in (torch, flow):
        logits = m.tensor(CB_LOGITS).requires_grad_()
        d = m.distributions.ContinuousBernoulli(logits=logits)
        d.sample()
        d.entropy().sum().backward()
        grads.append(logits.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-7, atol=1e-10)


# make(distributions, tensor) raising ValueError, in torch and flowgrad alike; the name
# flowgrad's message must give
INVALID = [
    (lambda D, t: D.HalfCauchy(t(-1.0)), "scale"),
    (lambda D, t: D.InverseGamma(t(-1.0), t(1.0)), "concentration"),
    (lambda D, t: D.InverseGamma(t(1.0), t(0.0)), "rate"),
    (lambda D, t: D.Kumaraswamy(t(1.0), t(-2.0)), "concentration0"),
    (lambda D, t: D.Pareto(t(-1.0), t(1.0)), "scale"),
    (lambda D, t: D.Pareto(t(1.0), t(0.0)), "alpha"),
    (lambda D, t: D.Weibull(t(1.0), t(-1.0)), "concentration"),
    (lambda D, t: D.GeneralizedPareto(t(0.0), t(0.0), t(1.0)), "scale"),
    (lambda D, t: D.GeneralizedPareto(t(math.nan), t(1.0), t(1.0)), "loc"),
    (lambda D, t: D.FisherSnedecor(t(-1.0), t(1.0)), "df1"),
    (lambda D, t: D.ContinuousBernoulli(t(1.5), validate_args=True), "probs"),
    (lambda D, t: D.ContinuousBernoulli(t(math.nan)), "probs"),
    (lambda D, t: D.ContinuousBernoulli(t(0.5), t(0.0)), "probs"),
    (lambda D, t: D.ContinuousBernoulli(), "probs"),
    (lambda D, t: D.VonMises(t(0.0), t(-1.0)), "concentration"),
    (lambda D, t: D.HalfCauchy(t(1.0)).log_prob(t(-1.0)), "support"),
    (lambda D, t: D.InverseGamma(t(1.0), t(1.0)).log_prob(t(-1.0)), "support"),
    (lambda D, t: D.Kumaraswamy(t(1.0), t(1.0)).log_prob(t(1.5)), "support"),
    (lambda D, t: D.Pareto(t(2.0), t(1.0)).log_prob(t(1.0)), "support"),
    (lambda D, t: D.Pareto(t(2.0), t(1.0)).cdf(t(1.0)), "support"),
    (lambda D, t: D.Weibull(t(1.0), t(1.0)).log_prob(t(-1.0)), "support"),
    (lambda D, t: D.GeneralizedPareto(t(0.0), t(1.0), t(-0.5)).log_prob(t(3.0)), "support"),
    (lambda D, t: D.FisherSnedecor(t(1.0), t(1.0)).log_prob(t(-1.0)), "support"),
    (lambda D, t: D.ContinuousBernoulli(t(0.3)).log_prob(t(1.5)), "support"),
    (lambda D, t: D.ContinuousBernoulli(t(0.3)).cdf(t(-0.5)), "support"),
]


@pytest.mark.parametrize("i", range(len(INVALID)))
def test_validation_errors_match_torch(i):
    make, name = INVALID[i]
    with _torch_float64(), pytest.raises(ValueError):
        make(torch.distributions, lambda v: torch.tensor(v))
    with pytest.raises(ValueError, match=name) as error:
        make(flow.distributions, lambda v: flow.tensor(v, dtype=flow.float64))
    assert name in ("support", "probs") or "Expected parameter" in str(error.value)


def test_validation_can_be_turned_off():
    D = flow.distributions
    t = flow.tensor
    D.Pareto(t(-1.0), t(1.0), validate_args=False)
    D.VonMises(t(0.0), t(-1.0), validate_args=False)
    D.Pareto(t(2.0), t(1.0), validate_args=False).log_prob(t(1.0))
    d = D.Weibull(t(1.0), t(1.0), validate_args=False).expand((2,))
    d.log_prob(t(-1.0))  # expand keeps the setting
    assert float(D.ContinuousBernoulli(t(1.5)).probs) < 1  # clamped, unchecked (torch's)
