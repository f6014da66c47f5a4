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
from .constraint_registry import ConstraintRegistry, biject_to, transform_to
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .exponential_family import ContinuousBernoulli, ExponentialFamily
from .kl import kl_divergence, register_kl
from .lkj_cholesky import LKJCholesky
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture import MixtureSameFamily
from .more import Cauchy, Chi2, Geometric, Gumbel, HalfNormal, StudentT
from .multinomial import Multinomial, NegativeBinomial
from .multivariate_normal import MultivariateNormal
from .relaxed import (
    ExpRelaxedCategorical,
    LogitRelaxedBernoulli,
    OneHotCategoricalStraightThrough,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
)
from .transformed import Independent, LogisticNormal, LogNormal, TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .univariate import (
    FisherSnedecor,
    GeneralizedPareto,
    HalfCauchy,
    InverseGamma,
    Kumaraswamy,
    Pareto,
    VonMises,
    Weibull,
)
from .wishart import Wishart

__all__ = [
    # distributions
    "Distribution", "ExponentialFamily", "Bernoulli", "Beta", "Binomial", "Categorical",
    "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet", "Exponential", "FisherSnedecor",
    "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal",
    "Independent", "InverseGamma", "Kumaraswamy", "Laplace", "LKJCholesky", "LogNormal",
    "LogisticNormal", "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial",
    "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "RelaxedBernoulli",
    "RelaxedOneHotCategorical", "StudentT",
    "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart",
    # transforms, constraints, KL
    "Transform", "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "TanhTransform",
    "identity_transform", "ConstraintRegistry", "biject_to", "transform_to", "constraints",
    "transforms", "kl", "kl_divergence", "register_kl",
]


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
             "normal": ["Normal"],
             "one_hot_categorical": ["OneHotCategorical", "OneHotCategoricalStraightThrough"],
             "poisson": ["Poisson"], "studentT": ["StudentT"],
             "transformed_distribution": ["TransformedDistribution"], "uniform": ["Uniform"],
             "continuous_bernoulli": ["ContinuousBernoulli"], "exp_family": ["ExponentialFamily"],
             "fishersnedecor": ["FisherSnedecor"], "generalized_pareto": ["GeneralizedPareto"],
             "half_cauchy": ["HalfCauchy"], "inverse_gamma": ["InverseGamma"],
             "kumaraswamy": ["Kumaraswamy"], "pareto": ["Pareto"], "von_mises": ["VonMises"],
             "weibull": ["Weibull"], "logistic_normal": ["LogisticNormal"],
             "negative_binomial": ["NegativeBinomial"],
             "mixture_same_family": ["MixtureSameFamily"],
             "relaxed_bernoulli": ["LogitRelaxedBernoulli", "RelaxedBernoulli"],
             "relaxed_categorical": ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"],
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
