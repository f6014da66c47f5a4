"""Differential fuzzing of flow.distributions against torch.distributions: each distribution
flowgrad has, with random (broadcast, batched) parameters in either parameterisation (probs or
logits, scale_tril or covariance or precision), evaluated through every deterministic
method: log_prob (also at support edges and outside the support with validate_args off),
entropy, mean, mode, variance, stddev, cdf, icdf, and kl_divergence between two of the
same family; values and gradients with respect to parameters and value, in float64.

    .venv/bin/python tests/distributions_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/distributions_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np

RTOL = 1e-8  # (torch's trigamma, in Beta's KL gradient, is 5e-10 off)
NEWER = ["Cauchy", "Gumbel", "HalfNormal", "Chi2", "StudentT", "Geometric", "HalfCauchy",
         "InverseGamma", "Kumaraswamy", "Pareto", "Weibull", "FisherSnedecor", "VonMises",
         "ContinuousBernoulli", "NegativeBinomial"]
METHODS = ["log_prob", "entropy", "mean", "mode", "variance", "stddev", "cdf", "icdf", "kl"]


def _shape(r):
    return r.choice([(), (3,), (2, 3)])


def generate(seed):
    r = random.Random(seed)
    name = r.choice(["Normal", "LogNormal", "Laplace", "Uniform", "Exponential", "Gamma", "Beta",
                     "Bernoulli", "Binomial", "Categorical", "OneHotCategorical", "Poisson",
                     "Dirichlet", "MultivariateNormal", "Independent"] + NEWER)
    shape = _shape(r)
    params = {}
    if name in ("Normal", "LogNormal", "Laplace", "Cauchy", "Gumbel"):
        params = dict(loc=("normal", shape), scale=("positive", r.choice([shape, ()])))
    elif name in ("HalfNormal", "HalfCauchy"):
        params = dict(scale=("positive", shape))
    elif name in ("InverseGamma", "Kumaraswamy", "Pareto", "Weibull", "FisherSnedecor"):
        first, second = {"InverseGamma": ("concentration", "rate"),
                         "Kumaraswamy": ("concentration1", "concentration0"),
                         "Pareto": ("scale", "alpha"), "Weibull": ("scale", "concentration"),
                         "FisherSnedecor": ("df1", "df2")}[name]
        params = {first: ("positive", shape), second: ("positive", r.choice([shape, ()]))}
    elif name == "VonMises":
        params = dict(loc=("normal", shape), concentration=("positive", r.choice([shape, ()])))
    elif name in ("ContinuousBernoulli", "NegativeBinomial"):
        params = {"probs": ("unit", shape)} if r.random() < 0.5 else {"logits": ("normal", shape)}
        if name == "NegativeBinomial":
            params["total_count"] = ("positive", r.choice([shape, ()]))
    elif name == "Chi2":
        params = dict(df=("positive", shape))
    elif name == "StudentT":
        params = dict(df=("positive", shape), loc=("normal", shape),
                      scale=("positive", r.choice([shape, ()])))
    elif name == "Geometric":
        params = {"probs": ("unit", shape)} if r.random() < 0.5 else {"logits": ("normal", shape)}
    elif name == "Uniform":
        params = dict(low=("normal", shape), high=("above_low", shape))
    elif name == "Exponential":
        params = dict(rate=("positive", shape))
    elif name == "Gamma":
        params = dict(concentration=("positive", shape), rate=("positive", shape))
    elif name == "Beta":
        params = dict(concentration1=("positive", shape), concentration0=("positive", shape))
    elif name in ("Bernoulli", "Binomial"):
        params = {"probs": ("unit", shape)} if r.random() < 0.5 else {"logits": ("normal", shape)}
        if name == "Binomial":
            params["total_count"] = ("count", shape)
    elif name in ("Categorical", "OneHotCategorical"):
        k = r.randint(2, 4)
        params = {"probs": ("simplex", shape + (k,))} if r.random() < 0.5 else \
            {"logits": ("normal", shape + (k,))}
    elif name == "Poisson":
        params = dict(rate=("positive", shape))
    elif name == "Dirichlet":
        params = dict(concentration=("positive", shape + (r.randint(2, 4),)))
    elif name == "MultivariateNormal":
        k = r.randint(1, 3)
        which = r.choice(["covariance_matrix", "scale_tril", "precision_matrix"])
        params = {"loc": ("normal", shape + (k,)), which: ("spd" if which != "scale_tril"
                                                           else "tril", (k, k))}
    elif name == "Independent":
        params = dict(loc=("normal", (2, 3)), scale=("positive", (2, 3)))
    method = r.choice(METHODS if name not in NEWER else METHODS[:-1])  # (no KL between them)
    edge = r.random() < 0.2
    return dict(name=name, params=params, method=method, seed=seed, edge=edge,
                sample_shape=r.choice([(), (2,)]))


def _param(rng, spec):
    kind, shape = spec
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "positive":
        return rng.uniform(0.3, 3.0, shape)
    if kind == "above_low":
        return rng.uniform(0.5, 2.0, shape)  # added to low below
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "count":
        return rng.integers(1, 6, shape).astype(float)
    if kind == "simplex":
        p = rng.uniform(0.1, 1.0, shape)
        return p / p.sum(-1, keepdims=True)
    a = rng.standard_normal(shape)
    if kind == "spd":
        return a @ a.T + shape[0] * np.eye(shape[0])
    return np.tril(a, -1) + np.diag(rng.uniform(0.5, 2.0, shape[0]))  # tril


def _build(m, case, arrays):
    D = m.distributions
    ts = {k: m.tensor(v, requires_grad=k != "total_count") for k, v in arrays.items()}
    if case["name"] == "Uniform":
        return D.Uniform(ts["low"], ts["low"] + ts["high"], validate_args=False), ts
    if case["name"] == "Independent":
        return D.Independent(D.Normal(ts["loc"], ts["scale"], validate_args=False), 1), ts
    return getattr(D, case["name"])(**ts, validate_args=False), ts


def _value(case, rng, dist_np_shape, arrays):
    """A value in (or at the edge of) the support, as a NumPy array."""
    name = case["name"]
    shape = tuple(case["sample_shape"]) + dist_np_shape
    if name in ("Bernoulli",):
        return (rng.random(shape) < 0.5).astype(float)
    if name in ("Geometric", "NegativeBinomial"):
        return rng.integers(0, 6, shape).astype(float)
    if name == "Pareto":
        return arrays["scale"] + rng.uniform(0.0 if case["edge"] else 0.1, 3.0, shape)
    if name in ("Kumaraswamy", "ContinuousBernoulli"):
        return rng.uniform(0.0 if case["edge"] else 0.05, 0.95, shape)
    if name == "HalfNormal":
        return rng.uniform(0.0 if case["edge"] else 0.1, 3.0, shape)
    if name == "Binomial":
        return np.minimum(rng.integers(0, 6, shape), np.broadcast_to(arrays["total_count"],
                                                                     shape)).astype(float)
    if name == "Poisson":
        return rng.integers(0, 6, shape).astype(float)
    if name in ("Exponential", "Gamma", "LogNormal", "Chi2", "HalfCauchy", "InverseGamma",
                "Weibull", "FisherSnedecor"):
        return rng.uniform(0.0 if case["edge"] else 0.1, 3.0, shape)
    if name == "Beta":
        return rng.uniform(0.05, 0.95, shape)
    if name == "Uniform":
        u = rng.uniform(0.0, 1.0, shape)
        return arrays["low"] + u * arrays["high"]
    return rng.standard_normal(shape)


def _run(m, case):
    rng = np.random.default_rng(case["seed"])
    arrays = {k: _param(rng, v) for k, v in case["params"].items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist, ts = _build(m, case, arrays)
        method = case["method"]
        leaves = [t for t in ts.values() if t.requires_grad]
        if method in ("log_prob", "cdf"):
            name = case["name"]
            if name in ("Categorical",):
                k = arrays[next(iter(arrays))].shape[-1]
                v = m.tensor(rng.integers(0, k, tuple(case["sample_shape"]) +
                                          tuple(dist.batch_shape)))
            elif name == "OneHotCategorical":
                k = arrays[next(iter(arrays))].shape[-1]
                idx = rng.integers(0, k, tuple(case["sample_shape"]) + tuple(dist.batch_shape))
                v = m.tensor(np.eye(k)[idx])
            elif name == "Dirichlet":
                p = rng.uniform(0.1, 1.0, tuple(case["sample_shape"]) +
                                tuple(dist.batch_shape) + tuple(dist.event_shape))
                v = m.tensor(p / p.sum(-1, keepdims=True))
            elif name == "MultivariateNormal":
                v = m.tensor(rng.standard_normal(tuple(case["sample_shape"]) +
                                                 tuple(dist.batch_shape) +
                                                 tuple(dist.event_shape)), requires_grad=True)
                leaves.append(v)
            else:
                shape = tuple(dist.batch_shape) + tuple(dist.event_shape)
                v = m.tensor(_value(case, rng, shape, arrays), requires_grad=name not in (
                    "Bernoulli", "Binomial", "Poisson", "Geometric", "NegativeBinomial"))
                if v.requires_grad:
                    leaves.append(v)
            out = getattr(dist, method)(v)
        elif method == "icdf":
            q = m.tensor(rng.uniform(0.05, 0.95, tuple(dist.batch_shape)), requires_grad=True)
            leaves.append(q)
            out = dist.icdf(q)
        elif method == "kl":
            other_arrays = {k: _param(rng, v) for k, v in case["params"].items()}
            if "total_count" in arrays:
                other_arrays["total_count"] = arrays["total_count"]
            other, ots = _build(m, case, other_arrays)
            leaves += [t for t in ots.values() if t.requires_grad]
            out = m.distributions.kl_divergence(dist, other)
        else:
            attr = getattr(dist, method)
            out = attr() if callable(attr) else attr
        up = m.tensor(np.random.default_rng(case["seed"] + 1).standard_normal(tuple(out.shape)))
        grads = m.autograd.grad((out * up).sum(), leaves, allow_unused=True) \
            if out.requires_grad else [None] * len(leaves)
    return [out.detach().numpy()] + [None if g is None else g.numpy() for g in grads]


def check(seed, case=None):
    """None when flowgrad agrees with torch on the case, else a message."""
    case = case or generate(seed)
    return fuzz_common.check_value_and_gradients(_run, case, RTOL, dtypes=False)


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
