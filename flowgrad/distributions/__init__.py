"""flowgrad.distributions: probability distributions as torch.distributions, with sample,
rsample (reparameterised, differentiable), log_prob, entropy, mean, variance, expand,
argument constraints and validation, transforms and kl_divergence.

>>> import flowgrad as flow
>>> from flowgrad.distributions import Categorical
>>> d = Categorical(probs=flow.tensor([0.25, 0.75]))
>>> d.entropy()
tensor(0.5623)
"""
from . import (
    constraint_registry,
    constraints,
    exponential_family,
    kl,
    lkj_cholesky,
    lowrank_multivariate_normal,
    mixture,
    multinomial,
    relaxed,
    transforms,
    univariate,
    wishart,
)
from .constraint_registry import *
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .exponential_family import *
from .kl import kl_divergence, register_kl
from .lkj_cholesky import *
from .lowrank_multivariate_normal import *
from .mixture import *
from .more import Cauchy, Chi2, Geometric, Gumbel, HalfNormal, StudentT
from .multinomial import *
from .multivariate_normal import MultivariateNormal
from .relaxed import *
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
from .univariate import *
from .wishart import *

__all__ = ["Distribution", "Cauchy", "Chi2", "Geometric", "Gumbel", "HalfNormal", "StudentT",
           "Normal", "Uniform", "Exponential", "Laplace", "Gamma", "Beta",
           "Dirichlet", "Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial",
           "MultivariateNormal", "Independent", "TransformedDistribution", "LogNormal",
           "kl_divergence", "register_kl", "constraints", "transforms", "kl", "Transform",
           "ComposeTransform", "ExpTransform", "AffineTransform", "SigmoidTransform",
           "TanhTransform", "PowerTransform", "AbsTransform", "SoftplusTransform"]
__all__ += [*constraint_registry.__all__, *exponential_family.__all__, *lkj_cholesky.__all__,
            *lowrank_multivariate_normal.__all__, *mixture.__all__, *multinomial.__all__,
            *relaxed.__all__, *univariate.__all__, *wishart.__all__]


def _torch_module_paths():
    """torch keeps each distribution in a module of its own (`torch.distributions.normal`):
    the same paths import here (`from flowgrad.distributions.normal import Normal`), as
    modules naming the classes flowgrad keeps by family."""
    import sys
    import types

    from . import distribution

    paths = {"bernoulli": ["Bernoulli"], "beta": ["Beta"], "binomial": ["Binomial"],
             "categorical": ["Categorical"], "cauchy": ["Cauchy"], "chi2": ["Chi2"],
             "dirichlet": ["Dirichlet"], "exponential": ["Exponential"], "gamma": ["Gamma"],
             "geometric": ["Geometric"], "gumbel": ["Gumbel"], "half_normal": ["HalfNormal"],
             "independent": ["Independent"], "laplace": ["Laplace"], "log_normal": ["LogNormal"],
             "normal": ["Normal"], "one_hot_categorical": ["OneHotCategorical"],
             "poisson": ["Poisson"], "studentT": ["StudentT"],
             "transformed_distribution": ["TransformedDistribution"], "uniform": ["Uniform"],
             "utils": ["broadcast_all", "clamp_probs", "lazy_property", "logits_to_probs",
                       "probs_to_logits"]}
    here = globals()
    for name, names in paths.items():
        module = types.ModuleType(f"{__name__}.{name}", f"torch.distributions.{name}'s names")
        for attr in names:
            setattr(module, attr, here.get(attr) or getattr(distribution, attr))
        module.__all__ = list(names)
        sys.modules[module.__name__] = module
        here.setdefault(name, module)


_torch_module_paths()
