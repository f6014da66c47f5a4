"""Ready-made parametrizations, as torch.nn.utils.parametrizations: weight_norm,
spectral_norm and orthogonal (registered through nn.utils.parametrize, so the state dict
keys are torch's: `parametrizations.weight.original0` / `original1` for weight_norm).

>>> import flowgrad as flow
>>> m = weight_norm(flow.nn.Linear(3, 2))
>>> sorted(m.state_dict())
['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
>>> tuple(m.weight.shape)
(2, 3)
"""
from __future__ import annotations

import numpy as np

from ...autograd.grad_mode import no_grad
from ...ops.creation import eye, randn, tensor, zeros
from ...ops.normalization import normalize
from ...ops.shape import cat
from ...tensor import Tensor
from ..module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm", "orthogonal", "norm_except_dim"]


def norm_except_dim(v, pow=2, dim=0):
    """The 2-norm of v over every dimension but `dim` (kept as size 1); dim=-1: all."""
    if pow != 2:
        raise NotImplementedError("norm_except_dim: only pow=2 is supported")
    if dim == -1:
        return (v * v).sum().sqrt()
    ndim = max(v.dim(), 1)
    if not -ndim <= dim < ndim:  # as torch: a wrapped index would norm the wrong dimension
        raise IndexError(f"weight_norm: Dimension out of range (expected to be in range of "
                         f"[{-ndim}, {ndim - 1}], but got {dim}) for a weight of shape "
                         f"{tuple(v.shape)}; pass dim=None to take the norm over the whole "
                         f"tensor")
    dims = tuple(d for d in range(v.dim()) if d != dim % ndim)
    return (v * v).sum(dims, keepdim=True).sqrt() if dims else v.abs()


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / norm_except_dim(weight_v, 2, self.dim))

    def right_inverse(self, weight):
        return norm_except_dim(weight, 2, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Reparametrize `module.<name>` as g * v / ||v|| (norm over all dims but `dim`; g is
    `original0`, v is `original1`). See the module example."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys,
                                unexpected_keys, error_msgs):
        # a checkpoint of nn.utils.weight_norm (name_g, name_v) loads as original0, original1
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(weight_norm_compat_hook)
    return module


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.dim()
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight)
            h, w = mat.shape
            u, v = (randn(n, dtype=weight.dtype, device=weight.device) for n in (h, w))
            self.register_buffer("_u", normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=eps))
            self._power_method(mat, 15)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        with no_grad():
            for _ in range(n):
                self._u.copy_(normalize(mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(mat.t().mv(self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.dim() == 1:
            return normalize(weight, dim=0, eps=self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        return weight / (u * mat.mv(v)).sum()

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide `module.<name>` by its largest singular value, estimated by power iteration
    (one step per training forward; `_u`, `_v` are buffers of the parametrization).

    >>> import numpy as np
    >>> import flowgrad as flow
    >>> m = spectral_norm(flow.nn.Linear(4, 3))
    >>> s = np.linalg.svd(m.weight.detach().numpy(), compute_uv=False)[0]
    >>> bool(abs(s - 1.0) < 1e-3)
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


_MAPS = ("matrix_exp", "cayley", "householder")


def _linalg(name):
    from ... import linalg

    fn = getattr(linalg, name, None)
    if fn is None:
        raise NotImplementedError(f"orthogonal: flowgrad.linalg.{name} is not available; use "
                                  f"orthogonal_map='cayley'")
    return fn


def _make_orthogonal(A):
    """The Q of A = QR with diag(R) >= 0 (A tall), as torch's (a constant: no gradient)."""
    a = A.detach().numpy(force=True)  # a host copy for NumPy's QR
    q, r = np.linalg.qr(a)
    d = np.sign(np.diagonal(r, axis1=-2, axis2=-1))
    return tensor((q * np.where(d == 0, 1, d)[..., None, :]).astype(a.dtype), device=A.device)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, use_trivialization=True):
        super().__init__()
        self.shape = tuple(weight.shape)
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = cat([X, zeros(n, n - k, dtype=X.dtype, device=X.device).expand(
                    *X.shape[:-2], n, n - k)], -1)
            A = X - X.mH  # skew-Hermitian (skew-symmetric when real)
            if self.orthogonal_map == "matrix_exp":
                Q = _linalg("matrix_exp")(A)
            else:
                Id = eye(n, dtype=A.dtype, device=A.device)
                Q = _linalg("solve")(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(-1)
            tau = 2.0 / (1.0 + (A * A).sum(-2))
            Q = _linalg("householder_product")(A, tau)
            Q = Q * X.diagonal(0, -2, -1).int().unsqueeze(-2)
        if "base" in self._buffers and self.base is not None:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        if tuple(Q.shape) != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {tuple(Q.shape)}.")
        if "base" not in self._buffers:
            return self._householder_inverse(Q)
        Q_init = Q
        n, k = Q.shape[-2], Q.shape[-1]
        if n < k:
            Q, (n, k) = Q.mT, (k, n)
        if n != k:
            Q = cat([Q, randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype, device=Q.device)], -1)
        self.base = _make_orthogonal(Q)
        neg_id = zeros(*Q_init.shape, dtype=Q_init.dtype, device=Q_init.device)
        with no_grad():
            neg_id.diagonal(0, -2, -1).fill_(-1.0)
        return neg_id


    def _householder_inverse(self, Q):
        """The original whose householder map is Q (torch's geqrf-based right_inverse; the
        other maps cannot be assigned without the trivialization)."""
        if self.orthogonal_map != "householder":
            raise NotImplementedError("It is not possible to assign to the matrix exponential "
                                      "or the Cayley parametrizations when "
                                      "use_trivialization=False.")
        q = Q.detach().numpy(force=True)
        transpose = q.shape[-2] < q.shape[-1]
        if transpose:
            q = np.swapaxes(q, -1, -2)
        flat = q.reshape(-1, *q.shape[-2:])
        out = np.empty_like(flat)
        for i, m in enumerate(flat):
            h, tau = np.linalg.qr(m, mode="raw")  # LAPACK geqrf, transposed
            a = h.T.copy()
            d = np.sign(np.diagonal(a)).copy()
            d[tau == 0.0] *= -1
            np.fill_diagonal(a, d)
            out[i] = a
        out = out.reshape(q.shape).astype(q.dtype, copy=False)
        if transpose:
            out = np.swapaxes(out, -1, -2)
        return tensor(np.ascontiguousarray(out), device=Q.device)


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Constrain `module.<name>` (a matrix or batch) to be orthogonal: "matrix_exp" (square
    or complex default), "cayley" or "householder" (real non-square default)."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.dim() < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.dim()} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError(f'orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    if weight.is_complex() and orthogonal_map == "householder":  # (tau would be free too)
        raise ValueError("The householder parametrization does not support complex tensors. "
                         "Use orthogonal_map='matrix_exp' or 'cayley' for a unitary one")
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
