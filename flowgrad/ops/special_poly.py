"""The orthogonal polynomials of torch.special: Chebyshev T, U, V, W (and their shifted forms
on [0, 1]), Hermite H and He, Laguerre L, Legendre P, evaluated at x for integer degrees n by
their three-term recurrences. As in torch they have no gradient, n < 0 gives 0, and n is
truncated to an integer.

>>> import flowgrad as flow
>>> flow.special.chebyshev_polynomial_t(flow.tensor([0.5, 2.0]), 3)
tensor([-1., 26.])
"""
from __future__ import annotations

from ..tensor import Tensor
from .elementwise import _promote_pair
from .registry import op


def _evaluate(xp, x, n, first, step):
    """p_n(x) for p_0 = 1, p_1 = first(x), p_{k+1} = step(x, p_{k-1}, p_k, k), with n an
    integer array broadcast against x (loops over degrees, never over elements)."""
    n = xp.trunc(n).astype(xp.int64) if n.dtype.kind == "f" else n.astype(xp.int64)
    x, n = xp.broadcast_arrays(x, n)
    prev, cur = xp.ones_like(x), first(x)
    out = xp.where(n == 0, prev, xp.zeros_like(x))
    out = xp.where(n == 1, cur, out)
    top = int(n.max()) if n.size else 0
    with xp.errstate(all="ignore"):
        for k in range(1, top):
            prev, cur = cur, step(x, prev, cur, k)
            out = xp.where(n == k + 1, cur, out)
    return out


def _chebyshev(first):
    return first, lambda x, p, q, k: 2 * x * q - p


_FAMILIES = {
    "chebyshev_polynomial_t": _chebyshev(lambda x: x),
    "chebyshev_polynomial_u": _chebyshev(lambda x: 2 * x),
    "chebyshev_polynomial_v": _chebyshev(lambda x: 2 * x - 1),
    "chebyshev_polynomial_w": _chebyshev(lambda x: 2 * x + 1),
    "hermite_polynomial_h": (lambda x: 2 * x, lambda x, p, q, k: 2 * x * q - 2 * k * p),
    "hermite_polynomial_he": (lambda x: x, lambda x, p, q, k: x * q - k * p),
    "laguerre_polynomial_l": (lambda x: 1 - x,
                              lambda x, p, q, k: ((2 * k + 1 - x) * q - k * p) / (k + 1)),
    "legendre_polynomial_p": (lambda x: x,
                              lambda x, p, q, k: ((2 * k + 1) * x * q - k * p) / (k + 1)),
}


def _register(name, first, step, shifted):
    def kernel(xp, x, n):
        # float32 in float64, rounded once, as torch's values: float32's recurrence overflowed
        # on the way to a finite p_n (H_42(5.68) = -5.6e37 was -inf)
        wide = x.astype(xp.float64) if x.dtype == xp.float32 else x
        return _evaluate(xp, 2 * wide - 1 if shifted else wide, n, first, step).astype(x.dtype)
    return op(name, differentiable=False, layout="elementwise")(kernel)


POLYNOMIAL_OPS = {name: _register(name, *rule, False) for name, rule in _FAMILIES.items()}
for _kind in "tuvw":
    POLYNOMIAL_OPS[f"shifted_chebyshev_polynomial_{_kind}"] = _register(
        f"shifted_chebyshev_polynomial_{_kind}", *_FAMILIES[f"chebyshev_polynomial_{_kind}"],
        True)


def polynomial(name, input, n):
    """torch.special.<name>(input, n): x and n broadcast; the result takes their promoted
    (floating) dtype."""
    if not isinstance(input, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"{name}: expected input or n to be a Tensor, got "
                        f"{type(input).__name__} and {type(n).__name__}")
    x, k = _promote_pair(input, n, name, floating=True)
    return POLYNOMIAL_OPS[name](x, k)
