"""linalg.eig and linalg.eigvals: the eigendecomposition of general (non-symmetric) square
matrices, whose eigenvalues and eigenvectors are complex even for real input (complex64 for
float32, complex128 for float64), as torch's.

The kernel is the device's `xp.linalg.eig` (LAPACK geev, as torch's CPU kernel): each
eigenvector has norm 1 and its largest component real. The rule is torch's
linalg_eig_backward (Giles; Eq. 4.77 of arXiv:1701.00392 with the unit-norm correction),
written in flowgrad ops, so second derivatives come by construction. An eigenvector is only
defined up to a phase e^{i phi}: a loss that depends on that phase has no gradient, and the
rule raises as torch's does.

>>> import flowgrad as flow
>>> a = flow.tensor([[2.0, 0.0], [0.0, 3.0]], requires_grad=True)
>>> flow.linalg.eigvals(a)
tensor([2.+0.j, 3.+0.j], grad_fn=<LinalgEigBackward0>)
>>> flow.linalg.eigvals(a).real.sum().backward(); a.grad
tensor([[1., 0.],
        [0., 1.]])
"""
from __future__ import annotations

from collections import namedtuple

from .. import dtypes as _dt
from ..tensor import Tensor
from .complex import adjoint, conj, imag, real
from .linalg_decomp import _diag_embed, _eye, _is_zero, _solve, _square
from .registry import op

__all__ = ["eig", "eigvals"]

EIG = namedtuple("EIG", ["eigenvalues", "eigenvectors"])


@op("linalg_eig", n_out=2, save="outputs", complex=True, layout="column_major")
def _eig(xp, A):
    try:
        L, V = xp.linalg.eig(A)
    except xp.linalg.LinAlgError as e:  # (torch's RuntimeError here too: a plan runs it alone)
        raise _eig_error(e, "linalg_eig") from None
    # NumPy returns real arrays when every eigenvalue is real; torch's are always complex
    ct = xp.complex128 if A.dtype in (xp.float64, xp.complex128) else xp.complex64
    return L.astype(ct, copy=False), V.astype(ct, copy=False)


@_eig.grad
def linalg_eig_backward(ctx, gL, gV):
    L, V = ctx.outputs
    Vh = adjoint(V)
    if _is_zero(gV):  # eigvals: gA = V^-H diag(gL) V^H
        return _solve(Vh, gL.unsqueeze(-1) * Vh)
    VhgV = Vh @ gV
    d = VhgV.diagonal(0, -2, -1)
    _check_phase_invariance(d)
    # project onto the tangent space of matrices with unit-norm columns (V's normalisation)
    VhgV = VhgV - Vh @ (V * real(d).unsqueeze(-2))
    eye = _eye(L.shape[-1], L)
    Lc = conj(L)
    inner = VhgV / (Lc.unsqueeze(-2) - Lc.unsqueeze(-1) + eye)  # E_ij = conj(L_j - L_i)
    if not _is_zero(gL):
        inner = inner * (1 - eye) + _diag_embed(gL)
    return _solve(Vh, inner @ Vh)  # V^-H inner V^H


def _check_phase_invariance(d):
    """torch's check that the loss does not depend on the eigenvectors' phases:
    Im(diag(V^H gV)) = 0, with its lax tolerance. A graph-mode trace checks it once, while
    tracing (a guard, as prod's); vmap's batched tensors skip it, as torch skips it for
    tensor subclasses."""
    # written so that NaN fails it too, as torch's allclose
    if type(d) is Tensor and not bool((imag(d).abs() <= 1e-2).all()):
        raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are "
                           "specified up to multiplication by e^{i phi}. The specified loss "
                           "function depends on this quantity, so it is ill-defined.")


def _checked(A, name):
    _square(A, name)
    _dt.complex_in_use()  # the results are complex: arm the complex checks of other ops
    try:
        return _eig(A)
    except RuntimeError as e:
        if getattr(e, "detail", None) is None:
            raise
        raise _eig_error(e.detail, name) from None


def _eig_error(e, name):
    """torch's error for NumPy's LinAlgError `e` of geev, named `name`."""
    what = ("input tensor should not contain infs or NaNs (clean it with nan_to_num)"
            if "NaN" in str(e) else f"the eigenvalue algorithm did not converge ({e})")
    error = RuntimeError(f"{name}: {what}")
    error.detail = e
    return error


def eig(A):
    """Eigenvalues and eigenvectors of (batches of) square matrices: A V = V diag(L), as
    complex tensors (complex64 for float32 or complex64 input, complex128 for double).
    Each eigenvector has norm 1 and is defined up to a phase, so a loss must not depend on
    it (|V|, V V^H, the eigenvalues do not); the gradient is undefined where eigenvalues
    repeat, as torch's.

    >>> import flowgrad as flow
    >>> L, V = flow.linalg.eig(flow.tensor([[0.0, -1.0], [1.0, 0.0]]))
    >>> L
    tensor([0.+1.j, 0.-1.j])
    >>> V.abs()
    tensor([[0.7071, 0.7071],
            [0.7071, 0.7071]])
    """
    return EIG(*_checked(A, "linalg.eig"))


def eigvals(A):
    """The eigenvalues of (batches of) square matrices, complex, in LAPACK's order (that of
    eig); gradient V^-H diag(gL) V^H.

    >>> import flowgrad as flow
    >>> flow.linalg.eigvals(flow.tensor([[1.0, 2.0], [0.0, 3.0]]))
    tensor([1.+0.j, 3.+0.j])
    """
    return _checked(A, "linalg.eigvals")[0]
