"""flowgrad.distributions against torch.distributions: log_prob, entropy, mean, variance, cdf
and KL values and their gradients; sample shapes and moments; rsample gradients; expand;
validation errors."""
import numpy as np
import pytest
import torch

import flowgrad as flow

R = np.random.default_rng(0)
POS = R.uniform(0.5, 2.0, (3, 2))
POS2 = R.uniform(0.5, 2.0, (3, 2))
REAL = R.standard_normal((3, 2))
PROB = R.uniform(0.1, 0.9, (3, 2))
SIMPLEX = R.uniform(0.2, 1.0, (3, 4))
CONC = R.uniform(0.5, 3.0, (3, 4))
A = R.standard_normal((3, 3))
COV = A @ A.T + 3 * np.eye(3)
TRIL = np.linalg.cholesky(COV)
COUNTS = np.array([[0.0, 1.0], [3.0, 2.0], [5.0, 0.0]])
ONEHOT = np.eye(4)[[0, 3, 1]]

# name, make(D, *params) -> distribution, params, value for log_prob
CASES = [
    ("normal", lambda D, a, b: D.Normal(a, b), [REAL, POS], REAL[::-1].copy()),
    ("uniform", lambda D, a, b: D.Uniform(a, a + b), [REAL, POS], REAL + 0.4 * POS),
    ("exponential", lambda D, r: D.Exponential(r), [POS], POS2),
    ("laplace", lambda D, a, b: D.Laplace(a, b), [REAL, POS], REAL[::-1].copy()),
    ("gamma", lambda D, a, b: D.Gamma(a, b), [POS, POS2], POS2),
    ("beta", lambda D, a, b: D.Beta(a, b), [POS, POS2], PROB),
    ("dirichlet", lambda D, c: D.Dirichlet(c), [CONC], SIMPLEX / SIMPLEX.sum(-1, keepdims=True)),
    ("bernoulli_probs", lambda D, p: D.Bernoulli(probs=p), [PROB], (PROB > 0.5) * 1.0),
    ("bernoulli_logits", lambda D, lg: D.Bernoulli(logits=lg), [REAL], (REAL > 0) * 1.0),
    ("categorical_probs", lambda D, p: D.Categorical(probs=p), [SIMPLEX], np.array([0, 3, 2])),
    ("categorical_logits", lambda D, lg: D.Categorical(logits=lg), [CONC], np.array([1, 0, 3])),
    ("onehot", lambda D, p: D.OneHotCategorical(probs=p), [SIMPLEX], ONEHOT),
    ("poisson", lambda D, r: D.Poisson(r), [POS], COUNTS),
    ("binomial", lambda D, p: D.Binomial(5, probs=p), [PROB], COUNTS),
    ("binomial_logits", lambda D, lg: D.Binomial(6, logits=lg), [REAL], COUNTS),
    ("mvn_cov", lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c),
     [REAL[:, 0], COV], REAL[:, 1]),
    ("mvn_tril", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L.tril()),
     [REAL[:, 0], TRIL], REAL.T.copy()),
    ("mvn_precision", lambda D, m, p: D.MultivariateNormal(m, precision_matrix=p),
     [REAL[:, 0], COV], REAL[:, 1]),
    ("independent", lambda D, a, b: D.Independent(D.Normal(a, b), 1), [REAL, POS], REAL * 0.5),
    ("lognormal", lambda D, a, b: D.LogNormal(a, b), [REAL, POS], POS2),
    ("transformed_affine_sigmoid", lambda D, a, b: D.TransformedDistribution(
        D.Normal(a, b), [D.AffineTransform(0.5, 2.0), D.SigmoidTransform()]), [REAL, POS],
     PROB),
    ("transformed_tanh_power", lambda D, a, b: D.TransformedDistribution(
        D.Gamma(a, b), [D.PowerTransform(0.5), D.TanhTransform()]), [POS, POS2], PROB * 0.9),
    ("transformed_exp_event", lambda D, a, b: D.TransformedDistribution(
        D.Independent(D.Normal(a, b), 1), [D.ExpTransform()]), [REAL, POS], POS2),
]
NO_ENTROPY = {"poisson", "transformed_affine_sigmoid", "transformed_tanh_power",
              "transformed_exp_event"}
NO_MOMENTS = {"transformed_affine_sigmoid", "transformed_tanh_power", "transformed_exp_event",
              "categorical_probs", "categorical_logits"}


def _build(fw, make, params):
    ts = [(torch.tensor(p) if fw is torch else flow.tensor(p)).requires_grad_() for p in params]
    return make(fw.distributions, *ts), ts


def _value(fw, v):
    return torch.tensor(v) if fw is torch else flow.tensor(v)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torch(case):
    name, make, params, value = case
    results = {}
    for fw in (torch, flow):
        d, ts = _build(fw, make, params)
        outs = {"log_prob": d.log_prob(_value(fw, value))}
        if name not in NO_ENTROPY:
            outs["entropy"] = d.entropy()
        if name not in NO_MOMENTS:
            outs["mean"], outs["variance"] = d.mean, d.variance
        total = sum((o * (i + 1)).sum() for i, o in enumerate(outs.values()))
        grads = (torch if fw is torch else flow).autograd.grad(total, ts, allow_unused=True)
        results[fw] = ({k: v.detach().numpy() for k, v in outs.items()},
                       [None if g is None else g.numpy() for g in grads],
                       tuple(d.batch_shape), tuple(d.event_shape))
    (vt, gt, bt, et), (vf, gf, bf, ef) = results[torch], results[flow]
    assert (bf, ef) == (bt, et)
    for k in vt:
        np.testing.assert_allclose(vf[k], vt[k], rtol=1e-7, atol=1e-9, err_msg=k)
    for i, (a, b) in enumerate(zip(gf, gt)):
        assert (a is None) == (b is None), f"gradient {i} presence"
        if b is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=f"grad {i}")


KL_PAIRS = [
    ("normal", lambda D, a, b: D.Normal(a, b), [REAL, POS], [REAL[::-1].copy(), POS2]),
    ("bernoulli", lambda D, p: D.Bernoulli(p), [PROB], [PROB[::-1].copy()]),
    ("categorical", lambda D, p: D.Categorical(p), [SIMPLEX], [SIMPLEX[::-1].copy()]),
    ("onehot", lambda D, p: D.OneHotCategorical(p), [SIMPLEX], [SIMPLEX[::-1].copy()]),
    ("uniform", lambda D, a, b: D.Uniform(a, a + b), [REAL, POS], [REAL - 1, POS + 2]),
    ("exponential", lambda D, r: D.Exponential(r), [POS], [POS2]),
    ("laplace", lambda D, a, b: D.Laplace(a, b), [REAL, POS], [REAL[::-1].copy(), POS2]),
    ("gamma", lambda D, a, b: D.Gamma(a, b), [POS, POS2], [POS2, POS]),
    ("beta", lambda D, a, b: D.Beta(a, b), [POS, POS2], [POS2, POS]),
    ("dirichlet", lambda D, c: D.Dirichlet(c), [CONC], [CONC[::-1].copy()]),
    ("poisson", lambda D, r: D.Poisson(r), [POS], [POS2]),
    ("mvn", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L.tril()), [REAL[:, 0], TRIL],
     [REAL[:, 1], np.linalg.cholesky(COV + np.eye(3))]),
    ("independent", lambda D, a, b: D.Independent(D.Normal(a, b), 1), [REAL, POS],
     [REAL * 2, POS2]),
]


@pytest.mark.parametrize("case", KL_PAIRS, ids=[c[0] for c in KL_PAIRS])
def test_kl_divergence_matches_torch(case):
    _, make, p_params, q_params = case
    out = {}
    for fw in (torch, flow):
        p, tp = _build(fw, make, p_params)
        q, tq = _build(fw, make, q_params)
        kl = fw.distributions.kl_divergence(p, q)
        grads = (torch if fw is torch else flow).autograd.grad(kl.sum(), tp + tq)
        out[fw] = kl.detach().numpy(), [g.numpy() for g in grads]
    np.testing.assert_allclose(out[flow][0], out[torch][0], rtol=1e-7, atol=1e-9)
    for a, b in zip(out[flow][1], out[torch][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_cdf_icdf_match_torch():
    for name in ("Normal", "Laplace", "Exponential", "Uniform"):
        args = {"Normal": (REAL, POS), "Laplace": (REAL, POS), "Exponential": (POS,),
                "Uniform": (REAL, REAL + 3)}[name]
        td = getattr(torch.distributions, name)(*map(torch.tensor, args))
        fd = getattr(flow.distributions, name)(*map(flow.tensor, args))
        v = REAL + 1.0 if name != "Exponential" else POS2
        np.testing.assert_allclose(fd.cdf(flow.tensor(v)).numpy(),
                                   td.cdf(torch.tensor(v)).numpy(), rtol=1e-7, atol=1e-9)
        if name != "Laplace":
            np.testing.assert_allclose(fd.icdf(flow.tensor(PROB)).numpy(),
                                       td.icdf(torch.tensor(PROB)).numpy(), rtol=1e-7)


SAMPLED = [
    ("normal", lambda D: D.Normal(flow.tensor([0.0, 2.0]), flow.tensor([1.0, 0.5]))),
    ("uniform", lambda D: D.Uniform(flow.tensor([0.0, -1.0]), flow.tensor([1.0, 3.0]))),
    ("exponential", lambda D: D.Exponential(flow.tensor([0.5, 2.0]))),
    ("laplace", lambda D: D.Laplace(flow.tensor([1.0, -1.0]), flow.tensor([0.5, 2.0]))),
    ("gamma", lambda D: D.Gamma(flow.tensor([0.5, 4.0]), flow.tensor([1.0, 2.0]))),
    ("beta", lambda D: D.Beta(flow.tensor([0.5, 3.0]), flow.tensor([2.0, 1.0]))),
    ("dirichlet", lambda D: D.Dirichlet(flow.tensor([[0.5, 1.0, 3.0]]))),
    ("bernoulli", lambda D: D.Bernoulli(flow.tensor([0.2, 0.7]))),
    ("categorical", lambda D: D.OneHotCategorical(flow.tensor([[0.2, 0.5, 0.3]]))),
    ("poisson", lambda D: D.Poisson(flow.tensor([0.5, 6.0]))),
    ("binomial", lambda D: D.Binomial(flow.tensor([3.0, 10.0]), flow.tensor([0.3, 0.8]))),
    ("mvn", lambda D: D.MultivariateNormal(flow.tensor([1.0, -1.0]),
                                           flow.tensor([[2.0, 0.5], [0.5, 1.0]]))),
    ("lognormal", lambda D: D.LogNormal(flow.tensor([0.0, 0.5]), flow.tensor([0.5, 0.25]))),
]


@pytest.mark.parametrize("case", SAMPLED, ids=[c[0] for c in SAMPLED])
def test_sample_shapes_and_moments(case):
    _, make = case
    flow.manual_seed(0)
    d = make(flow.distributions)
    n = 40000
    x = d.sample((n,))
    assert tuple(x.shape) == (n, *d.batch_shape, *d.event_shape)
    assert tuple(d.sample().shape) == tuple(d.batch_shape) + tuple(d.event_shape)
    assert not x.requires_grad
    mean, var = d.mean.numpy(), d.variance.numpy()
    np.testing.assert_allclose(x.numpy().mean(0), mean, atol=6 * np.sqrt(var.max() / n) + 1e-3)
    np.testing.assert_allclose(x.numpy().var(0), var, rtol=0.08, atol=1e-3)


def test_rsample_gradients_follow_the_reparameterisation():
    flow.manual_seed(0)
    n = 100000
    D = flow.distributions
    loc, scale = flow.tensor([1.0], requires_grad=True), flow.tensor([2.0], requires_grad=True)
    x = D.Normal(loc, scale).rsample((n,))
    (x ** 2).mean().backward()  # E[x^2] = loc^2 + scale^2
    np.testing.assert_allclose(loc.grad.numpy(), [2.0], rtol=0.05)
    np.testing.assert_allclose(scale.grad.numpy(), [4.0], rtol=0.05)
    # Gamma, Beta, Dirichlet: implicit reparameterisation, checked on gradients of means
    a, b = flow.tensor([0.7, 3.0], requires_grad=True), flow.tensor([2.0, 0.5])
    D.Gamma(a, b).rsample((n,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 1 / b.numpy(), rtol=0.03)
    c1, c0 = flow.tensor(2.0, requires_grad=True), flow.tensor(3.0, requires_grad=True)
    D.Beta(c1, c0).rsample((n,)).mean().backward()  # d/dc1 c1/(c1+c0) = c0/(c1+c0)^2
    np.testing.assert_allclose([c1.grad.item(), c0.grad.item()], [3 / 25, -2 / 25], rtol=0.05)
    for dist in (D.Uniform, D.Laplace, D.Exponential):
        assert dist.has_rsample
    assert not D.Bernoulli.has_rsample
    with pytest.raises(NotImplementedError, match="rsample"):
        D.Poisson(flow.ones(1)).rsample()


def test_expand_matches_torch():
    for fw in (torch, flow):
        D = fw.distributions
        ds = [D.Normal(fw.tensor([0.0, 1.0]), 1.0), D.Categorical(logits=fw.zeros(2, 3)),
              D.Dirichlet(fw.ones(2, 3)), D.Beta(fw.ones(2), 2.0),
              D.Independent(D.Normal(fw.zeros(2, 3), 1.0), 1), D.LogNormal(fw.zeros(2), 1.0),
              D.OneHotCategorical(fw.ones(2, 3))]
        shapes = [tuple(d.expand((4, 2)).sample().shape) for d in ds]
        if fw is torch:
            expected = shapes
    assert shapes == expected


def test_validation_errors_match_torch():
    D = flow.distributions
    with pytest.raises(ValueError, match="Expected parameter scale"):
        D.Normal(0.0, flow.tensor(-1.0))
    with pytest.raises(ValueError, match="Expected parameter probs"):
        D.Bernoulli(flow.tensor([1.5]))
    with pytest.raises(ValueError, match="Categorical: Either `probs` or `logits`"):
        D.Categorical()
    with pytest.raises(ValueError, match="within the support"):
        D.Exponential(flow.tensor(1.0)).log_prob(flow.tensor(-1.0))
    with pytest.raises(ValueError, match="within the support"):
        D.Categorical(flow.tensor([0.5, 0.5])).log_prob(flow.tensor(2))
    D.Normal(0.0, flow.tensor(-1.0), validate_args=False)  # no check when turned off
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(flow.tensor(1.0)))


@pytest.mark.parametrize("name", ["Categorical", "Bernoulli", "OneHotCategorical"])
def test_sampling_first_keeps_the_lazy_parameters_differentiable(name):
    """sample() reads `probs` (computed lazily from logits): it must be cached with its
    history, or a later entropy()/log_prob gets no gradient through it."""
    grads = []
    for fw in (torch, flow):
        logits = (torch.tensor(CONC) if fw is torch else flow.tensor(CONC)).requires_grad_()
        d = getattr(fw.distributions, name)(logits=logits)
        d.sample()
        d.entropy().sum().backward()
        grads.append(logits.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-7, atol=1e-10)


def test_torch_module_paths_import():
    """`from torch.distributions.<module> import <Class>` works with the import changed, for
    every class flowgrad has (each of torch's modules, checked against torch's names)."""
    import importlib
    import pkgutil

    import torch.distributions

    checked = 0
    for info in pkgutil.iter_modules(torch.distributions.__path__):
        theirs = importlib.import_module(f"torch.distributions.{info.name}")
        names = [n for n in getattr(theirs, "__all__", []) if hasattr(flow.distributions, n)
                 and isinstance(getattr(theirs, n), type)
                 and issubclass(getattr(theirs, n), torch.distributions.Distribution)]
        if not names:
            continue
        ours = importlib.import_module(f"flowgrad.distributions.{info.name}")
        assert all(getattr(ours, n) is getattr(flow.distributions, n) for n in names), info.name
        checked += 1
    assert checked >= 20
    from flowgrad.distributions.utils import logits_to_probs, probs_to_logits  # noqa: F401
