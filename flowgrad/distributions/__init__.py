"""flowgrad.distributions: probability distributions as torch.distributions, with sample,
rsample (reparameterised, differentiable), log_prob, entropy, mean, variance, expand,
argument constraints and validation, transforms and kl_divergence.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Categorical
>>> d = Categorical(probs=flow.tensor([0.25, 0.75]))
>>> d.entropy()
tensor(0.5623)
"""
from . import constraints, kl, transforms
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .transformed import Independent, LogNormal, TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    TanhTransform,
    Transform,
)

__all__ = ["Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Gamma", "Beta",
           "Dirichlet", "Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial",
           "MultivariateNormal", "Independent", "TransformedDistribution", "LogNormal",
           "kl_divergence", "register_kl", "constraints", "transforms", "kl", "Transform",
           "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform",
           "TanhTransform", "PowerTransform", "AbsTransform", "SoftplusTransform"]
