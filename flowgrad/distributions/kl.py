"""kl_divergence(p, q) with closed forms for the usual pairs, and register_kl to add more
(the most specific registered pair of classes wins, as torch). Pairs of different families
follow torch's formulas; where p puts mass outside q's support the answer is inf.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Exponential, Normal, Uniform
>>> kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0))
tensor(0.5000)
>>> kl_divergence(Uniform(0.0, 1.0), Normal(0.5, 1.0))
tensor(0.9606)
>>> kl_divergence(Normal(0.0, 1.0), Exponential(1.0))
tensor(inf)
"""
from __future__ import annotations

import math
import warnings

import flowgrad as flow

from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import sum_rightmost
from .more import _EULER_GAMMA, Cauchy, Geometric, Gumbel, HalfNormal
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .transformed import Independent, LogNormal, TransformedDistribution

__all__ = ["kl_divergence", "register_kl"]

_KL = {}


def register_kl(type_p, type_q):
    """Decorator: register `fn(p, q)` as KL(p || q) for instances of these classes."""
    def decorator(fn):
        _KL[type_p, type_q] = fn
        return fn
    return decorator


def _lookup(type_p, type_q):
    matches = [(tp, tq) for tp, tq in _KL if issubclass(type_p, tp) and issubclass(type_q, tq)]
    if not matches:
        return None
    p_rank, q_rank = type_p.__mro__.index, type_q.__mro__.index
    left = min(matches, key=lambda m: (p_rank(m[0]), q_rank(m[1])))
    right = min(matches, key=lambda m: (q_rank(m[1]), p_rank(m[0])))
    if _KL[left] is not _KL[right]:
        # as torch: p's side decides, but say that q's side would have chosen otherwise
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}): "
                      f"register_kl({left[0].__name__}, {right[1].__name__}) to resolve it",
                      RuntimeWarning, stacklevel=3)
    return _KL[left]


def kl_divergence(p, q):
    """KL(p || q), batched over the distributions' batch shape."""
    fn = _lookup(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


def _inf_where(cond, value):
    return flow.where(cond, flow.full_like(value, float("inf")), value)


def _zero_where(cond, value):
    return flow.where(cond, flow.zeros_like(value), value)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale) ** 2
    t1 = ((p.loc - q.loc) / q.scale) ** 2
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    softplus = flow.nn.functional.softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = _zero_where(p.probs == 0, _inf_where(q.probs == 0, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = _zero_where(p.probs == 1, _inf_where(q.probs == 1, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _inf_where((q.probs == 0).expand_as(t), t)
    t = _zero_where((p.probs == 0).expand_as(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _inf_where((q.low > p.low) | (q.high < p.high), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return -scale_ratio.log() + loc_abs_diff / q.scale \
        + scale_ratio * flow.exp(-loc_abs_diff / p.scale) - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = flow.lgamma(q.concentration) - flow.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * flow.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    return _kl_dirichlet_dirichlet(p._dirichlet, q._dirichlet)


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p, sum_q = p.concentration.sum(-1), q.concentration.sum(-1)
    t1 = flow.lgamma(sum_p) - flow.lgamma(sum_q)
    t2 = (flow.lgamma(p.concentration) - flow.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = flow.digamma(p.concentration) - flow.digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event "
                         "shapes cannot be computed")
    half_term1 = q._half_log_det() - p._half_log_det()
    shape = flow.broadcast_shapes(tuple(q._unbroadcasted_scale_tril.shape[:-2]),
                                  tuple(p._unbroadcasted_scale_tril.shape[:-2]))
    n = p.event_shape[0]
    lq = q._unbroadcasted_scale_tril.expand(*shape, n, n)
    lp = p._unbroadcasted_scale_tril.expand(*shape, n, n)
    term2 = (flow.linalg.solve_triangular(lq, lp, upper=False) ** 2).sum((-2, -1))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    # the same transform (exp) on both sides: the KL of the base distributions
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count "
                                  "is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    return _inf_where(p.total_count > q.total_count, kl)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """Both pushed through equal transforms: their bases' KL (a bijection keeps it)."""
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError(f"KL(p || q) between {type(p).__name__} and "
                                  f"{type(q).__name__} needs equal transforms and event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different "
                                  "reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)




@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    scale_ratio = p.scale / q.scale
    loc_shift = (p.loc - q.loc) / q.scale
    return -scale_ratio.log() + loc_shift + scale_ratio * _EULER_GAMMA \
        + flow.exp(flow.lgamma(1 + scale_ratio) - loc_shift) - (1 + _EULER_GAMMA)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - flow.log1p(-q.probs) / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    # the closed form of Chyzak and Nielsen (arXiv:1905.10965)
    spread = (p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2
    return spread.log() - (4 * p.scale * q.scale).log()


# Pairs of different families. E_p[log q(x)] is in closed form when q's log density is a
# polynomial in the statistics whose expectations under p are known (x, x^2, log x, ...).

def _x_log_x(x):
    return flow.xlogy(x, x)  # 0 at x = 0


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    total = p.concentration1 + p.concentration0
    mean_log = flow.digamma(p.concentration1) - flow.digamma(total)
    log_norm_q = flow.lgamma(q.concentration) - q.concentration * q.rate.log()
    return -p.entropy() + log_norm_q - (q.concentration - 1) * mean_log \
        + q.rate * p.concentration1 / total


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    mean, var_q = p.mean, q.scale ** 2
    second_moment = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1) + mean ** 2
    quadratic = 0.5 * second_moment - q.loc * mean + 0.5 * q.loc ** 2
    return -p.entropy() + 0.5 * (2 * math.pi * var_q).log() + quadratic / var_q


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0) | (q.high < 1), result)  # q must cover [0, 1]


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    rate_ratio = q.rate / p.rate
    return -q.concentration * rate_ratio.log() + rate_ratio + flow.lgamma(q.concentration) \
        + q.concentration * _EULER_GAMMA - (1 + _EULER_GAMMA)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    rate_scale = p.rate * q.scale
    loc_ratio = q.loc / q.scale
    return rate_scale.log() - 1 - loc_ratio + flow.exp(loc_ratio) * rate_scale / (rate_scale + 1) \
        + rate_scale.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_q, rate_sq = q.scale ** 2, p.rate ** 2
    quadratic = rate_sq.reciprocal() - q.loc / p.rate + 0.5 * q.loc ** 2
    return 0.5 * (2 * math.pi * rate_sq * var_q).log() - 1 + quadratic / var_q


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    rate_scale = p.rate * q.scale
    loc_ratio = q.loc / q.scale
    shape = p.concentration
    t1 = (shape - 1) * flow.digamma(shape) - flow.lgamma(shape) - shape
    t2 = rate_scale.log() + shape / rate_scale
    t3 = flow.exp(loc_ratio) * (1 + rate_scale.reciprocal()) ** (-shape) - loc_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_q, rate_sq, shape = q.scale ** 2, p.rate ** 2, p.concentration
    quadratic = 0.5 * (shape ** 2 + shape) / rate_sq - q.loc * shape / p.rate + 0.5 * q.loc ** 2
    return 0.5 * (2 * math.pi * rate_sq * var_q).log() - shape - flow.lgamma(shape) \
        + (shape - 1) * flow.digamma(shape) + quadratic / var_q


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    scale_ratio = p.scale / q.scale
    mean_shift = (p.loc + p.scale * _EULER_GAMMA - q.loc) / q.scale
    return -(scale_ratio / math.sqrt(2 * math.pi)).log() + (math.pi * scale_ratio * 0.5) ** 2 / 3 \
        + 0.5 * mean_shift ** 2 - (_EULER_GAMMA + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_q = q.scale ** 2
    scale_sq_ratio = p.scale ** 2 / var_q
    quadratic = 0.5 * p.loc ** 2 - p.loc * q.loc + 0.5 * q.loc ** 2
    return -0.5 * (2 * scale_sq_ratio / math.pi).log() + scale_sq_ratio + quadratic / var_q - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    loc_p, loc_q = p.loc / q.scale, q.loc / q.scale
    var_ratio = (p.scale / q.scale) ** 2
    return -0.5 * var_ratio.log() + loc_p - loc_q + flow.exp(loc_q - loc_p + 0.5 * var_ratio) \
        - 0.5 * (1 + math.log(2 * math.pi))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    standardized = loc_diff / p.scale
    mean_abs = math.sqrt(2 / math.pi) * p.scale * flow.exp(-0.5 * standardized ** 2) \
        + loc_diff * flow.erf(math.sqrt(0.5) * standardized)  # E|x - q.loc| under p
    return -(p.scale / q.scale).log() + mean_abs / q.scale - 0.5 * (1 + math.log(0.5 * math.pi))


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    mean_log_x = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    mean_log_1mx = (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    log_beta_q = flow.lgamma(q.concentration1) + flow.lgamma(q.concentration0) \
        - flow.lgamma(q.concentration1 + q.concentration0)
    result = (q.concentration0 - 1) * mean_log_1mx + log_beta_q - width.log() \
        - (q.concentration1 - 1) * mean_log_x
    return _inf_where((p.high > 1) | (p.low < 0), result)  # p reaches outside [0, 1]


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    mean_log_x = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    log_norm_q = flow.lgamma(q.concentration) - q.concentration * q.rate.log()
    result = -width.log() + log_norm_q - (q.concentration - 1) * mean_log_x \
        + q.rate * (p.high + p.low) / 2
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    scale_ratio = q.scale / (p.high - p.low)
    high_z, low_z = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    return scale_ratio.log() + 0.5 * (high_z + low_z) \
        - scale_ratio * (flow.exp(-high_z) - flow.exp(-low_z))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    mean_shift = (p.high + p.low - 2 * q.loc) / 2
    return (math.sqrt(2 * math.pi) * q.scale / width).log() \
        + 0.5 * (width ** 2 / 12 + mean_shift ** 2) / q.scale ** 2


def _register_infinite_kls():
    """KL(p || q) = inf, shaped as a parameter of p (as torch), for the pairs where p always
    puts mass where q has none."""
    def infinite(param):
        return lambda p, q: flow.full_like(getattr(p, param), math.inf)

    for type_p, param, types_q in [(Exponential, "rate", [Beta, Uniform]),
                                   (Gamma, "concentration", [Beta, Uniform]),
                                   (Gumbel, "loc", [Beta, Exponential, Gamma, Uniform]),
                                   (Laplace, "loc", [Beta, Exponential, Gamma, Uniform]),
                                   (Normal, "loc", [Beta, Exponential, Gamma, Uniform]),
                                   (Poisson, "rate", [Bernoulli, Binomial])]:
        for type_q in types_q:
            register_kl(type_p, type_q)(infinite(param))


_register_infinite_kls()
