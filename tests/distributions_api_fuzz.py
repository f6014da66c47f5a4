"""Differential fuzzing of flow.distributions' API beyond the deterministic methods that
tests/distributions_fuzz.py compares: argument validation (validate_args True/False/default,
parameters out of their constraint: raise or not, and the exception's class), values outside
the support, the descriptive attributes (batch_shape, event_shape, support, arg_constraints,
has_rsample, has_enumerate_support), expand, sample/rsample shapes and dtypes and which
parameters rsample's gradient reaches, enumerate_support, perplexity, Independent,
MixtureSameFamily, every transform (forward, inverse, log_abs_det_jacobian, sign, domain and
codomain), constraints' check, biject_to/transform_to and which kl_divergence pairs are
registered; in float64 against torch.distributions.

    .venv/bin/python tests/distributions_api_fuzz.py --seeds 0:1000     # summary
    .venv/bin/python tests/distributions_api_fuzz.py --show 17          # one case and its verdict
"""
from __future__ import annotations

import random
import warnings

import fuzz_common
import numpy as np
import torch

import flowgrad as flow

RTOL = 1e-8
# torch's Multinomial.entropy takes log(n!) as torch.lgamma(torch.tensor(n + 1.0)), in float32
# whatever the parameters' dtype: its entropy (and perplexity) is off by ~1e-8 of its scale
RTOL_MULTINOMIAL_ENTROPY = 1e-7
# name: {parameter: kind}; kinds are drawn by _param, "b" marks the batch shape
DISTS = {
    "Normal": dict(loc="real", scale="pos"), "LogNormal": dict(loc="real", scale="pos"),
    "Laplace": dict(loc="real", scale="pos"), "Cauchy": dict(loc="real", scale="pos"),
    "Gumbel": dict(loc="real", scale="pos"), "HalfNormal": dict(scale="pos"),
    "HalfCauchy": dict(scale="pos"), "Uniform": dict(low="real", high="above"),
    "Exponential": dict(rate="pos"), "Gamma": dict(concentration="pos", rate="pos"),
    "Beta": dict(concentration1="pos", concentration0="pos"), "Chi2": dict(df="pos"),
    "StudentT": dict(df="pos", loc="real", scale="pos"),
    "InverseGamma": dict(concentration="pos", rate="pos"),
    "Kumaraswamy": dict(concentration1="pos", concentration0="pos"),
    "Pareto": dict(scale="pos", alpha="pos"), "Weibull": dict(scale="pos", concentration="pos"),
    "FisherSnedecor": dict(df1="pos", df2="pos"),
    "VonMises": dict(loc="real", concentration="pos"),
    "GeneralizedPareto": dict(loc="real", scale="pos", concentration="real"),
    "ContinuousBernoulli": dict(probs="unit"), "Bernoulli": dict(probs="unit"),
    "Binomial": dict(total_count="count", probs="unit"), "Geometric": dict(probs="unit"),
    "NegativeBinomial": dict(total_count="pos", probs="unit"), "Poisson": dict(rate="pos"),
    "Categorical": dict(probs="simplex"), "OneHotCategorical": dict(probs="simplex"),
    "OneHotCategoricalStraightThrough": dict(probs="simplex"),
    "Multinomial": dict(probs="simplex"), "Dirichlet": dict(concentration="posvec"),
    "MultivariateNormal": dict(loc="vec", scale_tril="tril"),
    "LowRankMultivariateNormal": dict(loc="vec", cov_factor="factor", cov_diag="posvec"),
    "RelaxedBernoulli": dict(probs="unit"), "RelaxedOneHotCategorical": dict(probs="simplex"),
    "LogisticNormal": dict(loc="vec", scale="posvec"),
}
PROBES = ["construct", "construct", "outside", "meta", "expand", "sample", "enumerate",
          "perplexity", "independent", "mixture", "transform", "transform", "constraint",
          "biject", "kl", "transformed", "transformed"]
TRANSFORMS = ["Exp", "Affine", "Sigmoid", "Tanh", "Power", "Softmax", "StickBreaking",
              "CorrCholesky", "Compose", "Stack", "Cat", "Reshape", "Abs", "Softplus",
              "LowerCholesky", "Inv"]
CONSTRAINTS = ["real", "positive", "nonnegative", "unit_interval", "simplex", "boolean",
               "nonnegative_integer", "positive_integer", "lower_triangular", "lower_cholesky",
               "positive_definite", "corr_cholesky", "real_vector", "greater_than",
               "less_than", "interval", "half_open_interval", "integer_interval",
               "greater_than_eq", "one_hot", "square", "symmetric", "positive_semidefinite",
               "cat", "stack", "independent"]
BIJECT = ["real", "positive", "nonnegative", "unit_interval", "simplex", "lower_cholesky",
          "positive_definite", "corr_cholesky", "real_vector", "greater_than", "less_than",
          "interval", "half_open_interval", "greater_than_eq", "positive_semidefinite", "cat",
          "stack", "independent"]


def generate(seed):
    r = random.Random(seed)
    probe = r.choice(PROBES)
    case = dict(probe=probe, seed=seed, name=r.choice(sorted(DISTS)),
                batch=r.choice([(), (3,), (2, 3)]), k=r.randint(2, 4),
                validate=r.choice([True, False, None]), logits=r.random() < 0.3)
    if probe == "construct":
        params = DISTS[case["name"]]
        case["bad"] = r.choice(sorted(params) + [None])
        case["default"] = r.choice([True, False])
    elif probe == "outside":
        case["method"] = r.choice(["log_prob", "log_prob", "cdf", "icdf"])
        case["where"] = r.choice(["below", "above", "nan", "inside"])
    elif probe == "expand":
        case["expand"] = r.choice([(4,) + case["batch"], (2,) + case["batch"], case["batch"]])
    elif probe == "sample":
        case["sample_shape"] = r.choice([(), (3,), (2, 1)])
        case["float32"] = r.random() < 0.4
    elif probe == "enumerate":
        case["name"] = r.choice(["Bernoulli", "Binomial", "Categorical", "OneHotCategorical",
                                 "Multinomial", "Poisson", "Geometric"])
        case["expand_support"] = r.random() < 0.5
    elif probe == "independent":
        case["reinterpreted"] = r.randint(0, len(case["batch"]) + 1)
    elif probe == "mixture":
        case["component"] = r.choice(["Normal", "Gamma", "Bernoulli", "MultivariateNormal",
                                      "Independent"])
        case["method"] = r.choice(["log_prob", "cdf", "mean", "variance", "sample", "expand"])
    elif probe == "transform":
        case["transform"] = r.choice(TRANSFORMS)
        case["inner"] = [r.choice(["Exp", "Affine", "Sigmoid", "Tanh", "Power", "Softplus"])
                         for _ in range(2)]
        case["cache_size"] = r.choice([0, 1])
        case["event_dim"] = r.choice([0, 1])
    elif probe == "transformed":
        case["transform"] = r.choice(["Exp", "Affine", "Sigmoid", "Tanh", "Power", "Softplus",
                                      "Softmax", "StickBreaking", "Compose", "Inv", "Reshape",
                                      "CorrCholesky"])
        case["inner"] = [r.choice(["Exp", "Affine", "Sigmoid", "Softplus"]) for _ in range(2)]
        case["cache_size"] = r.choice([0, 1])
        case["event_dim"] = r.choice([0, 1])
        case["method"] = r.choice(["log_prob", "cdf", "icdf", "sample", "expand"])
    elif probe in ("constraint", "biject"):
        case["constraint"] = r.choice(CONSTRAINTS if probe == "constraint" else BIJECT)
        case["transform_to"] = r.random() < 0.5
    elif probe == "kl":
        case["other"] = r.choice(sorted(DISTS)) if r.random() < 0.5 else case["name"]
    return case


def _param(rng, kind, batch, k):
    if kind == "real":
        return rng.standard_normal(batch)
    if kind == "pos":
        return rng.uniform(0.5, 3.0, batch)
    if kind == "above":
        return rng.uniform(0.5, 2.0, batch)
    if kind == "unit":
        return rng.uniform(0.1, 0.9, batch)
    if kind == "count":
        return rng.integers(1, 6, batch).astype(float)
    if kind in ("simplex",):
        p = rng.uniform(0.1, 1.0, batch + (k,))
        return p / p.sum(-1, keepdims=True)
    if kind == "vec":
        return rng.standard_normal(batch + (k,))
    if kind == "posvec":
        return rng.uniform(0.5, 2.0, batch + (k,))
    if kind == "factor":
        return rng.standard_normal(batch + (k, 2))
    a = rng.standard_normal((k, k))  # tril
    return np.tril(a, -1) + np.diag(rng.uniform(0.5, 2.0, k))


def _bad(rng, kind, value):
    """The parameter out of its constraint."""
    v = np.array(value, dtype=float)
    if kind == "real" or kind == "vec":
        v.flat[0] = np.nan
    elif kind in ("pos", "posvec", "above"):
        v.flat[0] = -rng.uniform(0.0, 1.0)
    elif kind == "unit":
        v.flat[0] = 1.5
    elif kind == "count":
        v.flat[0] = 2.5
    elif kind == "simplex":
        v = v * 2
    elif kind == "tril":
        v[0, 0] = -1.0
    elif kind == "factor":
        v.flat[0] = np.nan
    return v


def _arrays(case, rng):
    out = {p: _param(rng, kind, case["batch"], case["k"])
           for p, kind in DISTS[case["name"]].items()}
    if case["name"] == "Uniform":
        out["high"] = out["low"] + out["high"]
    return out


def _build(m, case, arrays, validate=False, grad=False):
    D = m.distributions
    name = case["name"]
    dtype = m.float32 if case.get("float32") else m.float64
    ts = {p: m.tensor(v, dtype=dtype, requires_grad=grad and p != "total_count")
          for p, v in arrays.items()}
    kw = dict(ts)
    if case.get("logits") and "probs" in kw:
        p = kw.pop("probs")
        kw["logits"] = (p / (1 - p)).log() if DISTS[name]["probs"] == "unit" else p.log()
    if name.startswith("Relaxed"):
        kw["temperature"] = m.tensor(0.7, dtype=dtype)
    if name == "Multinomial":
        kw["total_count"] = 3
    if validate is not None:
        kw["validate_args"] = validate
    return getattr(D, name)(**kw), ts


def _default_validation(m):
    """The module's default of validate_args (flowgrad keeps it outside the class)."""
    return m.distributions.distribution._VALIDATE[0] if m is flow else \
        m.distributions.Distribution._validate_args


def _shape(s):
    return tuple(int(n) for n in s)


def _cname(c):
    """A constraint's class, by flowgrad's names of torch's classes."""
    name = type(c).__name__.lstrip("_")
    return {"IndependentConstraint": "Independent", "IntegerGreaterThan": "IntegerInterval"}.get(
        name, name)


def _describe_constraint(c):
    """What a constraint is, as plain data: its class and its bounds."""
    name = _cname(c)
    out = [name, int(getattr(c, "event_dim", 0)), bool(getattr(c, "is_discrete", False))]
    for attr in ("lower_bound", "upper_bound", "reinterpreted_batch_ndims"):
        v = getattr(c, attr, None)
        if v is not None:
            out.append(np.asarray(v.detach().numpy() if hasattr(v, "detach") else v, float))
    if hasattr(c, "base_constraint"):
        out.append(_describe_constraint(c.base_constraint))
    return out


def _value(m, dist, rng, where, sample_shape=()):
    """A value inside the support of `dist` (drawn by torch's rule of the support's class), or
    just outside it (below, above, nan)."""
    shape = _shape(sample_shape) + _shape(dist.batch_shape) + _shape(dist.event_shape)
    support = dist.support
    name = _cname(support)
    while name == "Independent":
        support = support.base_constraint
        name = _cname(support)
    if name in ("IntegerInterval", "Boolean"):
        hi = getattr(support, "upper_bound", None)
        hi = (5 if name == "IntegerInterval" else 1) if hi is None else hi
        hi = np.broadcast_to(np.asarray(hi.numpy() if hasattr(hi, "numpy") else hi), shape)
        v = np.floor(rng.uniform(0, 1, shape) * (hi + 1))
    elif name in ("Simplex", "OneHot", "Multinomial"):
        v = rng.uniform(0.1, 1.0, shape)
        v = v / v.sum(-1, keepdims=True)
        if name == "OneHot":
            v = np.eye(shape[-1])[v.argmax(-1)]
        if name == "Multinomial":
            v = np.eye(shape[-1])[v.argmax(-1)] * 3
    elif name in ("Interval", "HalfOpenInterval", "GreaterThan", "GreaterThanEq"):
        lo = getattr(support, "lower_bound", 0.0)
        lo = np.asarray(lo.detach().numpy() if hasattr(lo, "detach") else lo, float)
        hi = getattr(support, "upper_bound", None)
        hi = lo + 3.0 if hi is None else np.asarray(
            hi.detach().numpy() if hasattr(hi, "detach") else hi, float)
        v = lo + rng.uniform(0.05, 0.95, shape) * (hi - lo)
        if where == "below":
            v = v * 0 + lo - 0.5
        elif where == "above" and getattr(support, "upper_bound", None) is not None:
            v = v * 0 + hi + 0.5
    else:
        v = rng.standard_normal(shape)
    if where == "nan":
        v = np.array(v, float)
        v.flat[0] = np.nan
    elif where == "below" and name in ("IntegerInterval", "Boolean", "Simplex", "OneHot"):
        v = np.array(v, float)
        v.flat[0] = -1.0
    elif where == "above" and name in ("IntegerInterval", "Boolean"):
        v = np.array(v, float)
        v.flat[0] = v.flat[0] + 0.5
    return m.tensor(np.ascontiguousarray(v, dtype=float))


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else x


def _run_probe(m, case):
    """What the probe observes, as a list of (what, value) where a value is an array or plain
    data; a raise becomes ('raises', class name)."""
    rng = np.random.default_rng(case["seed"])
    arrays = _arrays(case, rng)
    probe = case["probe"]
    D = m.distributions
    if probe == "construct":
        if case["bad"] is not None:
            kind = DISTS[case["name"]][case["bad"]]
            arrays[case["bad"]] = _bad(rng, kind, arrays[case["bad"]])
        old = _default_validation(m)
        D.Distribution.set_default_validate_args(case["default"])
        try:
            d, _ = _build(m, case, arrays, case["validate"])
            return [("shapes", (_shape(d.batch_shape), _shape(d.event_shape))),
                    ("validates", bool(d._validate_args))]
        finally:
            D.Distribution.set_default_validate_args(old)
    if probe == "outside":
        d, _ = _build(m, case, arrays, case["validate"])
        v = _value(m, d, rng, case["where"])
        if case["method"] == "icdf":
            v = m.tensor({"below": -0.5, "above": 1.5, "nan": np.nan, "inside": 0.3}[
                case["where"]], dtype=m.float64).expand(_shape(d.batch_shape))
        return [("value", getattr(d, case["method"])(v))]
    if probe == "meta":
        d, _ = _build(m, case, arrays, case["validate"])
        return [("batch_shape", _shape(d.batch_shape)), ("event_shape", _shape(d.event_shape)),
                ("support", _describe_constraint(d.support)),
                ("arg_constraints", {k: _describe_constraint(c)
                                     for k, c in d.arg_constraints.items()}),
                ("has_rsample", d.has_rsample),
                ("has_enumerate_support", d.has_enumerate_support),
                ("mean shape", lambda: _shape(d.mean.shape)),
                ("mean dtype", lambda: str(d.mean.dtype).split(".")[-1]),
                ("entropy", lambda: d.entropy()), ("variance", lambda: d.variance)]
    if probe == "expand":
        d, _ = _build(m, case, arrays, case["validate"])
        e = d.expand(case["expand"])
        v = _value(m, e, rng, "inside")
        return [("batch_shape", _shape(e.batch_shape)), ("event_shape", _shape(e.event_shape)),
                ("validates", bool(e._validate_args)), ("class", type(e).__name__),
                ("log_prob", e.log_prob(v)), ("mean", e.mean),
                ("sample shape", _shape(e.sample((2,)).shape))]
    if probe == "sample":
        d, ts = _build(m, case, arrays, False, grad=True)
        s = d.sample(case["sample_shape"])
        out = [("sample", _shape(s.shape), str(s.dtype).split(".")[-1], s.requires_grad)]
        if d.has_rsample:
            x = d.rsample(case["sample_shape"])
            leaves = [t for t in ts.values() if t.requires_grad]
            grads = m.autograd.grad(x.sum(), leaves, allow_unused=True)
            out.append(("rsample", _shape(x.shape), str(x.dtype).split(".")[-1],
                        [g is not None for g in grads]))
        else:
            try:
                d.rsample()
                out.append(("rsample", "ran"))
            except NotImplementedError:
                out.append(("rsample", "NotImplementedError"))
        return out
    if probe == "enumerate":
        d, _ = _build(m, case, arrays, case["validate"])
        return [("support", d.enumerate_support(case["expand_support"]))]
    if probe == "perplexity":
        d, _ = _build(m, case, arrays, False)
        return [("perplexity", d.perplexity())]
    if probe == "independent":
        d, _ = _build(m, case, arrays, False)
        ind = D.Independent(d, case["reinterpreted"], validate_args=case["validate"])
        v = _value(m, ind, rng, "inside", (2,))
        return [("batch_shape", _shape(ind.batch_shape)),
                ("event_shape", _shape(ind.event_shape)),
                ("support", _describe_constraint(ind.support)),
                ("log_prob", lambda: ind.log_prob(v)),
                ("entropy", lambda: ind.entropy()), ("has_rsample", ind.has_rsample),
                ("has_enumerate_support", ind.has_enumerate_support),
                ("enumerate_support", lambda: ind.enumerate_support(False))]
    if probe == "mixture":
        return _mixture(m, case, rng)
    if probe == "transform":
        return _transform(m, case, rng)
    if probe == "constraint":
        return _constraint(m, case, rng)
    if probe == "transformed":
        return _transformed(m, case, rng)
    if probe == "biject":
        return _biject(m, case, rng)
    other = dict(case, name=case["other"])
    p, _ = _build(m, case, arrays, False)
    q, _ = _build(m, other, _arrays(other, np.random.default_rng(case["seed"] + 1)), False)
    return [("kl", D.kl_divergence(p, q))]


def _mixture(m, case, rng):
    D = m.distributions
    b, k = case["batch"], case["k"]
    mix = D.Categorical(m.tensor(_param(rng, "simplex", b, k)))
    comp = case["component"]
    if comp == "Normal":
        c = D.Normal(m.tensor(rng.standard_normal(b + (k,))),
                     m.tensor(rng.uniform(.5, 2, b + (k,))))
    elif comp == "Gamma":
        c = D.Gamma(m.tensor(rng.uniform(.5, 2, b + (k,))),
                    m.tensor(rng.uniform(.5, 2, b + (k,))))
    elif comp == "Bernoulli":
        c = D.Bernoulli(m.tensor(rng.uniform(.1, .9, b + (k,))))
    elif comp == "MultivariateNormal":
        c = D.MultivariateNormal(m.tensor(rng.standard_normal(b + (k, 2))),
                                 scale_tril=m.tensor(_param(rng, "tril", (), 2)))
    else:
        c = D.Independent(D.Normal(m.tensor(rng.standard_normal(b + (k, 2))),
                                   m.tensor(rng.uniform(.5, 2, b + (k, 2)))), 1)
    d = D.MixtureSameFamily(mix, c, validate_args=case["validate"])
    out = [("batch_shape", _shape(d.batch_shape)), ("event_shape", _shape(d.event_shape))]
    method = case["method"]
    if method in ("log_prob", "cdf"):
        v = _value(m, d, rng, "inside", (2,))
        out.append((method, getattr(d, method)(v)))
    elif method == "sample":
        out.append(("sample", _shape(d.sample((3,)).shape)))
    elif method == "expand":
        e = d.expand((2,) + b)
        out += [("expanded", _shape(e.batch_shape)), ("mean", e.mean)]
    else:
        out.append((method, getattr(d, method)))
    return out


def _make_transform(m, name, case, rng, depth=0):
    T = m.distributions.transforms
    cs = case["cache_size"]
    if name == "Exp":
        return T.ExpTransform(cache_size=cs), "real", ()
    if name == "Affine":
        ed = case["event_dim"]
        return T.AffineTransform(m.tensor(rng.standard_normal(3)),
                                 m.tensor(rng.uniform(-2, 2, 3)), event_dim=ed,
                                 cache_size=cs), "real", (3,)
    if name == "Sigmoid":
        return T.SigmoidTransform(cache_size=cs), "real", ()
    if name == "Tanh":
        return T.TanhTransform(cache_size=cs), "real", ()
    if name == "Power":
        return T.PowerTransform(m.tensor(rng.uniform(0.5, 2.5, 3)), cache_size=cs), "pos", (3,)
    if name == "Softplus":
        return T.SoftplusTransform(cache_size=cs), "real", ()
    if name == "Abs":
        return T.AbsTransform(cache_size=cs), "real", ()
    if name == "Softmax":
        return T.SoftmaxTransform(cache_size=cs), "real", (4,)
    if name == "StickBreaking":
        return T.StickBreakingTransform(cache_size=cs), "real", (3,)
    if name == "CorrCholesky":
        return T.CorrCholeskyTransform(cache_size=cs), "real", (3,)
    if name == "LowerCholesky":
        return T.LowerCholeskyTransform(cache_size=cs), "real", (3, 3)
    if name == "Reshape":
        return T.ReshapeTransform((2, 3), (3, 2), cache_size=cs), "real", (2, 3)
    if name == "Inv":
        t, dom, shape = _make_transform(m, case["inner"][0], case, rng, depth + 1)
        return t.inv, "codomain", shape
    parts = [_make_transform(m, n, case, rng, depth + 1) for n in case["inner"]]
    if name == "Compose":
        return T.ComposeTransform([p[0] for p in parts], cache_size=cs), parts[0][1], (3,)
    if name == "Stack":
        return T.StackTransform([p[0] for p in parts], dim=-1, cache_size=cs), "stack", (3, 2)
    return T.CatTransform([p[0] for p in parts], dim=-1, lengths=[3, 3],
                          cache_size=cs), "stack", (2, 6)


def _transform(m, case, rng):
    t, dom, shape = _make_transform(m, case["transform"], case, rng)
    shape = (2,) + shape
    if dom == "pos":
        x = rng.uniform(0.2, 3.0, shape)
    elif dom == "codomain":  # the inverse of an inner transform: a point of its codomain
        x = rng.uniform(0.1, 0.9, shape) if case["inner"][0] in ("Sigmoid",) else \
            rng.uniform(-0.9, 0.9, shape) if case["inner"][0] == "Tanh" else \
            rng.uniform(0.2, 3.0, shape) if case["inner"][0] in ("Exp", "Power", "Softplus") \
            else rng.standard_normal(shape)
    else:
        x = rng.standard_normal(shape)
    x = m.tensor(x, requires_grad=True)
    y = t(x)
    return [("y", y), ("domain", _describe_constraint(t.domain)),
            ("codomain", _describe_constraint(t.codomain)), ("bijective", t.bijective),
            ("event_dim", (t.domain.event_dim, t.codomain.event_dim)),
            ("sign", lambda: t.sign), ("inverse is x (cached)", t.inv(y) is x),
            ("x again", lambda: t.inv(y)), ("ladj", lambda: t.log_abs_det_jacobian(x, y)),
            ("forward_shape", lambda: _shape(t.forward_shape(shape))),
            ("inverse_shape", lambda: _shape(t.inverse_shape(tuple(y.shape))))]


def _transformed(m, case, rng):
    D = m.distributions
    t, dom, shape = _make_transform(m, case["transform"], case, rng)
    if case["transform"] == "Inv":  # (Exp's inverse needs a positive base)
        base = D.LogNormal(m.tensor(rng.standard_normal(shape or (3,))), m.tensor(
            rng.uniform(0.5, 1.5, shape or (3,))))
    else:
        base = D.Normal(m.tensor(rng.standard_normal(shape or (3,))),
                        m.tensor(rng.uniform(0.5, 1.5, shape or (3,))))
    base = D.Independent(base, len(shape)) if shape and case["event_dim"] else base
    d = D.TransformedDistribution(base, t, validate_args=case["validate"])
    out = [("batch_shape", _shape(d.batch_shape)), ("event_shape", _shape(d.event_shape)),
           ("support", lambda: _describe_constraint(d.support)), ("has_rsample", d.has_rsample)]
    method = case["method"]
    x = d.rsample((2,))
    y = m.tensor(x.detach().numpy())  # (the same point in both: the base draws differ)
    if method == "log_prob":
        z = m.tensor(rng.standard_normal(tuple(y.shape)))
        return out + [("x shape", _shape(x.shape)), ("log_prob", lambda: d.log_prob(z))]
    if method in ("cdf", "icdf"):
        q = m.tensor(rng.uniform(-0.5, 1.5, _shape(d.batch_shape) + _shape(d.event_shape)))
        return out + [(method, lambda: getattr(d, method)(q))]
    if method == "expand":
        e = d.expand((2,) + _shape(d.batch_shape))
        return out + [("expanded", _shape(e.batch_shape), _shape(e.event_shape),
                       bool(e._validate_args)), ("sample", _shape(e.sample((3,)).shape))]
    return out + [("sample", _shape(d.sample((2, 1)).shape))]


def _constraint_of(m, name, rng):
    C = m.distributions.constraints
    lo, hi = m.tensor(rng.uniform(-1, 0, 3)), m.tensor(rng.uniform(0.5, 2, 3))
    made = {"greater_than": lambda: C.greater_than(lo),
            "less_than": lambda: C.less_than(hi),
            "greater_than_eq": lambda: C.greater_than_eq(lo),
            "interval": lambda: C.interval(lo, hi),
            "half_open_interval": lambda: C.half_open_interval(lo, hi),
            "integer_interval": lambda: C.integer_interval(0, 3),
            "cat": lambda: C.cat([C.positive, C.interval(-1.0, 1.0)], -1, [1, 2]),
            "stack": lambda: C.stack([C.positive, C.real, C.unit_interval], -1),
            "independent": lambda: C.independent(C.positive, 1)}
    return made[name]() if name in made else getattr(C, name)


def _constraint(m, case, rng):
    c = _constraint_of(m, case["constraint"], rng)
    # values near and across each constraint's edges: a mix of integers, probabilities,
    # triangular and symmetric matrices and their perturbations
    choice = case["seed"] % 5
    if choice == 0:
        x = rng.choice([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.nan, np.inf], (4, 3))
    elif choice == 1:
        x = rng.uniform(-0.2, 1.2, (4, 3))
    elif choice == 2:
        a = rng.standard_normal((2, 3, 3))
        x = np.tril(a)
        x = x if rng.random() < 0.5 else a @ np.swapaxes(a, -1, -2) + np.eye(3) * 0.1
    elif choice == 3:
        p = rng.uniform(0.1, 1, (4, 3))
        x = p / p.sum(-1, keepdims=True)
    else:
        a = np.linalg.cholesky(np.corrcoef(rng.standard_normal((3, 6))))
        x = np.stack([a, a + rng.choice([0, 1e-3])])
    return [("check", c.check(m.tensor(x)))]


def _biject(m, case, rng):
    c = _constraint_of(m, case["constraint"], rng)
    f = m.distributions.transform_to if case["transform_to"] else m.distributions.biject_to
    t = f(c)
    name = case["constraint"]
    shape = {"simplex": (2, 3), "lower_cholesky": (2, 6), "positive_definite": (2, 6),
             "corr_cholesky": (2, 3), "real_vector": (2, 3),
             "positive_semidefinite": (2, 6)}.get(name, (2, 3))
    x = rng.standard_normal(shape)
    if name in ("lower_cholesky", "positive_definite", "positive_semidefinite"):
        x = rng.standard_normal((2, 3, 3))
    x = m.tensor(x)
    y = t(x)
    return [("class", type(t).__name__), ("y", y), ("codomain check", c.check(y)),
            ("ladj", lambda: t.log_abs_det_jacobian(x, y)), ("x again", lambda: t.inv(y))]


_REFUSALS = (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError,
             AssertionError, AttributeError)


def _observe(m, case):
    """The probe's observations; one that raises (the whole probe or one item, an item given
    as a function) is ('raises', the exception's class)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            items = _run_probe(m, case)
        except _REFUSALS as e:
            return [("raises", _error_class(e))]
        out = []
        for what, *rest in items:
            if rest and callable(rest[0]) and not hasattr(rest[0], "detach"):
                try:
                    rest = [rest[0]()]
                except _REFUSALS as e:
                    rest = ["raises " + _error_class(e)]
            out.append((what, *rest))
        return out


def _error_class(e):
    """The class's name; torch's linalg errors are torch._C._LinAlgError, public as
    torch.linalg.LinAlgError (flowgrad's flow.linalg.LinAlgError)."""
    return type(e).__name__.lstrip("_")


def _flat(v):
    if hasattr(v, "detach"):
        return v.detach().numpy()
    return v


def _same(a, b, rtol=RTOL):
    """Plain data equal, arrays within `rtol` (shape and dtype too)."""
    if hasattr(a, "detach") or hasattr(b, "detach") or isinstance(a, np.ndarray):
        a, b = _flat(a), _flat(b)
        if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
            return f"flowgrad {a!r}, torch {b!r}"
        return fuzz_common.first_difference([("", a, b)], rtol)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"flowgrad {a!r}, torch {b!r}"
        return next((d for x, y in zip(a, b) if (d := _same(x, y, rtol))), None)
    if isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            return f"keys: flowgrad {sorted(a)}, torch {sorted(b)}"
        return next((d for k in a if (d := _same(a[k], b[k], rtol))), None)
    return None if a == b or (a != a and b != b) else f"flowgrad {a!r}, torch {b!r}"


def check(seed, case=None):
    """None when flowgrad observes what torch does on the case, else a message."""
    case = case or generate(seed)
    want, got = _observe(torch, case), _observe(flow, case)
    for w, g in zip(want, got):
        if w[0] != g[0]:
            return f"torch {w}, flowgrad {g}"
        rtol = RTOL_MULTINOMIAL_ENTROPY if case["name"] == "Multinomial" and \
            w[0] in ("entropy", "perplexity") else RTOL
        if d := _same(g[1:], w[1:], rtol):
            return f"{w[0]}: {d}"
    if len(want) != len(got):
        return f"torch {want[len(got):]}, flowgrad {got[len(want):]}"
    return None


def main():
    fuzz_common.main(__doc__, generate, check)


if __name__ == "__main__":
    main()
