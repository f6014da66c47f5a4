"""flowgrad.linalg: torch.linalg's functions. The ops live by family in flowgrad/ops/:
linalg_decomp.py (det, inv, solve, cholesky, qr, svd, eigh, norms), linalg_solve.py (LU,
triangular solves, the `_ex` forms, pinv, lstsq, matrix_rank, tensor forms),
linalg_func.py (matrix_exp, matrix_power, cond, multi_dot, vander, vecdot, cross,
householder_product), linalg_ldl.py (LDL^T) and linalg_eig.py (eig, eigvals: complex results).

Each decomposition is one op whose rule is torch's formula written in flowgrad ops, so second
derivatives (of svdvals, eigvalsh, det, lu, ...) come by construction; the other functions are
composed of differentiable ops. Inputs are batches of matrices (..., m, n); float32, float64,
complex64 and complex128 (complex gradients follow torch's conjugate Wirtinger convention).

>>> import flowgrad as flow
>>> a = flow.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
>>> flow.linalg.det(a).backward(); a.grad
tensor([[ 3., -1.],
        [-1.,  2.]])
"""
from __future__ import annotations

from .errors import LinAlgError
from .ops.linalg import matmul
from .ops.linalg_decomp import (
    cholesky,
    det,
    diagonal,
    eigh,
    eigvalsh,
    inv,
    logdet,
    matrix_norm,
    norm,
    qr,
    slogdet,
    solve,
    svd,
    svdvals,
    vector_norm,
)
from .ops.linalg_eig import eig, eigvals
from .ops.linalg_func import (
    cond,
    householder_product,
    matrix_exp,
    matrix_power,
    multi_dot,
    vander,
    vecdot,
)
from .ops.linalg_func import linalg_cross as cross
from .ops.linalg_ldl import ldl_factor, ldl_factor_ex, ldl_solve
from .ops.linalg_solve import (
    cholesky_ex,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matrix_rank,
    pinv,
    solve_ex,
    solve_triangular,
    tensorinv,
    tensorsolve,
)

__all__ = ["norm", "vector_norm", "matrix_norm", "det", "slogdet", "logdet", "inv", "solve",
           "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "matmul", "diagonal",
           "cond", "householder_product", "ldl_factor", "ldl_factor_ex", "ldl_solve",
           "matrix_exp", "matrix_power", "multi_dot", "vander", "vecdot", "cross",
           "cholesky_ex", "inv_ex", "lstsq", "lu", "lu_factor", "lu_factor_ex", "lu_solve",
           "matrix_rank", "pinv", "solve_ex", "solve_triangular", "tensorinv", "tensorsolve",
           "eig", "eigvals", "LinAlgError"]
