"""Multinomial, NegativeBinomial, MixtureSameFamily, the relaxed distributions,
OneHotCategoricalStraightThrough, LowRankMultivariateNormal and Wishart against
torch.distributions in float64: values and gradients of log_prob, cdf, entropy, moments and
matrices; support and argument constraints; sample shapes and moments; rsample gradients;
expand; validation errors; the registered KL pairs."""
import types
import warnings

import numpy as np
import pytest
import torch
import torch.distributions.relaxed_bernoulli
import torch.distributions.relaxed_categorical

import flowgrad as flow

# torch keeps the two logit-space relaxed distributions out of torch.distributions' namespace
TORCH_D = types.SimpleNamespace(
    **vars(torch.distributions),
    LogitRelaxedBernoulli=torch.distributions.relaxed_bernoulli.LogitRelaxedBernoulli,
    ExpRelaxedCategorical=torch.distributions.relaxed_categorical.ExpRelaxedCategorical)


def _dists(fw):
    return TORCH_D if fw is torch else flow.distributions


R = np.random.default_rng(7)
POS = R.uniform(0.5, 2.0, (3, 2))
PROB = R.uniform(0.1, 0.9, (3, 2))
PROB2 = R.uniform(0.1, 0.9, (3, 2))
REAL = R.standard_normal((3, 2))
REAL4 = R.standard_normal((3, 4))
SIMPLEX = R.uniform(0.2, 1.0, (3, 4))
SIMPLEX /= SIMPLEX.sum(-1, keepdims=True)
SIMPLEX2 = R.uniform(0.2, 1.0, (3, 4))
SIMPLEX2 /= SIMPLEX2.sum(-1, keepdims=True)
COUNTS = np.array([[0.0, 1.0], [3.0, 2.0], [5.0, 0.0]])
COUNTS4 = np.array([[1.0, 2.0, 0.0, 2.0], [0.0, 0.0, 5.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
MASK4 = np.array([1.0, 1.0, 1.0, 0.0])
TEMP = np.array(0.7)
A = R.standard_normal((2, 3, 3))
COV = A @ A.transpose(0, 2, 1) + 2 * np.eye(3)
TRIL = np.linalg.cholesky(COV)
B = R.standard_normal((3, 3))
SPD = B @ B.T + np.eye(3)
W = R.standard_normal((2, 3, 2))
D3 = R.uniform(0.5, 2.0, (2, 3))
LOC3 = R.standard_normal((2, 3))


def _mixture_normal(D, w, loc, scale):
    return D.MixtureSameFamily(D.Categorical(probs=w), D.Normal(loc, scale))


def _mixture_mvn(D, logits, loc, L):
    return D.MixtureSameFamily(D.Categorical(logits=logits),
                               D.MultivariateNormal(loc, scale_tril=L.tril()))


def _mixture_independent(D, w, loc, scale):
    # the mixture's batch () broadcasts against the components' (3,)
    return D.MixtureSameFamily(D.Categorical(probs=w), D.Independent(D.Normal(loc, scale), 1))


OUTPUTS = {
    "log_prob": lambda d, v: d.log_prob(v),
    "cdf": lambda d, v: d.cdf(v),
    "entropy": lambda d, v: d.entropy(),
    "mean": lambda d, v: d.mean,
    "mode": lambda d, v: d.mode,
    "variance": lambda d, v: d.variance,
    "stddev": lambda d, v: d.stddev,
    "covariance_matrix": lambda d, v: d.covariance_matrix,
    "precision_matrix": lambda d, v: d.precision_matrix,
    "scale_tril": lambda d, v: d.scale_tril,
    "log_normalizer": lambda d, v: d._log_normalizer(*d._natural_params),
}
MOMENTS = "mean variance"
LOWRANK = "log_prob entropy mean mode variance covariance_matrix precision_matrix scale_tril"
WISHART = "log_prob entropy mean mode variance covariance_matrix precision_matrix scale_tril " \
          "log_normalizer"

# name, make(D, *params) -> distribution, params (each differentiated), value, outputs
CASES = [
    ("multinomial_probs", lambda D, p: D.Multinomial(5, probs=p), [SIMPLEX], COUNTS4,
     "log_prob entropy " + MOMENTS),
    ("multinomial_logits", lambda D, lg: D.Multinomial(6, logits=lg), [REAL4], COUNTS4,
     "log_prob entropy " + MOMENTS),
    ("multinomial_impossible_category", lambda D, lg: D.Multinomial(5, logits=lg),
     [np.where(MASK4, REAL4, -np.inf)], COUNTS4 * MASK4, "log_prob " + MOMENTS),
    ("negative_binomial_probs", lambda D, n, p: D.NegativeBinomial(n, probs=p), [POS, PROB],
     COUNTS, "log_prob mode " + MOMENTS),
    ("negative_binomial_logits", lambda D, n, lg: D.NegativeBinomial(n, logits=lg),
     [POS * 3, REAL], COUNTS, "log_prob mode " + MOMENTS),
    ("mixture_normal", _mixture_normal, [SIMPLEX, REAL4, SIMPLEX + 0.5], REAL[:, 0],
     "log_prob cdf stddev " + MOMENTS),
    ("mixture_mvn", _mixture_mvn, [REAL[:2, 0], LOC3, TRIL], R.standard_normal((4, 3)),
     "log_prob " + MOMENTS),
    ("mixture_independent", _mixture_independent, [SIMPLEX[0], R.standard_normal((3, 4, 2)),
                                                    R.uniform(0.5, 2.0, (3, 4, 2))],
     REAL, "log_prob " + MOMENTS),
    ("logit_relaxed_bernoulli", lambda D, t, lg: D.LogitRelaxedBernoulli(t, logits=lg),
     [TEMP, REAL], REAL[::-1].copy(), "log_prob"),
    ("relaxed_bernoulli_probs", lambda D, t, p: D.RelaxedBernoulli(t, probs=p), [TEMP, PROB],
     PROB2, "log_prob"),
    ("relaxed_bernoulli_logits", lambda D, t, lg: D.RelaxedBernoulli(t, logits=lg),
     [TEMP, REAL], PROB2, "log_prob"),
    ("exp_relaxed_categorical", lambda D, t, p: D.ExpRelaxedCategorical(t, probs=p),
     [TEMP, SIMPLEX], np.log(SIMPLEX2), "log_prob"),
    ("relaxed_onehot_probs", lambda D, t, p: D.RelaxedOneHotCategorical(t, probs=p),
     [TEMP, SIMPLEX], SIMPLEX2, "log_prob"),
    ("relaxed_onehot_logits", lambda D, t, lg: D.RelaxedOneHotCategorical(t, logits=lg),
     [TEMP * 2, REAL4], SIMPLEX2, "log_prob"),
    ("onehot_straight_through", lambda D, p: D.OneHotCategoricalStraightThrough(probs=p),
     [SIMPLEX], np.eye(4)[[2, 0, 3]], "log_prob entropy mode " + MOMENTS),
    ("lowrank", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [LOC3, W, D3],
     R.standard_normal((5, 2, 3)), LOWRANK),
    ("lowrank_broadcast", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
     [LOC3[0], W[:, :, :1], D3[0]], LOC3[::-1].copy(), LOWRANK),
    ("wishart_cov", lambda D, df, c: D.Wishart(df, covariance_matrix=c),
     [np.array([4.5, 3.2]), COV], SPD, WISHART),
    ("wishart_tril", lambda D, df, L: D.Wishart(df, scale_tril=L.tril()),
     [np.array(5.0), TRIL], np.stack([SPD, COV[0]]), WISHART),
    ("wishart_precision", lambda D, df, p: D.Wishart(df, precision_matrix=p),
     [np.array([2.5, 6.0]), COV], SPD, WISHART),
]


def _build(fw, make, params):
    ts = [(torch.tensor(p) if fw is torch else flow.tensor(p)).requires_grad_() for p in params]
    return make(_dists(fw), *ts), ts


def _value(fw, v):
    return torch.tensor(v) if fw is torch else flow.tensor(v)


def _run(fw, make, params, value, outputs):
    d, ts = _build(fw, make, params)
    outs = {name: OUTPUTS[name](d, _value(fw, value)) for name in outputs.split()}
    total = sum((o * (i + 1)).sum() for i, o in enumerate(outs.values()))
    grads = fw.autograd.grad(total, ts, allow_unused=True)
    return (d, {k: v.detach().numpy() for k, v in outs.items()},
            [None if g is None else g.numpy() for g in grads])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(case):
    _, make, params, value, outputs = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Wishart's low-df note, on both sides
        dt, vt, gt = _run(torch, make, params, value, outputs)
        df, vf, gf = _run(flow, make, params, value, outputs)
    assert (tuple(df.batch_shape), tuple(df.event_shape)) == \
        (tuple(dt.batch_shape), tuple(dt.event_shape))
    for k in vt:
        assert vf[k].shape == vt[k].shape, k
        # the Multinomial entropy: torch takes log(n!) in float32, flowgrad in float64
        atol = 1e-6 if k == "entropy" and "multinomial" in case[0] else 1e-9
        np.testing.assert_allclose(vf[k], vt[k], rtol=1e-7, atol=atol, err_msg=k)
    for i, (a, b) in enumerate(zip(gf, gt)):
        assert (a is None) == (b is None), f"gradient {i} presence"
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=f"grad {i}")


SECOND_ORDER = ["multinomial_logits", "negative_binomial_logits", "mixture_normal",
                "relaxed_onehot_logits", "relaxed_bernoulli_probs", "lowrank", "wishart_tril"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_order_gradients_match_torch(name):
    """The gradient of (a weighted sum of) the first gradients, through every output."""
    _, make, params, value, outputs = next(c for c in CASES if c[0] == name)
    out = []
    for fw in (torch, flow):
        d, ts = _build(fw, make, params)
        outs = [OUTPUTS[k](d, _value(fw, value)) for k in outputs.split()]
        total = sum((o * (i + 1)).sum() for i, o in enumerate(outs))
        first = fw.autograd.grad(total, ts, create_graph=True)
        # uneven weights: a softmax's logits' gradient sums to 0, whatever its value
        weights = [_value(fw, np.cos(np.arange(g.numel())).reshape(tuple(g.shape)))
                   for g in first]
        second = fw.autograd.grad(sum((g * w).sum() for g, w in zip(first, weights)), ts,
                                  allow_unused=True)
        out.append([None if g is None else g.numpy() for g in second])
    for i, (a, b) in enumerate(zip(*out)):
        if b is None:  # torch has none: flowgrad's is absent or zero
            assert a is None or not a.any(), f"grad {i}"
        else:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=f"grad {i}")


def test_wishart_entropy_agrees_with_its_exponential_family_form():
    """ExponentialFamily's entropy, from the natural parameters and the log normalizer,
    equals Wishart's closed form (and torch's value of it)."""
    out = []
    for fw in (torch, flow):
        d, _ = _build(fw, lambda D, df, L: D.Wishart(df, scale_tril=L.tril()),
                      [np.array([4.5, 3.2]), TRIL])
        out.append((_dists(fw).ExponentialFamily.entropy(d).detach().numpy(),
                    d.entropy().detach().numpy()))
    np.testing.assert_allclose(out[1][0], out[1][1], rtol=1e-10)
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-10)


def _describe(constraint):
    # (flowgrad's MixtureSameFamilyConstraint repr leaves out the base constraint: compare it)
    mixture = type(constraint).__name__ == "MixtureSameFamilyConstraint"
    inner = _describe(constraint.base_constraint) if mixture else repr(constraint)
    return inner, constraint.is_discrete, constraint.event_dim


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_support_constraints_and_flags_match_torch(case):
    _, make, params, _, _ = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dt, df = _build(torch, make, params)[0], _build(flow, make, params)[0]
    assert _describe(df.support) == _describe(dt.support)
    assert {k: repr(c) for k, c in df.arg_constraints.items()} == \
        {k: repr(c) for k, c in dt.arg_constraints.items()}
    assert (df.has_rsample, df.has_enumerate_support) == \
        (dt.has_rsample, dt.has_enumerate_support)


def test_negative_binomial_zero_total_count_puts_its_mass_on_zero():
    out = []
    for fw in (torch, flow):
        d = _dists(fw).NegativeBinomial(_value(fw, np.array([0.0, 0.0, 2.0])),
                                        probs=_value(fw, np.array([0.3, 0.3, 0.3])))
        out.append(d.log_prob(_value(fw, np.array([0.0, 2.0, 0.0]))).numpy())
    np.testing.assert_allclose(out[1], out[0])
    assert out[1][0] == 0.0


def test_wishart_mode_is_nan_where_undefined():
    theirs, ours = (_dists(fw).Wishart(_value(fw, np.array([3.5, 5.0])),
                                       covariance_matrix=_value(fw, COV[0])).mode.numpy()
                    for fw in (torch, flow))
    np.testing.assert_allclose(ours, theirs)
    assert np.isnan(ours[0]).all() and not np.isnan(ours[1]).any()  # df > p + 1 has a mode


# name, make(D, fw) -> distribution, whose draws are checked against its mean and variance
SAMPLED = [
    ("multinomial", lambda D, fw: D.Multinomial(7, probs=fw.tensor([[0.2, 0.5, 0.3],
                                                                     [0.6, 0.1, 0.3]]))),
    ("negative_binomial", lambda D, fw: D.NegativeBinomial(fw.tensor([3.0, 0.5]),
                                                           probs=fw.tensor([0.4, 0.7]))),
    ("mixture_normal", lambda D, fw: _mixture_normal(
        D, fw.tensor([[0.3, 0.7], [0.5, 0.5]]), fw.tensor([[-2.0, 1.0], [0.0, 3.0]]),
        fw.tensor([[0.5, 1.0], [1.0, 0.2]]))),
    ("mixture_broadcast", lambda D, fw: _mixture_normal(  # mixture batch () vs (3,)
        D, fw.tensor([0.3, 0.7]), fw.tensor([[-2.0, 1.0], [0.0, 3.0], [1.0, 1.5]]),
        fw.tensor([[0.5, 1.0], [1.0, 0.2], [0.3, 0.3]]))),
    ("mixture_mvn", lambda D, fw: D.MixtureSameFamily(
        D.Categorical(fw.tensor([0.4, 0.6])),
        D.MultivariateNormal(fw.tensor([[1.0, -1.0], [-2.0, 0.5]]), fw.eye(2) * 0.5))),
    ("onehot_straight_through", lambda D, fw: D.OneHotCategoricalStraightThrough(
        fw.tensor([[0.2, 0.5, 0.3]]))),
    ("lowrank", lambda D, fw: D.LowRankMultivariateNormal(
        fw.tensor([1.0, -1.0, 0.0]), fw.tensor([[1.0, 0.0], [0.5, 1.0], [0.0, -1.0]]),
        fw.tensor([0.5, 1.0, 2.0]))),
    ("wishart", lambda D, fw: D.Wishart(fw.tensor([4.0, 6.5]), covariance_matrix=fw.tensor(
        [[1.0, 0.3], [0.3, 0.5]]))),
]


@pytest.mark.parametrize("case", SAMPLED, ids=[c[0] for c in SAMPLED])
def test_sample_shapes_and_moments(case):
    _, make = case
    flow.manual_seed(0)
    d = make(flow.distributions, flow)
    n = 4000
    x = d.sample((n,))
    assert tuple(x.shape) == (n, *d.batch_shape, *d.event_shape)
    assert tuple(d.sample().shape) == tuple(d.batch_shape) + tuple(d.event_shape)
    assert not x.requires_grad
    mean, var = d.mean.numpy(), d.variance.numpy()
    np.testing.assert_allclose(x.numpy().mean(0), mean, atol=6 * np.sqrt(var.max() / n))
    np.testing.assert_allclose(x.numpy().var(0), var, rtol=0.2, atol=1e-2)
    log_prob = d.log_prob(x[:50])  # the draws lie in the support (validated) with finite log_prob
    assert np.isfinite(log_prob.numpy()).all()


def test_lowrank_samples_have_its_covariance():
    flow.manual_seed(1)
    d = dict(SAMPLED)["lowrank"](flow.distributions, flow)
    x = d.rsample((20000,)).numpy()
    np.testing.assert_allclose(np.cov(x.T), d.covariance_matrix.numpy(), atol=0.08)


RELAXED = [
    ("relaxed_bernoulli", lambda D, t, lg: D.RelaxedBernoulli(t, logits=lg),
     [np.array(0.5), np.array([-1.0, 0.3, 2.0])]),
    ("logit_relaxed_bernoulli", lambda D, t, lg: D.LogitRelaxedBernoulli(t, logits=lg),
     [np.array(1.5), np.array([-1.0, 0.3, 2.0])]),
    ("relaxed_onehot", lambda D, t, lg: D.RelaxedOneHotCategorical(t, logits=lg),
     [np.array(0.8), np.array([[0.5, -1.0, 1.0], [0.0, 2.0, 0.0]])]),
    ("exp_relaxed_categorical", lambda D, t, lg: D.ExpRelaxedCategorical(t, logits=lg),
     [np.array(2.0), np.array([[0.5, -1.0, 1.0], [0.0, 2.0, 0.0]])]),
]


@pytest.mark.parametrize("case", RELAXED, ids=[c[0] for c in RELAXED])
def test_relaxed_rsample_moments_and_gradients_match_torch(case):
    """E[f(x)] and its gradient in the temperature and the logits, by Monte Carlo on both
    sides (no shared noise), and the discrete law the relaxation keeps: P(x > 1/2) is probs
    for the Bernoulli, argmax x ~ Categorical for the one-hot."""
    name, make, params = case
    n, out = 20000, {}
    torch.manual_seed(0)
    flow.manual_seed(0)
    for fw in (torch, flow):
        d, ts = _build(fw, make, params)
        x = d.rsample((n,))
        assert tuple(x.shape) == (n, *d.batch_shape, *d.event_shape)
        f = (x.tanh() if "logit" in name or "exp" in name else x) ** 2
        grads = fw.autograd.grad(f.mean(0).sum(), ts)
        out[fw] = (f.detach().numpy().mean(0), [g.numpy() for g in grads], x.detach().numpy(),
                   d.probs.detach().numpy())
    (ft, gt, _, _), (ff, gf, x, probs) = out[torch], out[flow]
    np.testing.assert_allclose(ff, ft, atol=0.02)
    for a, b in zip(gf, gt):
        np.testing.assert_allclose(a, b, rtol=0.1, atol=0.02)
    if "bernoulli" in name:
        threshold = 0.0 if "logit" in name else 0.5
        np.testing.assert_allclose((x > threshold).mean(0), probs, atol=0.02)
    else:
        counts = np.eye(3)[x.argmax(-1)].mean(0)
        np.testing.assert_allclose(counts, probs, atol=0.02)
        if name == "relaxed_onehot":
            np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-12)


def test_straight_through_rsample_is_one_hot_with_the_gradient_of_probs():
    grads = []
    weights = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]])
    for fw in (torch, flow):
        logits = _value(fw, np.array([[0.5, -1.0, 1.0], [0.0, 2.0, 0.0]])).requires_grad_()
        x = _dists(fw).OneHotCategoricalStraightThrough(logits=logits).rsample((10,))
        values = x.detach().numpy()
        assert ((values == 0) | (values == 1)).all() and (values.sum(-1) == 1).all()
        (x * _value(fw, weights)).sum().backward()
        grads.append(logits.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-10, atol=1e-12)


def test_lowrank_rsample_gradients_follow_the_reparameterisation():
    flow.manual_seed(0)
    loc = flow.tensor([1.0, -0.5], requires_grad=True)
    factor = flow.tensor([[1.0], [0.5]], requires_grad=True)
    diag = flow.tensor([0.5, 2.0], requires_grad=True)
    x = flow.distributions.LowRankMultivariateNormal(loc, factor, diag).rsample((40000,))
    (x ** 2).mean(0).sum().backward()  # E[x_i^2] = loc_i^2 + sum_j W_ij^2 + D_i
    np.testing.assert_allclose(loc.grad.numpy(), 2 * loc.detach().numpy(), atol=0.05)
    np.testing.assert_allclose(factor.grad.numpy(), 2 * factor.detach().numpy(), atol=0.05)
    np.testing.assert_allclose(diag.grad.numpy(), [1.0, 1.0], atol=0.05)


def test_wishart_rsample_gradients_follow_the_reparameterisation():
    """E[X] = df L L^T: the gradients of the mean of many draws, in df (through the Chi2
    draws of the Bartlett decomposition) and in L, approach those of df * sum(L L^T)."""
    flow.manual_seed(0)
    df = flow.tensor(4.0, requires_grad=True)
    L = flow.tensor([[1.0, 0.0], [0.4, 0.8]], requires_grad=True)
    x = flow.distributions.Wishart(df, scale_tril=L).rsample((20000,))
    got = flow.autograd.grad(x.mean(0).sum(), [df, L])
    expected = flow.autograd.grad((df * (L @ L.mT)).sum(), [df, L])
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=0.05, atol=0.05)


def test_wishart_samples_below_p_degrees_of_freedom_are_positive_definite():
    flow.manual_seed(0)
    with pytest.warns(UserWarning, match="Low df"):
        d = flow.distributions.Wishart(flow.tensor(2.2), covariance_matrix=flow.eye(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Singular sample detected", if one is
        x = d.rsample((200,))
    assert bool(flow.distributions.constraints.positive_definite.check(x).all())


# make(D, fw) -> distribution, new batch shape, value for log_prob
EXPANDED = [
    (lambda D, fw: D.Multinomial(5, probs=fw.tensor(SIMPLEX[0])), (2, 3), COUNTS4),
    (lambda D, fw: D.NegativeBinomial(fw.tensor(2.0), logits=fw.tensor([0.5, -1.0])), (3, 2),
     COUNTS),
    (lambda D, fw: _mixture_normal(D, fw.tensor(SIMPLEX[0]), fw.tensor(REAL4[0]),
                                   fw.tensor(SIMPLEX[1] + 0.5)), (3,), REAL[:, 0]),
    (lambda D, fw: D.RelaxedBernoulli(fw.tensor(0.5), probs=fw.tensor([0.3, 0.6])), (3, 2),
     PROB2),
    (lambda D, fw: D.LogitRelaxedBernoulli(fw.tensor(0.5), logits=fw.tensor([0.3, 0.6])),
     (3, 2), REAL),
    (lambda D, fw: D.RelaxedOneHotCategorical(fw.tensor(0.5), probs=fw.tensor(SIMPLEX[0])),
     (3,), SIMPLEX2),
    (lambda D, fw: D.ExpRelaxedCategorical(fw.tensor(0.5), probs=fw.tensor(SIMPLEX[0])),
     (3,), np.log(SIMPLEX2)),
    (lambda D, fw: D.OneHotCategoricalStraightThrough(fw.tensor(SIMPLEX[0])), (3,),
     np.eye(4)[[2, 0, 3]]),
    (lambda D, fw: D.LowRankMultivariateNormal(fw.tensor(LOC3[0]), fw.tensor(W[0]),
                                               fw.tensor(D3[0])), (4, 2), LOC3),
    (lambda D, fw: D.Wishart(fw.tensor(4.0), scale_tril=fw.tensor(TRIL[0])), (2,), SPD),
]


@pytest.mark.parametrize("case", EXPANDED, ids=range(len(EXPANDED)))
def test_expand_matches_torch(case):
    make, batch, value = case
    out = {}
    for fw in (torch, flow):
        d = make(_dists(fw), fw)
        e = d.expand(batch)
        rsample = e.rsample() if e.has_rsample else None
        out[fw] = (type(e).__name__, tuple(e.batch_shape), tuple(e.event_shape),
                   tuple(e.sample((2,)).shape), None if rsample is None else rsample.shape,
                   e.log_prob(_value(fw, value)).numpy())
    for a, b in zip(out[flow][:5], out[torch][:5]):
        assert a == b or tuple(a) == tuple(b)
    np.testing.assert_allclose(out[flow][5], out[torch][5], rtol=1e-7)


def _lowrank(D, fw):
    return D.LowRankMultivariateNormal(fw.zeros(3), fw.ones(3, 1), fw.ones(3))


# name, what flowgrad's message says, call(D, fw) that raises in torch: flowgrad raises the
# same exception type
BAD = [
    ("multinomial_real_count", "inhomogeneous total_count",
     lambda D, fw: D.Multinomial(2.5, probs=fw.ones(3))),
    ("multinomial_both", "Either `probs` or `logits`",
     lambda D, fw: D.Multinomial(2, fw.ones(3), fw.zeros(3))),
    ("multinomial_negative_probs", "parameter probs",
     lambda D, fw: D.Multinomial(2, fw.tensor([0.5, -0.1]))),
    ("multinomial_too_many", "support .Multinomial",
     lambda D, fw: D.Multinomial(3, fw.ones(2)).log_prob(fw.tensor([2.0, 2.0]))),
    ("negbin_negative_count", "parameter total_count .* NegativeBinomial",
     lambda D, fw: D.NegativeBinomial(fw.tensor(-1.0), fw.tensor(0.5))),
    ("negbin_probs_one", "parameter probs .* NegativeBinomial",
     lambda D, fw: D.NegativeBinomial(fw.tensor(2.0), fw.tensor(1.0))),
    ("negbin_neither", "Either `probs` or `logits`",
     lambda D, fw: D.NegativeBinomial(fw.tensor(2.0))),
    ("negbin_fraction", "within the support",
     lambda D, fw: D.NegativeBinomial(fw.tensor(2.0), fw.tensor(0.5)).log_prob(fw.tensor(1.5))),
    ("mixture_not_categorical", "MixtureSameFamily: the mixture distribution .* Categorical",
     lambda D, fw: D.MixtureSameFamily(D.Bernoulli(fw.tensor(0.5)), D.Normal(fw.zeros(2), 1.0))),
    ("mixture_not_distribution", "MixtureSameFamily: the component distribution",
     lambda D, fw: D.MixtureSameFamily(D.Categorical(fw.ones(2)), fw.zeros(2))),
    ("mixture_count_mismatch", "MixtureSameFamily: .* 3 components",
     lambda D, fw: D.MixtureSameFamily(D.Categorical(fw.ones(3)), D.Normal(fw.zeros(2), 1.0))),
    ("mixture_batch_mismatch", "MixtureSameFamily: .* not compatible",
     lambda D, fw: D.MixtureSameFamily(D.Categorical(fw.ones(3, 2)),
                                       D.Normal(fw.zeros(4, 2), 1.0))),
    ("mixture_no_component_dim", "MixtureSameFamily: .* batch dimension",
     lambda D, fw: D.MixtureSameFamily(D.Categorical(fw.ones(1)),
                                       D.Normal(fw.tensor(0.0), 1.0))),
    ("mixture_outside_support", "within the support .* MixtureSameFamily",
     lambda D, fw: D.MixtureSameFamily(D.Categorical(fw.ones(2)), D.Exponential(fw.ones(2)))
     .log_prob(fw.tensor(-1.0))),
    ("relaxed_bernoulli_probs", "parameter probs .* LogitRelaxedBernoulli",
     lambda D, fw: D.RelaxedBernoulli(fw.tensor(0.5), fw.tensor(1.5))),
    ("relaxed_bernoulli_both", "Either `probs` or `logits`",
     lambda D, fw: D.RelaxedBernoulli(fw.tensor(0.5), fw.tensor(0.5), fw.tensor(0.0))),
    ("relaxed_bernoulli_outside", "within the support .* RelaxedBernoulli",
     lambda D, fw: D.RelaxedBernoulli(fw.tensor(0.5), fw.tensor(0.5)).log_prob(fw.tensor(1.5))),
    ("relaxed_onehot_probs", "parameter probs",
     lambda D, fw: D.RelaxedOneHotCategorical(fw.tensor(0.5), fw.tensor([0.5, -0.5]))),
    ("relaxed_onehot_outside", "within the support .* RelaxedOneHotCategorical",
     lambda D, fw: D.RelaxedOneHotCategorical(fw.tensor(0.5), fw.tensor([0.5, 0.5]))
     .log_prob(fw.tensor([0.5, 0.7]))),
    ("lowrank_scalar_loc", "LowRankMultivariateNormal: loc",
     lambda D, fw: D.LowRankMultivariateNormal(fw.tensor(0.0), fw.ones(1, 1), fw.ones(1))),
    ("lowrank_vector_factor", "LowRankMultivariateNormal: cov_factor",
     lambda D, fw: D.LowRankMultivariateNormal(fw.zeros(3), fw.ones(3), fw.ones(3))),
    ("lowrank_factor_rows", "LowRankMultivariateNormal: cov_factor .* 3 x m",
     lambda D, fw: D.LowRankMultivariateNormal(fw.zeros(3), fw.ones(2, 1), fw.ones(3))),
    ("lowrank_diag_size", "LowRankMultivariateNormal: cov_diag",
     lambda D, fw: D.LowRankMultivariateNormal(fw.zeros(3), fw.ones(3, 1), fw.ones(2))),
    ("lowrank_batch", "LowRankMultivariateNormal: incompatible batch shapes",
     lambda D, fw: D.LowRankMultivariateNormal(fw.zeros(2, 3), fw.ones(4, 3, 1), fw.ones(3))),
    ("lowrank_negative_diag", "parameter cov_diag .* LowRankMultivariateNormal",
     lambda D, fw: D.LowRankMultivariateNormal(fw.zeros(3), fw.zeros(3, 1),
                                               fw.tensor([1.0, -1.0, 1.0]))),
    ("lowrank_kl_event", "different event shapes",
     lambda D, fw: D.kl_divergence(_lowrank(D, fw),
                                   D.MultivariateNormal(fw.zeros(2), fw.eye(2)))),
    ("wishart_two_matrices", "Wishart: exactly one of",
     lambda D, fw: D.Wishart(fw.tensor(3.0), fw.eye(2), fw.eye(2))),
    ("wishart_vector", "Wishart: .* two-dimensional",
     lambda D, fw: D.Wishart(fw.tensor(3.0), fw.ones(2))),
    ("wishart_df", "Wishart: value of df",
     lambda D, fw: D.Wishart(fw.tensor([3.0, 1.5]), fw.eye(3))),
    ("wishart_not_pd", "parameter covariance_matrix .* Wishart",
     lambda D, fw: D.Wishart(fw.tensor(3.0), fw.tensor([[1.0, 2.0], [2.0, 1.0]]))),
    ("wishart_not_tril", "parameter scale_tril .* Wishart",
     lambda D, fw: D.Wishart(fw.tensor(3.0), scale_tril=fw.ones(2, 2))),
    ("wishart_outside", "within the support .* Wishart",
     lambda D, fw: D.Wishart(fw.tensor(3.0), fw.eye(2)).log_prob(-fw.eye(2))),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_validation_errors_match_torch(case):
    _, message, call = case
    with pytest.raises(Exception) as theirs:
        call(TORCH_D, torch)
    with pytest.raises(theirs.type, match=message):
        call(flow.distributions, flow)


def test_validation_can_be_turned_off():
    D = flow.distributions
    d = D.NegativeBinomial(flow.tensor(-1.0), flow.tensor(0.5), validate_args=False)
    assert d.mean.item() == -1.0
    lp = D.LowRankMultivariateNormal(flow.zeros(2), flow.zeros(2, 1), flow.tensor([1.0, 2.0]),
                                     validate_args=False).log_prob(flow.tensor([np.nan, 0.0]))
    assert np.isnan(lp.item())
    lp = D.RelaxedBernoulli(flow.tensor(0.5), flow.tensor(0.5), validate_args=False).log_prob(
        flow.tensor(1.5))
    assert lp.shape == ()


def _lr(D, m, w, d):
    return D.LowRankMultivariateNormal(m, w, d)


def _mvn(D, m, L):
    return D.MultivariateNormal(m, scale_tril=L.tril())


# p: make, params; q: make, params
KL_PAIRS = [
    ("lowrank_lowrank", _lr, [LOC3, W, D3], _lr, [LOC3[::-1].copy(), W[::-1] * 0.5, D3 + 1]),
    ("lowrank_lowrank_broadcast", _lr, [LOC3[0], W[0], D3[0]], _lr, [LOC3, W[..., :1], D3]),
    ("mvn_lowrank", _mvn, [LOC3, TRIL], _lr, [LOC3[::-1].copy(), W, D3]),
    ("mvn_lowrank_broadcast", _mvn, [LOC3[0], TRIL[0]], _lr, [LOC3, W, D3]),
    ("lowrank_mvn", _lr, [LOC3, W, D3], _mvn, [LOC3[::-1].copy(), TRIL]),
    ("lowrank_mvn_broadcast", _lr, [LOC3, W, D3], _mvn, [LOC3[0], TRIL[1]]),
    ("straight_through", lambda D, p: D.OneHotCategoricalStraightThrough(p), [SIMPLEX],
     lambda D, p: D.OneHotCategoricalStraightThrough(p), [SIMPLEX2]),
]


@pytest.mark.parametrize("case", KL_PAIRS, ids=[c[0] for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case):
    _, make_p, p_params, make_q, q_params = case
    out = {}
    for fw in (torch, flow):
        p, tp = _build(fw, make_p, p_params)
        q, tq = _build(fw, make_q, q_params)
        kl = _dists(fw).kl_divergence(p, q)
        grads = fw.autograd.grad(kl.sum(), tp + tq)
        out[fw] = kl.detach().numpy(), [g.numpy() for g in grads]
    np.testing.assert_allclose(out[flow][0], out[torch][0], rtol=1e-7, atol=1e-9)
    for a, b in zip(out[flow][1], out[torch][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
