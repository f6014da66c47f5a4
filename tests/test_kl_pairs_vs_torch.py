"""kl_divergence for every (p, q) pair torch.distributions.kl registers, against torch in
float64: values, first and second gradients in every parameter of p and q (where the value is
finite), broadcasting between p's and q's batch shapes, the pairs torch answers with inf, the
pairs it refuses (and how), and its rule that the most specific registration wins."""
import numpy as np
import pytest
import torch
import torch.distributions.kl as torch_kl

import flowgrad as flow

R = np.random.default_rng(0)


def _uniform(low, high, shape=(3, 2)):
    return R.uniform(low, high, shape)


POS, POS2, POS3 = _uniform(0.5, 2.0), _uniform(0.5, 2.0), _uniform(0.5, 2.0)
POS_ROW, POS_COL = _uniform(0.5, 2.0, (2,)), _uniform(0.5, 2.0, (3, 1))
REAL, REAL2 = _uniform(-1.5, 1.5), _uniform(-1.5, 1.5)
REAL_ROW, REAL_COL = _uniform(-1.5, 1.5, (2,)), _uniform(-1.5, 1.5, (3, 1))
PROB, PROB2, PROB_ROW = _uniform(0.1, 0.9), _uniform(0.1, 0.9), _uniform(0.1, 0.9, (2,))
CB_PROB = np.array([[0.2, 0.4995], [0.5, 0.8], [0.501, 0.05]])  # near 1/2: its Taylor side
UNIT_LOW, UNIT_WIDTH = _uniform(0.05, 0.4), _uniform(0.1, 0.5)  # inside (0, 1)
WIDE_LOW, WIDE_WIDTH = _uniform(-3.0, -2.0), _uniform(5.0, 6.0)  # around [-2, 2]
EDGE_LOW = np.array([[-0.5, 0.1], [-0.2, 0.3], [0.0, -0.3]])  # low ends around 0
SHIFT = np.array([[1.0, -0.2], [1.0, 1.0], [-0.3, 1.0]])  # q.low above p.low where < 0
EDGE_WIDTH = np.array([[1.0, 0.95], [0.5, 0.7], [1.0, 0.2]])  # high ends around 1
ALPHA = np.array([[0.6, 1.5], [2.5, 3.5], [0.9, 5.0]])  # either side of 1 and 2
BIG_ALPHA = _uniform(2.5, 5.0)
SIMPLEX, SIMPLEX2 = _uniform(0.1, 1.0, (3, 4)), _uniform(0.1, 1.0, (3, 4))
SIMPLEX, SIMPLEX2 = SIMPLEX / SIMPLEX.sum(-1, keepdims=True), SIMPLEX2 / SIMPLEX2.sum(-1)[:, None]
CONC, CONC2 = _uniform(0.5, 3.0, (3, 4)), _uniform(0.5, 3.0, (3, 4))
COUNTS_P = np.array([[5.0, 6.0], [5.0, 7.0], [5.0, 5.0]])  # p.total_count >= q's 5


def _tril(batch=(3,), n=3):
    L = np.tril(R.uniform(-0.5, 0.5, (*batch, n, n)), -1)
    return L + np.eye(n) * R.uniform(0.8, 1.5, (*batch, 1, n))


LOC3, LOC3B = _uniform(-1.0, 1.0, (3, 3)), _uniform(-1.0, 1.0, (3, 3))
TRIL, TRIL2 = _tril(), _tril()
FACTOR, FACTOR2 = _uniform(-0.5, 0.5, (3, 3, 2)), _uniform(-0.5, 0.5, (3, 3, 2))
DIAG, DIAG2 = _uniform(0.5, 1.5, (3, 3)), _uniform(0.5, 1.5, (3, 3))
DF, DF2 = _uniform(3.0, 6.0, (3,)), _uniform(3.0, 6.0, (3,))

MAKE = {
    "bernoulli": lambda D, p: D.Bernoulli(p),
    "bernoulli_logits": lambda D, lg: D.Bernoulli(logits=lg),
    "beta": lambda D, a, b: D.Beta(a, b),
    "binomial": lambda D, p: D.Binomial(5, p),
    "binomial_n": lambda D, n, p: D.Binomial(n, p),
    "categorical": lambda D, p: D.Categorical(p),
    "cauchy": lambda D, a, b: D.Cauchy(a, b),
    "cb": lambda D, p: D.ContinuousBernoulli(p),
    "chi2": lambda D, df: D.Chi2(df),
    "dirichlet": lambda D, c: D.Dirichlet(c),
    "exponential": lambda D, r: D.Exponential(r),
    "gamma": lambda D, a, b: D.Gamma(a, b),
    "geometric": lambda D, p: D.Geometric(p),
    "geometric_logits": lambda D, lg: D.Geometric(logits=lg),
    "gumbel": lambda D, a, b: D.Gumbel(a, b),
    "halfnormal": lambda D, s: D.HalfNormal(s),
    "independent": lambda D, a, b: D.Independent(D.Normal(a, b), 1),
    "laplace": lambda D, a, b: D.Laplace(a, b),
    "lognormal": lambda D, a, b: D.LogNormal(a, b),
    "lowrank": lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
    "mvn": lambda D, m, L: D.MultivariateNormal(m, scale_tril=L.tril()),
    "normal": lambda D, a, b: D.Normal(a, b),
    "normal_expanded": lambda D, a, b: D.Normal(a, b).expand((4, 3, 2)),
    "onehot": lambda D, p: D.OneHotCategorical(p),
    "pareto": lambda D, s, a: D.Pareto(s, a),
    "poisson": lambda D, r: D.Poisson(r),
    "transformed": lambda D, a, b: D.TransformedDistribution(
        D.Normal(a, b), [D.AffineTransform(0.5, 2.0), D.ExpTransform()]),
    "uniform": lambda D, a, w: D.Uniform(a, a + w),
    "wishart": lambda D, df, L: D.Wishart(df, scale_tril=L.tril()),
}

# p, p's parameters, q, q's parameters (an id suffix where a pair has several rows)
KL_CASES = [
    # one family
    ("bernoulli", [PROB], "bernoulli", [PROB2]),
    ("bernoulli_logits", [REAL], "bernoulli", [PROB2]),
    ("bernoulli", [np.array([0.0, 1.0, 0.3, 0.0])], "bernoulli",
     [np.array([0.4, 0.6, 0.0, 0.0])], "_edges"),
    ("beta", [POS, POS2], "beta", [POS3, POS_ROW]),
    ("binomial", [PROB], "binomial", [PROB2]),
    ("binomial_n", [COUNTS_P, PROB], "binomial", [PROB2], "_partly_inf"),  # more trials
    ("categorical", [SIMPLEX], "categorical", [SIMPLEX2]),
    ("onehot", [SIMPLEX], "onehot", [SIMPLEX2]),
    ("cauchy", [REAL, POS], "cauchy", [REAL_ROW, POS2]),
    ("cb", [CB_PROB], "cb", [PROB]),
    ("dirichlet", [CONC], "dirichlet", [CONC2]),
    ("exponential", [POS], "exponential", [POS_COL]),
    ("gamma", [POS, POS2], "gamma", [POS3, POS_ROW]),
    ("geometric", [PROB], "geometric", [PROB2]),
    ("geometric_logits", [REAL], "geometric", [PROB_ROW]),
    ("gumbel", [REAL, POS], "gumbel", [REAL2, POS2]),
    ("gumbel", [REAL_COL, POS_COL], "gumbel", [REAL_ROW, POS_ROW], "_broadcast"),
    ("halfnormal", [POS], "halfnormal", [POS_ROW]),
    ("laplace", [REAL, POS], "laplace", [REAL2, POS2]),
    ("normal", [REAL, POS], "normal", [REAL2, POS2]),
    ("normal_expanded", [REAL, POS], "normal", [REAL_ROW, POS_COL]),
    ("pareto", [POS, ALPHA], "pareto", [0.6 * POS2, BIG_ALPHA]),
    ("pareto", [POS, ALPHA], "pareto", [POS2, BIG_ALPHA], "_partly_inf"),
    ("poisson", [POS], "poisson", [POS2]),
    ("uniform", [REAL, POS], "uniform", [REAL - 1, POS + 2]),
    ("uniform", [REAL, POS], "uniform", [REAL - SHIFT, POS + 2], "_partly_inf"),
    ("independent", [REAL, POS], "independent", [REAL2, POS2]),
    ("lognormal", [REAL, POS], "lognormal", [REAL2, POS2]),
    ("transformed", [REAL, POS], "transformed", [REAL2, POS_ROW]),
    ("mvn", [LOC3, TRIL], "mvn", [LOC3B, TRIL2]),
    ("mvn", [LOC3, TRIL], "lowrank", [LOC3B, FACTOR, DIAG]),
    ("lowrank", [LOC3, FACTOR, DIAG], "mvn", [LOC3B, TRIL2]),
    ("lowrank", [LOC3, FACTOR, DIAG], "lowrank", [LOC3B, FACTOR2, DIAG2]),
    # the Bregman divergence (a batch of 2 3 x 3 matrices: flowgrad's solve_triangular reads
    # a 3 x 3 right side against a batch of 3 as a batch of vectors)
    ("wishart", [DF[:2], TRIL[:2]], "wishart", [DF2[:2], TRIL2[:2]], "_bregman"),
    # different families, in closed form
    ("bernoulli", [PROB], "poisson", [POS_ROW]),
    ("beta", [POS, POS2], "cb", [CB_PROB]),
    ("beta", [POS, POS2], "exponential", [POS_ROW]),
    ("beta", [POS, POS2], "gamma", [POS3, POS_COL]),
    ("beta", [POS, POS2], "normal", [REAL, POS3]),
    ("beta", [POS, POS2], "uniform", [WIDE_LOW, WIDE_WIDTH]),
    ("beta", [POS, POS2], "uniform", [EDGE_LOW, EDGE_WIDTH + 0.3], "_partly_inf"),
    ("cb", [CB_PROB], "exponential", [POS]),
    ("cb", [CB_PROB], "normal", [REAL, POS]),
    ("cb", [CB_PROB], "uniform", [EDGE_LOW, EDGE_WIDTH + 1.0], "_partly_inf"),
    ("exponential", [POS], "gamma", [POS2, POS_ROW]),
    ("exponential", [POS], "gumbel", [REAL, POS2]),
    ("exponential", [POS], "normal", [REAL_ROW, POS2]),
    ("gamma", [POS, POS2], "exponential", [POS_COL]),
    ("gamma", [POS, POS2], "gumbel", [REAL, POS3]),
    ("gamma", [POS, POS2], "normal", [REAL_COL, POS3]),
    ("gumbel", [REAL, POS], "normal", [REAL2, POS_ROW]),
    ("laplace", [REAL, POS], "normal", [REAL2, POS2]),
    ("normal", [REAL, POS], "gumbel", [REAL_ROW, POS2]),
    ("normal", [REAL, POS], "laplace", [REAL2, POS_COL]),
    ("pareto", [POS, ALPHA], "exponential", [POS2]),
    ("pareto", [POS, ALPHA], "gamma", [POS2, POS3]),
    ("pareto", [POS, ALPHA], "normal", [REAL, POS2]),
    ("uniform", [UNIT_LOW, UNIT_WIDTH], "beta", [POS, POS2]),
    ("uniform", [EDGE_LOW, EDGE_WIDTH], "beta", [POS, POS_ROW], "_partly_inf"),
    ("uniform", [UNIT_LOW, UNIT_WIDTH], "cb", [CB_PROB]),
    ("uniform", [POS, POS2], "exponential", [POS_ROW]),
    ("uniform", [EDGE_LOW, POS], "exponential", [POS2], "_partly_inf"),
    ("uniform", [POS, POS2], "gamma", [POS3, POS_COL]),
    ("uniform", [EDGE_LOW, POS], "gamma", [POS2, POS3], "_partly_inf"),
    ("uniform", [REAL, POS], "gumbel", [REAL_ROW, POS2]),
    ("uniform", [REAL, POS], "normal", [REAL2, POS_COL]),
    ("uniform", [POS + 1, POS2], "pareto", [0.6 * POS, ALPHA]),
    # different families where p puts mass outside q's support: inf
    ("beta", [POS, POS2], "pareto", [POS, ALPHA], "_inf"),
    ("cb", [CB_PROB], "pareto", [POS, ALPHA], "_inf"),
    ("exponential", [POS], "beta", [POS2, POS3], "_inf"),
    ("exponential", [POS], "cb", [PROB], "_inf"),
    ("exponential", [POS], "pareto", [POS2, ALPHA], "_inf"),
    ("exponential", [POS], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("gamma", [POS, POS2], "beta", [POS2, POS3], "_inf"),
    ("gamma", [POS, POS2], "cb", [PROB], "_inf"),
    ("gamma", [POS, POS2], "pareto", [POS2, ALPHA], "_inf"),
    ("gamma", [POS, POS2], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("gumbel", [REAL, POS], "beta", [POS2, POS3], "_inf"),
    ("gumbel", [REAL, POS], "cb", [PROB], "_inf"),
    ("gumbel", [REAL, POS], "exponential", [POS_ROW], "_inf"),
    ("gumbel", [REAL, POS], "gamma", [POS2, POS3], "_inf"),
    ("gumbel", [REAL, POS], "pareto", [POS2, ALPHA], "_inf"),
    ("gumbel", [REAL, POS], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("laplace", [REAL, POS], "beta", [POS2, POS3], "_inf"),
    ("laplace", [REAL, POS], "cb", [PROB], "_inf"),
    ("laplace", [REAL, POS], "exponential", [POS2], "_inf"),
    ("laplace", [REAL, POS], "gamma", [POS2, POS3], "_inf"),
    ("laplace", [REAL, POS], "pareto", [POS2, ALPHA], "_inf"),
    ("laplace", [REAL, POS], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("normal", [REAL, POS], "beta", [POS2, POS3], "_inf"),
    ("normal", [REAL, POS], "cb", [PROB], "_inf"),
    ("normal", [REAL, POS], "exponential", [POS_COL], "_inf"),
    ("normal", [REAL, POS], "gamma", [POS2, POS3], "_inf"),
    ("normal", [REAL, POS], "pareto", [POS2, ALPHA], "_inf"),
    ("normal", [REAL, POS], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("pareto", [POS, ALPHA], "beta", [POS2, POS3], "_inf"),
    ("pareto", [POS, ALPHA], "cb", [PROB], "_inf"),
    ("pareto", [POS, ALPHA], "uniform", [WIDE_LOW, WIDE_WIDTH], "_inf"),
    ("poisson", [POS], "bernoulli", [PROB], "_inf"),
    ("poisson", [POS], "binomial", [PROB_ROW], "_inf"),
    # subclasses: Chi2 is a Gamma, and (ExponentialFamily, ExponentialFamily) must not win
    ("chi2", [POS], "chi2", [POS2]),
    ("chi2", [POS], "exponential", [POS2]),
    ("exponential", [POS], "chi2", [POS2]),
    ("chi2", [POS], "normal", [REAL, POS2]),
    ("uniform", [POS, POS2], "chi2", [POS3]),
]


def _case_id(case):
    return f"{case[0]}_{case[2]}" + (case[4] if len(case) > 4 else "")


def _dists(m, case):
    p_name, p_params, q_name, q_params = case[:4]
    p_leaves = [m.tensor(a).requires_grad_() for a in p_params]
    q_leaves = [m.tensor(a).requires_grad_() for a in q_params]
    D = m.distributions
    return MAKE[p_name](D, *p_leaves), MAKE[q_name](D, *q_leaves), p_leaves + q_leaves


def _kl_and_grads(m, case):
    """KL's value; the first and second gradients, in every parameter, of the sum of its
    finite entries (None where it has none). (torch's Bregman route detaches p's parameters:
    there, only q's.)"""
    p, q, leaves = _dists(m, case)
    if case[-1] == "_bregman":
        leaves = leaves[len(case[1]):]
    kl = m.distributions.kl_divergence(p, q)
    finite = m.isfinite(kl.detach())
    if not bool(finite.any()) or not kl.requires_grad:
        return kl.detach().numpy(), None, None
    first = m.autograd.grad(kl[finite].sum(), leaves, allow_unused=True, create_graph=True)
    tracked = [(g * (i + 1)).sum() for i, g in enumerate(first)
               if g is not None and g.requires_grad]
    second = m.autograd.grad(sum(tracked), leaves, allow_unused=True) if tracked else ()
    as_numpy = [None if g is None else g.detach().numpy() for g in first]
    return kl.detach().numpy(), as_numpy, [None if g is None else g.numpy() for g in second]


def _assert_grads_equal(got, want, what):
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        if (a is None) != (b is None):  # unused, or used with a zero gradient: the same
            assert not np.any(a if b is None else b), f"{what} {i}: presence"
        elif b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9, err_msg=f"{what} {i}")


@pytest.mark.parametrize("case", KL_CASES, ids=[_case_id(c) for c in KL_CASES])
def test_kl_values_and_gradients_match_torch(case):
    got, want = _kl_and_grads(flow, case), _kl_and_grads(torch, case)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-7, atol=1e-10, err_msg="value")
    assert (got[1] is None) == (want[1] is None), "gradient presence"
    if want[1] is not None:
        _assert_grads_equal(got[1], want[1], "first gradient")
        _assert_grads_equal(got[2], want[2], "second gradient")


def _torch_key(type_p, type_q):
    """The registered pair torch's dispatch picks for these classes."""
    matches = [(tp, tq) for tp, tq in torch_kl._KL_REGISTRY
               if issubclass(type_p, tp) and issubclass(type_q, tq)]
    return min(torch_kl._Match(*match) for match in matches).types


def test_the_cases_cover_every_pair_torch_registers():
    covered = set()
    for case in KL_CASES:
        p, q, _ = _dists(torch, case)
        covered.add(_torch_key(type(p), type(q)))
    missing = set(torch_kl._KL_REGISTRY) - covered
    assert not missing, sorted(f"{p.__name__}-{q.__name__}" for p, q in missing)


def test_infinite_rows_reach_inf():
    """The rows meant to test the inf branches do reach them: wholly, or in some entries."""
    for case in KL_CASES:
        p, q, _ = _dists(flow, case)
        value = flow.distributions.kl_divergence(p, q).detach().numpy()
        if case[-1] == "_inf":
            assert np.isposinf(value).all(), _case_id(case)
        if case[-1] == "_partly_inf":
            assert np.isposinf(value).any() and np.isfinite(value).any(), _case_id(case)


# p, p's parameters, q, q's parameters: the pairs torch refuses, and how
REFUSED = [
    ("cauchy", [REAL, POS], "normal", [REAL2, POS2], NotImplementedError),
    ("beta", [POS, POS2], "laplace", [REAL, POS], NotImplementedError),
    ("halfnormal", [POS], "normal", [REAL, POS2], NotImplementedError),
    ("gumbel", [REAL, POS], "lognormal", [REAL2, POS2], NotImplementedError),
    ("normal", [REAL, POS], "poisson", [POS2], NotImplementedError),  # two families
    ("binomial", [PROB], "binomial_n", [COUNTS_P, PROB2], NotImplementedError),  # fewer trials
    ("transformed", [REAL, POS], "lognormal", [REAL2, POS2], NotImplementedError),
    ("mvn", [LOC3, TRIL], "mvn", [LOC3[:, :2], TRIL[:, :2, :2]], ValueError),
]


@pytest.mark.parametrize("case", REFUSED, ids=[f"{c[0]}_{c[2]}" for c in REFUSED])
def test_refused_pairs_raise_as_torch(case):
    error = case[4]
    for m in (torch, flow):
        p, q, _ = _dists(m, case)
        with pytest.raises(error):
            m.distributions.kl_divergence(p, q)


def test_unregistered_pair_names_both_types():
    D = flow.distributions
    with pytest.raises(NotImplementedError, match="Cauchy.*Laplace"):
        D.kl_divergence(D.Cauchy(0.0, 1.0), D.Laplace(0.0, 1.0))


def test_most_specific_registration_wins():
    """A pair registered for a subclass beats its base classes' pair, on whichever side the
    subclass stands, as torch's dispatch; the left side decides between two partial matches."""
    results = {}
    for m, registry in ((torch, torch_kl._KL_REGISTRY), (flow, flow.distributions.kl._KL)):
        D = m.distributions

        class Sub(D.Normal):
            pass

        class SubSub(Sub):
            pass

        keys = [(Sub, D.Normal), (D.Normal, Sub), (SubSub, Sub)]
        D.register_kl(*keys[0])(lambda p, q: 2 * (p.loc - q.loc) + 3 * q.scale)
        D.register_kl(*keys[1])(lambda p, q: 5 * (p.scale - q.loc))
        D.register_kl(*keys[2])(lambda p, q: 7 * p.loc * q.scale)
        torch_kl._KL_MEMOIZE.clear()
        try:
            loc, scale = m.tensor(REAL), m.tensor(POS)
            pairs = [(Sub, D.Normal), (D.Normal, Sub), (SubSub, D.Normal), (D.Normal, SubSub),
                     (SubSub, SubSub), (SubSub, Sub), (D.Normal, D.Normal)]
            results[m] = [D.kl_divergence(tp(loc, scale), tq(scale, loc + 2)).numpy()
                          for tp, tq in pairs]
            # (Sub, Normal) and (Normal, Sub) both match: p's side wins, with a warning
            with pytest.warns(RuntimeWarning, match="Ambiguous"):
                ambiguous = D.kl_divergence(Sub(loc, scale), SubSub(scale, loc + 2))
            results[m].insert(0, ambiguous.numpy())
        finally:
            for key in keys:
                del registry[key]
            torch_kl._KL_MEMOIZE.clear()
    for got, want in zip(results[flow], results[torch]):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    # the subclass pairs did not fall back to Normal-Normal
    assert not any(np.allclose(r, results[torch][-1]) for r in results[torch][:-1])
