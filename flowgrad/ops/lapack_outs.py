"""torch's LAPACK-backed kernels copy one input into an `out` that already has their layout
(a batch of column-major matrices) and then work in place there; that copy refuses an `out`
sharing part of the input's memory. Where the `out` has another layout they work in a buffer
of their own and nothing is refused. `LAPACK_COPIES` and `LINALG_COPIES` map the torch and
torch.linalg names to a function of the call's (args, kwargs) giving the (out position,
argument position) pairs torch copies; `refuse_copy_overlap` is the check."""
from __future__ import annotations

from ..autograd.inplace import memory_of, overlap_error, overlap_status
from ..tensor import Tensor


def _pairs(*pairs):
    return lambda args, kwargs: pairs


def _left_only(*pairs):
    # (left=False solves the transposed system: torch copies a transposed B)
    return lambda args, kwargs: pairs if kwargs.get("left", True) else ()


def _qr(args, kwargs, mode_at=1):
    """Q takes A when its shape is A's (reduced with m >= n, complete with m == n), else R
    does (torch's linalg_qr_out: "We try to use Q. If it doesn't fit, we try to use R")."""
    if not args or not isinstance(args[0], Tensor) or args[0].ndim < 2:
        return ()
    mode = args[mode_at] if len(args) > mode_at else kwargs.get("mode", "reduced")
    if isinstance(mode, bool):  # torch.qr(A, some)
        mode = "reduced" if mode else "complete"
    m, n = args[0].shape[-2:]
    if mode != "r" and (m >= n if mode == "reduced" else m == n):
        return ((0, 0),)
    return ((1, 0),)


LAPACK_COPIES = {
    "qr": lambda args, kwargs: _qr(args, {"mode": kwargs.get("some", True)}),
    "geqrf": _pairs((0, 0)), "cholesky_inverse": _pairs((0, 0)),
    "triangular_solve": _pairs((0, 0), (1, 1)), "lu_solve": _pairs((0, 0)),
    "ormqr": _pairs((0, 2)),
}
LINALG_COPIES = {
    "qr": _qr, "lu_factor": _pairs((0, 0)), "lu_factor_ex": _pairs((0, 0)),
    "eigh": _pairs((1, 0)), "householder_product": _pairs((0, 0)),
    "solve": _left_only((0, 1)), "solve_ex": _left_only((0, 1)),
    "solve_triangular": _left_only((0, 1)), "lu_solve": _left_only((0, 2)),
    "ldl_solve": _pairs((0, 2)),
}
# (solve_triangular also works in place in an out whose matrices are row-major: it solves
# the transposed system there)
TRANSPOSED_TOO = frozenset(("solve_triangular",))


def _strides_ready(t, transposed):
    """Whether t's strides are exactly torch's batch of column-major matrices (transposed:
    of row-major ones) of its shape."""
    want, step = [], 1
    for n in reversed(t.shape):
        want.append(step)
        step *= max(n, 1)
    want.reverse()
    if not transposed:
        want[-2:] = [1, max(t.shape[-2], 1)]
    return tuple(t.stride()) == tuple(want)


def refuse_copy_overlap(name, pairs, args, outs, transposed_too=False):
    """torch's partial-overlap check of the copy of input `args[j]` into `outs[i]`, for each
    (i, j) of `pairs`, where that out already has the kernel's layout and the input's shape
    (else torch works in a buffer of its own)."""
    for i, j in pairs:
        if i >= len(outs) or j >= len(args):
            continue
        out, src = outs[i], args[j]
        if not (isinstance(out, Tensor) and isinstance(src, Tensor)) or out.ndim < 2 or \
                tuple(out.shape) != tuple(src.shape) or not (
                    _strides_ready(out, False) or transposed_too and _strides_ready(out, True)):
            continue
        if overlap_status(memory_of(out), memory_of(src)) == "partial":
            raise overlap_error(f"{name}()", src.shape, out.shape)
