"""distributions.transforms, biject_to / transform_to, TransformedDistribution, LogisticNormal
and LKJCholesky against torch.distributions in float64: forward, inverse and
log_abs_det_jacobian values and gradients, shapes, constraints, caching and equality;
log_prob values and gradients, samples, expand, KL and validation errors."""
import types

import numpy as np
import pytest
import torch

import flowgrad as flow

R = np.random.default_rng(0)
X = R.standard_normal((3, 4))
POSX = R.uniform(0.5, 2.0, (3, 4))
UNIT = R.uniform(0.1, 0.9, (3, 4))
SIMPLEX = R.dirichlet(np.ones(5), 3)
LOC4, SCALE4 = R.standard_normal(4), R.uniform(0.5, 2.0, 4)
MAT = R.standard_normal((2, 3, 3))
VEC3, VEC6 = R.standard_normal((2, 3)), R.standard_normal((2, 6))


def _api(fw):
    """The names a case needs, from torch or from flowgrad."""
    D = fw.distributions
    return types.SimpleNamespace(
        fw=fw, D=D, T=D.transforms, C=D.constraints, biject_to=D.biject_to,
        transform_to=D.transform_to, LKJCholesky=D.LKJCholesky,
        LogisticNormal=D.LogisticNormal,
        tensor=lambda a, grad=False: fw.tensor(np.asarray(a), dtype=fw.float64,
                                               requires_grad=grad))


TORCH, FLOW = _api(torch), _api(flow)


def _numpy(value):
    return value.detach().numpy() if hasattr(value, "detach") else np.asarray(value)


def _weighted_sum(outputs):
    """A scalar that depends on every output entry with a distinct weight."""
    total = 0
    for out in outputs:
        w = np.linspace(0.5, 1.5, max(out.numel(), 1)).reshape(tuple(out.shape))
        total = total + (out * (torch.tensor(w) if isinstance(out, torch.Tensor)
                                else flow.tensor(w))).sum()
    return total


def _compare(ours, theirs, rtol=1e-7, atol=1e-9, what=""):
    assert (ours is None) == (theirs is None), what
    if theirs is not None:
        assert tuple(np.shape(_numpy(ours))) == tuple(np.shape(_numpy(theirs))), what
        np.testing.assert_allclose(_numpy(ours), _numpy(theirs), rtol=rtol, atol=atol,
                                   err_msg=what)


def _grads(api, outputs, inputs):
    return api.fw.autograd.grad(_weighted_sum(outputs), inputs, allow_unused=True)


# name, make(T, D, *params) -> transform, params, x (in the domain)
TRANSFORMS = [
    ("exp", lambda T, D: T.ExpTransform(), [], X),
    ("power", lambda T, D, e: T.PowerTransform(e), [R.uniform(0.5, 2.0, 4)], POSX),
    ("power_number", lambda T, D: T.PowerTransform(-1.5), [], POSX),
    ("sigmoid", lambda T, D: T.SigmoidTransform(), [], X * 3),
    ("softplus", lambda T, D: T.SoftplusTransform(), [], X * 3),
    ("tanh", lambda T, D: T.TanhTransform(), [], X),
    ("abs", lambda T, D: T.AbsTransform(), [], X),
    ("affine_numbers", lambda T, D: T.AffineTransform(0.5, -2.0), [], X),
    ("affine_tensors", lambda T, D, a, b: T.AffineTransform(a, b), [LOC4, SCALE4], X),
    ("affine_event1", lambda T, D, a, b: T.AffineTransform(a, b, event_dim=1),
     [LOC4, -SCALE4], X),
    ("affine_event2", lambda T, D, b: T.AffineTransform(1.0, b, event_dim=2), [POSX], X),
    ("identity", lambda T, D: T.identity_transform, [], X),
    ("compose", lambda T, D, a, b: T.ComposeTransform([T.AffineTransform(a, b),
                                                       T.ExpTransform()]), [LOC4, SCALE4], X),
    ("compose_event", lambda T, D, a, b: T.ComposeTransform(
        [T.AffineTransform(a, b, event_dim=1), T.StickBreakingTransform()]), [LOC4, SCALE4], X),
    ("compose_coupling", lambda T, D: T.ComposeTransform(
        [T.TanhTransform(), T.StickBreakingTransform(), T.ExpTransform()]), [], X),
    ("compose_cached", lambda T, D: T.ComposeTransform(
        [T.SigmoidTransform(), T.AffineTransform(1.0, 3.0)], cache_size=1), [], X),
    ("inverse_exp", lambda T, D: T.ExpTransform().inv, [], POSX),
    ("inverse_stick_breaking", lambda T, D: T.StickBreakingTransform().inv, [], SIMPLEX),
    ("independent", lambda T, D, a, b: T.IndependentTransform(T.AffineTransform(a, b), 1),
     [LOC4, SCALE4], X),
    ("independent_exp2", lambda T, D: T.IndependentTransform(T.ExpTransform(), 2), [], X),
    ("reshape", lambda T, D: T.ReshapeTransform((4,), (2, 2)), [], X),
    ("reshape_inverse", lambda T, D: T.ReshapeTransform((3, 4), (12,)).inv, [], X.ravel()),
    ("softmax", lambda T, D: T.SoftmaxTransform(), [], X),
    ("stick_breaking", lambda T, D: T.StickBreakingTransform(), [], X * 2),
    ("lower_cholesky", lambda T, D: T.LowerCholeskyTransform(), [], MAT),
    ("positive_definite", lambda T, D: T.PositiveDefiniteTransform(), [], MAT),
    ("corr_cholesky_3", lambda T, D: T.CorrCholeskyTransform(), [], VEC3),
    ("corr_cholesky_4", lambda T, D: T.CorrCholeskyTransform(), [], VEC6),
    ("cat_last", lambda T, D: T.CatTransform(
        [T.ExpTransform(), T.identity_transform, T.AffineTransform(1.0, 2.0)], dim=-1,
        lengths=[2, 1, 1]), [], X),
    ("cat_first", lambda T, D: T.CatTransform([T.ExpTransform(), T.SigmoidTransform()],
                                              dim=0, lengths=[1, 2]), [], X),
    ("cat_events", lambda T, D, b: T.CatTransform(
        [T.IndependentTransform(T.ExpTransform(), 1), T.AffineTransform(0.0, b, event_dim=1)],
        dim=0, lengths=[1, 2]), [SCALE4], X),
    ("cat_cached", lambda T, D: T.CatTransform([T.ExpTransform(), T.TanhTransform()], dim=1,
                                               lengths=[3, 1], cache_size=1), [], X),
    ("stack_last", lambda T, D: T.StackTransform(
        [T.ExpTransform(), T.SigmoidTransform(), T.identity_transform, T.TanhTransform()],
        dim=-1), [], X),
    ("stack_first", lambda T, D: T.StackTransform(
        [T.ExpTransform(), T.AffineTransform(0.5, 3.0), T.SoftplusTransform()], dim=0), [], X),
    ("cdf_normal", lambda T, D, a, b: T.CumulativeDistributionTransform(D.Normal(a, b)),
     [LOC4, SCALE4], X),
    ("cdf_inverse", lambda T, D, a: T.CumulativeDistributionTransform(D.Exponential(a)).inv,
     [SCALE4], UNIT),
]


def _sign(t):
    try:
        return _numpy(t.sign)
    except NotImplementedError:
        return None


def _transform_results(api, make, params, x_np):
    ps = [api.tensor(p, grad=True) for p in params]
    x = api.tensor(x_np, grad=True)
    t = make(api.T, api.D, *ps)
    y = t(x)
    y_leaf = api.tensor(_numpy(y), grad=True)  # the inverse on its own, not via the cache
    outs = {"y": y, "x_back": t.inv(y_leaf)}
    if t.bijective:
        outs["log_abs_det_jacobian"] = t.log_abs_det_jacobian(x, y)
    grads = _grads(api, list(outs.values()), [x, y_leaf, *ps])
    facts = {"bijective": t.bijective, "domain_event_dim": t.domain.event_dim,
             "codomain_event_dim": t.codomain.event_dim,
             "forward_shape": tuple(t.forward_shape(x.shape)),
             "inverse_shape": tuple(t.inverse_shape(y.shape)),
             "in_domain": _numpy(t.domain.check(x)).tolist(),
             "in_codomain": _numpy(t.codomain.check(y)).tolist(),
             "inv_inv_is_t": t.inv.inv is t}
    return outs, grads, facts, _sign(t)


@pytest.mark.parametrize("case", TRANSFORMS, ids=[c[0] for c in TRANSFORMS])
def test_transform_values_gradients_and_facts_match_torch(case):
    _, make, params, x = case
    (vt, gt, ft, st), (vf, gf, ff, sf) = (_transform_results(api, make, params, x)
                                          for api in (TORCH, FLOW))
    assert ff == ft
    assert vf.keys() == vt.keys()
    for k in vt:
        _compare(vf[k], vt[k], what=k)
    for i, (a, b) in enumerate(zip(gf, gt)):
        _compare(a, b, rtol=1e-6, atol=1e-9, what=f"gradient {i}")
    _compare(sf, st, what="sign")


def _caching_facts(api):
    T, x = api.T, api.tensor(X)
    cached, plain = T.ExpTransform(cache_size=1), T.ExpTransform()
    y = cached(x)
    compose = T.ComposeTransform([T.ExpTransform(), T.TanhTransform()], cache_size=1)
    z = compose(x)
    return {"call_is_cached": cached(x) is y, "inverse_is_cached": cached.inv(y) is x,
            "plain_recomputes": plain(x) is plain(x),
            "with_cache_new": cached.with_cache(1) is cached,
            "with_cache_size": plain.with_cache(1)._cache_size,
            "compose_parts_cached": [p._cache_size for p in compose.parts],
            "compose_inverse_is_x": compose.inv(z) is x,
            "inverse_with_cache": T.SigmoidTransform().inv.with_cache(1).inv._cache_size,
            "independent_cached": T.IndependentTransform(T.ExpTransform(), 1,
                                                         cache_size=1).base_transform._cache_size}


def test_caching_matches_torch():
    ours, theirs = _caching_facts(FLOW), _caching_facts(TORCH)
    assert ours == theirs
    assert ours["call_is_cached"] and ours["compose_inverse_is_x"]


# pairs of transforms: == must answer as torch's
EQUALITY = [
    lambda T, t: (T.ExpTransform(), T.ExpTransform()),
    lambda T, t: (T.ExpTransform(), T.SigmoidTransform()),
    lambda T, t: (T.AffineTransform(1.0, 2.0), T.AffineTransform(1.0, 2.0)),
    lambda T, t: (T.AffineTransform(1.0, 2.0), T.AffineTransform(1.0, 3.0)),
    lambda T, t: (T.AffineTransform(t([1.0, 2.0]), 2.0), T.AffineTransform(t([1.0, 2.0]), 2.0)),
    lambda T, t: (T.PowerTransform(2.0), T.PowerTransform(2.0)),
    lambda T, t: (T.PowerTransform(2.0), T.PowerTransform(3.0)),
    lambda T, t: (T.ComposeTransform([T.ExpTransform(), T.TanhTransform()]),
                  T.ComposeTransform([T.ExpTransform(), T.TanhTransform()])),
    lambda T, t: (T.ComposeTransform([T.ExpTransform()]), T.ComposeTransform([])),
    lambda T, t: (T.ExpTransform().inv, T.ExpTransform().inv),
    lambda T, t: (T.ExpTransform().inv, T.ExpTransform()),
    lambda T, t: (T.StickBreakingTransform(), T.StickBreakingTransform()),
    lambda T, t: (T.SoftmaxTransform(), T.SoftmaxTransform()),
    lambda T, t: (T.LowerCholeskyTransform(), T.PositiveDefiniteTransform()),
    lambda T, t: (T.CorrCholeskyTransform(), T.CorrCholeskyTransform()),
    lambda T, t: (T.AbsTransform(), T.AbsTransform()),
    lambda T, t: (T.SoftplusTransform(), T.SoftplusTransform()),
    lambda T, t: (T.identity_transform, T.ComposeTransform([])),
]


@pytest.mark.parametrize("i", range(len(EQUALITY)))
def test_equality_matches_torch(i):
    answers = [(a == b, a != b) for a, b in (EQUALITY[i](api.T, api.tensor)
                                             for api in (TORCH, FLOW))]
    assert answers[0] == answers[1]


# a call that must fail as torch's does: name, fn(api), exception type
ERRORS = [
    ("cache_size_2", lambda a: a.T.ExpTransform(cache_size=2), ValueError),
    ("reshape_numel", lambda a: a.T.ReshapeTransform((3,), (2, 2)), ValueError),
    ("reshape_shape", lambda a: a.T.ReshapeTransform((4,), (2, 2)).forward_shape((3, 5)),
     ValueError),
    ("corr_shape", lambda a: a.T.CorrCholeskyTransform().forward_shape((5,)), ValueError),
    ("corr_not_square", lambda a: a.T.CorrCholeskyTransform().inverse_shape((3, 4)),
     ValueError),
    ("stick_rank", lambda a: a.T.StickBreakingTransform().forward_shape(()), ValueError),
    ("cat_length", lambda a: a.T.CatTransform([a.T.ExpTransform()], dim=-1)(a.tensor(X)),
     AssertionError),
    ("cat_lengths", lambda a: a.T.CatTransform([a.T.ExpTransform()], lengths=[1, 2]),
     AssertionError),
    ("cat_dim", lambda a: a.T.CatTransform([a.T.ExpTransform()], dim=3)(a.tensor(X)),
     AssertionError),
    ("stack_size", lambda a: a.T.StackTransform([a.T.ExpTransform()], dim=0)(a.tensor(X)),
     AssertionError),
    ("stack_not_transform", lambda a: a.T.StackTransform([1.0]), AssertionError),
    ("independent_rank", lambda a: a.T.IndependentTransform(a.T.ExpTransform(), 3)(
        a.tensor(X)), ValueError),
    ("event_dim_changes", lambda a: a.T.CorrCholeskyTransform().event_dim, ValueError),
    ("no_sign", lambda a: a.T.StickBreakingTransform().sign, NotImplementedError),
    ("softmax_no_jacobian", lambda a: a.T.SoftmaxTransform().log_abs_det_jacobian(
        a.tensor(X), a.tensor(X)), NotImplementedError),
    ("with_cache_custom_init", lambda a: type("Custom", (a.T.Transform,), {
        "__init__": lambda self, k: a.T.Transform.__init__(self)})(1).with_cache(),
     NotImplementedError),
    ("tril_size", lambda a: a.T.CorrCholeskyTransform()(a.tensor(np.ones(5))), ValueError),
    ("transformed_bad_list", lambda a: a.D.TransformedDistribution(
        a.D.Normal(0.0, 1.0), [a.T.ExpTransform(), 1]), ValueError),
    ("transformed_not_list", lambda a: a.D.TransformedDistribution(
        a.D.Normal(0.0, 1.0), (a.T.ExpTransform(),)), ValueError),
    ("transformed_too_few_dims", lambda a: a.D.TransformedDistribution(
        a.D.Normal(0.0, 1.0), a.T.StickBreakingTransform()), ValueError),
    ("biject_unregistered", lambda a: a.biject_to(a.C.boolean), NotImplementedError),
    ("biject_lower_cholesky", lambda a: a.biject_to(a.C.lower_cholesky), NotImplementedError),
    ("register_not_constraint", lambda a: a.biject_to.register(float, lambda c: None),
     TypeError),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_errors_match_torch(case):
    _, fn, error = case
    for api in (TORCH, FLOW):
        with pytest.raises(error):
            fn(api)


# constraint name, make(C, tensor) -> constraint, shape of the constrained value
CONSTRAINTS = [
    ("real", lambda C, t: C.real, (3, 2)),
    ("real_vector", lambda C, t: C.real_vector, (3, 2)),
    ("positive", lambda C, t: C.positive, (3, 2)),
    ("nonnegative", lambda C, t: C.nonnegative, (3, 2)),
    ("greater_than", lambda C, t: C.greater_than(1.5), (3, 2)),
    ("greater_than_eq", lambda C, t: C.greater_than_eq(-2.0), (3, 2)),
    ("greater_than_tensor", lambda C, t: C.greater_than(t([1.0, -1.0])), (3, 2)),
    ("less_than", lambda C, t: C.less_than(3.0), (3, 2)),
    ("interval", lambda C, t: C.interval(-1.0, 2.0), (3, 2)),
    ("interval_tensor", lambda C, t: C.interval(t([-1.0, 0.0]), t([1.0, 3.0])), (3, 2)),
    ("half_open_interval", lambda C, t: C.half_open_interval(0.0, 5.0), (3, 2)),
    ("unit_interval", lambda C, t: C.unit_interval, (3, 2)),
    ("independent", lambda C, t: C.independent(C.positive, 2), (3, 2)),
    ("simplex", lambda C, t: C.simplex, (3, 4)),
    ("lower_cholesky", lambda C, t: C.lower_cholesky, (2, 3, 3)),
    ("positive_definite", lambda C, t: C.positive_definite, (2, 3, 3)),
    ("positive_semidefinite", lambda C, t: C.positive_semidefinite, (2, 3, 3)),
    ("corr_cholesky", lambda C, t: C.corr_cholesky, (2, 4, 4)),
    ("cat", lambda C, t: C.cat([C.positive, C.real, C.unit_interval], dim=-1, lengths=[2, 1, 1]),
     (3, 4)),
    ("stack", lambda C, t: C.stack([C.positive, C.interval(0.0, 2.0)], dim=-1), (3, 2)),
    ("stack_events", lambda C, t: C.stack([C.independent(C.positive, 1), C.real_vector],
                                          dim=0), (2, 4)),
]


def _registry_results(api, registry_name, make, shape):
    constraint = make(api.C, api.tensor)
    try:
        t = getattr(api, registry_name)(constraint)
    except NotImplementedError:
        return None
    in_shape = tuple(t.inverse_shape(shape))
    x = api.tensor(np.random.default_rng(1).standard_normal(in_shape), grad=True)
    y = t(x)
    outs = {"y": y}
    if t.bijective:
        outs["log_abs_det_jacobian"] = t.log_abs_det_jacobian(x, y)
        outs["x_back"] = t.inv(y.detach())
    grads = _grads(api, list(outs.values()), [x])
    return outs, grads, in_shape, bool(constraint.check(y).all()), t.bijective, x


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("case", CONSTRAINTS, ids=[c[0] for c in CONSTRAINTS])
def test_registry_maps_reals_into_the_constraint_as_torch(case, registry):
    _, make, shape = case
    theirs = _registry_results(TORCH, registry, make, shape)
    ours = _registry_results(FLOW, registry, make, shape)
    assert (ours is None) == (theirs is None)
    if theirs is None:
        return
    (vf, gf, shape_f, inside, bij_f, x), (vt, gt, shape_t, _, bij_t, _) = ours, theirs
    assert (shape_f, bij_f) == (shape_t, bij_t)
    assert inside, "the transform's values must satisfy the constraint"
    assert vf.keys() == vt.keys()
    for k in vt:
        _compare(vf[k], vt[k], what=k)
    _compare(gf[0], gt[0], rtol=1e-6, atol=1e-9, what="gradient")
    if "x_back" in vf:  # a bijection: back to where it started
        _compare(vf["x_back"], x, rtol=1e-6, atol=1e-9, what="round trip")


def test_registering_a_new_constraint():
    for api in (TORCH, FLOW):
        registry = api.D.constraint_registry.ConstraintRegistry()

        class Even(api.C.Constraint):
            pass

        @registry.register(Even)
        def factory(constraint):
            return api.T.AffineTransform(0.0, 2.0)

        assert isinstance(registry(Even()), api.T.AffineTransform)
        registry.register(api.C.positive, lambda c: api.T.ExpTransform())
        assert isinstance(registry(api.C.greater_than(3.0)), api.T.ExpTransform)
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            registry(api.C.real)


def _corr_cholesky_values(dim, n):
    a = R.standard_normal((n, dim, dim))
    cov = a @ a.transpose(0, 2, 1) + 0.5 * np.eye(dim)
    sd = np.sqrt(np.diagonal(cov, axis1=-2, axis2=-1))
    return np.linalg.cholesky(cov / sd[:, :, None] / sd[:, None, :])


# name, make(api, *params) -> distribution, params, value
DISTRIBUTIONS = [
    ("logistic_normal", lambda a, m, s: a.LogisticNormal(m, s), [X, POSX], SIMPLEX[:, :5]),
    ("logistic_normal_vector", lambda a, m, s: a.LogisticNormal(m, s), [LOC4, SCALE4],
     SIMPLEX),
    ("logistic_normal_scalar", lambda a, m, s: a.LogisticNormal(m, s), [0.3, 1.5],
     SIMPLEX[:, :2] / SIMPLEX[:, :2].sum(-1, keepdims=True)),
    ("transformed_stick_breaking", lambda a, m, s: a.D.TransformedDistribution(
        a.D.Normal(m, s), [a.T.AffineTransform(0.5, 2.0), a.T.StickBreakingTransform()]),
     [X, POSX], SIMPLEX),
    ("transformed_corr_cholesky", lambda a, m, s: a.D.TransformedDistribution(
        a.D.Normal(m, s), a.T.CorrCholeskyTransform()), [X[:, :3], POSX[:, :3]],
     _corr_cholesky_values(3, 3)),
    ("transformed_reshape", lambda a, m, s: a.D.TransformedDistribution(
        a.D.Normal(m, s), [a.T.ReshapeTransform((4,), (2, 2)), a.T.ExpTransform()]),
     [X, POSX], POSX.reshape(3, 2, 2)),
    ("lkj_2", lambda a, c: a.LKJCholesky(2, c), [R.uniform(0.3, 3.0, 3)], None),
    ("lkj_3", lambda a, c: a.LKJCholesky(3, c), [R.uniform(0.3, 3.0, 3)], None),
    ("lkj_5_scalar", lambda a, c: a.LKJCholesky(5, c), [1.7], None),
]


LKJ_VALUES = {n: _corr_cholesky_values(int(n.split("_")[1]), 3) for n in
              ("lkj_2", "lkj_3", "lkj_5_scalar")}


def _distribution_results(api, name, make, params, value):
    ps = [api.tensor(p, grad=True) for p in params]
    d = make(api, *ps)
    v = api.tensor(LKJ_VALUES[name] if value is None else value)
    log_prob = d.log_prob(v)
    grads = _grads(api, [log_prob], ps)
    facts = {"batch_shape": tuple(d.batch_shape), "event_shape": tuple(d.event_shape),
             "support_event_dim": d.support.event_dim, "has_rsample": d.has_rsample,
             "value_in_support": bool(d.support.check(v).all()),
             "expand": (tuple(d.expand((3,) + tuple(d.batch_shape)).batch_shape),
                        tuple(d.expand((3,) + tuple(d.batch_shape)).log_prob(v).shape))}
    return log_prob, grads, facts


@pytest.mark.parametrize("case", DISTRIBUTIONS, ids=[c[0] for c in DISTRIBUTIONS])
def test_distribution_log_prob_and_gradients_match_torch(case):
    name, make, params, value = case
    (lt, gt, ft), (lf, gf, ff) = (_distribution_results(api, name, make, params, value)
                                  for api in (TORCH, FLOW))
    assert ff == ft
    _compare(lf, lt, what="log_prob")
    for i, (a, b) in enumerate(zip(gf, gt)):
        _compare(a, b, rtol=1e-6, atol=1e-9, what=f"gradient {i}")


def test_transformed_cdf_icdf_match_torch():
    for make in (lambda a, m, s: a.D.TransformedDistribution(
                     a.D.Normal(m, s), [a.T.AffineTransform(1.0, -2.0), a.T.ExpTransform()]),
                 lambda a, m, s: a.D.TransformedDistribution(
                     a.D.Normal(m, s), a.T.SigmoidTransform())):
        results = []
        for api in (TORCH, FLOW):
            m, s = api.tensor(X, grad=True), api.tensor(POSX, grad=True)
            d = make(api, m, s)
            outs = [d.cdf(api.tensor(UNIT)), d.icdf(api.tensor(UNIT))]
            results.append((outs, _grads(api, outs, [m, s])))
        for a, b in zip(results[1][0] + list(results[1][1]), results[0][0] + list(results[0][1])):
            _compare(a, b, rtol=1e-6, atol=1e-9)


def test_logistic_normal_kl_matches_torch():
    results = []
    for api in (TORCH, FLOW):
        ps = [api.tensor(p, grad=True) for p in (X, POSX, X[::-1].copy(), POSX[::-1].copy())]
        p, q = api.LogisticNormal(*ps[:2]), api.LogisticNormal(*ps[2:])
        kl = api.D.kl_divergence(p, q)
        results.append((kl, _grads(api, [kl], ps)))
    _compare(results[1][0], results[0][0], what="kl")
    for a, b in zip(results[1][1], results[0][1]):
        _compare(a, b, rtol=1e-6, atol=1e-9)
    with pytest.raises(NotImplementedError):
        FLOW.D.kl_divergence(
            FLOW.LogisticNormal(FLOW.tensor(LOC4), 1.0),
            FLOW.D.TransformedDistribution(FLOW.D.Normal(FLOW.tensor(LOC4), 1.0),
                                           FLOW.T.ExpTransform()))


def _sample_moments(api, make, n):
    api.fw.manual_seed(0)
    samples = make(api).sample((n,))
    return samples, samples.numpy().mean(0), samples.numpy().var(0)


SAMPLED = [
    ("logistic_normal", lambda a: a.LogisticNormal(a.tensor([0.5, -1.0, 0.0]),
                                                   a.tensor([1.0, 0.5, 2.0])), None),
    ("lkj_3", lambda a: a.LKJCholesky(3, a.tensor([0.5, 4.0])), "corr"),
    ("lkj_4", lambda a: a.LKJCholesky(4, a.tensor(1.0)), "corr"),
]


@pytest.mark.parametrize("case", SAMPLED, ids=[c[0] for c in SAMPLED])
def test_sample_shapes_support_and_moments_match_torch(case):
    _, make, kind = case
    n = 4000
    (st, mt, vt), (sf, mf, vf) = (_sample_moments(api, make, n) for api in (TORCH, FLOW))
    d = make(FLOW)
    assert tuple(sf.shape) == tuple(st.shape) and sf.dtype == flow.float64
    assert not sf.requires_grad
    assert bool(d.support.check(sf).all())
    assert tuple(d.sample().shape) == tuple(d.batch_shape) + tuple(d.event_shape)
    if kind == "corr":  # the correlation matrices L @ L.mT
        (mt, vt), (mf, vf) = ((c.mean(0), c.var(0)) for c in
                              ((s @ s.mT).numpy() for s in (st, sf)))
    # within a few standard errors of two independent estimates
    np.testing.assert_allclose(mf, mt, atol=6 * np.sqrt(2 * vt.max() / n))
    np.testing.assert_allclose(vf, vt, rtol=0.15, atol=0.01)
    flow.manual_seed(3)
    first = d.sample((2,))
    flow.manual_seed(3)
    assert np.array_equal(d.sample((2,)).numpy(), first.numpy())


def test_logistic_normal_rsample_gradients_flow():
    flow.manual_seed(0)
    loc = flow.tensor([0.5, -1.0], dtype=flow.float64, requires_grad=True)
    scale = flow.tensor([1.0, 0.5], dtype=flow.float64, requires_grad=True)
    x = FLOW.LogisticNormal(loc, scale).rsample((2000,))
    assert x.requires_grad and tuple(x.shape) == (2000, 3)
    gl, gs = flow.autograd.grad(x[..., 0].mean(), [loc, scale])
    # the first share is sigmoid(z0 - log 2): it grows with loc[0] alone
    assert gl[0].item() > 0.05 and abs(gl[1].item()) < 1e-12 and gs.abs().sum().item() > 0


VALIDATION = [
    ("logistic_normal_scale", lambda a: a.LogisticNormal(a.tensor([0.0]), a.tensor([-1.0]),
                                                         validate_args=True), ValueError,
     "parameter scale"),
    ("logistic_normal_support", lambda a: a.LogisticNormal(
        a.tensor([0.0]), 1.0, validate_args=True).log_prob(a.tensor([0.7, 0.7])), ValueError,
     "support"),
    ("lkj_dim", lambda a: a.LKJCholesky(1, 1.0), ValueError, "dim=1"),
    ("lkj_concentration", lambda a: a.LKJCholesky(3, a.tensor([1.0, -0.5]),
                                                  validate_args=True), ValueError,
     "parameter concentration"),
    ("lkj_support", lambda a: a.LKJCholesky(2, 1.0, validate_args=True).log_prob(
        a.tensor([[1.0, 0.0], [0.5, 0.5]])), ValueError, "support"),
]


@pytest.mark.parametrize("case", VALIDATION, ids=[c[0] for c in VALIDATION])
def test_validation_errors_match_torch(case):
    _, fn, error, match = case
    for api in (TORCH, FLOW):
        with pytest.raises(error, match=match):
            fn(api)


# second order: name, f(api, *inputs) -> scalar, inputs
SECOND_ORDER = [
    ("corr_cholesky", lambda a, x: _jacobian_term(a.T.CorrCholeskyTransform(), x), [VEC6]),
    ("stick_breaking", lambda a, x: _jacobian_term(a.T.StickBreakingTransform(), x), [X]),
    ("stick_breaking_inverse", lambda a, y: _weighted_sum([a.T.StickBreakingTransform().inv(y)]),
     [SIMPLEX]),
    ("cat", lambda a, x: _jacobian_term(a.T.CatTransform(
        [a.T.TanhTransform(), a.T.SoftplusTransform()], dim=-1, lengths=[3, 1]), x), [X]),
    ("logistic_normal", lambda a, m, s: _weighted_sum([a.LogisticNormal(m, s).log_prob(
        a.tensor(SIMPLEX))]), [LOC4, SCALE4]),
    ("lkj", lambda a, c: _weighted_sum([a.LKJCholesky(3, c).log_prob(
        a.tensor(LKJ_VALUES["lkj_3"]))]), [R.uniform(0.5, 2.0, 3)]),
]


def _jacobian_term(t, x):
    y = t(x)
    return _weighted_sum([y, t.log_abs_det_jacobian(x, y)])


@pytest.mark.parametrize("case", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_second_order_gradients_match_torch(case):
    _, f, inputs = case
    results = []
    for api in (TORCH, FLOW):
        ts = [api.tensor(v, grad=True) for v in inputs]
        first = api.fw.autograd.grad(f(api, *ts), ts, create_graph=True)
        results.append(api.fw.autograd.grad(_weighted_sum(first), ts))
    for a, b in zip(results[1], results[0]):
        _compare(a, b, rtol=1e-6, atol=1e-9, what="second-order gradient")
