"""flowgrad.special: torch.special's functions. The kernels live in the op families
(`ops/special.py` erf, `ops/special_fns.py` gamma/Bessel/normal, `ops/special_poly.py`
polynomials); this module gives them torch.special's names. Gradients are torch's: none for
the Bessel and Airy functions and the polynomials, `other` only for zeta and gammainc.

>>> import flowgrad as flow
>>> x = flow.tensor([0.5, 2.0], requires_grad=True)
>>> flow.special.gammaln(x).sum().backward(); x.grad
tensor([-1.9635,  0.4228])
"""
from __future__ import annotations

from .ops import special_fns as _fns
from .ops.activation import log_softmax as _log_softmax
from .ops.activation import softmax as _softmax
from .ops.elementwise import _float_of
from .ops.elementwise import sigmoid as expit
from .ops.elementwise_more import xlogy
from .ops.math import erf, erfc, erfinv, exp2, expm1, log1p, logit, round
from .ops.reduce import logsumexp
from .ops.softmax import int_dim
from .ops.special_fns import digamma, i0, polygamma, sinc, xlog1py, zeta
from .ops.special_fns import igamma as gammainc
from .ops.special_fns import igammac as gammaincc
from .ops.special_fns import lgamma as gammaln
from .ops.special_fns import mvlgamma as _mvlgamma
from .ops.special_poly import polynomial as _polynomial

psi = digamma

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "exp2", "expm1", "log1p", "gammaln",
           "digamma", "psi", "polygamma", "multigammaln", "gammainc", "gammaincc", "i0", "xlogy",
           "xlog1py", "zeta", "sinc", "round", "softmax", "log_softmax", "logsumexp"]


def multigammaln(input, p):
    """The multivariate log-gamma function of dimension p (torch.mvlgamma).

    >>> import flowgrad as flow
    >>> flow.special.multigammaln(flow.tensor([3.0]), 3)
    tensor([2.6949])
    """
    return _mvlgamma(input, p)


def softmax(input, dim, *, dtype=None):
    """exp(x) / sum(exp(x)) along dim (F.softmax).

    >>> import flowgrad as flow
    >>> flow.special.softmax(flow.tensor([0.0, 0.0]), 0)
    tensor([0.5000, 0.5000])
    """
    return _softmax(input, int_dim(dim, "special_softmax"), dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """log(softmax(x)) along dim (F.log_softmax).

    >>> import flowgrad as flow
    >>> flow.special.log_softmax(flow.tensor([0.0, 0.0]), 0)
    tensor([-0.6931, -0.6931])
    """
    return _log_softmax(input, int_dim(dim, "special_log_softmax"), dtype=dtype)


def _unary(name, op, doc):
    def fn(input):
        return op(_float_of(input))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _poly(name, doc):
    def fn(input, n):
        return _polynomial(name, input, n)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


# name: (what it is, an example input, its printed result); the example is a doctest
_UNARY = {
    "erfcx": ("The scaled complementary error function exp(x^2) erfc(x).",
              "[0.0, 10.0]", "tensor([1.0000, 0.0561])"),
    "ndtr": ("The standard normal CDF.", "[0.0, 1.0]", "tensor([0.5000, 0.8413])"),
    "ndtri": ("The inverse of ndtr (the standard normal quantile).", "[0.5, 0.975]",
              "tensor([0.0000, 1.9600])"),
    "log_ndtr": ("log(ndtr(x)), accurate far in the left tail.", "[0.0, -20.0]",
                 "tensor([  -0.6931, -203.9172])"),
    "i0e": ("exp(-|x|) i0(x).", "[0.0, 1.0]", "tensor([1.0000, 0.4658])"),
    "i1": ("The modified Bessel function of the first kind, order 1.", "[0.0, 1.0]",
           "tensor([0.0000, 0.5652])"),
    "i1e": ("exp(-|x|) i1(x).", "[0.0, 1.0]", "tensor([0.0000, 0.2079])"),
    "entr": ("-x log(x) for x > 0, 0 at 0, -inf below.", "[0.5, 0.0]",
             "tensor([0.3466, 0.0000])"),
    "bessel_j0": ("The Bessel function of the first kind, order 0 (no gradient, as torch).",
                  "[0.0, 1.0]", "tensor([1.0000, 0.7652])"),
    "bessel_j1": ("The Bessel function of the first kind, order 1 (no gradient).",
                  "[0.0, 1.0]", "tensor([0.0000, 0.4401])"),
    "bessel_y0": ("The Bessel function of the second kind, order 0 (no gradient).",
                  "[1.0, 2.0]", "tensor([0.0883, 0.5104])"),
    "bessel_y1": ("The Bessel function of the second kind, order 1 (no gradient).",
                  "[1.0, 2.0]", "tensor([-0.7812, -0.1070])"),
    "modified_bessel_i0": ("The modified Bessel function I0 (no gradient; see i0).",
                           "[0.0, 1.0]", "tensor([1.0000, 1.2661])"),
    "modified_bessel_i1": ("The modified Bessel function I1 (no gradient; see i1).",
                           "[0.0, 1.0]", "tensor([0.0000, 0.5652])"),
    "modified_bessel_k0": ("The modified Bessel function of the second kind K0 (no gradient).",
                           "[1.0, 2.0]", "tensor([0.4210, 0.1139])"),
    "modified_bessel_k1": ("The modified Bessel function of the second kind K1 (no gradient).",
                           "[1.0, 2.0]", "tensor([0.6019, 0.1399])"),
    "scaled_modified_bessel_k0": ("exp(x) K0(x) (no gradient).", "[1.0, 2.0]",
                                  "tensor([1.1445, 0.8416])"),
    "scaled_modified_bessel_k1": ("exp(x) K1(x) (no gradient).", "[1.0, 2.0]",
                                  "tensor([1.6362, 1.0335])"),
    "spherical_bessel_j0": ("sin(x) / x, and 1 at 0 (no gradient).", "[0.0, 1.0]",
                            "tensor([1.0000, 0.8415])"),
    "airy_ai": ("The Airy function Ai (no gradient).", "[0.0, 1.0]",
                "tensor([0.3550, 0.1353])"),
}
_POLY_DOCS = {
    "chebyshev_polynomial_t": "Chebyshev polynomial of the first kind T_n(x).",
    "chebyshev_polynomial_u": "Chebyshev polynomial of the second kind U_n(x).",
    "chebyshev_polynomial_v": "Chebyshev polynomial of the third kind V_n(x).",
    "chebyshev_polynomial_w": "Chebyshev polynomial of the fourth kind W_n(x).",
    "shifted_chebyshev_polynomial_t": "T_n(2x - 1), the Chebyshev T shifted to [0, 1].",
    "shifted_chebyshev_polynomial_u": "U_n(2x - 1), the Chebyshev U shifted to [0, 1].",
    "shifted_chebyshev_polynomial_v": "V_n(2x - 1), the Chebyshev V shifted to [0, 1].",
    "shifted_chebyshev_polynomial_w": "W_n(2x - 1), the Chebyshev W shifted to [0, 1].",
    "hermite_polynomial_h": "The physicists' Hermite polynomial H_n(x).",
    "hermite_polynomial_he": "The probabilists' Hermite polynomial He_n(x).",
    "laguerre_polynomial_l": "The Laguerre polynomial L_n(x).",
    "legendre_polynomial_p": "The Legendre polynomial P_n(x).",
}
_OPS = {**_fns.SPECIAL_OPS, **_fns.NO_GRAD_OPS}
for _name, (_what, _arg, _result) in _UNARY.items():
    globals()[_name] = _unary(_name, _OPS[_name], (
        f"{_what}\n\n    >>> import flowgrad as flow\n"
        f"    >>> flow.special.{_name}(flow.tensor({_arg}))\n    {_result}\n    "))
for _name, _what in _POLY_DOCS.items():
    globals()[_name] = _poly(_name, (
        f"{_what} No gradient, as torch.\n\n    >>> import flowgrad as flow\n"
        f"    >>> flow.special.{_name}(flow.tensor([0.5]), 2).shape\n    flowgrad.Size([1])\n"
        f"    "))
__all__ += [*_UNARY, *_POLY_DOCS]  # erfcx, ndtr, ..., the Bessel functions, the polynomials
