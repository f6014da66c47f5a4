"""distributions.constraints against torch's: check() on matching and failing values,
is_discrete and event_dim, for the structured constraints (one_hot, multinomial,
corr_cholesky, square, symmetric, positive_semidefinite, cat, stack, a mixture's)."""
import numpy as np
import pytest
import torch

import flowgrad as flow

R = np.random.default_rng(0)
A = R.standard_normal((3, 3))
S = A @ A.T
L = np.linalg.cholesky(S)
VALUES = {"matrix": A, "spd": S, "cholesky": L,
          "corr_cholesky": L / np.linalg.norm(L, axis=-1, keepdims=True),
          "onehot": np.eye(4)[[0, 2]], "counts": np.array([[1.0, 2, 0], [3, 3, 3]]),
          "negdef": -np.eye(3), "rect": np.ones((2, 3)), "zeros": np.zeros((3, 3)),
          "batch_spd": np.stack([S, -S])}
# name -> constraint, built from a constraints module C
CONSTRAINTS = {
    "one_hot": lambda C: C.one_hot,
    "multinomial": lambda C: C.multinomial(5),
    "corr_cholesky": lambda C: C.corr_cholesky,
    "square": lambda C: C.square,
    "symmetric": lambda C: C.symmetric,
    "positive_semidefinite": lambda C: C.positive_semidefinite,
    "cat": lambda C: C.cat([C.positive, C.real, C.unit_interval], dim=-1),
    "cat_lengths": lambda C: C.cat([C.positive, C.real], dim=-1, lengths=[2, 1]),
    "stack_last": lambda C: C.stack([C.positive, C.real, C.unit_interval], dim=-1),
    "stack_first": lambda C: C.stack([C.positive, C.real, C.unit_interval], dim=0),
    "mixture_positive": lambda C: C.MixtureSameFamilyConstraint(C.positive),
    "mixture_simplex": lambda C: C.MixtureSameFamilyConstraint(C.simplex),
}


def _check(module, name, value):
    constraint = CONSTRAINTS[name](module.distributions.constraints)
    try:
        result = np.asarray(constraint.check(module.tensor(value)).tolist())
    except (ValueError, IndexError, RuntimeError) as error:
        result = type(error).__name__
    return (constraint.is_discrete, constraint.event_dim), result


@pytest.mark.parametrize("name", CONSTRAINTS)
@pytest.mark.parametrize("value", VALUES)
def test_check_matches_torch(name, value):
    (meta_t, want), (meta_f, got) = (_check(m, name, VALUES[value]) for m in (torch, flow))
    assert meta_f == meta_t
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:
        np.testing.assert_array_equal(got, want)


def test_cat_needs_one_length_per_constraint():
    C = flow.distributions.constraints
    with pytest.raises(ValueError, match="2 constraints but 1 lengths"):
        C.cat([C.real, C.real], lengths=[1])
