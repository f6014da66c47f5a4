"""Random draws the distributions need: Gamma (with an implicit reparameterisation
gradient, so Gamma, Beta and Dirichlet have rsample), Poisson and Binomial counts. Kernels
draw from the Generator attribute, as the other random ops.

standard_gamma's gradient is the implicit one torch uses: for x ~ Gamma(a, 1) with CDF
P(a, x), dx/da = -(dP/da) / (dP/dx). dP/dx is the density; dP/da is a float64 central
difference of the regularised incomplete gamma function (scipy.special.gammainc).
`standard_gamma_grad` is itself not differentiable (a second derivative through a gamma
sample's concentration is not provided; torch's is not either).

>>> import flowgrad as flow
>>> from flowgrad.ops.sampling import standard_gamma
>>> a = flow.tensor([2.0, 5.0], requires_grad=True)
>>> x = standard_gamma(a); x.sum().backward(); tuple(a.grad.shape)
(2,)
"""
from __future__ import annotations

from ..random import numpy_generator, resolve
from .creation import zeros_like
from .no_derivative import refuse_forward, refuse_forward_rule
from .registry import op
from .special import _scipy_special

__all__ = ["standard_gamma", "poisson", "binomial"]


@op("standard_gamma", save="all")
def _standard_gamma(xp, alpha, *, generator):
    x = numpy_generator(generator).standard_gamma(alpha.astype(xp.float64))
    tiny = xp.finfo(alpha.dtype).tiny  # torch clamps a sample to the smallest normal
    return xp.maximum(x, tiny).astype(alpha.dtype)


@_standard_gamma.grad
def standard_gamma_backward(ctx, dy):
    (alpha,), (x,) = ctx.inputs, ctx.outputs
    return dy * _standard_gamma_grad(alpha, x)


refuse_forward_rule("standard_gamma", "_standard_gamma", "its forward derivative is not "
                    "implemented")


@op("standard_gamma_grad", differentiable=False)
def _standard_gamma_grad(xp, alpha, x):
    special = _scipy_special(xp.__name__)  # imported on first use: scipy costs 0.3 s to load
    a, v = alpha.astype(xp.float64), x.astype(xp.float64)
    h = 1e-5 * xp.maximum(a, 1.0)
    dp_da = (special.gammainc(a + h, v) - special.gammainc(a - h, v)) / (2 * h)
    log_density = (a - 1) * xp.log(v) - v - special.gammaln(a)
    return (-dp_da * xp.exp(-log_density)).astype(alpha.dtype)


# NumPy's poisson refuses rates from ~9.2e18 on (its int64 counts); there a count is
# lam + sqrt(lam) * N(0, 1) to far better than a float64's precision (sd / lam < 1e-9)
_NORMAL_FROM = 1e18


@op("poisson")
def _poisson(xp, rate, *, generator):
    if rate.size and not (rate >= 0).all():  # (nan fails too; in the kernel: a plan checks
        # each call's rates)
        raise RuntimeError(f"invalid Poisson rate, expected rate to be non-negative (rates "
                           f"of shape {tuple(rate.shape)} hold a negative or nan value)")
    gen = numpy_generator(generator)
    lam = rate.astype(xp.float64)
    huge = lam >= _NORMAL_FROM
    draws = xp.asarray(gen.poisson(xp.where(huge, 0.0, lam)), dtype=xp.float64)
    if huge.any():  # (an infinite rate counts infinitely many)
        big = lam[huge]
        draws[huge] = xp.round(big + xp.sqrt(big) * gen.standard_normal(big.shape))
    return draws.astype(rate.dtype)


@_poisson.grad
def poisson_backward(ctx, dy):
    """torch's rule: the counts require grad as the rates do, with a zero gradient."""
    return zeros_like(dy)


@op("binomial", differentiable=False, layout="elementwise")
def _binomial(xp, count, prob, *, generator):
    n = xp.broadcast_to(count, xp.broadcast_shapes(count.shape, prob.shape))
    draws = numpy_generator(generator).binomial(n.astype(xp.int64), prob.astype(xp.float64))
    return xp.asarray(draws).astype(prob.dtype)  # (0-d: a Python int)


def standard_gamma(alpha, generator=None):
    """Samples of Gamma(alpha, 1), differentiable in alpha (implicit reparameterisation)."""
    return _standard_gamma(alpha, generator=resolve(generator))


def poisson(input, generator=None):
    """Poisson counts with the given rates (floats, as torch.poisson).

    >>> import flowgrad as flow
    >>> tuple(poisson(flow.ones(3)).shape)
    (3,)
    """
    kind = input._data.dtype.kind
    if kind not in "fV":
        raise NotImplementedError(f"poisson: not implemented for dtype {input.dtype.name}; the "
                                  f"rates must be a floating point tensor (.float())")
    return _poisson(input, generator=resolve(generator))


def binomial(count, prob, generator=None):
    """Binomial counts of `count` trials with success probability `prob` (floats); a dual
    input raises, as torch's binomial has no forward derivative (nor a reverse one:
    flowgrad.binomial's counts refuse a backward)."""
    refuse_forward((count, prob), "binomial")
    return _binomial(count, prob, generator=resolve(generator))
